//! What kind of filesystem a directory is on: the `statfs` magic number,
//! the mount as `/proc/self/mountinfo` describes it (which names a FUSE
//! mount's subtype, `fuse.sshfs`), and the class that follows (who else
//! may write there).

use crate::sys::os::fd::BorrowedFd;
use crate::sys::os::fs;
#[cfg(target_os = "linux")]
use crate::sys::os::fs::AtFlags;
use crate::sys::os::io::Errno;

use super::{Class, Mount};
use crate::fs::fsx::{OVERLAYFS_MAGIC, statfs_magic};

/// `statfs` type, its name, and whether the mount is read-only.
pub(super) fn statfs_of(dir: BorrowedFd<'_>) -> Result<(u64, &'static str, bool), Errno> {
    let statvfs = fs::fstatvfs(dir)?;
    let read_only = statvfs.f_flag.contains(fs::StatVfsMountFlags::RDONLY);
    let magic = statfs_magic(dir)?;
    Ok((magic, name_of_magic(magic).0, read_only))
}

/// `statfs(2)` magic numbers (linux/magic.h and the filesystems' own
/// headers): name and class.
pub(super) const MAGICS: &[(u64, &str, Class)] = &[
    (0xEF53, "ext2/ext3/ext4", Class::Local),
    (0x5846_5342, "xfs", Class::Local),
    (0x9123_683E, "btrfs", Class::Local),
    (0x0102_1994, "tmpfs", Class::Local),
    (0x8584_58F6, "ramfs", Class::Local),
    (0x9584_58F6, "hugetlbfs", Class::Local),
    // The kernel's own filesystems: local, and they take no lock (a
    // `mkdir` there fails: `ENOENT` in procfs, `EPERM` in sysfs).
    (0x9FA0, "proc", Class::Local),
    (0x6265_6572, "sysfs", Class::Local),
    (0x6367_7270, "cgroup2", Class::Local),
    (0x0027_E0EB, "cgroup", Class::Local),
    (0x6462_6720, "debugfs", Class::Local),
    (0x7472_6163, "tracefs", Class::Local),
    (0x1CD1, "devpts", Class::Local),
    (OVERLAYFS_MAGIC, "overlayfs", Class::Local),
    (0xF2F5_2010, "f2fs", Class::Local),
    (0x2FC1_2FC1, "zfs", Class::Local),
    (0xCA45_1A4E, "bcachefs", Class::Local),
    (0x3153_464A, "jfs", Class::Local),
    (0x5265_4973, "reiserfs", Class::Local),
    (0x3434, "nilfs2", Class::Local),
    (0x4D44, "vfat/msdos", Class::Local),
    (0x2011_BAB0, "exfat", Class::Local),
    (0x5346_544E, "ntfs", Class::Local),
    (0x7366_746E, "ntfs3", Class::Local),
    (0xF15F, "ecryptfs", Class::Local),
    (0x7371_7368, "squashfs", Class::Local),
    (0xE0F5_E1E2, "erofs", Class::Local),
    (0x482B, "hfsplus", Class::Local),
    (0x4244, "hfs", Class::Local),
    (0x1501_3346, "udf", Class::Local),
    (0x9660, "iso9660", Class::Local),
    (0x6175_6673, "aufs", Class::Local),
    (0x72B6, "jffs2", Class::Local),
    (0x2405_1905, "ubifs", Class::Local),
    (0x28CD_3D45, "cramfs", Class::Local),
    (0x7275, "romfs", Class::Local),
    (0x137F, "minix", Class::Local),
    (0x138F, "minix", Class::Local),
    (0x2468, "minix2", Class::Local),
    (0x2478, "minix2", Class::Local),
    (0x4D5A, "minix3", Class::Local),
    (0x6969, "nfs", Class::Network),
    (0xFF53_4D42, "cifs", Class::Network),
    (0xFE53_4D42, "smb2", Class::Network),
    (0x517B, "smb", Class::Network),
    (0x0102_1997, "9p", Class::Network),
    (0x00C3_6400, "ceph", Class::Network),
    (0x6B41_4653, "afs", Class::Network),
    (0x5346_414F, "openafs", Class::Network),
    (0x0116_1970, "gfs2", Class::Network),
    (0x7461_636F, "ocfs2", Class::Network),
    (0x0BD0_0BD0, "lustre", Class::Network),
    (0x4750_4653, "gpfs", Class::Network),
    (0x786F_4256, "vboxsf", Class::Network),
    (0x7375_7245, "coda", Class::Network),
    (0x564C, "ncp", Class::Network),
    (0x2003_0528, "orangefs", Class::Network),
    (0x1983_0326, "beegfs/fhgfs", Class::Network),
    (0x7C7C_6673, "prl_fs", Class::Network),
    (0xBACB_ACBC, "vmhgfs", Class::Network),
    (0xAAD7_AAEA, "panfs", Class::Network),
    (0xBEEF_DEAD, "snfs", Class::Network),
    (0x6163_6673, "acfs", Class::Network),
    (0x0131_11A8, "ibrix", Class::Network),
    (0x6573_5546, "fuse", Class::Fuse),
];

/// The name and class `statfs` alone gives.
pub(super) fn name_of_magic(magic: u64) -> (&'static str, Class) {
    MAGICS
        .iter()
        .find(|(known, _, _)| *known == magic)
        .map_or(("unknown", Class::Unknown), |(_, name, class)| {
            (*name, *class)
        })
}

/// FUSE daemons (the subtype after `fuse.`) that serve another machine's
/// files.
const NETWORK_FUSE: &[&str] = &[
    "sshfs",
    "glusterfs",
    "s3fs",
    "rclone",
    "gcsfuse",
    "davfs",
    "curlftpfs",
    "goofys",
    "mountpoint-s3",
    "juicefs",
    "ceph-fuse",
    "lizardfs",
    "moosefs",
    "mfs",
    "cvmfs2",
    "blobfuse",
    "blobfuse2",
    "seaweedfs",
];

/// The class of a filesystem by its `statfs` magic, refined by the type it
/// was mounted as (`fuseblk` is a FUSE driver of a local block device,
/// `fuse.sshfs` a remote one, `virtiofs` a share of the VM's host).
pub fn classify(magic: u64, mounted_as: Option<&str>) -> Class {
    let (_, by_magic) = name_of_magic(magic);
    let Some(fs_type) = mounted_as else {
        return by_magic;
    };
    if fs_type == "virtiofs" {
        return Class::Network;
    }
    if by_magic == Class::Fuse || fs_type.starts_with("fuse") {
        if fs_type == "fuseblk" {
            return Class::Local;
        }
        let subtype = fs_type
            .strip_prefix("fuse.")
            .or_else(|| fs_type.strip_prefix("fuseblk."));
        if subtype.is_some_and(|s| NETWORK_FUSE.contains(&s)) {
            return Class::Network;
        }
        return Class::Fuse;
    }
    if by_magic == Class::Unknown
        && ["nfs", "nfs4", "cifs", "smb3", "9p", "ceph", "afs"].contains(&fs_type)
    {
        return Class::Network;
    }
    by_magic
}

/// The mount holding `dir`: by mount id (`statx`, Linux 5.8+), else by
/// device number (the last such entry is the topmost mount).
#[cfg(target_os = "linux")]
pub(super) fn mount_of(dir: BorrowedFd<'_>, dev: u64) -> Option<Mount> {
    let text =
        crate::sys::platform::linux::procfs::read_proc_file("/proc/self/mountinfo", 8 << 20)?;
    let text = String::from_utf8_lossy(&text);
    let mnt_id = fs::statx(dir, "", AtFlags::EMPTY_PATH, fs::StatxFlags::MNT_ID)
        .ok()
        .filter(|statx| statx.stx_mask & fs::StatxFlags::MNT_ID.bits() != 0)
        .map(|statx| statx.stx_mnt_id);
    let major_minor = format!(
        "{}:{}",
        crate::sys::os::fs::major(dev),
        crate::sys::os::fs::minor(dev)
    );
    let entries: Vec<MountInfoLine<'_>> = text.lines().filter_map(parse_mountinfo).collect();
    let by_id = mnt_id.and_then(|id| entries.iter().find(|entry| entry.id == id));
    let found = by_id.or_else(|| {
        entries
            .iter()
            .rev()
            .find(|entry| entry.major_minor == major_minor)
    })?;
    Some(Mount {
        fs_type: found.fs_type.to_string(),
        source: unescape_mountinfo(found.source),
        mount_point: unescape_mountinfo(found.mount_point),
    })
}

#[cfg(not(target_os = "linux"))]
pub(super) fn mount_of(_dir: BorrowedFd<'_>, _dev: u64) -> Option<Mount> {
    None
}

/// The fields of one `/proc/self/mountinfo` line that we use.
#[cfg(target_os = "linux")]
#[derive(Debug, PartialEq, Eq)]
pub(super) struct MountInfoLine<'a> {
    pub(super) id: u64,
    pub(super) major_minor: &'a str,
    pub(super) mount_point: &'a str,
    pub(super) fs_type: &'a str,
    pub(super) source: &'a str,
}

/// `36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue`:
/// id, parent, major:minor, root, mount point, options, optional fields up
/// to `-`, then type, source, super options (proc(5)).
#[cfg(target_os = "linux")]
pub(super) fn parse_mountinfo(line: &str) -> Option<MountInfoLine<'_>> {
    let mut fields = line.split(' ');
    let id = fields.next()?.parse().ok()?;
    let _parent = fields.next()?;
    let major_minor = fields.next()?;
    let _root = fields.next()?;
    let mount_point = fields.next()?;
    let _options = fields.next()?;
    for field in fields.by_ref() {
        if field == "-" {
            break;
        }
    }
    let fs_type = fields.next()?;
    let source = fields.next()?;
    Some(MountInfoLine {
        id,
        major_minor,
        mount_point,
        fs_type,
        source,
    })
}

/// mountinfo writes space, tab, newline and backslash as `\ooo` octal.
#[cfg(target_os = "linux")]
pub(super) fn unescape_mountinfo(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && i + 3 < bytes.len()
            && bytes[i + 1..i + 4]
                .iter()
                .all(|b| (b'0'..=b'7').contains(b))
        {
            let value =
                (bytes[i + 1] - b'0') * 64 + (bytes[i + 2] - b'0') * 8 + (bytes[i + 3] - b'0');
            out.push(value);
            i += 4;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}
