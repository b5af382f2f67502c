//! Debris a killed process can leave beside a lock, and its removal on
//! proof.
//!
//! A name only nominates a candidate; it never authorizes a removal. Three
//! names are looked at, each beside a lock `<lock>`:
//! - staging `<lock>.pending.<pid>.<uuid>`: a publisher or waiter killed
//!   before its rename (holding its own record, or nothing yet), or a
//!   reclaimer killed inside its exchange (holding the judged dead tree);
//! - quarantine `<lock>.removing.<pid>.<uuid>`: a remover killed between
//!   detaching a verified tree and deleting it (the tree, or its emptied
//!   root);
//! - the old fixed `<lock>.removing` of earlier versions and of the
//!   original module, and upstream 0.18's record of its remover beside it,
//!   `<lock>.removing.owner` (see [`crate::lock::transition`]): with such a
//!   record, the quarantine is judged by its remover's liveness.
//!
//! A candidate is removed only when its content proves it is a lock's and
//! its owner is proven gone, and only while nobody works on it: removers
//! and reclaimers hold a `flock` on the tree they act on, and a candidate
//! whose `flock` is taken is left to them (`busy`). The content is either
//! - exactly one regular file `info` holding a valid record whose owner is
//!   dead (the record's pid is authoritative over the name's, and the
//!   record says which boot and pid namespace it means), or
//! - nothing yet: an empty directory, or one holding only an empty `info`
//!   (a publisher killed between its `mkdir` and its record's write).
//!   Its owner is the name's pid, which carries no pid namespace: dead
//!   here, it may still be a live publisher of another namespace. Every
//!   exactlock publisher holds its staging directory's `flock` for as long
//!   as the directory is its own (from right after its `mkdir`), and every
//!   remover its quarantine's, in any
//!   namespace (see [`crate::lock::publish`]); so when this reaper takes
//!   the free `flock` and the name's pid is dead here, no live exactlock
//!   process is filling the directory, and it is removed at once, as
//!   upstream 0.17 does. Where the filesystem has no `flock`, that is not
//!   provable, and the directory is removed only once nothing in it has
//!   changed for [`UNWRITTEN_MIN_AGE`] (a live publisher fills its
//!   directory far sooner); until then it is kept as `recently_created`.
//!   A live or unknown pid (the kernel's answer, or a caller's probe) is
//!   kept and reported as such, however young the directory.
//!
//! The removal is identity-bound (the snapshot taken before the verdict).
//! Anything else — a user's directory, a symlink, a file, a malformed
//! record, a live or unknown owner, another host's record — is kept, and
//! the decision says why.

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::sys::os::fd::{AsFd, BorrowedFd, OwnedFd};
use crate::sys::os::fs::{Dir, FileType, FlockOperation, Mode, OFlags};
use crate::sys::os::io::Errno;

use crate::fs::fsx::{self, DirIdentity};
use crate::fs::tree::{self, QUARANTINE_TAG, TreeSnapshot};
use crate::lock::identity::{info_entry, is_empty_dir};
use crate::lock::observe::{Observation, Owner, observe};
use crate::lock::publish::STAGING_TAG;
use crate::lock::transition;
use crate::lock::update;
use crate::lock::verdict::{HostPolicy, Liveness, Observer, liveness_of};
use crate::sys::clock::now_ns;
use crate::sys::errno::is_flock_unsupported;

/// The old fixed quarantine suffix (`<lock>.removing`).
const LEGACY_QUARANTINE_SUFFIX: &[u8] = b".removing";

/// How long an unwritten (empty) candidate must have been left unchanged
/// before its name's dead pid proves it abandoned, where the filesystem
/// has no `flock` to prove it at once.
pub const UNWRITTEN_MIN_AGE: std::time::Duration = std::time::Duration::from_secs(1);

/// At most this many candidates are examined per scan of one lock, so a
/// directory full of debris cannot stall an acquisition; the next scan
/// (another process, or `exactlock gc`) picks up the rest.
pub const MAX_CANDIDATES: usize = 64;

/// What a candidate's name says it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Staging,
    Quarantine,
    LegacyQuarantine,
    /// Upstream 0.18's `<lock>.removing.owner`: a file, not a directory.
    RemovalRecord,
    /// An update's temp file `.<file>.upd.<pid>.<uuid>` (see
    /// [`crate::lock::update`]): named by its file, not its lock.
    UpdateTemp,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Staging => "staging",
            Kind::Quarantine => "quarantine",
            Kind::LegacyQuarantine => "legacy_quarantine",
            Kind::RemovalRecord => "removal_record",
            Kind::UpdateTemp => "update_temp",
        }
    }
}

/// The owner's state as a decision reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    Alive,
    Dead,
    Unknown,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Alive => "alive",
            Status::Dead => "dead",
            Status::Unknown => "unknown",
        }
    }
}

/// What was decided about one candidate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    pub name: OsString,
    pub kind: Kind,
    /// The owner judged: the record's pid, or the name's for an empty dir.
    pub pid: Option<u32>,
    pub status: Status,
    pub removed: bool,
    /// Why, in the vocabulary of upstream 0.17's staging reaper where it
    /// has a word: `unverified_staging_directory`, `enoent_already_gone`,
    /// `host_qualified_staging_owner`, `in_process_staging_owner`,
    /// `file_lock_staging_owner_{alive,dead,unknown}`, `busy`,
    /// `recently_created` (an unwritten candidate of a dead name's pid,
    /// young, where no `flock` proves it abandoned), or the removal's
    /// outcome (`removed`, `owner_changed`, `cleanup_failed`).
    pub reason: &'static str,
    /// The root's identity as examined, to bind a later removal to it.
    pub root: Option<RootId>,
}

/// A directory's identity for binding a verdict given in another call:
/// dev and inode, and its ctime, so that a directory recreated under the
/// same name with a recycled inode number is not taken for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RootId {
    pub dev: u64,
    pub ino: u64,
    pub ctime_ns: i128,
}

impl RootId {
    /// No directory: what a decision on a file is bound to (a caller's
    /// probe, which judges stagings, never answers for it).
    const NONE: RootId = RootId {
        dev: 0,
        ino: 0,
        ctime_ns: -1,
    };

    fn of(snapshot: &TreeSnapshot) -> Option<Self> {
        let root = snapshot.entries.first()?;
        Some(RootId {
            dev: snapshot.root_dev,
            ino: snapshot.root_ino,
            ctime_ns: root.ctime_ns,
        })
    }
}

/// The lock a candidate name belongs to, and its kind and pid. Only a name
/// derived from a lock's (`<file>.lock` and a tag: every lock's name ends
/// in `.lock`) is a candidate: another program's `notes.pending.<pid>.<uuid>`
/// or `backup.removing` is none of ours, whatever it holds.
pub fn classify_name(name: &OsStr) -> Option<(&OsStr, Kind, Option<u32>)> {
    let (lock, kind, pid) = if let Some((lock, pid)) = fsx::parse_tagged_name(name, STAGING_TAG) {
        (lock, Kind::Staging, Some(pid))
    } else if let Some((lock, pid)) = fsx::parse_tagged_name(name, QUARANTINE_TAG) {
        (lock, Kind::Quarantine, Some(pid))
    } else if let Some((base, pid)) = fsx::parse_tagged_name(name, update::TEMP_TAG) {
        // `.<file>`: the file a killed update was writing.
        return base.as_encoded_bytes().starts_with(b".").then_some((
            base,
            Kind::UpdateTemp,
            Some(pid),
        ));
    } else if let Some(quarantine) = name
        .as_encoded_bytes()
        .strip_suffix(transition::RECORD_SUFFIX.as_bytes())
    {
        let lock = quarantine.strip_suffix(LEGACY_QUARANTINE_SUFFIX)?;
        (crate::sys::os::os_str(lock)?, Kind::RemovalRecord, None)
    } else {
        let lock = name
            .as_encoded_bytes()
            .strip_suffix(LEGACY_QUARANTINE_SUFFIX)?;
        (crate::sys::os::os_str(lock)?, Kind::LegacyQuarantine, None)
    };
    // `.lock` alone is a lock's name too: the lock of a path that ends in
    // a separator (`/x/sub/`).
    lock.as_encoded_bytes()
        .ends_with(crate::lock::names::LOCK_SUFFIX.as_bytes())
        .then_some((lock, kind, pid))
}

/// How a decision may treat the owner: the default asks the kernel; a
/// caller (upstream's `inspectFileLockStagingDir(path, probe)`) may answer
/// for it instead, bound to the root it was shown.
pub enum Judge {
    Kernel,
    Given { status: Status, root: RootId },
}

/// Examines the candidate `name` in `parent` and, with `remove`, removes it
/// if it is provably abandoned (see the module docs).
pub fn decide(
    parent: BorrowedFd<'_>,
    name: &OsStr,
    policy: &HostPolicy,
    judge: &Judge,
    remove: bool,
) -> Decision {
    let Some((_, kind, name_pid)) = classify_name(name) else {
        return keep(name, Kind::Staging, None, "unverified_staging_directory");
    };
    match kind {
        Kind::UpdateTemp => {
            let status = pid_status(name_pid, judge, RootId::NONE);
            let decision = keep(name, kind, name_pid, staging_reason(status)).with_status(status);
            if !(remove && status == Status::Dead) {
                return decision;
            }
            let removed = update::remove_if_abandoned(parent, name);
            return Decision {
                removed,
                reason: if removed { "removed" } else { "busy" },
                ..decision
            };
        }
        Kind::RemovalRecord => {
            return decide_lone_remover_record(parent, name, policy, judge, remove);
        }
        Kind::LegacyQuarantine => match transition::read(parent, &transition::record_name(name)) {
            transition::Found::Absent => {}
            transition::Found::Invalid => return keep(name, kind, None, "invalid_removal_record"),
            transition::Found::Valid(record) => {
                return decide_transition(parent, name, &record, policy, judge, remove);
            }
        },
        Kind::Staging | Kind::Quarantine => {}
    }
    let kept = |reason| keep(name, kind, None, reason);
    let dir = match fsx::stat_nofollow(parent, name) {
        Err(Errno::NOENT) => return kept("enoent_already_gone"),
        Err(_) => return kept("unverified_staging_directory"),
        Ok(stat) if fsx::kind_of(&stat) != FileType::Directory => {
            return kept("unverified_staging_directory");
        }
        Ok(_) => match fsx::open_child_dir(parent, name) {
            Ok(dir) => dir,
            Err(Errno::NOENT) => return kept("enoent_already_gone"),
            Err(_) => return kept("unverified_staging_directory"),
        },
    };
    // Someone (a remover, a reclaimer, a publisher still writing its
    // record) is working on this tree right now.
    let Some(turn) = take_turn(dir.as_fd()) else {
        return kept("busy");
    };
    if !has_a_records_shape(dir.as_fd()) {
        return kept("unverified_staging_directory");
    }
    let (snapshot, owner) = match observe(parent, name) {
        Ok(Observation::Missing) => return kept("enoent_already_gone"),
        Ok(Observation::Lock { snapshot, owner }) => (snapshot, owner),
        _ => return kept("unverified_staging_directory"),
    };
    let Some(root) = RootId::of(&snapshot) else {
        return kept("unverified_staging_directory");
    };
    if !crate::lock::guard::names_root(dir.as_fd(), &snapshot) {
        return kept("unverified_staging_directory");
    }
    let ours = |pid: Option<u32>| pid == Some(crate::sys::unique::own_pid());
    let (pid, status) = match &owner {
        Owner::Valid { record, .. } => {
            let pid = record.pid_u32();
            if policy.is_foreign(record.owner_host_id.as_deref()) {
                // Another host's pid (or one we cannot place): not ours to
                // probe.
                return keep(name, kind, pid, "host_qualified_staging_owner").at(root);
            }
            if ours(pid) || ours(name_pid) {
                return keep(name, kind, pid, "in_process_staging_owner")
                    .with_status(Status::Alive)
                    .at(root);
            }
            (pid, record_status(record, judge, root))
        }
        _ if is_unwritten(&owner, &snapshot) && name_pid.is_some() => {
            if ours(name_pid) {
                return keep(name, kind, name_pid, "in_process_staging_owner")
                    .with_status(Status::Alive)
                    .at(root);
            }
            // A name's pid carries no host: on a shared volume it may be
            // another machine's, so a host-aware judge cannot probe it.
            if policy.owner_host_id.is_some() {
                return keep(name, kind, name_pid, "host_qualified_staging_owner").at(root);
            }
            let status = pid_status(name_pid, judge, root);
            if status == Status::Dead && !unwritten_death_proven(turn, &snapshot, now_ns()) {
                return keep(name, kind, name_pid, "recently_created").at(root);
            }
            (name_pid, status)
        }
        _ => return kept("unverified_staging_directory").at(root),
    };
    let decision = keep(name, kind, pid, staging_reason(status))
        .with_status(status)
        .at(root);
    if !(remove && status == Status::Dead) {
        return decision;
    }
    let removed = remove_judged(parent, name, &snapshot, dir);
    Decision {
        removed: removed == "removed",
        reason: removed,
        ..decision
    }
}

/// Upstream 0.18's quarantine `name` with its remover's valid `record`
/// beside it (see [`crate::lock::transition`]): judged by the remover, not
/// by what its emptied files say; removed, record and all, once the
/// remover is proven dead and the quarantine is the directory it names.
fn decide_transition(
    parent: BorrowedFd<'_>,
    name: &OsStr,
    record: &transition::RemoverRecord,
    policy: &HostPolicy,
    judge: &Judge,
    remove: bool,
) -> Decision {
    let pid = record.owner.pid_u32();
    let kept = |reason| keep(name, Kind::LegacyQuarantine, pid, reason);
    let dir = match fsx::open_child_dir(parent, name) {
        Ok(dir) => dir,
        Err(Errno::NOENT) => return kept("enoent_already_gone"),
        Err(_) => return kept("unverified_staging_directory"),
    };
    let Some(_turn) = take_turn(dir.as_fd()) else {
        return kept("busy");
    };
    let snapshot = match tree::snapshot_tree_at(parent, name) {
        Ok(snapshot) if (snapshot.root_dev, snapshot.root_ino) == record.root => snapshot,
        // Not the directory its record is about, or nothing a snapshot reads.
        _ => return kept("unverified_staging_directory"),
    };
    let Some(root) = RootId::of(&snapshot) else {
        return kept("unverified_staging_directory");
    };
    if !crate::lock::guard::names_root(dir.as_fd(), &snapshot) {
        return kept("unverified_staging_directory");
    }
    if policy.is_foreign(record.owner.owner_host_id.as_deref()) {
        return kept("host_qualified_staging_owner").at(root);
    }
    let status = record_status(&record.owner, judge, root);
    let decision = kept(staging_reason(status)).with_status(status).at(root);
    if !(remove && status == Status::Dead) {
        return decision;
    }
    let removed = remove_judged(parent, name, &snapshot, dir);
    if removed == "removed" {
        transition::remove_record(parent, &transition::record_name(name), record);
    }
    Decision {
        removed: removed == "removed",
        reason: removed,
        ..decision
    }
}

/// Upstream 0.18's remover record `name` (`F.lock.removing.owner`) with no
/// quarantine beside it (its remover was killed after removing that, or
/// before making it): removed exactly once its remover is proven dead.
/// With its quarantine there, the quarantine's decision judges both.
fn decide_lone_remover_record(
    parent: BorrowedFd<'_>,
    name: &OsStr,
    policy: &HostPolicy,
    judge: &Judge,
    remove: bool,
) -> Decision {
    let kept = |pid, reason| keep(name, Kind::RemovalRecord, pid, reason);
    let quarantine = name
        .as_encoded_bytes()
        .strip_suffix(transition::RECORD_SUFFIX.as_bytes())
        .and_then(crate::sys::os::os_str)
        .unwrap_or(name);
    if fsx::stat_nofollow(parent, quarantine).is_ok() {
        return kept(None, "removal_in_progress");
    }
    let record = match transition::read(parent, name) {
        transition::Found::Valid(record) => record,
        transition::Found::Absent => return kept(None, "enoent_already_gone"),
        transition::Found::Invalid => return kept(None, "invalid_removal_record"),
    };
    let pid = record.owner.pid_u32();
    if policy.is_foreign(record.owner.owner_host_id.as_deref()) {
        return kept(pid, "host_qualified_staging_owner");
    }
    // A file: no directory to bind a caller's probe to (it judges stagings).
    let unbound = RootId {
        dev: record.root.0,
        ino: record.root.1,
        ctime_ns: 0,
    };
    let status = match judge {
        Judge::Kernel => record_status(&record.owner, judge, unbound),
        Judge::Given { .. } => Status::Unknown,
    };
    let decision = kept(pid, staging_reason(status)).with_status(status);
    if !(remove && status == Status::Dead) {
        return decision;
    }
    let removed = transition::remove_record(parent, name, &record);
    Decision {
        removed: removed == "removed",
        reason: removed,
        ..decision
    }
}

/// The reason a decision on an owner in `status` gives.
fn staging_reason(status: Status) -> &'static str {
    match status {
        Status::Alive => "file_lock_staging_owner_alive",
        Status::Dead => "file_lock_staging_owner_dead",
        Status::Unknown => "file_lock_staging_owner_unknown",
    }
}

/// A candidate's `flock`, as [`decide`] found it free.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Turn {
    /// Ours until the decision is over: nobody else works on the tree.
    Taken,
    /// The filesystem has no `flock`: nobody's work can be seen.
    Unsupported,
}

/// Takes the `flock` of the candidate `dir`; `None` if someone holds it.
fn take_turn(dir: BorrowedFd<'_>) -> Option<Turn> {
    #[cfg(all(test, unix))]
    if NO_FLOCK.with(std::cell::Cell::get) {
        return Some(Turn::Unsupported);
    }
    match crate::sys::os::fs::flock(dir, FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Some(Turn::Taken),
        Err(errno) if is_flock_unsupported(errno) => Some(Turn::Unsupported),
        Err(_) => None,
    }
}

#[cfg(all(test, unix))]
thread_local! {
    /// Decisions on this thread take every filesystem for one without
    /// `flock` (no such filesystem is at hand in a unit test).
    static NO_FLOCK: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether an unwritten candidate whose name's pid was judged dead is
/// proven abandoned (see the module docs): its `flock` was free (no live
/// exactlock publisher or remover, in any pid namespace, holds it), or,
/// where there is no `flock`, nothing in it (its root's and `info`'s
/// mtimes) changed for [`UNWRITTEN_MIN_AGE`] before `now_ns`.
fn unwritten_death_proven(turn: Turn, snapshot: &TreeSnapshot, now_ns: i128) -> bool {
    if turn == Turn::Taken {
        return true;
    }
    let newest = snapshot.entries.iter().map(|entry| entry.mtime_ns).max();
    newest.is_some_and(|newest| now_ns - newest >= UNWRITTEN_MIN_AGE.as_nanos() as i128)
}

/// An empty directory, or one holding only an empty `info`: the states a
/// staging directory is in between its `mkdirat` and its record's write.
fn is_unwritten(owner: &Owner, snapshot: &TreeSnapshot) -> bool {
    match owner {
        Owner::NoRecord { .. } => is_empty_dir(snapshot),
        Owner::Malformed => {
            snapshot.entries.len() == 2 && info_entry(snapshot).is_some_and(|info| info.size == 0)
        }
        _ => false,
    }
}

/// Removes the judged tree, bound to its snapshot; the `flock` taken on
/// `_turn` is held until the end.
fn remove_judged(
    parent: BorrowedFd<'_>,
    name: &OsStr,
    snapshot: &TreeSnapshot,
    _turn: OwnedFd,
) -> &'static str {
    let outcome = tree::remove_tree_in_place_at(parent, name, snapshot);
    match (outcome.ok, outcome.code) {
        (true, _) | (false, Some("not_found")) => "removed",
        (false, Some("identity_mismatch")) => "owner_changed",
        _ => "cleanup_failed",
    }
}

fn record_status(record: &crate::lock::record::OwnerRecord, judge: &Judge, root: RootId) -> Status {
    match judge {
        Judge::Kernel => status_of(liveness_of(record, &Observer::local())),
        // A caller's probe answers for a pid of this system only: one
        // of another pid namespace, kernel or boot is judged as the
        // kernel judges it, without a probe (a probe finds another
        // process, or none, under that number here).
        Judge::Given {
            status,
            root: shown,
        } if *shown == root => {
            match crate::lock::verdict::probeable_pid(record, &Observer::local()) {
                Ok(_) => *status,
                Err(decided) => status_of(decided),
            }
        }
        Judge::Given { .. } => Status::Unknown,
    }
}

fn pid_status(pid: Option<u32>, judge: &Judge, root: RootId) -> Status {
    match judge {
        Judge::Kernel => match pid.map(crate::sys::process::probe) {
            Some(crate::sys::process::Probe::Gone | crate::sys::process::Probe::Exited) => {
                Status::Dead
            }
            Some(crate::sys::process::Probe::Running { .. }) => Status::Alive,
            _ => Status::Unknown,
        },
        Judge::Given {
            status,
            root: shown,
        } if *shown == root => *status,
        Judge::Given { .. } => Status::Unknown,
    }
}

fn status_of(liveness: Liveness) -> Status {
    match liveness {
        Liveness::Live => Status::Alive,
        _ if liveness.proves_gone() => Status::Dead,
        _ => Status::Unknown,
    }
}

fn keep(name: &OsStr, kind: Kind, pid: Option<u32>, reason: &'static str) -> Decision {
    Decision {
        name: name.to_os_string(),
        kind,
        pid,
        status: Status::Unknown,
        removed: false,
        reason,
        root: None,
    }
}

impl Decision {
    fn with_status(mut self, status: Status) -> Self {
        self.status = status;
        self
    }

    fn at(mut self, root: RootId) -> Self {
        self.root = Some(root);
        self
    }
}

/// The candidates in `parent` (of `lock_name`, or of any lock when `None`,
/// limited to `kinds`), at most `limit` of them, in directory order.
pub fn candidates(
    parent: BorrowedFd<'_>,
    lock_name: Option<&OsStr>,
    kinds: &[Kind],
    limit: usize,
) -> Result<Vec<OsString>, Errno> {
    let listing = crate::sys::os::fs::openat(
        parent,
        ".",
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let mut dir = Dir::read_from(listing.as_fd())?;
    let mut found = Vec::new();
    while found.len() < limit {
        let Some(entry) = dir.next() else { break };
        let entry = entry?;
        // A name that is not one the OS can give back (a Windows name
        // that is not Unicode) cannot be one of ours.
        let Some(name) = crate::sys::os::os_str(entry.file_name().to_bytes()) else {
            continue;
        };
        let Some((lock, kind, _)) = classify_name(name) else {
            continue;
        };
        if kinds.contains(&kind) && lock_name.is_none_or(|wanted| wanted == lock) {
            found.push(name.to_os_string());
        }
    }
    Ok(found)
}

/// Whether the directory `dir` holds at most one entry, named `info`: the
/// only shapes our stagings and quarantines have (empty, or the record).
/// Looked at before anything is read or hashed, and given up at the first
/// entry that does not fit, so a directory of another shape costs one
/// short listing however much it holds.
fn has_a_records_shape(dir: BorrowedFd<'_>) -> bool {
    let Ok(listing) = crate::sys::os::fs::openat(
        dir,
        ".",
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    ) else {
        return false;
    };
    let Ok(entries) = Dir::read_from(listing.as_fd()) else {
        return false;
    };
    let mut records = 0;
    for entry in entries {
        let Ok(entry) = entry else {
            return false;
        };
        match entry.file_name().to_bytes() {
            b"." | b".." => {}
            name if name == crate::lock::identity::INFO_NAME.as_bytes() && records == 0 => {
                records += 1;
            }
            _ => return false,
        }
    }
    true
}

/// Every kind of debris.
pub const ALL_KINDS: &[Kind] = &[
    Kind::Staging,
    Kind::Quarantine,
    Kind::LegacyQuarantine,
    Kind::RemovalRecord,
    Kind::UpdateTemp,
];

/// Examines (and with `remove`, removes what is provably abandoned of) the
/// debris of `lock_name` (or of every lock) in `parent`.
pub fn reap(
    parent: BorrowedFd<'_>,
    lock_name: Option<&OsStr>,
    policy: &HostPolicy,
    remove: bool,
    limit: usize,
) -> Result<Vec<Decision>, Errno> {
    Ok(candidates(parent, lock_name, ALL_KINDS, limit)?
        .iter()
        .map(|name| decide(parent, name, policy, &Judge::Kernel, remove))
        .collect())
}

/// The scan a contended acquisition makes each time it first finds its
/// lock held: like [`reap`] of `lock_name`'s debris, but a candidate whose
/// name's pid is a process that exists here is skipped unopened. That is
/// almost always a live waiter's staging or a live remover's quarantine,
/// and judging it in full costs some thirty syscalls on every hand-off of
/// a busy lock. Skipping removes nothing: a dead owner whose pid was
/// reused (or a name of another pid namespace) is left for the full scans
/// ([`reap_when_changed`], `exactlock gc`).
pub fn reap_named_by_gone_pids(
    parent: BorrowedFd<'_>,
    lock_name: &OsStr,
    policy: &HostPolicy,
) -> Result<Vec<Decision>, Errno> {
    Ok(reap_skipping_live_names(parent, Some(lock_name), policy)?.0)
}

/// [`reap`] with every candidate whose name's pid exists here skipped
/// unopened; and the pids of those skipped.
fn reap_skipping_live_names(
    parent: BorrowedFd<'_>,
    lock_name: Option<&OsStr>,
    policy: &HostPolicy,
) -> Result<(Vec<Decision>, Vec<u32>), Errno> {
    let mut skipped = Vec::new();
    let decisions = candidates(parent, lock_name, ALL_KINDS, MAX_CANDIDATES)?
        .iter()
        .filter(
            |name| match classify_name(name).and_then(|(_, _, pid)| pid) {
                Some(pid) if crate::sys::process::exists(pid) => {
                    skipped.push(pid);
                    false
                }
                _ => true,
            },
        )
        .map(|name| decide(parent, name, policy, &Judge::Kernel, true))
        .collect();
    Ok((decisions, skipped))
}

/// What this process saw of a directory's debris at its last scan.
struct Scanned {
    /// The directory's link count then, less this process's own lock
    /// directories in it and what the scan removed; or the lowest seen
    /// since: a count above it means a subdirectory was made since (on
    /// filesystems that count them).
    links: u64,
    /// The pids of the candidates the scan left because their owner
    /// lived: one that has died since left debris to reap.
    standing: Vec<u32>,
    /// A rescan is running.
    scanning: bool,
    /// When the last scan ended, and when `standing` was last checked.
    scanned_at: Instant,
    looked_at: Instant,
    /// How many rescans there were (for tests).
    rescans: u32,
}

/// The shortest time between two rescans of a directory, and between two
/// checks of the processes a scan left standing: a busy directory (locks
/// of other processes coming and going) costs at most one listing and one
/// `kill(pid, 0)` per such process in each.
const RESCAN_GAP: Duration = Duration::from_millis(100);

/// At most this many directories are remembered as scanned: a process that
/// locks files in ever new directories (a temporary one per test) would
/// otherwise keep one entry per directory it ever used. Past it, the one
/// scanned longest ago is forgotten: its next acquisition scans it again.
const MAX_SCANNED: usize = 4096;

/// Makes room for one more directory in `scanned` (see [`MAX_SCANNED`]):
/// forgets the one scanned longest ago that is not being rescanned.
fn make_room(scanned: &mut HashMap<DirIdentity, Scanned>, max: usize) {
    while scanned.len() >= max {
        let oldest = scanned
            .iter()
            .filter(|(_, seen)| !seen.scanning)
            .min_by_key(|(_, seen)| seen.scanned_at)
            .map(|(dir, _)| *dir);
        match oldest {
            Some(dir) => scanned.remove(&dir),
            None => return,
        };
    }
}

fn scanned() -> &'static Mutex<HashMap<DirIdentity, Scanned>> {
    static SCANNED: OnceLock<Mutex<HashMap<DirIdentity, Scanned>>> = OnceLock::new();
    SCANNED.get_or_init(Mutex::default)
}

/// The link count [`claim_rescan`] compares: the parent's (`links`) less
/// this process's own subdirectories in it (`own`: its lock directories
/// and its waiters' stagings). A directory that counts no subdirectories
/// (btrfs, NTFS, overlayfs after copy-up, many network mounts: always 1)
/// is left as it is, so that only the pid rule applies there; elsewhere
/// the count never goes below the 2 of an empty directory.
pub fn links_beside(links: u64, own: u64) -> u64 {
    if links < 2 {
        links
    } else {
        links.saturating_sub(own).max(2)
    }
}

/// Whether this process has scanned the debris of `dir`.
pub fn scanned_before(dir: &DirIdentity) -> bool {
    scanned()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .contains_key(dir)
}

/// Claims the rescan of `dir` (whose link count, less this process's own
/// lock directories in it, is `links` now) if its debris may have changed
/// since this process last scanned it: a subdirectory made since (the
/// count grew: a staging or a quarantine of a process killed since), or
/// the owner of a candidate the last scan left has exited. At most one
/// rescan at a time and one per [`RESCAN_GAP`]; a change seen meanwhile is
/// still seen after it. A count lower than the last one becomes the base,
/// so that a subdirectory made after a removal is seen.
///
/// Best effort: a subdirectory made while another went (a waiter killed
/// while another lock was released) leaves the count where it was, and
/// where directories count no subdirectories (btrfs, overlayfs once a
/// directory is copied up, many network mounts: always 1) only the pid
/// rule applies. What this misses is reaped by a contended acquisition's
/// scan, another process's first acquisition there, or `exactlock gc`.
fn claim_rescan(dir: &DirIdentity, links: u64) -> bool {
    let standing = {
        let mut scanned = scanned().lock().unwrap_or_else(|p| p.into_inner());
        let Some(seen) = scanned.get_mut(dir) else {
            return false;
        };
        if seen.scanning {
            return false;
        }
        if links > seen.links {
            if seen.scanned_at.elapsed() < RESCAN_GAP {
                return false;
            }
            seen.scanning = true;
            return true;
        }
        seen.links = links;
        if seen.standing.is_empty() || seen.looked_at.elapsed() < RESCAN_GAP {
            return false;
        }
        seen.looked_at = Instant::now();
        seen.standing.clone()
    };
    // Outside the lock: a `kill(pid, 0)` each.
    if standing.iter().all(|&pid| crate::sys::process::exists(pid)) {
        return false;
    }
    let mut scanned = scanned().lock().unwrap_or_else(|p| p.into_inner());
    match scanned.get_mut(dir) {
        Some(seen) if !seen.scanning => {
            seen.scanning = true;
            true
        }
        _ => false,
    }
}

/// Scans the debris of every lock in `parent` for the first time in this
/// process, or has it scanned again, on a thread of its own, when it may
/// have changed ([`reap_soon_when_changed`]); `links`
/// is the directory's link count less this process's own lock
/// directories in it. The first attempt of this process there finds its
/// killed predecessors' debris gone. Best effort: a first scan that fails
/// is tried again by the next attempt (one that may not list the
/// directory, never).
pub fn reap_when_changed(
    parent: BorrowedFd<'_>,
    dir: &DirIdentity,
    links: u64,
    policy: &HostPolicy,
) {
    if scanned_before(dir) {
        // Off this thread too: a rescan never delays an acquisition.
        reap_soon_when_changed(parent, dir, links, policy);
        return;
    }
    let decisions = match reap(parent, None, policy, true, MAX_CANDIDATES) {
        Ok(decisions) => decisions,
        // A directory this process may not list (`-wx`): every later
        // attempt would fail the same way, and each would lose the inline
        // path for it. Scanned, as far as it can be.
        Err(Errno::ACCESS | Errno::PERM) => Vec::new(),
        Err(_) => return,
    };
    record_scan(dir, links, &decisions, Vec::new());
}

/// A rescan due ([`claim_rescan`]) runs on a thread of its own, with a
/// descriptor of its own to `parent`: the acquisition (on the caller's
/// thread, which lists nothing, or on its way to a lock just freed) does
/// not wait for it.
pub fn reap_soon_when_changed(
    parent: BorrowedFd<'_>,
    dir: &DirIdentity,
    links: u64,
    policy: &HostPolicy,
) {
    if !claim_rescan(dir, links) {
        return;
    }
    let spawned = crate::sys::os::io::fcntl_dupfd_cloexec(parent, 0).and_then(|parent| {
        let (dir, policy) = (*dir, policy.clone());
        std::thread::Builder::new()
            .name("exactlock-debris".into())
            .spawn(move || rescan(parent.as_fd(), &dir, links, &policy))
            .map_err(|_| Errno::AGAIN)
    });
    if spawned.is_err() {
        // No descriptor or thread to spare: the next attempt claims it.
        if let Some(seen) = scanned()
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_mut(dir)
        {
            seen.scanning = false;
        }
    }
}

/// A claimed rescan: candidates named by a running pid are skipped
/// unopened, as a contended acquisition's scan skips them
/// ([`reap_named_by_gone_pids`]): nearly always live waiters' stagings,
/// remembered, and judged once their process has exited.
fn rescan(parent: BorrowedFd<'_>, dir: &DirIdentity, links: u64, policy: &HostPolicy) {
    match reap_skipping_live_names(parent, None, policy) {
        Ok((decisions, skipped)) => record_scan(dir, links, &decisions, skipped),
        // A directory this process may not list (`-wx`): as in a first
        // scan, scanned as far as it can be (else every attempt past the
        // gap would try again, and fail the same way).
        Err(Errno::ACCESS | Errno::PERM) => record_scan(dir, links, &[], Vec::new()),
        Err(_) => {
            // Tried again once the gap has passed.
            if let Some(seen) = scanned()
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get_mut(dir)
            {
                seen.scanning = false;
                seen.scanned_at = Instant::now();
            }
        }
    }
}

/// Remembers what a scan of `dir` saw and left.
fn record_scan(dir: &DirIdentity, links: u64, decisions: &[Decision], skipped: Vec<u32>) {
    let removed = decisions.iter().filter(|decision| decision.removed).count() as u64;
    let mut standing: Vec<u32> = decisions
        .iter()
        .filter(|decision| {
            !decision.removed && matches!(decision.reason, "file_lock_staging_owner_alive" | "busy")
        })
        .filter_map(|decision| decision.pid.or_else(|| classify_name(&decision.name)?.2))
        .chain(skipped)
        .filter(|&pid| pid != crate::sys::unique::own_pid())
        .collect();
    standing.sort_unstable();
    standing.dedup();
    // Only a running process's exit can change what was judged (a name's
    // pid that runs nowhere would make every attempt scan).
    standing.retain(|&pid| crate::sys::process::exists(pid));
    let now = Instant::now();
    let mut scanned = scanned().lock().unwrap_or_else(|p| p.into_inner());
    let rescans = scanned.get(dir).map_or(0, |seen| seen.rescans + 1);
    if !scanned.contains_key(dir) {
        make_room(&mut scanned, MAX_SCANNED);
    }
    scanned.insert(
        *dir,
        Scanned {
            links: links.saturating_sub(removed),
            standing,
            scanning: false,
            scanned_at: now,
            looked_at: now,
            rescans,
        },
    );
}

// Most of these build POSIX fixtures (symlinks, FIFOs, modes, a directory's
// flock, removing a directory its writer holds open): those are unix-only,
// each marked; the rest run on Windows too (npm run test:windows). Helpers
// only the unix ones use are unused there.
#[cfg(test)]
#[cfg_attr(windows, allow(dead_code, unused_imports))]
mod tests {
    use super::*;
    use crate::testutil::{listing, tempdir};
    use std::path::Path;
    use std::process::Command;

    const UUID: &str = "12345678-1234-1234-1234-123456789abc";

    /// The remembered directories are bounded: the one scanned longest ago
    /// goes first, never one being rescanned.
    #[test]
    fn the_directories_remembered_are_bounded_oldest_forgotten_first() {
        let dir = |ino: u64| DirIdentity {
            dev: 1,
            ino,
            birth_ns: 0,
        };
        let at = |ago_ms: u64, scanning: bool| Scanned {
            links: 2,
            standing: Vec::new(),
            scanning,
            scanned_at: Instant::now() - Duration::from_millis(ago_ms),
            looked_at: Instant::now(),
            rescans: 0,
        };
        let mut scanned = HashMap::new();
        scanned.insert(dir(1), at(300, true));
        scanned.insert(dir(2), at(200, false));
        scanned.insert(dir(3), at(100, false));
        make_room(&mut scanned, 3);
        let mut left: Vec<u64> = scanned.keys().map(|dir| dir.ino).collect();
        left.sort_unstable();
        assert_eq!(left, [1, 3], "the oldest not being rescanned went");
        make_room(&mut scanned, 5);
        assert_eq!(scanned.len(), 2, "room enough: nothing forgotten");
    }

    /// A pid that is provably gone: a child that exited and was reaped.
    fn dead_pid() -> u32 {
        let mut child = Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        pid
    }

    fn record_of(pid: u32) -> String {
        format!(r#"{{"pid":{pid},"timestamp":1}}"#)
    }

    fn plant(root: &Path, name: &str, info: Option<&str>) {
        std::fs::create_dir(root.join(name)).unwrap();
        if let Some(info) = info {
            std::fs::write(root.join(name).join("info"), info).unwrap();
            age(&root.join(name).join("info"));
        }
        age(&root.join(name));
    }

    /// Sets the mtime an hour back: left there by a process killed long ago.
    fn age(path: &Path) {
        let hour_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
        std::fs::File::open(path)
            .unwrap()
            .set_modified(hour_ago)
            .unwrap();
    }

    /// Waits (up to 5 s) for `root` to list `expected`: a rescan runs on a
    /// thread of its own.
    fn settles_to(root: &Path, expected: &[String]) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while listing(root) != expected && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert_eq!(listing(root), expected);
    }

    /// One attempt's look at `root`'s debris (see [`reap_when_changed`]).
    fn attempt_looks_at(root: &Path) {
        let parent = fsx::open_dir_nofollow(root).unwrap();
        let (key, links) =
            crate::lock::table::LockKey::with_parent_links(parent.as_fd(), OsStr::new("f.lock"))
                .unwrap();
        let own = crate::lock::table::generations_in(&key.parent)
            + crate::lock::publish::stagings_in((key.parent.dev, key.parent.ino));
        let links = links_beside(links, own);
        reap_when_changed(parent.as_fd(), &key.parent, links, &HostPolicy::default());
    }

    // The link count of a directory counts its subdirectories on tmpfs and
    // ext4 (the test's temp dir), not on btrfs.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_process_that_scanned_a_directory_reaps_what_a_process_killed_since_left() {
        let root = tempdir("debris-since");
        attempt_looks_at(&root);
        // A waiter killed after this process's first scan.
        let dead = format!("f.lock.pending.{}.{UUID}", dead_pid());
        plant(&root, &dead, Some(&record_of(dead_pid())));
        std::thread::sleep(RESCAN_GAP);
        attempt_looks_at(&root);
        settles_to(&root, &[]);
        // And again after that removal (the count it lowered is the new base).
        plant(&root, &dead, Some(&record_of(dead_pid())));
        std::thread::sleep(RESCAN_GAP);
        attempt_looks_at(&root);
        settles_to(&root, &[]);
        std::fs::remove_dir_all(root).unwrap();
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn locks_this_process_holds_beside_each_other_bring_no_rescan() {
        use crate::lock::release::{FirstAttempt, release_first_attempt};
        let root = tempdir("debris-own-locks");
        for _ in 0..5 {
            let a = crate::testutil::acquire_free_named(&root, "a");
            let b = crate::testutil::acquire_free_named(&root, "b");
            for id in [a, b] {
                assert_eq!(release_first_attempt(id), FirstAttempt::Done(Ok(())));
            }
            std::thread::sleep(RESCAN_GAP);
        }
        let dir = fsx::dir_identity(fsx::open_dir_nofollow(&root).unwrap().as_fd()).unwrap();
        let scanned = scanned().lock().unwrap();
        assert_eq!(
            scanned[&dir].rescans, 0,
            "its own lock directories are no debris"
        );
        assert!(!scanned[&dir].scanning);
        drop(scanned);
        std::fs::remove_dir_all(root).unwrap();
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_waiter_of_this_process_staged_beside_brings_no_rescan() {
        use crate::lock::release::{FirstAttempt, release_first_attempt};
        let root = tempdir("debris-own-waiter");
        attempt_looks_at(&root);
        let parent = fsx::open_dir_nofollow(&root).unwrap();
        // A waiter of this process, staged for another lock there.
        let staged = crate::lock::publish::Staged::new(
            parent.as_fd(),
            OsStr::new("a.lock"),
            br#"{"pid":1,"timestamp":1}"#,
            crate::lock::publish::LockMode::PRIVATE,
        )
        .unwrap();
        for _ in 0..5 {
            std::thread::sleep(RESCAN_GAP);
            // The waiter's own attempt, then an acquisition of another lock.
            attempt_looks_at(&root);
            let b = crate::testutil::acquire_free_named(&root, "b");
            assert_eq!(release_first_attempt(b), FirstAttempt::Done(Ok(())));
        }
        let dir = fsx::dir_identity(parent.as_fd()).unwrap();
        assert_eq!(scanned().lock().unwrap()[&dir].rescans, 0);
        drop(staged);
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn a_directory_that_counts_no_subdirectories_is_left_to_the_pid_rule() {
        // btrfs, NTFS, overlayfs after copy-up: always 1, whatever is held.
        assert_eq!(links_beside(1, 0), 1);
        assert_eq!(links_beside(1, 3), 1);
        // Elsewhere never below an empty directory's 2.
        assert_eq!(links_beside(5, 2), 3);
        assert_eq!(links_beside(3, 2), 2);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_waiter_alive_at_the_scan_and_killed_since_is_reaped_by_the_next_attempt() {
        let root = tempdir("debris-killed-since");
        let mut waiter = Command::new("sleep").arg("30").spawn().unwrap();
        let name = format!("f.lock.pending.{}.{UUID}", waiter.id());
        plant(&root, &name, Some(&record_of(waiter.id())));
        attempt_looks_at(&root);
        assert_eq!(
            listing(&root),
            vec![name.clone()],
            "a live waiter's staging is kept"
        );
        attempt_looks_at(&root);
        assert_eq!(listing(&root), vec![name], "and kept while it lives");
        waiter.kill().unwrap();
        waiter.wait().unwrap();
        // The directory's link count is what it was at the scan.
        std::thread::sleep(RESCAN_GAP);
        attempt_looks_at(&root);
        settles_to(&root, &[]);
        std::fs::remove_dir_all(root).unwrap();
    }

    fn reap_all(root: &Path) -> Vec<Decision> {
        let parent = fsx::open_dir_nofollow(root).unwrap();
        reap(
            parent.as_fd(),
            Some(OsStr::new("f.lock")),
            &HostPolicy::default(),
            true,
            MAX_CANDIDATES,
        )
        .unwrap()
    }

    #[test]
    fn names_nominate_candidates() {
        for (name, expected) in [
            (
                format!("f.lock.pending.12.{UUID}"),
                Some(("f.lock", Kind::Staging, Some(12))),
            ),
            (
                format!("f.lock.removing.9.{UUID}"),
                Some(("f.lock", Kind::Quarantine, Some(9))),
            ),
            (
                "f.lock.removing".to_string(),
                Some(("f.lock", Kind::LegacyQuarantine, None)),
            ),
            ("f.lock.pending.interrupted".to_string(), None),
            // Not derived from a lock's name: another program's.
            (format!("notes.pending.12.{UUID}"), None),
            (format!("notes.removing.9.{UUID}"), None),
            ("backup.removing".to_string(), None),
            // The lock of a path ending in a separator is named `.lock`.
            (
                format!(".lock.pending.12.{UUID}"),
                Some((".lock", Kind::Staging, Some(12))),
            ),
            ("f.lock".to_string(), None),
            (".removing".to_string(), None),
        ] {
            let got = classify_name(OsStr::new(&name))
                .map(|(lock, kind, pid)| (lock.to_str().unwrap(), kind, pid));
            assert_eq!(got, expected, "{name}");
        }
    }

    #[cfg(unix)]
    #[test]
    fn the_dead_owners_debris_goes_and_everything_else_stays() {
        let root = tempdir("debris");
        let dead = dead_pid();
        let live = std::process::id();
        let mut child = Command::new("sleep").arg("30").spawn().unwrap();
        let other_live = child.id();
        // Provably abandoned: a dead owner's record, a dead name's empty dir.
        plant(
            &root,
            &format!("f.lock.pending.{dead}.{UUID}"),
            Some(&record_of(dead)),
        );
        plant(&root, &format!("f.lock.removing.{dead}.{UUID}"), None);
        plant(
            &root,
            &format!(
                "f.lock.pending.{dead}.{}",
                "62345678-1234-1234-1234-123456789abc"
            ),
            Some(""),
        );
        // Kept: a live owner's record under a dead name (the record is
        // authoritative), a live name's empty staging, our own, a user's
        // directory at each name, a malformed record, the legacy name
        // without proof, a symlink.
        let kept = [
            format!(
                "f.lock.pending.{dead}.{}",
                "22345678-1234-1234-1234-123456789abc"
            ),
            format!("f.lock.pending.{other_live}.{UUID}"),
            format!("f.lock.pending.{live}.{UUID}"),
            format!(
                "f.lock.removing.{dead}.{}",
                "32345678-1234-1234-1234-123456789abc"
            ),
            format!(
                "f.lock.pending.{dead}.{}",
                "42345678-1234-1234-1234-123456789abc"
            ),
            "f.lock.removing".to_string(),
        ];
        plant(&root, &kept[0], Some(&record_of(other_live)));
        plant(&root, &kept[1], None);
        plant(&root, &kept[2], None);
        plant(&root, &kept[3], None);
        std::fs::write(root.join(&kept[3]).join("notes.txt"), b"mine").unwrap();
        // A dead name's empty dir, just made: its free `flock` proves that
        // no live publisher (of any pid namespace) is filling it.
        let fresh = format!(
            "f.lock.pending.{dead}.{}",
            "72345678-1234-1234-1234-123456789abc"
        );
        std::fs::create_dir(root.join(&fresh)).unwrap();
        plant(&root, &kept[4], Some("{\"broken\":true}"));
        plant(&root, &kept[5], None);
        let link = format!(
            "f.lock.pending.{dead}.{}",
            "52345678-1234-1234-1234-123456789abc"
        );
        std::os::unix::fs::symlink(root.join(&kept[3]), root.join(&link)).unwrap();

        let decisions = reap_all(&root);
        let removed: Vec<_> = decisions.iter().filter(|d| d.removed).collect();
        assert_eq!(removed.len(), 4, "{decisions:#?}");
        let mut left = listing(&root);
        left.sort();
        let mut expected: Vec<String> = kept.to_vec();
        expected.push(link);
        expected.sort();
        assert_eq!(left, expected);
        assert!(!root.join(&fresh).exists());
        assert_eq!(
            std::fs::read(root.join(&kept[3]).join("notes.txt")).unwrap(),
            b"mine"
        );
        let _ = child.kill();
        let _ = child.wait();
        std::fs::remove_dir_all(root).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn the_contended_scan_judges_only_names_of_gone_pids() {
        let root = tempdir("debris-contended");
        let dead = dead_pid();
        let mut child = Command::new("sleep").arg("30").spawn().unwrap();
        let running = child.id();
        // A dead waiter's staged record: removed by either scan.
        let dead_waiter = format!("f.lock.pending.{dead}.{UUID}");
        plant(&root, &dead_waiter, Some(&record_of(dead)));
        // A dead holder's tree in a running reclaimer's staging: the
        // contended scan does not open it; the full scan judges it.
        let busy = format!("f.lock.removing.{running}.{UUID}");
        plant(&root, &busy, Some(&record_of(dead)));
        let parent = fsx::open_dir_nofollow(&root).unwrap();
        let decisions =
            reap_named_by_gone_pids(parent.as_fd(), OsStr::new("f.lock"), &HostPolicy::default())
                .unwrap();
        assert_eq!(decisions.len(), 1, "{decisions:?}");
        assert!(decisions[0].removed);
        assert_eq!(listing(&root), vec![busy.clone()]);
        let full = reap_all(&root);
        assert!(full.iter().all(|d| d.removed), "{full:?}");
        assert!(listing(&root).is_empty());
        child.kill().unwrap();
        child.wait().unwrap();
        std::fs::remove_dir_all(root).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn a_tree_someone_works_on_is_left_to_them() {
        let root = tempdir("debris-busy");
        let dead = dead_pid();
        let name = format!("f.lock.removing.{dead}.{UUID}");
        plant(&root, &name, Some(&record_of(dead)));
        let turn = fsx::open_dir_nofollow(&root.join(&name)).unwrap();
        crate::sys::os::fs::flock(&turn, FlockOperation::NonBlockingLockExclusive).unwrap();
        let decisions = reap_all(&root);
        assert_eq!(decisions[0].reason, "busy");
        assert_eq!(listing(&root), std::slice::from_ref(&name));
        drop(turn);
        assert!(reap_all(&root)[0].removed);
        assert!(listing(&root).is_empty());
        std::fs::remove_dir_all(root).unwrap();
    }

    /// Runs `test` with every decision on this thread taking the
    /// filesystem for one without `flock`.
    #[cfg(unix)]
    fn without_flock<T>(test: impl FnOnce() -> T) -> T {
        NO_FLOCK.with(|no_flock| no_flock.set(true));
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(test));
        NO_FLOCK.with(|no_flock| no_flock.set(false));
        result.unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    }

    fn decide_in(root: &Path, name: &str, judge: &Judge, remove: bool) -> Decision {
        let parent = fsx::open_dir_nofollow(root).unwrap();
        decide(
            parent.as_fd(),
            OsStr::new(name),
            &HostPolicy::default(),
            judge,
            remove,
        )
    }

    #[cfg(unix)]
    #[test]
    fn a_dead_names_unwritten_staging_goes_at_once_when_its_flock_is_free() {
        let root = tempdir("debris-unwritten");
        let dead = dead_pid();
        let empty = format!("f.lock.pending.{dead}.{UUID}");
        let empty_info = format!("f.lock.removing.{dead}.{UUID}");
        std::fs::create_dir(root.join(&empty)).unwrap();
        std::fs::create_dir(root.join(&empty_info)).unwrap();
        std::fs::write(root.join(&empty_info).join("info"), b"").unwrap();
        for name in [&empty, &empty_info] {
            let shown = decide_in(&root, name, &Judge::Kernel, false);
            assert_eq!(
                (shown.status, shown.reason, shown.pid),
                (Status::Dead, "file_lock_staging_owner_dead", Some(dead))
            );
            assert!(decide_in(&root, name, &Judge::Kernel, true).removed);
        }
        assert!(listing(&root).is_empty());
        std::fs::remove_dir_all(root).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn without_flock_a_dead_names_unwritten_staging_waits_out_its_age_and_others_are_reported() {
        let root = tempdir("debris-no-flock");
        let dead = dead_pid();
        let young = format!("f.lock.pending.{dead}.{UUID}");
        let old = format!(
            "f.lock.pending.{dead}.{}",
            "62345678-1234-1234-1234-123456789abc"
        );
        std::fs::create_dir(root.join(&young)).unwrap();
        // Its mtime ahead of the clock: young however slowly this runs.
        std::fs::File::open(root.join(&young))
            .unwrap()
            .set_modified(std::time::SystemTime::now() + std::time::Duration::from_secs(3600))
            .unwrap();
        plant(&root, &old, None);
        without_flock(|| {
            // Not provable: a publisher of another pid namespace may be
            // filling it.
            let kept = decide_in(&root, &young, &Judge::Kernel, true);
            assert_eq!(
                (kept.removed, kept.status, kept.reason, kept.pid),
                (false, Status::Unknown, "recently_created", Some(dead))
            );
            // A caller's probe: its alive or unknown is reported as it is,
            // its dead is as unprovable as the kernel's.
            for status in [Status::Alive, Status::Unknown, Status::Dead] {
                let judge = Judge::Given {
                    status,
                    root: kept.root.unwrap(),
                };
                let decision = decide_in(&root, &young, &judge, true);
                assert!(!decision.removed);
                match status {
                    Status::Dead => assert_eq!(decision.reason, "recently_created"),
                    _ => assert_eq!(decision.status, status),
                }
            }
            assert!(root.join(&young).exists());
            // Left alone for longer than UNWRITTEN_MIN_AGE: abandoned.
            assert!(decide_in(&root, &old, &Judge::Kernel, true).removed);
        });
        assert_eq!(listing(&root), vec![young]);
        std::fs::remove_dir_all(root).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn a_given_verdict_does_not_speak_for_a_pid_of_another_namespace() {
        let root = tempdir("debris-given-ns");
        // A waiter's record written in another pid namespace (a container):
        // its pid means nothing here, whatever a probe of this system says.
        let pid = dead_pid();
        let name = format!("f.lock.pending.{pid}.{UUID}");
        let record = format!(r#"{{"pid":{pid},"timestamp":1,"pid_ns":"pid:[1]"}}"#);
        plant(&root, &name, Some(&record));
        without_flock(|| {
            let shown = decide_in(&root, &name, &Judge::Kernel, false);
            assert_eq!(shown.status, Status::Unknown);
            let judge = Judge::Given {
                status: Status::Dead,
                root: shown.root.unwrap(),
            };
            let decision = decide_in(&root, &name, &judge, true);
            assert!(!decision.removed, "a probe's dead removed it");
            assert_eq!(decision.status, Status::Unknown);
        });
        assert_eq!(listing(&root), vec![name]);
        std::fs::remove_dir_all(root).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn a_given_verdict_binds_to_the_root_it_was_shown() {
        let root = tempdir("debris-given");
        let name = format!("f.lock.pending.424242.{UUID}");
        plant(&root, &name, None);
        let parent = fsx::open_dir_nofollow(&root).unwrap();
        let shown = decide(
            parent.as_fd(),
            OsStr::new(&name),
            &HostPolicy::default(),
            &Judge::Kernel,
            false,
        );
        // Replaced while the caller's probe ran: the verdict does not carry.
        std::fs::rename(root.join(&name), root.join("old")).unwrap();
        plant(&root, &name, None);
        let judge = Judge::Given {
            status: Status::Dead,
            root: shown.root.unwrap(),
        };
        let decision = decide(
            parent.as_fd(),
            OsStr::new(&name),
            &HostPolicy::default(),
            &judge,
            true,
        );
        assert!(!decision.removed);
        assert_eq!(decision.status, Status::Unknown);
        assert_eq!(listing(&root).len(), 2);
        std::fs::remove_dir_all(root).unwrap();
    }
}
