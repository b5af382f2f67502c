//! When a lock's syscalls may run on the caller's own thread.
//!
//! The inline fast path (`inlineFastPath`) makes one attempt, and the
//! release its first attempt, on the calling thread: a handful of
//! non-blocking syscalls on a local disk, cheaper than a round trip to a
//! worker thread. On a mount whose syscalls stall (a hung NFS server, a
//! slow FUSE daemon) the same calls would freeze the caller's event loop,
//! and with it every other lock's hand-off and every abort. So the path is
//! earned per parent directory: the first attempt on a directory runs off
//! the thread, and only if that directory's filesystem is a local one
//! (by `statfs` type) and the attempt answered quickly do later ones run
//! inline; an inline attempt that turns out slow takes the directory off
//! the list again.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use crate::sys::os::fd::BorrowedFd;

/// An attempt slower than this is not one to make on the caller's thread
/// (a local one takes well under a millisecond; this leaves room for a
/// busy machine's scheduling).
pub const SLOW_ATTEMPT: Duration = Duration::from_millis(20);

/// What was seen of a parent directory's filesystem.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Seen {
    /// Local, and an attempt there answered quickly: attempts run inline.
    Fast,
    /// Local, but an attempt there was slow: the next attempt off the
    /// thread looks at it again.
    Slow,
    /// A network or FUSE mount: never inline, and not looked at again
    /// (one `statfs` less per attempt, a round trip there). A mount put at
    /// the same path later keeps this until the list starts over.
    Remote,
}

/// Parent directories whose filesystem was looked at.
static FAST: Mutex<Option<HashMap<PathBuf, Seen>>> = Mutex::new(None);

/// At most this many directories are remembered; beyond, the list starts
/// over (each directory then earns its place again).
const MAX_REMEMBERED: usize = 4096;

/// Whether an attempt on a lock in `parent_path` may run inline.
pub fn may_inline(parent_path: &Path) -> bool {
    seen(parent_path) == Some(Seen::Fast)
}

fn seen(parent_path: &Path) -> Option<Seen> {
    FAST.lock()
        .unwrap_or_else(|p| p.into_inner())
        .as_ref()
        .and_then(|fast| fast.get(parent_path).copied())
}

/// Whether an attempt off the thread in `parent_path` should look at its
/// filesystem ([`is_local`]): it is not known yet to be fast, nor to be a
/// network or FUSE mount.
pub fn needs_lesson(parent_path: &Path) -> bool {
    !matches!(seen(parent_path), Some(Seen::Fast | Seen::Remote))
}

/// Records what an attempt off the thread in `parent_path` saw: whether
/// its filesystem is local (`None`: not looked at, it was known), and how
/// long the attempt took.
pub fn learn(parent_path: &Path, local: Option<bool>, took: Duration) {
    match local {
        Some(false) => remember(parent_path, Seen::Remote),
        Some(true) if took < SLOW_ATTEMPT => remember(parent_path, Seen::Fast),
        Some(true) => remember(parent_path, Seen::Slow),
        None => inline_took(parent_path, took),
    }
}

/// An attempt on `parent_path`, known fast, took `took`: too slow takes the
/// directory off the list, for the next attempt to look at it again.
pub fn inline_took(parent_path: &Path, took: Duration) {
    if took >= SLOW_ATTEMPT && may_inline(parent_path) {
        remember(parent_path, Seen::Slow);
    }
}

fn remember(parent_path: &Path, fast: Seen) {
    let mut guard = FAST.lock().unwrap_or_else(|p| p.into_inner());
    let map = guard.get_or_insert_with(HashMap::new);
    if map.len() >= MAX_REMEMBERED && !map.contains_key(parent_path) {
        map.clear();
    }
    map.insert(parent_path.to_path_buf(), fast);
}

/// Whether `dir` is on a filesystem of local storage (or memory), where a
/// metadata call does not wait on a network or a user-space daemon.
#[cfg(any(target_os = "linux", target_os = "android"))]
pub fn is_local(dir: BorrowedFd<'_>) -> bool {
    crate::fs::probe::class_by_magic(dir) == crate::fs::probe::Class::Local
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
pub fn is_local(_dir: BorrowedFd<'_>) -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::fsx;
    use crate::sys::os::fd::AsFd;
    use crate::testutil::tempdir;

    #[test]
    fn a_directory_earns_the_inline_path_and_loses_it_when_slow() {
        let root = tempdir("fastpath");
        let parent = fsx::open_dir_nofollow(&root).unwrap();
        assert!(!may_inline(&root), "unknown until an attempt saw it");
        assert!(needs_lesson(&root));
        // The temp dir of the test machines is ext4 or tmpfs; elsewhere no
        // filesystem is classed local (the inline path is Linux's).
        assert_eq!(
            is_local(parent.as_fd()),
            cfg!(any(target_os = "linux", target_os = "android"))
        );
        learn(&root, Some(true), Duration::from_micros(200));
        assert!(may_inline(&root));
        assert!(!needs_lesson(&root));
        learn(&root, None, Duration::from_micros(200));
        inline_took(&root, Duration::from_micros(300));
        assert!(may_inline(&root));
        inline_took(&root, SLOW_ATTEMPT);
        assert!(!may_inline(&root));
        learn(&root, Some(true), Duration::from_millis(50));
        assert!(
            !may_inline(&root),
            "a slow attempt off the thread does not earn it"
        );
        assert!(needs_lesson(&root), "a slow one is looked at again");
        learn(&root, Some(false), Duration::from_micros(50));
        assert!(!may_inline(&root), "nor one on a network or FUSE mount");
        assert!(!needs_lesson(&root), "which is not looked at again");
        learn(&root, None, SLOW_ATTEMPT);
        inline_took(&root, SLOW_ATTEMPT);
        assert!(!needs_lesson(&root) && !may_inline(&root));
        std::fs::remove_dir_all(root).unwrap();
    }
}
