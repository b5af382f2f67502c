//! The mechanisms any POSIX system has, for what is not OS-specific:
//! liveness by `kill(pid, 0)`, waiting on a pipe and a timer, and (in
//! [`crate::fs`]) no-follow opens by an `O_NOFOLLOW | O_DIRECTORY` walk and
//! no-replace publication by `mkdirat`/`linkat` claims. macOS uses the pipe
//! here for its own wake-ups; on Linux, `EXACTLOCK_PLATFORM=portable` runs
//! all of it, so `npm test` exercises what a system without Linux's
//! mechanisms does.
//!
//! What a portable waiter gives up: it learns of a released lock or a
//! dead holder at its next `retryDelayMs` tick instead of at once, and a
//! zombie holder (exited, not yet reaped) reads as alive until it is
//! reaped. Neither can let two holders in: both only delay a waiter.

use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags};
use rustix::io::{Errno, FdFlags};

use crate::sys::platform::native;
use crate::sys::process::{Probe, valid_pid};
use crate::sys::wait::{HolderExit, Wake, WakeFd, Woken, timespec};

/// Liveness by `kill(pid, 0)`: ESRCH is proof the pid is gone; success or
/// EPERM (it exists, owned by someone we may not signal) is life, with the
/// start read the OS's own way (the record carries it, so a reused pid is
/// still told apart). A zombie cannot be told from a live process here:
/// it reads as running until its parent reaps it, which only makes a
/// waiter wait longer.
pub fn probe(pid: u32) -> Probe {
    let Some(raw) = valid_pid(pid) else {
        return Probe::Unknown;
    };
    match rustix::process::test_kill_process(raw) {
        Err(Errno::SRCH) => Probe::Gone,
        Ok(()) | Err(Errno::PERM) => Probe::Running {
            start_ticks: native::start_ticks(pid),
        },
        Err(_) => Probe::Unknown,
    }
}

/// No kernel notice of a holder's exit: only whether it is already gone
/// (`kill(pid, 0)` says ESRCH), so the waiter looks again at once; else
/// the timer covers.
pub fn holder_exit(pid: u32) -> HolderExit {
    match valid_pid(pid).map(rustix::process::test_kill_process) {
        Some(Err(Errno::SRCH)) => HolderExit::AlreadyGone,
        _ => HolderExit::Unwatched,
    }
}

/// A pipe, non-blocking and close-on-exec at both ends: readable while a
/// signal is pending. `pipe2` is not on every system (macOS has none), so
/// the flags are set after `pipe`; a `fork`+`exec` by another thread in
/// between can leak the two ends into that child, which only keeps a pipe
/// open there (it carries no data but wake-ups, and nothing waits for EOF).
pub fn wake_fd() -> Option<WakeFd> {
    let (read, write) = rustix::pipe::pipe().ok()?;
    for end in [&read, &write] {
        rustix::io::fcntl_setfd(end, FdFlags::CLOEXEC).ok()?;
        rustix::io::ioctl_fionbio(end, true).ok()?;
    }
    Some(WakeFd::Pipe { read, write })
}

/// Sleeps until `wake` is signalled or `timeout` passes: the `retryDelayMs`
/// timer is the only news of the lock's name or its holder.
pub fn sleep(wake: &Wake, timeout: Duration) -> Woken {
    let deadline = Instant::now() + timeout;
    let woken = loop {
        let left = timespec(deadline.saturating_duration_since(Instant::now()));
        let Some(fd) = wake.pollable() else {
            // No descriptor could be made: a plain sleep, signals are seen
            // at its end.
            std::thread::sleep(deadline.saturating_duration_since(Instant::now()));
            break Woken::Timeout;
        };
        let mut fds = [PollFd::from_borrowed_fd(fd, PollFlags::IN)];
        match rustix::event::poll(&mut fds, Some(&left)) {
            Err(Errno::INTR) => continue,
            Ok(0) | Err(_) => break Woken::Timeout,
            Ok(_) => break Woken::Signalled,
        }
    };
    wake.drain();
    woken
}

/// How often a held lock's watch looks when no kernel event can tell it
/// that something changed.
pub const HELD_LOOK_EVERY: Duration = Duration::from_millis(100);

/// Waits for `stop` or [`HELD_LOOK_EVERY`], whichever comes first: the
/// held lock's watch then looks at its lock.
pub fn held_wait(stop: rustix::fd::BorrowedFd<'_>) -> Result<(), Errno> {
    let mut fds = [PollFd::from_borrowed_fd(stop, PollFlags::IN)];
    match rustix::event::poll(&mut fds, Some(&timespec(HELD_LOOK_EVERY))) {
        Ok(_) | Err(Errno::INTR) => Ok(()),
        Err(errno) => Err(errno),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustix::fd::AsFd;
    use std::process::Command;

    #[test]
    fn liveness_is_kill_zero_with_the_oss_start() {
        let mut child = Command::new("sleep").arg("30").spawn().unwrap();
        let pid = child.id();
        let running = probe(pid);
        assert_eq!(
            running,
            Probe::Running {
                start_ticks: native::start_ticks(pid)
            }
        );
        assert!(matches!(
            running,
            Probe::Running {
                start_ticks: Some(_)
            }
        ));
        assert!(matches!(holder_exit(pid), HolderExit::Unwatched));
        child.kill().unwrap();
        // A zombie still answers kill(0): the portable mechanism cannot
        // tell it from the living (the native one can: see process tests).
        let zombie_deadline = Instant::now() + Duration::from_secs(10);
        while native::probe(pid) != Probe::Exited {
            assert!(
                Instant::now() < zombie_deadline,
                "the child never became a zombie"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(matches!(probe(pid), Probe::Running { .. }));
        child.wait().unwrap();
        assert_eq!(probe(pid), Probe::Gone);
        assert!(matches!(holder_exit(pid), HolderExit::AlreadyGone));
        assert_eq!(probe(0), Probe::Unknown);
        assert_eq!(probe(u32::MAX), Probe::Unknown);
    }

    #[test]
    fn eperm_is_life() {
        // pid 1 belongs to root; as root the signal check succeeds, as
        // anyone else it fails with EPERM: alive either way.
        assert!(matches!(probe(1), Probe::Running { .. }));
    }

    #[test]
    fn the_timer_ends_a_sleep_nobody_signals_and_a_signal_ends_it_early() {
        let wake = Wake::with_fd(wake_fd());
        assert!(wake.pollable().is_some());
        assert_eq!(sleep(&wake, Duration::from_millis(30)), Woken::Timeout);
        let signaller = wake.clone();
        let thread = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            signaller.signal();
        });
        assert_eq!(sleep(&wake, Duration::from_secs(30)), Woken::Signalled);
        thread.join().unwrap();
        // Drained: nothing pending after the sleep that consumed it.
        assert!(!wake.is_signalled());
        // Many signals before a sleep are one wake-up, and never block the
        // signaller (the pipe is non-blocking; a full pipe is signalled).
        for _ in 0..100_000 {
            wake.signal();
        }
        assert_eq!(sleep(&wake, Duration::from_secs(30)), Woken::Signalled);
        assert_eq!(sleep(&wake, Duration::from_millis(10)), Woken::Timeout);
    }

    #[test]
    fn forced_portable_renames_take_the_claim_fallbacks_and_never_replace() {
        use crate::fs::rename::{self, Primitive};
        use crate::testutil::tempdir;
        crate::sys::platform::forcing_portable(|| {
            let root = tempdir("portable-rename");
            std::fs::create_dir(root.join("staging")).unwrap();
            std::fs::write(root.join("staging/info"), b"mine").unwrap();
            // An empty directory at the name is a holder, not a free slot.
            std::fs::create_dir(root.join("f.lock")).unwrap();
            let refused = rename::rename_no_replace(&root.join("staging"), &root.join("f.lock"));
            assert_eq!(refused.code, Some("destination_exists"), "{refused:?}");
            assert_eq!(refused.primitive, Primitive::MkdiratRenameatNoreplace);
            assert_eq!(std::fs::read_dir(root.join("f.lock")).unwrap().count(), 0);
            std::fs::remove_dir(root.join("f.lock")).unwrap();
            let published = rename::rename_no_replace(&root.join("staging"), &root.join("f.lock"));
            assert!(published.ok, "{published:?}");
            assert_eq!(published.primitive, Primitive::MkdiratRenameatNoreplace);
            assert_eq!(std::fs::read(root.join("f.lock/info")).unwrap(), b"mine");
            // A regular file goes by linkat, which refuses an existing name.
            std::fs::write(root.join("a"), b"a").unwrap();
            std::fs::write(root.join("b"), b"b").unwrap();
            let taken = rename::rename_no_replace(&root.join("a"), &root.join("b"));
            assert_eq!(taken.code, Some("destination_exists"));
            assert_eq!(taken.primitive, Primitive::LinkatNoreplace);
            assert_eq!(std::fs::read(root.join("b")).unwrap(), b"b");
            let moved = rename::rename_no_replace(&root.join("a"), &root.join("c"));
            assert!(moved.ok, "{moved:?}");
            assert_eq!(moved.primitive, Primitive::LinkatNoreplace);
            assert!(!root.join("a").exists());
            // No exchange, no bare exclusive rename: the callers' fallbacks run.
            let dir = crate::fs::fsx::open_dir_nofollow(&root).unwrap();
            let (c, lock) = (std::ffi::OsStr::new("c"), std::ffi::OsStr::new("f.lock"));
            assert_eq!(
                rename::exchange_at(dir.as_fd(), c, dir.as_fd(), lock),
                Err(Errno::NOSYS)
            );
            assert_eq!(
                rename::exclusive_rename_at(dir.as_fd(), c, dir.as_fd(), std::ffi::OsStr::new("d")),
                Err(Errno::NOSYS)
            );
            assert!(root.join("c").exists() && !root.join("d").exists());
            std::fs::remove_dir_all(root).unwrap();
        });
        // Native again on this thread: the kernel's exclusive rename.
        let root = crate::testutil::tempdir("native-rename");
        std::fs::create_dir(root.join("staging")).unwrap();
        let native =
            crate::fs::rename::rename_no_replace(&root.join("staging"), &root.join("f.lock"));
        assert_eq!(
            native.primitive,
            crate::fs::rename::Primitive::Renameat2Noreplace
        );
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn forced_portable_opens_walk_without_following_and_pin_without_o_path() {
        use crate::fs::fsx;
        use crate::testutil::tempdir;
        use rustix::fs::FileType;
        crate::sys::platform::forcing_portable(|| {
            assert_eq!(crate::sys::platform::path_only_flag(), None);
            let root = tempdir("portable-open");
            std::fs::create_dir(root.join("real")).unwrap();
            std::os::unix::fs::symlink(root.join("real"), root.join("alias")).unwrap();
            assert!(fsx::open_dir_nofollow(&root.join("real")).is_ok());
            for through_link in [root.join("alias"), root.join("alias/x")] {
                let refused = fsx::open_dir_nofollow(&through_link).unwrap_err();
                assert!(
                    matches!(refused, Errno::LOOP | Errno::NOTDIR),
                    "{refused:?}"
                );
            }
            let dir = fsx::open_dir_nofollow(&root).unwrap();
            // A pin of a symlink is refused (no O_PATH to open the link itself).
            let link = fsx::open_pin(dir.as_fd(), std::ffi::OsStr::new("alias")).unwrap_err();
            assert!(matches!(link, Errno::LOOP | Errno::NOTDIR), "{link:?}");
            // A FIFO is pinned at once, without waiting for a writer.
            crate::testutil::make_fifo(&root.join("fifo"));
            let fifo = fsx::open_pin(dir.as_fd(), std::ffi::OsStr::new("fifo")).unwrap();
            assert_eq!(
                fsx::kind_of(&rustix::fs::fstat(&fifo).unwrap()),
                FileType::Fifo
            );
            let real = fsx::open_pin(dir.as_fd(), std::ffi::OsStr::new("real")).unwrap();
            assert_eq!(
                fsx::kind_of(&rustix::fs::fstat(&real).unwrap()),
                FileType::Directory
            );
            assert!(fsx::open_anchor(&root.join("real")).is_ok());
            std::fs::remove_dir_all(root).unwrap();
        });
    }

    #[test]
    fn forced_portable_has_no_kernel_watch_and_the_held_watch_runs_on_a_timer() {
        use crate::sys::wait::{self, HeldEvents, Watch};
        use crate::testutil::tempdir;
        crate::sys::platform::forcing_portable(|| {
            let root = tempdir("portable-wait");
            std::fs::create_dir(root.join("f.lock")).unwrap();
            let dir = crate::fs::fsx::open_dir_nofollow(&root).unwrap();
            assert!(Watch::new(dir.as_fd(), std::ffi::OsStr::new("f.lock")).is_none());
            let mut child = Command::new("sleep").arg("30").spawn().unwrap();
            assert!(matches!(
                wait::holder_exit(child.id()),
                HolderExit::Unwatched
            ));
            child.kill().unwrap();
            child.wait().unwrap();
            let lock = crate::fs::fsx::open_dir_nofollow(&root.join("f.lock")).unwrap();
            let held = HeldEvents::new(dir.as_fd(), lock.as_fd());
            assert!(matches!(held, HeldEvents::Timer));
            // Nothing happens, and the wait still ends: the timer.
            let stop = Wake::with_fd(wake_fd());
            held.wait(stop.pollable().unwrap()).unwrap();
            std::fs::remove_dir_all(root).unwrap();
        });
    }
}
