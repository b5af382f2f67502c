//! "Is pid N alive, and which process is it?", answered by the kernel
//! without spawning anything.
//!
//! A pid alone is not an identity (pids are reused), so a stale-lock
//! verdict needs the pid's state (running, exited-but-not-reaped, gone) and
//! when the process started. How is the platform's business
//! ([`crate::sys::platform`]): Linux reads `/proc/<pid>/stat`, macOS asks
//! `proc_pidinfo`, and the portable mechanism (forced with
//! `EXACTLOCK_PLATFORM=portable`) has only `kill(pid, 0)` for liveness, with
//! the start still read the OS's own way, because the record needs it.

use crate::sys::platform;

/// What the OS says about a pid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Probe {
    /// The process exists and has not exited (as far as the mechanism can
    /// tell: `kill(pid, 0)` cannot tell a zombie). `start_ticks` is its
    /// start in the platform's unit (Linux: clock ticks after boot; macOS:
    /// microseconds since the epoch); `None` when it exists but its start
    /// cannot be read (e.g. `/proc` mounted with `hidepid`): proof of life,
    /// but no identity.
    Running { start_ticks: Option<u64> },
    /// The process has exited but its parent has not reaped it yet (a
    /// zombie): the pid still exists, the owner is dead.
    Exited,
    /// No process has this pid (ESRCH).
    Gone,
    /// The OS would not say (pid 0, a pid that is not a valid positive
    /// `pid_t`, an unexpected I/O error). Never evidence of death.
    Unknown,
}

/// Answers both questions a lock asks about a recorded owner pid: is it
/// alive, and if so, when did it start. pid 0 and pids above `i32::MAX`
/// are `Unknown` without any syscall: as a `pid_t`, 0 is our own process
/// group and negative values are process groups (-1: every process we may
/// signal), never a lock owner.
pub fn probe(pid: u32) -> Probe {
    if !is_valid_pid(pid) {
        return Probe::Unknown;
    }
    #[cfg(unix)]
    if platform::is_portable() {
        return platform::portable::probe(pid);
    }
    platform::native::probe(pid)
}

/// Whether some process (zombies included) has `pid` in our pid namespace,
/// by one `kill(pid, 0)`: a cheap "maybe alive" that never proves death
/// beyond ESRCH. `false` for pids that are no valid positive `pid_t`.
#[cfg(unix)]
pub fn exists(pid: u32) -> bool {
    use rustix::io::Errno;
    valid_pid(pid).is_some_and(|pid| {
        matches!(
            rustix::process::test_kill_process(pid),
            Ok(()) | Err(Errno::PERM)
        )
    })
}

/// Whether some process has `pid`, exited ones whose object another
/// process still holds open included: anything but the kernel's "no such
/// process" (an unreadable answer counts as alive: never proof of death).
#[cfg(windows)]
pub fn exists(pid: u32) -> bool {
    is_valid_pid(pid) && platform::native::probe(pid) != Probe::Gone
}

/// A pid we may look up: a positive `pid_t`. 0 and values above `i32::MAX`
/// (negative as `pid_t`) name process groups in `kill(2)`.
#[cfg(unix)]
pub fn valid_pid(pid: u32) -> Option<rustix::process::Pid> {
    rustix::process::Pid::from_raw(i32::try_from(pid).ok()?)
}

/// Whether `pid` names a process we may look up: on unix a positive
/// `pid_t`; on Windows any pid but 0 (the System Idle Process, never an
/// owner).
pub fn is_valid_pid(pid: u32) -> bool {
    #[cfg(unix)]
    return valid_pid(pid).is_some();
    #[cfg(windows)]
    return pid != 0;
}

/// Repeats a syscall interrupted by a signal (the `/proc` reads of the
/// Linux platform; kqueue's waits handle `EINTR` themselves).
#[cfg(target_os = "linux")]
pub fn retry_intr<T>(mut call: impl FnMut() -> rustix::io::Result<T>) -> rustix::io::Result<T> {
    loop {
        match call() {
            Err(rustix::io::Errno::INTR) => continue,
            other => return other,
        }
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests;
