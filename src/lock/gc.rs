//! Read-only inspection and identity-bound removal for tools other than the
//! lock itself: status displays, garbage collectors, the CLI.
//!
//! Nothing here removes by pathname alone. A removal names the owner record
//! it expects and the identity observed *before* the decision to remove; the
//! directory goes only if it is still exactly that object.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::sys::os::fd::{AsFd, OwnedFd};
use crate::sys::os::io::Errno;

use crate::fs::fsx;
use crate::fs::tree;
use crate::lock::acquire::lock_path_of;
use crate::lock::guard::{self, Guarded};
use crate::lock::identity::LockDirIdentity;
use crate::lock::observe::{Observation, ObserveError, Owner, observe};
use crate::lock::record::OwnerRecord;
use crate::lock::report::{Holder, describe};
use crate::lock::verdict::{HostPolicy, Observer, Verdict, judge};
use crate::sys::clock::now_ns;

/// A valid owner record as read, with the identity of what was read.
pub struct GcObservation {
    pub record: OwnerRecord,
    pub bytes: Vec<u8>,
    pub identity: LockDirIdentity,
}

/// The outcome of an identity-bound removal (`FileLockGcRemoval`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GcRemoval {
    Removed,
    OwnerChanged,
    Missing,
    CleanupFailed,
}

impl GcRemoval {
    pub fn as_str(self) -> &'static str {
        match self {
            GcRemoval::Removed => "removed",
            GcRemoval::OwnerChanged => "owner_changed",
            GcRemoval::Missing => "missing",
            GcRemoval::CleanupFailed => "cleanup_failed",
        }
    }
}

/// Opens the parent of `lock_dir` (following symlinks in the parent path,
/// as the lock does) and returns it with the lock's name. `Ok(None)` when
/// the parent does not exist.
pub fn open_lock_parent(lock_dir: &Path) -> Result<Option<(OwnedFd, OsString)>, Errno> {
    let (parent_path, name) = fsx::split_final(lock_dir)?;
    match fsx::open_anchor(&parent_path) {
        Ok(parent) => Ok(Some((parent, name))),
        Err(Errno::NOENT) => Ok(None),
        Err(errno) => Err(errno),
    }
}

fn observe_path(lock_dir: &Path) -> Result<Observation, Errno> {
    match open_lock_parent(lock_dir)? {
        None => Ok(Observation::Missing),
        Some((parent, name)) => observe(parent.as_fd(), &name).map_err(|ObserveError(e)| e),
    }
}

/// `readFileLockObservationForGc`: the valid record at `lock_dir`, or `None`.
pub fn read_observation(lock_dir: &Path) -> Result<Option<GcObservation>, Errno> {
    let Observation::Lock { snapshot, owner } = observe_path(lock_dir)? else {
        return Ok(None);
    };
    let Owner::Valid { record, bytes } = owner else {
        return Ok(None);
    };
    Ok(
        LockDirIdentity::of_snapshot(&snapshot).map(|identity| GcObservation {
            record: *record,
            bytes,
            identity,
        }),
    )
}

/// `genericFileLockDirStaleVerdict`: the verdict and, when stale, the
/// identity observed before it (removal authority for that object).
pub fn stale_verdict(
    lock_dir: &Path,
    stale_ms: f64,
    policy: &HostPolicy,
) -> Result<(Verdict, Option<LockDirIdentity>), Errno> {
    let observation = observe_path(lock_dir)?;
    let verdict = judge(&observation, policy, stale_ms, now_ns(), &Observer::local());
    let identity = match (&observation, verdict.stale) {
        (Observation::Lock { snapshot, .. }, true) => Some(
            LockDirIdentity::of_snapshot(snapshot).unwrap_or_else(|| empty_dir_identity(snapshot)),
        ),
        _ => None,
    };
    Ok((verdict, identity))
}

/// The identity of a directory without a record: the root, and zeros where
/// the `info` fields would be.
fn empty_dir_identity(snapshot: &tree::TreeSnapshot) -> LockDirIdentity {
    LockDirIdentity {
        root_dev: snapshot.root_dev,
        root_ino: snapshot.root_ino,
        info_dev: 0,
        info_ino: 0,
        info_nlink: 0,
        info_size: 0,
        info_mtime_ns: 0,
        info_ctime_ns: 0,
        info_sha256: String::new(),
    }
}

/// `removeFileLockDirForGc`: removes `lock_dir` only if it still holds the
/// `expected` owner generation and is still the `identity` observed before
/// the caller decided.
///
/// `missing` means nothing stands at the path (from the start, or once the
/// observed directory left it before the removal began). Anything else that stands
/// there and is not exactly the expected generation — another record, a
/// malformed one, an empty directory, a symlink — is `owner_changed`, as is
/// any lock when no identity was observed for `expected` (a record built by
/// hand carries no removal authority).
pub fn remove_for_gc(
    lock_dir: &Path,
    expected: &OwnerRecord,
    identity: Option<&LockDirIdentity>,
) -> GcRemoval {
    let (parent, name) = match open_lock_parent(lock_dir) {
        Ok(Some(opened)) => opened,
        Ok(None) => return GcRemoval::Missing,
        Err(_) => return GcRemoval::CleanupFailed,
    };
    let observation = match observe(parent.as_fd(), &name) {
        Ok(observation) => observation,
        Err(_) => return GcRemoval::CleanupFailed,
    };
    let snapshot = match observation {
        Observation::Missing => return GcRemoval::Missing,
        Observation::Transient { .. } => return GcRemoval::CleanupFailed,
        Observation::Lock {
            snapshot,
            owner: Owner::Valid { record, .. },
        } if record.is_generation_of(expected) => snapshot,
        Observation::Lock { .. } | Observation::Refused { .. } => {
            return GcRemoval::OwnerChanged;
        }
    };
    let Some(identity) = identity else {
        return GcRemoval::OwnerChanged;
    };
    if LockDirIdentity::of_snapshot(&snapshot).as_ref() != Some(identity) {
        return GcRemoval::OwnerChanged;
    }
    // The reclaim guard, as a reclaiming waiter takes it: a live exactlock
    // holder keeps its directory's `flock` for the lock's life (and a
    // reclaimer or a remover, for their work), so whatever the caller
    // judged, a lock whose holder lives is not removed (`owner_changed`:
    // not the dead generation judged), and this removal does not race a
    // reclaimer that is exchanging the same directory. Held to the end.
    crate::sys::faults::pause("gc.judged", &name);
    let _guard = match guard::guard_judged(parent.as_fd(), &name, &snapshot) {
        Guarded::Acquired(guard) => guard,
        Guarded::Busy => return GcRemoval::OwnerChanged,
        // The observed directory left the name meanwhile: removed (by a
        // reclaimer or another GC) when nothing stands there now, replaced
        // otherwise.
        Guarded::Gone => {
            return match fsx::stat_nofollow(parent.as_fd(), &name) {
                Err(Errno::NOENT | Errno::STALE) => GcRemoval::Missing,
                _ => GcRemoval::OwnerChanged,
            };
        }
    };
    // In place, never by detaching the name (see `acquire::take_over`):
    // a successor that takes the name is never moved away from it.
    let outcome = tree::remove_tree_in_place_at(parent.as_fd(), &name, &snapshot);
    if outcome.ok {
        return GcRemoval::Removed;
    }
    match outcome.code {
        Some("not_found") => GcRemoval::Removed,
        Some("identity_mismatch") => GcRemoval::OwnerChanged,
        _ => GcRemoval::CleanupFailed,
    }
}

/// What `inspectLock` reports.
pub struct Inspection {
    pub lock_path: PathBuf,
    pub holder: Holder,
    /// The last fencing token handed out for the lock (see
    /// [`crate::lock::fence`]); `None` if it was never fenced, or its fence
    /// cannot be read.
    pub fence: Option<u64>,
}

/// `inspectLock(filePath)`: read-only.
pub fn inspect(file_path: &Path, stale_ms: f64, policy: &HostPolicy) -> Result<Inspection, Errno> {
    let lock_path = lock_path_of(file_path);
    let observation = observe_path(&lock_path)?;
    let verdict = judge(&observation, policy, stale_ms, now_ns(), &Observer::local());
    let fence = open_lock_parent(&lock_path)
        .ok()
        .flatten()
        .and_then(|(parent, name)| {
            crate::lock::fence::last(parent.as_fd(), &name)
                .ok()
                .flatten()
        });
    Ok(Inspection {
        holder: describe(&observation, verdict, policy),
        lock_path,
        fence,
    })
}
