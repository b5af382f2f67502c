//! Publication: a lock appears at `<file>.lock` complete or not at all.
//!
//! The record is written into a private staging directory
//! `<file>.lock.pending.<pid>.<uuid>` beside the lock, which is then renamed
//! onto the lock name with a no-replace rename. A plain `rename(2)` would
//! silently replace an existing *empty* directory — a legacy holder between
//! its `mkdir` and its record — so only the no-replace form is used. The
//! staging directory is removed on every path that does not publish it.
//!
//! Until its record is written, a staging directory says nothing of its
//! owner but the pid in its name, which carries no pid namespace: a reaper
//! that sees that pid dead cannot tell a publisher killed mid-way from a
//! live one of another pid namespace. So the publisher takes the
//! directory's `flock` (`LOCK_EX`) right after its `mkdir`, and keeps it:
//! while it stages, waits, and then holds the published lock, until the
//! release (or the process) ends. The kernel drops it when the publisher
//! dies, in whatever namespace: a reaper that takes it knows no live
//! publisher is filling the directory (see [`crate::lock::debris`]), and a
//! reclaimer, who takes it before removing a lock it judged stale (see
//! [`crate::lock::guard`]), knows that no live process holds the lock
//! through it. The release therefore needs no `flock` of its own. A reaper
//! may still win the `flock` between our `mkdir` and our `flock`; it may
//! then remove the directory, and the publication is made again under a
//! fresh name (`ENOENT`, as for a vanished parent: every caller tries
//! again).

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::sync::{Mutex, OnceLock};

use crate::sys::os::fd::{AsFd, BorrowedFd, OwnedFd};
use crate::sys::os::fs::{self, AtFlags, FlockOperation, Mode, OFlags, RenameFlags, Stat};
use crate::sys::os::io::Errno;

use crate::fs::caps::{self, Flag};
use crate::fs::fsx;
use crate::fs::rename;
use crate::fs::tree::{self, TreeSnapshot};
use crate::lock::identity::INFO_NAME;
use crate::lock::volume::{self, OnServer};

/// The permission bits of a lock directory: `rwx------` unless asked
/// otherwise (SPEC §2); its record's are the same less every `x` and
/// every `w` but the owner's (0600).
/// Made exact under any umask. A lock shared by the users of a group asks
/// for the group's bits too (`mode: 0o770`): each user's waiter must read
/// another's record to judge its holder, and remove its directory to
/// reclaim it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LockMode(u32);

impl LockMode {
    pub const PRIVATE: LockMode = LockMode(0o700);

    /// `bits` if they keep the owner's `rwx` and set nothing above `0o777`.
    pub fn new(bits: u32) -> Option<LockMode> {
        (bits & 0o700 == 0o700 && bits <= 0o777).then_some(LockMode(bits))
    }

    /// The mode of the lock directory (and of the parents made for it).
    pub fn dir(self) -> Mode {
        Mode::from_raw_mode(self.0 as _)
    }

    /// The mode of its record: the same, less every `x`, and less every
    /// `w` but the owner's (nobody else writes a record: removing a lock
    /// takes writing its directory).
    pub fn file(self) -> Mode {
        Mode::from_raw_mode((self.0 & 0o644) as _)
    }
}

impl Default for LockMode {
    fn default() -> Self {
        LockMode::PRIVATE
    }
}

/// What a publication left on disk.
#[derive(Debug)]
pub struct Published {
    /// The published directory, kept open by its holder. An inode with an
    /// open descriptor is never freed, so while the lock is held no other
    /// directory can be given its inode number: a byte-identical copy made
    /// after someone removed the lock can never pass for it at release.
    pub root: OwnedFd,
    /// The tree as published (root and record), for an exact removal that
    /// need not walk it first.
    pub tree: TreeSnapshot,
}

/// A staging directory made by this attempt, with its record written.
struct Stage {
    /// Its name in the parent.
    name: OsString,
    /// The directory and its record, as they will be published.
    published: Published,
    /// The directory's `fstat` (the identity the publication checks).
    root_stat: Stat,
    /// The record, still open.
    info: OwnedFd,
}

/// The result of one publication attempt.
#[derive(Debug)]
pub enum Publication {
    Published(Published),
    /// Something already stands at the lock name.
    Contended,
}

/// A publication that failed for a reason other than contention.
#[derive(Debug)]
pub enum PublishError {
    /// A syscall on the staging directory failed.
    Os(Errno),
    /// The no-replace rename refused for a reason other than an existing
    /// destination; carries the primitive's code.
    Rename(&'static str),
    /// The lock's directory is there (on a local filesystem, whose answer
    /// is not a stale cache's) but refuses a new entry as if it were not:
    /// the staging's `mkdirat` said `ENOENT` (procfs does). Retrying
    /// cannot help.
    DirRefuses,
}

/// The tag of staging names: `<lock>.pending.<pid>.<uuid>`, the original's.
pub const STAGING_TAG: &str = "pending";

/// The staging name for one attempt: `<lock>.pending.<pid>.<uuid>`.
pub fn staging_name(lock_name: &OsStr) -> OsString {
    fsx::tagged_name(lock_name, STAGING_TAG)
}

/// The result of a takeover of a stale lock.
#[derive(Debug)]
pub enum Takeover {
    /// Our record now stands at the lock name; the judged tree was
    /// removed.
    Published(Published),
    /// What stood at the lock name was not the judged tree: it was put
    /// back untouched.
    NotJudged,
    /// Nothing stands at the lock name any more; publish normally.
    Vanished,
    /// The filesystem cannot exchange these two names (no
    /// `RENAME_EXCHANGE`, or the stale lock sits in an overlayfs lower
    /// layer): remove it in place, then publish.
    Unsupported,
    /// The judged tree could not be deleted (the code says why); it was
    /// given its name back, and the lock is still held by it.
    Undeletable(&'static str),
}

/// Publishes `record` over a lock judged stale, in one atomic step.
///
/// Removing the stale tree first and publishing after would leave a moment
/// in which the name is free. Instead we stage our record and exchange it
/// with whatever stands at the lock name (`renameat2(RENAME_EXCHANGE)`): the
/// name is never empty. Then we look at what we swapped out. If it is
/// exactly the judged tree, we hold the lock and delete the old tree from
/// our private name; otherwise we exchange back at once. While the two are
/// swapped, the lock name holds our own live record, so nobody can publish
/// or reclaim meanwhile.
///
/// The caller must hold the [`crate::lock::guard`] of the judged directory: the
/// exchange-back is only safe when no other reclaimer acts on the same
/// stale view at the same time.
pub fn publish_over(
    parent: BorrowedFd<'_>,
    lock_name: &OsStr,
    record: &[u8],
    mode: LockMode,
    judged: &TreeSnapshot,
) -> Result<Takeover, PublishError> {
    // Where this filesystem refused the exchange before, do not stage a
    // record only to have it refused again (see `caps`).
    if !exchange_worth_trying(judged) {
        return Ok(Takeover::Unsupported);
    }
    let Stage {
        name: staging,
        published: staged,
        info,
        ..
    } = stage_new(parent, lock_name, record, mode)?;
    // Closed before anything can remove the staging: a FUSE filesystem
    // (sshfs) keeps an unlinked but open file as `.fuse_hidden…`, and the
    // directory would then stay behind, not empty.
    drop(info);
    match exchange_over(parent, &staging, lock_name, judged) {
        Exchanged::Won => Ok(Takeover::Published(staged)),
        Exchanged::Refused(takeover) => {
            remove_staging(parent, &staging, Some(&staged.root));
            takeover
        }
        Exchanged::SwappedBack(takeover) => {
            remove_staging(parent, &staging, Some(&staged.root));
            Ok(takeover)
        }
        Exchanged::LeftSwapped => Ok(Takeover::NotJudged),
    }
}

/// Whether an exchange is worth staging for on the judged tree's device
/// (it was not refused there before, see `caps`).
fn exchange_worth_trying(judged: &TreeSnapshot) -> bool {
    let worth = caps::global().should_try(judged.root_dev, Flag::Exchange);
    if !worth {
        crate::debug!(
            "no {} on device {} (refused there before): reclaiming in place",
            Flag::Exchange.as_str(),
            judged.root_dev
        );
    }
    worth
}

/// What [`exchange_over`] did with a staging directory.
enum Exchanged {
    /// Our directory holds the lock name; the judged tree was removed (or,
    /// undeletable and impossible to give back, left at our staging name).
    Won,
    /// Nothing was swapped: the outcome to report. The staging is as it was.
    Refused(Result<Takeover, PublishError>),
    /// What stood at the lock name was swapped back: the outcome to report.
    /// Our directory is at its staging name again.
    SwappedBack(Takeover),
    /// What was swapped out could not be swapped back: both are left where
    /// they are, and our staging name holds something that is not ours.
    LeftSwapped,
}

/// Exchanges our directory, staged at `staging`, with whatever stands at
/// `lock_name`, and keeps the swap only if what came out is exactly the
/// judged tree (see [`publish_over`]).
fn exchange_over(
    parent: BorrowedFd<'_>,
    staging: &OsStr,
    lock_name: &OsStr,
    judged: &TreeSnapshot,
) -> Exchanged {
    let caps = caps::global();
    match rename::exchange_at(parent, staging, parent, lock_name) {
        Ok(()) => caps.learned(judged.root_dev, Flag::Exchange, true),
        Err(errno) => {
            return Exchanged::Refused(match errno {
                Errno::NOENT => Ok(Takeover::Vanished),
                Errno::INVAL | Errno::NOSYS | Errno::NOTSUP => {
                    caps.learned(judged.root_dev, Flag::Exchange, false);
                    crate::debug!(
                        "{} refused on device {} ({}): this process reclaims there in place from now on",
                        Flag::Exchange.as_str(),
                        judged.root_dev,
                        crate::sys::errno::errno_code(errno)
                    );
                    Ok(Takeover::Unsupported)
                }
                // An overlayfs lower layer: a property of this lock
                // directory, not of the filesystem.
                Errno::XDEV => Ok(Takeover::Unsupported),
                errno => Err(PublishError::Os(errno)),
            });
        }
    }
    // Our private name holds what was swapped out: deleted exactly if it is
    // the judged tree (one look identifies it and verifies the removal).
    match tree::remove_exact_in_place_at(parent, staging, judged) {
        tree::InPlace::Removed => Exchanged::Won,
        tree::InPlace::Failed(error) => {
            // It cannot be deleted (no permission, immutable...): holding
            // the lock would leave it under our staging name for good. Give
            // it its name back and say why, as the in-place path would.
            let outcome = tree::ExactUnlinkOutcome::failed(error);
            let code = outcome.os_code.or(outcome.code).unwrap_or("io_error");
            if rename::exchange_at(parent, staging, parent, lock_name).is_ok() {
                return Exchanged::SwappedBack(Takeover::Undeletable(code));
            }
            // Not even that: we hold the lock; what is left of the judged
            // tree stays at our staging name, for the reaper once we are gone.
            Exchanged::Won
        }
        tree::InPlace::NotExpected(_) => {
            // Not what was judged (a successor, a copy): give it its name
            // back. If even that fails, leave both where they are: nothing
            // that is not ours is ever deleted.
            if rename::exchange_at(parent, staging, parent, lock_name).is_err() {
                return Exchanged::LeftSwapped;
            }
            // Someone else renaming lock directories by name may have put
            // the judged stale tree under our private name instead of ours:
            // that tree is exactly what this reclaim set out to remove, and
            // it no longer stands at the lock name. (Ours is then not at
            // our staging name: removing the staging finds it not ours.)
            if let Ok(left) = tree::snapshot_tree_at(parent, staging)
                && judged.same_tree_as(&left)
            {
                tree::remove_tree_in_place_at(parent, staging, &left);
            }
            Exchanged::SwappedBack(Takeover::NotJudged)
        }
    }
}

/// Stages `record` and publishes it as `lock_name` inside `parent`.
pub fn publish(
    parent: BorrowedFd<'_>,
    lock_name: &OsStr,
    record: &[u8],
    mode: LockMode,
) -> Result<Publication, PublishError> {
    let Stage {
        name: staging,
        published: staged,
        root_stat,
        info,
    } = stage_new(parent, lock_name, record, mode)?;
    // Closed before anything may remove it: a FUSE filesystem (libfuse
    // without `hard_remove`) turns the unlink of an open file into a rename
    // to `.fuse_hidden…`, and the staging directory could not be removed.
    drop(info);
    let outcome = rename_fresh(parent, &staging, &root_stat, &staged.root, lock_name)?;
    if outcome.ok {
        return Ok(Publication::Published(staged));
    }
    remove_staging(parent, &staging, Some(&staged.root));
    if outcome.refused_with(rename::Refusal::DestinationExists) {
        Ok(Publication::Contended)
    } else {
        Err(PublishError::Rename(outcome.code.unwrap_or("io_error")))
    }
}

/// What [`publish_or_stage`] did.
pub enum Attempted {
    Published(Published),
    /// Something stands at the lock name: the staging is kept (unless no
    /// descriptor was left to keep it with), for the wait that follows to
    /// publish when the lock frees.
    Contended(Option<Staged>),
}

/// [`publish`] without looking at the lock name first, for an acquisition
/// that will wait if the lock is taken: it needs a staged record then (see
/// [`Staged`]), and the one made for this attempt becomes it. So a free
/// lock costs no look, and a taken one no staging made in vain.
/// `parent_id` is the identity of `parent` (see [`Staged::fits`]). The
/// record stays open until the rename has answered: this runs on local
/// filesystems only (the inline path), where an open file does not keep a
/// removed staging directory from going.
pub fn publish_or_stage(
    parent: BorrowedFd<'_>,
    parent_id: (u64, u64),
    lock_name: &OsStr,
    record: &[u8],
    mode: LockMode,
) -> Result<Attempted, PublishError> {
    let Stage {
        name: staging,
        published: staged,
        root_stat,
        info,
    } = stage_new(parent, lock_name, record, mode)?;
    let outcome = rename_fresh(parent, &staging, &root_stat, &staged.root, lock_name)?;
    if outcome.ok {
        return Ok(Attempted::Published(staged));
    }
    let contended = outcome.refused_with(rename::Refusal::DestinationExists);
    if contended && let Ok(parent) = crate::sys::os::io::fcntl_dupfd_cloexec(parent, 0) {
        count_staging(parent_id, true);
        return Ok(Attempted::Contended(Some(Staged {
            parent,
            parent_id,
            name: staging,
            info_seen: record_seen(&staged.tree),
            root: Some(staged.root),
            info: Some(info),
            len: record.len(),
            counted: true,
        })));
    }
    drop(info);
    remove_staging(parent, &staging, Some(&staged.root));
    if contended {
        // No descriptor to keep the staging with: the wait stages again.
        return Ok(Attempted::Contended(None));
    }
    Err(PublishError::Rename(outcome.code.unwrap_or("io_error")))
}

/// Renames a staging directory made just now (`root`, its `fstat`
/// `root_stat`) onto `lock_name`: made under a fresh name and guarded by
/// its `flock` since, what the rename moves is our directory (see
/// [`rename::rename_fresh_no_replace_at`]). An injected fault removes the
/// staging and is the error.
fn rename_fresh(
    parent: BorrowedFd<'_>,
    staging: &OsStr,
    root_stat: &Stat,
    root: &OwnedFd,
    lock_name: &OsStr,
) -> Result<rename::NoReplaceOutcome, PublishError> {
    if let Err(code) = crate::sys::faults::check("publish.rename") {
        remove_staging(parent, staging, Some(root));
        return Err(PublishError::Os(crate::sys::faults::errno_of(code)));
    }
    Ok(rename::rename_fresh_no_replace_at(
        parent, staging, root_stat, parent, lock_name,
    ))
}

/// Creates a fresh staging directory for `lock_name` holding `record`.
/// Nothing is left behind if it fails.
fn stage_new(
    parent: BorrowedFd<'_>,
    lock_name: &OsStr,
    record: &[u8],
    mode: LockMode,
) -> Result<Stage, PublishError> {
    crate::sys::faults::check("publish.stage")
        .map_err(|code| PublishError::Os(crate::sys::faults::errno_of(code)))?;
    let staging = staging_name(lock_name);
    fs::mkdirat(parent, &staging, mode.dir()).map_err(|errno| match errno {
        Errno::NOENT if refuses_entries(parent) => PublishError::DirRefuses,
        errno => PublishError::Os(errno),
    })?;
    match stage(parent, &staging, record, mode) {
        Ok((published, root_stat, info)) => Ok(Stage {
            name: staging,
            published,
            root_stat,
            info,
        }),
        Err(error) => {
            remove_staging(parent, &staging, None);
            Err(error)
        }
    }
}

/// Whether `parent`, where a `mkdirat` just said `ENOENT`, is nonetheless
/// there: not removed (it still has links) and on a local filesystem (a
/// network client's cached link count could be stale). Otherwise the
/// directory vanished, and the next attempt opens its path afresh.
fn refuses_entries(parent: BorrowedFd<'_>) -> bool {
    fs::fstat(parent).is_ok_and(|stat| fsx::nlink_of(&stat) > 0) && !volume::may_serve_stale(parent)
}

/// Writes the record into the staging directory `staging` (already
/// created), with exact modes.
///
/// The modes: the umask (even 0777) must neither weaken nor lock us out,
/// so each mode is made exact with `fchmod` — but only where the `fstat`
/// the publication needs anyway shows it is not (with the common umasks it
/// is: they take no owner bits). Opening the directory, which a stripped
/// owner `r` refuses, is retried after setting its mode by name; its mode
/// is made exact before the record is created in it, which a stripped
/// owner `w` or `x` would refuse.
fn stage(
    parent: BorrowedFd<'_>,
    staging: &OsStr,
    record: &[u8],
    mode: LockMode,
) -> Result<(Published, Stat, OwnedFd), PublishError> {
    let dir = match fsx::open_child_dir(parent, staging) {
        // A umask that takes the owner's `r` (0777) leaves our new
        // directory unreadable, so it cannot be opened to `fchmod` it: its
        // mode is set by name, never through a symlink swapped in for it;
        // what is opened next is opened no-follow. (Nobody but us makes a
        // directory under this fresh name: what it names is ours, or gone.)
        Err(Errno::ACCESS) => {
            fsx::chmod_dir_nofollow(parent, staging, mode.dir()).map_err(PublishError::Os)?;
            fsx::open_child_dir(parent, staging)
        }
        opened => opened,
    }
    .map_err(PublishError::Os)?;
    hold_while_unwritten(dir.as_fd())?;
    crate::sys::faults::pause("publish.unwritten", staging);
    // The directory's identity and mode, before the record is made in it:
    // on a FUSE or network mount the attributes the `mkdirat` brought back
    // are still cached then (creating a file in a directory drops them),
    // so this `fstat` is no round trip to the server. (The publication
    // compares only the inode; the directory's times change with the
    // record, which nothing reads from this stat.)
    let root_stat = fsx::with_exact_mode(dir.as_fd(), mode.dir()).map_err(PublishError::Os)?;
    // The mode is exact now, so a umask that took the owner's `w` or `x`
    // cannot refuse the record.
    let info = fs::openat(
        &dir,
        INFO_NAME,
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        mode.file(),
    )
    .map_err(PublishError::Os)?;
    fsx::write_all(info.as_fd(), record, 0).map_err(PublishError::Os)?;
    // The `flock` stays taken (see the module docs).
    let info_stat = fsx::with_exact_mode(info.as_fd(), mode.file()).map_err(PublishError::Os)?;
    let tree = TreeSnapshot::of_single_file(&root_stat, INFO_NAME, &info_stat, record);
    Ok((Published { root: dir, tree }, root_stat, info))
}

/// Takes the `flock` of a staging directory we just made, held for as
/// long as the directory is ours (see the module docs). A filesystem without `flock`
/// goes on without it (reapers there keep such a directory while it is
/// young). Taken already: a reaper is judging our directory — it saw our
/// name's pid dead, so we are in another pid namespace than it — and may
/// remove it: `ENOENT`, made again under a fresh name.
fn hold_while_unwritten(dir: BorrowedFd<'_>) -> Result<(), PublishError> {
    match fs::flock(dir, FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(()),
        Err(errno) if crate::sys::errno::is_flock_unsupported(errno) => Ok(()),
        Err(Errno::WOULDBLOCK) => Err(PublishError::Os(Errno::NOENT)),
        Err(errno) => Err(PublishError::Os(errno)),
    }
}

/// A waiter's record, staged once per acquisition and published by a
/// single rename when the lock frees. A woken waiter then does not build a
/// staging directory while the releaser is still removing its lock in the
/// same directory, and a waiter that loses the race keeps its staging for
/// the next wake. Dropping it removes the staging directory.
pub struct Staged {
    parent: OwnedFd,
    /// The parent's `(dev, ino)`, to tell whether a later attempt's parent
    /// is still this directory.
    parent_id: (u64, u64),
    name: OsString,
    /// `None` once published: it became the lock directory.
    root: Option<OwnedFd>,
    /// The record, kept open so its timestamp can be renewed in place;
    /// closed (taken) before the staging directory is removed. On Windows
    /// closed before each rename too (see [`Staged::renew`]), and reopened
    /// by name for the next renewal.
    info: Option<OwnedFd>,
    /// The record as last written (inode, ctime): one reopened by name
    /// must still be it, unchanged since.
    info_seen: (u64, i64),
    len: usize,
    /// Counted among this process's stagings in its parent while its
    /// directory stands there as a staging (see [`stagings_in`]).
    counted: bool,
}

/// The number of this process's staging directories standing in each
/// parent (device, inode): subdirectories of its own, which the debris
/// reaper does not take for new debris.
fn staging_counts() -> &'static Mutex<HashMap<(u64, u64), u64>> {
    static COUNTS: OnceLock<Mutex<HashMap<(u64, u64), u64>>> = OnceLock::new();
    COUNTS.get_or_init(Mutex::default)
}

/// How many staging directories of this process's waiters stand in the
/// parent `(dev, ino)`.
pub fn stagings_in(parent: (u64, u64)) -> u64 {
    staging_counts()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(&parent)
        .copied()
        .unwrap_or(0)
}

/// Counts one more (`true`) or one fewer staging of this process in the
/// parent `(dev, ino)`.
fn count_staging(parent: (u64, u64), more: bool) {
    let mut counts = staging_counts().lock().unwrap_or_else(|p| p.into_inner());
    let count = counts.entry(parent).or_default();
    if more {
        *count += 1;
    } else {
        *count = count.saturating_sub(1);
        if *count == 0 {
            counts.remove(&parent);
        }
    }
}

/// What publishing a staged record did.
#[derive(Debug)]
pub enum StagedPublication {
    Published(Published),
    /// Something stands at the lock name; the staging is kept.
    Contended,
    /// The staging directory is not there any more, or something else
    /// took its name: stage again (what took the name is left alone).
    Lost,
}

impl Staged {
    /// Stages `record` for `lock_name` in `parent`.
    pub fn new(
        parent: BorrowedFd<'_>,
        lock_name: &OsStr,
        record: &[u8],
        mode: LockMode,
    ) -> Result<Staged, PublishError> {
        let parent =
            crate::sys::os::io::fcntl_dupfd_cloexec(parent, 0).map_err(PublishError::Os)?;
        let parent_stat = fs::fstat(&parent).map_err(PublishError::Os)?;
        let parent_id = (fsx::dev_of(&parent_stat), fsx::ino_of(&parent_stat));
        let stage = stage_new(parent.as_fd(), lock_name, record, mode)?;
        count_staging(parent_id, true);
        Ok(Staged {
            parent,
            parent_id,
            name: stage.name,
            info_seen: record_seen(&stage.published.tree),
            root: Some(stage.published.root),
            info: Some(stage.info),
            len: record.len(),
            counted: true,
        })
    }

    /// Whether `record` can replace the staged one in place: it has the
    /// same length (records of one acquisition differ only in their
    /// timestamp) and is staged in the same directory as `parent`.
    pub fn fits(&self, parent: BorrowedFd<'_>, record: &[u8]) -> bool {
        let same_parent = fs::fstat(parent)
            .is_ok_and(|now| (fsx::dev_of(&now), fsx::ino_of(&now)) == self.parent_id);
        same_parent && record.len() == self.len
    }

    /// The staging directory's name in its parent.
    pub fn name(&self) -> &OsStr {
        &self.name
    }

    /// The staging directory, no longer ours at its staging name (it
    /// became the lock, or what stands there is not ours).
    fn take_root(&mut self) -> Option<OwnedFd> {
        self.uncount();
        self.root.take()
    }

    fn forget_root(&mut self) {
        self.uncount();
        self.root = None;
    }

    fn uncount(&mut self) {
        if std::mem::take(&mut self.counted) {
            count_staging(self.parent_id, false);
        }
    }

    /// The directory it is staged in.
    pub fn parent(&self) -> BorrowedFd<'_> {
        self.parent.as_fd()
    }

    /// The staging directory's metadata now, through its descriptor
    /// (`None` once published, or when it cannot be read).
    pub fn root_stat(&self) -> Option<Stat> {
        self.root.as_ref().and_then(|root| fs::fstat(root).ok())
    }

    /// Renews the staged record to `record` (see [`Staged::fits`]) and
    /// renames the staging directory onto `lock_name`, never replacing
    /// anything.
    pub fn publish(
        &mut self,
        lock_name: &OsStr,
        record: &[u8],
    ) -> Result<StagedPublication, PublishError> {
        let Some((tree, root_stat)) = self.renew(record)? else {
            return Ok(StagedPublication::Lost);
        };
        crate::sys::faults::check("publish.rename")
            .map_err(|code| PublishError::Os(crate::sys::faults::errno_of(code)))?;
        crate::sys::trace::stamp("waiter: the staged record renewed");
        let outcome = rename::rename_held_no_replace_at(
            self.parent.as_fd(),
            &self.name,
            &root_stat,
            self.parent.as_fd(),
            lock_name,
        );
        if outcome.ok {
            crate::sys::trace::stamp("waiter: renamed");
            let root = self.take_root().expect("published once");
            return Ok(StagedPublication::Published(Published { root, tree }));
        }
        if outcome.refused_with(rename::Refusal::DestinationExists) {
            Ok(StagedPublication::Contended)
        } else if outcome.refused_with(rename::Refusal::NotFound) {
            Ok(StagedPublication::Lost)
        } else {
            Err(PublishError::Rename(outcome.code.unwrap_or("io_error")))
        }
    }
}

impl Staged {
    /// Writes `record` over the staged one and snapshots the tree as it
    /// will be published; `None` if the staging name is no longer our
    /// directory.
    fn renew(&mut self, record: &[u8]) -> Result<Option<(TreeSnapshot, Stat)>, PublishError> {
        debug_assert_eq!(record.len(), self.len);
        let Some(root) = self.root.as_ref() else {
            return Ok(None);
        };
        if self.info.is_none() {
            match reopen_record(root.as_fd(), self.info_seen, self.len) {
                Some(info) => self.info = Some(info),
                None => return Ok(None),
            }
        }
        let info = self.info.as_ref().expect("opened above");
        fsx::write_all(info.as_fd(), record, 0).map_err(PublishError::Os)?;
        // Observed before the rename, which changes neither inode's
        // identity nor the record's times: once the name is ours, nothing
        // can fail before the lock is recorded as held.
        let root_stat = fs::fstat(root).map_err(PublishError::Os)?;
        let tree = TreeSnapshot::of_single_file(
            &root_stat,
            INFO_NAME,
            &fs::fstat(info).map_err(PublishError::Os)?,
            record,
        );
        // NTFS and FAT refuse to rename a directory while a file below it
        // is open (`STATUS_ACCESS_DENIED`, whatever the sharing): the
        // record is closed before the rename that follows, and reopened by
        // the next renewal if that rename does not publish.
        self.info_seen = record_seen(&tree);
        if cfg!(windows) {
            self.info = None;
        }
        // The staging name must still be our directory: it waited in a
        // shared directory for as long as the lock was held, and whatever
        // the rename moves becomes the lock. (A swap after this look is
        // caught by the rename's own check of what it published.)
        let still_ours = fsx::stat_nofollow(self.parent.as_fd(), &self.name).is_ok_and(|now| {
            (fsx::dev_of(&now), fsx::ino_of(&now)) == (tree.root_dev, tree.root_ino)
        });
        Ok(still_ours.then_some((tree, root_stat)))
    }

    /// [`publish_over`] with this staged record, renewed to `record`: the
    /// waiter that judged the lock stale exchanges the record it staged
    /// for the wait, rather than staging another and removing this one
    /// after. A staging the exchange does not keep stays staged for the
    /// next wake. `None` when the staging name is no longer our directory
    /// (nothing was swapped): stage afresh.
    pub fn publish_over(
        &mut self,
        lock_name: &OsStr,
        record: &[u8],
        judged: &TreeSnapshot,
    ) -> Result<Option<Takeover>, PublishError> {
        if !exchange_worth_trying(judged) {
            return Ok(Some(Takeover::Unsupported));
        }
        let Some((tree, _)) = self.renew(record)? else {
            return Ok(None);
        };
        Ok(Some(
            match exchange_over(self.parent.as_fd(), &self.name, lock_name, judged) {
                Exchanged::Won => {
                    let root = self.take_root().expect("staged until published");
                    Takeover::Published(Published { root, tree })
                }
                Exchanged::Refused(takeover) => takeover?,
                Exchanged::SwappedBack(takeover) => takeover,
                Exchanged::LeftSwapped => {
                    // Our staging name holds what was swapped out: not ours
                    // to remove when this is dropped.
                    self.forget_root();
                    Takeover::NotJudged
                }
            },
        ))
    }

    /// Publishes past a client cache that still shows a lock the server no
    /// longer has (see [`crate::lock::volume`]): asks the server whether
    /// anything stands at `lock_name`, and only if nothing does, renames
    /// the staging directory onto it.
    ///
    /// The client refuses the exclusive forms (`renameat2`, `mkdir`) from
    /// its cached entry without asking the server, so the rename is the
    /// plain one, which the server carries out exactly when the name is
    /// free or holds an empty directory; it follows the server's "nothing
    /// there" by one round trip. The residual risk is an empty lock
    /// directory made by a legacy `mkdir` locker inside that round trip.
    /// A populated lock (every exactlock and upstream lock) is never
    /// replaced: the server refuses with `ENOTEMPTY`.
    pub fn publish_past_cache(
        &mut self,
        lock_name: &OsStr,
        record: &[u8],
    ) -> Result<PastCache, PublishError> {
        let Some((tree, _)) = self.renew(record)? else {
            return Ok(PastCache::Lost);
        };
        match volume::on_server(self.parent.as_fd(), lock_name, &self.name) {
            OnServer::Absent => {}
            OnServer::Present => return Ok(PastCache::Present),
            OnServer::Unknown => return Ok(PastCache::Unknown),
        }
        crate::sys::faults::check("publish.rename")
            .map_err(|code| PublishError::Os(crate::sys::faults::errno_of(code)))?;
        let (parent, staging) = (self.parent.as_fd(), &self.name);
        // Windows' replacing rename replaces a file standing at the name
        // (unix's refuses a directory over a file): there, the no-replace
        // form, which every Windows volume has.
        let renamed = if cfg!(windows) {
            fs::renameat_with(parent, staging, parent, lock_name, RenameFlags::NOREPLACE)
        } else {
            fs::renameat(parent, staging, parent, lock_name)
        };
        match renamed {
            Ok(()) => {}
            Err(errno) if volume::refused_by_what_stands(errno) => return Ok(PastCache::Present),
            Err(Errno::NOENT) => return Ok(PastCache::Lost),
            Err(errno) => return Err(PublishError::Os(errno)),
        }
        let published = fsx::stat_nofollow(self.parent.as_fd(), lock_name).is_ok_and(|now| {
            (fsx::dev_of(&now), fsx::ino_of(&now)) == (tree.root_dev, tree.root_ino)
        });
        if !published {
            // Renamed, but the name shows something else already: the
            // directory is no longer at our staging name either; what the
            // name holds is not ours to touch. (A `stat` that failed on a
            // network error lands here too, though our record may stand at
            // the name: it then holds the lock until this process exits and
            // a waiter proves it dead. Taking it as ours instead could make
            // two holders; liveness gives way to safety.)
            self.forget_root();
            return Ok(PastCache::Lost);
        }
        let root = self.take_root().expect("staged until published");
        Ok(PastCache::Published(Published { root, tree }))
    }
}

/// What [`Staged::publish_past_cache`] did.
#[derive(Debug)]
pub enum PastCache {
    Published(Published),
    /// The server has something at the lock name: the client's view stands.
    Present,
    /// The server did not answer the question: nothing was done.
    Unknown,
    /// The staging directory is gone: stage again.
    Lost,
}

/// The inode and ctime of the record in a staged tree.
fn record_seen(tree: &TreeSnapshot) -> (u64, i64) {
    tree.entries
        .iter()
        .find(|entry| entry.relative_path == INFO_NAME)
        .map_or((0, 0), |entry| (entry.ino, ctime_key(entry.ctime_ns)))
}

/// A ctime in nanoseconds, cut to 64 bits (exact until 2262; both sides of
/// a comparison are cut alike): keeps [`Staged`] small.
fn ctime_key(ns: i128) -> i64 {
    ns as i64
}

/// The staged record reopened for writing by name in its directory `root`:
/// never through a link, and only if it is still the file we last wrote
/// (`seen`: its inode and ctime; `len` bytes), untouched since; `None`
/// otherwise (the staging is lost: stage afresh).
fn reopen_record(root: BorrowedFd<'_>, seen: (u64, i64), len: usize) -> Option<OwnedFd> {
    let info = fs::openat(
        root,
        INFO_NAME,
        OFlags::WRONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .ok()?;
    fs::fstat(&info)
        .is_ok_and(|stat| {
            (fsx::ino_of(&stat), ctime_key(fsx::ctime_ns(&stat))) == seen
                && u64::try_from(len).is_ok_and(|len| fsx::size_of(&stat) == len)
        })
        .then_some(info)
}

impl Drop for Staged {
    fn drop(&mut self) {
        self.uncount();
        // The record is closed before its unlink (see [`publish`]).
        self.info = None;
        if let Some(root) = &self.root {
            remove_staging(self.parent.as_fd(), &self.name, Some(root));
        }
    }
}

/// Removes a staging directory this attempt created: its record, then the
/// directory. With `ours`, only if the name still holds that directory.
/// Best effort: a leftover is reaped later by pid.
pub fn remove_staging(parent: BorrowedFd<'_>, staging: &OsStr, ours: Option<&OwnedFd>) {
    let Ok(dir) = fsx::open_child_dir(parent, staging) else {
        return;
    };
    if let Some(ours) = ours {
        let (Ok(seen), Ok(expected)) = (fs::fstat(&dir), fs::fstat(ours)) else {
            return;
        };
        if !fsx::same_inode(&seen, &expected) {
            return;
        }
    }
    let _ = fs::unlinkat(&dir, INFO_NAME, AtFlags::empty());
    let _ = fsx::remove_dir_settled(parent, staging, dir.as_fd(), &mut fsx::FuseSettle::new());
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

    fn write_lock(dir: &Path, bytes: &[u8]) {
        std::fs::create_dir(dir).unwrap();
        std::fs::write(dir.join("info"), bytes).unwrap();
    }

    /// A stale lock `f.lock` in `root`, the open parent, and its snapshot.
    /// `root` holds only `f.lock`, exactly the tree `published` says, with
    /// `bytes` as its record.
    fn published_alone(root: &Path, parent: &OwnedFd, published: &Published, bytes: &[u8]) {
        assert_eq!(listing(root), ["f.lock"]);
        assert_eq!(std::fs::read(root.join("f.lock/info")).unwrap(), bytes);
        let walked = tree::snapshot_tree_at(parent.as_fd(), OsStr::new("f.lock")).unwrap();
        assert!(published.tree.same_tree_as(&walked));
    }

    fn judged_stale_lock(root: &Path) -> (OwnedFd, TreeSnapshot) {
        write_lock(&root.join("f.lock"), b"old owner");
        let parent = fsx::open_dir_nofollow(root).unwrap();
        let judged = tree::snapshot_tree_at(parent.as_fd(), OsStr::new("f.lock")).unwrap();
        (parent, judged)
    }

    #[test]
    fn publish_refuses_an_existing_empty_directory() {
        let root = tempdir("empty");
        std::fs::create_dir(root.join("f.lock")).unwrap();
        let parent = fsx::open_dir_nofollow(&root).unwrap();
        let result = publish(
            parent.as_fd(),
            OsStr::new("f.lock"),
            b"{}",
            LockMode::PRIVATE,
        )
        .unwrap();
        assert!(matches!(result, Publication::Contended));
        assert_eq!(listing(&root), ["f.lock"]);
        assert_eq!(listing(&root.join("f.lock")), Vec::<String>::new());
        std::fs::remove_dir_all(root).unwrap();
    }

    // An exchange (`RENAME_EXCHANGE`, `RENAME_SWAP`): Windows has none.
    #[cfg(unix)]
    #[test]
    fn takeover_replaces_exactly_the_judged_tree() {
        let root = tempdir("takeover");
        let (parent, judged) = judged_stale_lock(&root);
        let result = publish_over(
            parent.as_fd(),
            OsStr::new("f.lock"),
            b"new owner",
            LockMode::PRIVATE,
            &judged,
        );
        assert!(matches!(result, Ok(Takeover::Published(_))));
        assert_eq!(listing(&root), ["f.lock"]);
        assert_eq!(
            std::fs::read(root.join("f.lock/info")).unwrap(),
            b"new owner"
        );
        std::fs::remove_dir_all(root).unwrap();
    }

    // An exchange (`RENAME_EXCHANGE`, `RENAME_SWAP`): Windows has none.
    #[cfg(unix)]
    #[test]
    fn a_waiters_staged_record_is_what_replaces_the_judged_tree() {
        let root = tempdir("takeover-staged");
        let (parent, judged) = judged_stale_lock(&root);
        let lock = OsStr::new("f.lock");
        let mut staged =
            Staged::new(parent.as_fd(), lock, b"new owner 1", LockMode::PRIVATE).unwrap();
        // Not the judged tree (a successor took the name): swapped back, and
        // the staging stays for the next wake.
        std::fs::remove_dir_all(root.join("f.lock")).unwrap();
        write_lock(&root.join("f.lock"), b"successor");
        assert!(matches!(
            staged.publish_over(lock, b"new owner 2", &judged),
            Ok(Some(Takeover::NotJudged))
        ));
        assert_eq!(listing(&root).len(), 2);
        assert_eq!(
            std::fs::read(root.join("f.lock/info")).unwrap(),
            b"successor"
        );
        // The judged tree itself: exchanged with the staged record, renewed,
        // and nothing else is left (no second staging made or removed).
        std::fs::remove_dir_all(root.join("f.lock")).unwrap();
        let (_, judged) = judged_stale_lock(&root);
        let Ok(Some(Takeover::Published(published))) =
            staged.publish_over(lock, b"new owner 3", &judged)
        else {
            panic!("published");
        };
        published_alone(&root, &parent, &published, b"new owner 3");
        drop(staged);
        assert_eq!(listing(&root), ["f.lock"]);
        std::fs::remove_dir_all(root).unwrap();
    }

    // An exchange (`RENAME_EXCHANGE`, `RENAME_SWAP`): Windows has none.
    #[cfg(unix)]
    #[test]
    fn takeover_puts_back_a_byte_identical_successor() {
        let root = tempdir("successor");
        let (parent, judged) = judged_stale_lock(&root);
        // A successor with the same bytes but new inodes takes the name.
        std::fs::remove_dir_all(root.join("f.lock")).unwrap();
        write_lock(&root.join("f.lock"), b"old owner");
        let successor = tree::snapshot_tree_at(parent.as_fd(), OsStr::new("f.lock")).unwrap();
        let result = publish_over(
            parent.as_fd(),
            OsStr::new("f.lock"),
            b"new owner",
            LockMode::PRIVATE,
            &judged,
        );
        assert!(matches!(result, Ok(Takeover::NotJudged)));
        assert_eq!(listing(&root), ["f.lock"]);
        let after = tree::snapshot_tree_at(parent.as_fd(), OsStr::new("f.lock")).unwrap();
        assert!(
            successor.same_tree_as(&after),
            "the successor is back, untouched"
        );
        std::fs::remove_dir_all(root).unwrap();
    }

    // An exchange (`RENAME_EXCHANGE`, `RENAME_SWAP`): Windows has none.
    #[cfg(unix)]
    #[test]
    fn takeover_of_a_vanished_lock_publishes_nothing() {
        let root = tempdir("vanished");
        let (parent, judged) = judged_stale_lock(&root);
        std::fs::remove_dir_all(root.join("f.lock")).unwrap();
        let result = publish_over(
            parent.as_fd(),
            OsStr::new("f.lock"),
            b"new owner",
            LockMode::PRIVATE,
            &judged,
        );
        assert!(matches!(result, Ok(Takeover::Vanished)));
        assert_eq!(listing(&root), Vec::<String>::new());
        std::fs::remove_dir_all(root).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn published_tree_is_what_a_walk_of_the_lock_sees() {
        let root = tempdir("published-tree");
        let parent = fsx::open_dir_nofollow(&root).unwrap();
        let record = b"{\"pid\":1}";
        let Ok(Publication::Published(published)) = publish(
            parent.as_fd(),
            OsStr::new("f.lock"),
            record,
            LockMode::PRIVATE,
        ) else {
            panic!("published");
        };
        let walked = tree::snapshot_tree_at(parent.as_fd(), OsStr::new("f.lock")).unwrap();
        assert!(published.tree.same_tree_as(&walked));
        assert!(published.tree.files_look_unchanged(published.root.as_fd()));
        assert!(published.tree.names_unchanged(published.root.as_fd()));
        // Touching the record (same bytes, new ctime) is a change.
        std::fs::write(root.join("f.lock/info"), record).unwrap();
        assert!(!published.tree.files_look_unchanged(published.root.as_fd()));
        std::fs::write(root.join("f.lock/extra"), b"").unwrap();
        assert!(!published.tree.names_unchanged(published.root.as_fd()));
        std::fs::remove_dir_all(root).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn staged_record_waits_publishes_once_and_is_removed_when_dropped() {
        let root = tempdir("staged");
        let parent = fsx::open_dir_nofollow(&root).unwrap();
        let lock = OsStr::new("f.lock");
        std::fs::create_dir(root.join("f.lock")).unwrap();
        let mut staged = Staged::new(
            parent.as_fd(),
            lock,
            b"{\"timestamp\":1}",
            LockMode::PRIVATE,
        )
        .unwrap();
        assert!(staged.fits(parent.as_fd(), b"{\"timestamp\":2}"));
        assert!(!staged.fits(parent.as_fd(), b"{\"timestamp\":22}"));
        // Held by someone: the staging stays for the next try.
        let held = staged.publish(lock, b"{\"timestamp\":2}").unwrap();
        assert!(matches!(held, StagedPublication::Contended));
        assert_eq!(listing(&root).len(), 2);
        // Free: one rename publishes the renewed record.
        std::fs::remove_dir(root.join("f.lock")).unwrap();
        let Ok(StagedPublication::Published(published)) =
            staged.publish(lock, b"{\"timestamp\":3}")
        else {
            panic!("published");
        };
        assert_eq!(listing(&root), ["f.lock"]);
        assert_eq!(
            std::fs::read(root.join("f.lock/info")).unwrap(),
            b"{\"timestamp\":3}"
        );
        let walked = tree::snapshot_tree_at(parent.as_fd(), lock).unwrap();
        assert!(published.tree.same_tree_as(&walked));
        // Dropping a published staging removes nothing.
        drop(staged);
        assert_eq!(listing(&root), ["f.lock"]);
        // Dropping an unpublished one removes it.
        let waiting = Staged::new(parent.as_fd(), lock, b"{}", LockMode::PRIVATE).unwrap();
        assert_eq!(listing(&root).len(), 2);
        drop(waiting);
        assert_eq!(listing(&root), ["f.lock"]);
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn a_staged_record_is_reopened_by_name_only_while_it_is_the_one_we_made() {
        let root = tempdir("staged-reopen");
        let parent = fsx::open_dir_nofollow(&root).unwrap();
        let lock = OsStr::new("f.lock");
        write_lock(&root.join("f.lock"), b"held");
        let staging_of = |root: &Path| {
            listing(root)
                .into_iter()
                .find(|name| name != "f.lock")
                .expect("a staging")
        };
        let mut staged = Staged::new(
            parent.as_fd(),
            lock,
            b"{\"timestamp\":1}",
            LockMode::PRIVATE,
        )
        .unwrap();
        assert!(matches!(
            staged.publish(lock, b"{\"timestamp\":2}"),
            Ok(StagedPublication::Contended)
        ));
        // NTFS refuses to rename a directory with a file open below it: on
        // Windows nothing of ours stays open in the staging across (and
        // after) the rename, which an open sharing nothing proves.
        #[cfg(windows)]
        {
            use std::os::windows::fs::OpenOptionsExt;
            let info = root.join(staging_of(&root)).join("info");
            let exclusive = std::fs::OpenOptions::new()
                .read(true)
                .share_mode(0)
                .open(&info);
            assert!(exclusive.is_ok(), "the record is still open: {exclusive:?}");
        }
        // Closed (as on Windows after each rename): the renewal reopens it.
        staged.info = None;
        std::fs::remove_dir_all(root.join("f.lock")).unwrap();
        let Ok(StagedPublication::Published(won)) = staged.publish(lock, b"{\"timestamp\":3}")
        else {
            panic!("the reopened record publishes");
        };
        assert_eq!(
            std::fs::read(root.join("f.lock/info")).unwrap(),
            b"{\"timestamp\":3}"
        );
        // A record replaced by another file meanwhile is not written to:
        // the staging is lost, the file left as it was.
        let mut staged = Staged::new(
            parent.as_fd(),
            lock,
            b"{\"timestamp\":4}",
            LockMode::PRIVATE,
        )
        .unwrap();
        staged.info = None;
        let info = root.join(staging_of(&root)).join("info");
        std::fs::remove_file(&info).unwrap();
        std::fs::write(&info, b"someone else's").unwrap();
        assert!(matches!(
            staged.publish(lock, b"{\"timestamp\":5}"),
            Ok(StagedPublication::Lost)
        ));
        assert_eq!(std::fs::read(&info).unwrap(), b"someone else's");
        drop((staged, won));
        std::fs::remove_dir_all(root).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn an_attempt_that_finds_the_lock_taken_keeps_its_staging_for_the_wait() {
        let root = tempdir("publish-or-stage");
        let parent = fsx::open_dir_nofollow(&root).unwrap();
        let id = {
            let stat = fs::fstat(&parent).unwrap();
            (fsx::dev_of(&stat), fsx::ino_of(&stat))
        };
        let lock = OsStr::new("f.lock");
        // Free: published, nothing else left.
        let Ok(Attempted::Published(published)) = publish_or_stage(
            parent.as_fd(),
            id,
            lock,
            b"{\"timestamp\":1}",
            LockMode::PRIVATE,
        ) else {
            panic!("published");
        };
        assert_eq!(listing(&root), ["f.lock"]);
        let walked = tree::snapshot_tree_at(parent.as_fd(), lock).unwrap();
        assert!(published.tree.same_tree_as(&walked));
        // Taken: the staging stays, with its record, for the wait to publish.
        let Ok(Attempted::Contended(Some(mut staged))) = publish_or_stage(
            parent.as_fd(),
            id,
            lock,
            b"{\"timestamp\":2}",
            LockMode::PRIVATE,
        ) else {
            panic!("contended, staged");
        };
        let staging = listing(&root)
            .into_iter()
            .find(|name| name != "f.lock")
            .expect("the staging is kept");
        assert_eq!(
            std::fs::read(root.join(&staging).join("info")).unwrap(),
            b"{\"timestamp\":2}"
        );
        assert!(staged.fits(parent.as_fd(), b"{\"timestamp\":3}"));
        drop(published);
        std::fs::remove_dir_all(root.join("f.lock")).unwrap();
        let Ok(StagedPublication::Published(_won)) = staged.publish(lock, b"{\"timestamp\":3}")
        else {
            panic!("the kept staging publishes");
        };
        assert_eq!(listing(&root), ["f.lock"]);
        assert_eq!(
            std::fs::read(root.join("f.lock/info")).unwrap(),
            b"{\"timestamp\":3}"
        );
        // A kept staging the wait does not use goes when dropped.
        let Ok(Attempted::Contended(Some(unused))) =
            publish_or_stage(parent.as_fd(), id, lock, b"{}", LockMode::PRIVATE)
        else {
            panic!("contended, staged");
        };
        assert_eq!(listing(&root).len(), 2);
        drop(unused);
        assert_eq!(listing(&root), ["f.lock"]);
        std::fs::remove_dir_all(root).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn staged_record_removed_by_someone_else_is_lost_not_an_error() {
        let root = tempdir("staged-lost");
        let parent = fsx::open_dir_nofollow(&root).unwrap();
        let lock = OsStr::new("f.lock");
        let mut staged = Staged::new(parent.as_fd(), lock, b"{}", LockMode::PRIVATE).unwrap();
        let staging = listing(&root).pop().unwrap();
        std::fs::remove_dir_all(root.join(staging)).unwrap();
        let result = staged.publish(lock, b"{}").unwrap();
        assert!(matches!(result, StagedPublication::Lost));
        assert_eq!(listing(&root), Vec::<String>::new());
        std::fs::remove_dir_all(root).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn staged_record_swapped_for_another_directory_is_lost_and_never_published() {
        let root = tempdir("staged-swapped");
        let parent = fsx::open_dir_nofollow(&root).unwrap();
        let lock = OsStr::new("f.lock");
        let mut staged = Staged::new(parent.as_fd(), lock, b"{}", LockMode::PRIVATE).unwrap();
        let staging = listing(&root).pop().unwrap();
        std::fs::rename(root.join(&staging), root.join("moved")).unwrap();
        write_lock(&root.join(&staging), b"not ours");
        let result = staged.publish(lock, b"{}").unwrap();
        assert!(matches!(result, StagedPublication::Lost));
        drop(staged);
        // The impostor keeps its name and bytes; nothing was published.
        assert_eq!(listing(&root), vec![staging.clone(), "moved".to_string()]);
        assert_eq!(
            std::fs::read(root.join(&staging).join("info")).unwrap(),
            b"not ours"
        );
        std::fs::remove_dir_all(root).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn publishing_past_a_cache_asks_first_and_never_replaces_what_stands() {
        let root = tempdir("past-cache");
        let parent = fsx::open_dir_nofollow(&root).unwrap();
        let lock = OsStr::new("f.lock");
        // An empty legacy holder: present, kept, and our staging stays ours.
        std::fs::create_dir(root.join("f.lock")).unwrap();
        let mut staged = Staged::new(
            parent.as_fd(),
            lock,
            b"{\"timestamp\":1}",
            LockMode::PRIVATE,
        )
        .unwrap();
        let held = staged
            .publish_past_cache(lock, b"{\"timestamp\":2}")
            .unwrap();
        assert!(matches!(held, PastCache::Present));
        assert_eq!(listing(&root.join("f.lock")), Vec::<String>::new());
        assert_eq!(listing(&root).len(), 2);
        // A lock with a record: present, its bytes untouched.
        std::fs::write(root.join("f.lock/info"), b"theirs").unwrap();
        let held = staged
            .publish_past_cache(lock, b"{\"timestamp\":3}")
            .unwrap();
        assert!(matches!(held, PastCache::Present));
        assert_eq!(std::fs::read(root.join("f.lock/info")).unwrap(), b"theirs");
        // Free on the volume: published, exactly our tree.
        std::fs::remove_dir_all(root.join("f.lock")).unwrap();
        let Ok(PastCache::Published(published)) =
            staged.publish_past_cache(lock, b"{\"timestamp\":4}")
        else {
            panic!("published");
        };
        published_alone(&root, &parent, &published, b"{\"timestamp\":4}");
        drop(staged);
        assert_eq!(listing(&root), ["f.lock"]);
        std::fs::remove_dir_all(root).unwrap();
    }

    /// Whether another open file description can take `dir`'s `flock`
    /// now, as a reaper or a remover of another process would.
    fn flock_is_free(dir: &Path) -> bool {
        let other = fsx::open_dir_nofollow(dir).unwrap();
        fs::flock(&other, FlockOperation::NonBlockingLockExclusive).is_ok()
    }

    #[cfg(unix)]
    #[test]
    fn a_staging_and_its_published_lock_keep_their_flock_while_ours() {
        // A reaper or a reclaimer of another process is kept off for as long
        // as the directory is ours; the `flock` goes with our descriptor.
        let root = tempdir("staging-flock");
        let parent = fsx::open_dir_nofollow(&root).unwrap();
        let lock = OsStr::new("f.lock");
        std::fs::create_dir(root.join("f.lock")).unwrap();
        let mut staged = Staged::new(parent.as_fd(), lock, b"{}", LockMode::PRIVATE).unwrap();
        let staging = listing(&root)
            .into_iter()
            .find(|name| name != "f.lock")
            .unwrap();
        assert!(!flock_is_free(&root.join(&staging)));
        std::fs::remove_dir(root.join("f.lock")).unwrap();
        let Ok(StagedPublication::Published(held)) = staged.publish(lock, b"{}") else {
            panic!("published");
        };
        assert!(!flock_is_free(&root.join("f.lock")));
        drop(held);
        assert!(flock_is_free(&root.join("f.lock")));
        let other = OsStr::new("g.lock");
        let Ok(Publication::Published(also_held)) =
            publish(parent.as_fd(), other, b"{}", LockMode::PRIVATE)
        else {
            panic!("published");
        };
        assert!(!flock_is_free(&root.join("g.lock")));
        drop(also_held);
        assert!(flock_is_free(&root.join("g.lock")));
        std::fs::remove_dir_all(root).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn a_staging_whose_flock_a_reaper_holds_is_given_up_before_anything_is_written() {
        // A reaper took the `flock` of our fresh staging between our
        // `mkdirat` and our own `flock`: nothing is written into it, and
        // `ENOENT` makes every caller stage again under a fresh name.
        let root = tempdir("staging-taken");
        let parent = fsx::open_dir_nofollow(&root).unwrap();
        let staging = OsStr::new("f.lock.pending.1.12345678-1234-1234-1234-123456789abc");
        fs::mkdirat(&parent, staging, LockMode::PRIVATE.dir()).unwrap();
        let reaper = fsx::open_child_dir(parent.as_fd(), staging).unwrap();
        fs::flock(&reaper, FlockOperation::NonBlockingLockExclusive).unwrap();
        let Err(PublishError::Os(errno)) = stage(parent.as_fd(), staging, b"{}", LockMode::PRIVATE)
        else {
            panic!("staged into a directory a reaper holds");
        };
        assert_eq!(errno, Errno::NOENT);
        assert_eq!(listing(&root.join(staging)), Vec::<String>::new());
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn a_dropped_staging_leaves_nothing_behind() {
        let root = tempdir("staged-drop");
        let parent = fsx::open_dir_nofollow(&root).unwrap();
        let staged = Staged::new(
            parent.as_fd(),
            OsStr::new("f.lock"),
            b"{}",
            LockMode::PRIVATE,
        )
        .unwrap();
        assert_eq!(listing(&root).len(), 1);
        drop(staged);
        assert_eq!(listing(&root), Vec::<String>::new());
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn staging_names_are_unique_and_carry_our_pid() {
        let lock = OsStr::new("state.json.lock");
        let staging = staging_name(lock);
        assert_ne!(staging, staging_name(lock));
        assert_eq!(
            fsx::parse_tagged_name(&staging, STAGING_TAG),
            Some((lock, std::process::id()))
        );
    }
}
