//! The reclaim guard: waiters that judged the same lock directory stale
//! take turns reclaiming it.
//!
//! Two waiters can judge the same dead lock; the first replaces it, and the
//! second, still acting on its old view, would then touch the successor. So
//! a reclaimer first takes a non-blocking `flock` on the judged directory
//! itself, and only then checks that the lock name still names that
//! directory. Every reclaimer of one judged directory locks the same inode
//! (each holds it open, so it is not freed even once deleted), hence they
//! act one at a time, each on a fresh check. The kernel drops the `flock`
//! when its holder dies, so a crashed reclaimer blocks nobody. A filesystem
//! that has no `flock` (some network mounts) is used unguarded.

use std::ffi::OsStr;

use crate::sys::os::fd::{AsFd, BorrowedFd, OwnedFd};
use crate::sys::os::fs::{self, FlockOperation};
use crate::sys::os::io::Errno;

use crate::fs::fsx;
use crate::fs::tree::TreeSnapshot;
use crate::sys::errno::is_flock_unsupported;

/// Held while reclaiming; dropping it releases the `flock`.
pub struct ReclaimGuard {
    _judged: Option<OwnedFd>,
}

/// The outcome of trying to guard a reclaim.
pub enum Guarded {
    /// This process may reclaim now.
    Acquired(ReclaimGuard),
    /// Another process is reclaiming this directory right now.
    Busy,
    /// The lock name no longer names the judged directory.
    Gone,
}

/// Takes the reclaim guard of the directory `name` inside `parent`, which
/// must still be the root of `judged`.
pub fn guard_judged(parent: BorrowedFd<'_>, name: &OsStr, judged: &TreeSnapshot) -> Guarded {
    let Ok(dir) = fsx::open_child_dir(parent, name) else {
        return Guarded::Gone;
    };
    if !names_root(dir.as_fd(), judged) {
        return Guarded::Gone;
    }
    let held = match fs::flock(&dir, FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Some(dir),
        Err(Errno::WOULDBLOCK) => return Guarded::Busy,
        // No flock on this filesystem: proceed unguarded, as the original
        // module always does.
        Err(errno) if is_flock_unsupported(errno) => None,
        Err(_) => return Guarded::Busy,
    };
    // A reclaimer that finished before we locked has replaced the lock:
    // the name must still name the judged directory.
    match fsx::stat_nofollow(parent, name) {
        Ok(stat) if judged.is_root(&stat) => Guarded::Acquired(ReclaimGuard { _judged: held }),
        _ => Guarded::Gone,
    }
}

/// Whether the open directory is the root of `judged`.
pub fn names_root(dir: BorrowedFd<'_>, judged: &TreeSnapshot) -> bool {
    fs::fstat(dir).is_ok_and(|stat| judged.is_root(&stat))
}

// A directory's flock is unix's: Windows has no lock on a directory (EOPNOTSUPP),
// so removers there do not take turns (README, "Limits on Windows").
#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use crate::fs::tree;

    #[test]
    fn a_second_reclaimer_waits_and_then_sees_the_successor() {
        let root = std::env::temp_dir().join(format!(
            "exactlock-guard-{}-{}",
            std::process::id(),
            uuid::Uuid::new_v4()
        ));
        std::fs::create_dir_all(root.join("f.lock")).unwrap();
        std::fs::write(root.join("f.lock/info"), b"dead").unwrap();
        let parent = fsx::open_dir_nofollow(&root).unwrap();
        let name = OsStr::new("f.lock");
        let judged = tree::snapshot_tree_at(parent.as_fd(), name).unwrap();
        let first = guard_judged(parent.as_fd(), name, &judged);
        assert!(matches!(first, Guarded::Acquired(_)));
        // flock is per open file description: a second open is a second
        // reclaimer, as another process would be.
        assert!(matches!(
            guard_judged(parent.as_fd(), name, &judged),
            Guarded::Busy
        ));
        // The first reclaimer replaces the lock and lets go.
        std::fs::rename(root.join("f.lock"), root.join("old")).unwrap();
        std::fs::create_dir(root.join("f.lock")).unwrap();
        drop(first);
        assert!(matches!(
            guard_judged(parent.as_fd(), name, &judged),
            Guarded::Gone
        ));
        std::fs::remove_dir_all(root).unwrap();
    }
}
