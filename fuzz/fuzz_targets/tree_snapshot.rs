//! Fuzzes the bounded no-follow tree snapshot (and the exact removal that
//! trusts it): the fuzz bytes are a small program that builds a tree in a
//! private temp dir (under /dev/shm when it exists) — directories, files
//! with contents, symlinks (dangling, to a dir, to `..`), FIFOs, hard links,
//! names with non-UTF-8 bytes — which is then snapshotted.
//!
//! Checks: `snapshot_tree` never panics or blocks (a FIFO is never opened
//! for reading); a snapshot that succeeds is well-formed (root first with an
//! empty path, unique paths, pre-order, a SHA-256 for each file that matches
//! its bytes) and equals a second snapshot of the unchanged tree; and the
//! exact removal of an unchanged tree removes it completely.
#![no_main]
#![allow(dead_code)]

use std::collections::HashSet;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use libfuzzer_sys::fuzz_target;

// The main crate's layers, as much of them as the snapshot uses, at the
// paths the sources name each other by (`crate::fs::…`, `crate::sys::…`).
#[path = "../../src/fs"]
mod fs {
    pub mod fsx;
    pub mod rename;
    pub mod tree;
}
#[path = "../../src/sys"]
mod sys {
    pub mod errno;
    pub mod faults;
}

use fs::tree;

const NAMES: [&[u8]; 8] = [
    b"info",
    b"a",
    b"b",
    b"sub",
    b"x.removing",
    b"\xff\xfe",
    b"long-name",
    b".hidden",
];

fn workdir() -> PathBuf {
    let base = if Path::new("/dev/shm").is_dir() {
        "/dev/shm"
    } else {
        "/tmp"
    };
    PathBuf::from(format!("{base}/exactlock-fuzz-{}", std::process::id()))
}

/// Builds the tree the bytes describe below `root` (which exists, empty).
/// Each op is 3 bytes: kind, parent directory index, name index (+ content
/// length for files). Unsupported or failing ops are skipped.
fn build(root: &Path, bytes: &[u8]) {
    let mut dirs: Vec<PathBuf> = vec![root.to_path_buf()];
    let mut files: Vec<PathBuf> = Vec::new();
    let mut ops = bytes.chunks_exact(3);
    for op in ops.by_ref().take(48) {
        let parent = dirs[op[1] as usize % dirs.len()].clone();
        let name = OsStr::from_bytes(NAMES[(op[2] & 7) as usize]);
        let path = parent.join(name);
        match op[0] % 8 {
            0 | 1 => {
                if std::fs::create_dir(&path).is_ok() {
                    dirs.push(path);
                }
            }
            2 | 3 => {
                let len = (op[2] >> 3) as usize * 37;
                let content: Vec<u8> = (0..len).map(|i| (i as u8).wrapping_mul(op[0])).collect();
                // create_new: never open an existing FIFO (that would block).
                let created = std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .open(&path)
                    .and_then(|mut file| std::io::Write::write_all(&mut file, &content));
                if created.is_ok() {
                    files.push(path);
                }
            }
            4 => {
                let target = match op[2] >> 3 & 3 {
                    0 => PathBuf::from("does-not-exist"),
                    1 => PathBuf::from(".."),
                    2 => root.to_path_buf(),
                    _ => PathBuf::from("/"),
                };
                let _ = std::os::unix::fs::symlink(target, &path);
            }
            5 => {
                let _ = rustix::fs::mknodat(
                    rustix::fs::CWD,
                    &path,
                    rustix::fs::FileType::Fifo,
                    rustix::fs::Mode::from_raw_mode(0o600),
                    0,
                );
            }
            6 => {
                if let Some(source) = files.get(op[2] as usize % files.len().max(1)) {
                    let _ = std::fs::hard_link(source, &path);
                }
            }
            _ => {}
        }
    }
}

fn check_snapshot(root: &Path, snapshot: &tree::TreeSnapshot) {
    let entries = &snapshot.entries;
    assert!(!entries.is_empty() && entries.len() <= tree::MAX_ENTRIES);
    assert_eq!(entries[0].relative_path, "");
    assert_eq!(entries[0].kind, tree::EntryKind::Directory);
    assert_eq!(
        (entries[0].dev, entries[0].ino),
        (snapshot.root_dev, snapshot.root_ino)
    );
    let mut seen = HashSet::new();
    for (i, entry) in entries.iter().enumerate() {
        assert!(
            seen.insert(entry.relative_path.clone()),
            "duplicate {:?}",
            entry.relative_path
        );
        if i > 0 {
            // Pre-order: every entry's parent came before it.
            let parent = entry.relative_path.rsplit_once('/').map_or("", |(p, _)| p);
            assert!(
                seen.contains(parent),
                "{:?} before its parent",
                entry.relative_path
            );
        }
        match entry.kind {
            tree::EntryKind::File => {
                let bytes =
                    std::fs::read(root.join(&entry.relative_path)).expect("snapshotted file");
                assert_eq!(
                    entry.sha256.as_deref(),
                    Some(tree::sha256_hex(&bytes).as_str())
                );
                assert_eq!(entry.size, bytes.len() as u64);
            }
            tree::EntryKind::Directory => assert!(entry.sha256.is_none()),
        }
    }
}

fuzz_target!(|bytes: &[u8]| {
    let work = workdir();
    let root = work.join("case");
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&root).expect("work dir");
    build(&root, bytes);
    match tree::snapshot_tree(&root) {
        Ok(snapshot) => {
            check_snapshot(&root, &snapshot);
            let again = tree::snapshot_tree(&root).expect("unchanged tree snapshots again");
            assert!(snapshot.same_tree_as(&again));
            let outcome = tree::exact_remove_tree(&root, &snapshot);
            assert!(
                outcome.ok,
                "exact removal of an unchanged tree: {outcome:?}"
            );
            assert!(
                std::fs::symlink_metadata(&root).is_err(),
                "tree still there"
            );
            assert!(std::fs::symlink_metadata(work.join("case.removing")).is_err());
        }
        Err(error) => {
            // A refusal never changes the tree: it is still there.
            let _ = error.code();
            assert!(root.is_dir());
        }
    }
    let _ = std::fs::remove_dir_all(&work);
});
