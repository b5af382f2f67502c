//! Release: remove exactly the generation this process published.
//!
//! The lock is snapshotted, checked to be our generation (same root
//! directory, same record bytes), and removed only if it is still exactly
//! that snapshot. Transient errors are retried a few times; a release that
//! still fails leaves the generation fenced ("release pending") in the
//! in-process table, so a later acquisition in this process retries it and
//! never steals from it.

use std::sync::atomic::Ordering;
use std::time::Duration;

use std::ffi::{OsStr, OsString};
use std::path::PathBuf;

use crate::sys::os::fd::{AsFd, BorrowedFd};
use crate::sys::os::fs::{self, AtFlags, FlockOperation};
use crate::sys::os::io::Errno;

use crate::fs::caps;
use crate::fs::fsx;
use crate::fs::rename;
use crate::fs::tree::{self, TreeEntry, TreeSnapshot, sha256_hex};
use crate::lock::fastpath;
use crate::lock::identity::{INFO_NAME, info_entry, record_beside_directories};
use crate::lock::table::{self, BeginRelease, Generation, LockKey};
use crate::sys::errno::is_flock_unsupported;

/// `FILE_LOCK_RELEASE_RETRY_ATTEMPTS`.
pub const RELEASE_RETRY_ATTEMPTS: u32 = 5;
/// `FILE_LOCK_RELEASE_RETRY_DELAY_MS`.
pub const RELEASE_RETRY_DELAY_MS: u64 = 10;

/// Why one removal attempt did not remove the generation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Removal {
    /// Nothing is at the lock path.
    Missing,
    /// Something else is at the lock path now.
    OwnerChanged,
    /// Worth retrying; the code says what happened.
    Transient(&'static str),
    /// The lock's name is free and our record removed, but the directory
    /// held entries that are not ours and that no snapshot could judge (a
    /// symlink, FIFO, socket or device; more than a snapshot reads): they
    /// were left where they are, in the directory, at this quarantine name
    /// in its parent.
    LeftForeign(OsString),
}

/// Why a release failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReleaseError {
    /// This process holds no such generation (released already).
    Unknown,
    /// A release of this generation is already running.
    AlreadyReleasing,
    /// The lock directory was gone.
    Missing,
    /// Another owner's lock stands at the path; it was left alone.
    OwnerChanged,
    /// Transient failures persisted; the generation stays fenced.
    Pending(&'static str),
    /// Released, but entries someone else put in the lock's directory that
    /// exactlock does not remove were left in it, at this path.
    LeftForeign(PathBuf),
}

/// What the first, inline release attempt concluded.
#[derive(Debug, PartialEq, Eq)]
pub enum FirstAttempt {
    /// The release is over, one way or the other.
    Done(Result<(), ReleaseError>),
    /// The attempt did not remove the generation; continue with
    /// [`release`]`(id, true)`, which makes the remaining attempts.
    Continue,
    /// No attempt was made here (the lock's directory has not earned the
    /// inline path, see [`crate::lock::fastpath`]): [`release`]`(id,
    /// false)` makes them all, off the caller's thread.
    Deferred,
}

/// The first attempt at releasing the generation `id`: bounded, never
/// sleeps, so it can run on the caller's thread. Only what needs a pause
/// (the retries) is left to [`release`].
pub fn release_first_attempt(id: u64) -> FirstAttempt {
    if table::held(id).is_some_and(|held| !held.releases_inline) {
        return FirstAttempt::Deferred;
    }
    let started = std::time::Instant::now();
    let first = first_attempt(id);
    if let Some(held) = table::releasing(id).or_else(|| table::held(id)) {
        fastpath::inline_took(&held.parent_path, started.elapsed());
    }
    first
}

fn first_attempt(id: u64) -> FirstAttempt {
    let generation = match table::begin_release(id) {
        Ok(generation) => generation,
        Err(error) => return FirstAttempt::Done(Err(begin_error(error))),
    };
    match attempt(&generation) {
        Ok(done) => FirstAttempt::Done(done),
        Err(_) => FirstAttempt::Continue,
    }
}

/// Releases the generation `id`; with `continued`, after
/// [`release_first_attempt`] made the first attempt. Each attempt runs on a
/// blocking thread (its syscalls may stall on a slow filesystem); the
/// pauses between attempts do not hold one.
pub async fn release(id: u64, continued: bool) -> Result<(), ReleaseError> {
    let generation = if continued {
        table::releasing(id).ok_or(ReleaseError::Unknown)?
    } else {
        table::begin_release(id).map_err(begin_error)?
    };
    let mut last = Removal::Transient("unknown");
    for number in u32::from(continued)..RELEASE_RETRY_ATTEMPTS {
        if number > 0 {
            tokio::time::sleep(Duration::from_millis(RELEASE_RETRY_DELAY_MS)).await;
        }
        let this = generation.clone();
        let outcome = tokio::task::spawn_blocking(move || attempt(&this))
            .await
            .unwrap_or(Err(Removal::Transient("EIO")));
        match outcome {
            Ok(done) => return done,
            Err(removal) => last = removal,
        }
    }
    Err(give_up(generation.id, last))
}

/// Releases a generation nobody will release any more (its JavaScript
/// environment is gone, or its acquisition was given up while the lock was
/// being won), on the calling thread, which may block: the same attempts
/// and pauses as [`release`]. A generation that still cannot be removed
/// stays fenced (release pending), as after a failed release.
pub fn give_back(id: u64) {
    let _ = release_blocking(id);
}

/// Releases generation `id` on the calling thread, which it blocks for the
/// attempts and the pauses between them (`releaseSync`, and
/// [`give_back`]): the same outcomes as [`release`].
pub fn release_blocking(id: u64) -> Result<(), ReleaseError> {
    let generation = table::begin_release(id).map_err(begin_error)?;
    let mut last = Removal::Transient("unknown");
    for number in 0..RELEASE_RETRY_ATTEMPTS {
        if number > 0 {
            std::thread::sleep(Duration::from_millis(RELEASE_RETRY_DELAY_MS));
        }
        match attempt(&generation) {
            Ok(done) => return done,
            Err(removal) => last = removal,
        }
    }
    Err(give_up(generation.id, last))
}

fn begin_error(error: BeginRelease) -> ReleaseError {
    match error {
        BeginRelease::Unknown => ReleaseError::Unknown,
        BeginRelease::AlreadyReleasing => ReleaseError::AlreadyReleasing,
    }
}

/// One removal attempt: the release's outcome, or why another attempt is
/// worth making.
fn attempt(generation: &Generation) -> Result<Result<(), ReleaseError>, Removal> {
    let outcome = remove_generation(generation);
    crate::debug!(
        "release of {}: {}",
        generation.lock_path.display(),
        match &outcome {
            Ok(()) => "released",
            Err(Removal::Missing) => "missing (removed by someone else)",
            Err(Removal::OwnerChanged) => "another owner's lock stands there (left alone; retried)",
            Err(Removal::Transient(code)) => code,
            Err(Removal::LeftForeign(_)) =>
                "released; entries of someone else's that exactlock does not remove were left in its directory",
        }
    );
    match outcome {
        Ok(()) => {
            table::forget(generation.id);
            Ok(Ok(()))
        }
        Err(Removal::Missing) => {
            table::forget(generation.id);
            Ok(Err(ReleaseError::Missing))
        }
        Err(Removal::LeftForeign(name)) => {
            table::forget(generation.id);
            Ok(Err(ReleaseError::LeftForeign(
                generation.parent_path.join(name),
            )))
        }
        // Retried too: a waiter taking over a stale lock holds our name
        // for a few microseconds when what it swapped out was ours, and
        // gives it back at once.
        Err(other) => Err(other),
    }
}

/// After the last failed attempt: a transient failure fences the
/// generation (release pending); another owner's lock lets it go.
fn give_up(id: u64, last: Removal) -> ReleaseError {
    match last {
        Removal::Transient(code) => {
            table::mark_release_pending(id);
            crate::debug!(
                "release gave up ({code}): the lock stays fenced to generation {id}; the next acquisition retries it"
            );
            ReleaseError::Pending(code)
        }
        _ => {
            table::forget(id);
            ReleaseError::OwnerChanged
        }
    }
}

/// Retries, once each, the pending releases of `key` (called by an
/// acquirer before it contends). A failure keeps the fence: a failed retry
/// is not authority to steal.
pub fn retry_pending(key: &LockKey) {
    for generation in table::take_pending_releases(key) {
        match remove_generation(&generation) {
            Err(Removal::Transient(_)) => table::mark_release_pending(generation.id),
            _ => table::forget(generation.id),
        }
    }
}

/// One attempt at removing a generation's lock directory: the short way
/// when it is exactly as published, else by looking at it afresh and
/// removing it only if it is still our generation.
pub fn remove_generation(generation: &Generation) -> Result<(), Removal> {
    crate::sys::trace::stamp("release: the native release begins");
    crate::sys::faults::pause("release", &generation.lock_name);
    crate::sys::faults::check("release.snapshot").map_err(Removal::Transient)?;
    crate::sys::faults::check("release.remove").map_err(Removal::Transient)?;
    if let Some(done) = remove_as_published(generation, Foreign::Refuse) {
        return done;
    }
    let parent = generation.parent.as_fd();
    let snapshot = match tree::snapshot_tree_at(parent, &generation.lock_name) {
        Ok(snapshot) => snapshot,
        Err(err) => {
            return Err(match err.code() {
                "not_found" => Removal::Missing,
                "tree_changed" | "io_error" => Removal::Transient(err.code()),
                // Something in our directory no snapshot reads (a symlink,
                // a FIFO, a tree too large): the name is freed and our
                // record removed, the rest left where it is.
                _ => {
                    return remove_as_published(generation, Foreign::Leave)
                        .unwrap_or(Err(Removal::OwnerChanged));
                }
            });
        }
    };
    if record_beside_directories(&snapshot).is_some_and(|record| is_our_record(record, generation))
        && is_our_root(&snapshot_root(&snapshot), generation)
    {
        // A directory someone put in ours may be a live lock of theirs:
        // never removed with ours. The name is freed and our record
        // removed; the rest stays, and the release says where.
        return remove_as_published(generation, Foreign::Leave)
            .unwrap_or(Err(Removal::OwnerChanged));
    }
    if !is_ours(&snapshot, generation) {
        return Err(Removal::OwnerChanged);
    }
    remove_exactly(generation, &snapshot)
}

/// Whether `snapshot` is of this generation's own directory holding the
/// record it published, byte for byte.
fn is_ours(snapshot: &TreeSnapshot, generation: &Generation) -> bool {
    is_our_root(&snapshot_root(snapshot), generation)
        && info_entry(snapshot).is_some_and(|info| is_our_record(info, generation))
}

/// Whether the `info` entry `record` holds the bytes this generation wrote.
fn is_our_record(record: &TreeEntry, generation: &Generation) -> bool {
    record.sha256.as_deref() == Some(sha256_hex(&generation.record_bytes).as_str())
}

fn snapshot_root(snapshot: &TreeSnapshot) -> (u64, u64) {
    (snapshot.root_dev, snapshot.root_ino)
}

fn is_our_root(seen: &(u64, u64), generation: &Generation) -> bool {
    *seen == snapshot_root(&generation.published)
}

fn stat_root(parent: BorrowedFd<'_>, name: &OsStr) -> Option<(u64, u64)> {
    fsx::stat_nofollow(parent, name)
        .ok()
        .map(|stat| (fsx::dev_of(&stat), fsx::ino_of(&stat)))
}

/// The release of a lock that is exactly as this generation published it,
/// in about ten syscalls and without walking it: `None` as soon as anything
/// differs, for the general path to decide.
///
/// Why this is exact: the root directory is ours by identity, and cannot
/// be a copy, because we hold it open since publication (its inode number
/// cannot be recycled). The record is ours because it is the same inode
/// with the same size, mtime and ctime as right after we wrote it: the
/// kernel stamps ctime on every change to an inode and nobody can set it
/// back, so an equal ctime proves the bytes unchanged. It is looked at
/// once, after the detach and right before its unlink. A change there (the
/// name already free, and perhaps a successor's) is judged by the record's
/// bytes, at the quarantine name: still ours, the directory is removed
/// exactly as snapshotted; not ours, it is given its name back untouched.
/// The directory holds nothing else: it is listed before the detach, so a
/// lock that gained an entry while held is handed to the general path,
/// which snapshots it whole and removes exactly that (`Foreign::Refuse`);
/// where no snapshot can be had of what it gained (a symlink, a FIFO),
/// the general path comes back here with `Foreign::Leave`: the name is
/// freed and our record removed, and what is not ours stays in the
/// directory, at the quarantine name. `rmdir` refuses a directory that
/// gains an entry after the listing, which then stays there too; either
/// way the release says where. Reclaimers take turns on the root's
/// `flock`, which the publication took and holds for the lock's life, and
/// the name is checked again after the detach, so nothing that took the
/// name meanwhile is ever removed: it is put back.
fn remove_as_published(generation: &Generation, foreign: Foreign) -> Option<Result<(), Removal>> {
    let parent = generation.parent.as_fd();
    let root = generation.root.as_fd();
    let published = &generation.published;
    let name = &generation.lock_name;
    let removing = tree::quarantine_name(name);
    if !take_guard(generation) {
        // A reclaimer is judging this directory right now.
        return Some(Err(Removal::Transient("busy")));
    }
    // Handing over to the general path: it takes the turn through a
    // descriptor of its own, so ours must not keep it.
    let hand_over = || {
        let _ = fs::flock(root, FlockOperation::Unlock);
        generation.root_guarded.store(false, Ordering::Relaxed);
        None
    };
    if foreign == Foreign::Refuse && !names_unchanged(generation) {
        return hand_over();
    }
    if !stat_root(parent, name).is_some_and(|seen| is_our_root(&seen, generation)) {
        return hand_over();
    }
    // Detach: from here a successor may take the lock name; it is never in
    // reach of what follows. (Where the filesystem refuses the exclusive
    // flag, sshfs or NFS, a plain rename does it: the quarantine name is
    // fresh and unguessable. Moving back onto the lock name takes the
    // `mkdir` claim, as a publication does.)
    let (caps, dev) = (caps::global(), published.root_dev);
    let move_back = || rename::exclusive_rename_dir_at(caps, dev, parent, &removing, parent, name);
    crate::sys::faults::pause("release.detach", name);
    if !rename::rename_dir_to_fresh_at(caps, dev, parent, name, parent, &removing) {
        return hand_over();
    }
    crate::sys::trace::stamp("release: the name freed");
    // The rename woke whoever waits on the name, and the scheduler tends
    // to queue a waiter's thread on this very CPU, behind us (measured:
    // 100-180 µs of the hand-off). After an acquisition that had to wait,
    // others most likely wait too: let the one just woken run first, so
    // that it takes the lock before this thread goes on (and before its
    // process asks again: no barging back in). One `sched_yield` where
    // nothing else is runnable; not paid by an uncontended cycle.
    if generation.waited {
        std::thread::yield_now();
    }
    crate::sys::faults::pause("release.detached", name);
    if !stat_root(parent, &removing).is_some_and(|seen| is_our_root(&seen, generation)) {
        // Someone swapped the name between our look and the rename: give
        // back what we moved, untouched.
        move_back();
        return hand_over();
    }
    if !published.files_look_unchanged(root) {
        // Our directory, whose record's inode moved since we wrote it: a
        // `touch`, `chmod` or `chown`, a hard link, an xattr, or a rewrite.
        // The name is free already, and a successor may have taken it: the
        // record is judged here, by its bytes.
        if let Some(done) = remove_detached_by_content(generation, &removing) {
            if done.is_err() {
                move_back();
            }
            return Some(done);
        }
        // Not ours by its bytes: given back untouched, for the general path
        // to judge (or, if a successor has the name, left where it is).
        move_back();
        return hand_over();
    }
    if let Err(errno) = fs::unlinkat(root, INFO_NAME, AtFlags::empty()) {
        move_back();
        return Some(Err(Removal::Transient(crate::sys::errno::errno_code(
            errno,
        ))));
    }
    // Our record is gone and the name is free: released. If `rmdir` is
    // refused, what is left in the directory was put there by someone
    // else; it stays where it is, under our quarantine name (kept by the
    // debris rules: its content is not a lock's), and the release says so.
    match fsx::remove_dir_settled(parent, &removing, root, &mut fsx::FuseSettle::new()) {
        // (sshfs says `EPERM` for "not empty": SFTP has no code for it.)
        // Where a deleted file keeps its name until its last handle closes
        // (Windows without POSIX deletion: Wine, FAT, SMB, a scanner that
        // has the record open), what is left may be our record alone: not
        // foreign, and gone with that handle (the directory is reaped as a
        // quarantine once this process is gone).
        Err(Errno::NOTEMPTY | Errno::EXIST | Errno::PERM)
            if !(cfg!(windows) && published.names_unchanged(root)) =>
        {
            Some(Err(Removal::LeftForeign(removing)))
        }
        _ => Some(Ok(())),
    }
}

/// What [`remove_as_published`] does with a directory that holds more than
/// its record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Foreign {
    /// Hands it to the general path, which judges it by a snapshot.
    Refuse,
    /// Frees the name, removes our record and leaves the rest.
    Leave,
}

/// Removes this generation's detached directory, at its quarantine name
/// `removing`, when its record still holds exactly the bytes published
/// (only the record's inode metadata moved): the tree is snapshotted
/// through the descriptor held since the publication, then removed
/// exactly as seen, as the general path would have done at the lock name.
/// `None` when the record's bytes are not ours (nothing touched): the
/// caller gives the directory back. A removal that failed part way is a
/// transient failure.
fn remove_detached_by_content(
    generation: &Generation,
    removing: &OsStr,
) -> Option<Result<(), Removal>> {
    let snapshot = tree::snapshot_dir(generation.root.as_fd()).ok()?;
    if !is_ours(&snapshot, generation) {
        return None;
    }
    match tree::remove_exact_in_place_at(generation.parent.as_fd(), removing, &snapshot) {
        tree::InPlace::Removed => Some(Ok(())),
        tree::InPlace::NotExpected(_) => None,
        tree::InPlace::Failed(error) => Some(Err(Removal::Transient(error.code()))),
    }
}

/// Whether the lock directory holds exactly the names it was published
/// with (see [`TreeSnapshot::names_unchanged_held`]).
fn names_unchanged(generation: &Generation) -> bool {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        let listed_before = generation.root_listed.swap(true, Ordering::Relaxed);
        generation
            .published
            .names_unchanged_held(generation.root.as_fd(), listed_before)
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    generation
        .published
        .names_unchanged(generation.root.as_fd())
}

/// Makes sure the root's `flock` is ours (an earlier attempt may have
/// handed it over): `false` if a reclaimer is judging the directory now.
fn take_guard(generation: &Generation) -> bool {
    if generation.root_guarded.load(Ordering::Relaxed) {
        return true;
    }
    match fs::flock(&generation.root, FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => {}
        Err(errno) if is_flock_unsupported(errno) => {}
        Err(_) => return false,
    }
    generation.root_guarded.store(true, Ordering::Relaxed);
    true
}

/// Removes the generation's lock if it is exactly `expected`.
fn remove_exactly(generation: &Generation, expected: &TreeSnapshot) -> Result<(), Removal> {
    let parent = generation.parent.as_fd();
    let outcome = tree::exact_remove_tree_at(
        parent,
        &generation.parent_path,
        &generation.lock_name,
        expected,
    );
    if outcome.ok {
        return Ok(());
    }
    match outcome.code.unwrap_or("io_error") {
        "not_found" => Err(Removal::Missing),
        "identity_mismatch" => Err(Removal::OwnerChanged),
        "tree_changed"
            if outcome
                .detached_path
                .as_deref()
                .is_some_and(|detached| !holds_our_root(parent, detached, generation)) =>
        {
            // Our verified tree had left the lock name, and its emptied root
            // is gone from the quarantine name too (someone removed the
            // empty directory between our last unlink and our rmdir):
            // nothing of this generation is left anywhere, and that is a
            // release. Retrying would look at the lock name, find the next
            // holder's lock and misreport `owner_changed`.
            Ok(())
        }
        code => Err(Removal::Transient(code)),
    }
}

/// Whether the entry at `path` (in `parent`) is still the root directory
/// this generation published.
fn holds_our_root(parent: BorrowedFd<'_>, path: &std::path::Path, generation: &Generation) -> bool {
    let Some(name) = path.file_name() else {
        return false;
    };
    stat_root(parent, name).is_some_and(|seen| is_our_root(&seen, generation))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{acquire_free, listing, tempdir};

    /// The inode (file index on Windows) at `path`, through the platform seam.
    fn ino(path: &std::path::Path) -> u64 {
        crate::sys::os::fs::stat(path).unwrap().st_ino
    }

    #[test]
    fn a_record_touched_while_held_is_removed_by_its_bytes_though_a_successor_takes_the_name_at_once()
     {
        let dir = tempdir("touched-record");
        let id = crate::testutil::acquire_free_named(&dir, "touched-record");
        let lock = dir.join("touched-record.lock");
        // Only the record's inode metadata moves (its mtime, set far back):
        // its bytes are still the ones published.
        std::fs::File::options()
            .write(true)
            .open(lock.join("info"))
            .unwrap()
            .set_modified(std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000_000))
            .unwrap();
        // A successor takes the name the moment the release frees it.
        assert!(crate::sys::faults::arm_delay(
            "release.detached",
            400,
            Some("touched-record"),
            Some(1)
        ));
        let successor = {
            let lock = lock.clone();
            std::thread::spawn(move || {
                let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
                while lock.exists() && std::time::Instant::now() < until {
                    std::thread::yield_now();
                }
                std::fs::create_dir(&lock).is_ok()
            })
        };
        let released = release_blocking(id);
        assert!(
            successor.join().unwrap(),
            "the successor took the freed name"
        );
        crate::sys::faults::disarm_delay("release.detached");
        assert_eq!(released, Ok(()));
        // Our directory is gone from the quarantine name; the successor's is
        // where it was, untouched.
        assert_eq!(listing(&dir), vec!["touched-record.lock".to_string()]);
        assert!(listing(&lock).is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    // Not on Windows yet: under Wine the quarantine name is still listed right
    // after the release (its deletion pending while a handle to it is open);
    // whether real NTFS shows the same is not known here (README, Windows).
    #[cfg(unix)]
    #[test]
    fn untouched_lock_is_released_by_the_first_attempt() {
        let dir = tempdir("untouched");
        let id = acquire_free(&dir);
        assert_eq!(listing(&dir), ["f.lock"]);
        assert_eq!(first_attempt(id), FirstAttempt::Done(Ok(())));
        assert_eq!(listing(&dir), Vec::<String>::new());
        assert_eq!(
            first_attempt(id),
            FirstAttempt::Done(Err(ReleaseError::Unknown))
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    // Not on Windows yet: under Wine the quarantine name is still listed right
    // after the release (its deletion pending while a handle to it is open);
    // whether real NTFS shows the same is not known here (README, Windows).
    #[cfg(unix)]
    #[test]
    fn an_entry_put_into_our_lock_while_held_is_removed_with_it_unless_no_snapshot_reads_it() {
        // The listing shows the entry; the general path snapshots the tree,
        // finds our root and our record in it, and removes exactly that.
        for (kind, make) in [
            (
                "file",
                (|lock: &std::path::Path| std::fs::write(lock.join("note"), b"x").unwrap())
                    as fn(&std::path::Path),
            ),
            ("two files", |lock| {
                std::fs::write(lock.join(".DS_Store"), b"x").unwrap();
                std::fs::write(lock.join(".info.swp"), b"x").unwrap();
            }),
            ("entry come and gone", |lock| {
                std::fs::write(lock.join("gone"), b"x").unwrap();
                std::fs::remove_file(lock.join("gone")).unwrap();
            }),
        ] {
            let dir = tempdir("gained");
            let id = acquire_free(&dir);
            make(&dir.join("f.lock"));
            assert_eq!(first_attempt(id), FirstAttempt::Done(Ok(())), "{kind}");
            assert_eq!(listing(&dir), Vec::<String>::new(), "{kind}");
            std::fs::remove_dir_all(dir).unwrap();
        }
        // A symlink, which no snapshot reads (nor a release removes), and a
        // directory, which may be someone's live lock: the name is freed and
        // our record removed; they stay where they are, in the directory at
        // its quarantine name, and the release says where.
        for (kind, make) in [
            (
                "symlink",
                (|lock: &std::path::Path| {
                    std::os::unix::fs::symlink("/", lock.join("link")).unwrap()
                }) as fn(&std::path::Path),
            ),
            ("directory", |lock| {
                std::fs::create_dir(lock.join("link")).unwrap();
                std::fs::write(lock.join("link/info"), b"{}").unwrap();
            }),
        ] {
            left_foreign(kind, make);
        }
    }

    /// A release of a lock that gained `make`'s entry, named `link`: it is
    /// left in the directory at its quarantine name, the release says where.
    #[cfg(unix)]
    fn left_foreign(kind: &str, make: fn(&std::path::Path)) {
        let dir = tempdir("gained-link");
        let id = acquire_free(&dir);
        make(&dir.join("f.lock"));
        let FirstAttempt::Done(Err(ReleaseError::LeftForeign(left))) = first_attempt(id) else {
            panic!("the release says what it left");
        };
        let quarantine = left.file_name().unwrap().to_str().unwrap().to_owned();
        assert!(quarantine.starts_with("f.lock.removing."), "{quarantine}");
        assert_eq!(listing(&dir), [quarantine.as_str()]);
        let names: Vec<_> = std::fs::read_dir(&left)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["link"], "{kind}");
        assert!(table::held(id).is_none(), "released");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn a_held_lock_keeps_reclaimers_off_and_a_later_attempt_looks_afresh() {
        let dir = tempdir("again");
        let id = acquire_free(&dir);
        let generation = table::held(id).unwrap();
        let lock = dir.join("f.lock");
        let reclaimer_could_act = || {
            let other = crate::fs::fsx::open_dir_nofollow(&lock).unwrap();
            fs::flock(&other, FlockOperation::NonBlockingLockExclusive).is_ok()
        };
        assert!(!reclaimer_could_act(), "the holder keeps the guard");
        // A first look that sees an entry it did not publish hands over to
        // the careful path, and with it the guard.
        std::fs::write(lock.join("note"), b"x").unwrap();
        assert!(remove_as_published(&generation, Foreign::Refuse).is_none());
        assert!(reclaimer_could_act());
        // The next attempt lists the directory from its start again (its
        // descriptor's offset was moved) and takes the guard back.
        std::fs::remove_file(lock.join("note")).unwrap();
        assert_eq!(remove_generation(&generation), Ok(()));
        assert_eq!(listing(&dir), Vec::<String>::new());
        table::forget(id);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[cfg(any(target_os = "linux", target_os = "android"))]
    #[test]
    fn the_held_listing_reads_from_its_start_when_asked_or_when_it_must() {
        let dir = tempdir("listing");
        let id = acquire_free(&dir);
        let generation = table::held(id).unwrap();
        let (published, root) = (&generation.published, generation.root.as_fd());
        assert!(published.names_unchanged_held(root, false));
        // The shared offset is past the record now: a listing that reaches
        // the end without it reads again from a rewind (as on btrfs, which
        // shows a descriptor only what its directory held when opened).
        assert!(published.names_unchanged_held(root, false));
        assert!(published.names_unchanged_held(root, true));
        std::fs::write(dir.join("f.lock/note"), b"x").unwrap();
        assert!(!published.names_unchanged_held(root, true));
        std::fs::remove_file(dir.join("f.lock/note")).unwrap();
        assert!(published.names_unchanged_held(root, true));
        drop(generation);
        assert_eq!(first_attempt(id), FirstAttempt::Done(Ok(())));
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn record_rewritten_with_the_same_bytes_is_still_ours() {
        // The short path refuses (new ctime); the full look finds our bytes.
        let dir = tempdir("touched");
        let id = acquire_free(&dir);
        let info = dir.join("f.lock/info");
        std::fs::write(&info, std::fs::read(&info).unwrap()).unwrap();
        assert_eq!(first_attempt(id), FirstAttempt::Done(Ok(())));
        assert_eq!(listing(&dir), Vec::<String>::new());
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn record_replaced_by_other_bytes_is_not_ours_and_stays() {
        let dir = tempdir("replaced");
        let id = acquire_free(&dir);
        std::fs::write(dir.join("f.lock/info"), b"{\"pid\":1,\"timestamp\":1}").unwrap();
        assert_eq!(first_attempt(id), FirstAttempt::Continue);
        assert_eq!(listing(&dir), ["f.lock"]);
        assert_eq!(
            std::fs::read(dir.join("f.lock/info")).unwrap(),
            b"{\"pid\":1,\"timestamp\":1}"
        );
        table::forget(id);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn successor_at_the_name_is_never_removed() {
        let dir = tempdir("successor");
        let id = acquire_free(&dir);
        // Someone moved our lock away and published their own.
        std::fs::rename(dir.join("f.lock"), dir.join("moved")).unwrap();
        std::fs::create_dir(dir.join("f.lock")).unwrap();
        std::fs::write(dir.join("f.lock/info"), b"theirs").unwrap();
        assert_eq!(first_attempt(id), FirstAttempt::Continue);
        assert_eq!(listing(&dir), ["f.lock", "moved"]);
        assert_eq!(std::fs::read(dir.join("f.lock/info")).unwrap(), b"theirs");
        table::forget(id);
        std::fs::remove_dir_all(dir).unwrap();
    }
}
