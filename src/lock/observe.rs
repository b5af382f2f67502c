//! Observing a lock directory: what is at `<file>.lock` right now, read
//! no-follow and bounded, with the snapshot that any later removal must
//! still match.

use std::ffi::OsStr;

use crate::sys::os::fd::{AsFd, BorrowedFd};
use crate::sys::os::io::Errno;

use crate::fs::fsx::{self, ReadRefusal};
use crate::fs::tree::{self, TreeSnapshot, sha256_hex};
use crate::lock::identity::{INFO_NAME, has_inner_directory, info_entry, is_empty_dir};
use crate::lock::record::{MAX_RECORD_BYTES, OwnerRecord};
use crate::sys::errno::{errno_code, is_transient};

/// What stands at a lock path.
#[derive(Debug)]
pub enum Observation {
    /// Nothing: the lock is free.
    Missing,
    /// Something that is not a plain lock tree: a symlink, a regular file,
    /// a FIFO or socket (at the path or as `info`), a hard-linked or oversized
    /// `info`, a non-UTF-8 name. Held, never read-blocked, never deleted.
    Refused { code: &'static str },
    /// The read failed in a way that says "someone is working on it" (it
    /// changed under us, or a transient EACCES/EPERM/EBUSY). Held for now.
    Transient { code: &'static str },
    /// A lock tree and who owns it, with the snapshot removal must match.
    Lock {
        snapshot: TreeSnapshot,
        owner: Owner,
    },
}

/// The owner a lock tree declares.
#[derive(Debug)]
pub enum Owner {
    /// An empty directory: a legacy `mkdir` lock without a record.
    NoRecord { dir_mtime_ns: i128 },
    /// Entries other than a lone `info` file (e.g. an `info` directory).
    Unrecognized,
    /// An `info` file whose bytes do not validate.
    Malformed,
    /// A valid record, with the exact bytes it was parsed from.
    Valid {
        record: Box<OwnerRecord>,
        bytes: Vec<u8>,
    },
}

/// Failures that are not an answer about the lock but an error to report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ObserveError(pub Errno);

/// Observes `name` inside `parent`.
///
/// The record is read through a no-follow descriptor of the lock directory,
/// then the whole tree is snapshotted through that same descriptor, and
/// the name must still lead to it; the two must agree (the same `info`
/// bytes), otherwise the tree changed under us and the answer is
/// [`Observation::Transient`].
pub fn observe(parent: BorrowedFd<'_>, name: &OsStr) -> Result<Observation, ObserveError> {
    match observe_lock(parent, name) {
        // ESTALE, at any step: a network or FUSE client's handle of an
        // object the server no longer has. Gone, as far as the volume is
        // concerned (and checked with the server before anyone publishes
        // on it: see `crate::lock::volume`).
        Err(ObserveError(Errno::STALE)) => Ok(Observation::Missing),
        other => other,
    }
}

fn observe_lock(parent: BorrowedFd<'_>, name: &OsStr) -> Result<Observation, ObserveError> {
    if let Err(code) = crate::sys::faults::check("observe") {
        let errno = crate::sys::faults::errno_of(code);
        if !is_transient(errno) {
            return Err(ObserveError(errno));
        }
        return Ok(Observation::Transient { code });
    }
    let dir = match fsx::open_child_dir(parent, name) {
        Ok(dir) => dir,
        Err(Errno::NOENT | Errno::STALE) => return Ok(Observation::Missing),
        Err(Errno::NOTDIR) | Err(Errno::LOOP) => {
            return Ok(Observation::Refused {
                code: "not_a_directory",
            });
        }
        Err(errno) if is_transient(errno) => {
            return Ok(Observation::Transient {
                code: errno_code(errno),
            });
        }
        Err(errno) => return Err(ObserveError(errno)),
    };
    let record_bytes = match read_info(dir.as_fd())? {
        InfoRead::Present(bytes) => Some(bytes),
        InfoRead::Absent => None,
        InfoRead::Settled(observation) => return Ok(observation),
    };
    // The snapshot walks the descriptor the record was read through: the
    // very directory opened at `name`, not whatever the name holds by now.
    let snapshot = match tree::snapshot_dir(dir.as_fd()) {
        Ok(snapshot) => snapshot,
        Err(err) => return Ok(classify_tree_error(err)),
    };
    // And the name still leads to it: a directory removed or moved away
    // meanwhile describes no holder (its listing may even be empty).
    match fsx::stat_nofollow(parent, name) {
        Ok(now) if snapshot.is_root(&now) => {}
        Err(Errno::NOENT | Errno::STALE) => return Ok(Observation::Missing),
        _ => {
            return Ok(Observation::Transient {
                code: "tree_changed",
            });
        }
    }
    // A directory beside the record may be somebody's live lock: no
    // verdict on the record may remove it (see `info_entry`).
    if has_inner_directory(&snapshot) && record_bytes.is_some() {
        return Ok(Observation::Refused {
            code: "inner_directory",
        });
    }
    let owner = match (record_bytes, info_entry(&snapshot)) {
        (None, _) if is_empty_dir(&snapshot) => Owner::NoRecord {
            dir_mtime_ns: snapshot.entries[0].mtime_ns,
        },
        (None, _) | (Some(_), None) => Owner::Unrecognized,
        (Some(bytes), Some(info)) => {
            if info.sha256.as_deref() != Some(sha256_hex(&bytes).as_str()) {
                return Ok(Observation::Transient {
                    code: "tree_changed",
                });
            }
            match OwnerRecord::parse(&bytes) {
                Some(record) => Owner::Valid {
                    record: Box::new(record),
                    bytes,
                },
                None => Owner::Malformed,
            }
        }
    };
    Ok(Observation::Lock { snapshot, owner })
}

/// What reading `info` gave.
/// The owner record at `name`, if it is a directory holding a readable,
/// valid record: a first look that snapshots nothing, so it may back only
/// a decision that removes nothing (waiting for a live holder).
pub fn glance_record(parent: BorrowedFd<'_>, name: &OsStr) -> Option<OwnerRecord> {
    if crate::sys::faults::is_armed("observe") {
        return None;
    }
    let dir = fsx::open_child_dir(parent, name).ok()?;
    match read_info(dir.as_fd()) {
        Ok(InfoRead::Present(bytes)) => OwnerRecord::parse(&bytes),
        _ => None,
    }
}

enum InfoRead {
    Present(Vec<u8>),
    Absent,
    /// The read itself settles the observation (a refusal or a transient).
    Settled(Observation),
}

/// Reads `info` inside the lock directory, no-follow and bounded.
fn read_info(dir: BorrowedFd<'_>) -> Result<InfoRead, ObserveError> {
    let refused = |code| Ok(InfoRead::Settled(Observation::Refused { code }));
    let transient = |code| Ok(InfoRead::Settled(Observation::Transient { code }));
    match fsx::read_regular_bounded(dir, OsStr::new(INFO_NAME), MAX_RECORD_BYTES) {
        Ok(read) => Ok(InfoRead::Present(read.bytes)),
        Err(ReadRefusal::Os(Errno::NOENT)) => Ok(InfoRead::Absent),
        // The lock directory went away on the server under our handle.
        Err(ReadRefusal::Os(Errno::STALE)) => Ok(InfoRead::Settled(Observation::Missing)),
        Err(ReadRefusal::NotRegular) => refused("info_not_regular"),
        // Too large to be a record: malformed, and we did not read it.
        Err(ReadRefusal::TooLarge) => refused("info_too_large"),
        Err(ReadRefusal::Changed) => transient("tree_changed"),
        Err(ReadRefusal::Os(errno)) if is_transient(errno) => transient(errno_code(errno)),
        Err(ReadRefusal::Os(errno)) => Err(ObserveError(errno)),
    }
}

fn classify_tree_error(err: tree::TreeError) -> Observation {
    match err.code() {
        "not_found" => Observation::Missing,
        "tree_changed" => Observation::Transient {
            code: "tree_changed",
        },
        "io_error" => Observation::Transient { code: "io_error" },
        code => Observation::Refused { code },
    }
}
