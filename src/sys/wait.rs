//! Waiting without polling.
//!
//! The head waiter of a contended lock (the first of this process's queue
//! for it) sleeps on its own thread until one of three things happens:
//! - its [`Watch`] sees the lock's name leave the parent directory (or the
//!   directory itself move or be deleted);
//! - the holder exits ([`holder_exit`]);
//! - its [`Wake`] is signalled by the rest of the process (its queue's
//!   hand-over, its cancellation, its environment's teardown).
//!
//! How the kernel tells is the platform's ([`crate::sys::platform`]):
//! inotify (the process's one instance), a pidfd and an eventfd in one
//! `epoll_wait` on Linux; one `kqueue` on
//! macOS; nothing but a pipe under the portable mechanisms, where the
//! timer does all the work. The timeout (`retryDelayMs`) is the fallback
//! everywhere: for filesystems that send no events (network mounts) and
//! for anything missed. Nothing of a wait runs on the runtime's thread,
//! and the head's thread is its own, so one lock's slow filesystem delays
//! no other lock. Waiters behind the head wait for their turn on the
//! runtime, holding no thread.

use std::ffi::OsStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

#[cfg(unix)]
use rustix::event::{PollFd, PollFlags, Timespec};
use tokio::sync::Notify;

use crate::sys::os::fd::{AsFd, BorrowedFd, OwnedFd};
use crate::sys::os::io::Errno;
#[cfg(unix)]
use crate::sys::platform::portable;
use crate::sys::platform::{self, native};

/// The descriptor a sleeping head polls for this process's signals.
pub enum WakeFd {
    /// An eventfd (Linux): one descriptor, a counter.
    #[cfg(target_os = "linux")]
    Counter(OwnedFd),
    /// A pipe (macOS, portable): readable while a byte is in it.
    #[cfg(unix)]
    Pipe { read: OwnedFd, write: OwnedFd },
    /// A manual-reset event (Windows): set while a signal is pending.
    #[cfg(windows)]
    Event(OwnedFd),
}

/// How a waiter is woken by others in its process: a [`Notify`] for a
/// waiter on the runtime, and a descriptor for a head sleeping in the
/// kernel.
pub struct Wake {
    notify: Notify,
    /// Made by [`Wake::arm`] when the waiter first contends (most
    /// acquisitions never wait: they pay for no descriptor). Inner `None`
    /// if none could be made (descriptors exhausted): the head then sees
    /// signals at its next timeout.
    fd: OnceLock<Option<WakeFd>>,
}

impl Wake {
    pub fn new() -> Arc<Wake> {
        Arc::new(Wake {
            notify: Notify::new(),
            fd: OnceLock::new(),
        })
    }

    /// A wake already armed with `fd` (for tests of one mechanism).
    #[cfg(test)]
    pub fn with_fd(fd: Option<WakeFd>) -> Arc<Wake> {
        let wake = Wake::new();
        let _ = wake.fd.set(fd);
        wake
    }

    /// Makes the descriptor a head sleeps on. Called before the head first
    /// looks at anything it could be signalled about, so no signal is
    /// missed: one sent earlier is seen in what the head then looks at.
    pub fn arm(&self) {
        self.fd.get_or_init(|| {
            #[cfg(unix)]
            if platform::is_portable() {
                return portable::wake_fd();
            }
            native::wake_fd()
        });
    }

    fn fd(&self) -> Option<&WakeFd> {
        self.fd.get().and_then(Option::as_ref)
    }

    /// The armed descriptor, readable while a signal is pending, for a
    /// thread that waits on it beside descriptors of its own; `None` if
    /// none could be made.
    pub fn pollable(&self) -> Option<BorrowedFd<'_>> {
        self.fd().map(|fd| match fd {
            #[cfg(target_os = "linux")]
            WakeFd::Counter(fd) => fd.as_fd(),
            #[cfg(unix)]
            WakeFd::Pipe { read, .. } => read.as_fd(),
            #[cfg(windows)]
            WakeFd::Event(event) => event.as_fd(),
        })
    }

    /// Whether a signal is pending on the armed descriptor (not consumed).
    pub fn is_signalled(&self) -> bool {
        let Some(fd) = self.pollable() else {
            return false;
        };
        #[cfg(unix)]
        {
            let mut fds = [PollFd::from_borrowed_fd(fd, PollFlags::IN)];
            rustix::event::poll(&mut fds, Some(&timespec(Duration::ZERO)))
                .is_ok_and(|ready| ready > 0)
        }
        #[cfg(windows)]
        native::event_is_set(fd)
    }

    /// Wakes the waiter, wherever it waits (a stored permit if it is not
    /// waiting yet).
    pub fn signal(&self) {
        self.notify.notify_one();
        // A full counter or pipe (EAGAIN) means it is signalled already.
        match self.fd() {
            #[cfg(target_os = "linux")]
            Some(WakeFd::Counter(fd)) => {
                let _ = rustix::io::write(fd, &1u64.to_ne_bytes());
            }
            #[cfg(unix)]
            Some(WakeFd::Pipe { write, .. }) => {
                let _ = rustix::io::write(write, &[1]);
            }
            #[cfg(windows)]
            Some(WakeFd::Event(event)) => native::set_event(event.as_fd()),
            None => {}
        }
    }

    /// Resolves at the next signal (at once for one stored since the last).
    pub async fn notified(&self) {
        self.notify.notified().await;
    }

    /// Consumes pending signals, so the next sleep waits for a new one.
    pub fn drain(&self) {
        match self.fd() {
            #[cfg(target_os = "linux")]
            Some(WakeFd::Counter(fd)) => {
                let mut buf = [0u8; 8];
                let _ = rustix::io::read(fd, &mut buf);
            }
            #[cfg(unix)]
            Some(WakeFd::Pipe { read, .. }) => {
                let mut buf = [0u8; 512];
                // Non-blocking: EAGAIN once empty.
                while matches!(rustix::io::read(read, &mut buf), Ok(n) if n > 0) {}
            }
            #[cfg(windows)]
            Some(WakeFd::Event(event)) => native::reset_event(event.as_fd()),
            None => {}
        }
    }
}

/// A kernel watch on one directory for one name in it going away, owned by
/// one head waiter. There is none under the portable mechanisms.
pub struct Watch {
    inner: native::NameWatch,
    /// The directory watched (device, inode), to tell whether a later
    /// attempt's parent is still it.
    dir: (u64, u64),
}

impl Watch {
    /// Watches `name` in the directory `dir`; `None` if the kernel cannot
    /// (descriptors or watches exhausted) or the mechanism has no watch
    /// (portable): the timer covers, and the next attempt tries again.
    pub fn new(dir: BorrowedFd<'_>, name: &OsStr) -> Option<Watch> {
        if platform::is_portable() {
            return None;
        }
        let dir_id = identity(dir)?;
        Some(Watch {
            inner: native::NameWatch::new(dir, name)?,
            dir: dir_id,
        })
    }

    /// Whether this watches the directory `dir` (by identity).
    pub fn watches(&self, dir: BorrowedFd<'_>) -> bool {
        identity(dir) == Some(self.dir)
    }
}

fn identity(dir: BorrowedFd<'_>) -> Option<(u64, u64)> {
    let stat = crate::sys::os::fs::fstat(dir).ok()?;
    Some((platform::dev_of(&stat), platform::ino_of(&stat)))
}

/// What wakes a head for its lock's name, for `NODE_DEBUG=exactlock`.
pub const NAME_EVENTS: &str = native::NAME_EVENTS;
/// What wakes a head for its holder's exit, for `NODE_DEBUG=exactlock`.
pub const HOLDER_EVENTS: &str = native::HOLDER_EVENTS;

/// What tells a waiter that a holder exited: the platform's (Linux: a
/// pidfd; macOS: the holder's pid, for `EVFILT_PROC`).
pub type HolderWatch = native::HolderWatch;

/// How a waiter learns that the holder exited.
pub enum HolderExit {
    /// Kernel notice of the exit.
    Watch(HolderWatch),
    /// The process is already gone: look again at once.
    AlreadyGone,
    /// No notice (not a local process, no kernel support, the portable
    /// mechanisms): the timer covers.
    Unwatched,
}

/// How to learn that the local process `pid` exits.
pub fn holder_exit(pid: u32) -> HolderExit {
    #[cfg(unix)]
    if platform::is_portable() {
        return portable::holder_exit(pid);
    }
    native::holder_exit(pid)
}

/// Sleeps on the calling thread until the watched name (or its directory)
/// changes, the holder exits, `wake` is signalled, or `timeout` passes,
/// whichever comes first. Events for other names in the directory are
/// slept through: they cost a wake-up of a sleeping thread (on Linux, one
/// of the process's, whichever the kernel picks), never an attempt.
/// Spurious returns are harmless: the caller looks.
pub fn sleep(
    watch: Option<&Watch>,
    holder: Option<&HolderWatch>,
    wake: &Wake,
    timeout: Duration,
) -> Woken {
    #[cfg(unix)]
    if platform::is_portable() {
        // Neither exists under the portable mechanisms.
        debug_assert!(watch.is_none() && holder.is_none());
        return portable::sleep(wake, timeout);
    }
    native::sleep(watch.map(|watch| &watch.inner), holder, wake, timeout)
}

/// What ended a head's [`sleep`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Woken {
    /// The lock's name went away (or its directory moved): look again.
    NameChanged,
    /// The kernel's notice of the holder's exit.
    HolderExited,
    /// This process signalled (a hand-over, an abort, a teardown).
    Signalled,
    /// `retryDelayMs` passed with no event (or the wait failed).
    Timeout,
}

impl Woken {
    pub fn as_str(self) -> &'static str {
        match self {
            Woken::NameChanged => "the lock's name changed",
            Woken::HolderExited => "the holder exited",
            Woken::Signalled => "a signal from this process",
            Woken::Timeout => "the fallback timer",
        }
    }
}

/// What wakes the watch of a held lock (`release.signal`,
/// `onCompromised`): the kernel's events about its name, its directory
/// and its files, or, where there are none, a short timer.
pub enum HeldEvents {
    Kernel(native::HeldEvents),
    Timer,
}

impl HeldEvents {
    /// Events about the lock name in `parent` and the published directory
    /// `root`.
    ///
    /// When the kernel will not give a watch (the user's inotify instances
    /// or watches used up — `fs.inotify.max_user_instances` counts every
    /// process of the uid —, descriptors exhausted), the timer takes its
    /// place: the lock is already published, and a watch that looks every
    /// [`portable::HELD_LOOK_EVERY`] still reports a loss, where failing
    /// would leave the caller a lock it has no release for.
    pub fn new(parent: BorrowedFd<'_>, root: BorrowedFd<'_>) -> HeldEvents {
        if platform::is_portable() {
            return HeldEvents::Timer;
        }
        match native::HeldEvents::new(parent, root) {
            Ok(events) => HeldEvents::Kernel(events),
            Err(errno) => {
                crate::debug!(
                    "no kernel watch for a held lock ({}): looking every {} ms instead",
                    crate::sys::errno::errno_code(errno),
                    HELD_LOOK_EVERY.as_millis()
                );
                HeldEvents::Timer
            }
        }
    }

    /// Sleeps until something may have changed, or `stop` is readable;
    /// `Err` when waiting fails for good.
    pub fn wait(&self, stop: BorrowedFd<'_>) -> Result<(), Errno> {
        match self {
            HeldEvents::Kernel(events) => events.wait(stop),
            #[cfg(unix)]
            HeldEvents::Timer => portable::held_wait(stop),
            #[cfg(windows)]
            HeldEvents::Timer => native::held_wait(stop, HELD_LOOK_EVERY),
        }
    }
}

/// How often the watch of a held lock looks when the kernel gives no
/// events (the portable mechanisms, or watches used up).
#[cfg(unix)]
pub use portable::HELD_LOOK_EVERY;
#[cfg(windows)]
pub const HELD_LOOK_EVERY: Duration = Duration::from_millis(100);

/// A cancellation flag that an acquisition can also await, and that wakes
/// the waiter it is attached to.
#[derive(Default)]
pub struct Cancel {
    cancelled: AtomicBool,
    notify: Notify,
    wake: Mutex<Option<Arc<Wake>>>,
}

impl Cancel {
    pub fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::SeqCst)
    }

    /// Cancels, and wakes whoever awaits [`Cancel::cancelled`] and the
    /// attached waiter.
    pub fn cancel(&self) {
        self.cancelled.store(true, Ordering::SeqCst);
        self.notify.notify_waiters();
        if let Some(wake) = self.wake.lock().unwrap_or_else(|p| p.into_inner()).as_ref() {
            wake.signal();
        }
    }

    /// Attaches the waiter to wake on cancellation.
    pub fn attach(&self, wake: Arc<Wake>) {
        *self.wake.lock().unwrap_or_else(|p| p.into_inner()) = Some(wake);
    }

    /// Resolves once cancelled (at once if it already is).
    pub async fn cancelled(&self) {
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            // Registered before the check, so a cancel in between is seen.
            notified.as_mut().enable();
            if self.is_cancelled() {
                return;
            }
            notified.await;
        }
    }
}

/// Waits on the runtime until `wake` is signalled, `cancel` fires or
/// `delay` passes.
pub async fn until_signalled(wake: &Wake, cancel: &Cancel, delay: Duration) {
    tokio::select! {
        _ = wake.notified() => {}
        _ = cancel.cancelled() => {}
        _ = tokio::time::sleep(delay) => {}
    }
}

/// A `poll` timeout.
#[cfg(unix)]
pub fn timespec(duration: Duration) -> Timespec {
    Timespec {
        tv_sec: i64::try_from(duration.as_secs()).unwrap_or(i64::MAX),
        tv_nsec: i64::from(duration.subsec_nanos()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn a_signal_wakes_a_sleeping_head_and_the_timeout_is_the_fallback() {
        let wake = Wake::new();
        wake.arm();
        let signaller = wake.clone();
        let thread = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            signaller.signal();
        });
        assert_eq!(
            sleep(None, None, &wake, Duration::from_secs(30)),
            Woken::Signalled
        );
        thread.join().unwrap();
        let started = Instant::now();
        assert_eq!(
            sleep(None, None, &wake, Duration::from_millis(30)),
            Woken::Timeout
        );
        assert!(started.elapsed() >= Duration::from_millis(25));
    }
}
