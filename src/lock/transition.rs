//! Upstream 0.18's removal transitions: the original module's fixed-name
//! quarantine `F.lock.removing`, and its remover's record
//! `F.lock.removing.owner`.
//!
//! A 0.18.x release (POSIX) first publishes `F.lock.removing.owner`, by a
//! no-replace rename, mode 0600: `{"owner":<an owner record of the
//! remover>,"rootDev":"<dev>","rootIno":"<ino>"}`, the device and inode of
//! the lock directory it is about to remove. Then it renames `F.lock` to
//! `F.lock.removing`, empties its files, removes it, and removes the record
//! last. A remover killed on the way leaves both, or the record alone.
//!
//! exactlock removes them on the proof it asks of all debris
//! ([`crate::lock::debris`]): the remover the record names is proven dead
//! (alive, unknown or of another host: kept, as upstream's own acquirers
//! keep it); the directory is the one the record names; each is removed
//! exactly as judged — the tree as snapshotted, and the record by detaching
//! it to a private name and checking it there (the same file, the same
//! bytes) before its unlink. A record that does not validate makes the
//! transition "active" for good, as upstream says: both are kept.

use std::ffi::{OsStr, OsString};

use crate::sys::os::fd::BorrowedFd;
use crate::sys::os::fs::AtFlags;
use crate::sys::os::io::Errno;
use serde_json::Value;

use crate::fs::fsx::{self, ReadRefusal};
use crate::fs::rename;
use crate::fs::tree;
use crate::lock::record::OwnerRecord;

/// The record's name beside its quarantine: `F.lock.removing.owner`.
pub const RECORD_SUFFIX: &str = ".owner";

/// Larger than any record upstream writes (an owner record and two
/// numbers): a larger file is not one.
const MAX_RECORD_BYTES: usize = 16 << 10;

/// A remover's record, as read.
#[derive(Debug)]
pub struct RemoverRecord {
    /// The remover, as its own owner record names it.
    pub owner: OwnerRecord,
    /// The device and inode of the directory it removes.
    pub root: (u64, u64),
    /// The file as read: its inode and bytes, which its removal must find.
    file: (u64, u64),
    bytes: Vec<u8>,
}

/// What stands at a record's name.
#[derive(Debug)]
pub enum Found {
    Absent,
    /// Something that is not a valid record (not a regular file, linked
    /// twice, not the JSON upstream writes): never removed, and its
    /// transition never either.
    Invalid,
    Valid(Box<RemoverRecord>),
}

/// The record's name for the quarantine `name` (`F.lock.removing`).
pub fn record_name(quarantine: &OsStr) -> OsString {
    let mut name = quarantine.to_os_string();
    name.push(RECORD_SUFFIX);
    name
}

/// Reads the record `name` in `parent`, no-follow and bounded.
pub fn read(parent: BorrowedFd<'_>, name: &OsStr) -> Found {
    match fsx::read_regular_bounded(parent, name, MAX_RECORD_BYTES) {
        Ok(read) if fsx::nlink_of(&read.stat) == 1 => match parse(&read.bytes) {
            Some((owner, root)) => Found::Valid(Box::new(RemoverRecord {
                owner,
                root,
                file: (fsx::dev_of(&read.stat), fsx::ino_of(&read.stat)),
                bytes: read.bytes,
            })),
            None => Found::Invalid,
        },
        Err(ReadRefusal::Os(Errno::NOENT)) => Found::Absent,
        _ => Found::Invalid,
    }
}

/// The remover and the directory it removes, as upstream validates them:
/// an `owner` that is a valid owner record, `rootDev` and `rootIno`
/// decimal strings; other keys ignored.
fn parse(bytes: &[u8]) -> Option<(OwnerRecord, (u64, u64))> {
    let Value::Object(record) = serde_json::from_slice::<Value>(bytes).ok()? else {
        return None;
    };
    let owner = OwnerRecord::parse(&serde_json::to_vec(record.get("owner")?).ok()?)?;
    let number = |key: &str| -> Option<u64> {
        let text = record.get(key)?.as_str()?;
        text.bytes()
            .all(|b| b.is_ascii_digit())
            .then(|| text.parse().ok())
            .flatten()
    };
    Some((owner, (number("rootDev")?, number("rootIno")?)))
}

/// Removes the record `name` in `parent` if it is still exactly `seen`:
/// detached first to a private name (`<name>.removing.<pid>.<uuid>`, which
/// nobody else makes), where it must be the same file with the same bytes;
/// else it is given its name back. The outcome in [`crate::lock::debris`]'s
/// words.
pub fn remove_record(parent: BorrowedFd<'_>, name: &OsStr, seen: &RemoverRecord) -> &'static str {
    let detached = tree::quarantine_name(name);
    let moved = rename::rename_no_replace_at(parent, name, parent, &detached);
    if !moved.ok {
        return if moved.refused_with(rename::Refusal::NotFound) {
            "enoent_already_gone"
        } else {
            "cleanup_failed"
        };
    }
    let same = fsx::read_regular_bounded(parent, &detached, MAX_RECORD_BYTES).is_ok_and(|now| {
        (fsx::dev_of(&now.stat), fsx::ino_of(&now.stat)) == seen.file && now.bytes == seen.bytes
    });
    if !same {
        // Not what was judged: put back where it was, never removed.
        let _ = rename::rename_no_replace_at(parent, &detached, parent, name);
        return "owner_changed";
    }
    match crate::sys::os::fs::unlinkat(parent, &detached, AtFlags::empty()) {
        Ok(()) | Err(Errno::NOENT) => "removed",
        Err(_) => "cleanup_failed",
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use crate::sys::os::fd::AsFd;
    use crate::testutil::{listing, tempdir};

    const OWNER: &str = r#"{"pid":12345,"start_time":"Wed Dec  2 08:36:20 2026","start_time_format":"utc-v1","timestamp":1,"owner_token":"0f8fad5b-d9cb-469f-a165-70867728950e"}"#;

    fn record_json(owner: &str, dev: &str, ino: &str) -> String {
        format!(r#"{{"owner":{owner},"rootDev":{dev},"rootIno":{ino}}}"#)
    }

    #[test]
    fn reads_upstreams_record_and_refuses_anything_else() {
        let dir = tempdir("transition-read");
        let parent = fsx::open_dir_nofollow(&dir).unwrap();
        let name = OsStr::new("f.lock.removing.owner");
        assert!(matches!(read(parent.as_fd(), name), Found::Absent));
        std::fs::write(dir.join(name), record_json(OWNER, r#""2049""#, r#""77""#)).unwrap();
        let Found::Valid(record) = read(parent.as_fd(), name) else {
            panic!("upstream's record reads");
        };
        assert_eq!((record.owner.pid, record.root), (12345.0, (2049, 77)));
        for bad in [
            record_json(OWNER, "2049", r#""77""#),
            record_json(OWNER, r#""x""#, r#""77""#),
            record_json(r#"{"pid":0,"timestamp":1}"#, r#""1""#, r#""2""#),
            "{".to_string(),
        ] {
            std::fs::write(dir.join(name), bad.as_bytes()).unwrap();
            assert!(
                matches!(read(parent.as_fd(), name), Found::Invalid),
                "{bad}"
            );
        }
        std::fs::remove_file(dir.join(name)).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", dir.join(name)).unwrap();
        assert!(matches!(read(parent.as_fd(), name), Found::Invalid));
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn removes_the_record_only_while_it_is_what_was_read() {
        let dir = tempdir("transition-remove");
        let parent = fsx::open_dir_nofollow(&dir).unwrap();
        let name = OsStr::new("f.lock.removing.owner");
        std::fs::write(dir.join(name), record_json(OWNER, r#""1""#, r#""2""#)).unwrap();
        let Found::Valid(seen) = read(parent.as_fd(), name) else {
            panic!("valid");
        };
        // Replaced after it was read: left where it is.
        std::fs::remove_file(dir.join(name)).unwrap();
        std::fs::write(dir.join(name), record_json(OWNER, r#""1""#, r#""3""#)).unwrap();
        assert_eq!(remove_record(parent.as_fd(), name, &seen), "owner_changed");
        assert_eq!(listing(&dir), ["f.lock.removing.owner"]);
        // As read: removed, nothing left.
        let Found::Valid(seen) = read(parent.as_fd(), name) else {
            panic!("valid");
        };
        assert_eq!(remove_record(parent.as_fd(), name, &seen), "removed");
        assert_eq!(listing(&dir), Vec::<String>::new());
        assert_eq!(
            remove_record(parent.as_fd(), name, &seen),
            "enoent_already_gone"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }
}
