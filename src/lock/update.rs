//! Safe writes under a held lock (`updateFile`): read the locked file,
//! then replace it whole, atomically and durably.
//!
//! A file changed in place (`writeFile` truncates, then writes) is empty or
//! half written for a moment, and a crash in that moment leaves it so: the
//! lock keeps writers out of each other's way, never readers out of a torn
//! file. Here the new content goes to a temp file in the same directory,
//! `.<name>.upd.<pid>.<uuid>` (hidden, unique per use, `flock`ed by its
//! writer until it is renamed), is flushed (`fsync`), gets the old file's
//! mode and, where permitted, owner, and is renamed over the name: whoever
//! opens the name sees the old file or the whole new one, and open
//! descriptors keep the old one. Then the directory is flushed, so the
//! rename itself survives a crash. Just before the rename the lock must
//! still stand as this generation published it: a lock lost meanwhile
//! (removed by hand, replaced) renames nothing.
//!
//! A symlink at the name is followed (up to 40 links): the file it leads to
//! is replaced in its own directory, and the link kept.
//!
//! A writer killed between the temp's creation and its rename leaves the
//! temp: it is removed, on the proof debris asks for (the pid in its name
//! gone here, and its `flock` free: no live writer, in any pid namespace,
//! holds it; where the filesystem has no `flock`, the pid gone and the file
//! untouched for a minute), by the first update of that file in a process,
//! by any update whose acquisition reclaimed a dead holder (only a holder
//! writes a temp), and by `exactlock gc`.

use std::collections::HashSet;
use std::ffi::{OsStr, OsString};
use std::path::Path;
use std::sync::{Mutex, OnceLock};

use crate::sys::os::fd::{AsFd, BorrowedFd, OwnedFd};
use crate::sys::os::fs::{self, AtFlags, FileType, FlockOperation, Mode, OFlags};
use crate::sys::os::io::Errno;

use crate::fs::fsx::{self, ReadRefusal};
use crate::lock::lost::{self, Standing};
use crate::lock::table::Generation;
use crate::sys::errno::{errno_code, is_flock_unsupported};

/// The tag of temp names: `.<name>.upd.<pid>.<uuid>`.
pub const TEMP_TAG: &str = "upd";

/// How many symlinks are followed from the name, as the kernel's own limit.
const MAX_LINKS: usize = 40;

/// How long a temp of a dead writer is left untouched before it is removed
/// where the filesystem has no `flock` to prove its writer gone at once.
const UNFLOCKED_TEMP_AGE_NS: i128 = 60_000_000_000;

/// The step an update was at when it failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    Read,
    Write,
    Fsync,
    Rename,
    DirSync,
}

impl Step {
    pub fn as_str(self) -> &'static str {
        match self {
            Step::Read => "read",
            Step::Write => "write",
            Step::Fsync => "fsync",
            Step::Rename => "rename",
            Step::DirSync => "dirsync",
        }
    }
}

/// Why an update failed, at which step, and whether its new content was
/// committed (renamed over the name) before it did.
#[derive(Debug, PartialEq, Eq)]
pub struct UpdateError {
    pub step: Step,
    /// An errno name, or `EFBIG` (too large to read), `EINVAL` (not a
    /// regular file), `EMISSING`/`EOWNERCHANGED` (the lock was lost).
    pub code: &'static str,
    pub committed: bool,
}

impl UpdateError {
    fn at(step: Step, errno: Errno) -> Self {
        UpdateError {
            step,
            code: errno_code(errno),
            committed: false,
        }
    }
}

/// The file an update replaces: its directory and name (past any symlink),
/// and what it was when read.
pub struct Target {
    dir: OwnedFd,
    name: OsString,
    /// The mode, uid and gid of the file read; `None` when there was none.
    seen: Option<(u32, u32, u32)>,
    /// Whether it is in the lock's own directory (no symlink led elsewhere).
    in_lock_dir: bool,
}

impl Target {
    /// Whether its commit may run on the caller's thread, where the lock's
    /// release may: in the lock's own directory only (a symlink may lead to
    /// a network mount).
    pub fn commits_inline(&self, generation: &Generation) -> bool {
        self.in_lock_dir && generation.releases_inline
    }
}

/// Whether `generation`'s file may be read on the caller's thread: its lock
/// earned the inline path, the name is no symlink (which may lead to a
/// network mount), and no sweep of dead writers' temps is due (a listing of
/// the whole directory).
pub fn reads_inline(generation: &Generation) -> bool {
    if !generation.releases_inline || generation.reclaimed {
        return false;
    }
    let parent = generation.parent.as_fd();
    let name = file_name_of(&generation.lock_name);
    let is_link = fsx::stat_nofollow(parent, &name)
        .is_ok_and(|stat| fsx::kind_of(&stat) == FileType::Symlink);
    !is_link && !sweep_due(parent, &name)
}

/// Reads the file `generation` locks (its lock name less `.lock`), at most
/// `max_bytes`: the target to commit to, and its bytes (`None`: no file).
/// Temps of dead writers of that file are removed first when it is due
/// (see the module docs): the first update of it in this process, or one
/// whose lock was taken from a dead holder (`reclaimed`).
pub fn read(
    generation: &Generation,
    reclaimed: bool,
    max_bytes: usize,
) -> Result<(Target, Option<Vec<u8>>), UpdateError> {
    let file_name = file_name_of(&generation.lock_name);
    let (dir, name) = resolve(generation.parent.as_fd(), &file_name)
        .map_err(|errno| UpdateError::at(Step::Read, errno))?;
    let in_lock_dir = name == file_name
        && fsx::dir_attributes(dir.as_fd()).is_ok_and(|(identity, _)| {
            identity.dev == generation.key.parent.dev && identity.ino == generation.key.parent.ino
        });
    if sweep_due(dir.as_fd(), &name) || reclaimed {
        mark_swept(dir.as_fd(), &name);
        sweep(dir.as_fd(), &name);
    }
    match fsx::read_regular_bounded(dir.as_fd(), &name, max_bytes) {
        Ok(read) => {
            #[cfg(unix)]
            #[allow(
                clippy::useless_conversion,
                reason = "st_mode is u32 on Linux, u16 on macOS"
            )]
            let seen = (
                u32::from(read.stat.st_mode) & 0o7777,
                read.stat.st_uid,
                read.stat.st_gid,
            );
            #[cfg(not(unix))]
            let seen = (0o666, 0, 0);
            let target = Target {
                dir,
                name,
                seen: Some(seen),
                in_lock_dir,
            };
            Ok((target, Some(read.bytes)))
        }
        Err(ReadRefusal::Os(Errno::NOENT)) => Ok((
            Target {
                dir,
                name,
                seen: None,
                in_lock_dir,
            },
            None,
        )),
        Err(refusal) => Err(UpdateError {
            step: Step::Read,
            code: match refusal {
                ReadRefusal::NotRegular => "EINVAL",
                ReadRefusal::TooLarge => "EFBIG",
                ReadRefusal::Changed => "EAGAIN",
                ReadRefusal::Os(errno) => errno_code(errno),
            },
            committed: false,
        }),
    }
}

/// How a commit is made.
pub struct Commit<'a> {
    /// The new content; `None` deletes the file.
    pub content: Option<&'a [u8]>,
    /// `fsync` the file before its rename and the directory after.
    pub durable: bool,
    /// A new file's mode; `None`: `0o666` less the umask.
    pub new_mode: Option<u32>,
    /// Give the new file the old one's owner (where this process may).
    pub keep_owner: bool,
}

/// What a commit did.
#[derive(Debug, PartialEq, Eq)]
pub struct Committed {
    /// `false` when the old file's owner could not be given to the new one
    /// (not root, and not the owner): the new file is this process's.
    pub owner_kept: bool,
    /// Whether a file was deleted (`content: None`).
    pub deleted: bool,
}

/// Replaces (or deletes) `target` under `generation`'s lock (see the module
/// docs). Nothing is renamed unless the lock still stands as published.
pub fn commit(
    generation: &Generation,
    target: &Target,
    commit: &Commit<'_>,
) -> Result<Committed, UpdateError> {
    let Some(content) = commit.content else {
        return delete(generation, target, commit.durable);
    };
    let temp = fsx::tagged_name(&hidden(&target.name), TEMP_TAG);
    let file = fs::openat(
        &target.dir,
        &temp,
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        match (&target.seen, commit.new_mode) {
            (None, None) => Mode::from_raw_mode(0o666),
            _ => Mode::RUSR | Mode::WUSR,
        },
    )
    .map_err(|errno| UpdateError::at(Step::Write, errno))?;
    // Until its rename, the temp is ours alone; removed on every way out.
    let outcome = write_temp(generation, target, commit, &file, content)
        .and_then(|owner_kept| rename_over(generation, target, &temp, commit.durable, owner_kept));
    if outcome.as_ref().is_err_and(|error| !error.committed) {
        let _ = fs::unlinkat(&target.dir, &temp, AtFlags::empty());
    }
    outcome
}

/// Writes `content` into the temp `file`, with the old file's owner and
/// mode (or a new file's), flushed when durable; whether the owner was kept.
fn write_temp(
    generation: &Generation,
    target: &Target,
    commit: &Commit<'_>,
    file: &OwnedFd,
    content: &[u8],
) -> Result<bool, UpdateError> {
    let write = |errno| UpdateError::at(Step::Write, errno);
    match fs::flock(file, FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => {}
        Err(errno) if is_flock_unsupported(errno) => {}
        Err(errno) => return Err(write(errno)),
    }
    crate::sys::faults::pause("update.write", &generation.lock_name);
    fsx::write_all(file.as_fd(), content, 0).map_err(write)?;
    let owner_kept = match target.seen {
        Some((mode, uid, gid)) => {
            let kept = !commit.keep_owner || give_owner(file, uid, gid).map_err(write)?;
            // A set-id bit is dropped with an owner not kept: it would run as
            // this process's user, which the old file did not.
            let mode = if kept { mode } else { mode & !0o6000 };
            fs::fchmod(file, Mode::from_raw_mode(mode as _)).map_err(write)?;
            kept
        }
        None => {
            if let Some(mode) = commit.new_mode {
                fs::fchmod(file, Mode::from_raw_mode(mode as _)).map_err(write)?;
            }
            true
        }
    };
    if commit.durable {
        fsx::flush(file.as_fd()).map_err(|errno| UpdateError::at(Step::Fsync, errno))?;
    }
    crate::sys::faults::pause("update.synced", &generation.lock_name);
    Ok(owner_kept)
}

/// Gives `file` the owner `uid`:`gid` unless it has them already: `true`
/// when it has them after. Without the right (`EPERM`: not root, not the
/// owner) the group alone is tried (a group this process is in), and
/// `false` told.
#[cfg(unix)]
fn give_owner(file: &OwnedFd, uid: u32, gid: u32) -> Result<bool, Errno> {
    use rustix::fs::{Gid, Uid};
    let now = fs::fstat(file)?;
    if (now.st_uid, now.st_gid) == (uid, gid) {
        return Ok(true);
    }
    let (uid, gid) = (Uid::from_raw(uid), Gid::from_raw(gid));
    match fs::fchown(file, Some(uid), Some(gid)) {
        Ok(()) => Ok(true),
        Err(Errno::PERM) => {
            let _ = fs::fchown(file, None, Some(gid));
            Ok(false)
        }
        Err(errno) => Err(errno),
    }
}

#[cfg(not(unix))]
fn give_owner(_file: &OwnedFd, _uid: u32, _gid: u32) -> Result<bool, Errno> {
    Ok(true)
}

/// Renames the written temp over the name if the lock still stands, then
/// flushes the directory.
fn rename_over(
    generation: &Generation,
    target: &Target,
    temp: &OsStr,
    durable: bool,
    owner_kept: bool,
) -> Result<Committed, UpdateError> {
    still_held(generation)?;
    fs::renameat(&target.dir, temp, &target.dir, &target.name)
        .map_err(|errno| UpdateError::at(Step::Rename, errno))?;
    crate::sys::faults::pause("update.renamed", &generation.lock_name);
    sync_dir(target, durable)?;
    Ok(Committed {
        owner_kept,
        deleted: false,
    })
}

/// Deletes the target (`null` from the updater), if the lock still stands.
fn delete(
    generation: &Generation,
    target: &Target,
    durable: bool,
) -> Result<Committed, UpdateError> {
    still_held(generation)?;
    let deleted = match fs::unlinkat(&target.dir, &target.name, AtFlags::empty()) {
        Ok(()) => true,
        Err(Errno::NOENT) => false,
        Err(errno) => return Err(UpdateError::at(Step::Rename, errno)),
    };
    if deleted {
        sync_dir(target, durable)?;
    }
    Ok(Committed {
        owner_kept: true,
        deleted,
    })
}

/// The lock stands as `generation` published it; else what happened to it.
fn still_held(generation: &Generation) -> Result<(), UpdateError> {
    match lost::standing(generation) {
        Standing::Ours => Ok(()),
        Standing::Lost(loss) => Err(UpdateError {
            step: Step::Rename,
            code: match loss {
                lost::Loss::Removed => "EMISSING",
                lost::Loss::Replaced { .. } => "EOWNERCHANGED",
            },
            committed: false,
        }),
    }
}

/// Flushes the target's directory after a rename or unlink there (through
/// a readable descriptor of its own: the one held may be an anchor that
/// `fsync` refuses). A failure here is after the commit.
fn sync_dir(target: &Target, durable: bool) -> Result<(), UpdateError> {
    if !durable {
        return Ok(());
    }
    let committed = |errno| UpdateError {
        step: Step::DirSync,
        code: errno_code(errno),
        committed: true,
    };
    #[cfg(unix)]
    {
        let dir = fs::openat(
            &target.dir,
            c".",
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(committed)?;
        match fsx::flush(dir.as_fd()) {
            // A network mount whose directory operations are synchronous.
            Ok(()) | Err(Errno::INVAL | Errno::NOTSUP) => {}
            Err(errno) => return Err(committed(errno)),
        }
    }
    #[cfg(not(unix))]
    let _ = (target, committed);
    Ok(())
}

/// `F` for the lock name `F.lock`.
fn file_name_of(lock_name: &OsStr) -> OsString {
    let bytes = lock_name.as_encoded_bytes();
    let file = bytes
        .strip_suffix(crate::lock::names::LOCK_SUFFIX.as_bytes())
        .unwrap_or(bytes);
    crate::sys::os::os_str(file)
        .unwrap_or(lock_name)
        .to_os_string()
}

/// `.<name>`: the temp's base, hidden.
fn hidden(name: &OsStr) -> OsString {
    let mut base = OsString::from(".");
    base.push(name);
    base
}

/// The directory and name `name` in `dir` leads to past its symlinks (at
/// most [`MAX_LINKS`]); a name that is no symlink (or nothing) is itself.
fn resolve(dir: BorrowedFd<'_>, name: &OsStr) -> Result<(OwnedFd, OsString), Errno> {
    let mut dir = fs::openat(
        dir,
        c".",
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let mut name = name.to_os_string();
    // Windows' links are reparse points this layer does not read: the name
    // itself is replaced there.
    if cfg!(windows) {
        return Ok((dir, name));
    }
    for _ in 0..MAX_LINKS {
        match fsx::stat_nofollow(dir.as_fd(), &name) {
            Ok(stat) if fsx::kind_of(&stat) == FileType::Symlink => {}
            Ok(_) | Err(Errno::NOENT) => return Ok((dir, name)),
            Err(errno) => return Err(errno),
        }
        let link = read_link(dir.as_fd(), &name)?;
        let link = Path::new(&link);
        let (parent, last) = fsx::split_final(link)?;
        dir = fs::openat(
            &dir,
            if parent.as_os_str().is_empty() {
                Path::new(".")
            } else {
                &parent
            },
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        name = last;
    }
    Err(Errno::LOOP)
}

/// The target of the symlink `name` in `dir`.
#[cfg(unix)]
fn read_link(dir: BorrowedFd<'_>, name: &OsStr) -> Result<OsString, Errno> {
    use std::os::unix::ffi::OsStringExt;
    Ok(OsString::from_vec(
        fs::readlinkat(dir, name, Vec::new())?.into_bytes(),
    ))
}

#[cfg(not(unix))]
fn read_link(_dir: BorrowedFd<'_>, _name: &OsStr) -> Result<OsString, Errno> {
    Err(Errno::INVAL)
}

/// The files (directory device, inode; name) whose temps this process has
/// swept: each once, at its first update here.
fn swept() -> &'static Mutex<HashSet<(u64, u64, OsString)>> {
    static SWEPT: OnceLock<Mutex<HashSet<(u64, u64, OsString)>>> = OnceLock::new();
    SWEPT.get_or_init(Mutex::default)
}

fn swept_key(dir: BorrowedFd<'_>, name: &OsStr) -> Option<(u64, u64, OsString)> {
    let (identity, _) = fsx::dir_attributes(dir).ok()?;
    Some((identity.dev, identity.ino, name.to_os_string()))
}

/// Whether this process has not swept `name`'s temps in `dir` yet.
fn sweep_due(dir: BorrowedFd<'_>, name: &OsStr) -> bool {
    swept_key(dir, name).is_none_or(|key| {
        !swept()
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(&key)
    })
}

fn mark_swept(dir: BorrowedFd<'_>, name: &OsStr) {
    if let Some(key) = swept_key(dir, name) {
        swept()
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key);
    }
}

/// Removes the temps of `name`'s dead writers in `dir` (see the module
/// docs); what it cannot prove abandoned stays.
fn sweep(dir: BorrowedFd<'_>, name: &OsStr) {
    let base = hidden(name);
    let Ok(listing) = fs::openat(
        dir,
        c".",
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    ) else {
        return;
    };
    let Ok(entries) = fs::Dir::new(listing) else {
        return;
    };
    for entry in entries.flatten() {
        let Some(candidate) = crate::sys::os::os_str(entry.file_name().to_bytes()) else {
            continue;
        };
        if fsx::parse_tagged_name(candidate, TEMP_TAG).is_some_and(|(of, _)| of == base) {
            remove_if_abandoned(dir, candidate);
        }
    }
}

/// Removes the temp `name` in `dir` if its writer is proven gone: `true`
/// when it did. For [`sweep`] and `exactlock gc`.
pub fn remove_if_abandoned(dir: BorrowedFd<'_>, name: &OsStr) -> bool {
    let Some((_, pid)) = fsx::parse_tagged_name(name, TEMP_TAG) else {
        return false;
    };
    let gone = pid != crate::sys::unique::own_pid()
        && matches!(
            crate::sys::process::probe(pid),
            crate::sys::process::Probe::Gone | crate::sys::process::Probe::Exited
        );
    if !gone {
        return false;
    }
    let Ok(file) = fs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
        Mode::empty(),
    ) else {
        return false;
    };
    let Ok(stat) = fs::fstat(&file) else {
        return false;
    };
    if fsx::kind_of(&stat) != FileType::RegularFile {
        return false;
    }
    let abandoned = match fs::flock(&file, FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => true,
        Err(errno) if is_flock_unsupported(errno) => {
            crate::sys::clock::now_ns() - fsx::mtime_ns(&stat) >= UNFLOCKED_TEMP_AGE_NS
        }
        Err(_) => false,
    };
    // Still the file judged (nobody renames into a temp's unique name).
    abandoned
        && fsx::stat_nofollow(dir, name).is_ok_and(|now| fsx::same_inode(&now, &stat))
        && fs::unlinkat(dir, name, AtFlags::empty()).is_ok()
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use crate::testutil::{acquire_free_named, listing, tempdir};

    fn held(id: u64) -> std::sync::Arc<Generation> {
        crate::lock::table::held(id).unwrap()
    }

    fn write(generation: &Generation, content: &[u8]) -> Result<Committed, UpdateError> {
        let (target, _) = read(generation, false, 1 << 20)?;
        commit(
            generation,
            &target,
            &Commit {
                content: Some(content),
                durable: true,
                new_mode: None,
                keep_owner: true,
            },
        )
    }

    #[test]
    fn replaces_the_file_whole_keeps_its_mode_and_leaves_no_temp() {
        let dir = tempdir("update");
        let id = acquire_free_named(&dir, "state.json");
        let generation = held(id);
        assert_eq!(read(&generation, false, 100).unwrap().1, None);
        write(&generation, b"one").unwrap();
        std::fs::set_permissions(
            dir.join("state.json"),
            std::os::unix::fs::PermissionsExt::from_mode(0o640),
        )
        .unwrap();
        let before = std::fs::metadata(dir.join("state.json")).unwrap();
        assert_eq!(
            read(&generation, false, 100).unwrap().1.as_deref(),
            Some(&b"one"[..])
        );
        write(&generation, b"two").unwrap();
        let after = std::fs::metadata(dir.join("state.json")).unwrap();
        use std::os::unix::fs::MetadataExt;
        assert_ne!(before.ino(), after.ino(), "a new file, renamed over");
        assert_eq!(after.mode() & 0o7777, 0o640);
        assert_eq!(std::fs::read(dir.join("state.json")).unwrap(), b"two");
        assert_eq!(listing(&dir), ["state.json", "state.json.lock"]);
        assert_eq!(
            read(&generation, false, 2).map(|_| ()),
            Err(UpdateError {
                step: Step::Read,
                code: "EFBIG",
                committed: false
            })
        );
        drop(generation);
        crate::lock::release::release_blocking(id).unwrap();
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_lost_lock_renames_nothing_and_a_symlink_is_followed() {
        let dir = tempdir("update-lost");
        std::fs::create_dir(dir.join("real")).unwrap();
        std::fs::write(dir.join("real/target"), b"old").unwrap();
        std::os::unix::fs::symlink("real/target", dir.join("state.json")).unwrap();
        let id = acquire_free_named(&dir, "state.json");
        let generation = held(id);
        let (target, old) = read(&generation, false, 100).unwrap();
        assert_eq!(old.as_deref(), Some(&b"old"[..]));
        std::fs::remove_dir_all(dir.join("state.json.lock")).unwrap();
        let lost = commit(
            &generation,
            &target,
            &Commit {
                content: Some(b"new"),
                durable: true,
                new_mode: None,
                keep_owner: true,
            },
        );
        assert_eq!(lost.unwrap_err().code, "EMISSING");
        assert_eq!(std::fs::read(dir.join("real/target")).unwrap(), b"old");
        assert_eq!(listing(&dir.join("real")), ["target"], "no temp left");
        drop(generation);
        let _ = crate::lock::release::release_blocking(id);
        let again = acquire_free_named(&dir, "state.json");
        write(&held(again), b"new").unwrap();
        assert_eq!(std::fs::read(dir.join("real/target")).unwrap(), b"new");
        assert!(
            std::fs::symlink_metadata(dir.join("state.json"))
                .unwrap()
                .is_symlink()
        );
        crate::lock::release::release_blocking(again).unwrap();
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_dead_writers_temp_is_removed_and_a_live_ones_kept() {
        let dir = tempdir("update-sweep");
        let parent = fsx::open_dir_nofollow(&dir).unwrap();
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        let uuid = "0f8fad5b-d9cb-469f-a165-70867728950e";
        let dead_temp = format!(".state.json.upd.{dead}.{uuid}");
        let live_temp = format!(".state.json.upd.{}.{uuid}", std::process::id());
        let other = format!(".notes.upd.{dead}.{uuid}");
        for name in [&dead_temp, &live_temp, &other] {
            std::fs::write(dir.join(name), b"x").unwrap();
        }
        sweep(parent.as_fd(), OsStr::new("state.json"));
        let mut left = listing(&dir);
        left.sort();
        let mut expected = vec![live_temp.clone(), other.clone()];
        expected.sort();
        assert_eq!(left, expected);
        std::fs::remove_dir_all(dir).unwrap();
    }
}
