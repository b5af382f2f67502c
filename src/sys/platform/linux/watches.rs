//! The process's one inotify instance, shared by every watch it makes.
//!
//! The kernel limits inotify *instances* per user
//! (`fs.inotify.max_user_instances`, 128 by default), counted over every
//! process of the uid: editors, test runners and file watchers draw on the
//! same budget. An instance per waiting head and per watched held lock
//! would use it up with a hundred locks in one process, and from then on
//! other programs' `fs.watch` fail with `EMFILE`. So a process makes one
//! instance, when a watch is first needed, and keeps it for its life (one
//! of the uid's budget per process that ever waited or watched); if the
//! kernel refuses it, the next watch asks again.
//!
//! A watch is a [`Subscription`]: the watch descriptors it added, each
//! with the events it wants from it, and a flag set when an event concerns
//! it. The kernel gives one watch descriptor per directory per instance;
//! its mask is the union of what every subscription asked of it since it
//! was made (`IN_MASK_ADD`: it never narrows while the descriptor lives),
//! each subscription filters by its own, and the descriptor is removed
//! when its last subscription goes. The queue (`max_queued_events`) is the
//! process's: when it overflows, every subscription is told, and looks.
//!
//! Who reads: a thread sleeping on a subscription waits in `epoll_wait` on
//! an epoll of the subscription's own, which holds the shared instance
//! (`EPOLLEXCLUSIVE`: an event wakes one sleeping thread, not all of them),
//! the subscription's eventfd (its "kick") and whatever else that sleep
//! waits for. The thread woken, and any that looks before sleeping, reads
//! everything queued under the hub's lock and marks the subscriptions the
//! events concern, kicking those of other threads: an event read while its
//! thread was not waiting (looking at the lock, or between its last check
//! and its wait) is never lost. A lone waiter is woken by the kernel
//! itself, as with an instance of its own; among many, the one the event
//! concerns may be woken through its kick by the one the kernel chose.
//!
//! Adding a watch (`inotify_add_watch`) checks the directory's permissions,
//! which on a network mount is a call to its server: it is made outside
//! the hub's lock, so that a stalled mount delays no other watch's events.
//! While it runs, the directory is reserved, so that a watch of the same
//! directory going away meanwhile does not remove the descriptor the add
//! is about to share.

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::mem::MaybeUninit;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use rustix::event::EventfdFlags;
use rustix::event::epoll::{self, EventData, EventFlags};
use rustix::fd::{BorrowedFd, OwnedFd};
use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};
use rustix::io::Errno;

/// Events every subscription of a watch descriptor is told of: the watch
/// ended (`IN_IGNORED`: its directory deleted, its filesystem unmounted).
const ENDS_THE_WATCH: ReadFlags = ReadFlags::IGNORED;

/// A directory, as the kernel tells one from another (device, inode).
type DirId = (u64, u64);

/// The one instance, and who listens to it.
struct Hub {
    fd: OwnedFd,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    next_id: u64,
    /// How many subscriptions use each watch descriptor, and its directory.
    users: HashMap<i32, (usize, DirId)>,
    /// Directories whose watch is being added outside the lock, and by how
    /// many: their descriptor is not removed meanwhile.
    adding: HashMap<DirId, usize>,
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
    /// Nothing here blocks: the instance is non-blocking.
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

/// The tag of the shared instance and of the kick in a subscription's epoll;
/// what a sleep adds is tagged from [`FIRST_EXTRA`].
const SHARED: u64 = 0;
const KICK: u64 = 1;
const FIRST_EXTRA: u64 = 2;

/// What ended a [`Subscription::wait`].
pub struct Ready {
    /// The shared instance or the kick: [`Subscription::take_events`] tells.
    pub events: bool,
    /// Which of the extra descriptors, by their index (bit i).
    pub extra: u32,
}

/// A watch: what it asked the shared instance for, until dropped.
pub struct Subscription {
    hub: &'static Hub,
    id: u64,
    kick: Arc<OwnedFd>,
    epoll: OwnedFd,
}

impl Subscription {
    /// Subscribes to `watches` (a directory, the events wanted from it),
    /// every event or, with `name`, only those naming it and those about
    /// the directories themselves.
    pub fn new(
        watches: &[(BorrowedFd<'_>, WatchFlags)],
        name: Option<&OsStr>,
    ) -> Result<Subscription, Errno> {
        Self::new_in(hub()?, watches, name)
    }

    fn new_in(
        hub: &'static Hub,
        watches: &[(BorrowedFd<'_>, WatchFlags)],
        name: Option<&OsStr>,
    ) -> Result<Subscription, Errno> {
        let kick = Arc::new(rustix::event::eventfd(
            0,
            EventfdFlags::NONBLOCK | EventfdFlags::CLOEXEC,
        )?);
        let epoll = epoll::create(epoll::CreateFlags::CLOEXEC)?;
        epoll::add(
            &epoll,
            &hub.fd,
            EventData::new_u64(SHARED),
            EventFlags::IN | EventFlags::EXCLUSIVE,
        )?;
        epoll::add(&epoll, &*kick, EventData::new_u64(KICK), EventFlags::IN)?;
        let dirs = watches
            .iter()
            .map(|&(dir, _)| {
                let stat = rustix::fs::fstat(dir)?;
                #[allow(clippy::useless_conversion)] // dev_t, ino_t per target
                Ok((u64::from(stat.st_dev), u64::from(stat.st_ino)))
            })
            .collect::<Result<Vec<DirId>, Errno>>()?;
        {
            let mut state = hub.state();
            for dir in &dirs {
                *state.adding.entry(*dir).or_default() += 1;
            }
        }
        // Outside the lock: see the module's doc.
        let added: Vec<Result<i32, Errno>> = watches
            .iter()
            .map(|&(dir, mask)| add_watch(&hub.fd, dir, mask))
            .collect();
        let mut state = hub.state();
        for dir in &dirs {
            if let Some(adding) = state.adding.get_mut(dir) {
                *adding -= 1;
                if *adding == 0 {
                    state.adding.remove(dir);
                }
            }
        }
        let mut wants = Vec::with_capacity(watches.len());
        let mut failed = None;
        for ((&(_, mask), added), dir) in watches.iter().zip(added).zip(&dirs) {
            match added {
                Ok(wd) => {
                    let users = state.users.entry(wd).or_insert((0, *dir));
                    users.0 += 1;
                    wants.push((wd, ReadFlags::from_bits_retain(mask.bits())));
                }
                Err(errno) => failed = Some(errno),
            }
        }
        if failed.is_some() {
            forget(hub, &mut state, &wants);
        }
        // A watch of a reserved directory that left meanwhile kept its
        // descriptor for this add: removed now if nobody uses it (the add
        // failed, or the kernel gave the directory another descriptor).
        let unused: Vec<i32> = state
            .users
            .iter()
            .filter(|(_, (users, dir))| *users == 0 && !state.adding.contains_key(dir))
            .map(|(&wd, _)| wd)
            .collect();
        for wd in unused {
            state.users.remove(&wd);
            let _ = inotify::remove_watch(&hub.fd, wd);
        }
        if let Some(errno) = failed {
            return Err(errno);
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
        Ok(Subscription {
            hub,
            id,
            kick,
            epoll,
        })
    }

    /// Waits until the shared instance has something to read, this
    /// subscription is kicked, one of `extra` is readable, or `timeout`
    /// passes (`None`: no timeout). Whoever returns with `events` set reads
    /// them next ([`Subscription::take_events`]): the kernel woke this
    /// thread alone for them.
    pub fn wait(
        &self,
        extra: &[BorrowedFd<'_>],
        timeout: Option<Duration>,
    ) -> Result<Ready, Errno> {
        let mut added = 0;
        let result = (|| {
            for (at, fd) in extra.iter().enumerate() {
                epoll::add(
                    &self.epoll,
                    fd,
                    EventData::new_u64(FIRST_EXTRA + at as u64),
                    EventFlags::IN,
                )?;
                added += 1;
            }
            let mut events = [MaybeUninit::<epoll::Event>::uninit(); 8];
            let timeout = timeout.map(crate::sys::wait::timespec);
            let (ready, _) = epoll::wait(&self.epoll, &mut events, timeout.as_ref())?;
            let mut answer = Ready {
                events: false,
                extra: 0,
            };
            for event in ready.iter() {
                match event.data.u64() {
                    SHARED | KICK => answer.events = true,
                    tag => answer.extra |= 1 << (tag - FIRST_EXTRA),
                }
            }
            Ok(answer)
        })();
        for fd in &extra[..added] {
            let _ = epoll::delete(&self.epoll, fd);
        }
        result
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
/// kernel when no other subscription uses it and no add of its directory
/// is under way (`inotify_rm_watch` does not block).
fn forget(hub: &Hub, state: &mut State, wants: &[(i32, ReadFlags)]) {
    for &(wd, _) in wants {
        let Some((users, dir)) = state.users.get_mut(&wd) else {
            // Ended by the kernel already (`IN_IGNORED`).
            continue;
        };
        *users -= 1;
        if *users == 0 && !state.adding.contains_key(dir) {
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
    use rustix::fd::AsFd;

    const GONE: WatchFlags = WatchFlags::DELETE.union(WatchFlags::MOVED_FROM);

    fn watch(dir: &OwnedFd, name: &str) -> Subscription {
        Subscription::new(&[(dir.as_fd(), GONE)], Some(OsStr::new(name))).unwrap()
    }

    fn kicked(subscription: &Subscription) -> bool {
        let mut fds = [PollFd::new(&*subscription.kick, PollFlags::IN)];
        rustix::event::poll(&mut fds, Some(&Timespec::default())).unwrap() == 1
    }

    /// How often the calling thread has been switched out to sleep.
    fn sleeps_of_this_thread() -> usize {
        let status = std::fs::read_to_string("/proc/thread-self/status").unwrap();
        let line = status
            .lines()
            .find_map(|line| line.strip_prefix("voluntary_ctxt_switches:"))
            .unwrap();
        line.trim().parse().unwrap()
    }

    #[test]
    fn an_event_wakes_one_sleeping_thread_not_every_one() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let root = tempdir("watches-herd");
        let busy_dir = root.join("busy");
        std::fs::create_dir(&busy_dir).unwrap();
        // Someone watches the busy directory's lock name, and is not asleep.
        // An instance of its own: other tests' events would wake its
        // sleepers too.
        let hub: &'static Hub = Box::leak(Box::new(Hub {
            fd: inotify::init(CreateFlags::NONBLOCK | CreateFlags::CLOEXEC).unwrap(),
            state: Mutex::default(),
        }));
        let watch = move |dir: &OwnedFd, name: &str| {
            Subscription::new_in(hub, &[(dir.as_fd(), GONE)], Some(OsStr::new(name))).unwrap()
        };
        let busy = watch(&fsx::open_dir_nofollow(&busy_dir).unwrap(), "f.lock");
        let stop = Arc::new(
            rustix::event::eventfd(0, EventfdFlags::NONBLOCK | EventfdFlags::CLOEXEC).unwrap(),
        );
        let asleep = Arc::new(AtomicUsize::new(0));
        let sleepers: Vec<_> = (0..20)
            .map(|i| {
                let dir = root.join(format!("d{i}"));
                std::fs::create_dir(&dir).unwrap();
                let (stop, asleep) = (stop.clone(), asleep.clone());
                std::thread::spawn(move || {
                    let mine = watch(&fsx::open_dir_nofollow(&dir).unwrap(), "f.lock");
                    let before = sleeps_of_this_thread();
                    asleep.fetch_add(1, Ordering::SeqCst);
                    loop {
                        let ready = mine.wait(&[stop.as_fd()], None).unwrap();
                        if ready.extra != 0 {
                            return sleeps_of_this_thread() - before;
                        }
                        assert!(!mine.take_events(), "nothing here concerns it");
                    }
                })
            })
            .collect();
        while asleep.load(Ordering::SeqCst) < 20 {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
        // 200 events for names nobody asked about, one at a time.
        for k in 0..200 {
            let other = busy_dir.join(format!("x{k}"));
            std::fs::create_dir(&other).unwrap();
            std::fs::remove_dir(&other).unwrap();
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
        rustix::io::write(&*stop, &1u64.to_ne_bytes()).unwrap();
        let sleeps: usize = sleepers.into_iter().map(|s| s.join().unwrap()).sum();
        eprintln!("20 sleepers woken {sleeps} times by 200 events none of them wanted");
        // Each event wakes one of them (fewer when events come together):
        // all twenty would be about 4000. The stop wakes each once.
        assert!(sleeps <= 20 + 600, "{sleeps} wake-ups for 200 events");
        assert!(!busy.take_events());
        std::fs::remove_dir_all(root).unwrap();
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
