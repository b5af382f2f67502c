//! Snapshot of a small directory tree, and removal of that tree only while it
//! is still exactly the snapshot.
//!
//! Safety argument.
//! * Every name is resolved relative to a directory descriptor that was
//!   opened `O_NOFOLLOW` (directories also `O_DIRECTORY`), so a component
//!   swapped for a symlink cannot redirect us; a symlink anywhere is refused.
//! * Each child is first classified with `fstatat(AT_SYMLINK_NOFOLLOW)`. A
//!   FIFO, socket or device is refused without being opened, so it can never
//!   block us. A regular file is then opened `O_NONBLOCK` (a FIFO swapped in
//!   after the `fstatat` opens at once and is refused by the `fstat` on the
//!   descriptor before any read), and the `fstat` must match the `fstatat`.
//! * A file is re-`fstat`ed after it was read; size, mtime, ctime, inode and
//!   link count must not have moved, so the digest belongs to the metadata
//!   next to it. A directory is re-`fstat`ed after its listing was walked.
//! * Memory and time are bounded: [`MAX_ENTRIES`] entries, [`MAX_FILE_BYTES`]
//!   per file, [`MAX_TOTAL_FILE_BYTES`] in total, [`MAX_DEPTH`] levels (each
//!   level holds one descriptor and one stack frame).
//! * Removal never deletes what it did not verify: the tree is first moved
//!   to a private sibling name, unique per use (`<name>.removing.<pid>.<uuid>`),
//!   with a no-replace rename (so a successor that takes the original name
//!   afterwards is out of reach), verified there in full against the
//!   snapshot, and only then deleted bottom-up, each entry re-observed
//!   through its verified parent descriptor just before its `unlinkat`. Any
//!   difference before the first deletion puts the tree back. Where the
//!   rename is refused across layers (overlayfs lower layer: `EXDEV`), the
//!   tree is removed in place the same way; `rmdir` of the emptied root
//!   cannot remove anything that took its name meanwhile.
//!
//! Comparisons of an expected entry with a later observation all go through
//! [`TreeEntry::same_object_as`].

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use crate::sys::os::fd::{AsFd, BorrowedFd, OwnedFd};
use crate::sys::os::fs::{self, AtFlags, FileType, FlockOperation, Mode, OFlags, Stat};
use crate::sys::os::io::Errno;
use sha2::{Digest, Sha256};

use crate::fs::fsx::{self, FuseSettle};
use crate::fs::rename::{self, Refusal};
use crate::sys::errno::is_flock_unsupported;

/// Most entries (the root included) a snapshot may hold.
pub const MAX_ENTRIES: usize = 4096;
/// Most bytes one file may hold.
pub const MAX_FILE_BYTES: u64 = 1 << 20;
/// Most file bytes a snapshot may read in total.
pub const MAX_TOTAL_FILE_BYTES: u64 = 16 << 20;
/// Deepest directory nesting below the root.
pub const MAX_DEPTH: usize = 64;

/// The tag of the private sibling a tree is detached to before deletion:
/// `<name>.removing.<pid>.<uuid>` ([`fsx::tagged_name`]).
pub const QUARANTINE_TAG: &str = "removing";

/// A fresh quarantine name for `name`.
pub fn quarantine_name(name: &OsStr) -> OsString {
    fsx::tagged_name(name, QUARANTINE_TAG)
}

/// What an entry is. Anything else is refused by the snapshot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EntryKind {
    Directory,
    File,
}

impl EntryKind {
    pub fn as_str(self) -> &'static str {
        match self {
            EntryKind::Directory => "directory",
            EntryKind::File => "file",
        }
    }
}

/// One observed entry of a tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TreeEntry {
    /// Path below the root, `/`-separated; `""` for the root.
    pub relative_path: String,
    pub kind: EntryKind,
    pub dev: u64,
    pub ino: u64,
    pub nlink: u64,
    pub size: u64,
    pub mtime_ns: i128,
    pub ctime_ns: i128,
    /// Lowercase hex SHA-256 of the content; files only.
    pub sha256: Option<String>,
}

impl TreeEntry {
    /// Whether `later`, an observation of the same path taken later, is the
    /// same object in the same state.
    ///
    /// A directory is compared by identity only (path, kind, dev, ino): its
    /// own metadata moves when it is renamed (ctime) or when its children
    /// are removed (mtime, size, nlink), and its content is compared entry
    /// by entry instead. A file must also keep its link count, size, mtime,
    /// ctime and digest: an equal ctime means nothing was written or
    /// re-stamped in between.
    pub fn same_object_as(&self, later: &TreeEntry) -> bool {
        let same_identity = self.relative_path == later.relative_path
            && self.kind == later.kind
            && self.dev == later.dev
            && self.ino == later.ino;
        match self.kind {
            EntryKind::Directory => same_identity,
            EntryKind::File => {
                same_identity
                    && self.nlink == later.nlink
                    && self.size == later.size
                    && self.mtime_ns == later.mtime_ns
                    && self.ctime_ns == later.ctime_ns
                    && self.sha256 == later.sha256
            }
        }
    }

    fn observed(
        relative_path: String,
        kind: EntryKind,
        stat: &Stat,
        sha256: Option<String>,
    ) -> Self {
        TreeEntry {
            relative_path,
            kind,
            dev: fsx::dev_of(stat),
            ino: fsx::ino_of(stat),
            nlink: fsx::nlink_of(stat),
            size: fsx::size_of(stat),
            mtime_ns: fsx::mtime_ns(stat),
            ctime_ns: fsx::ctime_ns(stat),
            sha256,
        }
    }

    /// The final component of the relative path (the root has none).
    fn name(&self) -> &str {
        self.relative_path
            .rsplit_once('/')
            .map_or(self.relative_path.as_str(), |(_, name)| name)
    }
}

/// A whole tree: the root first (`relative_path` `""`), then every entry in
/// depth-first pre-order with siblings sorted bytewise.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TreeSnapshot {
    pub root_dev: u64,
    pub root_ino: u64,
    pub entries: Vec<TreeEntry>,
}

impl TreeSnapshot {
    /// Whether `stat` is of this snapshot's root directory (same device
    /// and inode).
    pub fn is_root(&self, stat: &Stat) -> bool {
        fsx::dev_of(stat) == self.root_dev && fsx::ino_of(stat) == self.root_ino
    }

    /// The snapshot of a directory holding exactly one file, built from
    /// their `fstat`s and the bytes written, without walking it: what
    /// [`snapshot_tree_at`] would see of a lock directory just published.
    pub fn of_single_file(root: &Stat, file_name: &str, file: &Stat, bytes: &[u8]) -> Self {
        TreeSnapshot {
            root_dev: fsx::dev_of(root),
            root_ino: fsx::ino_of(root),
            entries: vec![
                TreeEntry::observed(String::new(), EntryKind::Directory, root, None),
                TreeEntry::observed(
                    file_name.to_string(),
                    EntryKind::File,
                    file,
                    Some(sha256_hex(bytes)),
                ),
            ],
        }
    }

    /// Whether the files of this snapshot still look unchanged through
    /// `root`, an open descriptor of its root (metadata only: an equal
    /// ctime means nothing was written). A cheap look before acting on the
    /// snapshot; the exact removal still verifies everything.
    pub fn files_look_unchanged(&self, root: BorrowedFd<'_>) -> bool {
        self.entries
            .iter()
            .filter(|entry| entry.kind == EntryKind::File)
            .all(|entry| {
                fsx::stat_nofollow(root, OsStr::new(&entry.relative_path)).is_ok_and(|stat| {
                    let now = TreeEntry::observed(
                        entry.relative_path.clone(),
                        EntryKind::File,
                        &stat,
                        entry.sha256.clone(),
                    );
                    entry.same_object_as(&now)
                })
            })
    }

    /// Whether the directory `root` (an open descriptor of this
    /// snapshot's root) holds exactly the names this snapshot lists at its
    /// top level, nothing more or less.
    pub fn names_unchanged(&self, root: BorrowedFd<'_>) -> bool {
        let expected = self.top_level_names();
        list_names(root, expected.len() + 1).is_ok_and(|names| names == expected)
    }

    /// The names this snapshot lists at its top level, sorted bytewise.
    fn top_level_names(&self) -> Vec<&str> {
        self.entries
            .iter()
            .skip(1)
            .filter(|entry| !entry.relative_path.contains('/'))
            .map(|entry| entry.relative_path.as_str())
            .collect()
    }

    /// [`Self::names_unchanged`] for the release, in one `getdents64` read
    /// through `root` itself (Linux): no description of its own to open and
    /// close, and no second read to see the end of the listing.
    ///
    /// Why one read is enough: this look only spares a lock that visibly
    /// gained an entry from being detached. An entry it does not see (one
    /// added after it, or past a read that holds all the names expected)
    /// is caught by the `rmdir` that ends the release, which refuses a
    /// directory that is not empty and leaves it where it is. A read that
    /// has not shown all the names expected yet is followed by the next, to
    /// the end if need be, and a listing that ends without them is read
    /// again from a rewind (btrfs). `root`'s file offset is its own: only the release lists
    /// through it (a held lock's watch opens a description of its own), so
    /// it is at the start unless an earlier attempt of this release moved
    /// it (`listed_before`: it is put back first).
    #[cfg(any(target_os = "linux", target_os = "android"))]
    pub fn names_unchanged_held(&self, root: BorrowedFd<'_>, listed_before: bool) -> bool {
        let expected = self.top_level_names();
        // A second pass, from a rewind, when the first reached the end
        // without them: btrfs lists through a descriptor only the entries
        // its directory had when it was opened (the record came after),
        // until a rewind brings the listing up to date.
        for rewind in [listed_before, true] {
            if rewind && fs::seek(root, fs::SeekFrom::Start(0)).is_err() {
                return false;
            }
            match read_names_held(root, expected.len()) {
                Some(mut names) if names.len() == expected.len() => {
                    names.sort_unstable();
                    return names == expected;
                }
                Some(_) if !rewind => continue,
                _ => return false,
            }
        }
        false
    }

    /// Whether `later` shows the same tree: same root, no entry added or
    /// missing, and every entry the same object in the same state.
    pub fn same_tree_as(&self, later: &TreeSnapshot) -> bool {
        self.root_dev == later.root_dev
            && self.root_ino == later.root_ino
            && self.entries.len() == later.entries.len()
            && self
                .entries
                .iter()
                .zip(&later.entries)
                .all(|(expected, seen)| expected.same_object_as(seen))
    }
}

/// Why a tree could not be snapshot (or an entry re-observed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TreeError {
    /// A symlink at the root or inside.
    ReparsePoint,
    /// A FIFO, socket or device inside.
    UnsupportedEntry,
    NotUtf8,
    NotFound,
    NotDirectory,
    /// A file with more than one link: removing our name would not remove it.
    HardLinkUnsupported,
    /// Something changed while we looked at it.
    TreeChanged,
    LimitExceeded,
    /// NUL in a path or a name that is not a single component.
    InvalidRequest,
    Io(Errno),
}

impl TreeError {
    pub fn code(self) -> &'static str {
        match self {
            TreeError::ReparsePoint => "reparse_point",
            TreeError::UnsupportedEntry => "unsupported_entry",
            TreeError::NotUtf8 => "not_utf8",
            TreeError::NotFound => "not_found",
            TreeError::NotDirectory => "not_directory",
            TreeError::HardLinkUnsupported => "hard_link_unsupported",
            TreeError::TreeChanged => "tree_changed",
            TreeError::LimitExceeded => "limit_exceeded",
            TreeError::InvalidRequest => "invalid_request",
            TreeError::Io(_) => "io_error",
        }
    }
}

impl From<Errno> for TreeError {
    fn from(errno: Errno) -> Self {
        TreeError::Io(errno)
    }
}

/// Snapshots the directory tree at `path`, opened no-follow.
pub fn snapshot_tree(path: &Path) -> Result<TreeSnapshot, TreeError> {
    let (parent, _, name) = open_parent(path)?;
    snapshot_tree_at(parent.as_fd(), &name)
}

/// Snapshots the directory `name` inside `parent`.
pub fn snapshot_tree_at(parent: BorrowedFd<'_>, name: &OsStr) -> Result<TreeSnapshot, TreeError> {
    if !fsx::is_single_component(name) {
        return Err(TreeError::InvalidRequest);
    }
    let (root, stat) = open_root(parent, name)?;
    snapshot_open_dir(root.as_fd(), &stat)
}

/// Snapshots the directory open at `root`: for a caller that opened it
/// itself (no-follow) and has already read from it, so that the snapshot
/// is of exactly the directory it read, with no second open by name.
pub fn snapshot_dir(root: BorrowedFd<'_>) -> Result<TreeSnapshot, TreeError> {
    snapshot_open_dir(root, &fs::fstat(root)?)
}

/// The result of an exact removal, in the original's vocabulary.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExactUnlinkOutcome {
    pub ok: bool,
    pub code: Option<&'static str>,
    /// Where the tree (or what we moved) now lives, when it is not at its
    /// original name and not removed.
    pub detached_path: Option<PathBuf>,
    /// A different object that took the original name meanwhile; never
    /// removed.
    pub retained_successor_path: Option<PathBuf>,
    /// The errno behind an `io_error` (`EPERM`, `EACCES`…), for messages.
    pub os_code: Option<&'static str>,
}

impl ExactUnlinkOutcome {
    fn removed() -> Self {
        ExactUnlinkOutcome {
            ok: true,
            code: None,
            detached_path: None,
            retained_successor_path: None,
            os_code: None,
        }
    }

    fn refused(code: &'static str) -> Self {
        ExactUnlinkOutcome {
            ok: false,
            code: Some(code),
            detached_path: None,
            retained_successor_path: None,
            os_code: None,
        }
    }

    /// A refusal for `error`, keeping its errno when it has one.
    pub fn failed(error: TreeError) -> Self {
        let mut outcome = Self::refused(error.code());
        if let TreeError::Io(errno) = error {
            outcome.os_code = Some(crate::sys::errno::errno_code(errno));
        }
        outcome
    }

    fn detached_at(mut self, path: PathBuf) -> Self {
        self.detached_path = Some(path);
        self
    }
}

/// Removes the tree at `path` only if it is still exactly `expected`; see
/// [`exact_remove_tree_at`].
pub fn exact_remove_tree(path: &Path, expected: &TreeSnapshot) -> ExactUnlinkOutcome {
    match open_parent(path) {
        Ok((parent, parent_path, name)) => {
            exact_remove_tree_at(parent.as_fd(), &parent_path, &name, expected)
        }
        Err(error) => ExactUnlinkOutcome::refused(error.code()),
    }
}

/// Removes `parent/name` only if it is still exactly `expected`:
/// 1. pre-verify the root identity (nothing touched on a mismatch);
/// 2. detach it to a fresh quarantine name with a no-replace rename (where
///    the rename is refused across layers, go to 4 in place);
/// 3. verify the detached tree in full; on any difference rename it back
///    (no-replace) and report `identity_mismatch` (if the original name was
///    taken meanwhile, the tree stays detached and the taker is reported as
///    `retained_successor_path`);
/// 4. delete it bottom-up, each entry re-observed just before its removal.
///
/// A refusal names in `detached_path` where the examined tree lives now
/// (its own name after a mismatch or a put-back, the quarantine name if it
/// had to stay there). `parent_path` is only used to word these paths.
pub fn exact_remove_tree_at(
    parent: BorrowedFd<'_>,
    parent_path: &Path,
    name: &OsStr,
    expected: &TreeSnapshot,
) -> ExactUnlinkOutcome {
    if !fsx::is_single_component(name) {
        return ExactUnlinkOutcome::refused(TreeError::InvalidRequest.code());
    }
    let examined = parent_path.join(name);

    // 1. Pre-verify. Holding the root open from here on keeps its inode
    //    number from being recycled for a successor while we work.
    let root = match open_root(parent, name) {
        Ok((root, stat)) if expected.is_root(&stat) => root,
        Ok(_) => return ExactUnlinkOutcome::refused("identity_mismatch").detached_at(examined),
        Err(TreeError::NotFound) => return ExactUnlinkOutcome::refused("not_found"),
        Err(error) => return ExactUnlinkOutcome::refused(judged_code(error)).detached_at(examined),
    };
    // Removers of one tree take turns (see `crate::lock::guard`): a second
    // remover acting on the same, now stale, view must not detach whatever
    // replaced the tree. After the lock, the name must still be the root.
    match fs::flock(&root, FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => {}
        Err(errno) if is_flock_unsupported(errno) => {}
        Err(_) => return ExactUnlinkOutcome::refused("busy"),
    }
    match fsx::stat_nofollow(parent, name) {
        Ok(stat) if expected.is_root(&stat) => {}
        Ok(_) => return ExactUnlinkOutcome::refused("identity_mismatch").detached_at(examined),
        Err(Errno::NOENT) => return ExactUnlinkOutcome::refused("not_found"),
        Err(_) => return ExactUnlinkOutcome::refused("io_error"),
    }

    // On Windows no `flock` made other removers wait (NTFS has no locks
    // on directories), and a detach renames by name: a successor a
    // reclaimer published since the check above would be what moves. There
    // the tree is removed in place, through the root it verifies, its own
    // directory last through that same handle (`fsx::remove_own_dir`).
    if cfg!(windows) {
        drop(root);
        return in_place(parent, name, expected, examined);
    }

    // 2. Detach: a successor that takes the original name from now on is
    //    never in reach of the deletion.
    let (removing, detach) = detach(parent, name);
    if !detach.ok {
        if detach.refused_with(Refusal::CrossDevice) {
            // 4, in place (see the module docs).
            return in_place(parent, name, expected, examined);
        }
        let code = if detach.refused_with(Refusal::DestinationExists) {
            "quarantine_collision"
        } else if detach.refused_with(Refusal::NotFound) {
            "not_found"
        } else if detach.refused_with(Refusal::IdentityMismatch)
            || detach.refused_with(Refusal::ReparsePoint)
            || detach.refused_with(Refusal::NotDirectory)
            || detach.refused_with(Refusal::NotRegularFile)
        {
            "identity_mismatch"
        } else {
            detach.code.unwrap_or("io_error")
        };
        let outcome = ExactUnlinkOutcome::refused(code);
        return if detach.mutation_state == rename::MutationState::NotCommitted {
            match code {
                "not_found" => outcome,
                _ => outcome.detached_at(examined),
            }
        } else {
            outcome.detached_at(parent_path.join(&removing))
        };
    }

    // 3. Verify what now sits at the private name, then 4. delete it.
    let detached_path = parent_path.join(&removing);
    match verify_in_place(parent, &removing, expected) {
        Ok((detached, detached_stat)) => {
            match delete_verified(parent, &removing, detached, &detached_stat, expected) {
                Ok(()) => ExactUnlinkOutcome::removed(),
                Err(error) => ExactUnlinkOutcome::failed(error).detached_at(detached_path),
            }
        }
        Err(code) => put_back(parent, &removing, name, code, detached_path, parent_path),
    }
}

/// [`remove_tree_in_place_at`] for an exact removal that does not detach:
/// a tree that is not what was judged is reported where it stands.
fn in_place(
    parent: BorrowedFd<'_>,
    name: &OsStr,
    expected: &TreeSnapshot,
    examined: PathBuf,
) -> ExactUnlinkOutcome {
    let outcome = remove_tree_in_place_at(parent, name, expected);
    match outcome.code {
        Some("identity_mismatch") => outcome.detached_at(examined),
        _ => outcome,
    }
}

/// Renames `name` to a fresh quarantine name, never over anything: a name
/// that is somehow taken (it is unique per use) gets one more fresh try.
fn detach(parent: BorrowedFd<'_>, name: &OsStr) -> (OsString, rename::NoReplaceOutcome) {
    let mut removing = quarantine_name(name);
    let mut outcome = rename::rename_no_replace_at(parent, name, parent, &removing);
    if outcome.refused_with(Refusal::DestinationExists) {
        removing = quarantine_name(name);
        outcome = rename::rename_no_replace_at(parent, name, parent, &removing);
    }
    (removing, outcome)
}

/// Removes `parent/name` in place (no detach) only if it is exactly
/// `expected`: for a tree that already sits at a private name, such as
/// `.removing` debris a crashed remover left behind.
pub fn remove_tree_in_place_at(
    parent: BorrowedFd<'_>,
    name: &OsStr,
    expected: &TreeSnapshot,
) -> ExactUnlinkOutcome {
    match remove_exact_in_place_at(parent, name, expected) {
        InPlace::Removed => ExactUnlinkOutcome::removed(),
        InPlace::NotExpected(code) => ExactUnlinkOutcome::refused(code),
        InPlace::Failed(error) => ExactUnlinkOutcome::failed(error),
    }
}

/// What [`remove_exact_in_place_at`] did.
#[derive(Debug)]
pub enum InPlace {
    Removed,
    /// What stands at the name is not exactly the expected tree (the code
    /// says how it differs, or why it could not be looked at): nothing was
    /// touched.
    NotExpected(&'static str),
    /// It was the expected tree, and deleting it failed part way.
    Failed(TreeError),
}

/// [`remove_tree_in_place_at`], telling a tree that is not the expected one
/// (nothing touched) from one whose deletion failed: one look at the tree
/// serves as both the identification and the removal's verification.
pub fn remove_exact_in_place_at(
    parent: BorrowedFd<'_>,
    name: &OsStr,
    expected: &TreeSnapshot,
) -> InPlace {
    if !fsx::is_single_component(name) {
        return InPlace::NotExpected(TreeError::InvalidRequest.code());
    }
    match verify_in_place(parent, name, expected) {
        Ok((root, root_stat)) => match delete_verified(parent, name, root, &root_stat, expected) {
            Ok(()) => InPlace::Removed,
            Err(error) => InPlace::Failed(error),
        },
        Err(code) => InPlace::NotExpected(code),
    }
}

/// Opens `parent/name` and checks the whole tree against `expected`. On
/// success returns the root descriptor the deletion must go through.
fn verify_in_place(
    parent: BorrowedFd<'_>,
    name: &OsStr,
    expected: &TreeSnapshot,
) -> Result<(OwnedFd, Stat), &'static str> {
    let (root, stat) = open_root(parent, name).map_err(judged_code)?;
    if !expected.is_root(&stat) {
        return Err("identity_mismatch");
    }
    let seen = snapshot_open_dir(root.as_fd(), &stat).map_err(judged_code)?;
    if !expected.same_tree_as(&seen) {
        return Err("identity_mismatch");
    }
    Ok((root, stat))
}

/// Moves a detached tree that failed verification back to its name, never
/// over anything that took the name meanwhile.
fn put_back(
    parent: BorrowedFd<'_>,
    removing: &OsStr,
    name: &OsStr,
    code: &'static str,
    detached_path: PathBuf,
    parent_path: &Path,
) -> ExactUnlinkOutcome {
    let back = rename::rename_no_replace_at(parent, removing, parent, name);
    if back.ok {
        return ExactUnlinkOutcome::refused(code).detached_at(parent_path.join(name));
    }
    if back.refused_with(Refusal::NotFound) {
        // The detached object vanished (someone else removed it): nothing of
        // ours is left at either name.
        return ExactUnlinkOutcome::refused(code);
    }
    let mut outcome = ExactUnlinkOutcome::refused(code).detached_at(detached_path);
    if back.refused_with(Refusal::DestinationExists) {
        outcome.retained_successor_path = Some(parent_path.join(name));
    }
    outcome
}

/// Deletes a verified tree bottom-up through `root`, then its own name.
fn delete_verified(
    parent: BorrowedFd<'_>,
    name: &OsStr,
    root: OwnedFd,
    root_stat: &Stat,
    expected: &TreeSnapshot,
) -> Result<(), TreeError> {
    let mut budget = Budget::new();
    let mut settle = FuseSettle::new();
    // Readied before anything inside goes: a root that could not go after
    // (held open without shared deletion, on Windows) keeps everything.
    let own = fsx::prepare_own_dir_removal(root.as_fd()).map_err(TreeError::Io)?;
    let end = delete_children(
        root.as_fd(),
        "",
        &expected.entries,
        1,
        &mut budget,
        &mut settle,
    )?;
    if end != expected.entries.len() {
        // Verification compared against a fresh pre-order snapshot, so this
        // cannot happen; refuse rather than remove a half-understood tree.
        return Err(TreeError::TreeChanged);
    }
    // `root` stays open until the end: while it is, its inode number cannot
    // be given to a successor, so the check below cannot be fooled.
    // The name must still be the root we emptied; rmdir removes only an
    // empty directory, so anything added meanwhile survives (ENOTEMPTY).
    // If the name is gone, another remover took the empty root we left
    // (a debris reaper removes an *empty* `<lock>.removing`): every entry
    // we verified is deleted, so the removal is complete, not changed.
    match fsx::stat_nofollow(parent, name) {
        Ok(now) if fsx::same_inode(&now, root_stat) => {}
        Err(Errno::NOENT) => return Ok(()),
        Ok(_) => return Err(TreeError::TreeChanged),
        Err(errno) => return Err(TreeError::Io(errno)),
    }
    let removed = match fsx::remove_own_dir(parent, name, own, &mut settle) {
        Ok(()) | Err(Errno::NOENT) => Ok(()),
        Err(Errno::NOTEMPTY | Errno::EXIST) => Err(TreeError::TreeChanged),
        Err(other) => Err(TreeError::Io(other)),
    };
    drop(root);
    removed
}

/// Deletes the entries of `entries[next..]` that lie inside `dir_rel`
/// (a contiguous run in pre-order), deepest first, through `dir`. Returns the
/// index of the first entry outside `dir_rel`.
fn delete_children(
    dir: BorrowedFd<'_>,
    dir_rel: &str,
    entries: &[TreeEntry],
    mut next: usize,
    budget: &mut Budget,
    settle: &mut FuseSettle,
) -> Result<usize, TreeError> {
    while let Some(expected) = entries.get(next)
        && is_inside(&expected.relative_path, dir_rel)
    {
        let name = OsStr::new(expected.name());
        match observe_child(dir, name, expected.relative_path.clone(), budget)? {
            Observed::File(seen) => {
                if !expected.same_object_as(&seen) {
                    return Err(TreeError::TreeChanged);
                }
                fsx::retry_interrupted(|| fs::unlinkat(dir, name, AtFlags::empty()))?;
                next += 1;
            }
            Observed::Directory(seen, child) => {
                if !expected.same_object_as(&seen) {
                    return Err(TreeError::TreeChanged);
                }
                let own = fsx::prepare_own_dir_removal(child.as_fd()).map_err(TreeError::Io)?;
                next = delete_children(
                    child.as_fd(),
                    &expected.relative_path,
                    entries,
                    next + 1,
                    budget,
                    settle,
                )?;
                // rmdir only removes an empty directory, but it must also be
                // the one we emptied, not one swapped in meanwhile.
                let now = fsx::stat_nofollow(dir, name).map_err(changed_unless_io)?;
                let still_ours = fsx::kind_of(&now) == FileType::Directory
                    && expected.same_object_as(&TreeEntry::observed(
                        expected.relative_path.clone(),
                        EntryKind::Directory,
                        &now,
                        None,
                    ));
                if !still_ours {
                    return Err(TreeError::TreeChanged);
                }
                fsx::remove_own_dir(dir, name, own, settle).map_err(|errno| match errno {
                    Errno::NOTEMPTY | Errno::EXIST => TreeError::TreeChanged,
                    other => TreeError::Io(other),
                })?;
            }
        }
    }
    Ok(next)
}

/// Whether `path` lies strictly inside the directory `dir_rel` (`""` is the
/// root, which contains everything else).
fn is_inside(path: &str, dir_rel: &str) -> bool {
    if dir_rel.is_empty() {
        return !path.is_empty();
    }
    path.len() > dir_rel.len() + 1
        && path.starts_with(dir_rel)
        && path.as_bytes()[dir_rel.len()] == b'/'
}

/// The code an exact removal reports for a tree it could not verify: an I/O
/// failure or a missing tree is said as such; any other refusal (a symlink,
/// FIFO, hard link, change…) means the object is not the one judged.
fn judged_code(error: TreeError) -> &'static str {
    match error {
        TreeError::NotFound => "not_found",
        TreeError::Io(_) => "io_error",
        _ => "identity_mismatch",
    }
}

/// Opens the parent of `path` no-follow, wording the refusal; returns it with
/// its path and the final component.
fn open_parent(path: &Path) -> Result<(OwnedFd, PathBuf, OsString), TreeError> {
    // NUL (and a final `.`/`..`) is refused before any syscall.
    let (parent_path, name) = fsx::split_final(path).map_err(|_| TreeError::InvalidRequest)?;
    let parent = fsx::open_dir_nofollow(&parent_path).map_err(|errno| match errno {
        Errno::INVAL => TreeError::InvalidRequest,
        Errno::NOENT => TreeError::NotFound,
        Errno::LOOP => TreeError::ReparsePoint,
        Errno::NOTDIR if fsx::has_symlinked_ancestor(&parent_path) => TreeError::ReparsePoint,
        Errno::NOTDIR => TreeError::NotDirectory,
        other => TreeError::Io(other),
    })?;
    Ok((parent, parent_path, name))
}

/// Opens the root directory `parent/name` no-follow, after classifying it,
/// checked to be the directory the name held a moment before: the
/// descriptor and its `fstat`.
fn open_root(parent: BorrowedFd<'_>, name: &OsStr) -> Result<(OwnedFd, Stat), TreeError> {
    let seen = fsx::stat_nofollow(parent, name).map_err(|errno| match errno {
        Errno::NOENT => TreeError::NotFound,
        other => TreeError::Io(other),
    })?;
    match fsx::kind_of(&seen) {
        FileType::Directory => {}
        FileType::Symlink => return Err(TreeError::ReparsePoint),
        _ => return Err(TreeError::NotDirectory),
    }
    let root = fsx::open_child_dir(parent, name).map_err(changed_unless_io)?;
    let stat = fs::fstat(&root)?;
    if !fsx::same_inode(&seen, &stat) {
        return Err(TreeError::TreeChanged);
    }
    Ok((root, stat))
}

/// An open failure right after `fstatat` saw a usable object means the name
/// changed in between (vanished, became a symlink, a socket…).
fn changed_unless_io(errno: Errno) -> TreeError {
    match errno {
        Errno::NOENT | Errno::LOOP | Errno::NOTDIR | Errno::NXIO | Errno::ISDIR => {
            TreeError::TreeChanged
        }
        other => TreeError::Io(other),
    }
}

/// What is left to spend while reading files.
struct Budget {
    file_bytes_left: u64,
}

impl Budget {
    fn new() -> Self {
        Budget {
            file_bytes_left: MAX_TOTAL_FILE_BYTES,
        }
    }
}

/// Snapshots the directory open at `root`, whose `fstat` is `stat`.
fn snapshot_open_dir(root: BorrowedFd<'_>, stat: &Stat) -> Result<TreeSnapshot, TreeError> {
    let mut walk = Walk {
        entries: Vec::new(),
        budget: Budget::new(),
    };
    walk.push(TreeEntry::observed(
        String::new(),
        EntryKind::Directory,
        stat,
        None,
    ))?;
    walk.directory(root, "", stat, 0)?;
    Ok(TreeSnapshot {
        root_dev: fsx::dev_of(stat),
        root_ino: fsx::ino_of(stat),
        entries: walk.entries,
    })
}

/// A depth-first, pre-order walk collecting entries.
struct Walk {
    entries: Vec<TreeEntry>,
    budget: Budget,
}

impl Walk {
    fn push(&mut self, entry: TreeEntry) -> Result<(), TreeError> {
        if self.entries.len() >= MAX_ENTRIES {
            return Err(TreeError::LimitExceeded);
        }
        self.entries.push(entry);
        Ok(())
    }

    /// Walks the children of `dir` (already recorded), whose `fstat` before
    /// the listing was `opened`.
    fn directory(
        &mut self,
        dir: BorrowedFd<'_>,
        dir_rel: &str,
        opened: &Stat,
        depth: usize,
    ) -> Result<(), TreeError> {
        let names = list_names(dir, MAX_ENTRIES - self.entries.len())?;
        for name in names {
            let relative_path = if dir_rel.is_empty() {
                name.clone()
            } else {
                format!("{dir_rel}/{name}")
            };
            match observe_child(dir, OsStr::new(&name), relative_path, &mut self.budget)? {
                Observed::File(entry) => self.push(entry)?,
                Observed::Directory(entry, child) => {
                    if depth + 1 > MAX_DEPTH {
                        return Err(TreeError::LimitExceeded);
                    }
                    let child_stat = fs::fstat(&child)?;
                    let child_rel = entry.relative_path.clone();
                    self.push(entry)?;
                    self.directory(child.as_fd(), &child_rel, &child_stat, depth + 1)?;
                }
            }
        }
        // A name added or removed while we walked moves the mtime.
        let after = fs::fstat(dir)?;
        if !fsx::same_inode(opened, &after) || fsx::mtime_ns(opened) != fsx::mtime_ns(&after) {
            return Err(TreeError::TreeChanged);
        }
        Ok(())
    }
}

/// The names in `dir` (without `.` and `..`), sorted bytewise, at most `room`
/// of them. Listed through a fresh descriptor (`openat(dir, ".")`), so the
/// caller's descriptor offset is untouched.
fn list_names(dir: BorrowedFd<'_>, room: usize) -> Result<Vec<String>, TreeError> {
    let mut names = Vec::new();
    // A description of its own (`Dir::read_from` does the same after
    // asking for `dir`'s flags, one `fcntl` more): the listing's offset is
    // never shared with another reader of `dir` (a held lock's watch).
    let own = fs::openat(
        dir,
        c".",
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    for entry in fs::Dir::new(own)? {
        let entry = entry?;
        let bytes = entry.file_name().to_bytes();
        if bytes == b"." || bytes == b".." {
            continue;
        }
        if names.len() >= room {
            return Err(TreeError::LimitExceeded);
        }
        let name = std::str::from_utf8(bytes).map_err(|_| TreeError::NotUtf8)?;
        names.push(name.to_owned());
    }
    // `str` ordering is bytewise on the UTF-8 encoding.
    names.sort_unstable();
    Ok(names)
}

/// The names (not `.`, `..`) read through `dir`'s own offset until `room`
/// are in and its read is used up, or to the end; `None` on an error, a
/// name that is not UTF-8, or more names than `room`.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn read_names_held(dir: BorrowedFd<'_>, room: usize) -> Option<Vec<String>> {
    use std::mem::MaybeUninit;
    let mut buffer = [MaybeUninit::<u8>::uninit(); 1024];
    let mut listing = fs::RawDir::new(dir, &mut buffer);
    let mut names = Vec::with_capacity(room);
    while let Some(entry) = listing.next() {
        let entry = entry.ok()?;
        let bytes = entry.file_name().to_bytes();
        if bytes != b"." && bytes != b".." {
            if names.len() == room {
                return None;
            }
            names.push(std::str::from_utf8(bytes).ok()?.to_owned());
        }
        if listing.is_buffer_empty() && names.len() == room {
            break;
        }
    }
    Some(names)
}

/// One child, observed: a file with its digest, or a directory with the
/// descriptor it was observed through.
enum Observed {
    File(TreeEntry),
    Directory(TreeEntry, OwnedFd),
}

/// Observes `dir/name`: classify without following or opening, then open the
/// kinds we accept and check the descriptor is the object classified.
fn observe_child(
    dir: BorrowedFd<'_>,
    name: &OsStr,
    relative_path: String,
    budget: &mut Budget,
) -> Result<Observed, TreeError> {
    let seen = fsx::stat_nofollow(dir, name).map_err(changed_unless_io)?;
    match fsx::kind_of(&seen) {
        FileType::Symlink => Err(TreeError::ReparsePoint),
        FileType::Directory => {
            let child = fsx::open_child_dir(dir, name).map_err(changed_unless_io)?;
            let stat = fs::fstat(&child)?;
            if !fsx::same_inode(&seen, &stat) {
                return Err(TreeError::TreeChanged);
            }
            let entry = TreeEntry::observed(relative_path, EntryKind::Directory, &stat, None);
            Ok(Observed::Directory(entry, child))
        }
        FileType::RegularFile => observe_file(dir, name, relative_path, &seen, budget),
        // FIFO, socket, devices: never opened.
        _ => Err(TreeError::UnsupportedEntry),
    }
}

/// Reads and digests the regular file `dir/name` that `fstatat` saw as
/// `seen`, checking the metadata did not move before, during or after.
fn observe_file(
    dir: BorrowedFd<'_>,
    name: &OsStr,
    relative_path: String,
    seen: &Stat,
    budget: &mut Budget,
) -> Result<Observed, TreeError> {
    if fsx::nlink_of(seen) != 1 {
        return Err(TreeError::HardLinkUnsupported);
    }
    let size = fsx::size_of(seen);
    if size > MAX_FILE_BYTES || size > budget.file_bytes_left {
        return Err(TreeError::LimitExceeded);
    }
    let file = fs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY,
        Mode::empty(),
    )
    .map_err(changed_unless_io)?;
    // MAX_FILE_BYTES is 1 MiB: it fits in usize on every platform we build.
    let limit = usize::try_from(MAX_FILE_BYTES).unwrap_or(usize::MAX);
    let read = fsx::read_fd_bounded(file.as_fd(), limit).map_err(|refusal| match refusal {
        fsx::ReadRefusal::Os(errno) => TreeError::Io(errno),
        // Not regular any more, grown past the limit or resized mid-read:
        // the name no longer holds what fstatat saw.
        _ => TreeError::TreeChanged,
    })?;
    let after = fs::fstat(&file)?;
    let as_classified = TreeEntry::observed(relative_path.clone(), EntryKind::File, seen, None);
    let as_opened = TreeEntry::observed(relative_path.clone(), EntryKind::File, &read.stat, None);
    let as_read = TreeEntry::observed(relative_path.clone(), EntryKind::File, &after, None);
    if !as_classified.same_object_as(&as_opened) || !as_opened.same_object_as(&as_read) {
        return Err(TreeError::TreeChanged);
    }
    budget.file_bytes_left -= size;
    let digest = Some(sha256_hex(&read.bytes));
    Ok(Observed::File(TreeEntry::observed(
        relative_path,
        EntryKind::File,
        &after,
        digest,
    )))
}

/// Lowercase hex SHA-256.
pub fn sha256_hex(bytes: &[u8]) -> String {
    // By hand, not `write!("{:02x}")` per byte: the formatter's 32 calls
    // cost more than the hash of a record (each release digests one).
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let digest = Sha256::digest(bytes);
    let mut hex = String::with_capacity(64);
    for byte in digest.iter() {
        hex.push(char::from(DIGITS[usize::from(byte >> 4)]));
        hex.push(char::from(DIGITS[usize::from(byte & 0x0f)]));
    }
    hex
}

// Most of these build POSIX fixtures (symlinks, FIFOs, modes, a directory's
// flock, removing a directory its writer holds open): those are unix-only,
// each marked; the rest run on Windows too (npm run test:windows). Helpers
// only the unix ones use are unused there.
#[cfg(test)]
#[cfg_attr(windows, allow(dead_code, unused_imports))]
mod tests {
    use super::*;
    use crate::testutil::tempdir;
    #[cfg(unix)]
    use std::os::unix::ffi::OsStrExt;
    #[cfg(unix)]
    use std::os::unix::fs::MetadataExt;
    use std::time::{Duration, Instant};

    /// `lock/` with `info` and a nested `sub/deep` file.
    fn lock_tree(root: &Path) -> PathBuf {
        let lock = root.join("f.lock");
        std::fs::create_dir_all(lock.join("sub")).unwrap();
        std::fs::write(lock.join("info"), b"{\"pid\":1}").unwrap();
        std::fs::write(lock.join("sub/deep"), b"deep").unwrap();
        lock
    }

    fn code_of(path: &Path) -> Option<&'static str> {
        snapshot_tree(path).err().map(TreeError::code)
    }

    #[test]
    fn sha256_hex_is_the_lowercase_digest() {
        // FIPS 180-2's examples: what `sha256sum` and the TypeScript module print.
        assert_eq!(
            sha256_hex(b""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    fn assert_intact(lock: &Path) {
        assert_eq!(std::fs::read(lock.join("info")).unwrap(), b"{\"pid\":1}");
        assert_eq!(std::fs::read(lock.join("sub/deep")).unwrap(), b"deep");
        let parent = lock.parent().unwrap();
        assert_eq!(
            crate::testutil::listing(parent),
            [lock.file_name().unwrap().to_string_lossy()],
            "nothing may be left detached"
        );
    }

    #[cfg(unix)]
    #[test]
    fn snapshot_is_sorted_pre_order_with_digests() {
        let root = tempdir("order");
        let lock = root.join("t");
        std::fs::create_dir_all(lock.join("b/d")).unwrap();
        std::fs::write(lock.join("a"), b"abc").unwrap();
        std::fs::write(lock.join("b/c"), b"").unwrap();
        std::fs::write(lock.join("b/d/e"), b"e").unwrap();
        std::fs::write(lock.join("B"), b"upper sorts first").unwrap();
        let snapshot = snapshot_tree(&lock).unwrap();
        let paths: Vec<_> = snapshot
            .entries
            .iter()
            .map(|e| e.relative_path.as_str())
            .collect();
        assert_eq!(paths, ["", "B", "a", "b", "b/c", "b/d", "b/d/e"]);
        let meta = std::fs::metadata(&lock).unwrap();
        assert_eq!(
            (snapshot.root_dev, snapshot.root_ino),
            (meta.dev(), meta.ino())
        );
        let a = &snapshot.entries[2];
        assert_eq!(a.kind, EntryKind::File);
        assert_eq!(
            a.sha256.as_deref(),
            Some("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        );
        let a_meta = std::fs::metadata(lock.join("a")).unwrap();
        assert_eq!((a.ino, a.size, a.nlink), (a_meta.ino(), 3, 1));
        assert_eq!(
            a.mtime_ns,
            i128::from(a_meta.mtime()) * 1_000_000_000 + i128::from(a_meta.mtime_nsec())
        );
        assert_eq!(snapshot.entries[3].kind, EntryKind::Directory);
        assert_eq!(snapshot.entries[3].sha256, None);
        assert!(snapshot.same_tree_as(&snapshot_tree(&lock).unwrap()));
        std::fs::remove_dir_all(root).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn snapshot_refuses_symlinks_at_the_root_inside_and_above() {
        let root = tempdir("symlink");
        let lock = lock_tree(&root);
        std::os::unix::fs::symlink(&lock, root.join("alias")).unwrap();
        assert_eq!(code_of(&root.join("alias")), Some("reparse_point"));
        assert_eq!(code_of(&root.join("alias/sub")), Some("reparse_point"));
        std::os::unix::fs::symlink("/etc/passwd", lock.join("sub/link")).unwrap();
        assert_eq!(code_of(&lock), Some("reparse_point"));
        std::fs::remove_dir_all(root).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn snapshot_refuses_fifo_without_blocking_and_sockets() {
        let root = tempdir("special");
        let lock = lock_tree(&root);
        crate::testutil::make_fifo(&lock.join("fifo"));
        let started = Instant::now();
        assert_eq!(code_of(&lock), Some("unsupported_entry"));
        assert!(started.elapsed() < Duration::from_secs(5));
        std::fs::remove_file(lock.join("fifo")).unwrap();

        let _listener = std::os::unix::net::UnixListener::bind(lock.join("sock")).unwrap();
        assert_eq!(code_of(&lock), Some("unsupported_entry"));
        std::fs::remove_dir_all(root).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn snapshot_refuses_non_utf8_names_and_hard_links() {
        let root = tempdir("names");
        let lock = lock_tree(&root);
        let odd = lock.join(OsStr::from_bytes(b"bad-\xff"));
        std::fs::write(&odd, b"x").unwrap();
        assert_eq!(code_of(&lock), Some("not_utf8"));
        std::fs::remove_file(&odd).unwrap();

        std::fs::hard_link(lock.join("info"), root.join("outside")).unwrap();
        assert_eq!(code_of(&lock), Some("hard_link_unsupported"));
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn snapshot_root_codes() {
        let root = tempdir("root");
        assert_eq!(code_of(&root.join("missing")), Some("not_found"));
        assert_eq!(code_of(&root.join("missing/below")), Some("not_found"));
        std::fs::write(root.join("file"), b"x").unwrap();
        assert_eq!(code_of(&root.join("file")), Some("not_directory"));
        assert_eq!(code_of(Path::new("/tmp/a\0b")), Some("invalid_request"));
        std::fs::remove_dir_all(root).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn snapshot_limits() {
        let root = tempdir("limits");
        let big = root.join("big");
        std::fs::create_dir(&big).unwrap();
        let file = std::fs::File::create(big.join("huge")).unwrap();
        file.set_len(MAX_FILE_BYTES + 1).unwrap();
        assert_eq!(code_of(&big), Some("limit_exceeded"));

        // 17 files of exactly 1 MiB (sparse): each allowed, the sum is not.
        let total = root.join("total");
        std::fs::create_dir(&total).unwrap();
        for i in 0..17 {
            let file = std::fs::File::create(total.join(format!("f{i:02}"))).unwrap();
            file.set_len(MAX_FILE_BYTES).unwrap();
        }
        assert_eq!(code_of(&total), Some("limit_exceeded"));
        std::fs::remove_file(total.join("f16")).unwrap();
        assert!(snapshot_tree(&total).is_ok(), "exactly 16 MiB is allowed");

        let many = root.join("many");
        std::fs::create_dir(&many).unwrap();
        for i in 0..MAX_ENTRIES {
            std::fs::write(many.join(format!("e{i}")), b"").unwrap();
        }
        assert_eq!(code_of(&many), Some("limit_exceeded"));
        std::fs::remove_file(many.join("e0")).unwrap();
        assert_eq!(snapshot_tree(&many).unwrap().entries.len(), MAX_ENTRIES);

        let deep = root.join("deep");
        let mut cursor = deep.clone();
        for _ in 0..=MAX_DEPTH {
            cursor.push("d");
        }
        std::fs::create_dir_all(&cursor).unwrap();
        assert_eq!(code_of(&deep), Some("limit_exceeded"));
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn exact_removal_removes_exactly_the_snapshot() {
        let root = tempdir("remove");
        let lock = lock_tree(&root);
        let snapshot = snapshot_tree(&lock).unwrap();
        let outcome = exact_remove_tree(&lock, &snapshot);
        assert_eq!(outcome, ExactUnlinkOutcome::removed());
        assert_eq!(std::fs::read_dir(&root).unwrap().count(), 0);
        assert_eq!(exact_remove_tree(&lock, &snapshot).code, Some("not_found"));
        std::fs::remove_dir_all(root).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn exact_removal_deletes_nothing_after_a_change() {
        type Change = fn(&Path);
        let changes: [(&str, Change); 4] = [
            ("same size, other bytes", |lock| {
                std::fs::write(lock.join("sub/deep"), b"DEEP").unwrap()
            }),
            ("file added", |lock| {
                std::fs::write(lock.join("extra"), b"").unwrap()
            }),
            ("byte-identical copy", |lock| {
                std::fs::write(lock.join("copy"), b"{\"pid\":1}").unwrap();
                std::fs::rename(lock.join("copy"), lock.join("info")).unwrap();
            }),
            ("fifo added", |lock| {
                crate::testutil::make_fifo(&lock.join("sub/fifo"));
            }),
        ];
        for (what, change) in changes {
            let root = tempdir("changed");
            let lock = lock_tree(&root);
            let snapshot = snapshot_tree(&lock).unwrap();
            change(&lock);
            let outcome = exact_remove_tree(&lock, &snapshot);
            assert_eq!(outcome.code, Some("identity_mismatch"), "{what}");
            // Where the examined tree lives: back at its own name.
            assert_eq!(
                outcome.detached_path.as_deref(),
                Some(lock.as_path()),
                "{what}"
            );
            assert!(
                lock.join("info").exists() && lock.join("sub/deep").exists(),
                "{what}"
            );
            assert_eq!(crate::testutil::listing(&root), ["f.lock"], "{what}");
            std::fs::remove_dir_all(root).unwrap();
        }
    }

    // The fixture removes a tree whose files it holds open (Windows refuses).
    #[cfg(unix)]
    #[test]
    fn exact_removal_spares_a_successor() {
        let root = tempdir("successor");
        let lock = lock_tree(&root);
        let snapshot = snapshot_tree(&lock).unwrap();
        // Keep the original inodes referenced so the successor cannot reuse
        // their numbers, then replace the tree with byte-identical content.
        let _pins = [
            fsx::open_dir_nofollow(&lock).unwrap(),
            fsx::open_dir_nofollow(&lock.join("sub")).unwrap(),
        ];
        let _info = std::fs::File::open(lock.join("info")).unwrap();
        let _deep = std::fs::File::open(lock.join("sub/deep")).unwrap();
        std::fs::remove_dir_all(&lock).unwrap();
        lock_tree(&root);
        let outcome = exact_remove_tree(&lock, &snapshot);
        assert_eq!(outcome.code, Some("identity_mismatch"));
        assert_intact(&lock);
        std::fs::remove_dir_all(root).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn exact_removal_ignores_whatever_squats_the_old_fixed_quarantine_name() {
        for squat in ["dir", "file", "symlink"] {
            let root = tempdir("squatter");
            let lock = lock_tree(&root);
            let snapshot = snapshot_tree(&lock).unwrap();
            let squatter = root.join("f.lock.removing");
            match squat {
                "dir" => {
                    std::fs::create_dir(&squatter).unwrap();
                    std::fs::write(squatter.join("notes.txt"), b"mine").unwrap();
                }
                "file" => std::fs::write(&squatter, b"mine").unwrap(),
                _ => std::os::unix::fs::symlink("/etc", &squatter).unwrap(),
            }
            assert_eq!(
                exact_remove_tree(&lock, &snapshot),
                ExactUnlinkOutcome::removed()
            );
            assert_eq!(
                crate::testutil::listing(&root),
                ["f.lock.removing"],
                "{squat}"
            );
            std::fs::remove_dir_all(root).unwrap();
        }
    }

    #[test]
    fn quarantine_names_are_unique_per_use() {
        let name = OsStr::new("f.lock");
        let (first, second) = (quarantine_name(name), quarantine_name(name));
        assert_ne!(first, second);
        assert_eq!(
            fsx::parse_tagged_name(&first, QUARANTINE_TAG),
            Some((name, std::process::id()))
        );
    }

    #[cfg(unix)]
    #[test]
    fn exact_removal_refuses_a_symlink_at_the_path() {
        let root = tempdir("symlinked");
        let lock = lock_tree(&root);
        let snapshot = snapshot_tree(&lock).unwrap();
        std::fs::rename(&lock, root.join("real")).unwrap();
        std::os::unix::fs::symlink(root.join("real"), &lock).unwrap();
        let outcome = exact_remove_tree(&lock, &snapshot);
        assert_eq!(outcome.code, Some("identity_mismatch"));
        assert!(root.join("real/info").exists());
        assert!(
            std::fs::symlink_metadata(&lock)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        std::fs::remove_dir_all(root).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn put_back_never_replaces_a_successor() {
        let root = tempdir("put-back");
        let lock = lock_tree(&root);
        std::fs::rename(&lock, root.join("f.lock.removing")).unwrap();
        std::fs::create_dir(&lock).unwrap();
        let parent = fsx::open_dir_nofollow(&root).unwrap();
        let outcome = put_back(
            parent.as_fd(),
            OsStr::new("f.lock.removing"),
            OsStr::new("f.lock"),
            "identity_mismatch",
            root.join("f.lock.removing"),
            &root,
        );
        assert_eq!(outcome.code, Some("identity_mismatch"));
        assert_eq!(outcome.detached_path, Some(root.join("f.lock.removing")));
        assert_eq!(outcome.retained_successor_path, Some(lock.clone()));
        assert_eq!(std::fs::read_dir(&lock).unwrap().count(), 0);
        assert!(root.join("f.lock.removing/info").exists());
        std::fs::remove_dir_all(root).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn deletion_rechecks_each_file_just_before_unlinking_it() {
        let root = tempdir("recheck");
        let lock = root.join("one");
        std::fs::create_dir(&lock).unwrap();
        std::fs::write(lock.join("info"), b"v1").unwrap();
        let stale = snapshot_tree(&lock).unwrap();
        std::fs::write(lock.join("info"), b"v2").unwrap();
        let parent = fsx::open_dir_nofollow(&root).unwrap();
        let root_fd = fsx::open_dir_nofollow(&lock).unwrap();
        let root_stat = fs::fstat(&root_fd).unwrap();
        let result = delete_verified(
            parent.as_fd(),
            OsStr::new("one"),
            root_fd,
            &root_stat,
            &stale,
        );
        assert_eq!(result, Err(TreeError::TreeChanged));
        assert_eq!(std::fs::read(lock.join("info")).unwrap(), b"v2");
        std::fs::remove_dir_all(root).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn deletion_is_complete_when_another_remover_takes_the_emptied_root() {
        // Two releasers race on `<lock>.removing`: one empties it, the other
        // reaps the empty directory before the first one's rmdir. The first
        // removal must still succeed (its whole tree is gone), not report a
        // changed tree that a release would then surface as EMISSING.
        let root = tempdir("emptied-root-taken");
        let lock = root.join("one");
        std::fs::create_dir(&lock).unwrap();
        std::fs::write(lock.join("info"), b"v1").unwrap();
        let expected = snapshot_tree(&lock).unwrap();
        let parent = fsx::open_dir_nofollow(&root).unwrap();
        let root_fd = fsx::open_dir_nofollow(&lock).unwrap();
        let root_stat = fs::fstat(&root_fd).unwrap();
        // The other remover's view: the name goes away while we hold the fd.
        std::fs::rename(&lock, root.join("elsewhere")).unwrap();
        let result = delete_verified(
            parent.as_fd(),
            OsStr::new("one"),
            root_fd,
            &root_stat,
            &expected,
        );
        assert_eq!(result, Ok(()));
        assert_eq!(
            std::fs::read_dir(root.join("elsewhere")).unwrap().count(),
            0
        );
        std::fs::remove_dir_all(root).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn in_place_removal_clears_verified_debris_only() {
        let root = tempdir("in-place");
        let debris = root.join("f.lock.removing");
        std::fs::create_dir(&debris).unwrap();
        std::fs::write(debris.join("info"), b"old").unwrap();
        let snapshot = snapshot_tree(&debris).unwrap();
        let parent = fsx::open_dir_nofollow(&root).unwrap();
        let name = OsStr::new("f.lock.removing");

        std::fs::write(debris.join("late"), b"").unwrap();
        let refused = remove_tree_in_place_at(parent.as_fd(), name, &snapshot);
        assert_eq!(refused.code, Some("identity_mismatch"));
        assert!(debris.join("info").exists() && debris.join("late").exists());

        std::fs::remove_file(debris.join("late")).unwrap();
        let removed = remove_tree_in_place_at(parent.as_fd(), name, &snapshot);
        assert_eq!(removed, ExactUnlinkOutcome::removed());
        assert!(!debris.exists());
        let missing = remove_tree_in_place_at(parent.as_fd(), name, &snapshot);
        assert_eq!(missing.code, Some("not_found"));
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn relative_path_helpers() {
        assert!(is_inside("a", ""));
        assert!(!is_inside("", ""));
        assert!(is_inside("a/b", "a"));
        assert!(!is_inside("ab/c", "a"));
        assert!(!is_inside("a", "a"));
        let entry = |path: &str| TreeEntry {
            relative_path: path.to_owned(),
            kind: EntryKind::File,
            dev: 1,
            ino: 2,
            nlink: 1,
            size: 0,
            mtime_ns: 0,
            ctime_ns: 0,
            sha256: None,
        };
        assert_eq!(entry("a/b/c").name(), "c");
        assert_eq!(entry("top").name(), "top");
    }
}
