//! The in-process table: which lock generations this process holds, and the
//! FIFO queue of this process's waiters for each lock.
//!
//! A pid only proves that *a* process exists; this table proves that *this*
//! process created a given generation. It is what lets a second acquisition
//! in the same process wait instead of stealing, and lets a generation whose
//! release failed be finished later instead of being reclaimed by pid.

use std::collections::{HashMap, VecDeque};
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use crate::sys::os::fd::{BorrowedFd, OwnedFd};
use crate::sys::os::io::Errno;

use crate::fs::fsx;
use crate::fs::tree::TreeSnapshot;
use crate::sys::closer::ClosedLater;
use crate::sys::wait::Wake;

/// The canonical name of a lock: the identity of its parent directory
/// (device, inode, birth time: see [`fsx::DirIdentity`]) plus its final
/// component. Aliased paths (a symlinked parent) name one lock; a parent
/// replaced by another directory at the same path — even one that got the
/// old inode number back — names another lock; and no path has to be read
/// back from the kernel (no `/proc/self/fd`, no ` (deleted)` ambiguity).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LockKey {
    pub parent: fsx::DirIdentity,
    pub name: OsString,
}

impl LockKey {
    /// The key of `name` in the open directory `parent`, and the parent's
    /// link count as the same call saw it (see
    /// [`fsx::dir_identity_and_links`]).
    pub fn with_parent_links(parent: BorrowedFd<'_>, name: &OsStr) -> Result<(Self, u64), Errno> {
        let (identity, links) = fsx::dir_identity_and_links(parent)?;
        let key = LockKey {
            parent: identity,
            name: name.to_os_string(),
        };
        Ok((key, links))
    }
}

/// Where a generation lives on disk and what it published.
#[derive(Debug)]
pub struct Generation {
    pub id: u64,
    pub key: LockKey,
    /// The lock's path as the caller named it, for messages.
    pub lock_path: PathBuf,
    /// The parent directory, opened when the lock was published; release
    /// works relative to it even if the path is renamed meanwhile. One
    /// descriptor for every generation held in that directory (see
    /// [`share_parent`]).
    pub parent: Arc<ClosedLater>,
    pub parent_path: PathBuf,
    pub lock_name: OsString,
    /// The published directory, held open so its inode number cannot be
    /// recycled for a copy while this generation lives; its dev/ino are
    /// what release compares against. Both are closed off the thread that
    /// lets the generation go (see [`ClosedLater`]).
    pub root: ClosedLater,
    /// The tree as published, what release removes if nothing changed it.
    pub published: TreeSnapshot,
    /// The exact record bytes this generation wrote.
    pub record_bytes: Vec<u8>,
    /// Whether a release attempt has listed `root` through its own file
    /// offset already (a later attempt rewinds it first). Linux lists so.
    #[cfg(any(target_os = "linux", target_os = "android"))]
    pub root_listed: AtomicBool,
    /// Whether `root`'s `flock` is ours (or the filesystem has none): the
    /// publication takes it and keeps it for the generation's life; a
    /// release that hands over to the exact removal, which takes its turn
    /// through a description of its own, lets go of it.
    pub root_guarded: AtomicBool,
    /// Whether its acquisition waited for another holder: its release
    /// then lets the waiter it wakes run first (see `release`).
    pub waited: bool,
    /// Whether its parent is a directory that earned the inline fast path
    /// (see [`crate::lock::fastpath`]): its release's first attempt may
    /// run on the caller's thread.
    pub releases_inline: bool,
}

/// Where a generation is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    Held,
    Releasing,
    /// A release failed with a transient error; the lock stays fenced to
    /// this generation until a retry succeeds.
    ReleasePending,
}

struct Entry {
    generation: Arc<Generation>,
    status: Status,
}

/// One waiter's place in its lock's queue.
pub struct Ticket {
    pub key: LockKey,
    pub id: u64,
}

#[derive(Default)]
struct Table {
    generations: HashMap<u64, Entry>,
    queues: HashMap<LockKey, VecDeque<(u64, Arc<Wake>)>>,
    /// Acquisitions on their way to a queue, by lock name: each one's
    /// sequence and the lock path it was called with (see [`Arrival`]).
    arriving: HashMap<OsString, Vec<(u64, PathBuf)>>,
    /// The descriptors of the directories held generations live in, one per
    /// directory (see [`share_parent`]).
    parents: HashMap<fsx::DirIdentity, std::sync::Weak<ClosedLater>>,
    /// Synchronous acquisitions blocked in [`same_path_still_arriving`]:
    /// only then does an arrival's end signal [`ARRIVAL_ENDED`] (a
    /// syscall, even with nobody waiting).
    awaiting_arrivals: usize,
}

impl Table {
    /// Whether an acquisition of a lock named `name` called before
    /// `sequence` is still on its way to its queue (see [`Arrival`]).
    fn arrives_before(&self, name: &OsStr, sequence: u64) -> bool {
        self.earlier_arrivals(name, sequence).next().is_some()
    }

    /// The lock paths of the acquisitions of a lock named `name` called
    /// before `sequence` that are still on their way to their queues.
    fn earlier_arrivals(&self, name: &OsStr, sequence: u64) -> impl Iterator<Item = &Path> {
        self.arriving
            .get(name)
            .into_iter()
            .flatten()
            .filter(move |(s, _)| *s < sequence)
            .map(|(_, path)| path.as_path())
    }
}

fn table() -> MutexGuard<'static, Table> {
    static TABLE: OnceLock<Mutex<Table>> = OnceLock::new();
    // A panic while holding the lock leaves the data consistent (every
    // mutation is a single insert/remove), so a poisoned lock is usable.
    TABLE
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Signalled, with the table's lock, whenever an [`Arrival`] ends: what a
/// synchronous acquisition waits on in [`same_path_still_arriving`].
static ARRIVAL_ENDED: Condvar = Condvar::new();

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// A fresh id for a generation or a ticket.
pub fn next_id() -> u64 {
    NEXT_ID.fetch_add(1, Ordering::Relaxed)
}

/// One acquisition between its call and its first place in a queue. Its
/// key is not known until its first attempt has opened the parent (which
/// can take long on a slow mount), but its lock *name* is: and two paths
/// name one lock only if their final names are equal (the key is the
/// parent's identity plus that name). So while it arrives, no acquisition
/// of a lock with that name may go ahead of the queues on the calling
/// thread, nor become the head of a queue if it asked later — it could be
/// for the same lock, and it asked first. A later one called with the same
/// lock path lets it go first for as long as its own budget lasts (it is
/// surely for the same lock: a slow mount is slow for both); one called
/// with another path, for at most [`ARRIVAL_GRACE`] of its own time (a
/// first attempt stuck on a dead mount holds up a queued acquisition of
/// the same name in another directory no longer than that). An acquisition
/// of any other name is not held up by it.
pub struct Arrival {
    name: OsString,
    sequence: u64,
}

/// How long a queued acquisition lets earlier arrivals go first (see
/// [`Arrival`]), from the moment it first finds itself waiting for them.
/// On a local filesystem an arrival reaches its queue within a
/// millisecond; on a slow mount every first attempt is slow, the later
/// one's too, so the earlier one still arrives first.
pub const ARRIVAL_GRACE: Duration = Duration::from_millis(50);

/// Counts the acquisition `sequence` of the lock named `name`, called with
/// the lock path `lock_path`, as arriving until the returned value is
/// dropped.
pub fn arrive(lock_path: &Path, name: &OsStr, sequence: u64) -> Arrival {
    table()
        .arriving
        .entry(name.to_os_string())
        .or_default()
        .push((sequence, lock_path.to_path_buf()));
    Arrival {
        name: name.to_os_string(),
        sequence,
    }
}

impl Drop for Arrival {
    fn drop(&mut self) {
        let mut table = table();
        if let Some(sequences) = table.arriving.get_mut(&self.name) {
            if let Some(at) = sequences.iter().position(|(s, _)| *s == self.sequence) {
                sequences.swap_remove(at);
            }
            if sequences.is_empty() {
                table.arriving.remove(&self.name);
            }
        }
        if table.awaiting_arrivals > 0 {
            ARRIVAL_ENDED.notify_all();
        }
        // A head that asked after this acquisition let it go first (see
        // [`turn`]): it may go on now. (Its own queue's head, when it
        // has just joined, is this acquisition itself: not woken.)
        for (key, queue) in &table.queues {
            if key.name == self.name
                && let Some((head, wake)) = queue.front()
                && *head > self.sequence
            {
                wake.signal();
            }
        }
    }
}

/// Blocks the calling thread until no acquisition of a lock named `name`
/// that was called before `sequence` is still on its way to its queue, or
/// for [`ARRIVAL_GRACE`] at most; then whether one called with `lock_path`
/// itself still is (`true`). For a synchronous acquisition, which never
/// waits for its own process nor overtakes it: such a call is surely for
/// the same lock. One called with another path (the same file name in
/// another directory, as `state.json` often is) is not waited for longer:
/// it may be for the same lock through an alias, and if it is, it reaches
/// its queue, or the lock, as this process's, which the synchronous
/// acquisition looks for at every attempt. The earlier call's first
/// attempt runs off the calling thread, so blocking this one does not keep
/// it from arriving.
pub fn same_path_still_arriving(name: &OsStr, sequence: u64, lock_path: &Path) -> bool {
    let deadline = Instant::now() + ARRIVAL_GRACE;
    let mut table = table();
    loop {
        if !table.arrives_before(name, sequence) {
            return false;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return table
                .earlier_arrivals(name, sequence)
                .any(|path| path == lock_path);
        }
        table.awaiting_arrivals += 1;
        table = ARRIVAL_ENDED
            .wait_timeout(table, left)
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .0;
        table.awaiting_arrivals -= 1;
    }
}

/// Whether anyone of this process queues for `key` (arrivals aside).
pub fn anyone_queued_for(key: &LockKey) -> bool {
    table().queues.contains_key(key)
}

/// Whether an acquisition of `key` may try the disk at once without
/// overtaking anyone of this process: nobody is arriving for a lock of
/// its name and nobody queues for `key`.
pub fn nobody_waits_for(key: &LockKey) -> bool {
    let table = table();
    !table.arriving.contains_key(&key.name) && !table.queues.contains_key(key)
}

/// The descriptor of the directory `identity` that this process's held
/// generations share: the one already held for it, if a generation there
/// still holds it (then `opened` goes to be closed), else `opened`. A lock
/// needs its parent pinned for its release; one descriptor per lock made a
/// process holding many locks in one directory keep as many descriptors
/// for that one directory (10 000 held locks: EMFILE under a limit of
/// 20 000). The pinned directory's inode cannot be recycled while any
/// generation holds it, so its identity names it alone.
pub fn share_parent(identity: &fsx::DirIdentity, opened: OwnedFd) -> Arc<ClosedLater> {
    let mut table = table();
    if let Some(shared) = table.parents.get(identity).and_then(std::sync::Weak::upgrade) {
        drop(ClosedLater::new(opened));
        return shared;
    }
    // Forgotten directories are let go of now and then, not at each release.
    if table.parents.len() >= 1024 {
        table.parents.retain(|_, shared| shared.strong_count() > 0);
    }
    let shared = Arc::new(ClosedLater::new(opened));
    table.parents.insert(*identity, Arc::downgrade(&shared));
    shared
}

/// Records a freshly published generation as held.
pub fn insert_held(generation: Generation) -> Arc<Generation> {
    let generation = Arc::new(generation);
    table().generations.insert(
        generation.id,
        Entry {
            generation: generation.clone(),
            status: Status::Held,
        },
    );
    generation
}

/// Why a release could not start.
#[derive(Debug, PartialEq, Eq)]
pub enum BeginRelease {
    Unknown,
    AlreadyReleasing,
}

/// Marks a held or release-pending generation as releasing.
pub fn begin_release(id: u64) -> Result<Arc<Generation>, BeginRelease> {
    let mut table = table();
    let entry = table
        .generations
        .get_mut(&id)
        .ok_or(BeginRelease::Unknown)?;
    if entry.status == Status::Releasing {
        return Err(BeginRelease::AlreadyReleasing);
    }
    entry.status = Status::Releasing;
    Ok(entry.generation.clone())
}

/// Forgets a generation (released, or no longer ours on disk) and wakes the
/// first waiter of its lock.
pub fn forget(id: u64) {
    let mut table = table();
    if let Some(entry) = table.generations.remove(&id) {
        wake_head(&table, &entry.generation.key);
    }
}

/// A generation whose release has begun ([`begin_release`]) and is being
/// continued elsewhere.
pub fn releasing(id: u64) -> Option<Arc<Generation>> {
    table()
        .generations
        .get(&id)
        .filter(|entry| entry.status == Status::Releasing)
        .map(|entry| entry.generation.clone())
}

/// A generation this process holds (not releasing), to look at.
pub fn held(id: u64) -> Option<Arc<Generation>> {
    table()
        .generations
        .get(&id)
        .filter(|entry| entry.status != Status::Releasing)
        .map(|entry| entry.generation.clone())
}

/// Whether a generation of this process holds the lock `key` (any thread).
pub fn held_here(key: &LockKey) -> bool {
    table()
        .generations
        .values()
        .any(|entry| entry.status == Status::Held && entry.generation.key == *key)
}

/// How many lock directories of this process's generations stand in the
/// directory `parent` (held, or fenced after a failed release).
pub fn generations_in(parent: &fsx::DirIdentity) -> u64 {
    table()
        .generations
        .values()
        .filter(|entry| entry.generation.key.parent == *parent)
        .count() as u64
}

/// Fences a generation whose release failed transiently.
pub fn mark_release_pending(id: u64) {
    if let Some(entry) = table().generations.get_mut(&id) {
        entry.status = Status::ReleasePending;
    }
}

/// Generations of `key` whose release is pending, for an acquirer to retry
/// first. Marks them releasing; the caller must end each with [`forget`] or
/// [`mark_release_pending`].
pub fn take_pending_releases(key: &LockKey) -> Vec<Arc<Generation>> {
    let mut table = table();
    table
        .generations
        .values_mut()
        .filter(|entry| entry.status == Status::ReleasePending && entry.generation.key == *key)
        .map(|entry| {
            entry.status = Status::Releasing;
            entry.generation.clone()
        })
        .collect()
}

/// Joins the queue of `key` at the place of `sequence` (taken when the
/// caller asked for the lock, so waiters are served in the order they
/// asked even if their first attempts run in another order); `wake` is
/// notified when the ticket becomes the head.
pub fn enqueue(key: LockKey, sequence: u64, wake: Arc<Wake>) -> Ticket {
    let mut table = table();
    let queue = table.queues.entry(key.clone()).or_default();
    let at = queue.partition_point(|(queued, _)| *queued < sequence);
    queue.insert(at, (sequence, wake));
    Ticket { key, id: sequence }
}

/// Where a ticket stands in its queue.
#[derive(Debug, PartialEq, Eq)]
pub enum Turn {
    /// First in its queue: it may contend on disk.
    Head,
    /// Behind another acquisition of its queue: it is woken when that one
    /// leaves.
    Behind,
    /// First in its queue, but an acquisition of a lock of its name that
    /// asked before it is still on its way to a queue (it could be this
    /// one, see [`Arrival`]): it is woken when that one gets there. The
    /// caller bounds how long it lets it go first: by its own budget when
    /// one of them was called with its lock path (`same_path`), else by
    /// [`ARRIVAL_GRACE`].
    AfterArrival { same_path: bool },
}

/// Where the ticket, of an acquisition called with `lock_path`, stands in
/// its queue (see [`Turn`]).
pub fn turn(ticket: &Ticket, lock_path: &Path) -> Turn {
    let table = table();
    let first = table
        .queues
        .get(&ticket.key)
        .and_then(|queue| queue.front())
        .is_some_and(|(id, _)| *id == ticket.id);
    if !first {
        Turn::Behind
    } else if table.arrives_before(&ticket.key.name, ticket.id) {
        Turn::AfterArrival {
            same_path: table
                .earlier_arrivals(&ticket.key.name, ticket.id)
                .any(|path| path == lock_path),
        }
    } else {
        Turn::Head
    }
}

/// Leaves the queue; if the ticket was the head, the next waiter is woken.
pub fn dequeue(ticket: &Ticket) {
    let mut table = table();
    let Some(queue) = table.queues.get_mut(&ticket.key) else {
        return;
    };
    let was_head = queue.front().is_some_and(|(id, _)| *id == ticket.id);
    queue.retain(|(id, _)| *id != ticket.id);
    if queue.is_empty() {
        table.queues.remove(&ticket.key);
    } else if was_head {
        wake_head(&table, &ticket.key);
    }
}

fn wake_head(table: &Table, key: &LockKey) {
    if let Some((_, wake)) = table.queues.get(key).and_then(|queue| queue.front()) {
        wake.signal();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A key no other test of this binary uses (its name too: arrivals
    /// are counted by name).
    fn test_key() -> LockKey {
        let id = next_id();
        LockKey {
            parent: fsx::DirIdentity {
                dev: 0,
                ino: id,
                birth_ns: 0,
            },
            name: OsString::from(format!("f-{id}.lock")),
        }
    }

    /// The lock path of `name` that the tests' own acquisitions are
    /// called with, and one of another directory.
    fn here(name: &OsStr) -> PathBuf {
        Path::new("/here").join(name)
    }
    fn elsewhere(name: &OsStr) -> PathBuf {
        Path::new("/elsewhere").join(name)
    }

    /// Whether `wake` is signalled (or holds a permit) within a second.
    fn woken_soon(wake: &Wake) -> bool {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap()
            .block_on(async { tokio::time::timeout(Duration::from_secs(1), wake.notified()).await })
            .is_ok()
    }

    #[test]
    fn nobody_goes_ahead_while_an_acquisition_of_that_name_is_arriving_or_queued() {
        let key = test_key();
        let arriving = arrive(&elsewhere(&key.name), &key.name, next_id());
        assert!(
            !nobody_waits_for(&key),
            "an arriving acquisition of this name may be for this key"
        );
        let ticket = enqueue(key.clone(), next_id(), Wake::new());
        drop(arriving);
        assert!(!nobody_waits_for(&key), "a queued waiter is ahead");
        dequeue(&ticket);
        assert!(!table().queues.contains_key(&key));
    }

    #[test]
    fn an_arrival_for_another_name_holds_nobody_up() {
        let key = test_key();
        let other = OsString::from(format!("other-{}.lock", next_id()));
        let arriving = arrive(&elsewhere(&other), &other, next_id());
        let twice = arrive(&elsewhere(&other), &other, next_id());
        assert!(
            nobody_waits_for(&key),
            "another lock name can never be the same lock"
        );
        drop(arriving);
        assert!(
            table().arriving.contains_key(&other),
            "one is still arriving"
        );
        drop(twice);
        assert!(!table().arriving.contains_key(&other));
    }

    #[test]
    fn a_queued_acquisition_is_no_head_while_one_that_asked_before_it_arrives() {
        let key = test_key();
        let (first, second) = (next_id(), next_id());
        let arriving = arrive(&elsewhere(&key.name), &key.name, first);
        let wake = Wake::new();
        let later = enqueue(key.clone(), second, wake.clone());
        assert_eq!(
            turn(&later, &here(&key.name)),
            Turn::AfterArrival { same_path: false },
            "the earlier caller may be for this lock"
        );
        drop(arriving);
        assert_eq!(
            turn(&later, &here(&key.name)),
            Turn::Head,
            "it went elsewhere (or ended)"
        );
        assert!(
            woken_soon(&wake),
            "the waiting head is woken when the arrival ends"
        );
        // An arrival that asked after the head holds it up no more than
        // any newcomer does.
        let newer = arrive(&elsewhere(&key.name), &key.name, next_id());
        assert_eq!(turn(&later, &here(&key.name)), Turn::Head);
        drop(newer);
        dequeue(&later);
    }

    #[test]
    fn an_earlier_caller_of_the_same_lock_path_is_named_so() {
        let key = test_key();
        let (first, second, third) = (next_id(), next_id(), next_id());
        let same = arrive(&here(&key.name), &key.name, first);
        let other = arrive(&elsewhere(&key.name), &key.name, second);
        let later = enqueue(key.clone(), third, Wake::new());
        assert_eq!(
            turn(&later, &here(&key.name)),
            Turn::AfterArrival { same_path: true },
            "one of them was called with this very path"
        );
        drop(same);
        assert_eq!(
            turn(&later, &here(&key.name)),
            Turn::AfterArrival { same_path: false },
            "the one left may be for this lock, through another path"
        );
        drop(other);
        assert_eq!(turn(&later, &here(&key.name)), Turn::Head);
        dequeue(&later);
    }

    #[test]
    fn a_synchronous_acquisition_learns_when_an_earlier_caller_of_its_name_arrives() {
        let key = test_key();
        let (earlier, ours) = (next_id(), next_id());
        // Nobody on the way: no wait at all; a caller after us is none of
        // our business.
        let ours_path = here(&key.name);
        let later = arrive(&ours_path, &key.name, next_id());
        assert!(!same_path_still_arriving(&key.name, ours, &ours_path));
        drop(later);
        // An earlier caller that reaches its queue (another thread, a moment
        // later): the wait ends when it does, and says so.
        let arriving = arrive(&elsewhere(&key.name), &key.name, earlier);
        let arrived = Arc::new(AtomicBool::new(false));
        let arriver = std::thread::spawn({
            let arrived = arrived.clone();
            move || {
                std::thread::sleep(Duration::from_millis(5));
                arrived.store(true, Ordering::SeqCst);
                drop(arriving);
            }
        });
        let started = Instant::now();
        assert!(
            !same_path_still_arriving(&key.name, ours, &ours_path),
            "it arrived"
        );
        assert!(started.elapsed() < ARRIVAL_GRACE, "not a grace waited out");
        assert!(
            arrived.load(Ordering::SeqCst),
            "the wait lasted until it arrived"
        );
        arriver.join().unwrap();
        // One that does not arrive within the grace: still on its way. Called
        // with this very path, it is surely for the same lock; with another
        // (the same name in another directory), it is not waited for longer.
        let stuck = arrive(&ours_path, &key.name, earlier);
        assert!(same_path_still_arriving(&key.name, ours, &ours_path));
        drop(stuck);
        let elsewhere_stuck = arrive(&elsewhere(&key.name), &key.name, earlier);
        assert!(!same_path_still_arriving(&key.name, ours, &ours_path));
        drop(elsewhere_stuck);
    }

    #[test]
    fn queue_is_fifo_and_wakes_the_next_head() {
        let key = test_key();
        let second_wake = Wake::new();
        // Joined out of order: the queue follows the sequence numbers.
        let third = enqueue(key.clone(), 30, Wake::new());
        let first = enqueue(key.clone(), 10, Wake::new());
        let second = enqueue(key.clone(), 20, second_wake.clone());
        assert_eq!(turn(&first, &here(&key.name)), Turn::Head);
        assert_eq!(turn(&second, &here(&key.name)), Turn::Behind);
        // A waiter behind the head leaving does not disturb the order.
        dequeue(&third);
        dequeue(&first);
        assert_eq!(turn(&second, &here(&key.name)), Turn::Head);
        // The permit stored by dequeue(first) wakes the second waiter at once.
        assert!(woken_soon(&second_wake), "the new head is woken");
        dequeue(&second);
        assert!(!table().queues.contains_key(&key));
    }
}
