//! The identity of a lock directory: the nine fields the original module
//! compares by hand in four places, here one type with one equality.
//!
//! It is derived from a [`TreeSnapshot`] (root dev/ino plus the `info`
//! entry's dev/ino/nlink/size/mtime/ctime and SHA-256). Removal authority
//! inside the crate is the whole snapshot; this type is what the GC helpers
//! hand to JavaScript and take back.

use crate::fs::tree::{EntryKind, TreeEntry, TreeSnapshot};

/// The name of the owner record inside a lock directory.
pub const INFO_NAME: &str = "info";

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LockDirIdentity {
    pub root_dev: u64,
    pub root_ino: u64,
    pub info_dev: u64,
    pub info_ino: u64,
    pub info_nlink: u64,
    pub info_size: u64,
    pub info_mtime_ns: i128,
    pub info_ctime_ns: i128,
    pub info_sha256: String,
}

impl LockDirIdentity {
    /// The identity of a snapshot holding an `info` file (see
    /// [`info_entry`]), or `None` when the snapshot is not shaped like a
    /// lock directory.
    pub fn of_snapshot(snapshot: &TreeSnapshot) -> Option<Self> {
        let info = info_entry(snapshot)?;
        Some(LockDirIdentity {
            root_dev: snapshot.root_dev,
            root_ino: snapshot.root_ino,
            info_dev: info.dev,
            info_ino: info.ino,
            info_nlink: info.nlink,
            info_size: info.size,
            info_mtime_ns: info.mtime_ns,
            info_ctime_ns: info.ctime_ns,
            info_sha256: info.sha256.clone()?,
        })
    }

    /// The nine fields as decimal strings, in the order of the JS type.
    pub fn to_strings(&self) -> [String; 9] {
        [
            self.root_dev.to_string(),
            self.root_ino.to_string(),
            self.info_dev.to_string(),
            self.info_ino.to_string(),
            self.info_nlink.to_string(),
            self.info_size.to_string(),
            self.info_mtime_ns.to_string(),
            self.info_ctime_ns.to_string(),
            self.info_sha256.clone(),
        ]
    }

    /// Parses the nine decimal strings back; `None` if any does not parse.
    pub fn from_strings(fields: [&str; 9]) -> Option<Self> {
        let [
            root_dev,
            root_ino,
            info_dev,
            info_ino,
            nlink,
            size,
            mtime,
            ctime,
            sha,
        ] = fields;
        let sha_ok = sha.len() == 64 && sha.bytes().all(|b| b.is_ascii_hexdigit());
        if !sha_ok {
            return None;
        }
        Some(LockDirIdentity {
            root_dev: root_dev.parse().ok()?,
            root_ino: root_ino.parse().ok()?,
            info_dev: info_dev.parse().ok()?,
            info_ino: info_ino.parse().ok()?,
            info_nlink: nlink.parse().ok()?,
            info_size: size.parse().ok()?,
            info_mtime_ns: mtime.parse().ok()?,
            info_ctime_ns: ctime.parse().ok()?,
            info_sha256: sha.to_ascii_lowercase(),
        })
    }
}

/// The `info` entry of a lock-directory snapshot: a regular file named
/// `info` in its root. Entries beside it (a `.DS_Store`, an editor's swap
/// file, a note) do not make it any less the lock's record: a lock is
/// judged by its record, and removed as the whole tree that was
/// snapshotted with it, as the original module does. (Without this, one
/// stray file made a lock nobody could ever take: its record read as
/// unreadable, its holder's death never proven.)
pub fn info_entry(snapshot: &TreeSnapshot) -> Option<&TreeEntry> {
    let (root, entries) = snapshot.entries.split_first()?;
    if !root.relative_path.is_empty() {
        return None;
    }
    entries
        .iter()
        .find(|entry| entry.relative_path == INFO_NAME && entry.kind == EntryKind::File)
}

/// Whether a snapshot is an empty directory (a legacy `mkdir` lock that
/// never got its record).
pub fn is_empty_dir(snapshot: &TreeSnapshot) -> bool {
    snapshot.entries.len() == 1
}
