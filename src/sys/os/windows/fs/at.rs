//! Opening, creating and describing names relative to a directory handle:
//! `openat`, `mkdirat`, `statat`. Every name is one component opened by
//! `NtCreateFile` relative to the handle given, never a path.

use windows_sys::Wdk::Storage::FileSystem::{
    FILE_CREATE, FILE_DIRECTORY_FILE, FILE_NON_DIRECTORY_FILE, FILE_OPEN, FILE_OPEN_IF,
    FILE_OPEN_REPARSE_POINT, FILE_OVERWRITE, FILE_OVERWRITE_IF,
};
use windows_sys::Win32::Storage::FileSystem::{
    FILE_ATTRIBUTE_NORMAL, FILE_ATTRIBUTE_REPARSE_POINT, FILE_GENERIC_READ, FILE_GENERIC_WRITE,
    FILE_LIST_DIRECTORY, FILE_READ_ATTRIBUTES, FILE_TRAVERSE, SYNCHRONIZE,
};

use super::super::fd::{AsFd, BorrowedFd, OwnedFd};
use super::super::io::Errno;
use super::super::nt::{self, Create};
use super::arg::{Arg, component_of};
use super::flags::{AtFlags, Mode, OFlags};
use super::mode::fchmod;
use super::stat::{self, Stat};

/// The access an open with `flags` asks for. Always `SYNCHRONIZE` (the
/// handle is synchronous) and `FILE_READ_ATTRIBUTES` (so `fstat` works on
/// every handle, as on unix); a directory also `FILE_LIST_DIRECTORY` and
/// `FILE_TRAVERSE`.
fn access_of(flags: OFlags) -> u32 {
    let base = SYNCHRONIZE | FILE_READ_ATTRIBUTES;
    if flags.contains(OFlags::PATH) {
        return base;
    }
    let data = if flags.contains(OFlags::RDWR) {
        FILE_GENERIC_READ | FILE_GENERIC_WRITE
    } else if flags.contains(OFlags::WRONLY) {
        FILE_GENERIC_WRITE
    } else {
        FILE_GENERIC_READ
    };
    let directory = if flags.contains(OFlags::DIRECTORY) {
        FILE_LIST_DIRECTORY | FILE_TRAVERSE
    } else {
        0
    };
    base | data | directory
}

/// Whether `flags` ask to write (a directory cannot be opened so).
fn writes(flags: OFlags) -> bool {
    !flags.contains(OFlags::PATH) && flags.intersects(OFlags::WRONLY | OFlags::RDWR)
}

/// `CreateDisposition` from `CREATE`, `EXCL` and `TRUNC`.
fn disposition_of(flags: OFlags) -> u32 {
    let create = flags.contains(OFlags::CREATE);
    let truncate = flags.contains(OFlags::TRUNC);
    match (create, flags.contains(OFlags::EXCL), truncate) {
        (true, true, _) => FILE_CREATE,
        (true, false, true) => FILE_OVERWRITE_IF,
        (true, false, false) => FILE_OPEN_IF,
        (false, _, true) => FILE_OVERWRITE,
        (false, _, false) => FILE_OPEN,
    }
}

/// `CreateOptions`: `DIRECTORY` requires a directory; writing or creating
/// (without `DIRECTORY`) requires a non-directory (`EISDIR`); `NOFOLLOW`
/// opens a reparse point itself instead of following it.
fn options_of(flags: OFlags) -> u32 {
    let mut options = 0;
    if flags.contains(OFlags::DIRECTORY) {
        options |= FILE_DIRECTORY_FILE;
    } else if writes(flags) || flags.contains(OFlags::CREATE) {
        options |= FILE_NON_DIRECTORY_FILE;
    }
    if flags.contains(OFlags::NOFOLLOW) {
        options |= FILE_OPEN_REPARSE_POINT;
    }
    options
}

/// Whether a file this open creates is to be made read-only: `mode`
/// lacks the owner's write bit (the one permission bit Windows has). Set
/// after the creation, through the new handle, so the creator may still
/// write to it, as on unix (Wine refuses write access to a file created
/// read-only).
fn creates_read_only(flags: OFlags, mode: Mode) -> bool {
    flags.contains(OFlags::CREATE)
        && !flags.contains(OFlags::DIRECTORY)
        && !mode.contains(Mode::WUSR)
}

/// `openat(dir, name, flags, mode)`: `NtCreateFile` of `name` relative to
/// `dir`, shared for reading, writing and deleting (others may rename or
/// remove it while we hold it, as on unix). With `NOFOLLOW` a symlink or
/// junction is refused with `ELOOP` (it is opened as itself, seen to be a
/// link and closed); another kind of reparse point (a dedup or cloud
/// placeholder) is opened again following it, and kept only if that is
/// the same file. `mode` matters only for the owner's write bit of a new
/// file (see `Mode`).
pub fn openat<Fd: AsFd, P: Arg>(
    dir: Fd,
    name: P,
    flags: OFlags,
    mode: Mode,
) -> Result<OwnedFd, Errno> {
    let name = component_of(name)?;
    open_component(dir.as_fd(), &name, flags, mode)
}

/// [`openat`] of a checked component.
pub fn open_component(
    dir: BorrowedFd<'_>,
    name: &[u16],
    flags: OFlags,
    mode: Mode,
) -> Result<OwnedFd, Errno> {
    let create = Create {
        access: access_of(flags),
        attributes: FILE_ATTRIBUTE_NORMAL,
        disposition: disposition_of(flags),
        options: options_of(flags),
    };
    if name.is_empty() {
        return reopen(dir, create);
    }
    let (opened, what) = nt::create_at(dir, name, create).map_err(Errno::from_ntstatus)?;
    if what == nt::FILE_CREATED && creates_read_only(flags, mode) {
        fchmod(&opened, mode)?;
    }
    if !flags.contains(OFlags::NOFOLLOW) {
        return Ok(opened);
    }
    refuse_link(opened, dir, name, create)
}

/// A new open of the file `dir` is open on (`.`): its own file position
/// and listing state. Nothing is created, and the open is of the object
/// itself (`FILE_OPEN_REPARSE_POINT`): a reparse point set on the directory
/// since `dir` was opened is not followed elsewhere.
///
/// Wine reopens by the path the handle was opened with, so for a
/// directory renamed since, the open or the first use of the new handle
/// fails with an invalid handle (which Windows never says of a handle
/// that is open). There the answer is a duplicate of `dir`, which shares
/// its file position and listing state: two listings of one handle at
/// once would interleave under Wine.
fn reopen(dir: BorrowedFd<'_>, create: Create) -> Result<OwnedFd, Errno> {
    let create = Create {
        disposition: FILE_OPEN,
        options: create.options | FILE_OPEN_REPARSE_POINT,
        ..create
    };
    let reopened = nt::open_at(dir, &[], create).and_then(|handle| {
        // The first use, where Wine finds the stale path.
        stat::attribute_tag(handle.as_fd()).map(|_| handle)
    });
    match reopened {
        Err(Errno::BADF) => super::super::io::fcntl_dupfd_cloexec(dir, 0),
        other => other,
    }
}

/// What a no-follow open keeps: `ELOOP` for a link; for a reparse point
/// that is no link, the file behind it (opened following it, and only if
/// it is the very file the no-follow open found).
fn refuse_link(
    opened: OwnedFd,
    dir: BorrowedFd<'_>,
    name: &[u16],
    create: Create,
) -> Result<OwnedFd, Errno> {
    let tag = stat::attribute_tag(opened.as_fd())?;
    if tag.FileAttributes & FILE_ATTRIBUTE_REPARSE_POINT == 0 {
        return Ok(opened);
    }
    if stat::is_link_tag(tag.ReparseTag) {
        return Err(Errno::LOOP);
    }
    let followed = nt::open_at(
        dir,
        name,
        Create {
            options: create.options | FILE_OPEN_REPARSE_POINT,
            disposition: FILE_OPEN,
            ..create
        },
    )?;
    let (first, second) = (stat::fstat(&opened)?, stat::fstat(&followed)?);
    if (first.st_dev, first.st_ino) != (second.st_dev, second.st_ino) {
        // The name was swapped between the two opens.
        return Err(Errno::LOOP);
    }
    Ok(followed)
}

/// `mkdirat(dir, name, mode)`: creates the directory `name` in `dir`
/// (`FILE_CREATE | FILE_DIRECTORY_FILE`). `mode` is ignored: a directory
/// on Windows has no permission bits (its ACL is inherited from `dir`).
pub fn mkdirat<Fd: AsFd, P: Arg>(dir: Fd, name: P, _mode: Mode) -> Result<(), Errno> {
    let name = component_of(name)?;
    if name.is_empty() {
        return Err(Errno::EXIST);
    }
    let create = Create {
        access: SYNCHRONIZE | FILE_READ_ATTRIBUTES,
        attributes: FILE_ATTRIBUTE_NORMAL,
        disposition: FILE_CREATE,
        options: FILE_DIRECTORY_FILE | FILE_OPEN_REPARSE_POINT,
    };
    nt::open_at(dir.as_fd(), &name, create).map(drop)
}

/// `statat(dir, name, flags)`: [`stat::fstat`] of `name` opened for its
/// attributes only; with `SYMLINK_NOFOLLOW` a link is described itself.
pub fn statat<Fd: AsFd, P: Arg>(dir: Fd, name: P, flags: AtFlags) -> Result<Stat, Errno> {
    let name = component_of(name)?;
    stat_component(dir.as_fd(), &name, flags)
}

pub(super) fn stat_component(
    dir: BorrowedFd<'_>,
    name: &[u16],
    flags: AtFlags,
) -> Result<Stat, Errno> {
    stat::fstat(stat::open_for_attributes(dir, name, flags)?)
}
