//! Descriptor-relative, no-follow file access: the only way the rest of the
//! crate touches a path.
//!
//! Every operation here either works on a directory descriptor that was opened
//! without following any symlink, or opens one that way. A path is resolved
//! once (`open_dir_nofollow`); from then on, names are single components
//! resolved relative to that descriptor, so a component swapped for a symlink
//! after the open can no longer redirect us. This is the `cap-std` discipline,
//! cut down to what a lock directory needs.

use std::ffi::{OsStr, OsString};
use std::path::{Component, Path, PathBuf};

use crate::sys::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use crate::sys::os::fs::{self, AtFlags, FileType, Mode, OFlags, Stat};
use crate::sys::os::io::Errno;

use crate::sys::platform;

/// Flags for opening a directory we will only use as an anchor for `*at` calls
/// or list. `O_NOFOLLOW` makes a symlink in the final component fail with
/// `ELOOP` (or `ENOTDIR` with `O_DIRECTORY` on some kernels).
const DIR_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::DIRECTORY)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC);

/// Splits an absolute or relative path into its parent directory and final
/// component. The final component must be a real name: not empty, `.` or `..`.
pub fn split_final(path: &Path) -> Result<(PathBuf, OsString), Errno> {
    if path.as_os_str().as_encoded_bytes().contains(&0) {
        return Err(Errno::INVAL);
    }
    match path.components().next_back() {
        Some(Component::Normal(name)) => {
            let parent = path.parent().map(Path::to_path_buf).unwrap_or_default();
            let parent = if parent.as_os_str().is_empty() {
                PathBuf::from(".")
            } else {
                parent
            };
            Ok((parent, name.to_os_string()))
        }
        _ => Err(Errno::INVAL),
    }
}

/// Whether `name` is one real path component: not empty, not `.` or `..`,
/// and free of `/` and NUL. Names handed to the `*at` calls must be, or they
/// could walk out of the directory the descriptor pins.
pub fn is_single_component(name: &OsStr) -> bool {
    let bytes = name.as_encoded_bytes();
    !bytes.is_empty()
        && bytes != b"."
        && bytes != b".."
        && !bytes.contains(&b'/')
        && !bytes.contains(&0)
}

/// Whether `path` or one of its ancestors is a symlink, by `lstat` on each
/// prefix. Path-based and racy: used only to word an error after a no-follow
/// open already refused the path, never to decide anything.
pub fn has_symlinked_ancestor(path: &Path) -> bool {
    path.ancestors()
        .filter(|prefix| !prefix.as_os_str().is_empty())
        .any(|prefix| fs::lstat(prefix).is_ok_and(|stat| kind_of(&stat) == FileType::Symlink))
}

/// Opens the directory at `path` without following a symlink in any of its
/// components: in one `openat2(RESOLVE_NO_SYMLINKS)` where the platform
/// has it, and a component-by-component walk otherwise (macOS, the
/// portable mechanisms, old kernels).
pub fn open_dir_nofollow(path: &Path) -> Result<OwnedFd, Errno> {
    if path.as_os_str().as_encoded_bytes().contains(&0) {
        return Err(Errno::INVAL);
    }
    match platform::open_nofollow(path, DIR_FLAGS) {
        // With RESOLVE_NO_SYMLINKS a symlink anywhere yields ELOOP (ENOTDIR
        // for a symlink in the final component, where O_DIRECTORY wins).
        Some(opened) => opened,
        None => walk_nofollow(path),
    }
}

/// The portable way of [`open_dir_nofollow`]: opens `/` (or `.`) and then
/// each component with `O_NOFOLLOW | O_DIRECTORY`, each relative to the
/// descriptor of the one before, so a component swapped for a symlink
/// meanwhile fails the walk instead of redirecting it.
fn walk_nofollow(path: &Path) -> Result<OwnedFd, Errno> {
    let mut current = fs::open(walk_start(path)?, DIR_FLAGS, Mode::empty())?;
    for component in path.components() {
        match component {
            Component::Prefix(_) | Component::RootDir | Component::CurDir => {}
            Component::Normal(name) => {
                current = fs::openat(&current, name, DIR_FLAGS, Mode::empty())?;
            }
            // `..` could climb out through a directory that was swapped after
            // we opened it; refuse rather than reason about it.
            Component::ParentDir => return Err(Errno::INVAL),
        }
    }
    Ok(current)
}

/// Where [`walk_nofollow`] starts: the root of `path` (`/`; on Windows its
/// volume's root, `C:\` or `\\server\share\`) or the current directory.
/// A Windows path relative to a drive's own current directory (`C:foo`)
/// is refused: its start is per-drive process state.
fn walk_start(path: &Path) -> Result<PathBuf, Errno> {
    let mut start = PathBuf::new();
    if let Some(Component::Prefix(prefix)) = path.components().next() {
        if !path.has_root() {
            return Err(Errno::INVAL);
        }
        start.push(prefix.as_os_str());
    }
    start.push(if path.has_root() {
        Component::RootDir.as_os_str()
    } else {
        Component::CurDir.as_os_str()
    });
    Ok(start)
}

/// Opens the parent of `path` without following symlinks and returns it with
/// the final component's name.
pub fn open_parent(path: &Path) -> Result<(OwnedFd, OsString), Errno> {
    let (parent, name) = split_final(path)?;
    Ok((open_dir_nofollow(&parent)?, name))
}

/// Opens the directory `name` inside `dir` without following a symlink.
pub fn open_child_dir(dir: BorrowedFd<'_>, name: &OsStr) -> Result<OwnedFd, Errno> {
    fs::openat(dir, name, DIR_FLAGS, Mode::empty())
}

/// The names libfuse gives a file unlinked while it is still open (unless
/// the mount runs with `hard_remove`, which sshfs does not by default):
/// `.fuse_hidden` and 16 hex digits. libfuse removes that name itself
/// once the file's last handle is released.
const FUSE_HIDDEN_PREFIX: &[u8] = b".fuse_hidden";

/// The waits (ms) [`remove_dir_settled`] may make for libfuse to drop its
/// hidden names: about 125 ms in all, for one whole removal.
const FUSE_SETTLE_MS: [u64; 6] = [1, 4, 8, 16, 32, 64];

/// What one removal (a tree, a staging directory, a release) may still
/// wait for libfuse, across all the directories it removes: a tree of many
/// directories waits no longer than one.
#[derive(Default)]
pub struct FuseSettle {
    waits: usize,
    /// Called after each wait (tests stand in for the FUSE daemon here).
    #[cfg(test)]
    after_wait: Option<Box<dyn FnMut()>>,
}

impl FuseSettle {
    pub fn new() -> Self {
        Self::default()
    }

    /// Waits out the next step; false when the budget is spent.
    fn wait(&mut self) -> bool {
        let Some(ms) = FUSE_SETTLE_MS.get(self.waits) else {
            return false;
        };
        self.waits += 1;
        std::thread::sleep(std::time::Duration::from_millis(*ms));
        #[cfg(test)]
        if let Some(hook) = self.after_wait.as_mut() {
            hook();
        }
        true
    }
}

/// `rmdir(dir/name)` of the directory open as `ours`, patient with one FUSE
/// habit. The kernel sends the release of a closed file to the FUSE daemon
/// *after* `close` returned, and a daemon that still counts the file open
/// turns its unlink into a rename to `.fuse_hidden…`, which it removes when
/// that release arrives. So a directory whose record was closed and
/// unlinked a moment ago can still be non-empty for a moment. While
/// everything left in it is such a hidden name (or nothing: the name went
/// between the refusal and the look), and the name still holds `ours`,
/// `rmdir` is tried again within `settle`'s budget; anything else stands
/// and the refusal comes back at once. `EPERM` counts as a refusal here:
/// sshfs reports the server's "not empty" as its generic failure. `rmdir`
/// never removes a directory that is not empty, and the name is checked to
/// be ours before every retry, so the wait cannot cost anything that
/// someone else put there.
pub fn remove_dir_settled(
    dir: BorrowedFd<'_>,
    name: &OsStr,
    ours: BorrowedFd<'_>,
    settle: &mut FuseSettle,
) -> Result<(), Errno> {
    loop {
        let errno = match retry_interrupted(|| fs::unlinkat(dir, name, AtFlags::REMOVEDIR)) {
            Err(errno @ (Errno::NOTEMPTY | Errno::EXIST | Errno::PERM)) => errno,
            other => return other,
        };
        if !holds_only_fuse_hidden(dir, name) || !settle.wait() {
            return Err(errno);
        }
        match (stat_nofollow(dir, name), fs::fstat(ours)) {
            (Ok(now), Ok(expected)) if same_inode(&now, &expected) => {}
            (Err(Errno::NOENT), _) => return Err(Errno::NOENT),
            _ => return Err(errno),
        }
    }
}

/// A directory of ours, readied for its removal once it is empty (see
/// [`prepare_own_dir_removal`]).
pub struct OwnDir<'a> {
    #[cfg_attr(windows, allow(dead_code))]
    ours: BorrowedFd<'a>,
    #[cfg(windows)]
    deleter: OwnedFd,
}

/// Readies the removal of the directory `ours`, before anything in it is
/// removed. On Windows it is opened for deletion now, which fails (`EBUSY`,
/// a sharing violation) while another process holds it open without
/// sharing its deletion — a shell whose current directory it is: then
/// nothing in it is removed, where emptying it first would leave an empty
/// directory that cannot go (a lock without its record: a holder to
/// everyone until `staleMs`, forever with `ownerHostId`). Unix removes it
/// by name after a check (and nothing keeps an empty directory from going
/// there): nothing to ready.
pub fn prepare_own_dir_removal(ours: BorrowedFd<'_>) -> Result<OwnDir<'_>, Errno> {
    Ok(OwnDir {
        ours,
        #[cfg(windows)]
        deleter: fs::open_dir_for_delete(ours)?,
    })
}

/// Removes the empty directory `own`, which the caller has just found at
/// `dir/name`: on unix by its name ([`remove_dir_settled`]; removers take
/// turns by `flock`, and `rmdir` removes only an empty directory); on
/// Windows through the handle readied for it, so whatever took the name
/// meanwhile is never what goes (NTFS has no locks on directories to take
/// turns by).
#[cfg_attr(windows, allow(unused_variables))]
pub fn remove_own_dir(
    dir: BorrowedFd<'_>,
    name: &OsStr,
    own: OwnDir<'_>,
    settle: &mut FuseSettle,
) -> Result<(), Errno> {
    #[cfg(unix)]
    return remove_dir_settled(dir, name, own.ours, settle);
    #[cfg(windows)]
    return fs::delete_open(own.deleter.as_fd());
}

/// Whether `dir/name` holds nothing but libfuse's hidden names (or
/// nothing at all).
fn holds_only_fuse_hidden(dir: BorrowedFd<'_>, name: &OsStr) -> bool {
    let Ok(listing) = open_child_dir(dir, name).and_then(|child| fs::Dir::read_from(&child)) else {
        return false;
    };
    for entry in listing {
        let Ok(entry) = entry else { return false };
        let bytes = entry.file_name().to_bytes();
        if bytes != b"." && bytes != b".." && !bytes.starts_with(FUSE_HIDDEN_PREFIX) {
            return false;
        }
    }
    true
}

/// `fstatat(dir, name, AT_SYMLINK_NOFOLLOW)`.
pub fn stat_nofollow(dir: BorrowedFd<'_>, name: &OsStr) -> Result<Stat, Errno> {
    fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)
}

/// The kind of a file from its `st_mode`.
pub fn kind_of(stat: &Stat) -> FileType {
    FileType::from_raw_mode(stat.st_mode)
}

/// `st_dev` and `st_ino` as `u64`s: their raw types differ per platform,
/// so the widening belongs to the platform seam.
pub use crate::sys::platform::{dev_of, ino_of};

/// `st_nlink` as a `u64` (its raw width differs per platform: `u64` on
/// Linux x86_64, `u32` on aarch64, `u16` on macOS).
#[allow(clippy::useless_conversion)]
pub fn nlink_of(stat: &Stat) -> u64 {
    u64::from(stat.st_nlink)
}

/// `st_size` as a `u64`; the kernel never reports a negative size.
pub fn size_of(stat: &Stat) -> u64 {
    u64::try_from(stat.st_size).unwrap_or(0)
}

/// The modification time in nanoseconds since the epoch.
pub fn mtime_ns(stat: &Stat) -> i128 {
    i128::from(stat.st_mtime) * 1_000_000_000 + i128::from(stat.st_mtime_nsec)
}

/// The status-change time in nanoseconds since the epoch. Unlike the mtime it
/// cannot be set from user space, so an equal ctime means no metadata or
/// content change happened in between (at the filesystem's granularity).
pub fn ctime_ns(stat: &Stat) -> i128 {
    i128::from(stat.st_ctime) * 1_000_000_000 + i128::from(stat.st_ctime_nsec)
}

/// A directory's identity that survives most inode recycling: device,
/// inode and birth time. Filesystems reuse freed inode numbers at once
/// (ext4 does), so a directory deleted and recreated at the same path can
/// get the same `(dev, ino)`; its birth time differs unless both fell in
/// the same timestamp tick. `0` where the kernel or filesystem does not
/// report a birth time, and on overlayfs, which reports the birth time of
/// the layer the directory lives in now: the lower layer's until its
/// first change copies it up (a lock's first publication does), the
/// upper's after — one directory, two birth times, while its device and
/// inode stay. Used only for in-process bookkeeping (queues, the
/// once-per-lock debris scan), never as authority to remove anything.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DirIdentity {
    pub dev: u64,
    pub ino: u64,
    pub birth_ns: i128,
}

/// The [`DirIdentity`] of an open directory.
#[cfg(test)]
pub fn dir_identity(dir: BorrowedFd<'_>) -> Result<DirIdentity, Errno> {
    dir_identity_and_links(dir).map(|(identity, _)| identity)
}

/// The [`DirIdentity`] of an open directory, and its link count as the
/// same call saw it: 2 plus its subdirectories on most filesystems (ext4,
/// xfs, tmpfs, APFS), always 1 on some (btrfs, many network mounts).
pub fn dir_identity_and_links(dir: BorrowedFd<'_>) -> Result<(DirIdentity, u64), Errno> {
    let (identity, links) = dir_attributes(dir)?;
    // overlayfs, like every mount without a device of its own, has major
    // 0: only those pay for the statfs.
    #[cfg(target_os = "linux")]
    let identity = if identity.birth_ns != 0
        && crate::sys::os::fs::major(identity.dev) == 0
        && is_overlayfs(dir)
    {
        DirIdentity {
            birth_ns: 0,
            ..identity
        }
    } else {
        identity
    };
    Ok((identity, links))
}

/// [`dir_identity_and_links`] as the one `statx` gives them, the birth
/// time as reported even on overlayfs: no `statfs`, nor anything else a
/// network or FUSE mount's server must answer (the attributes are the
/// cached ones). What the inline fast path compares a directory by.
#[cfg(target_os = "linux")]
pub fn dir_attributes(dir: BorrowedFd<'_>) -> Result<(DirIdentity, u64), Errno> {
    use crate::sys::os::fs::{StatxFlags, statx};
    // Nothing asked for changes while the descriptor is open but the link
    // count, which is only a hint (see `debris`): the cached attributes
    // serve, and NFS sends no GETATTR for them.
    match statx(
        dir,
        "",
        AtFlags::EMPTY_PATH | AtFlags::STATX_DONT_SYNC,
        StatxFlags::INO | StatxFlags::BTIME | StatxFlags::NLINK,
    ) {
        Ok(stx) => {
            let birth_known =
                StatxFlags::from_bits_retain(stx.stx_mask).contains(StatxFlags::BTIME);
            let birth_ns = if birth_known {
                i128::from(stx.stx_btime.tv_sec) * 1_000_000_000 + i128::from(stx.stx_btime.tv_nsec)
            } else {
                0
            };
            let identity = DirIdentity {
                dev: crate::sys::os::fs::makedev(stx.stx_dev_major, stx.stx_dev_minor),
                ino: stx.stx_ino,
                birth_ns,
            };
            Ok((identity, u64::from(stx.stx_nlink)))
        }
        Err(Errno::NOSYS) => fstat_identity(dir),
        Err(errno) => Err(errno),
    }
}

#[cfg(not(target_os = "linux"))]
pub fn dir_attributes(dir: BorrowedFd<'_>) -> Result<(DirIdentity, u64), Errno> {
    fstat_identity(dir)
}

fn fstat_identity(dir: BorrowedFd<'_>) -> Result<(DirIdentity, u64), Errno> {
    let stat = fs::fstat(dir)?;
    let identity = DirIdentity {
        dev: dev_of(&stat),
        ino: ino_of(&stat),
        birth_ns: 0,
    };
    #[allow(clippy::useless_conversion)] // nlink_t is u32 on some targets
    Ok((identity, u64::from(stat.st_nlink)))
}

/// Whether two stats describe the same inode. Only meaningful while the first
/// object is still referenced (an open descriptor or a link), or its inode
/// number could have been recycled.
pub fn same_inode(a: &Stat, b: &Stat) -> bool {
    dev_of(a) == dev_of(b) && ino_of(a) == ino_of(b)
}

/// Opens `name` inside `dir` without following a symlink, without reading
/// it and without blocking, so the inode stays referenced (and its number
/// cannot be recycled) while we compare identities. Works for any kind: a
/// symlink opens as the link itself (Linux `O_PATH`), a FIFO is not opened
/// for I/O. Without `O_PATH` (macOS, the portable mechanisms) directories
/// are pinned through a directory descriptor and everything else through
/// a non-blocking read-only open (a FIFO opens at once with `O_NONBLOCK`
/// and is never read; a symlink fails with `ELOOP`).
pub fn open_pin(dir: BorrowedFd<'_>, name: &OsStr) -> Result<OwnedFd, Errno> {
    if let Some(path_only) = platform::path_only_flag() {
        return fs::openat(
            dir,
            name,
            path_only | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        );
    }
    match open_child_dir(dir, name) {
        Err(Errno::NOTDIR) => fs::openat(
            dir,
            name,
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY,
            Mode::empty(),
        ),
        other => other,
    }
}

/// Sets the mode of the directory `dir/name` without following a symlink
/// at `name`: for a directory its owner may not open (a umask took the
/// owner's `r`). Where the system opens a name without reading it (Linux
/// `O_PATH`, under the portable mechanisms too: Linux's `fchmodat` has no
/// no-follow form), the directory is pinned no-follow and its mode set
/// through the pin (`/proc/self/fd/N` names exactly that inode);
/// elsewhere `fchmodat(AT_SYMLINK_NOFOLLOW)`, which changes a symlink
/// itself, never what it points to (macOS).
pub fn chmod_dir_nofollow(dir: BorrowedFd<'_>, name: &OsStr, mode: Mode) -> Result<(), Errno> {
    if let Some(path_only) = platform::native::PATH_ONLY {
        let pin = pin_dir(dir, name, path_only)?;
        return chmod_pinned(&pin, keeping_setgid(&fs::fstat(&pin)?, mode));
    }
    let seen = fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)?;
    fs::chmodat(
        dir,
        name,
        keeping_setgid(&seen, mode),
        AtFlags::SYMLINK_NOFOLLOW,
    )
}

/// Flushes what was written to `fd` (or, for a directory, done in it) to
/// the disk: `fsync`, and on macOS `F_FULLFSYNC`, without which the drive
/// may keep it in its cache across a power loss.
pub fn flush(fd: BorrowedFd<'_>) -> Result<(), Errno> {
    #[cfg(target_os = "macos")]
    if fs::fcntl_fullfsync(fd).is_ok() {
        return Ok(());
    }
    fs::fsync(fd)
}

/// The directory `name` in `dir`, opened no-follow with `path_only`.
fn pin_dir(dir: BorrowedFd<'_>, name: &OsStr, path_only: OFlags) -> Result<OwnedFd, Errno> {
    fs::openat(
        dir,
        name,
        path_only | OFlags::NOFOLLOW | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
}

/// Sets the mode of exactly the inode `pin` holds (`/proc/self/fd/N`
/// names it; Linux has no `fchmod` through an `O_PATH` descriptor).
fn chmod_pinned(pin: &OwnedFd, mode: Mode) -> Result<(), Errno> {
    fs::chmod(format!("/proc/self/fd/{}", pin.as_raw_fd()), mode)
}

/// A regular file read through a no-follow, non-blocking descriptor, with the
/// `fstat` taken on that same descriptor.
pub struct BoundedRead {
    pub stat: Stat,
    pub bytes: Vec<u8>,
}

/// Why [`read_regular_bounded`] produced no bytes.
#[derive(Debug, PartialEq, Eq)]
pub enum ReadRefusal {
    /// The name is not a regular file (symlink, FIFO, socket, device, directory).
    NotRegular,
    /// The file is larger than the limit; it was not read.
    TooLarge,
    /// The file changed while it was read (size moved under us).
    Changed,
    /// A syscall failed.
    Os(Errno),
}

impl From<Errno> for ReadRefusal {
    fn from(errno: Errno) -> Self {
        ReadRefusal::Os(errno)
    }
}

/// Reads the regular file `name` inside `dir`, at most `limit` bytes.
///
/// The open uses `O_NOFOLLOW` (a symlink fails with `ELOOP`) and `O_NONBLOCK`
/// (a FIFO swapped in opens without waiting for a writer, and is then refused
/// by the `fstat` check before any read). Memory is bounded by `limit`.
pub fn read_regular_bounded(
    dir: BorrowedFd<'_>,
    name: &OsStr,
    limit: usize,
) -> Result<BoundedRead, ReadRefusal> {
    let fd = match fs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY,
        Mode::empty(),
    ) {
        Ok(fd) => fd,
        Err(Errno::LOOP) => return Err(ReadRefusal::NotRegular),
        // ENXIO: a socket; EISDIR cannot happen for RDONLY but keep the map.
        Err(Errno::NXIO) | Err(Errno::ISDIR) => return Err(ReadRefusal::NotRegular),
        Err(errno) => return Err(ReadRefusal::Os(errno)),
    };
    read_fd_bounded(fd.as_fd(), limit)
}

/// Reads an already-open descriptor that must be a regular file.
pub fn read_fd_bounded(fd: BorrowedFd<'_>, limit: usize) -> Result<BoundedRead, ReadRefusal> {
    let stat = fs::fstat(fd)?;
    if kind_of(&stat) != FileType::RegularFile {
        return Err(ReadRefusal::NotRegular);
    }
    let size = usize::try_from(stat.st_size).map_err(|_| ReadRefusal::TooLarge)?;
    if size > limit {
        return Err(ReadRefusal::TooLarge);
    }
    // One byte more than the size, so growth after the fstat is seen.
    let mut bytes = vec![0u8; size + 1];
    let mut filled = 0;
    loop {
        match crate::sys::os::io::read(fd, &mut bytes[filled..]) {
            Ok(0) => break,
            Ok(n) => {
                filled += n;
                if filled == bytes.len() {
                    return Err(ReadRefusal::Changed);
                }
            }
            Err(Errno::INTR) => continue,
            Err(errno) => return Err(ReadRefusal::Os(errno)),
        }
    }
    if filled != size {
        return Err(ReadRefusal::Changed);
    }
    bytes.truncate(filled);
    Ok(BoundedRead { stat, bytes })
}

/// The `fstat` of `fd` once its permission bits are exactly `mode`: one
/// `fstat` when they are, an `fchmod` and a second `fstat` (the `fchmod`
/// changed its ctime) when they are not. A directory keeps the set-group-ID
/// bit it was given (see [`keeping_setgid`]).
pub fn with_exact_mode(fd: BorrowedFd<'_>, mode: Mode) -> Result<Stat, Errno> {
    let stat = fs::fstat(fd)?;
    let mode = keeping_setgid(&stat, mode);
    if Mode::from_raw_mode(stat.st_mode) & Mode::from_raw_mode(0o7777) == mode {
        return Ok(stat);
    }
    fs::fchmod(fd, mode)?;
    fs::fstat(fd)
}

/// `mode`, and the set-group-ID bit of the directory `stat` describes if it
/// has it. A directory made in a setgid directory inherits the bit (and the
/// group), so what is made in it in turn gets that group: the group a lock
/// shared by its users lives in (`mode: 0o770`). An exact `chmod` would
/// take it away, and the next record would get its writer's own group,
/// which the other users cannot read.
pub fn keeping_setgid(stat: &Stat, mode: Mode) -> Mode {
    #[cfg(unix)]
    if kind_of(stat) == FileType::Directory {
        let setgid = Mode::from_raw_mode(stat.st_mode) & Mode::SGID;
        return mode | setgid;
    }
    #[cfg(not(unix))]
    let _ = stat;
    mode
}

/// Writes all of `bytes` at `offset`.
pub fn write_all(fd: BorrowedFd<'_>, mut bytes: &[u8], mut offset: u64) -> Result<(), Errno> {
    while !bytes.is_empty() {
        match crate::sys::os::io::pwrite(fd, bytes, offset) {
            Ok(0) => return Err(Errno::IO),
            Ok(n) => {
                bytes = &bytes[n..];
                offset += n as u64;
            }
            Err(Errno::INTR) => {}
            Err(errno) => return Err(errno),
        }
    }
    Ok(())
}

/// Opens the directory `path` for use as an anchor of `*at` calls,
/// creating it and every missing ancestor with `mode` first. Symlinks in
/// the part of `path` that exists are followed on purpose (aliased paths
/// name one lock; the lock is keyed by the directory's identity, not its
/// path).
///
/// What is created is created through descriptors only: `mkdirat` in the
/// open parent, then `openat(O_DIRECTORY | O_NOFOLLOW)` of the new name and
/// `fchmod` of that descriptor, so the mode is set on exactly the directory
/// we made even under a hostile umask. Had someone who can write the
/// parent swapped the new name for a symlink between the `mkdirat` and the
/// `openat`, the `openat` refuses it (`ELOOP`/`ENOTDIR`) and nothing is
/// chmodded through it. Directories that already exist keep their mode.
pub fn open_or_create_dir(path: &Path, mode: Mode) -> Result<OwnedFd, Errno> {
    let missing = match fs::open(path, anchor_flags(), Mode::empty()) {
        Ok(dir) => return Ok(dir),
        Err(Errno::NOENT) => missing_components(path)?,
        Err(errno) => return Err(errno),
    };
    let (existing, names) = missing;
    let mut dir = fs::open(&existing, anchor_flags(), Mode::empty())?;
    for name in names {
        dir = make_child_dir(dir.as_fd(), &name, mode)?;
    }
    Ok(dir)
}

/// Opens the directory at `path`, following symlinks, as an anchor for
/// `*at` calls.
pub fn open_anchor(path: &Path) -> Result<OwnedFd, Errno> {
    fs::open(path, anchor_flags(), Mode::empty())
}

/// Flags of a directory used only as an anchor: `O_PATH` where the
/// platform has it (no read permission needed, nothing is read through
/// it), `O_RDONLY` otherwise.
fn anchor_flags() -> OFlags {
    platform::path_only_flag().unwrap_or(OFlags::RDONLY) | OFlags::DIRECTORY | OFlags::CLOEXEC
}

/// The deepest existing ancestor of `path` and the names below it that do
/// not exist yet, outermost first.
fn missing_components(path: &Path) -> Result<(PathBuf, Vec<OsString>), Errno> {
    let mut names = Vec::new();
    let mut cursor = path;
    loop {
        match fs::stat(cursor) {
            Ok(stat) if kind_of(&stat) == FileType::Directory => break,
            Ok(_) => return Err(Errno::NOTDIR),
            Err(Errno::NOENT) => {}
            Err(errno) => return Err(errno),
        }
        match (cursor.parent(), cursor.file_name()) {
            (Some(parent), Some(name)) if !parent.as_os_str().is_empty() => {
                names.push(name.to_os_string());
                cursor = parent;
            }
            _ => return Err(Errno::NOENT),
        }
    }
    names.reverse();
    Ok((cursor.to_path_buf(), names))
}

/// `mkdirat` + exact mode + no-follow `openat` of one directory in
/// `parent`; a directory someone else created meanwhile is used as it is.
/// The mode is set before the directory is opened: a umask may have taken
/// the owner's own bits (0777 leaves 0000, 0477 leaves `-wx`), too few to
/// open it or make the next directory in it.
fn make_child_dir(parent: BorrowedFd<'_>, name: &OsStr, mode: Mode) -> Result<OwnedFd, Errno> {
    let created = match fs::mkdirat(parent, name, mode) {
        Ok(()) => true,
        Err(Errno::EXIST) => false,
        Err(errno) => return Err(errno),
    };
    crate::sys::faults::pause("parent.created", name);
    let chmodded = if created {
        chmod_own_dir_nofollow(parent, name, mode)?
    } else {
        None
    };
    let dir = open_child_dir(parent, name)?;
    // What is opened is what was checked and chmodded, not a directory
    // swapped in since.
    if chmodded.is_some_and(|pinned| !fs::fstat(&dir).is_ok_and(|now| same_inode(&now, &pinned))) {
        return Err(Errno::EXIST);
    }
    Ok(dir)
}

/// [`chmod_dir_nofollow`] of a directory this process just made: one
/// swapped in for it is not ours to chmod (one made by someone else
/// belongs to them), and is refused with `EEXIST`. Where a name can be
/// pinned without reading it (Linux `O_PATH`), the owner is read from the
/// pin the mode is then set through; elsewhere from a no-follow `fstatat`
/// just before. (Windows has owners in ACLs, not uids: there, the mode is
/// set as asked.)
/// The pinned directory's `fstat`, where it was pinned (the caller checks
/// that what it opens next is it).
pub fn chmod_own_dir_nofollow(
    parent: BorrowedFd<'_>,
    name: &OsStr,
    mode: Mode,
) -> Result<Option<Stat>, Errno> {
    #[cfg(unix)]
    let ours = |stat: &Stat| stat.st_uid == rustix::process::geteuid().as_raw();
    if let Some(path_only) = platform::native::PATH_ONLY {
        let pin = pin_dir(parent, name, path_only)?;
        let pinned = fs::fstat(&pin)?;
        #[cfg(unix)]
        if !ours(&pinned) {
            return Err(Errno::EXIST);
        }
        chmod_pinned(&pin, keeping_setgid(&pinned, mode))?;
        return Ok(Some(pinned));
    }
    let seen = fs::statat(parent, name, AtFlags::SYMLINK_NOFOLLOW)?;
    #[cfg(unix)]
    if !ours(&seen) {
        return Err(Errno::EXIST);
    }
    fs::chmodat(
        parent,
        name,
        keeping_setgid(&seen, mode),
        AtFlags::SYMLINK_NOFOLLOW,
    )?;
    Ok(None)
}

/// A private name beside `base`, unique per use:
/// `<base>.<tag>.<pid>.<uuid v4>` (the original's staging names have this
/// shape with the tag `pending`). The pid says who made it; the uuid that
/// nobody else can have named it.
pub fn tagged_name(base: &OsStr, tag: &str) -> OsString {
    use crate::sys::unique::{fresh_uuid_text, own_pid_text};
    let mut name = base.to_os_string();
    for part in [".", tag, ".", own_pid_text(), ".", &fresh_uuid_text()] {
        name.push(part);
    }
    name
}

/// The most bytes one name (a path component) may have: `NAME_MAX` of
/// every filesystem exactlock is tested on, and of macOS.
pub const NAME_MAX: usize = 255;

/// How many times a syscall interrupted by a signal is restarted before we
/// give up with `interrupted`.
pub const EINTR_RETRIES: usize = 8;

/// Runs `op`, restarting it while it fails with `EINTR`, at most
/// [`EINTR_RETRIES`] times; the last `EINTR` is returned as is.
pub(crate) fn retry_interrupted<T>(mut op: impl FnMut() -> Result<T, Errno>) -> Result<T, Errno> {
    let mut restarts = 0;
    loop {
        match op() {
            Err(Errno::INTR) if restarts < EINTR_RETRIES => restarts += 1,
            other => return other,
        }
    }
}

/// The `statfs` magic number of `dir`'s filesystem (Linux; 0 elsewhere,
/// where `statfs` names no type by number).
#[cfg(target_os = "linux")]
pub fn statfs_magic(dir: BorrowedFd<'_>) -> Result<u64, Errno> {
    // `f_type` is a word whose width and sign differ between ABIs; the
    // magic numbers are 32-bit patterns (CIFS's 0xFF534D42 reads negative
    // where the word is a signed 32-bit one). The low 32 bits of any of
    // them, taken through `i128`, are the pattern.
    let low_bits = i128::from(fs::fstatfs(dir)?.f_type) & 0xFFFF_FFFF;
    Ok(u64::try_from(low_bits).expect("masked to 32 bits, so non-negative"))
}

#[cfg(not(target_os = "linux"))]
pub fn statfs_magic(_dir: BorrowedFd<'_>) -> Result<u64, Errno> {
    Ok(0)
}

/// overlayfs's `statfs` magic (`OVERLAYFS_SUPER_MAGIC`).
pub const OVERLAYFS_MAGIC: u64 = 0x794C_7630;

/// Whether `dir` is on overlayfs (a Linux filesystem).
#[cfg(target_os = "linux")]
pub fn is_overlayfs(dir: BorrowedFd<'_>) -> bool {
    statfs_magic(dir).is_ok_and(|magic| magic == OVERLAYFS_MAGIC)
}

/// The most bytes per name the filesystem of `dir` allows, as it says
/// (`f_namemax`); `None` when it does not say.
pub fn name_max_of(dir: BorrowedFd<'_>) -> Option<usize> {
    let limit = fs::fstatvfs(dir).ok()?.f_namemax;
    (limit > 0).then(|| usize::try_from(limit).ok()).flatten()
}

/// The length in bytes of the longest name [`tagged_name`] can make from a
/// base of `base_len` bytes and `tag`, in any process of this system: the
/// pid at its widest ([`platform::native::PID_MAX_DIGITS`]), so a base that
/// fits in one process fits in every other.
pub fn longest_tagged_len(base_len: usize, tag: &str) -> usize {
    const UUID_LEN: usize = 36;
    base_len
        + ".".len()
        + tag.len()
        + ".".len()
        + platform::native::PID_MAX_DIGITS
        + ".".len()
        + UUID_LEN
}

/// Splits a name made by [`tagged_name`] with `tag` into its base and pid:
/// `None` unless it has exactly that shape (a positive pid without leading
/// zeros, a lowercase hyphenated uuid). The base is what precedes the last
/// `.<tag>.`.
pub fn parse_tagged_name<'a>(candidate: &'a OsStr, tag: &str) -> Option<(&'a OsStr, u32)> {
    let bytes = candidate.as_encoded_bytes();
    let marker = format!(".{tag}.");
    let at = bytes
        .windows(marker.len())
        .rposition(|window| window == marker.as_bytes())?;
    let rest = std::str::from_utf8(&bytes[at + marker.len()..]).ok()?;
    let (pid, uuid) = rest.split_once('.')?;
    let valid_pid =
        !pid.is_empty() && !pid.starts_with('0') && pid.bytes().all(|b| b.is_ascii_digit());
    let valid_uuid = uuid.len() == 36
        && uuid
            .bytes()
            .all(|b| b == b'-' || b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        && uuid::Uuid::parse_str(uuid).is_ok();
    if at == 0 || !valid_pid || !valid_uuid {
        return None;
    }
    Some((crate::sys::os::os_str(&bytes[..at])?, pid.parse().ok()?))
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
    use std::io::Write;

    #[cfg(unix)]
    #[test]
    fn remove_dir_settled_waits_out_fuse_hidden_names_and_nothing_else() {
        let root = tempdir("fsx-settled");
        let parent = open_dir_nofollow(&root).unwrap();
        let hidden = |dir: &str, n: u32| root.join(format!("{dir}/.fuse_hidden{n:016x}"));

        // libfuse's hidden name, dropped by "the daemon" after the first
        // wait: the directory goes then.
        std::fs::create_dir(root.join("a")).unwrap();
        std::fs::write(hidden("a", 1), b"x").unwrap();
        let a = open_child_dir(parent.as_fd(), OsStr::new("a")).unwrap();
        let mut settle = FuseSettle::new();
        let dropped = hidden("a", 1);
        settle.after_wait = Some(Box::new(move || {
            let _ = std::fs::remove_file(&dropped);
        }));
        assert_eq!(
            remove_dir_settled(parent.as_fd(), OsStr::new("a"), a.as_fd(), &mut settle),
            Ok(())
        );
        assert_eq!(settle.waits, 1);
        assert!(!root.join("a").exists());

        // Anything else is refused at once, without a wait, and stays.
        std::fs::create_dir(root.join("b")).unwrap();
        std::fs::write(root.join("b/info"), b"theirs").unwrap();
        std::fs::write(hidden("b", 2), b"x").unwrap();
        let b = open_child_dir(parent.as_fd(), OsStr::new("b")).unwrap();
        let mut settle = FuseSettle::new();
        assert_eq!(
            remove_dir_settled(parent.as_fd(), OsStr::new("b"), b.as_fd(), &mut settle),
            Err(Errno::NOTEMPTY)
        );
        assert_eq!(settle.waits, 0);
        assert_eq!(std::fs::read(root.join("b/info")).unwrap(), b"theirs");

        // A hidden name that never goes: refused once the budget is spent
        // (one budget for the whole removal), and kept.
        std::fs::remove_file(root.join("b/info")).unwrap();
        assert_eq!(
            remove_dir_settled(parent.as_fd(), OsStr::new("b"), b.as_fd(), &mut settle),
            Err(Errno::NOTEMPTY)
        );
        assert_eq!(settle.waits, FUSE_SETTLE_MS.len());
        assert_eq!(
            remove_dir_settled(parent.as_fd(), OsStr::new("b"), b.as_fd(), &mut settle),
            Err(Errno::NOTEMPTY)
        );
        assert_eq!(settle.waits, FUSE_SETTLE_MS.len(), "no budget left");
        assert!(hidden("b", 2).exists());

        // The name swapped for another directory during the wait: that one
        // is not ours, and stays even once it is empty.
        std::fs::create_dir(root.join("c")).unwrap();
        std::fs::write(hidden("c", 3), b"x").unwrap();
        let c = open_child_dir(parent.as_fd(), OsStr::new("c")).unwrap();
        let mut settle = FuseSettle::new();
        let base = root.clone();
        settle.after_wait = Some(Box::new(move || {
            std::fs::rename(base.join("c"), base.join("c.moved")).unwrap();
            std::fs::create_dir(base.join("c")).unwrap();
        }));
        assert_eq!(
            remove_dir_settled(parent.as_fd(), OsStr::new("c"), c.as_fd(), &mut settle),
            Err(Errno::NOTEMPTY)
        );
        assert!(
            root.join("c").is_dir(),
            "someone else's empty directory stays"
        );
        assert!(hidden("c.moved", 3).exists());
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn split_final_refuses_dot_names_and_nul() {
        assert!(split_final(Path::new("/a/..")).is_err());
        assert!(split_final(Path::new("/")).is_err());
        assert!(split_final(Path::new("/a/b\0c")).is_err());
        let (parent, name) = split_final(Path::new("/a/b.lock")).unwrap();
        assert_eq!(parent, PathBuf::from("/a"));
        assert_eq!(name, OsString::from("b.lock"));
    }

    #[cfg(unix)]
    #[test]
    fn open_dir_nofollow_refuses_symlinked_ancestor() {
        let root = tempdir("ancestor");
        std::fs::create_dir(root.join("real")).unwrap();
        std::os::unix::fs::symlink(root.join("real"), root.join("alias")).unwrap();
        assert!(open_dir_nofollow(&root.join("real")).is_ok());
        // A symlink as the final component reads as ENOTDIR (O_DIRECTORY
        // wins) or ELOOP depending on the path taken; both refuse it.
        let refused = open_dir_nofollow(&root.join("alias")).unwrap_err();
        assert!(refused == Errno::LOOP || refused == Errno::NOTDIR);
        let through = open_dir_nofollow(&root.join("alias/x")).unwrap_err();
        assert!(through == Errno::LOOP || through == Errno::NOTDIR);
        assert!(walk_nofollow(&root.join("alias")).is_err());
        std::fs::remove_dir_all(root).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn bounded_read_refuses_fifo_symlink_and_huge_files() {
        let root = tempdir("read");
        let dir = open_dir_nofollow(&root).unwrap();
        crate::testutil::make_fifo(&root.join("fifo"));
        std::os::unix::fs::symlink("/etc/hostname", root.join("link")).unwrap();
        let mut big = std::fs::File::create(root.join("big")).unwrap();
        big.write_all(&[b'x'; 4096]).unwrap();
        std::fs::write(root.join("small"), b"hello").unwrap();

        let fifo = read_regular_bounded(dir.as_fd(), OsStr::new("fifo"), 64);
        assert_eq!(fifo.err(), Some(ReadRefusal::NotRegular));
        let link = read_regular_bounded(dir.as_fd(), OsStr::new("link"), 64);
        assert_eq!(link.err(), Some(ReadRefusal::NotRegular));
        let big = read_regular_bounded(dir.as_fd(), OsStr::new("big"), 64);
        assert_eq!(big.err(), Some(ReadRefusal::TooLarge));
        let small = read_regular_bounded(dir.as_fd(), OsStr::new("small"), 64).unwrap();
        assert_eq!(small.bytes, b"hello");
        std::fs::remove_dir_all(root).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn a_directory_mode_is_set_by_name_but_never_through_a_symlink() {
        use std::os::unix::fs::PermissionsExt;
        let root = tempdir("chmod-nofollow");
        let parent = open_dir_nofollow(&root).unwrap();
        std::fs::create_dir(root.join("locked-out")).unwrap();
        std::fs::set_permissions(root.join("locked-out"), PermissionsExt::from_mode(0o000))
            .unwrap();
        chmod_dir_nofollow(parent.as_fd(), OsStr::new("locked-out"), Mode::RWXU).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode(&root.join("locked-out")), 0o700);
        // A symlink swapped in for the name: its target keeps its mode.
        std::fs::create_dir(root.join("target")).unwrap();
        std::fs::set_permissions(root.join("target"), PermissionsExt::from_mode(0o755)).unwrap();
        std::os::unix::fs::symlink(root.join("target"), root.join("swapped")).unwrap();
        assert!(chmod_dir_nofollow(parent.as_fd(), OsStr::new("swapped"), Mode::RWXU).is_err());
        assert_eq!(mode(&root.join("target")), 0o755);
        std::fs::remove_dir_all(root).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn open_or_create_dir_sets_modes_of_what_it_creates_only() {
        // The umask case (0777) is exercised from JS in a child process: the
        // umask is process-wide and would disturb tests running beside this.
        let root = tempdir("mkdir");
        std::fs::create_dir(root.join("a")).unwrap();
        std::fs::set_permissions(
            root.join("a"),
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
        let target = root.join("a/b/c");
        let dir = open_or_create_dir(&target, Mode::from_raw_mode(0o700)).unwrap();
        assert!(same_inode(
            &fs::fstat(&dir).unwrap(),
            &fs::stat(&target).unwrap()
        ));
        for (name, mode) in [("a", 0o755), ("a/b", 0o700), ("a/b/c", 0o700)] {
            let stat = fs::stat(root.join(name)).unwrap();
            assert_eq!(stat.st_mode & 0o7777, mode, "{name}");
        }
        // Existing: opened as it is.
        let again = open_or_create_dir(&target, Mode::from_raw_mode(0o700)).unwrap();
        assert!(same_inode(
            &fs::fstat(&again).unwrap(),
            &fs::fstat(&dir).unwrap()
        ));
        // A file in the way.
        std::fs::write(root.join("file"), b"").unwrap();
        assert_eq!(
            open_or_create_dir(&root.join("file/x"), Mode::from_raw_mode(0o700)).unwrap_err(),
            Errno::NOTDIR
        );
        std::fs::remove_dir_all(root).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn a_symlink_swapped_in_after_mkdirat_is_refused_not_chmodded() {
        let root = tempdir("mkdir-race");
        let target = root.join("target");
        std::fs::create_dir(&target).unwrap();
        std::fs::set_permissions(&target, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let parent = open_dir_nofollow(&root).unwrap();
        // What an attacker does between our mkdirat and our openat.
        fs::mkdirat(&parent, "new", Mode::from_raw_mode(0o700)).unwrap();
        std::fs::remove_dir(root.join("new")).unwrap();
        std::os::unix::fs::symlink(&target, root.join("new")).unwrap();
        let refused = open_child_dir(parent.as_fd(), OsStr::new("new")).unwrap_err();
        assert!(refused == Errno::LOOP || refused == Errno::NOTDIR);
        assert_eq!(fs::stat(&target).unwrap().st_mode & 0o7777, 0o755);
        std::fs::remove_dir_all(root).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn a_recreated_directory_is_another_identity_even_with_its_old_inode() {
        let root = tempdir("identity");
        let dir = root.join("d");
        std::fs::create_dir(&dir).unwrap();
        let first = dir_identity(open_dir_nofollow(&dir).unwrap().as_fd()).unwrap();
        std::fs::remove_dir(&dir).unwrap();
        // Birth times have the filesystem's timestamp granularity (a clock
        // tick on ext4): a directory recreated within the same tick and
        // given the same inode number is indistinguishable. One recreated
        // later is not, though ext4 and tmpfs hand the number straight back.
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::create_dir(&dir).unwrap();
        let second = dir_identity(open_dir_nofollow(&dir).unwrap().as_fd()).unwrap();
        assert_ne!(first, second);
        if (first.dev, first.ino) == (second.dev, second.ino) {
            assert!(second.birth_ns > first.birth_ns);
        }
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn the_longest_tagged_name_counts_the_widest_pid() {
        let base = OsStr::new("state.json.lock");
        let made = tagged_name(base, "removing").len();
        let widest = platform::native::PID_MAX_DIGITS;
        let ours = std::process::id().to_string().len();
        assert!(ours <= widest);
        assert_eq!(
            longest_tagged_len(base.len(), "removing"),
            made + widest - ours
        );
    }

    #[test]
    fn tagged_names_round_trip_and_nothing_else_parses() {
        let base = OsStr::new("state.json.lock");
        let name = tagged_name(base, "removing");
        assert_eq!(
            parse_tagged_name(&name, "removing"),
            Some((base, std::process::id()))
        );
        assert_eq!(parse_tagged_name(&name, "pending"), None);
        for bad in [
            "state.json.lock.removing",
            "state.json.lock.pending.interrupted",
            "state.json.lock.pending.0123.12345678-1234-1234-1234-123456789abc",
            "state.json.lock.pending.12.not-a-uuid",
            "state.json.lock.pending.12.12345678-1234-1234-1234-123456789ABC",
            ".pending.12.12345678-1234-1234-1234-123456789abc",
        ] {
            assert_eq!(parse_tagged_name(OsStr::new(bad), "pending"), None, "{bad}");
        }
        assert_eq!(
            parse_tagged_name(
                OsStr::new("a.pending.b.lock.pending.12.12345678-1234-1234-1234-123456789abc"),
                "pending"
            ),
            Some((OsStr::new("a.pending.b.lock"), 12))
        );
    }
}
