//! Linux's wake-ups: inotify for a name leaving a directory (the
//! process's one instance, [`super::watches`]), a pidfd for a holder's exit, an
//! eventfd for this process's own signals, all waited on together in one
//! `poll(2)`.

use std::ffi::OsStr;
use std::time::{Duration, Instant};

use rustix::event::{EventfdFlags, PollFd, PollFlags};
use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::fs::inotify::WatchFlags;
use rustix::io::Errno;
use rustix::process::PidfdFlags;

use super::watches::Subscription;

use crate::sys::process::valid_pid;
use crate::sys::wait::{HolderExit, Wake, WakeFd, Woken, timespec};

/// A watch on one directory for one name in it going away, owned by one
/// head waiter: a subscription to the process's inotify instance
/// ([`super::watches`]).
pub struct NameWatch {
    subscription: Subscription,
}

impl NameWatch {
    /// Watches `name` in the directory `dir`; `None` if the kernel cannot
    /// (no inotify, descriptors or watches exhausted): the timer covers,
    /// and the next attempt tries again.
    pub fn new(dir: BorrowedFd<'_>, name: &OsStr) -> Option<NameWatch> {
        // The name deleted or moved away; and the directory itself moved or
        // deleted (replaced by another at its path): the waiter looks again,
        // and its next attempt watches whatever the path names now.
        let mask = WatchFlags::DELETE
            | WatchFlags::MOVED_FROM
            | WatchFlags::MOVE_SELF
            | WatchFlags::DELETE_SELF;
        let subscription = Subscription::new(&[(dir, mask)], Some(name)).ok()?;
        Some(NameWatch { subscription })
    }

    /// Reads what is queued: whether any event concerned the name or the
    /// directory itself (or events were lost) since the last look.
    pub fn relevant_events(&self) -> bool {
        self.subscription.take_events()
    }
}

/// A pidfd of the holder, readable once it has exited.
pub type HolderWatch = OwnedFd;

/// Opens a pidfd for `pid`.
pub fn holder_exit(pid: u32) -> HolderExit {
    let Some(pid) = valid_pid(pid) else {
        return HolderExit::Unwatched;
    };
    match rustix::process::pidfd_open(pid, PidfdFlags::NONBLOCK) {
        Ok(fd) => HolderExit::Watch(fd),
        Err(Errno::SRCH) => HolderExit::AlreadyGone,
        Err(_) => HolderExit::Unwatched,
    }
}

/// An eventfd: one descriptor, a counter that any thread bumps.
pub fn wake_fd() -> Option<WakeFd> {
    rustix::event::eventfd(0, EventfdFlags::NONBLOCK | EventfdFlags::CLOEXEC)
        .ok()
        .map(WakeFd::Counter)
}

/// Sleeps on the calling thread until the watched name (or its directory)
/// changes, the holder exits, `wake` is signalled, or `timeout` passes,
/// whichever comes first. Events for other names in the directory (the
/// user's own files written and renamed next to the lock, other waiters'
/// staging), and events of other watches of the process, are read and
/// slept through: each costs a wake-up of one sleeping thread of the
/// process (the kernel's pick, `EPOLLEXCLUSIVE`), never an attempt.
/// Spurious returns are harmless: the caller looks.
pub fn sleep(
    watch: Option<&NameWatch>,
    holder: Option<&HolderWatch>,
    wake: &Wake,
    timeout: Duration,
) -> Woken {
    let deadline = Instant::now() + timeout;
    // Whether the process's signal was pending when the sleep ended.
    let mut signalled = false;
    let woken = match watch {
        Some(watch) => loop {
            // An event another thread read for us (see
            // [`super::watches`]) is taken here, before sleeping, as one
            // queued for us is.
            if watch.relevant_events() {
                break Woken::NameChanged;
            }
            let holder_at = holder.map(|_| 0);
            let extra: Vec<BorrowedFd<'_>> = holder
                .map(|holder| holder.as_fd())
                .into_iter()
                .chain(wake.pollable())
                .collect();
            let wake_at = wake.pollable().map(|_| extra.len() - 1);
            let left = deadline.saturating_duration_since(Instant::now());
            let ready = match watch.subscription.wait(&extra, Some(left)) {
                Err(Errno::INTR) => continue,
                // The watch cannot be waited on (the kernel refused to add
                // a descriptor to its epoll): the rest of the sleep without
                // it, never a spin.
                Err(_) => break sleep_without_watch(holder, wake, deadline, &mut signalled),
                Ok(ready) => ready,
            };
            crate::sys::trace::stamp("waiter: its sleep returns");
            let holder_exited = holder_at.is_some_and(|at| ready.extra & (1 << at) != 0);
            signalled = wake_at.is_some_and(|at| ready.extra & (1 << at) != 0);
            if holder_exited {
                break Woken::HolderExited;
            }
            if signalled {
                break Woken::Signalled;
            }
            if !ready.events {
                break Woken::Timeout;
            }
            // The watch: the next turn of the loop reads what came.
        },
        None => sleep_without_watch(holder, wake, deadline, &mut signalled),
    };
    // Consume what woke us, so the next sleep waits for something new
    // (the pidfd stays readable once its process exited; it is not
    // waited on again). The watch was read to its end already when its
    // event ended the sleep, and the signal needs no read unless it was
    // pending: one sent since is seen by the next sleep, which then ends
    // at once (harmless: the caller looks).
    if signalled {
        wake.drain();
    }
    // A name event that came after the wait timed out is read here: it is
    // not thrown away (a synchronous waiter sleeps again after a timed-out
    // slice, and would miss the release until its next look). And what the
    // kernel woke this thread alone for is read whatever ended the sleep:
    // it may concern another thread's watch.
    if woken != Woken::NameChanged
        && let Some(watch) = watch
        && watch.relevant_events()
        && woken == Woken::Timeout
    {
        return Woken::NameChanged;
    }
    woken
}

/// [`sleep`] without a name watch, until `deadline`: the holder's exit and
/// the process's signal, in one `poll`.
fn sleep_without_watch(
    holder: Option<&HolderWatch>,
    wake: &Wake,
    deadline: Instant,
    signalled: &mut bool,
) -> Woken {
    loop {
        let mut fds = Vec::with_capacity(2);
        let holder_at = holder.map(|holder| {
            fds.push(PollFd::new(holder, PollFlags::IN));
            fds.len() - 1
        });
        let wake_at = wake.pollable().map(|fd| {
            fds.push(PollFd::from_borrowed_fd(fd, PollFlags::IN));
            fds.len() - 1
        });
        let left = timespec(deadline.saturating_duration_since(Instant::now()));
        match rustix::event::poll(&mut fds, Some(&left)) {
            Err(Errno::INTR) => continue,
            // Timed out, or poll failed: the caller looks.
            Ok(0) | Err(_) => return Woken::Timeout,
            Ok(_) => {}
        }
        let holder_exited = holder_at.is_some_and(|at| !fds[at].revents().is_empty());
        *signalled = wake_at.is_some_and(|at| !fds[at].revents().is_empty());
        if holder_exited {
            return Woken::HolderExited;
        }
        if *signalled {
            return Woken::Signalled;
        }
    }
}

/// The events a held lock's watch wakes for: its name leaving or arriving
/// in the parent, its directory moved or deleted, a file in it created,
/// removed or written.
pub struct HeldEvents {
    subscription: Subscription,
}

impl HeldEvents {
    pub fn new(parent: BorrowedFd<'_>, root: BorrowedFd<'_>) -> Result<HeldEvents, Errno> {
        let subscription = Subscription::new(
            &[
                (
                    parent,
                    WatchFlags::DELETE
                        | WatchFlags::MOVED_FROM
                        | WatchFlags::CREATE
                        | WatchFlags::MOVED_TO,
                ),
                (
                    root,
                    WatchFlags::DELETE_SELF
                        | WatchFlags::MOVE_SELF
                        | WatchFlags::DELETE
                        | WatchFlags::MOVED_FROM
                        | WatchFlags::CREATE
                        | WatchFlags::MOVED_TO
                        | WatchFlags::CLOSE_WRITE,
                ),
            ],
            None,
        )?;
        Ok(HeldEvents { subscription })
    }

    /// Sleeps until an event concerns it or `stop` is readable (or, when
    /// the kernel will not let it wait on its watch, for
    /// `HELD_LOOK_EVERY`); never fails.
    pub fn wait(&self, stop: BorrowedFd<'_>) -> Result<(), Errno> {
        loop {
            if self.subscription.take_events() {
                return Ok(());
            }
            match self.subscription.wait(&[stop], None) {
                Ok(ready) if ready.extra != 0 => {
                    // What the kernel woke this thread for may concern
                    // another watch: read before leaving.
                    if ready.events {
                        self.subscription.take_events();
                    }
                    return Ok(());
                }
                Ok(_) | Err(Errno::INTR) => {}
                // The watch cannot be waited on (the kernel refused to add
                // `stop` to its epoll): a look every `HELD_LOOK_EVERY`
                // instead, never an end of the watch.
                Err(_) => {
                    let mut fds = [PollFd::from_borrowed_fd(stop, PollFlags::IN)];
                    let every = timespec(crate::sys::wait::HELD_LOOK_EVERY);
                    let _ = rustix::event::poll(&mut fds, Some(&every));
                    self.subscription.take_events();
                    return Ok(());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::fsx;
    use crate::testutil::tempdir;
    use rustix::fd::AsFd;

    #[test]
    fn two_hundred_waiting_heads_and_held_locks_use_one_inotify_instance() {
        // `fs.inotify.max_user_instances` (128 by default) counts every
        // process of the uid: an instance per watch would use it up, and
        // other programs' `fs.watch` would fail with EMFILE.
        let root = tempdir("wait-many");
        let mut dirs = Vec::new();
        for i in 0..200 {
            let dir = root.join(format!("d{i}"));
            std::fs::create_dir_all(dir.join("f.lock")).unwrap();
            dirs.push((
                fsx::open_dir_nofollow(&dir).unwrap(),
                fsx::open_dir_nofollow(&dir.join("f.lock")).unwrap(),
            ));
        }
        let heads: Vec<_> = dirs
            .iter()
            .map(|(dir, _)| NameWatch::new(dir.as_fd(), OsStr::new("f.lock")).expect("a watch"))
            .collect();
        let held: Vec<_> = dirs
            .iter()
            .map(|(dir, lock)| HeldEvents::new(dir.as_fd(), lock.as_fd()).expect("a watch"))
            .collect();
        // Other tests of this process may hold a probe's instance meanwhile.
        let open = super::super::watches::instances_open();
        assert!(
            (1..10).contains(&open),
            "{open} inotify instances for 400 watches"
        );
        // Each is still told of its own name alone.
        std::fs::remove_dir(root.join("d7/f.lock")).unwrap();
        let wake = Wake::new();
        wake.arm();
        assert_eq!(
            sleep(Some(&heads[7]), None, &wake, Duration::from_secs(5)),
            Woken::NameChanged
        );
        assert!(heads.iter().all(|head| !head.relevant_events()));
        drop((heads, held));
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn a_head_wakes_for_its_name_going_away_and_not_for_other_names() {
        let root = tempdir("wait");
        std::fs::create_dir(root.join("f.lock")).unwrap();
        std::fs::create_dir(root.join("other.lock")).unwrap();
        let dir = fsx::open_dir_nofollow(&root).unwrap();
        let watch = NameWatch::new(dir.as_fd(), OsStr::new("f.lock")).unwrap();
        let wake = Wake::new();
        wake.arm();
        std::fs::remove_dir(root.join("other.lock")).unwrap();
        assert!(!watch.relevant_events());
        std::fs::rename(root.join("f.lock"), root.join("moved")).unwrap();
        let woken = sleep(Some(&watch), None, &wake, Duration::from_secs(5));
        assert_eq!(woken, Woken::NameChanged);
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn a_head_sleeps_through_events_for_other_names_in_its_directory() {
        let root = tempdir("wait-others");
        std::fs::create_dir(root.join("f.lock")).unwrap();
        let dir = fsx::open_dir_nofollow(&root).unwrap();
        let watch = NameWatch::new(dir.as_fd(), OsStr::new("f.lock")).unwrap();
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
        let woken = sleep(Some(&watch), None, &wake, Duration::from_secs(30));
        let slept = started.elapsed();
        neighbour.join().unwrap();
        // Woken by the name itself, and not before the neighbour was done
        // (which is what sleeping through the other names means).
        assert_eq!(woken, Woken::NameChanged);
        assert!(
            slept >= Duration::from_millis(290),
            "woke after {slept:?} for another name"
        );
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn a_holders_exit_wakes_a_sleeping_head() {
        let mut child = std::process::Command::new("sleep")
            .arg("0.2")
            .spawn()
            .unwrap();
        let HolderExit::Watch(pidfd) = holder_exit(child.id()) else {
            panic!("a pidfd for a running child");
        };
        let wake = Wake::new();
        wake.arm();
        let woken = sleep(None, Some(&pidfd), &wake, Duration::from_secs(30));
        assert_eq!(woken, Woken::HolderExited);
        child.wait().unwrap();
        assert!(matches!(holder_exit(child.id()), HolderExit::AlreadyGone));
    }
}
