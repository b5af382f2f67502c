//! The process's one inotify instance, shared by every watch it makes.
//!
//! The kernel limits inotify *instances* per user
//! (`fs.inotify.max_user_instances`, 128 by default), counted over every
//! process of the uid: editors, test runners and file watchers draw on the
//! same budget. An instance per waiting head and per watched held lock
//! would use it up with a hundred locks in one process, and from then on
//! other programs' `fs.watch` fail with `EMFILE`. So a process makes one
//! instance, when a watch is first needed, and keeps it; if the kernel
//! refuses it, the next watch asks again.
//!
//! A watch is a [`Subscription`]: the watch descriptors it added, each
//! with the events it wants from it, and a flag set when an event concerns
//! it. The kernel gives one watch descriptor per directory per instance;
//! its mask is the union of what its subscriptions asked for
//! (`IN_MASK_ADD`), each subscription filters by its own, and the
//! descriptor is removed when its last subscription goes.
//!
//! Who reads: every thread sleeping on a subscription polls the shared
//! descriptor beside its own; the first to take the hub's lock reads
//! everything queued and marks the subscriptions the events concern. A
//! subscription marked by another thread is told through its own eventfd
//! (its "kick"), which its thread polls too: an event read while that
//! thread was not in `poll` (looking at the lock, or between its last
//! check and its `poll`) is never lost. The thread an event concerns is
//! woken by the kernel itself, as with an instance of its own.

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::mem::MaybeUninit;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use rustix::event::EventfdFlags;
use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};
use rustix::io::Errno;

/// Events every subscription of a watch descriptor is told of: the watch
/// ended (`IN_IGNORED`: its directory deleted, its filesystem unmounted).
const ENDS_THE_WATCH: ReadFlags = ReadFlags::IGNORED;

/// The one instance, and who listens to it.
struct Hub {
    fd: OwnedFd,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    next_id: u64,
    /// How many subscriptions use each watch descriptor.
    users: HashMap<i32, usize>,
    subscribers: HashMap<u64, Subscriber>,
}

struct Subscriber {
    /// The watch descriptors, each with the events wanted from it.
    wants: Vec<(i32, ReadFlags)>,
    /// Only events naming this entry (and those about the directory
    /// itself); `None`: every event wanted.
    name: Option<OsString>,
    /// Its eventfd, shared with the [`Subscription`].
    kick: Arc<OwnedFd>,
    /// An event concerned it since it last took its events.
    pending: bool,
    /// Its kick was written (and must be read) since then.
    kicked: bool,
}

impl Subscriber {
    fn concerned_by(&self, wd: i32, events: ReadFlags, name: Option<&[u8]>) -> bool {
        if events.contains(ReadFlags::QUEUE_OVERFLOW) {
            // Events were lost: everyone looks.
            return true;
        }
        self.wants.iter().any(|&(watched, wanted)| {
            watched == wd
                && (events.intersects(ENDS_THE_WATCH)
                    || (events.intersects(wanted)
                        && match (&self.name, name) {
                            (None, _) => true,
                            // About the directory itself (moved, deleted).
                            (Some(_), None) => true,
                            (Some(ours), Some(name)) => ours.as_bytes() == name,
                        }))
        })
    }
}

static HUB: OnceLock<Hub> = OnceLock::new();

/// The hub, made on first use; `Err` when the kernel refuses an instance
/// (not remembered: the next watch asks again).
fn hub() -> Result<&'static Hub, Errno> {
    if let Some(hub) = HUB.get() {
        return Ok(hub);
    }
    let fd = inotify::init(CreateFlags::NONBLOCK | CreateFlags::CLOEXEC)?;
    // Two threads racing here each made one: the loser's is closed.
    Ok(HUB.get_or_init(|| Hub {
        fd,
        state: Mutex::default(),
    }))
}

impl Hub {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Reads every queued event and marks (and kicks) the subscriptions
    /// they concern; `reader` is not kicked (it looks at its flag next).
    fn dispatch(&self, state: &mut State, reader: u64) {
        let mut buffer = [MaybeUninit::<u8>::uninit(); 4096];
        let mut events = inotify::Reader::new(&self.fd, &mut buffer);
        loop {
            let event = match events.next() {
                Ok(event) => event,
                Err(Errno::INTR) => continue,
                // EAGAIN: drained; anything else: the timers cover.
                Err(_) => return,
            };
            let (wd, flags) = (event.wd(), event.events());
            let name = event.file_name().map(|name| name.to_bytes());
            for (&id, subscriber) in state.subscribers.iter_mut() {
                if subscriber.pending || !subscriber.concerned_by(wd, flags, name) {
                    continue;
                }
                subscriber.pending = true;
                if id != reader {
                    let _ = rustix::io::write(&*subscriber.kick, &1u64.to_ne_bytes());
                    subscriber.kicked = true;
                }
            }
            if flags.contains(ReadFlags::IGNORED) {
                // The kernel removed this watch descriptor.
                state.users.remove(&wd);
            }
        }
    }
}

/// A watch: what it asked the shared instance for, until dropped.
pub struct Subscription {
    hub: &'static Hub,
    id: u64,
    kick: Arc<OwnedFd>,
}

impl Subscription {
    /// Subscribes to `watches` (a directory, the events wanted from it),
    /// every event or, with `name`, only those naming it and those about
    /// the directories themselves.
    pub fn new(
        watches: &[(BorrowedFd<'_>, WatchFlags)],
        name: Option<&OsStr>,
    ) -> Result<Subscription, Errno> {
        let hub = hub()?;
        let kick = Arc::new(rustix::event::eventfd(
            0,
            EventfdFlags::NONBLOCK | EventfdFlags::CLOEXEC,
        )?);
        let mut state = hub.state();
        let mut wants = Vec::with_capacity(watches.len());
        for &(dir, mask) in watches {
            match add_watch(&hub.fd, dir, mask) {
                Ok(wd) => {
                    *state.users.entry(wd).or_default() += 1;
                    wants.push((wd, ReadFlags::from_bits_retain(mask.bits())));
                }
                Err(errno) => {
                    forget(hub, &mut state, &wants);
                    return Err(errno);
                }
            }
        }
        let id = state.next_id;
        state.next_id += 1;
        state.subscribers.insert(
            id,
            Subscriber {
                wants,
                name: name.map(OsStr::to_os_string),
                kick: kick.clone(),
                pending: false,
                kicked: false,
            },
        );
        Ok(Subscription { hub, id, kick })
    }

    /// The descriptors a sleeping thread polls: the shared instance's, and
    /// its own kick.
    pub fn pollables(&self) -> [BorrowedFd<'_>; 2] {
        [self.hub.fd.as_fd(), self.kick.as_fd()]
    }

    /// Reads what is queued, and takes this subscription's mark: whether an
    /// event concerned it since the last call.
    pub fn take_events(&self) -> bool {
        let mut state = self.hub.state();
        self.hub.dispatch(&mut state, self.id);
        let Some(me) = state.subscribers.get_mut(&self.id) else {
            return false;
        };
        if me.kicked {
            let mut counter = [0u8; 8];
            let _ = rustix::io::read(&*self.kick, &mut counter);
            me.kicked = false;
        }
        std::mem::take(&mut me.pending)
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let mut state = self.hub.state();
        if let Some(me) = state.subscribers.remove(&self.id) {
            forget(self.hub, &mut state, &me.wants);
        }
    }
}

/// Gives back the watch descriptors in `wants`: each removed from the
/// kernel when no other subscription uses it.
fn forget(hub: &Hub, state: &mut State, wants: &[(i32, ReadFlags)]) {
    for &(wd, _) in wants {
        let Some(users) = state.users.get_mut(&wd) else {
            // Ended by the kernel already (`IN_IGNORED`).
            continue;
        };
        *users -= 1;
        if *users == 0 {
            state.users.remove(&wd);
            // Its `IN_IGNORED`, queued by this removal, concerns nobody.
            let _ = inotify::remove_watch(&hub.fd, wd);
        }
    }
}

/// inotify takes a path; the magic link of our descriptor names exactly
/// the directory we opened, whatever happened to its path. The mask is
/// added to what other subscriptions asked of the same directory.
fn add_watch(events: &OwnedFd, dir: BorrowedFd<'_>, mask: WatchFlags) -> Result<i32, Errno> {
    let path = format!("/proc/self/fd/{}", dir.as_raw_fd());
    inotify::add_watch(
        events,
        path,
        mask | WatchFlags::ONLYDIR | WatchFlags::MASK_ADD,
    )
}

/// How many inotify instances this process has open (for tests).
#[cfg(test)]
pub(super) fn instances_open() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(Result::ok)
        .filter(|entry| {
            std::fs::read_link(entry.path())
                .is_ok_and(|target| target.as_os_str() == "anon_inode:inotify")
        })
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::fsx;
    use crate::testutil::tempdir;
    use rustix::event::{PollFd, PollFlags, Timespec};

    const GONE: WatchFlags = WatchFlags::DELETE.union(WatchFlags::MOVED_FROM);

    fn watch(dir: &OwnedFd, name: &str) -> Subscription {
        Subscription::new(&[(dir.as_fd(), GONE)], Some(OsStr::new(name))).unwrap()
    }

    fn kicked(subscription: &Subscription) -> bool {
        let [_, kick] = subscription.pollables();
        let mut fds = [PollFd::from_borrowed_fd(kick, PollFlags::IN)];
        rustix::event::poll(&mut fds, Some(&Timespec::default())).unwrap() == 1
    }

    #[test]
    fn watches_of_one_directory_are_told_only_of_their_own_name() {
        let root = tempdir("watches-names");
        std::fs::create_dir(root.join("a.lock")).unwrap();
        std::fs::create_dir(root.join("b.lock")).unwrap();
        let dir = fsx::open_dir_nofollow(&root).unwrap();
        let (a, b) = (watch(&dir, "a.lock"), watch(&dir, "b.lock"));
        std::fs::remove_dir(root.join("b.lock")).unwrap();
        // `a` reads the queue: the event is `b`'s, and `b` is kicked, so a
        // thread of `b`'s between its last look and its `poll` still wakes.
        assert!(!a.take_events());
        assert!(kicked(&b));
        assert!(b.take_events());
        assert!(!kicked(&b), "the kick is read with the mark");
        assert!(!b.take_events(), "taken once");
        std::fs::rename(root.join("a.lock"), root.join("moved")).unwrap();
        assert!(a.take_events());
        assert!(!b.take_events());
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn a_directory_watched_twice_stays_watched_until_its_last_watch_goes() {
        let root = tempdir("watches-shared");
        std::fs::create_dir(root.join("f.lock")).unwrap();
        let dir = fsx::open_dir_nofollow(&root).unwrap();
        let first = watch(&dir, "f.lock");
        let second = watch(&dir, "f.lock");
        let wd = first.hub.state().subscribers[&first.id].wants[0].0;
        assert_eq!(second.hub.state().subscribers[&second.id].wants[0].0, wd);
        drop(first);
        std::fs::remove_dir(root.join("f.lock")).unwrap();
        assert!(
            second.take_events(),
            "the kernel's watch outlived the first"
        );
        let hub = second.hub;
        drop(second);
        assert!(
            !hub.state().users.contains_key(&wd),
            "removed with its last watch"
        );
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn each_watch_of_a_directory_is_told_only_the_events_it_asked_for() {
        let root = tempdir("watches-masks");
        let dir = fsx::open_dir_nofollow(&root).unwrap();
        // One wants every creation; the other, one name going away. The
        // kernel's mask is their union.
        let every = Subscription::new(&[(dir.as_fd(), WatchFlags::CREATE)], None).unwrap();
        let gone = watch(&dir, "f.lock");
        std::fs::create_dir(root.join("f.lock")).unwrap();
        assert!(every.take_events());
        assert!(!gone.take_events(), "a creation is not the name going away");
        std::fs::remove_dir(root.join("f.lock")).unwrap();
        assert!(gone.take_events());
        assert!(!every.take_events(), "a deletion is not a creation");
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn the_end_of_a_watch_tells_everyone_on_it() {
        let root = tempdir("watches-ignored");
        let inner = root.join("inner");
        std::fs::create_dir(&inner).unwrap();
        let dir = fsx::open_dir_nofollow(&inner).unwrap();
        let gone = watch(&dir, "f.lock");
        // The kernel ends the watch once the directory's inode goes: when
        // its last descriptor closes.
        drop(dir);
        std::fs::remove_dir(&inner).unwrap();
        assert!(gone.take_events(), "IN_IGNORED concerns the name's watch");
        let wd = gone.hub.state().subscribers[&gone.id].wants[0].0;
        assert!(!gone.hub.state().users.contains_key(&wd));
        drop(gone);
        std::fs::remove_dir_all(root).unwrap();
    }
}
