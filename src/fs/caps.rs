//! What this process knows per filesystem about the exclusive renames, so a
//! lock picks its code path instead of discovering `EINVAL` on every
//! attempt.
//!
//! Keyed by device number (`st_dev`). An entry is made when a flagged
//! rename is refused (`EINVAL`, `ENOSYS`, `ENOTSUP`: the filesystem — NFS,
//! 9p, many FUSE daemons — or the kernel does not carry the flag), either
//! by the lock's own call or by a [`super::probe`] of that filesystem; from
//! then on callers go straight to their fallback. Only refusals are stored:
//! a filesystem nobody has seen refuse is tried, so an unknown device (a new
//! mount) is always probed by the first real call.
//!
//! A device number can be given to another filesystem (an unmounted tmpfs
//! or FUSE mount's anonymous device reused by the next mount), so a refusal
//! is trusted for [`RECHECK_AFTER`] only; then one call tries the flag
//! again, and a success forgets the refusal. Trusting a stale refusal is
//! never unsafe: the fallbacks are correct everywhere, only weaker in a
//! window the flag would close.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How long a refusal is trusted before the flag is tried again.
pub const RECHECK_AFTER: Duration = Duration::from_secs(60);

/// At most this many refusals are remembered; beyond, the list starts
/// over (each filesystem then refuses once more).
const MAX_REMEMBERED: usize = 256;

/// A rename flag a filesystem may not carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flag {
    /// `RENAME_NOREPLACE` (`RENAME_EXCL` on macOS): publication.
    NoReplace,
    /// `RENAME_EXCHANGE`: the atomic takeover of a stale lock.
    Exchange,
}

impl Flag {
    pub fn as_str(self) -> &'static str {
        match self {
            Flag::NoReplace => "RENAME_NOREPLACE",
            Flag::Exchange => "RENAME_EXCHANGE",
        }
    }
}

/// One filesystem's refusal of one flag.
#[derive(Clone, Copy, Debug)]
struct Refusal {
    dev: u64,
    flag: Flag,
    /// When it was last seen (or re-tried).
    at: Instant,
}

/// The per-filesystem memory; [`global`] is the process's, tests make
/// their own.
pub struct Caps {
    refusals: Mutex<Vec<Refusal>>,
    /// Whether any refusal was ever recorded: until then (on local disks,
    /// always) a rename consults nothing but this flag.
    any: AtomicBool,
    /// Flagged renames issued / skipped on a remembered refusal (for tests
    /// and `NODE_DEBUG`).
    tried: AtomicU64,
    skipped: AtomicU64,
}

impl Caps {
    pub const fn new() -> Caps {
        Caps {
            refusals: Mutex::new(Vec::new()),
            any: AtomicBool::new(false),
            tried: AtomicU64::new(0),
            skipped: AtomicU64::new(0),
        }
    }

    /// Whether to issue a rename with `flag` on device `dev`: `false` while
    /// a refusal of it there is fresh. A refusal older than
    /// [`RECHECK_AFTER`] lets this one call try again (and is restamped, so
    /// concurrent callers do not all re-try).
    pub fn should_try(&self, dev: u64, flag: Flag) -> bool {
        if !self.any.load(Ordering::Acquire) {
            self.tried.fetch_add(1, Ordering::Relaxed);
            return true;
        }
        let mut refusals = self.refusals.lock().unwrap_or_else(|p| p.into_inner());
        let Some(refusal) = refusals.iter_mut().find(|r| r.dev == dev && r.flag == flag) else {
            self.tried.fetch_add(1, Ordering::Relaxed);
            return true;
        };
        if refusal.at.elapsed() >= RECHECK_AFTER {
            refusal.at = Instant::now();
            self.tried.fetch_add(1, Ordering::Relaxed);
            return true;
        }
        self.skipped.fetch_add(1, Ordering::Relaxed);
        false
    }

    /// Records what a rename with `flag` on `dev` showed: refused, or
    /// carried out (which forgets an earlier refusal).
    ///
    /// Under the forced portable mechanisms the refusal (`ENOSYS`) is the
    /// platform seam's, not the filesystem's: it is not remembered, or a
    /// thread back on the native mechanisms would skip a flag the
    /// filesystem carries.
    pub fn learned(&self, dev: u64, flag: Flag, works: bool) {
        if works && !self.any.load(Ordering::Acquire) {
            return;
        }
        if !works && crate::sys::platform::is_portable() {
            return;
        }
        let mut refusals = self.refusals.lock().unwrap_or_else(|p| p.into_inner());
        let known = refusals.iter().position(|r| r.dev == dev && r.flag == flag);
        match (known, works) {
            (Some(at), true) => {
                refusals.swap_remove(at);
            }
            (Some(at), false) => refusals[at].at = Instant::now(),
            (None, true) => {}
            (None, false) => {
                if refusals.len() >= MAX_REMEMBERED {
                    refusals.clear();
                }
                refusals.push(Refusal {
                    dev,
                    flag,
                    at: Instant::now(),
                });
                self.any.store(true, Ordering::Release);
            }
        }
    }

    /// Flagged renames issued and skipped so far.
    #[cfg(test)]
    pub fn counts(&self) -> (u64, u64) {
        (
            self.tried.load(Ordering::Relaxed),
            self.skipped.load(Ordering::Relaxed),
        )
    }
}

/// The process's memory, consulted by [`super::rename`] and the lock's
/// takeover.
pub fn global() -> &'static Caps {
    static GLOBAL: Caps = Caps::new();
    &GLOBAL
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_is_remembered_per_device_and_flag_and_forgotten_on_success() {
        let caps = Caps::new();
        assert!(caps.should_try(7, Flag::NoReplace), "unknown: tried");
        caps.learned(7, Flag::NoReplace, false);
        assert!(!caps.should_try(7, Flag::NoReplace));
        assert!(caps.should_try(7, Flag::Exchange), "another flag");
        assert!(caps.should_try(8, Flag::NoReplace), "another device");
        assert_eq!(caps.counts(), (3, 1));
        caps.learned(7, Flag::NoReplace, true);
        assert!(caps.should_try(7, Flag::NoReplace));
    }

    // The portable seam is unix's (Windows has its own calls, no forced mode).
    #[cfg(unix)]
    #[test]
    fn the_portable_seams_refusal_is_not_the_filesystems() {
        let caps = Caps::new();
        crate::sys::platform::forcing_portable(|| caps.learned(7, Flag::Exchange, false));
        assert!(
            caps.should_try(7, Flag::Exchange),
            "ENOSYS of the seam is not remembered"
        );
        caps.learned(7, Flag::Exchange, false);
        assert!(!caps.should_try(7, Flag::Exchange));
    }

    #[test]
    fn an_old_refusal_lets_one_call_try_again() {
        let caps = Caps::new();
        caps.learned(9, Flag::Exchange, false);
        caps.refusals.lock().unwrap()[0].at = Instant::now() - RECHECK_AFTER;
        assert!(caps.should_try(9, Flag::Exchange), "the re-check");
        assert!(
            !caps.should_try(9, Flag::Exchange),
            "restamped: the next caller waits for the re-check's result"
        );
    }

    #[test]
    fn the_list_is_bounded() {
        let caps = Caps::new();
        for dev in 0..(MAX_REMEMBERED as u64 + 10) {
            caps.learned(dev, Flag::NoReplace, false);
        }
        assert!(caps.refusals.lock().unwrap().len() <= MAX_REMEMBERED);
    }
}
