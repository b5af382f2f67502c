//! The platform seam: every kernel mechanism that differs between systems.
//!
//! May use: `rustix`, and `libc` only for what rustix does not wrap
//! (`proc_pidinfo`, `sysctlbyname` on macOS), each `unsafe` block with a
//! proof. Never touches a lock directory, never reads a record, never
//! decides anything: it answers "is pid N alive", "when did it start",
//! "wake me when…", "open without following", "rename with this flag".
//!
//! Three implementations, one chosen when the module loads:
//!
//! | concern            | [`linux`]                         | `macos`                                  | [`portable`] (any POSIX)            |
//! |--------------------|-----------------------------------|------------------------------------------|-------------------------------------|
//! | liveness, zombie   | `/proc/<pid>/stat` state          | `proc_pidinfo` `pbi_status == SZOMB`     | `kill(pid, 0)`: ESRCH gone, EPERM alive; a zombie reads alive |
//! | start time         | `/proc` ticks + `btime`           | `proc_pidinfo` `pbi_start_tv*`           | the OS's own (never switched)       |
//! | waiting            | inotify + pidfd + eventfd, `poll` | `kqueue`: `EVFILT_VNODE`, `EVFILT_PROC`, a pipe | a pipe and the `retryDelayMs` timer |
//! | no-follow opens    | `openat2(RESOLVE_NO_SYMLINKS)`, `O_PATH` | `O_NOFOLLOW` walk                 | `O_NOFOLLOW \| O_DIRECTORY` walk    |
//! | exclusive renames  | `renameat2` `NOREPLACE`/`EXCHANGE` | `renameatx_np` `RENAME_EXCL`/`RENAME_SWAP` | none: `mkdirat`/`linkat` claims, reclaim in place |
//! | device numbers     | `dev_t` is `u64`                  | `dev_t` is `i32`, widened as libuv does  | the OS's own (never switched)       |
//!
//! `EXACTLOCK_PLATFORM=portable` forces the portable column on Linux (and
//! macOS), so the code paths another system takes run in `npm test` here.
//! The start time is the exception: the on-disk record needs the OS's
//! reading, so it stays native (Linux `/proc` even when forced portable).

use std::ffi::OsStr;
use std::path::Path;
#[cfg(unix)]
use std::sync::OnceLock;

use crate::sys::os::fd::{BorrowedFd, OwnedFd};
use crate::sys::os::fs::{OFlags, RenameFlags, Stat};
use crate::sys::os::io::Errno;

#[cfg(target_os = "linux")]
pub mod linux;
#[cfg(target_os = "macos")]
pub mod macos;
#[cfg(unix)]
pub mod portable;
#[cfg(windows)]
pub mod windows;

/// The native implementation of the system this is built for.
#[cfg(target_os = "linux")]
pub use linux as native;
#[cfg(target_os = "macos")]
pub use macos as native;
#[cfg(windows)]
pub use windows as native;

#[cfg(not(any(target_os = "linux", target_os = "macos", windows)))]
compile_error!(
    "exactlock runs on Linux, macOS and Windows only: it needs the kernel's process start \
     times; see the README's \"Platforms\" section"
);

/// What a thread is doing about the CPU (see `native::cpu_wait`): its
/// total wait for one so far, and whether it is runnable now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CpuWait {
    pub waited: std::time::Duration,
    pub runnable: bool,
}

/// The environment variable that forces the portable mechanisms.
pub const SWITCH: &str = "EXACTLOCK_PLATFORM";

/// Whether the portable mechanisms are forced (`EXACTLOCK_PLATFORM=portable`),
/// read once when the module loads: a process never mixes the two.
pub fn is_portable() -> bool {
    #[cfg(all(test, unix))]
    if FORCED.with(std::cell::Cell::get) {
        return true;
    }
    #[cfg(unix)]
    {
        static PORTABLE: OnceLock<bool> = OnceLock::new();
        *PORTABLE.get_or_init(|| {
            std::env::var_os(SWITCH).is_some_and(|value| value.as_encoded_bytes() == b"portable")
        })
    }
    // Windows has one set of mechanisms: the POSIX fallbacks do not exist
    // there, so the switch is not read.
    #[cfg(windows)]
    false
}

#[cfg(all(test, unix))]
thread_local! {
    static FORCED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `test` with the portable mechanisms forced on this thread only (a
/// unit test cannot set the switch: it is read once per process).
#[cfg(all(test, unix))]
pub fn forcing_portable<T>(test: impl FnOnce() -> T) -> T {
    FORCED.with(|forced| forced.set(true));
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(test));
    FORCED.with(|forced| forced.set(false));
    result.unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

/// The name of the mechanisms in use: `"linux"`, `"macos"` or `"portable"`.
pub fn name() -> &'static str {
    if is_portable() {
        "portable"
    } else {
        native::NAME
    }
}

/// This process's own start, as the platform reads it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OwnStart {
    /// On the wall clock, whole seconds since the epoch, as `ps` renders it.
    pub start_secs: Option<u64>,
    /// In the platform's unit (Linux: clock ticks after boot; macOS:
    /// microseconds since the epoch): the clock-independent identity.
    pub start_ticks: Option<u64>,
}

/// The interface the platform reads process starts from is missing (Linux:
/// `/proc` not mounted).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProcMissing;

/// A file's device number as the crate carries it: compared, used as a
/// key, and given to JavaScript in decimal. The platform's `dev_t` differs
/// in width and sign (rustix's [`crate::sys::os::fs::Dev`]), so each platform
/// widens its own ([`native::dev_number`]) to the `u64` that Node's
/// `fs.statSync(path, { bigint: true }).dev` reports for the same file.
pub fn dev_of(stat: &Stat) -> u64 {
    native::dev_number(stat.st_dev)
}

/// A file's inode number. `ino_t` is 64 bits on every platform this is
/// built for (`c_ulong` on 64-bit Linux, `__darwin_ino64_t` on macOS);
/// `From` widens a narrower one losslessly should one appear.
#[allow(
    clippy::useless_conversion,
    reason = "st_ino is u64 on the targets built today; the conversion keeps a narrower ino_t lossless"
)]
pub fn ino_of(stat: &Stat) -> u64 {
    u64::from(stat.st_ino)
}

/// `renameat` with `flags` (`NOREPLACE`, `EXCHANGE`), where the platform
/// has an exclusive rename and it is not forced portable; `ENOSYS`
/// otherwise, which every caller already treats as "the filesystem
/// cannot", taking its fallback.
pub fn rename_with(
    src_dir: BorrowedFd<'_>,
    src_name: &OsStr,
    dst_dir: BorrowedFd<'_>,
    dst_name: &OsStr,
    flags: RenameFlags,
) -> Result<(), Errno> {
    if is_portable() {
        return Err(Errno::NOSYS);
    }
    // rustix maps the flags to `renameat2` on Linux and to `renameatx_np`
    // (`RENAME_EXCL`, `RENAME_SWAP`) on macOS.
    crate::sys::os::fs::renameat_with(src_dir, src_name, dst_dir, dst_name, flags)
}

/// Opens the directory `path` with `flags` in one call that refuses a
/// symlink in any component, where the platform has one (Linux `openat2`);
/// `None` when it has not (or is forced portable, or the kernel says no):
/// the caller walks the path one `O_NOFOLLOW` component at a time.
pub fn open_nofollow(path: &Path, flags: OFlags) -> Option<Result<OwnedFd, Errno>> {
    if is_portable() {
        return None;
    }
    native::open_nofollow(path, flags)
}

/// Opens the directory `path` for the inline fast path without a call that
/// can wait on a filesystem: resolved from the kernel's caches alone, and
/// opened without reading (Linux `openat2(RESOLVE_CACHED)` with `O_PATH`).
/// `Some(Err(EAGAIN))` where a component would need its filesystem to
/// answer; `None` where the platform or kernel has no such open (before
/// Linux 5.12, a seccomp filter, macOS, Windows): there every attempt runs
/// off the caller's thread. Not one of the mechanisms the portable mode
/// replaces: it decides only where a syscall runs, never what the lock
/// does, so the portable mode keeps it.
pub fn open_dir_cached(path: &Path) -> Option<Result<OwnedFd, Errno>> {
    native::open_dir_cached(path)
}

/// Whether [`open_dir_cached`] can be had here (asked once, on the first
/// directory that would earn the inline path).
pub fn can_open_cached() -> bool {
    native::can_open_cached()
}

/// The flag that opens a name without reading it (Linux `O_PATH`): no read
/// permission needed, a FIFO is not opened for I/O. `None` where there is
/// none (or forced portable): callers open directories `O_RDONLY |
/// O_DIRECTORY` and anything else `O_RDONLY | O_NONBLOCK`.
pub fn path_only_flag() -> Option<OFlags> {
    if is_portable() {
        return None;
    }
    native::PATH_ONLY
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unit_tests_run_the_native_mechanisms() {
        // `cargo test` runs without the switch; the portable mechanisms are
        // tested by calling `portable::` directly (portable.rs).
        assert!(!is_portable(), "run cargo test without {SWITCH}");
        assert_eq!(name(), native::NAME);
    }
}
