//! Taking turns across processes: the waiters that staged their record
//! before us go first.
//!
//! When a release frees the name, every waiter asleep on it wakes, and the
//! first whose thread runs wins the rename. On a busy machine that is
//! neither the one that waited longest nor a fair draw: the scheduler makes
//! the same choices again and again, and one process can lose many
//! hand-offs in a row (measured before this: single waits of 25–46 ms
//! behind sections of about 1 ms, four processes taking turns).
//!
//! So a waiter notes, once, the stagings of its lock that stand before its
//! own — other processes' waiters, each asleep on the name like it — and,
//! woken by the name, lets them go first: while the first of them is still
//! staged at its name, it sleeps again, until an event or the end of that
//! elder's grace ([`GRACE`]), and then makes its attempt (which finds the
//! lock taken when the elder took it). It defers only while the name is
//! free: a name found taken (the elder's publication woke it, as on
//! Windows and macOS, or a newcomer took the free name) sends it to its
//! attempt, which judges the holder and watches its exit. A staging's place
//! is its directory's ctime (set when its record was created), then its
//! name: one total order that every waiter reads the same from the
//! directory. Stagings made within one tick of a coarse clock are ordered
//! by their random names, so the order is the order of asking only to that
//! tick.
//!
//! It is best effort and never a wait without end: the grace an elder gets
//! from a waiter is counted over all the waiter's wake-ups, so an elder
//! that does not take the lock (a stopped process, a waiter whose events do
//! not reach it, one giving up) costs each waiter behind it one grace in
//! all, however often the lock changes hands meanwhile, and then loses its
//! turn with that waiter for good — and with every later acquisition of
//! this process ([`passed_over`]): a stuck staging costs a process one
//! grace, not one per acquisition. Only time the waiter spends letting it
//! go first, woken to the name and finding it free, is counted.
//!
//! Who counts as an elder: a staging of the lock, made before ours, by
//! another process (this process's waiters are ordered by its in-process
//! queue), that holds its record (a publisher takes its staging's `flock`
//! before it creates the record, so the probe below never meets one
//! between its `mkdir` and its `flock`) and whose `flock` is held (a
//! crashed waiter's staging is no waiter; where that cannot be told, it
//! counts). Nothing is removed here: places are read with `stat`s, a
//! liveness with a shared `flock` let go at once, and a name only ever
//! defers a waiter, it decides nothing about a lock. An acquisition that
//! finds the lock free publishes without looking at anyone's place.
//! At most [`debris::MAX_CANDIDATES`] stagings are read, in directory
//! order.

use std::collections::BTreeSet;
use std::ffi::{OsStr, OsString};
use std::sync::Mutex;
use std::time::Duration;

use crate::sys::os::fd::{AsFd, BorrowedFd};
use crate::sys::os::fs::{self, FileType, FlockOperation, Stat};
use crate::sys::os::io::Errno;

use crate::fs::fsx;
use crate::lock::debris::{self, Kind};
use crate::lock::identity::INFO_NAME;
use crate::lock::publish::Staged;

/// How long a waiter woken by the free name lets an elder take it: a
/// hand-off takes well under a millisecond when the elder's thread gets a
/// CPU (`npm run bench:handoff`). Armed in tests with the delay seam
/// `acquire.elder_grace` (for lock names containing its filter).
pub const GRACE: Duration = Duration::from_millis(2);

/// The grace for `lock_name`: [`GRACE`] unless a test armed another.
pub fn grace(lock_name: &OsStr) -> Duration {
    crate::sys::faults::armed_duration("acquire.elder_grace", lock_name).unwrap_or(GRACE)
}

/// A staging that stood before ours when we looked: its name and the
/// directory that had it (its inode, and its ctime: a directory made at
/// the name after that one was removed may get its inode number).
#[derive(Debug)]
struct Elder {
    name: OsString,
    dev: u64,
    ino: u64,
    ctime_ns: i128,
}

impl Elder {
    fn is(&self, stat: &crate::sys::os::fs::Stat) -> bool {
        (fsx::dev_of(stat), fsx::ino_of(stat), fsx::ctime_ns(stat))
            == (self.dev, self.ino, self.ctime_ns)
    }
}

/// The stagings of a lock that stood before one staging of ours, oldest
/// first, as long as they still stand.
#[derive(Debug)]
pub struct Elders {
    /// The name of our staging they stand before.
    staging: OsString,
    elders: Vec<Elder>,
    /// How long we have let the first of them go first, in all.
    given: Duration,
}

/// Whether the staging `name` in `parent` is held by its maker: every
/// exactlock publisher takes its staging's `flock` right after its `mkdir`
/// and keeps it while it waits (see [`crate::lock::publish`]). A staging
/// nobody holds is no waiter: a crashed one's, the original module's (it
/// does not wait staged), a directory that only has the name. Where that
/// cannot be told (no `flock` on the filesystem, a staging we may not
/// open), it counts. The probe is a shared `flock`, let go at once: a
/// reaper or reclaimer that tries the staging meanwhile finds it busy and
/// leaves it to its next scan.
fn is_held(parent: BorrowedFd<'_>, name: &OsStr) -> bool {
    let dir = match fsx::open_child_dir(parent, name) {
        Ok(dir) => dir,
        Err(errno) => return matches!(errno, Errno::ACCESS | Errno::PERM),
    };
    // Its record first: a staging without one is not waiting yet, and its
    // publisher may be between its `mkdir` and its `flock`, which our probe
    // would make it take for a reaper's.
    if fsx::stat_nofollow(dir.as_fd(), OsStr::new(INFO_NAME)).is_err() {
        return false;
    }
    match fs::flock(&dir, FlockOperation::NonBlockingLockShared) {
        Ok(()) => false,
        // Taken (`EWOULDBLOCK`), or no `flock` here to tell.
        Err(_) => true,
    }
}

/// Stagings whose grace ran out with one of this process's waiters (their
/// directory's dev, ino and ctime): no later acquisition of this process
/// waits for them again. Bounded: past [`PASSED_OVER_MAX`] it starts over.
static PASSED_OVER: Mutex<BTreeSet<(u64, u64, i128)>> = Mutex::new(BTreeSet::new());
const PASSED_OVER_MAX: usize = 1024;

fn passed_over(stat: &Stat) -> bool {
    PASSED_OVER
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .contains(&(fsx::dev_of(stat), fsx::ino_of(stat), fsx::ctime_ns(stat)))
}

/// Whether the staging `name` is one of this process's (its name's pid):
/// this process's waiters are ordered by its in-process queue, and one
/// staged behind its queue's head cannot publish before it.
fn of_this_process(name: &OsStr) -> bool {
    #[cfg(test)]
    if OURS_ARE_OTHERS.with(std::cell::Cell::get) {
        return false;
    }
    debris::classify_name(name)
        .and_then(|(_, _, pid)| pid)
        .is_some_and(|pid| pid == crate::sys::unique::own_pid())
}

// The initializer is `const`; clippy 1.96 still asks for it when linting
// the Windows target (the macro's expansion differs there).
#[cfg(test)]
#[allow(clippy::missing_const_for_thread_local)]
mod test_seam {
    thread_local! {
        /// Unit tests stage "other processes'" waiters in this process: on
        /// this thread, this process's stagings count as others'.
        pub static OURS_ARE_OTHERS: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    }
}
#[cfg(test)]
pub use test_seam::OURS_ARE_OTHERS;

impl Elders {
    /// The stagings of `lock_name` beside `staged` that stand before it,
    /// read now (a listing of the parent and a `stat` per staging). None
    /// when they cannot be read: then this waiter takes no turns.
    pub fn before(staged: &Staged, lock_name: &OsStr) -> Elders {
        let parent = staged.parent();
        let mut elders = Vec::new();
        let own = staged.root_stat().map(|stat| fsx::ctime_ns(&stat));
        let names = debris::candidates(
            parent,
            Some(lock_name),
            &[Kind::Staging],
            debris::MAX_CANDIDATES,
        );
        if let (Some(own), Ok(names)) = (own, names) {
            let ours = (own, staged.name());
            let mut found: Vec<Elder> = names
                .into_iter()
                .filter(|name| name.as_os_str() != staged.name() && !of_this_process(name))
                .filter_map(|name| {
                    let stat = fsx::stat_nofollow(parent, &name).ok()?;
                    let ctime_ns = fsx::ctime_ns(&stat);
                    let elder = fsx::kind_of(&stat) == FileType::Directory
                        && (ctime_ns, name.as_os_str()) < ours
                        && !passed_over(&stat)
                        && is_held(parent, &name);
                    elder.then(|| {
                        let (dev, ino) = (fsx::dev_of(&stat), fsx::ino_of(&stat));
                        Elder {
                            name,
                            dev,
                            ino,
                            ctime_ns,
                        }
                    })
                })
                .collect();
            found.sort_by(|a, b| (a.ctime_ns, &a.name).cmp(&(b.ctime_ns, &b.name)));
            elders = found;
        }
        Elders {
            staging: staged.name().to_os_string(),
            elders,
            given: Duration::ZERO,
        }
    }

    /// Whether these were read for `staged` (a waiter that staged again
    /// stands elsewhere in the order).
    pub fn are_before(&self, staged: &Staged) -> bool {
        self.staging == staged.name()
    }

    /// Whether an elder is still staged at its name in `parent` (the same
    /// directory). Those gone (published, given up, removed, replaced) are
    /// forgotten, oldest first; one `stat` per elder looked at.
    pub fn one_is_staged(&mut self, parent: BorrowedFd<'_>) -> bool {
        while let Some(first) = self.elders.first() {
            let staged = fsx::stat_nofollow(parent, &first.name).is_ok_and(|now| first.is(&now));
            if staged {
                return true;
            }
            self.forget_first();
        }
        false
    }

    /// How much longer the first elder still staged in `parent` may go
    /// first, out of `grace`; `None` when no elder is staged or has time
    /// left (those whose grace is spent lose their turn for good).
    pub fn turn_left(&mut self, parent: BorrowedFd<'_>, grace: Duration) -> Option<Duration> {
        while self.one_is_staged(parent) {
            let left = grace.saturating_sub(self.given);
            if !left.is_zero() {
                return Some(left);
            }
            self.pass_over_first();
        }
        None
    }

    /// We let the first elder go first for `time`.
    pub fn gave(&mut self, time: Duration) {
        self.given += time;
    }

    /// The first elder's grace ran out with the name free: it loses its
    /// turn with this waiter, and with every later acquisition of this
    /// process.
    fn pass_over_first(&mut self) {
        if let Some(first) = self.elders.first() {
            let mut passed = PASSED_OVER.lock().unwrap_or_else(|p| p.into_inner());
            if passed.len() >= PASSED_OVER_MAX {
                passed.clear();
            }
            passed.insert((first.dev, first.ino, first.ctime_ns));
        }
        self.forget_first();
    }

    fn forget_first(&mut self) {
        self.elders.remove(0);
        self.given = Duration::ZERO;
    }

    /// How many still stand before us (as last looked at).
    pub fn len(&self) -> usize {
        self.elders.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::os::fd::AsFd;
    use crate::testutil::tempdir;

    fn open(dir: &std::path::Path) -> crate::sys::os::fd::OwnedFd {
        fsx::open_anchor(dir).unwrap()
    }

    /// A staging of `lock` in `parent`, then a pause long enough for the
    /// next one's ctime to be later even at a coarse clock tick.
    fn stage(parent: BorrowedFd<'_>, lock: &str) -> Staged {
        OURS_ARE_OTHERS.with(|ours| ours.set(true));
        let staged = Staged::new(
            parent,
            OsStr::new(lock),
            b"{}",
            crate::lock::publish::LockMode::PRIVATE,
        )
        .unwrap();
        std::thread::sleep(Duration::from_millis(30));
        staged
    }

    fn names(elders: &Elders) -> Vec<OsString> {
        elders
            .elders
            .iter()
            .map(|elder| elder.name.clone())
            .collect()
    }

    #[test]
    fn the_stagings_made_before_ours_stand_before_it_and_the_later_ones_do_not() {
        let dir = tempdir("elders-order");
        let parent = open(&dir);
        let first = stage(parent.as_fd(), "f.lock");
        // Not waiters of this lock: another lock's, a file with a
        // staging's name, a quarantine, and a directory with a staging's
        // name that nobody holds (a crashed waiter's).
        let other = stage(parent.as_fd(), "g.lock");
        std::fs::write(dir.join("f.lock.pending.1.not-a-dir"), b"").unwrap();
        std::fs::create_dir(dir.join("f.lock.removing.1.x")).unwrap();
        std::fs::create_dir(dir.join("f.lock.pending.1.abandoned")).unwrap();
        let second = stage(parent.as_fd(), "f.lock");
        let third = stage(parent.as_fd(), "f.lock");

        assert!(names(&Elders::before(&first, OsStr::new("f.lock"))).is_empty());
        assert_eq!(
            names(&Elders::before(&second, OsStr::new("f.lock"))),
            vec![first.name().to_os_string()]
        );
        let of_third = Elders::before(&third, OsStr::new("f.lock"));
        assert_eq!(
            names(&of_third),
            vec![first.name().to_os_string(), second.name().to_os_string()]
        );
        assert!(of_third.are_before(&third) && !of_third.are_before(&second));
        assert!(names(&Elders::before(&other, OsStr::new("g.lock"))).is_empty());
        drop((first, second, third, other));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn this_process_stagings_and_unwritten_ones_are_no_elders() {
        let dir = tempdir("elders-ours");
        let parent = open(&dir);
        let first = stage(parent.as_fd(), "f.lock");
        // A staging whose record is not written yet (its publisher may be
        // between its `mkdir` and its `flock`): not probed, not an elder.
        std::fs::create_dir(dir.join("f.lock.pending.1.unwritten")).unwrap();
        std::thread::sleep(Duration::from_millis(30));
        let ours = stage(parent.as_fd(), "f.lock");
        assert_eq!(
            names(&Elders::before(&ours, OsStr::new("f.lock"))),
            vec![first.name().to_os_string()]
        );
        // Seen as this process's (as they are): its queue orders them.
        OURS_ARE_OTHERS.with(|ours| ours.set(false));
        assert!(names(&Elders::before(&ours, OsStr::new("f.lock"))).is_empty());
        drop((first, ours));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn an_elder_leaves_the_line_when_its_staging_is_published_or_replaced() {
        let dir = tempdir("elders-leave");
        let parent = open(&dir);
        let mut first = stage(parent.as_fd(), "f.lock");
        let second = stage(parent.as_fd(), "f.lock");
        let ours = stage(parent.as_fd(), "f.lock");
        let mut elders = Elders::before(&ours, OsStr::new("f.lock"));
        assert_eq!(elders.len(), 2);
        assert!(elders.one_is_staged(parent.as_fd()));

        // The first publishes: it is no longer in line, the second is.
        let published = first.publish(OsStr::new("f.lock"), b"{}").unwrap();
        assert!(matches!(
            published,
            crate::lock::publish::StagedPublication::Published(_)
        ));
        assert!(elders.one_is_staged(parent.as_fd()));
        assert_eq!(elders.len(), 1);

        // The second's name now holds another directory: not the one that
        // stood in line.
        let second_name = second.name().to_os_string();
        drop(second);
        std::fs::create_dir(dir.join(&second_name)).unwrap();
        assert!(!elders.one_is_staged(parent.as_fd()));
        assert_eq!(elders.len(), 0);
        std::fs::remove_dir(dir.join(&second_name)).unwrap();

        // A later waiter finds ours before it, then the first of another
        // two; each goes first for its grace in all, then loses its turn.
        let late = stage(parent.as_fd(), "f.lock");
        let of_late = Elders::before(&late, OsStr::new("f.lock"));
        assert_eq!(names(&of_late), vec![ours.name().to_os_string()]);
        let later = stage(parent.as_fd(), "f.lock");
        let mut of_late = Elders::before(&later, OsStr::new("f.lock"));
        assert_eq!(of_late.len(), 2);
        let grace = Duration::from_millis(100);
        assert_eq!(of_late.turn_left(parent.as_fd(), grace), Some(grace));
        // The first is given 60 ms of its 100, then 50 more: its turn is
        // over, and the next one's begins.
        of_late.gave(Duration::from_millis(60));
        assert_eq!(
            of_late.turn_left(parent.as_fd(), grace),
            Some(Duration::from_millis(40))
        );
        of_late.gave(Duration::from_millis(50));
        assert_eq!(of_late.turn_left(parent.as_fd(), grace), Some(grace));
        assert_eq!(of_late.len(), 1);
        of_late.gave(grace);
        assert_eq!(of_late.turn_left(parent.as_fd(), grace), None);
        assert!(!of_late.one_is_staged(parent.as_fd()));
        drop((first, ours, late, later, published));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
