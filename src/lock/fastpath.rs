//! When a lock's syscalls may run on the caller's own thread.
//!
//! The inline fast path (`inlineFastPath`) makes one attempt, and the
//! release its first attempt, on the calling thread: a handful of
//! non-blocking syscalls on a local disk, cheaper than a round trip to a
//! worker thread. On a mount whose syscalls stall (a hung NFS server, a
//! slow FUSE daemon) the same calls would freeze the caller's event loop,
//! and with it every timer, hand-off and abort. So the path is earned per
//! parent directory: the first attempt on a directory runs off the thread,
//! and only if that directory's filesystem is a local one (by `statfs`
//! type) and the attempt answered quickly do later ones run inline; an
//! inline attempt that turns out slow takes the directory off the list
//! again.
//!
//! What is earned is a *directory*, not a path. A path learned local may
//! lead elsewhere later (a symlink in it re-pointed, a mount put over one
//! of its directories), and resolving it there could itself wait on a
//! server. So the inline attempt reaches its parent with one call that
//! cannot wait: `openat2(RESOLVE_CACHED)` resolves the path from the
//! kernel's caches alone, or fails at once where a component would need a
//! filesystem to answer (revalidating a network or FUSE entry, reading a
//! directory from disk); and an `O_PATH` open calls no filesystem's `open`.
//! The `statx` that follows reads cached attributes only. Only when what
//! it names is the very directory that earned the path (device, inode,
//! birth time) does the attempt go on inline; anything else — a mount put
//! over it, a symlink re-pointed, a directory replaced — sends the
//! attempt off the thread. Every call after that is relative to that
//! descriptor, on the local filesystem that earned it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use crate::fs::fsx::{self, DirIdentity};
use crate::sys::os::fd::{AsFd, BorrowedFd, OwnedFd};

/// An attempt slower than this is not one to make on the caller's thread
/// (a local one takes well under a millisecond; this leaves room for a
/// busy machine's scheduling).
pub const SLOW_ATTEMPT: Duration = Duration::from_millis(20);

/// What was seen of a parent directory's filesystem.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Seen {
    /// Local, and an attempt there answered quickly: attempts run inline,
    /// while the path still leads to this directory. `raw` is what its
    /// `statx` says ([`fsx::dir_attributes`]), `identity` its lock key's
    /// part ([`fsx::dir_identity_and_links`]).
    Fast {
        raw: DirIdentity,
        identity: DirIdentity,
    },
    /// Local, but an attempt there was slow: the next attempt off the
    /// thread looks at it again.
    Slow,
    /// A network or FUSE mount: never inline, and not looked at again
    /// (one `statfs` less per attempt, a round trip there). A mount put at
    /// the same path later keeps this until the list starts over.
    Remote,
}

/// Parent directories whose filesystem was looked at, by the path they
/// were reached by.
static SEEN: Mutex<Option<HashMap<PathBuf, Seen>>> = Mutex::new(None);

/// At most this many directories are remembered; beyond, the list starts
/// over (each directory then earns its place again).
const MAX_REMEMBERED: usize = 4096;

fn seen(parent_path: &Path) -> Option<Seen> {
    SEEN.lock()
        .unwrap_or_else(|p| p.into_inner())
        .as_ref()
        .and_then(|seen| seen.get(parent_path).copied())
}

/// The parent of an inline attempt: the directory `parent_path` earned the
/// path with, opened without a call that can wait on a server (see the
/// module docs), its lock key's identity and its link count.
pub struct InlineParent {
    pub dir: OwnedFd,
    pub identity: DirIdentity,
    pub links: u64,
}

/// The parent directory for an attempt on the caller's thread, or `None`:
/// the directory has not earned the inline path, or `parent_path` does not
/// lead to it now from the kernel's caches alone (the attempt then runs
/// off the thread, which may wait).
pub fn inline_parent(parent_path: &Path) -> Option<InlineParent> {
    let Some(Seen::Fast { raw, identity }) = seen(parent_path) else {
        return None;
    };
    let dir = crate::sys::platform::open_dir_cached(parent_path)?.ok()?;
    match fsx::dir_attributes(dir.as_fd()) {
        Ok((now, links)) if now == raw => Some(InlineParent {
            dir,
            identity,
            links,
        }),
        _ => None,
    }
}

/// Whether attempts in `parent_path` have earned the inline path (a hint
/// for how an attempt off the thread publishes; never for what may run
/// on the caller's thread, which [`inline_parent`] decides).
pub fn is_fast(parent_path: &Path) -> bool {
    matches!(seen(parent_path), Some(Seen::Fast { .. }))
}

/// Whether the directory `identity`, reached by `parent_path`, is the one
/// that earned the inline path: a lock published in it may be released on
/// the caller's thread, its calls all relative to that local directory.
pub fn is_fast_dir(parent_path: &Path, identity: &DirIdentity) -> bool {
    matches!(seen(parent_path), Some(Seen::Fast { identity: fast, .. }) if fast == *identity)
}

/// Whether an attempt off the thread in `parent_path` should look at its
/// filesystem ([`Lesson::of`]): it is not known yet to be fast, nor to be
/// a network or FUSE mount.
pub fn needs_lesson(parent_path: &Path) -> bool {
    !matches!(seen(parent_path), Some(Seen::Fast { .. } | Seen::Remote))
}

/// What an attempt off the thread looked at in its parent, to learn from.
pub struct Lesson {
    local: bool,
    raw: Option<DirIdentity>,
    identity: Option<DirIdentity>,
}

impl Lesson {
    /// Looks at the open parent: its filesystem, and the identities an
    /// inline attempt will compare it by. Only where the inline path can
    /// be had at all (the kernel resolves from its caches alone).
    pub fn of(parent: BorrowedFd<'_>) -> Lesson {
        let local = is_local(parent) && crate::sys::platform::can_open_cached();
        Lesson {
            local,
            raw: local
                .then(|| fsx::dir_attributes(parent).ok().map(|(raw, _)| raw))
                .flatten(),
            identity: local
                .then(|| fsx::dir_identity_and_links(parent).ok().map(|(id, _)| id))
                .flatten(),
        }
    }
}

/// Records what an attempt off the thread in `parent_path` saw (`None`:
/// not looked at, it was known), and how long the attempt took.
pub fn learn(parent_path: &Path, lesson: Option<Lesson>, took: Duration) {
    let Some(lesson) = lesson else {
        return inline_took(parent_path, took);
    };
    match lesson {
        Lesson {
            local: true,
            raw: Some(raw),
            identity: Some(identity),
        } if took < SLOW_ATTEMPT => remember(parent_path, Seen::Fast { raw, identity }),
        Lesson { local: true, .. } => remember(parent_path, Seen::Slow),
        Lesson { local: false, .. } => remember(parent_path, Seen::Remote),
    }
}

/// An attempt on `parent_path`, known fast, took `took`: too slow takes the
/// directory off the list, for the next attempt to look at it again.
pub fn inline_took(parent_path: &Path, took: Duration) {
    if took >= SLOW_ATTEMPT && is_fast(parent_path) {
        remember(parent_path, Seen::Slow);
    }
}

fn remember(parent_path: &Path, seen: Seen) {
    let mut guard = SEEN.lock().unwrap_or_else(|p| p.into_inner());
    let map = guard.get_or_insert_with(HashMap::new);
    if map.len() >= MAX_REMEMBERED && !map.contains_key(parent_path) {
        map.clear();
    }
    map.insert(parent_path.to_path_buf(), seen);
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
    use crate::sys::os::fd::AsFd;
    use crate::testutil::tempdir;

    /// A lesson as an attempt in `dir` would take it.
    fn lesson(dir: &Path) -> Option<Lesson> {
        Some(Lesson::of(fsx::open_dir_nofollow(dir).unwrap().as_fd()))
    }

    #[test]
    fn a_directory_earns_the_inline_path_and_loses_it_when_slow() {
        let root = tempdir("fastpath");
        assert!(
            inline_parent(&root).is_none(),
            "unknown until an attempt saw it"
        );
        assert!(needs_lesson(&root));
        // The temp dir of the test machines is ext4 or tmpfs; elsewhere no
        // filesystem is classed local (the inline path is Linux's).
        let linux = cfg!(any(target_os = "linux", target_os = "android"));
        assert_eq!(lesson(&root).unwrap().local, linux);
        if !linux {
            return std::fs::remove_dir_all(root).unwrap();
        }
        learn(&root, lesson(&root), Duration::from_micros(200));
        let inline = inline_parent(&root).expect("earned");
        let (identity, _) = fsx::dir_identity_and_links(inline.dir.as_fd()).unwrap();
        assert_eq!(inline.identity, identity);
        assert!(is_fast_dir(&root, &identity));
        assert!(!needs_lesson(&root));
        learn(&root, None, Duration::from_micros(200));
        inline_took(&root, Duration::from_micros(300));
        assert!(is_fast(&root));
        inline_took(&root, SLOW_ATTEMPT);
        assert!(!is_fast(&root) && inline_parent(&root).is_none());
        learn(&root, lesson(&root), Duration::from_millis(50));
        assert!(
            !is_fast(&root),
            "a slow attempt off the thread does not earn it"
        );
        assert!(needs_lesson(&root), "a slow one is looked at again");
        learn(
            &root,
            Some(Lesson {
                local: false,
                raw: None,
                identity: None,
            }),
            Duration::from_micros(50),
        );
        assert!(!is_fast(&root), "nor one on a network or FUSE mount");
        assert!(!needs_lesson(&root), "which is not looked at again");
        learn(&root, None, SLOW_ATTEMPT);
        inline_took(&root, SLOW_ATTEMPT);
        assert!(!needs_lesson(&root) && !is_fast(&root));
        std::fs::remove_dir_all(root).unwrap();
    }

    #[cfg(any(target_os = "linux", target_os = "android"))]
    #[test]
    fn a_path_that_leads_to_another_directory_now_loses_the_inline_path() {
        let root = tempdir("fastpath-moved");
        let dir = root.join("d");
        std::fs::create_dir(&dir).unwrap();
        learn(&dir, lesson(&dir), Duration::from_micros(200));
        assert!(inline_parent(&dir).is_some());
        // The directory replaced by another at the same path (as a mount
        // put over it, or a re-pointed symlink, would): not the one that
        // earned the path.
        std::fs::rename(&dir, root.join("old")).unwrap();
        std::fs::create_dir(&dir).unwrap();
        assert!(inline_parent(&dir).is_none());
        std::fs::remove_dir(&dir).unwrap();
        // (A short target: a long one may need its page read, and the
        // cached resolution then sends the attempt off the thread.)
        std::os::unix::fs::symlink("old", &dir).unwrap();
        assert!(
            inline_parent(&dir).is_some(),
            "a symlink to the very directory that earned it still leads there"
        );
        std::fs::remove_dir_all(root).unwrap();
    }
}
