//! Fencing tokens: a number for each acquisition of a lock, larger than
//! every earlier acquisition's (Kleppmann, "How to do distributed
//! locking"). A lock can be lost while its holder still runs — its
//! directory removed by hand, a network volume's partition, a paused VM —
//! and a storage layer that remembers the largest token it has accepted
//! rejects the late write of such a holder.
//!
//! On disk, beside the lock: `F.lock.fence/`, a directory whose one entry,
//! the head, is a directory named by the last value handed out, in
//! decimal, holding one empty file (`v`). It outlives every generation: no
//! release, reclaim or gc removes it. To advance, a holder renames the head
//! `N` to `T = max(N + 1, now in µs)` without replacing anything: the
//! compare-and-swap. The kernel's no-replace rename
//! (`renameat2(RENAME_NOREPLACE)`) where there is one; elsewhere (a network
//! mount, the portable mechanisms) a plain `renameat`, which cannot replace
//! a directory that holds something (`ENOTEMPTY`) — why a head is never
//! empty. The name `N` can be renamed once only, so no two
//! advancers win it, even when the lock's exclusion was broken (the case
//! fencing exists for); and names only move forward. Then the directory is
//! flushed (`fsync`) before the value is handed out, so a value given out
//! survives a crash or a power loss. One who loses the rename (`ENOENT`:
//! someone advanced; `EEXIST`) lists the directory again and retries.
//!
//! Why the clock: while the head stands, uniqueness and order come from
//! the rename alone; the clock covers what no rename can — a
//! `F.lock.fence` removed by hand (a birth then starts at the present,
//! above every value handed out before it, unless the wall clock stepped
//! back past them) and two heads after a broken exclusion (advancers take
//! the largest; the others are removed when seen). Values are therefore
//! large and not contiguous.
//!
//! Cost: the head and a descriptor of `F.lock.fence/` are kept per lock
//! by the process that last advanced it, so a fenced cycle pays one rename
//! and one `fsync` (the first of a lock in a process, or after another
//! process advanced it, one listing more). The kept descriptor keeps the
//! volume busy for `umount` while the process lives.

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::sync::{Mutex, OnceLock};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::sys::os::fd::{AsFd, BorrowedFd, OwnedFd};
use crate::sys::os::fs::{self, Mode, OFlags};
use crate::sys::os::io::Errno;

use crate::fs::fsx::{self, DirIdentity};
use crate::fs::rename;
use crate::lock::publish::LockMode;

/// `F.lock.fence`: the fence directory's name beside `F.lock`.
pub const FENCE_SUFFIX: &str = ".fence";

/// How many locks' fences a process keeps (their heads and descriptors).
const MAX_KEPT: usize = 64;

/// The empty file every head holds.
const HEAD_FILE: &str = "v";

/// Passes of list-and-rename before giving up: each lost pass means another
/// process advanced meanwhile, which under the lock only a broken
/// exclusion makes possible.
const PASSES: usize = 3;

/// Why no fence could be had.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FenceError {
    /// A syscall failed (`EROFS`, `ENOSPC`, `EACCES`…).
    Os(Errno),
    /// `F.lock.fence` is not a directory (a file, a symlink), or holds no
    /// head that could be advanced after [`PASSES`] tries.
    Unusable,
}

/// The head of one lock's fence as this process last left it.
struct Kept {
    dir: OwnedFd,
    head: u64,
}

fn kept() -> &'static Mutex<HashMap<(DirIdentity, OsString), Kept>> {
    static KEPT: OnceLock<Mutex<HashMap<(DirIdentity, OsString), Kept>>> = OnceLock::new();
    KEPT.get_or_init(Mutex::default)
}

/// `F.lock.fence` for the lock name `F.lock`.
pub fn fence_name(lock_name: &OsStr) -> OsString {
    let mut name = lock_name.to_os_string();
    name.push(FENCE_SUFFIX);
    name
}

/// Advances the fence of the lock `lock_name` in `parent` (whose identity
/// is `parent_id`), which the caller holds: the new value, flushed to disk.
pub fn advance(
    parent: BorrowedFd<'_>,
    parent_id: DirIdentity,
    lock_name: &OsStr,
    mode: LockMode,
) -> Result<u64, FenceError> {
    let key = (parent_id, lock_name.to_os_string());
    // Taken out while it is used: one lock's fence is advanced by one
    // holder at a time, and no other lock waits on this one's syscalls.
    let mut last = kept()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .remove(&key);
    for _ in 0..PASSES {
        let Kept { dir, head } = match last.take() {
            Some(kept) => kept,
            None => look(parent, lock_name, mode)?,
        };
        let next = head.saturating_add(1).max(now_us());
        if next == head {
            return Err(FenceError::Unusable);
        }
        if !move_head(dir.as_fd(), head, next)? {
            continue;
        }
        flush(dir.as_fd())?;
        let mut kept = kept().lock().unwrap_or_else(|p| p.into_inner());
        // A process that fences many locks keeps the latest few: each kept
        // one holds a descriptor (one evicted costs its next advance a look).
        if kept.len() >= MAX_KEPT
            && let Some(old) = kept.keys().next().cloned()
        {
            kept.remove(&old);
        }
        kept.insert(key, Kept { dir, head: next });
        return Ok(next);
    }
    Err(FenceError::Unusable)
}

/// The last value the fence of `lock_name` in `parent` handed out, read
/// without changing anything (`None`: never fenced).
pub fn last(parent: BorrowedFd<'_>, lock_name: &OsStr) -> Result<Option<u64>, FenceError> {
    match open_fence_dir(parent, &fence_name(lock_name)) {
        Ok(dir) => Ok(heads(dir.as_fd())?.last().copied()),
        Err(FenceError::Os(Errno::NOENT)) => Ok(None),
        Err(error) => Err(error),
    }
}

/// The fence directory and its head, looked at afresh; a fence never made
/// is born: its directory made (and flushed into the parent), and a first
/// head at the present.
fn look(parent: BorrowedFd<'_>, lock_name: &OsStr, mode: LockMode) -> Result<Kept, FenceError> {
    let name = fence_name(lock_name);
    let dir = match open_fence_dir(parent, &name) {
        Err(FenceError::Os(Errno::NOENT)) => {
            // Made with the lock's mode, exact under any umask (only by its
            // maker: one someone else made is theirs), so that every user
            // who shares the lock can advance it.
            match fs::mkdirat(parent, &name, mode.dir()) {
                Ok(()) => {
                    fsx::chmod_own_dir_nofollow(parent, &name, mode.dir())
                        .map_err(FenceError::Os)?;
                }
                Err(Errno::EXIST) => {}
                Err(errno) => return Err(FenceError::Os(errno)),
            }
            // The parent is held as an anchor (`O_PATH`), which `fsync`
            // refuses: flushed through a descriptor of its own.
            let readable = fs::openat(
                parent,
                c".",
                OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .map_err(FenceError::Os)?;
            flush(readable.as_fd())?;
            open_fence_dir(parent, &name)?
        }
        other => other?,
    };
    let heads = heads(dir.as_fd())?;
    let head = match heads.split_last() {
        Some((&head, lower)) => {
            // Heads below the largest (two births after a broken
            // exclusion): removed when seen.
            for stale in lower.iter().map(u64::to_string) {
                if let Ok(head) = fsx::open_child_dir(dir.as_fd(), stale.as_ref()) {
                    let _ = fs::unlinkat(&head, HEAD_FILE, fs::AtFlags::empty());
                }
                let _ = fs::unlinkat(&dir, &stale, fs::AtFlags::REMOVEDIR);
            }
            head
        }
        // No head: the first value is the present, made as the head itself;
        // `advance` moves it on at once, so the first value handed out is
        // the one after it, as every later one is.
        None => {
            let first = now_us();
            match fs::mkdirat(&dir, first.to_string(), Mode::RWXU) {
                Ok(()) | Err(Errno::EXIST) => first,
                Err(errno) => return Err(FenceError::Os(errno)),
            }
        }
    };
    // The head's file: made here, where every head is first seen, so that
    // a birth cut short by a crash is mended before anyone advances from it.
    let made = fsx::open_child_dir(dir.as_fd(), head.to_string().as_ref()).and_then(|head| {
        fs::openat(
            &head,
            HEAD_FILE,
            OFlags::WRONLY | OFlags::CREATE | OFlags::CLOEXEC,
            Mode::RUSR | Mode::WUSR,
        )
    });
    match made {
        Ok(_) => Ok(Kept { dir, head }),
        // Advanced meanwhile.
        Err(Errno::NOENT) => look(parent, lock_name, mode),
        Err(errno) => Err(FenceError::Os(errno)),
    }
}

/// Opens `F.lock.fence` no-follow: a symlink or a file there is no fence.
fn open_fence_dir(parent: BorrowedFd<'_>, name: &OsStr) -> Result<OwnedFd, FenceError> {
    fsx::open_child_dir(parent, name).map_err(|errno| match errno {
        Errno::LOOP | Errno::NOTDIR => FenceError::Unusable,
        errno => FenceError::Os(errno),
    })
}

/// The numeric entries of the fence directory, ascending; names that are
/// not a canonical decimal (no sign, no leading zero) are not heads.
fn heads(dir: BorrowedFd<'_>) -> Result<Vec<u64>, FenceError> {
    let own = fs::openat(
        dir,
        c".",
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(FenceError::Os)?;
    let mut heads = Vec::new();
    for entry in fs::Dir::new(own).map_err(FenceError::Os)? {
        let entry = entry.map_err(FenceError::Os)?;
        let name = entry.file_name().to_bytes();
        let canonical = !name.is_empty()
            && name.iter().all(u8::is_ascii_digit)
            && (name == b"0" || name[0] != b'0');
        if let Some(value) = canonical
            .then(|| std::str::from_utf8(name).ok()?.parse::<u64>().ok())
            .flatten()
        {
            heads.push(value);
        }
    }
    heads.sort_unstable();
    Ok(heads)
}

/// The compare-and-swap: renames the head `from` to `to` unless `to`
/// exists. `false` when the head was not `from` any more, or `to` was
/// taken: look again.
fn move_head(dir: BorrowedFd<'_>, from: u64, to: u64) -> Result<bool, FenceError> {
    let (from, to) = (from.to_string(), to.to_string());
    let renamed = match rename::exclusive_rename_at(dir, from.as_ref(), dir, to.as_ref()) {
        // No exclusive rename here: a plain one, which a head at `to`
        // refuses because it is not empty.
        Err(Errno::NOSYS | Errno::INVAL | Errno::NOTSUP) => fs::renameat(dir, &from, dir, &to),
        other => other,
    };
    match renamed {
        Ok(()) => Ok(true),
        Err(Errno::NOENT | Errno::EXIST | Errno::NOTEMPTY) => Ok(false),
        Err(errno) => Err(FenceError::Os(errno)),
    }
}

/// Makes what was just done in `dir` durable. (Windows: its renames are
/// made durable by the volume; there is no `fsync` of a directory.)
fn flush(dir: BorrowedFd<'_>) -> Result<(), FenceError> {
    #[cfg(unix)]
    match fsx::flush(dir) {
        // A network mount whose directory operations are synchronous.
        Ok(()) | Err(Errno::INVAL | Errno::NOSYS | Errno::NOTSUP) => {}
        Err(errno) => return Err(FenceError::Os(errno)),
    }
    #[cfg(not(unix))]
    let _ = dir;
    Ok(())
}

/// Microseconds since the epoch.
fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use crate::testutil::tempdir;

    fn parent_of(dir: &std::path::Path) -> (OwnedFd, DirIdentity) {
        let parent = fsx::open_dir_nofollow(dir).unwrap();
        let (identity, _) = fsx::dir_identity_and_links(parent.as_fd()).unwrap();
        (parent, identity)
    }

    #[test]
    fn each_value_is_larger_than_the_last_across_a_forgotten_cache_and_a_wipe() {
        let dir = tempdir("fence");
        let (parent, id) = parent_of(&dir);
        let lock = OsStr::new("f.lock");
        assert_eq!(last(parent.as_fd(), lock), Ok(None));
        let mut seen = Vec::new();
        for round in 0..20 {
            if round % 5 == 4 {
                // Another process advanced since (this one's head is stale).
                kept().lock().unwrap().clear();
            }
            seen.push(advance(parent.as_fd(), id, lock, LockMode::PRIVATE).unwrap());
        }
        assert!(seen.windows(2).all(|pair| pair[0] < pair[1]), "{seen:?}");
        assert_eq!(last(parent.as_fd(), lock), Ok(seen.last().copied()));
        let names: Vec<_> = std::fs::read_dir(dir.join("f.lock.fence"))
            .unwrap()
            .map(|entry| entry.unwrap().file_name())
            .collect();
        assert_eq!(
            names,
            [seen.last().unwrap().to_string().as_str()],
            "one head"
        );
        // Wiped by hand: the next value is still larger.
        std::fs::remove_dir_all(dir.join("f.lock.fence")).unwrap();
        kept().lock().unwrap().clear();
        let after = advance(parent.as_fd(), id, lock, LockMode::PRIVATE).unwrap();
        assert!(after > *seen.last().unwrap());
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn advancers_racing_without_the_lock_never_get_one_value_twice() {
        // A broken exclusion: four threads advance one fence at once, each
        // from its own look (the kept head taken out by one is not there
        // for the others), against one head far ahead of the clock.
        let dir = tempdir("fence-concurrent");
        let (parent, id) = parent_of(&dir);
        let lock = OsStr::new("f.lock");
        std::fs::create_dir_all(dir.join("f.lock.fence/9000000000000000")).unwrap();
        std::fs::write(dir.join("f.lock.fence/9000000000000000/v"), b"").unwrap();
        let parent = std::sync::Arc::new(parent);
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let parent = parent.clone();
                std::thread::spawn(move || {
                    (0..100)
                        .filter_map(|_| advance(parent.as_fd(), id, lock, LockMode::PRIVATE).ok())
                        .collect::<Vec<u64>>()
                })
            })
            .collect();
        let mut all: Vec<u64> = threads
            .into_iter()
            .flat_map(|t| t.join().unwrap())
            .collect();
        let count = all.len();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), count, "no value handed out twice");
        assert!(count > 100, "most advances won ({count})");
        assert!(
            all[0] > 9_000_000_000_000_000,
            "from the head, not the clock"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_stale_head_loses_the_rename_and_two_heads_resolve_to_the_largest() {
        let dir = tempdir("fence-race");
        let (parent, id) = parent_of(&dir);
        let lock = OsStr::new("f.lock");
        let first = advance(parent.as_fd(), id, lock, LockMode::PRIVATE).unwrap();
        // Someone else advanced it by hand, far ahead, and left a lower head.
        let ahead = first + 1_000_000_000;
        std::fs::rename(
            dir.join(format!("f.lock.fence/{first}")),
            dir.join(format!("f.lock.fence/{ahead}")),
        )
        .unwrap();
        std::fs::create_dir(dir.join("f.lock.fence/7")).unwrap();
        let next = advance(parent.as_fd(), id, lock, LockMode::PRIVATE).unwrap();
        assert_eq!(next, ahead + 1);
        assert!(
            !dir.join("f.lock.fence/7").exists(),
            "the lower head was removed"
        );
        // A file, or a symlink, where the fence should be: no fence.
        let other = OsStr::new("g.lock");
        std::fs::write(dir.join("g.lock.fence"), b"").unwrap();
        assert_eq!(
            advance(parent.as_fd(), id, other, LockMode::PRIVATE),
            Err(FenceError::Unusable)
        );
        std::fs::remove_file(dir.join("g.lock.fence")).unwrap();
        std::os::unix::fs::symlink(dir.join("f.lock.fence"), dir.join("g.lock.fence")).unwrap();
        assert_eq!(
            advance(parent.as_fd(), id, other, LockMode::PRIVATE),
            Err(FenceError::Unusable)
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn without_an_exclusive_rename_a_head_is_never_replaced() {
        // The portable mechanisms (a network mount): a plain rename. Two
        // heads after a broken exclusion, `H` (this process's kept one) and
        // `H + 1` — the very name its advance moves to.
        crate::sys::platform::forcing_portable(|| {
            let dir = tempdir("fence-plain");
            let (parent, id) = parent_of(&dir);
            let lock = OsStr::new("f.lock");
            let h = 9_000_000_000_000_000_u64;
            std::fs::create_dir_all(dir.join(format!("f.lock.fence/{h}"))).unwrap();
            assert_eq!(
                advance(parent.as_fd(), id, lock, LockMode::PRIVATE),
                Ok(h + 1)
            );
            let higher = dir.join(format!("f.lock.fence/{}", h + 2));
            std::fs::create_dir(&higher).unwrap();
            std::fs::write(higher.join("v"), b"").unwrap();
            // Kept: `h + 1`, moving to `h + 2`, which holds a head.
            assert_eq!(
                advance(parent.as_fd(), id, lock, LockMode::PRIVATE),
                Ok(h + 3),
                "the head at h + 2 was not replaced (h + 2 handed out twice)"
            );
            assert!(!dir.join(format!("f.lock.fence/{}", h + 1)).exists());
            std::fs::remove_dir_all(dir).unwrap();
        });
    }
}
