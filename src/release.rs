//! Release: remove exactly the generation this process published.
//!
//! The lock is snapshotted, checked to be our generation (same root
//! directory, same record bytes), and removed only if it is still exactly
//! that snapshot. Transient errors are retried a few times; a release that
//! still fails leaves the generation fenced ("release pending") in the
//! in-process table, so a later acquisition in this process retries it and
//! never steals from it.

use std::time::Duration;

use rustix::fd::AsFd;

use crate::debris;
use crate::identity::info_entry;
use crate::table::{self, BeginRelease, Generation, LockKey};
use crate::tree::{self, TreeSnapshot, sha256_hex};

/// `FILE_LOCK_RELEASE_RETRY_ATTEMPTS`.
pub const RELEASE_RETRY_ATTEMPTS: u32 = 5;
/// `FILE_LOCK_RELEASE_RETRY_DELAY_MS`.
pub const RELEASE_RETRY_DELAY_MS: u64 = 10;

/// Why one removal attempt did not remove the generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Removal {
    /// Nothing is at the lock path.
    Missing,
    /// Something else is at the lock path now.
    OwnerChanged,
    /// Worth retrying; the code says what happened.
    Transient(&'static str),
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
}

/// What the first, inline release attempt concluded.
#[derive(Debug, PartialEq, Eq)]
pub enum FirstAttempt {
    /// The release is over, one way or the other.
    Done(Result<(), ReleaseError>),
    /// The attempt did not remove the generation; continue with
    /// [`release`]`(id, true)`, which makes the remaining attempts.
    Continue,
}

/// The first attempt at releasing the generation `id`: bounded, never
/// sleeps, so it can run on the caller's thread. Only what needs a pause
/// (the retries) is left to [`release`].
pub fn release_first_attempt(id: u64) -> FirstAttempt {
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
/// [`release_first_attempt`] made the first attempt.
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
    match remove_generation(generation) {
        Ok(()) => {
            table::forget(generation.id);
            Ok(Ok(()))
        }
        Err(Removal::Missing) => {
            table::forget(generation.id);
            Ok(Err(ReleaseError::Missing))
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
            Ok(()) | Err(Removal::Missing) | Err(Removal::OwnerChanged) => {
                table::forget(generation.id)
            }
            Err(Removal::Transient(_)) => table::mark_release_pending(generation.id),
        }
    }
}

/// One attempt at removing a generation's lock directory.
///
/// First as published: if nothing touched the lock since, the exact
/// removal needs no walk of it beforehand (and the name is freed a dozen
/// syscalls sooner). If it no longer matches (its record was re-stamped, or
/// the name holds something else), the lock is looked at afresh and
/// removed only if it is still our generation.
pub fn remove_generation(generation: &Generation) -> Result<(), Removal> {
    crate::faults::check("release.snapshot").map_err(Removal::Transient)?;
    crate::faults::check("release.remove").map_err(Removal::Transient)?;
    if generation
        .published
        .files_look_unchanged(generation.root.as_fd())
    {
        match remove_exactly(generation, &generation.published) {
            Err(Removal::OwnerChanged) => {}
            done => return done,
        }
    }
    let parent = generation.parent.as_fd();
    let snapshot = match tree::snapshot_tree_at(parent, &generation.lock_name) {
        Ok(snapshot) => snapshot,
        Err(err) => {
            return Err(match err.code() {
                "not_found" => Removal::Missing,
                "tree_changed" | "io_error" => Removal::Transient(err.code()),
                _ => Removal::OwnerChanged,
            });
        }
    };
    let our_digest = sha256_hex(&generation.record_bytes);
    let ours = snapshot.root_dev == generation.published.root_dev
        && snapshot.root_ino == generation.published.root_ino
        && info_entry(&snapshot).and_then(|info| info.sha256.as_deref()) == Some(&our_digest);
    if !ours {
        return Err(Removal::OwnerChanged);
    }
    remove_exactly(generation, &snapshot)
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
        "quarantine_collision" => {
            // A crashed remover's leftover: clear it if provably abandoned,
            // and let the retry loop try again.
            debris::reap_removing(parent, &generation.lock_name, &generation.policy);
            Err(Removal::Transient("quarantine_collision"))
        }
        "tree_changed"
            if outcome.detached_path.is_some() && !detached_tree_is_ours(parent, generation) =>
        {
            // Our verified tree had left the lock name, and its emptied root
            // is gone from `.removing` too: another releaser reaped it
            // between our last unlink and our rmdir (`debris::reap_removing`
            // takes an empty `.removing` for abandoned). Nothing of this
            // generation is left anywhere: that is a release. Retrying would
            // look at the lock name, find the next holder's lock and
            // misreport `owner_changed`.
            Ok(())
        }
        code => Err(Removal::Transient(code)),
    }
}

/// Whether `<lock>.removing` is still the root directory this generation
/// published.
fn detached_tree_is_ours(parent: rustix::fd::BorrowedFd<'_>, generation: &Generation) -> bool {
    let removing = debris::removing_name(&generation.lock_name);
    let (Ok(seen), Ok(ours)) = (
        crate::fsx::stat_nofollow(parent, &removing),
        rustix::fs::fstat(&generation.root),
    ) else {
        return false;
    };
    (seen.st_dev, seen.st_ino) == (ours.st_dev, ours.st_ino)
}
