use super::kind::{MAGICS, MountInfoLine, name_of_magic, parse_mountinfo, unescape_mountinfo};
use super::notes::Note;
use super::*;
use crate::testutil::{listing, tempdir};

fn codes(notes: &[Note]) -> Vec<&'static str> {
    notes.iter().map(|note| note.code).collect()
}

#[test]
fn the_temp_dir_carries_every_call_and_the_scratch_directory_goes_away() {
    let root = tempdir("probe");
    let probe = probe(&root).unwrap();
    use std::os::unix::fs::MetadataExt;
    assert_eq!(probe.dev, std::fs::metadata(&root).unwrap().dev());
    // The test machines' temp dir is local (ext4 here; tmpfs or another
    // local filesystem elsewhere): every call is carried.
    assert_eq!(probe.class, Class::Local, "{probe:?}");
    let mount = probe
        .mount
        .as_ref()
        .expect("the mount is found in mountinfo");
    assert!(
        ["ext4", "tmpfs", "xfs", "btrfs", "overlay"].contains(&mount.fs_type.as_str()),
        "{probe:?}"
    );
    if mount.fs_type == "ext4" {
        assert_eq!(probe.statfs_name, "ext2/ext3/ext4");
        assert_eq!(probe.magic, 0xEF53);
    }
    assert!(root.starts_with(&mount.mount_point), "{probe:?}");
    assert_eq!(probe.rename_noreplace, Tried::Works);
    assert_eq!(probe.rename_exchange, Tried::Works);
    assert_eq!(probe.flock, Tried::Works);
    assert_eq!(probe.inotify, Inotify::AllChanges);
    assert_eq!(probe.leftover, None);
    assert!(listing(&root).is_empty(), "{:?}", listing(&root));
    let notes = consequences(&probe);
    for code in [
        "publish_atomic",
        "reclaim_exchange",
        "flock_excludes",
        "wake_prompt",
    ] {
        assert!(codes(&notes).contains(&code), "{notes:?}");
    }
    assert!(!codes(&notes).contains(&"host_id_required"));
    std::fs::remove_dir_all(root).unwrap();
}

#[test]
fn dev_shm_is_tmpfs_and_carries_every_call() {
    let shm = Path::new("/dev/shm");
    let probe = probe(shm).unwrap_or_else(|error| {
        panic!("/dev/shm must be a writable tmpfs on the test machines: {error:?}")
    });
    assert_eq!(probe.magic, 0x0102_1994, "/dev/shm is not tmpfs: {probe:?}");
    assert_eq!(probe.statfs_name, "tmpfs");
    assert_eq!(probe.fs_name(), "tmpfs");
    assert_eq!(probe.class, Class::Local);
    assert_eq!(probe.rename_noreplace, Tried::Works);
    assert_eq!(probe.rename_exchange, Tried::Works);
    assert_eq!(probe.flock, Tried::Works);
    assert_eq!(probe.inotify, Inotify::AllChanges);
    assert_eq!(probe.leftover, None);
    assert!(codes(&consequences(&probe)).contains(&"memory_only"));
    let ours = format!("{SCRATCH_PREFIX}.{}.", std::process::id());
    assert!(
        !listing(shm).iter().any(|name| name.starts_with(&ours)),
        "the scratch directory is removed"
    );
}

#[test]
fn a_missing_directory_and_a_file_are_refused_with_their_codes() {
    let root = tempdir("probe-errors");
    let missing = probe(&root.join("nope")).unwrap_err();
    assert_eq!(missing.code(), "not_found");
    std::fs::write(root.join("file"), b"x").unwrap();
    let file = probe(&root.join("file")).unwrap_err();
    assert_eq!(file.code(), "not_a_directory");
    assert_eq!(file.errno(), Errno::NOTDIR);
    let below_file = probe(&root.join("file/below")).unwrap_err();
    assert_eq!(below_file.code(), "not_a_directory");
    assert_eq!(listing(&root), ["file"]);
    std::fs::remove_dir_all(root).unwrap();
}

#[test]
fn a_symlink_to_a_directory_is_followed() {
    let root = tempdir("probe-link");
    std::fs::create_dir(root.join("real")).unwrap();
    std::os::unix::fs::symlink(root.join("real"), root.join("alias")).unwrap();
    let probe = probe(&root.join("alias")).unwrap();
    assert_eq!(probe.rename_noreplace, Tried::Works);
    assert!(listing(&root.join("real")).is_empty());
    std::fs::remove_dir_all(root).unwrap();
}

#[test]
fn classes_by_magic_and_mounted_type() {
    assert_eq!(classify(0xEF53, Some("ext4")), Class::Local);
    assert_eq!(classify(0x0102_1994, None), Class::Local);
    assert_eq!(classify(0x6969, Some("nfs4")), Class::Network);
    assert_eq!(classify(0xFF53_4D42, None), Class::Network);
    assert_eq!(classify(0x0102_1997, Some("9p")), Class::Network);
    assert_eq!(classify(0x6573_5546, Some("fuse.sshfs")), Class::Network);
    assert_eq!(classify(0x6573_5546, Some("fuse.rclone")), Class::Network);
    assert_eq!(classify(0x6573_5546, Some("fuseblk")), Class::Local);
    assert_eq!(classify(0x6573_5546, Some("fuse.bindfs")), Class::Fuse);
    assert_eq!(classify(0x6573_5546, None), Class::Fuse);
    assert_eq!(classify(0x6573_5546, Some("virtiofs")), Class::Network);
    assert_eq!(classify(0x1234_5678, Some("nfs")), Class::Network);
    assert_eq!(classify(0x1234_5678, Some("somefs")), Class::Unknown);
    assert_eq!(name_of_magic(0x794C_7630).0, "overlayfs");
    assert!(Class::Fuse.may_be_shared() && !Class::Local.may_be_shared());
}

#[test]
fn mountinfo_lines_are_parsed_and_unescaped() {
    let line = "36 35 98:0 /mnt1 /mnt\\040two rw,noatime master:1 shared:7 - fuse.sshfs me@host:/srv rw,user_id=0";
    let parsed = parse_mountinfo(line).unwrap();
    assert_eq!(
        parsed,
        MountInfoLine {
            id: 36,
            major_minor: "98:0",
            mount_point: "/mnt\\040two",
            fs_type: "fuse.sshfs",
            source: "me@host:/srv",
        }
    );
    assert_eq!(unescape_mountinfo(parsed.mount_point), "/mnt two");
    assert_eq!(unescape_mountinfo("a\\134b\\011"), "a\\b\t");
    assert_eq!(unescape_mountinfo("trailing\\04"), "trailing\\04");
    let no_optional = "22 1 0:21 / /dev/shm rw - tmpfs tmpfs rw,size=10k";
    assert_eq!(parse_mountinfo(no_optional).unwrap().fs_type, "tmpfs");
    assert_eq!(parse_mountinfo("garbage"), None);
}

/// A probe as a network mount refusing both flags would report it.
fn refusing_network_probe(dev: u64) -> Probe {
    Probe {
        dev,
        magic: 0x6573_5546,
        statfs_name: "fuse",
        mount: Some(Mount {
            fs_type: "fuse.sshfs".into(),
            source: "me@host:/srv".into(),
            mount_point: "/mnt/share".into(),
        }),
        class: Class::Network,
        rename_noreplace: Tried::Refused(Errno::INVAL),
        rename_exchange: Tried::Refused(Errno::INVAL),
        flock: Tried::Works,
        inotify: Inotify::ThisHostOnly,
        leftover: None,
    }
}

#[test]
fn what_follows_for_a_network_mount_that_refuses_the_flags() {
    let notes = consequences(&refusing_network_probe(1));
    assert_eq!(
        codes(&notes),
        [
            "publish_fallback",
            "reclaim_in_place",
            "flock_this_host",
            "wake_by_timer",
            "host_id_required",
            "verdict_from_server",
        ]
    );
    assert!(notes[0].text.contains("(EINVAL)"), "{notes:?}");
    assert!(notes[3].text.contains("retryDelayMs"), "{notes:?}");
    assert!(notes[4].text.contains("ownerHostId"), "{notes:?}");
}

#[test]
fn a_probe_s_refusals_are_remembered_and_its_successes_forget_them() {
    let caps = caps::Caps::new();
    let refusing = refusing_network_probe(42);
    refusing.teach(&caps);
    assert!(!caps.should_try(42, caps::Flag::NoReplace));
    assert!(!caps.should_try(42, caps::Flag::Exchange));
    let failed = Probe {
        rename_noreplace: Tried::Failed(Errno::IO),
        ..refusing.clone()
    };
    failed.teach(&caps);
    assert!(
        !caps.should_try(42, caps::Flag::NoReplace),
        "a failed try says nothing"
    );
    let working = Probe {
        rename_noreplace: Tried::Works,
        rename_exchange: Tried::Works,
        ..refusing
    };
    working.teach(&caps);
    assert!(caps.should_try(42, caps::Flag::NoReplace));
    assert!(caps.should_try(42, caps::Flag::Exchange));
}

#[test]
fn each_magic_number_has_one_row() {
    let mut seen = std::collections::HashSet::new();
    for (magic, name, _) in MAGICS {
        assert!(seen.insert(magic), "{magic:#x} ({name}) is listed twice");
    }
    // Network filesystems the table once named wrongly or missed.
    assert_eq!(name_of_magic(0x2003_0528), ("orangefs", Class::Network));
    assert_eq!(name_of_magic(0x1983_0326).1, Class::Network);
    assert_eq!(name_of_magic(0xBACB_ACBC).1, Class::Network);
    assert_eq!(name_of_magic(0x482B), ("hfsplus", Class::Local));
}
