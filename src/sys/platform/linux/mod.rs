//! Linux: `/proc` for processes, inotify + pidfd + eventfd for wake-ups,
//! `openat2(RESOLVE_NO_SYMLINKS)` and `O_PATH` for no-follow opens;
//! `renameat2` flags come through [`super::rename_with`].

pub mod events;
pub mod procfs;
mod watches;

use std::path::Path;

use rustix::fd::OwnedFd;
use rustix::fs::{Dev, Mode, OFlags, ResolveFlags};
use rustix::io::Errno;

pub use events::{HeldEvents, HolderWatch, NameWatch, holder_exit, sleep, wake_fd};
pub use procfs::{
    boot_id, boot_secs, cpu_wait, pid_ns, probe, start_secs, start_secs_of, start_ticks,
    this_thread,
};

use super::{OwnStart, ProcMissing};

/// What [`super::name`] says of these mechanisms.
pub const NAME: &str = "linux";

/// What wakes a head for its lock's name, and for its holder's exit (as
/// `NODE_DEBUG=exactlock` says).
pub const NAME_EVENTS: &str = "inotify, ";
pub const HOLDER_EVENTS: &str = "the holder's pidfd, ";

/// Linux has pid namespaces: a record without one is incomplete.
pub const HAS_PID_NAMESPACES: bool = true;

/// Whether the OS names its boot (a record of an earlier boot is told by
/// it): `/proc/sys/kernel/random/boot_id`.
pub const HAS_BOOT_ID: bool = true;

/// Whether a record's `start_time` written here is an incarnation
/// (`windows:<FILETIME>`) rather than `ps -o lstart`'s text: not here.
pub const START_TIME_IS_INCARNATION: bool = false;

/// The most decimal digits a pid can have: `pid_max` may be raised to at
/// most `PID_MAX_LIMIT`, 4194304 (2^22) on 64-bit kernels (32768 on
/// 32-bit ones), whatever this machine's `pid_max` is now.
pub const PID_MAX_DIGITS: usize = 7;

/// Upstream 0.17's `process_incarnation` prefix: `linux:<ticks>`.
pub const INCARNATION_PREFIX: Option<&str> = Some("linux:");

/// `O_PATH`: open without reading.
pub const PATH_ONLY: Option<OFlags> = Some(OFlags::PATH);

/// A device number as [`super::dev_of`] carries it: Linux's `dev_t` is
/// already an unsigned 64-bit number (glibc's `makedev` encoding), kept as is.
pub fn dev_number(dev: Dev) -> u64 {
    dev
}

/// Now on `process.hrtime.bigint()`'s clock (libuv reads `CLOCK_MONOTONIC`
/// on Linux), in nanoseconds.
pub fn hrtime_ns() -> i128 {
    let now = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    i128::from(now.tv_sec) * 1_000_000_000 + i128::from(now.tv_nsec)
}

/// This process's start from `/proc/self/stat`: the wall-clock rendering
/// uses the ticks as `/proc` shows them, with `btime` as it shows it (both
/// shifted by a time namespace, in opposite directions, as `ps` sees
/// them); the identity uses the initial time namespace's ticks, which
/// every reader agrees on. `Err` only when `/proc` is not mounted.
pub fn own_start() -> Result<OwnStart, ProcMissing> {
    let seen = match procfs::self_stat() {
        Ok(stat) => Some(stat.start_ticks),
        Err(Errno::NOENT) => return Err(ProcMissing),
        Err(_) => None,
    };
    Ok(OwnStart {
        start_secs: seen.and_then(procfs::seen_start_secs),
        start_ticks: seen.and_then(procfs::root_ticks),
    })
}

/// `openat2(RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)`: one syscall that
/// refuses a symlink anywhere in `path` (`ELOOP`; `ENOTDIR` for one in the
/// final component when `O_DIRECTORY` is asked). `None` where the kernel
/// has no `openat2` (before 5.6, or a seccomp filter says `EPERM`) or saw
/// a concurrent rename (`EAGAIN`): the caller's walk gives the same
/// guarantee.
pub fn open_nofollow(path: &Path, flags: OFlags) -> Option<Result<OwnedFd, Errno>> {
    match rustix::fs::openat2(
        rustix::fs::CWD,
        path,
        flags,
        Mode::empty(),
        ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
    ) {
        Err(Errno::NOSYS | Errno::AGAIN | Errno::PERM) => None,
        other => Some(other),
    }
}

/// `openat2(O_PATH | O_DIRECTORY, RESOLVE_CACHED)` (see
/// [`super::open_dir_cached`]); `None` where the kernel refuses the flag.
pub fn open_dir_cached(path: &Path) -> Option<Result<OwnedFd, Errno>> {
    match rustix::fs::openat2(
        rustix::fs::CWD,
        path,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
        ResolveFlags::CACHED,
    ) {
        // No `openat2` (before 5.6, or a seccomp filter), or no
        // `RESOLVE_CACHED` (before 5.12: an unknown flag).
        Err(Errno::NOSYS | Errno::PERM | Errno::INVAL) => None,
        other => Some(other),
    }
}

/// Whether this kernel takes `openat2(RESOLVE_CACHED)`: asked once, of `/`.
pub fn can_open_cached() -> bool {
    static CAN: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *CAN.get_or_init(|| open_dir_cached(Path::new("/")).is_some())
}
