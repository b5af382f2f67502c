//! Atomic no-replace rename: move a directory (or a regular file) to a name
//! only if that name is free.
//!
//! Safety argument. A plain `rename(2)` silently replaces an existing *empty*
//! directory at the destination; for a lock directory that empty directory is
//! a holder (a legacy writer between its `mkdir` and its `info` write), so a
//! plain rename would let two holders in. Every path through this module
//! therefore either asks the kernel for an exclusive rename
//! (`renameat2(RENAME_NOREPLACE)` on Linux, `renameatx_np(RENAME_EXCL)` on
//! macOS) or first claims the destination name exclusively (`mkdirat`,
//! `linkat`) so that the only thing a later plain rename can replace is our own
//! empty claim.
//!
//! Names are resolved relative to parent directories opened without following
//! symlinks (`fsx::open_parent`); the source itself must not be a symlink and
//! is pinned by a descriptor while we compare inode identities, so its inode
//! number cannot be recycled under us.
//!
//! Results follow the original's `NativeNoReplaceResult` vocabulary: one
//! internal [`Refusal`] per failure and one mapping function,
//! [`outcome`], that derives the mutation, durability, reason and phase.

use std::ffi::OsStr;
use std::path::Path;

use crate::sys::os::fd::{AsFd, BorrowedFd, OwnedFd};
use crate::sys::os::fs::{self, AtFlags, FileType, Mode, RenameFlags, Stat};
use crate::sys::os::io::Errno;

use crate::fs::caps::{self, Caps, Flag};
use crate::fs::fsx::{self, retry_interrupted};
use crate::sys::platform;

/// Whether the destination (or anything) was changed by the call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MutationState {
    NotCommitted,
    Committed,
    Unknown,
}

/// Whether the result was made durable. We never fsync the parents here, so a
/// success is `not_attempted`; a committed failure cannot be proven durable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DurabilityState {
    NotAttempted,
    NotProvable,
}

/// The caller-facing category of the result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    None,
    DestinationExists,
    AtomicUnavailable,
    CrossDevice,
    PermissionDenied,
    IoFailure,
    InvalidRequest,
    Interrupted,
    IdentityViolation,
    Unknown,
}

/// Which kernel mechanism carried (or would have carried) the rename.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Primitive {
    #[cfg_attr(
        not(target_os = "linux"),
        allow(dead_code, reason = "the Linux primitive")
    )]
    Renameat2Noreplace,
    #[cfg_attr(
        not(target_os = "macos"),
        allow(dead_code, reason = "the macOS primitive")
    )]
    RenameatxNpExcl,
    #[cfg_attr(not(windows), allow(dead_code, reason = "the Windows primitive"))]
    WindowsRenameNoreplace,
    #[allow(
        dead_code,
        reason = "the vocabulary's: every supported platform has an exclusive rename"
    )]
    Unsupported,
    LinkatNoreplace,
    MkdiratRenameatNoreplace,
}

/// The step at which the call ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    Preflight,
    Rename,
    SourceUnlink,
    TerminalIdentity,
    Complete,
}

/// Why a no-replace rename did not (fully) succeed: the internal `code`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Something already has the destination name; nothing was changed.
    DestinationExists,
    /// Neither the exclusive rename nor a fallback fits this source.
    AtomicUnavailable,
    CrossDevice,
    PermissionDenied,
    /// `EINTR` kept coming back after [`fsx::EINTR_RETRIES`] restarts.
    Interrupted,
    NotFound,
    /// Malformed input (NUL, empty or dotted name) or a kernel `EINVAL`.
    InvalidRequest,
    /// A symlink where the source or an ancestor directory should be.
    ReparsePoint,
    /// The source name changed to another object while we looked at it.
    IdentityMismatch,
    NotDirectory,
    NotRegularFile,
    /// The rename happened, but the destination is not the source inode.
    DestinationIdentityChanged,
    /// The file fallback linked the destination but could not unlink the
    /// source name: published, with a second name left behind.
    SourceUnlinkFailed,
    IoError,
}

impl Refusal {
    pub fn as_str(self) -> &'static str {
        match self {
            Refusal::DestinationExists => "destination_exists",
            Refusal::AtomicUnavailable => "atomic_unavailable",
            Refusal::CrossDevice => "cross_device",
            Refusal::PermissionDenied => "permission_denied",
            Refusal::Interrupted => "interrupted",
            Refusal::NotFound => "not_found",
            Refusal::InvalidRequest => "invalid_request",
            Refusal::ReparsePoint => "reparse_point",
            Refusal::IdentityMismatch => "identity_mismatch",
            Refusal::NotDirectory => "not_directory",
            Refusal::NotRegularFile => "not_regular_file",
            Refusal::DestinationIdentityChanged => "destination_identity_changed",
            Refusal::SourceUnlinkFailed => "source_unlink_failed",
            Refusal::IoError => "io_error",
        }
    }
}

impl MutationState {
    pub fn as_str(self) -> &'static str {
        match self {
            MutationState::NotCommitted => "not_committed",
            MutationState::Committed => "committed",
            MutationState::Unknown => "unknown",
        }
    }
}

impl DurabilityState {
    pub fn as_str(self) -> &'static str {
        match self {
            DurabilityState::NotAttempted => "not_attempted",
            DurabilityState::NotProvable => "not_provable",
        }
    }
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::None => "none",
            Reason::DestinationExists => "destination_exists",
            Reason::AtomicUnavailable => "atomic_unavailable",
            Reason::CrossDevice => "cross_device",
            Reason::PermissionDenied => "permission_denied",
            Reason::IoFailure => "io_failure",
            Reason::InvalidRequest => "invalid_request",
            Reason::Interrupted => "interrupted",
            Reason::IdentityViolation => "identity_violation",
            Reason::Unknown => "unknown",
        }
    }
}

impl Primitive {
    pub fn as_str(self) -> &'static str {
        match self {
            Primitive::Renameat2Noreplace => "renameat2_noreplace",
            Primitive::RenameatxNpExcl => "renameatx_np_excl",
            Primitive::WindowsRenameNoreplace => "windows_rename_noreplace",
            Primitive::Unsupported => "unsupported",
            Primitive::LinkatNoreplace => "linkat_noreplace",
            Primitive::MkdiratRenameatNoreplace => "mkdirat_renameat_noreplace",
        }
    }
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Preflight => "preflight",
            Phase::Rename => "rename",
            Phase::SourceUnlink => "source_unlink",
            Phase::TerminalIdentity => "terminal_identity",
            Phase::Complete => "complete",
        }
    }
}

/// The result of a no-replace rename, in the original's vocabulary.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NoReplaceOutcome {
    pub ok: bool,
    pub code: Option<&'static str>,
    pub mutation_state: MutationState,
    pub durability_state: DurabilityState,
    pub reason: Reason,
    pub primitive: Primitive,
    pub phase: Phase,
}

impl NoReplaceOutcome {
    /// Whether the call ended with this refusal.
    pub fn refused_with(&self, refusal: Refusal) -> bool {
        self.code == Some(refusal.as_str())
    }
}

/// The one mapping from an internal result to the caller-facing outcome
/// (upstream's table, plus `source_unlink_failed` for the file fallback).
pub fn outcome(primitive: Primitive, result: Result<(), Refusal>) -> NoReplaceOutcome {
    use DurabilityState as D;
    use MutationState as M;
    let refusal = match result {
        Ok(()) => {
            return NoReplaceOutcome {
                ok: true,
                code: None,
                mutation_state: M::Committed,
                durability_state: D::NotAttempted,
                reason: Reason::None,
                primitive,
                phase: Phase::Complete,
            };
        }
        Err(refusal) => refusal,
    };
    let (mutation_state, durability_state, reason) = match refusal {
        Refusal::DestinationExists => (M::NotCommitted, D::NotAttempted, Reason::DestinationExists),
        Refusal::AtomicUnavailable => (M::NotCommitted, D::NotAttempted, Reason::AtomicUnavailable),
        Refusal::CrossDevice => (M::NotCommitted, D::NotAttempted, Reason::CrossDevice),
        Refusal::PermissionDenied => (M::NotCommitted, D::NotAttempted, Reason::PermissionDenied),
        Refusal::Interrupted => (M::NotCommitted, D::NotAttempted, Reason::Interrupted),
        Refusal::NotFound | Refusal::InvalidRequest => {
            (M::NotCommitted, D::NotAttempted, Reason::InvalidRequest)
        }
        Refusal::ReparsePoint
        | Refusal::IdentityMismatch
        | Refusal::NotDirectory
        | Refusal::NotRegularFile => (M::NotCommitted, D::NotAttempted, Reason::IdentityViolation),
        Refusal::DestinationIdentityChanged => {
            (M::Committed, D::NotProvable, Reason::IdentityViolation)
        }
        Refusal::SourceUnlinkFailed => (M::Committed, D::NotProvable, Reason::IoFailure),
        Refusal::IoError => (M::Unknown, D::NotProvable, Reason::Unknown),
    };
    let phase = match (mutation_state, reason) {
        _ if refusal == Refusal::SourceUnlinkFailed => Phase::SourceUnlink,
        (M::Committed, _) => Phase::TerminalIdentity,
        (_, Reason::InvalidRequest | Reason::IdentityViolation) => Phase::Preflight,
        _ => Phase::Rename,
    };
    NoReplaceOutcome {
        ok: false,
        code: Some(refusal.as_str()),
        mutation_state,
        durability_state,
        reason,
        primitive,
        phase,
    }
}

/// The exclusive rename this platform offers.
#[cfg(target_os = "linux")]
const PLATFORM_PRIMITIVE: Primitive = Primitive::Renameat2Noreplace;
#[cfg(target_os = "macos")]
const PLATFORM_PRIMITIVE: Primitive = Primitive::RenameatxNpExcl;
/// `FileRenameInformation` with `ReplaceIfExists = FALSE`, relative to the
/// destination directory's handle (src/sys/os/windows).
#[cfg(windows)]
const PLATFORM_PRIMITIVE: Primitive = Primitive::WindowsRenameNoreplace;

/// Renames `src` to `dst` unless `dst` exists. Both parents are opened
/// no-follow; see [`rename_no_replace_at`].
pub fn rename_no_replace(src: &Path, dst: &Path) -> NoReplaceOutcome {
    match open_parents(src, dst) {
        Ok((src_dir, src_name, dst_dir, dst_name)) => {
            rename_no_replace_at(src_dir.as_fd(), &src_name, dst_dir.as_fd(), &dst_name)
        }
        Err(refusal) => outcome(PLATFORM_PRIMITIVE, Err(refusal)),
    }
}

/// Renames `src_dir/src_name` to `dst_dir/dst_name` unless the destination
/// name exists. The source must be a directory or a regular file, never a
/// symlink. Where the filesystem refuses the exclusive flag, a directory is
/// published with the `mkdirat` claim and a file with `linkat`; both still
/// never replace an existing entry.
pub fn rename_no_replace_at(
    src_dir: BorrowedFd<'_>,
    src_name: &OsStr,
    dst_dir: BorrowedFd<'_>,
    dst_name: &OsStr,
) -> NoReplaceOutcome {
    let (primitive, result) = exclusive_rename(
        caps::global(),
        src_dir,
        src_name,
        dst_dir,
        dst_name,
        Source::ByName,
    );
    outcome(primitive, result)
}

/// The directory fallback on its own (for filesystems known to refuse the
/// exclusive flag, and for tests): see [`rename_directory_no_replace_at`].
pub fn rename_directory_no_replace(src: &Path, dst: &Path) -> NoReplaceOutcome {
    match open_parents(src, dst) {
        Ok((src_dir, src_name, dst_dir, dst_name)) => {
            rename_directory_no_replace_at(src_dir.as_fd(), &src_name, dst_dir.as_fd(), &dst_name)
        }
        Err(refusal) => outcome(Primitive::MkdiratRenameatNoreplace, Err(refusal)),
    }
}

/// Publishes the directory `src_dir/src_name` as `dst_dir/dst_name` without
/// the kernel's exclusive flag: `mkdirat` claims the destination name (it
/// fails if anything is there), and the plain `renameat` that follows can
/// then only replace that empty claim.
///
/// Residual risk (accepted, as upstream): a party that removes our claim and
/// puts its own *empty* directory there in the window between `mkdirat` and
/// `renameat` is replaced. A populated directory is never replaced
/// (`ENOTEMPTY`), and the identity check afterwards reports a destination that
/// is not our source.
pub fn rename_directory_no_replace_at(
    src_dir: BorrowedFd<'_>,
    src_name: &OsStr,
    dst_dir: BorrowedFd<'_>,
    dst_name: &OsStr,
) -> NoReplaceOutcome {
    let result = check_names(src_name, dst_name)
        .and_then(|()| pin_source(src_dir, src_name))
        .and_then(|source| {
            if fsx::kind_of(&source.stat) != FileType::Directory {
                return Err(Refusal::NotDirectory);
            }
            claim_and_rename(src_dir, src_name, dst_dir, dst_name, Some(&source))
        });
    outcome(Primitive::MkdiratRenameatNoreplace, result)
}

/// The source, held open so its inode number stays ours while we compare
/// (by us, or by the caller of [`rename_held_no_replace_at`]).
struct PinnedSource {
    _pin: Option<OwnedFd>,
    stat: Stat,
}

/// How [`exclusive_rename`] knows its source.
#[derive(Clone, Copy)]
enum Source<'a> {
    /// By its name only: it is looked at and pinned first.
    ByName,
    /// Held open by the caller (its `fstat`); what moved is checked after.
    Held(&'a Stat),
    /// Held open by the caller, who made it and guards it (see
    /// [`rename_fresh_no_replace_at`]): what the kernel's rename moved is
    /// it, with no check after.
    Fresh(&'a Stat),
}

/// The exclusive rename with its fallback; returns the primitive that
/// actually decided the result. `caps` is what is known of the filesystem:
/// where the flag was refused before, the fallback runs without the call.
/// The source is pinned by name first, unless the caller holds it open
/// (see [`Source`]).
fn exclusive_rename(
    caps: &Caps,
    src_dir: BorrowedFd<'_>,
    src_name: &OsStr,
    dst_dir: BorrowedFd<'_>,
    dst_name: &OsStr,
    source: Source<'_>,
) -> (Primitive, Result<(), Refusal>) {
    let pinned = check_names(src_name, dst_name).and_then(|()| match source {
        Source::Held(stat) | Source::Fresh(stat) => Ok(PinnedSource {
            _pin: None,
            stat: *stat,
        }),
        Source::ByName => pin_source(src_dir, src_name),
    });
    let source_kind = source;
    let source = match pinned {
        Ok(source) => source,
        Err(refusal) => return (PLATFORM_PRIMITIVE, Err(refusal)),
    };
    let dev = fsx::dev_of(&source.stat);
    match kernel_no_replace(caps, dev, src_dir, src_name, dst_dir, dst_name) {
        None => fallback(
            src_dir,
            src_name,
            dst_dir,
            dst_name,
            &source,
            matches!(source_kind, Source::Fresh(_)),
        ),
        Some(Ok(())) if matches!(source_kind, Source::Fresh(_)) => (PLATFORM_PRIMITIVE, Ok(())),
        Some(Ok(())) => (
            PLATFORM_PRIMITIVE,
            verify_destination(dst_dir, dst_name, &source),
        ),
        Some(Err(errno)) => (PLATFORM_PRIMITIVE, Err(refusal_from_errno(errno))),
    }
}

/// [`rename_no_replace_at`] for a source the caller made and holds open:
/// `held` is the `fstat` of that descriptor. The source is not looked up and
/// pinned again by name; the caller's descriptor keeps its inode number
/// ours. What proves that the rename moved our source, and not something
/// swapped in under its name, is the check after it (the destination is
/// the held inode, else the refusal `destination_identity_changed`): a look
/// by name before the rename would only narrow the window for such a swap,
/// never close it, so it is not made.
pub fn rename_held_no_replace_at(
    src_dir: BorrowedFd<'_>,
    src_name: &OsStr,
    held: &Stat,
    dst_dir: BorrowedFd<'_>,
    dst_name: &OsStr,
) -> NoReplaceOutcome {
    rename_source(src_dir, src_name, dst_dir, dst_name, Source::Held(held))
}

/// [`rename_held_no_replace_at`] for a source that cannot have been
/// swapped: the caller made it moments ago under a name nobody else
/// makes (a fresh UUID), and has held its `flock` since, so no reaper
/// touches it. Nothing but the caller's own directory can be at that name
/// (it is there, or gone: `ENOENT`), so where the kernel's exclusive rename
/// succeeds, what it moved is that directory and the check after it is not
/// made. The fallback, which works in two steps, still checks.
pub fn rename_fresh_no_replace_at(
    src_dir: BorrowedFd<'_>,
    src_name: &OsStr,
    held: &Stat,
    dst_dir: BorrowedFd<'_>,
    dst_name: &OsStr,
) -> NoReplaceOutcome {
    rename_source(src_dir, src_name, dst_dir, dst_name, Source::Fresh(held))
}

/// The exclusive rename of a source known as `source`, with its outcome.
fn rename_source(
    src_dir: BorrowedFd<'_>,
    src_name: &OsStr,
    dst_dir: BorrowedFd<'_>,
    dst_name: &OsStr,
    source: Source<'_>,
) -> NoReplaceOutcome {
    let (primitive, result) =
        exclusive_rename(caps::global(), src_dir, src_name, dst_dir, dst_name, source);
    outcome(primitive, result)
}

/// The kernel's exclusive rename, issued only where `caps` does not know
/// the filesystem on `dev` to refuse it. `None` when the caller's fallback
/// must run: the flag was refused, now or before (the filesystem — NFS,
/// DrvFs, many FUSE mounts — or the kernel); nothing was changed then.
fn kernel_no_replace(
    caps: &Caps,
    dev: u64,
    src_dir: BorrowedFd<'_>,
    src_name: &OsStr,
    dst_dir: BorrowedFd<'_>,
    dst_name: &OsStr,
) -> Option<Result<(), Errno>> {
    if !caps.should_try(dev, Flag::NoReplace) {
        crate::debug!(
            "no {} on device {dev} (refused there before): using the fallback",
            Flag::NoReplace.as_str()
        );
        return None;
    }
    match retry_interrupted(|| platform_rename(src_dir, src_name, dst_dir, dst_name)) {
        Ok(()) => {
            caps.learned(dev, Flag::NoReplace, true);
            Some(Ok(()))
        }
        // Windows renames without replacing on every volume (the flag is
        // the call's own `ReplaceIfExists`): an error there is this call's
        // (a bad name, a share's refusal), not a filesystem without the
        // flag; and the fallback could never publish there (a plain rename
        // does not replace the claim's empty directory on Windows), so every
        // later publication on the volume would read as contended.
        Err(errno) if cfg!(windows) => Some(Err(errno)),
        Err(errno @ (Errno::INVAL | Errno::NOSYS | Errno::NOTSUP)) => {
            learn_refusal(caps, dev, src_dir, dst_dir);
            crate::debug!(
                "{} refused on device {dev} ({}): this process uses the fallback there from now on",
                Flag::NoReplace.as_str(),
                crate::sys::errno::errno_code(errno)
            );
            None
        }
        Err(errno) => Some(Err(errno)),
    }
}

/// Remembers that the filesystem on `dev` refused `RENAME_NOREPLACE`, for a
/// rename inside one directory only (a lock's staging and its name always
/// are): between two directories `EINVAL` may be the caller's mistake (a
/// directory moved into itself), which says nothing of the filesystem.
fn learn_refusal(caps: &Caps, dev: u64, src_dir: BorrowedFd<'_>, dst_dir: BorrowedFd<'_>) {
    let same_directory = matches!(
        (fs::fstat(src_dir), fs::fstat(dst_dir)),
        (Ok(a), Ok(b)) if fsx::same_inode(&a, &b)
    );
    if same_directory {
        caps.learned(dev, Flag::NoReplace, false);
    }
}

/// The publication without the exclusive flag: the `mkdirat` claim for a
/// directory, `linkat` for a regular file.
fn fallback(
    src_dir: BorrowedFd<'_>,
    src_name: &OsStr,
    dst_dir: BorrowedFd<'_>,
    dst_name: &OsStr,
    source: &PinnedSource,
    fresh: bool,
) -> (Primitive, Result<(), Refusal>) {
    match fsx::kind_of(&source.stat) {
        FileType::Directory => (
            Primitive::MkdiratRenameatNoreplace,
            claim_and_rename(
                src_dir,
                src_name,
                dst_dir,
                dst_name,
                (!fresh).then_some(source),
            ),
        ),
        FileType::RegularFile => (
            Primitive::LinkatNoreplace,
            link_and_unlink(src_dir, src_name, dst_dir, dst_name, source),
        ),
        _ => (PLATFORM_PRIMITIVE, Err(Refusal::AtomicUnavailable)),
    }
}

/// The kernel's exclusive rename; `ENOSYS` where the platform has none or
/// the portable mechanisms are forced, which sends the caller to its
/// fallback.
fn platform_rename(
    src_dir: BorrowedFd<'_>,
    src_name: &OsStr,
    dst_dir: BorrowedFd<'_>,
    dst_name: &OsStr,
) -> Result<(), Errno> {
    exclusive_rename_at(src_dir, src_name, dst_dir, dst_name)
}

/// `renameat2(RENAME_NOREPLACE)` / `renameatx_np(RENAME_EXCL)` alone, with
/// no fallback: for a caller that has a way of its own when the kernel
/// cannot (`ENOSYS` under the portable mechanisms; `EINVAL`, `ENOTSUP`
/// where the filesystem refuses the flag).
pub fn exclusive_rename_at(
    src_dir: BorrowedFd<'_>,
    src_name: &OsStr,
    dst_dir: BorrowedFd<'_>,
    dst_name: &OsStr,
) -> Result<(), Errno> {
    platform::rename_with(src_dir, src_name, dst_dir, dst_name, RenameFlags::NOREPLACE)
}

/// Renames the directory `src_name` to `dst_name` unless the destination
/// exists, with what `caps` knows of the filesystem on device `dev`: the
/// kernel's exclusive rename where it works (or is not known to fail),
/// else the `mkdirat` claim of [`rename_directory_no_replace_at`]. No pin
/// and no check of the destination on the kernel's path: for a caller that
/// verifies the name itself (the release's move back onto the lock name,
/// which compares what it finds there with its root). `true` when renamed.
pub fn exclusive_rename_dir_at(
    caps: &Caps,
    dev: u64,
    src_dir: BorrowedFd<'_>,
    src_name: &OsStr,
    dst_dir: BorrowedFd<'_>,
    dst_name: &OsStr,
) -> bool {
    checked_dir_rename(caps, dev, (src_dir, src_name), (dst_dir, dst_name), true)
}

/// Renames the directory `src_name` to `dst_name`, a fresh name that
/// nobody else makes and nobody can guess before this call makes it (a
/// release's quarantine, [`crate::fs::tree::quarantine_name`]: this
/// process's pid and an id drawn from its secret seed): the kernel's
/// exclusive rename where it works, else a plain `renameat` of nothing but
/// a directory ([`rename_only_a_dir`]). What a plain rename could replace
/// is an empty directory at the destination, and nothing stands at such a
/// name but what a rename of ours puts there; so on Linux the `mkdirat`
/// claim of [`exclusive_rename_dir_at`] buys nothing here and costs three
/// calls, two of them round trips to the server on a network mount
/// (sshfs, NFS), where this path runs. `true` as soon as the rename may
/// have happened: the caller checks what the name holds.
pub fn rename_dir_to_fresh_at(
    caps: &Caps,
    dev: u64,
    src_dir: BorrowedFd<'_>,
    src_name: &OsStr,
    dst_dir: BorrowedFd<'_>,
    dst_name: &OsStr,
) -> bool {
    checked_dir_rename(caps, dev, (src_dir, src_name), (dst_dir, dst_name), false)
}

/// The two renames above: the kernel's exclusive rename, else the `mkdirat`
/// claim (`claim`) or a plain rename. "Renamed" as soon as the rename may
/// have happened (the outcome is unknown): the caller's check of what the
/// new name holds decides, and moves back what is not ours. So the source
/// is neither pinned before nor compared after here: the caller looked at
/// it just before, and looks at the destination just after (on a network
/// mount, five round trips fewer).
fn checked_dir_rename(
    caps: &Caps,
    dev: u64,
    (src_dir, src_name): (BorrowedFd<'_>, &OsStr),
    (dst_dir, dst_name): (BorrowedFd<'_>, &OsStr),
    claim: bool,
) -> bool {
    if let Some(result) = kernel_no_replace(caps, dev, src_dir, src_name, dst_dir, dst_name) {
        return result.is_ok();
    }
    let result = check_names(src_name, dst_name).and_then(|()| {
        if claim {
            claim_and_rename(src_dir, src_name, dst_dir, dst_name, None)
        } else {
            rename_only_a_dir(src_dir, src_name, dst_dir, dst_name)
        }
    });
    outcome(Primitive::MkdiratRenameatNoreplace, result).mutation_state
        != MutationState::NotCommitted
}

/// A plain rename that moves nothing but a directory: the caller looked
/// at the source just before, and something else swapped in meanwhile (a
/// file, a symlink) must stay where it is, not be moved to a name its
/// move back, a `mkdirat` claim, could not put it back from. Linux's
/// rename refuses a source with a trailing slash that is not a directory
/// (`ENOTDIR`, a symlink too: it is not followed), as this client sees it:
/// on a network mount a swap made on the server or through another client
/// may still look like a directory in this client's cache (sshfs caches
/// 20 s by default), and is moved; then, as before this check, the move
/// back fails, the release reports the lock missing (`EMISSING`) and what
/// was swapped in stays under the quarantine name, never removed.
/// Elsewhere a trailing slash may follow a symlink, so the claim does it
/// there: a non-directory cannot replace the claimed directory.
fn rename_only_a_dir(
    src_dir: BorrowedFd<'_>,
    src_name: &OsStr,
    dst_dir: BorrowedFd<'_>,
    dst_name: &OsStr,
) -> Result<(), Refusal> {
    if !cfg!(any(target_os = "linux", target_os = "android")) {
        return claim_and_rename(src_dir, src_name, dst_dir, dst_name, None);
    }
    let mut as_dir = src_name.to_os_string();
    as_dir.push("/");
    retry_interrupted(|| fs::renameat(src_dir, &as_dir, dst_dir, dst_name))
        .map_err(refusal_from_errno)
}

/// Swaps two names in one step (`renameat2(RENAME_EXCHANGE)`,
/// `renameatx_np(RENAME_SWAP)`): neither name is ever free. `ENOSYS` under
/// the portable mechanisms, `EINVAL`/`ENOTSUP`/`EXDEV` where the
/// filesystem cannot; the caller then has to do without (see
/// `crate::lock::publish::publish_over`, which removes a stale lock in
/// place instead).
pub fn exchange_at(
    a_dir: BorrowedFd<'_>,
    a_name: &OsStr,
    b_dir: BorrowedFd<'_>,
    b_name: &OsStr,
) -> Result<(), Errno> {
    platform::rename_with(a_dir, a_name, b_dir, b_name, RenameFlags::EXCHANGE)
}

/// The directory fallback proper (see [`rename_directory_no_replace_at`]).
/// With `verify`, the destination is checked after the rename to be that
/// source; without, the caller knows what it moved (a source it made and
/// guards, see [`rename_fresh_no_replace_at`]) or checks the name itself
/// (see [`exclusive_rename_dir_at`]).
fn claim_and_rename(
    src_dir: BorrowedFd<'_>,
    src_name: &OsStr,
    dst_dir: BorrowedFd<'_>,
    dst_name: &OsStr,
    verify: Option<&PinnedSource>,
) -> Result<(), Refusal> {
    retry_interrupted(|| fs::mkdirat(dst_dir, dst_name, Mode::from_raw_mode(0o700))).map_err(
        |errno| match errno {
            // SFTP has no "exists": sshfs reports the server's EEXIST as
            // its generic failure, EPERM. A name that stands is the answer.
            Errno::PERM if fsx::stat_nofollow(dst_dir, dst_name).is_ok() => {
                Refusal::DestinationExists
            }
            errno => refusal_from_errno(errno),
        },
    )?;
    // Remember which directory is our claim, so a failed rename removes only
    // that one and never a contender's directory that replaced it.
    let claim = match fsx::stat_nofollow(dst_dir, dst_name) {
        Ok(claim) => claim,
        // Someone removed our claim already; the name is not ours to touch.
        Err(errno) => return Err(refusal_from_errno(errno)),
    };
    match retry_interrupted(|| fs::renameat(src_dir, src_name, dst_dir, dst_name)) {
        Ok(()) => verify.map_or(Ok(()), |source| {
            verify_destination(dst_dir, dst_name, source)
        }),
        Err(errno) => {
            if let Ok(now) = fsx::stat_nofollow(dst_dir, dst_name)
                && fsx::same_inode(&now, &claim)
            {
                // Best effort: AT_REMOVEDIR removes only an empty directory.
                let _ = fs::unlinkat(dst_dir, dst_name, AtFlags::REMOVEDIR);
            }
            match errno {
                // sshfs's EPERM is SFTP's generic failure: the server refused
                // to replace what now stands at the name (not our empty
                // claim, which a rename replaces). Contention, not permissions.
                Errno::PERM if fsx::stat_nofollow(dst_dir, dst_name).is_ok() => {
                    Err(Refusal::DestinationExists)
                }
                errno => Err(refusal_from_errno(errno)),
            }
        }
    }
}

/// The regular-file fallback: `linkat` fails if the destination exists, so
/// the publication is exclusive; the source name is removed afterwards, and
/// only if it still names the file we linked.
fn link_and_unlink(
    src_dir: BorrowedFd<'_>,
    src_name: &OsStr,
    dst_dir: BorrowedFd<'_>,
    dst_name: &OsStr,
    source: &PinnedSource,
) -> Result<(), Refusal> {
    retry_interrupted(|| fs::linkat(src_dir, src_name, dst_dir, dst_name, AtFlags::empty()))
        .map_err(|errno| match errno {
            // Filesystems without hard links cannot carry this fallback.
            Errno::OPNOTSUPP | Errno::MLINK => Refusal::AtomicUnavailable,
            other => refusal_from_errno(other),
        })?;
    verify_destination(dst_dir, dst_name, source)?;
    match fsx::stat_nofollow(src_dir, src_name) {
        Ok(now) if fsx::same_inode(&now, &source.stat) => {
            retry_interrupted(|| fs::unlinkat(src_dir, src_name, AtFlags::empty()))
                .map_err(|_| Refusal::SourceUnlinkFailed)
        }
        _ => Err(Refusal::SourceUnlinkFailed),
    }
}

/// After a committed rename: the destination must be the source inode.
fn verify_destination(
    dst_dir: BorrowedFd<'_>,
    dst_name: &OsStr,
    source: &PinnedSource,
) -> Result<(), Refusal> {
    match fsx::stat_nofollow(dst_dir, dst_name) {
        Ok(now) if fsx::same_inode(&now, &source.stat) => Ok(()),
        _ => Err(Refusal::DestinationIdentityChanged),
    }
}

/// Looks at the source without following it and pins it: a symlink is
/// refused, and the pinned descriptor must be the object we looked at.
fn pin_source(dir: BorrowedFd<'_>, name: &OsStr) -> Result<PinnedSource, Refusal> {
    let seen = retry_interrupted(|| fsx::stat_nofollow(dir, name)).map_err(refusal_from_errno)?;
    match fsx::kind_of(&seen) {
        FileType::Symlink => return Err(Refusal::ReparsePoint),
        FileType::Directory | FileType::RegularFile => {}
        _ => return Err(Refusal::NotRegularFile),
    }
    let pin = retry_interrupted(|| fsx::open_pin(dir, name)).map_err(|errno| match errno {
        // The name became a symlink or vanished since the fstatat.
        Errno::LOOP | Errno::NOTDIR | Errno::NOENT => Refusal::IdentityMismatch,
        other => refusal_from_errno(other),
    })?;
    let stat = fs::fstat(&pin).map_err(refusal_from_errno)?;
    if !fsx::same_inode(&seen, &stat) {
        return Err(Refusal::IdentityMismatch);
    }
    Ok(PinnedSource {
        _pin: Some(pin),
        stat,
    })
}

/// Both names must be single real components (no NUL, no `/`, not `.`/`..`).
fn check_names(src_name: &OsStr, dst_name: &OsStr) -> Result<(), Refusal> {
    if fsx::is_single_component(src_name) && fsx::is_single_component(dst_name) {
        Ok(())
    } else {
        Err(Refusal::InvalidRequest)
    }
}

/// Opens both parents no-follow. A NUL anywhere is refused before any syscall.
fn open_parents(
    src: &Path,
    dst: &Path,
) -> Result<(OwnedFd, std::ffi::OsString, OwnedFd, std::ffi::OsString), Refusal> {
    if has_nul(src) || has_nul(dst) {
        return Err(Refusal::InvalidRequest);
    }
    let (src_dir, src_name) = open_parent_of(src)?;
    let (dst_dir, dst_name) = open_parent_of(dst)?;
    Ok((src_dir, src_name, dst_dir, dst_name))
}

fn has_nul(path: &Path) -> bool {
    path.as_os_str().as_encoded_bytes().contains(&0)
}

/// `fsx::open_parent` with its errno turned into a refusal that says whether
/// a symlinked ancestor was the cause.
fn open_parent_of(path: &Path) -> Result<(OwnedFd, std::ffi::OsString), Refusal> {
    fsx::open_parent(path).map_err(|errno| match errno {
        Errno::LOOP => Refusal::ReparsePoint,
        // A symlink in the final component of the parent reads as ENOTDIR
        // under O_DIRECTORY; tell it apart from a real non-directory.
        Errno::NOTDIR if fsx::has_symlinked_ancestor(path) => Refusal::ReparsePoint,
        other => refusal_from_errno(other),
    })
}

/// The errno of a rename-family syscall as a refusal.
fn refusal_from_errno(errno: Errno) -> Refusal {
    match errno {
        Errno::EXIST | Errno::NOTEMPTY => Refusal::DestinationExists,
        Errno::NOSYS => Refusal::AtomicUnavailable,
        Errno::XDEV => Refusal::CrossDevice,
        Errno::ACCESS | Errno::PERM => Refusal::PermissionDenied,
        Errno::INTR => Refusal::Interrupted,
        Errno::NOENT => Refusal::NotFound,
        Errno::INVAL => Refusal::InvalidRequest,
        Errno::LOOP => Refusal::ReparsePoint,
        Errno::NOTDIR => Refusal::NotDirectory,
        _ => Refusal::IoError,
    }
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
    use std::path::PathBuf;

    fn staged_dir(root: &Path, name: &str, payload: &[u8]) -> PathBuf {
        let dir = root.join(name);
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("info"), payload).unwrap();
        dir
    }

    fn assert_committed(result: NoReplaceOutcome) {
        assert!(result.ok, "{result:?}");
        assert_eq!(result.code, None);
        assert_eq!(result.mutation_state, MutationState::Committed);
        assert_eq!(result.durability_state, DurabilityState::NotAttempted);
        assert_eq!(result.reason, Reason::None);
        assert_eq!(result.phase, Phase::Complete);
    }

    #[test]
    fn publishes_a_directory_and_refuses_an_occupied_name() {
        let root = tempdir("publish");
        let staging = staged_dir(&root, "staging", b"one");
        let lock = root.join("f.lock");
        let first = rename_no_replace(&staging, &lock);
        assert_committed(first);
        // Each platform's own exclusive rename.
        let native = if cfg!(target_os = "macos") {
            Primitive::RenameatxNpExcl
        } else if cfg!(windows) {
            Primitive::WindowsRenameNoreplace
        } else {
            Primitive::Renameat2Noreplace
        };
        assert_eq!(first.primitive, native);
        assert_eq!(std::fs::read(lock.join("info")).unwrap(), b"one");

        let second = staged_dir(&root, "staging2", b"two");
        let refused = rename_no_replace(&second, &lock);
        assert!(!refused.ok);
        assert_eq!(refused.code, Some("destination_exists"));
        assert_eq!(refused.mutation_state, MutationState::NotCommitted);
        assert_eq!(refused.reason, Reason::DestinationExists);
        assert_eq!(refused.phase, Phase::Rename);
        assert_eq!(std::fs::read(lock.join("info")).unwrap(), b"one");
        assert_eq!(std::fs::read(second.join("info")).unwrap(), b"two");
        std::fs::remove_dir_all(root).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn an_empty_directory_at_the_destination_is_a_holder_not_a_free_slot() {
        let root = tempdir("empty-holder");
        let staging = staged_dir(&root, "staging", b"mine");
        let lock = root.join("f.lock");
        std::fs::create_dir(&lock).unwrap();
        for refused in [
            rename_no_replace(&staging, &lock),
            rename_directory_no_replace(&staging, &lock),
        ] {
            assert_eq!(refused.code, Some("destination_exists"), "{refused:?}");
            assert_eq!(std::fs::read_dir(&lock).unwrap().count(), 0);
            assert_eq!(std::fs::read(staging.join("info")).unwrap(), b"mine");
        }
        std::fs::remove_dir_all(root).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn directory_fallback_publishes_and_verifies_identity() {
        let root = tempdir("fallback");
        let staging = staged_dir(&root, "staging", b"x");
        let before = std::fs::metadata(&staging).unwrap();
        let lock = root.join("f.lock");
        let result = rename_directory_no_replace(&staging, &lock);
        assert_committed(result);
        assert_eq!(result.primitive, Primitive::MkdiratRenameatNoreplace);
        use std::os::unix::fs::MetadataExt;
        assert_eq!(std::fs::metadata(&lock).unwrap().ino(), before.ino());
        assert!(!staging.exists());
        std::fs::remove_dir_all(root).unwrap();
    }

    /// Runs the exclusive rename of `src` to `dst` (names in `root`)
    /// against the memory `caps`.
    fn exclusive_with(caps: &Caps, root: &Path, src: &str, dst: &str) -> NoReplaceOutcome {
        let parent = fsx::open_dir_nofollow(root).unwrap();
        let (primitive, result) = exclusive_rename(
            caps,
            parent.as_fd(),
            OsStr::new(src),
            parent.as_fd(),
            OsStr::new(dst),
            Source::ByName,
        );
        outcome(primitive, result)
    }

    #[cfg(unix)]
    #[test]
    fn a_remembered_refusal_goes_straight_to_the_fallback_without_the_call() {
        use std::os::unix::fs::MetadataExt;
        let root = tempdir("caps");
        let dev = std::fs::metadata(&root).unwrap().dev();
        let caps = Caps::new();

        // Nothing known: the flag is tried (and works here).
        staged_dir(&root, "s1", b"1");
        let first = exclusive_with(&caps, &root, "s1", "one.lock");
        assert_committed(first);
        assert_eq!(first.primitive, PLATFORM_PRIMITIVE);
        assert_eq!(caps.counts(), (1, 0));

        // A refusal remembered for this filesystem (as a probe of an NFS or
        // FUSE mount, or the lock's own first call there, records it): the
        // fallback publishes, and the flagged call is not issued.
        caps.learned(dev, Flag::NoReplace, false);
        staged_dir(&root, "s2", b"2");
        let second = exclusive_with(&caps, &root, "s2", "two.lock");
        assert_committed(second);
        assert_eq!(second.primitive, Primitive::MkdiratRenameatNoreplace);
        assert_eq!(std::fs::read(root.join("two.lock/info")).unwrap(), b"2");
        assert_eq!(caps.counts(), (1, 1), "skipped, not tried");

        // Same refusals as with the call: an occupied name (even an empty
        // directory) stays, and a regular file goes through linkat.
        staged_dir(&root, "s3", b"3");
        std::fs::create_dir(root.join("empty.lock")).unwrap();
        let taken = exclusive_with(&caps, &root, "s3", "empty.lock");
        assert_eq!(taken.code, Some("destination_exists"), "{taken:?}");
        assert_eq!(
            std::fs::read_dir(root.join("empty.lock")).unwrap().count(),
            0
        );
        std::fs::write(root.join("plain"), b"p").unwrap();
        let file = exclusive_with(&caps, &root, "plain", "moved");
        assert_committed(file);
        assert_eq!(file.primitive, Primitive::LinkatNoreplace);
        assert_eq!(caps.counts(), (1, 3));

        // Another filesystem (device) is not affected.
        assert!(caps.should_try(dev + 1, Flag::NoReplace));
        std::fs::remove_dir_all(root).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn the_release_detaches_to_its_fresh_name_without_a_claim_and_moves_back_never_replacing() {
        use std::os::unix::fs::MetadataExt;
        let root = tempdir("detach");
        let dev = std::fs::metadata(&root).unwrap().dev();
        let parent = fsx::open_dir_nofollow(&root).unwrap();
        let (at, name) = (parent.as_fd(), OsStr::new);
        for (label, caps) in [("flag", Caps::new()), ("refused", Caps::new())] {
            if label == "refused" {
                // As on sshfs or NFS: the flag refused before on this device.
                caps.learned(dev, Flag::NoReplace, false);
            }
            staged_dir(&root, "f.lock", b"ours");
            // The detach, to a fresh name: nothing left at the old name, and
            // no claim made anywhere.
            let detach =
                |src, dst| rename_dir_to_fresh_at(&caps, dev, at, name(src), at, name(dst));
            assert!(detach("f.lock", "f.lock.removing.1"), "{label}");
            assert_eq!(
                std::fs::read(root.join("f.lock.removing.1/info")).unwrap(),
                b"ours"
            );
            assert_eq!(listing(&root), vec!["f.lock.removing.1".to_string()]);
            // Nothing to move: nothing moved, and it says so.
            assert!(!detach("f.lock", "f.lock.removing.2"), "{label}");
            // The move back, onto a name others make: an occupied
            // destination, even an empty directory, stays.
            let move_back =
                |src, dst| exclusive_rename_dir_at(&caps, dev, at, name(src), at, name(dst));
            std::fs::create_dir(root.join("taken")).unwrap();
            assert!(!move_back("f.lock.removing.1", "taken"), "{label}");
            assert_eq!(std::fs::read_dir(root.join("taken")).unwrap().count(), 0);
            assert!(root.join("f.lock.removing.1/info").exists());
            std::fs::remove_dir(root.join("taken")).unwrap();
            assert!(move_back("f.lock.removing.1", "f.lock"), "{label}");
            assert_eq!(
                listing(&root),
                vec!["f.lock".to_string()],
                "{label}: no claim left"
            );
            std::fs::remove_dir_all(root.join("f.lock")).unwrap();
        }
        std::fs::remove_dir_all(root).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn a_caller_mistake_between_two_directories_is_not_remembered_as_the_filesystem_refusing() {
        let root = tempdir("caps-mistake");
        let caps = Caps::new();
        staged_dir(&root, "tree", b"t");
        std::fs::create_dir(root.join("tree/sub")).unwrap();
        // A directory into its own subdirectory: EINVAL from the kernel,
        // whatever the filesystem supports.
        let parent = fsx::open_dir_nofollow(&root).unwrap();
        let sub = fsx::open_dir_nofollow(&root.join("tree/sub")).unwrap();
        let (_, result) = exclusive_rename(
            &caps,
            parent.as_fd(),
            OsStr::new("tree"),
            sub.as_fd(),
            OsStr::new("inside"),
            Source::ByName,
        );
        assert!(result.is_err());
        assert_eq!(std::fs::read(root.join("tree/info")).unwrap(), b"t");
        assert!(!root.join("tree/sub/inside").exists());
        use std::os::unix::fs::MetadataExt;
        let dev = std::fs::metadata(&root).unwrap().dev();
        assert!(caps.should_try(dev, Flag::NoReplace), "nothing learned");
        // The next lock on this filesystem still uses the kernel's flag.
        staged_dir(&root, "s", b"s");
        let next = exclusive_with(&caps, &root, "s", "f.lock");
        assert_committed(next);
        assert_eq!(next.primitive, PLATFORM_PRIMITIVE);
        std::fs::remove_dir_all(root).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn directory_fallback_refuses_a_file_source_and_leaves_no_claim() {
        let root = tempdir("fallback-file");
        std::fs::write(root.join("plain"), b"x").unwrap();
        let result = rename_directory_no_replace(&root.join("plain"), &root.join("dst"));
        assert_eq!(result.code, Some("not_directory"));
        assert_eq!(result.phase, Phase::Preflight);
        assert!(!root.join("dst").exists());
        std::fs::remove_dir_all(root).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn directory_fallback_removes_its_claim_when_the_rename_fails() {
        let root = tempdir("fallback-claim");
        let staging = staged_dir(&root, "staging", b"x");
        let parent = fsx::open_dir_nofollow(&root).unwrap();
        let source = pin_source(parent.as_fd(), OsStr::new("staging")).unwrap();
        // A source name that no longer exists makes the rename fail after
        // the claim was made.
        std::fs::rename(&staging, root.join("moved")).unwrap();
        let result = claim_and_rename(
            parent.as_fd(),
            OsStr::new("staging"),
            parent.as_fd(),
            OsStr::new("f.lock"),
            Some(&source),
        );
        assert_eq!(result, Err(Refusal::NotFound));
        assert!(
            !root.join("f.lock").exists(),
            "the empty claim must be gone"
        );
        std::fs::remove_dir_all(root).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn file_fallback_links_then_unlinks_and_refuses_an_occupied_name() {
        let root = tempdir("link");
        std::fs::write(root.join("a"), b"a").unwrap();
        std::fs::write(root.join("b"), b"b").unwrap();
        let parent = fsx::open_dir_nofollow(&root).unwrap();
        let source = pin_source(parent.as_fd(), OsStr::new("a")).unwrap();
        let taken = link_and_unlink(
            parent.as_fd(),
            OsStr::new("a"),
            parent.as_fd(),
            OsStr::new("b"),
            &source,
        );
        assert_eq!(taken, Err(Refusal::DestinationExists));
        assert_eq!(std::fs::read(root.join("b")).unwrap(), b"b");
        let published = link_and_unlink(
            parent.as_fd(),
            OsStr::new("a"),
            parent.as_fd(),
            OsStr::new("c"),
            &source,
        );
        assert_eq!(published, Ok(()));
        assert!(!root.join("a").exists());
        assert_eq!(std::fs::read(root.join("c")).unwrap(), b"a");
        std::fs::remove_dir_all(root).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn refuses_a_symlinked_source_and_a_symlinked_ancestor() {
        let root = tempdir("symlink");
        let real = staged_dir(&root, "real", b"x");
        std::os::unix::fs::symlink(&real, root.join("alias")).unwrap();
        let through_link = rename_no_replace(&root.join("alias"), &root.join("dst"));
        assert_eq!(through_link.code, Some("reparse_point"));
        assert_eq!(through_link.reason, Reason::IdentityViolation);
        assert_eq!(through_link.phase, Phase::Preflight);

        std::fs::create_dir(root.join("parent")).unwrap();
        std::os::unix::fs::symlink(root.join("parent"), root.join("parent-alias")).unwrap();
        let ancestor = rename_no_replace(&real, &root.join("parent-alias/dst"));
        assert_eq!(ancestor.code, Some("reparse_point"));
        let ancestor = rename_directory_no_replace(&root.join("parent-alias/x"), &root.join("d"));
        assert_eq!(ancestor.code, Some("reparse_point"));
        assert!(real.join("info").exists());
        assert!(std::fs::symlink_metadata(root.join("alias")).is_ok());
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn nul_and_dotted_names_are_invalid_requests() {
        let nul = rename_no_replace(Path::new("/tmp/a\0b"), Path::new("/tmp/c"));
        assert_eq!(nul.code, Some("invalid_request"));
        assert_eq!(nul.reason, Reason::InvalidRequest);
        assert_eq!(nul.mutation_state, MutationState::NotCommitted);
        assert_eq!(nul.phase, Phase::Preflight);
        let nul = rename_directory_no_replace(Path::new("/tmp/a"), Path::new("/tmp/c\0"));
        assert_eq!(nul.code, Some("invalid_request"));
        let root = tempdir("dots");
        let dir = fsx::open_dir_nofollow(&root).unwrap();
        let dotted =
            rename_no_replace_at(dir.as_fd(), OsStr::new(".."), dir.as_fd(), OsStr::new("x"));
        assert_eq!(dotted.code, Some("invalid_request"));
        let slashed =
            rename_no_replace_at(dir.as_fd(), OsStr::new("a/b"), dir.as_fd(), OsStr::new("x"));
        assert_eq!(slashed.code, Some("invalid_request"));
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn missing_source_is_not_found() {
        let root = tempdir("missing");
        let result = rename_no_replace(&root.join("nope"), &root.join("dst"));
        assert_eq!(result.code, Some("not_found"));
        assert_eq!(result.reason, Reason::InvalidRequest);
        assert_eq!(result.phase, Phase::Preflight);
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn eintr_is_restarted_a_bounded_number_of_times() {
        let mut calls = 0;
        let transient = retry_interrupted(|| {
            calls += 1;
            if calls <= 3 { Err(Errno::INTR) } else { Ok(()) }
        });
        assert_eq!(transient, Ok(()));
        assert_eq!(calls, 4);

        let mut calls = 0;
        let persistent: Result<(), Errno> = retry_interrupted(|| {
            calls += 1;
            Err(Errno::INTR)
        });
        assert_eq!(persistent, Err(Errno::INTR));
        assert_eq!(calls, fsx::EINTR_RETRIES + 1);
        assert_eq!(
            outcome(PLATFORM_PRIMITIVE, Err(refusal_from_errno(Errno::INTR))).code,
            Some("interrupted")
        );
    }

    #[test]
    fn mapping_table_matches_upstream() {
        let row = |refusal| {
            let o = outcome(PLATFORM_PRIMITIVE, Err(refusal));
            (
                o.mutation_state.as_str(),
                o.durability_state.as_str(),
                o.reason.as_str(),
                o.phase.as_str(),
            )
        };
        assert_eq!(
            row(Refusal::DestinationExists),
            (
                "not_committed",
                "not_attempted",
                "destination_exists",
                "rename"
            )
        );
        assert_eq!(
            row(Refusal::CrossDevice),
            ("not_committed", "not_attempted", "cross_device", "rename")
        );
        assert_eq!(
            row(Refusal::NotFound),
            (
                "not_committed",
                "not_attempted",
                "invalid_request",
                "preflight"
            )
        );
        assert_eq!(
            row(Refusal::IdentityMismatch),
            (
                "not_committed",
                "not_attempted",
                "identity_violation",
                "preflight"
            )
        );
        assert_eq!(
            row(Refusal::DestinationIdentityChanged),
            (
                "committed",
                "not_provable",
                "identity_violation",
                "terminal_identity"
            )
        );
        assert_eq!(
            row(Refusal::SourceUnlinkFailed),
            ("committed", "not_provable", "io_failure", "source_unlink")
        );
        assert_eq!(
            row(Refusal::IoError),
            ("unknown", "not_provable", "unknown", "rename")
        );
    }
}
