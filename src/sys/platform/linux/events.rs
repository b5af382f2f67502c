//! Waiting without polling.
//!
//! The head waiter of a contended lock (the first of this process's queue
//! for it) sleeps in `poll(2)` on its own thread, on three descriptors:
//! - a [`Watch`]: its own inotify instance watching the lock's parent for
//!   the lock name being removed or renamed away, and for the directory
//!   itself moving or being deleted (replaced at its path);
//! - the holder's pidfd, readable once the holder has exited;
//! - its [`Wake`]: an eventfd the rest of the process signals (its queue's
//!   hand-over, its cancellation, its environment's teardown).
//!
//! The `poll` timeout (`retryDelayMs`) is the fallback for filesystems that
//! send no events (network mounts) and for anything missed. A wake-up costs
//! one thread switch, as a kernel event reaches the thread that acts on it
//! directly; nothing of a wait runs on the runtime's thread, and the head's
//! thread is its own, so one lock's slow filesystem delays no other lock.
//! Waiters behind the head wait for their turn on the runtime, holding no
//! thread.

use std::ffi::{OsStr, OsString};
use std::mem::MaybeUninit;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use rustix::event::{EventfdFlags, PollFd, PollFlags, Timespec};
use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};
use rustix::io::Errno;
use rustix::process::{Pid, PidfdFlags};
use tokio::sync::Notify;

/// How a waiter is woken by others in its process: a [`Notify`] for a
/// waiter on the runtime, and an eventfd for a head sleeping in `poll`.
pub struct Wake {
    notify: Notify,
    /// Made by [`Wake::arm`] when the waiter first contends (most
    /// acquisitions never wait: they pay for no eventfd). Inner `None` if
    /// none could be made (descriptors exhausted): the head then sees
    /// signals at its next timeout.
    fd: OnceLock<Option<OwnedFd>>,
}

impl Wake {
    pub fn new() -> Arc<Wake> {
        Arc::new(Wake {
            notify: Notify::new(),
            fd: OnceLock::new(),
        })
    }

    /// Makes the eventfd a head sleeps on. Called before the head first
    /// looks at anything it could be signalled about, so no signal is
    /// missed: one sent earlier is seen in what the head then looks at.
    pub fn arm(&self) {
        self.fd.get_or_init(|| {
            rustix::event::eventfd(0, EventfdFlags::NONBLOCK | EventfdFlags::CLOEXEC).ok()
        });
    }

    fn fd(&self) -> Option<&OwnedFd> {
        self.fd.get().and_then(Option::as_ref)
    }

    /// The armed eventfd, for a thread that polls it beside descriptors of
    /// its own; `None` if none could be made.
    pub fn pollable(&self) -> Option<BorrowedFd<'_>> {
        self.fd().map(|fd| fd.as_fd())
    }

    /// Whether a signal is pending on the armed eventfd (not consumed).
    pub fn is_signalled(&self) -> bool {
        let Some(fd) = self.fd() else {
            return false;
        };
        let mut fds = [PollFd::new(fd, PollFlags::IN)];
        let zero = Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        rustix::event::poll(&mut fds, Some(&zero)).is_ok_and(|ready| ready > 0)
    }

    /// Wakes the waiter, wherever it waits (a stored permit if it is not
    /// waiting yet).
    pub fn signal(&self) {
        self.notify.notify_one();
        if let Some(fd) = self.fd() {
            // A full counter (impossible in practice) means it is signalled.
            let _ = rustix::io::write(fd, &1u64.to_ne_bytes());
        }
    }

    /// Resolves at the next signal (at once for one stored since the last).
    pub async fn notified(&self) {
        self.notify.notified().await;
    }

    fn drain(&self) {
        if let Some(fd) = self.fd() {
            let mut buf = [0u8; 8];
            let _ = rustix::io::read(fd, &mut buf);
        }
    }
}

/// An inotify watch on one directory for one name in it going away, owned
/// by one head waiter.
pub struct Watch {
    fd: OwnedFd,
    /// The directory watched (device, inode), to tell whether a later
    /// attempt's parent is still it.
    dir: (u64, u64),
    name: OsString,
}

impl Watch {
    /// Watches `name` in the directory `dir`; `None` if the kernel cannot
    /// (no inotify, descriptors or watches exhausted): the timer covers,
    /// and the next attempt tries again.
    pub fn new(dir: BorrowedFd<'_>, name: &OsStr) -> Option<Watch> {
        let stat = rustix::fs::fstat(dir).ok()?;
        let fd = inotify::init(CreateFlags::NONBLOCK | CreateFlags::CLOEXEC).ok()?;
        // inotify takes a path; the magic link of our descriptor names
        // exactly the directory we opened, whatever happened to its path.
        let path = format!("/proc/self/fd/{}", dir.as_raw_fd());
        // The name deleted or moved away; and the directory itself moved or
        // deleted (replaced by another at its path): the waiter looks again,
        // and its next attempt watches whatever the path names now.
        let mask = WatchFlags::DELETE
            | WatchFlags::MOVED_FROM
            | WatchFlags::MOVE_SELF
            | WatchFlags::DELETE_SELF
            | WatchFlags::ONLYDIR;
        inotify::add_watch(&fd, path, mask).ok()?;
        #[allow(clippy::unnecessary_cast)]
        let dir = (stat.st_dev as u64, stat.st_ino as u64);
        Some(Watch {
            fd,
            dir,
            name: name.to_os_string(),
        })
    }

    /// Whether this watches the directory `dir` (by identity).
    pub fn watches(&self, dir: BorrowedFd<'_>) -> bool {
        #[allow(clippy::unnecessary_cast)]
        rustix::fs::fstat(dir)
            .is_ok_and(|stat| (stat.st_dev as u64, stat.st_ino as u64) == self.dir)
    }

    /// Reads what is queued: whether any event concerns the name or the
    /// directory itself (or events were lost).
    fn relevant_events(&self) -> bool {
        let mut buffer = [MaybeUninit::<u8>::uninit(); 4096];
        let mut reader = inotify::Reader::new(&self.fd, &mut buffer);
        let mut relevant = false;
        loop {
            match reader.next() {
                Ok(event) => {
                    let everyone = event.events().intersects(
                        ReadFlags::QUEUE_OVERFLOW
                            | ReadFlags::IGNORED
                            | ReadFlags::MOVE_SELF
                            | ReadFlags::DELETE_SELF,
                    );
                    let ours = event
                        .file_name()
                        .is_some_and(|name| name.to_bytes() == self.name.as_bytes());
                    relevant |= everyone || ours;
                }
                Err(Errno::INTR) => continue,
                // EAGAIN: drained; anything else: the timer covers.
                Err(_) => return relevant,
            }
        }
    }
}

/// How a waiter learns that the holder exited.
pub enum HolderExit {
    /// A pidfd, readable once the process has exited.
    Watch(OwnedFd),
    /// The process is already gone: look again at once.
    AlreadyGone,
    /// No pidfd (not a local process, no kernel support): the timer covers.
    Unwatched,
}

/// Opens a pidfd for `pid`.
pub fn holder_exit(pid: u32) -> HolderExit {
    let Some(pid) = i32::try_from(pid).ok().and_then(Pid::from_raw) else {
        return HolderExit::Unwatched;
    };
    match rustix::process::pidfd_open(pid, PidfdFlags::NONBLOCK) {
        Ok(fd) => HolderExit::Watch(fd),
        Err(Errno::SRCH) => HolderExit::AlreadyGone,
        Err(_) => HolderExit::Unwatched,
    }
}

/// Sleeps on the calling thread until the watched name (or its directory)
/// changes, the holder exits, `wake` is signalled, or `timeout` passes,
/// whichever comes first. Events for other names in the directory (the
/// user's own files written and renamed next to the lock, other waiters'
/// staging) are read and slept through: they cost a wake-up of this
/// thread, never an attempt. Spurious returns are harmless: the caller looks.
pub fn sleep(
    watch: Option<&Watch>,
    holder: Option<BorrowedFd<'_>>,
    wake: &Wake,
    timeout: Duration,
) -> Woken {
    let deadline = std::time::Instant::now() + timeout;
    let woken = loop {
        let mut fds = Vec::with_capacity(3);
        if let Some(watch) = watch {
            fds.push(PollFd::new(&watch.fd, PollFlags::IN));
        }
        let holder_at = holder.map(|holder| {
            fds.push(PollFd::from_borrowed_fd(holder, PollFlags::IN));
            fds.len() - 1
        });
        if let Some(fd) = wake.fd() {
            fds.push(PollFd::new(fd, PollFlags::IN));
        }
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let left = Timespec {
            tv_sec: i64::try_from(left.as_secs()).unwrap_or(i64::MAX),
            tv_nsec: i64::from(left.subsec_nanos()),
        };
        match rustix::event::poll(&mut fds, Some(&left)) {
            Err(Errno::INTR) => continue,
            // Timed out, or poll failed: the caller looks.
            Ok(0) | Err(_) => break Woken::Timeout,
            Ok(_) => {}
        }
        // Anything but the watch (the holder exited, a signal) ends the
        // sleep; the watch only when an event concerns the lock's name.
        let holder_exited = holder_at.is_some_and(|at| !fds[at].revents().is_empty());
        let watch_only = watch.is_some() && fds.iter().skip(1).all(|fd| fd.revents().is_empty());
        drop(fds);
        if holder_exited {
            break Woken::HolderExited;
        }
        if !watch_only {
            break Woken::Signalled;
        }
        if watch.is_some_and(Watch::relevant_events) {
            break Woken::NameChanged;
        }
    };
    // Consume what woke us, so the next sleep waits for something new
    // (the pidfd stays readable once its process exited; it is not
    // waited on again).
    wake.drain();
    if let Some(watch) = watch {
        let _ = watch.relevant_events();
    }
    woken
}

/// What ended a head's [`sleep`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Woken {
    /// The lock's name went away (or its directory moved): look again.
    NameChanged,
    /// The holder's pidfd: it exited.
    HolderExited,
    /// This process signalled (a hand-over, an abort, a teardown).
    Signalled,
    /// `retryDelayMs` passed with no event (or `poll` failed).
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::fsx;
    use crate::testutil::tempdir;
    use rustix::fd::AsFd;
    use std::time::Instant;

    #[test]
    fn a_head_wakes_for_its_name_going_away_and_not_for_other_names() {
        let root = tempdir("wait");
        std::fs::create_dir(root.join("f.lock")).unwrap();
        std::fs::create_dir(root.join("other.lock")).unwrap();
        let dir = fsx::open_dir_nofollow(&root).unwrap();
        let watch = Watch::new(dir.as_fd(), OsStr::new("f.lock")).unwrap();
        assert!(watch.watches(dir.as_fd()));
        let wake = Wake::new();
        wake.arm();
        std::fs::remove_dir(root.join("other.lock")).unwrap();
        assert!(!watch.relevant_events());
        std::fs::rename(root.join("f.lock"), root.join("moved")).unwrap();
        let started = Instant::now();
        sleep(Some(&watch), None, &wake, Duration::from_secs(5));
        assert!(started.elapsed() < Duration::from_secs(2));
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn a_head_sleeps_through_events_for_other_names_in_its_directory() {
        let root = tempdir("wait-others");
        std::fs::create_dir(root.join("f.lock")).unwrap();
        let dir = fsx::open_dir_nofollow(&root).unwrap();
        let watch = Watch::new(dir.as_fd(), OsStr::new("f.lock")).unwrap();
        let wake = Wake::new();
        wake.arm();
        let busy = root.clone();
        // A neighbour writes files the way editors and config writers do
        // (a temporary name renamed over the real one, a file deleted),
        // then the lock's name goes away after 300 ms.
        let neighbour = std::thread::spawn(move || {
            let started = Instant::now();
            while started.elapsed() < Duration::from_millis(300) {
                std::fs::write(busy.join("config.json.tmp"), b"{}").unwrap();
                std::fs::rename(busy.join("config.json.tmp"), busy.join("config.json")).unwrap();
                std::fs::remove_file(busy.join("config.json")).unwrap();
                std::thread::sleep(Duration::from_millis(5));
            }
            std::fs::remove_dir(busy.join("f.lock")).unwrap();
        });
        let started = Instant::now();
        sleep(Some(&watch), None, &wake, Duration::from_secs(5));
        let slept = started.elapsed();
        neighbour.join().unwrap();
        assert!(
            slept >= Duration::from_millis(290),
            "woke after {slept:?} for another name"
        );
        assert!(
            slept < Duration::from_secs(2),
            "missed the lock's name going away"
        );
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn a_signal_wakes_a_sleeping_head_and_the_timeout_is_the_fallback() {
        let wake = Wake::new();
        wake.arm();
        let signaller = wake.clone();
        let thread = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            signaller.signal();
        });
        let started = Instant::now();
        sleep(None, None, &wake, Duration::from_secs(5));
        assert!(started.elapsed() < Duration::from_secs(2));
        thread.join().unwrap();
        let started = Instant::now();
        sleep(None, None, &wake, Duration::from_millis(30));
        assert!(started.elapsed() >= Duration::from_millis(25));
    }
}
