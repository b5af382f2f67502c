//! Removing, renaming and linking names relative to a directory handle:
//! `unlinkat`, `renameat`, `renameat_with`, `linkat`. Each acts through a
//! handle opened to the name itself (a link, never what it points to).

use windows_sys::Wdk::Storage::FileSystem::{
    FILE_DIRECTORY_FILE, FILE_DISPOSITION_DELETE, FILE_DISPOSITION_IGNORE_READONLY_ATTRIBUTE,
    FILE_DISPOSITION_POSIX_SEMANTICS, FILE_LINK_INFORMATION, FILE_NON_DIRECTORY_FILE, FILE_OPEN,
    FILE_OPEN_REPARSE_POINT, FILE_RENAME_INFORMATION, FILE_RENAME_POSIX_SEMANTICS,
    FILE_RENAME_REPLACE_IF_EXISTS, FileDispositionInformation, FileDispositionInformationEx,
    FileLinkInformation, FileRenameInformation, FileRenameInformationEx,
};
use windows_sys::Win32::Foundation::{
    NTSTATUS, STATUS_INVALID_INFO_CLASS, STATUS_INVALID_PARAMETER, STATUS_NOT_IMPLEMENTED,
    STATUS_NOT_SUPPORTED,
};
use windows_sys::Win32::Storage::FileSystem::{
    DELETE, FILE_ATTRIBUTE_NORMAL, FILE_ATTRIBUTE_READONLY, FILE_READ_ATTRIBUTES, SYNCHRONIZE,
};

use super::super::fd::{AsFd, BorrowedFd, OwnedFd};
use super::super::io::Errno;
use super::super::nt::{self, Create};
use super::arg::{Arg, component_of};
use super::at::stat_component;
use super::flags::{AtFlags, RenameFlags};
use super::mode::{attribute_writer, set_attributes};
use super::stat::{self, FileType};

/// An open of `name` in `dir` for renaming, linking or deleting it: the
/// name itself, never what a link there points to.
fn open_for_change(
    dir: BorrowedFd<'_>,
    name: &[u16],
    access: u32,
    options: u32,
) -> Result<OwnedFd, Errno> {
    if name.is_empty() {
        // `.`: POSIX refuses to remove or rename it, too.
        return Err(Errno::INVAL);
    }
    let create = Create {
        access: access | SYNCHRONIZE | FILE_READ_ATTRIBUTES,
        attributes: FILE_ATTRIBUTE_NORMAL,
        disposition: FILE_OPEN,
        options: options | FILE_OPEN_REPARSE_POINT,
    };
    nt::open_at(dir, name, create)
}

/// `unlinkat(dir, name, flags)`: removes `name` from `dir` through a handle
/// opened to it (`DELETE` access, the name itself if it is a link). With
/// `REMOVEDIR` only a directory (`ENOTDIR` otherwise, a link included),
/// and only an empty one (`ENOTEMPTY`); without it anything but a
/// directory (`EISDIR`; a link to a directory is removed, as on unix).
/// The removal has POSIX semantics where the filesystem has them (the name
/// goes at once, even while others hold the file open); elsewhere (older
/// Windows, FAT, Wine) the name goes when the last handle to the file
/// closes, ours being closed right away.
pub fn unlinkat<Fd: AsFd, P: Arg>(dir: Fd, name: P, flags: AtFlags) -> Result<(), Errno> {
    let name = component_of(name)?;
    let dir = dir.as_fd();
    let target = if flags.contains(AtFlags::REMOVEDIR) {
        let target = open_for_change(dir, &name, DELETE, FILE_DIRECTORY_FILE)?;
        if stat::is_link(target.as_fd())? {
            return Err(Errno::NOTDIR);
        }
        target
    } else {
        match open_for_change(dir, &name, DELETE, FILE_NON_DIRECTORY_FILE) {
            Err(Errno::ISDIR) => open_directory_link(dir, &name)?,
            other => other?,
        }
    };
    delete_open(target.as_fd())
}

/// The directory `dir` is open on, opened again through that handle with
/// `DELETE` (the object, never a link's target, not whatever has its name
/// now): what [`delete_open`] removes once it is empty (`ENOTEMPTY` before).
/// Unix has no such call; there the caller checks the name right before an
/// `rmdir` by name, and `flock` makes removers take turns. Fails (`EBUSY`, a sharing violation) while
/// another handle to it does not share deletion — a shell whose current
/// directory it is.
pub fn open_dir_for_delete(dir: BorrowedFd<'_>) -> Result<OwnedFd, Errno> {
    let create = Create {
        access: DELETE | SYNCHRONIZE | FILE_READ_ATTRIBUTES,
        attributes: FILE_ATTRIBUTE_NORMAL,
        disposition: FILE_OPEN,
        options: FILE_DIRECTORY_FILE | FILE_OPEN_REPARSE_POINT,
    };
    nt::open_at(dir, &[], create)
}

/// `name` opened for deletion if it is a link with the directory attribute
/// (a directory symlink or junction); `EISDIR` for a real directory.
fn open_directory_link(dir: BorrowedFd<'_>, name: &[u16]) -> Result<OwnedFd, Errno> {
    let target = open_for_change(dir, name, DELETE, 0)?;
    if stat::is_link(target.as_fd())? {
        Ok(target)
    } else {
        Err(Errno::ISDIR)
    }
}

/// Whether `status` says an information class or one of its flags is not
/// supported (rather than the operation refused), so an older form is
/// worth trying.
fn unsupported(status: NTSTATUS) -> bool {
    matches!(
        status,
        STATUS_INVALID_INFO_CLASS
            | STATUS_NOT_IMPLEMENTED
            | STATUS_INVALID_PARAMETER
            | STATUS_NOT_SUPPORTED
    )
}

/// Deletes the open file: `FileDispositionInformationEx` with POSIX
/// semantics (and regardless of the read-only attribute, as unix ignores
/// a file's own mode when unlinking), falling back to the plain
/// `FileDispositionInformation` where that class or its flags are not
/// supported.
pub fn delete_open(target: BorrowedFd<'_>) -> Result<(), Errno> {
    let flags = FILE_DISPOSITION_DELETE
        | FILE_DISPOSITION_POSIX_SEMANTICS
        | FILE_DISPOSITION_IGNORE_READONLY_ATTRIBUTE;
    let status = nt::set_information(target, &[u64::from(flags)], 4, FileDispositionInformationEx);
    if nt::succeeded(status) {
        return Ok(());
    }
    if !unsupported(status) {
        return Err(Errno::from_ntstatus(status));
    }
    match mark_for_deletion(target) {
        Err(Errno::ACCESS) => delete_read_only(target),
        other => other,
    }
}

/// `FileDispositionInformation`: the name goes when the last handle to
/// the file closes. FILE_DISPOSITION_INFORMATION is one BOOLEAN:
/// `DeleteFile = TRUE`.
fn mark_for_deletion(target: BorrowedFd<'_>) -> Result<(), Errno> {
    let status = nt::set_information(target, &[1], 1, FileDispositionInformation);
    if nt::succeeded(status) {
        Ok(())
    } else {
        Err(Errno::from_ntstatus(status))
    }
}

/// Deletes a read-only file where the filesystem cannot be told to ignore
/// the attribute (no `FILE_DISPOSITION_IGNORE_READONLY_ATTRIBUTE`: Windows
/// before 10 1809, Wine): the attribute is cleared through a second
/// handle, the deletion tried again, and the attribute restored should it
/// still fail. `EACCES` for anything not read-only.
fn delete_read_only(target: BorrowedFd<'_>) -> Result<(), Errno> {
    let attributes = stat::basic_info(target)?.FileAttributes;
    if attributes & FILE_ATTRIBUTE_READONLY == 0 {
        return Err(Errno::ACCESS);
    }
    let writer = attribute_writer(target)?;
    set_attributes(writer.as_fd(), attributes & !FILE_ATTRIBUTE_READONLY)?;
    mark_for_deletion(target).inspect_err(|_| {
        let _ = set_attributes(writer.as_fd(), attributes);
    })
}

/// `renameat(src_dir, src_name, dst_dir, dst_name)`: replaces what stands
/// at the destination (see [`renameat_with`]).
pub fn renameat<Fd1: AsFd, P1: Arg, Fd2: AsFd, P2: Arg>(
    src_dir: Fd1,
    src_name: P1,
    dst_dir: Fd2,
    dst_name: P2,
) -> Result<(), Errno> {
    renameat_with(src_dir, src_name, dst_dir, dst_name, RenameFlags::empty())
}

/// `renameat2(src_dir, src_name, dst_dir, dst_name, flags)`: opens the
/// source's name itself (`DELETE` access, a link as itself) relative to
/// `src_dir` and renames it to `dst_name` relative to `dst_dir`
/// (`FileRenameInformation` with `RootDirectory = dst_dir`).
///
/// - `NOREPLACE`: `ReplaceIfExists = FALSE`; anything at the destination
///   is `EEXIST` and nothing changes.
/// - `EXCHANGE`: `ENOSYS` (Windows has no atomic exchange).
/// - no flag: replaces a file at the destination, with POSIX semantics
///   where the filesystem has them (even while it is open). A directory at
///   the destination is never replaced (Windows cannot, even an empty one):
///   `EEXIST`, as POSIX says for a directory that is not empty.
pub fn renameat_with<Fd1: AsFd, P1: Arg, Fd2: AsFd, P2: Arg>(
    src_dir: Fd1,
    src_name: P1,
    dst_dir: Fd2,
    dst_name: P2,
    flags: RenameFlags,
) -> Result<(), Errno> {
    if flags.contains(RenameFlags::EXCHANGE) {
        return Err(Errno::NOSYS);
    }
    if !(flags & !RenameFlags::NOREPLACE).is_empty() {
        return Err(Errno::INVAL);
    }
    let (src_name, dst_name) = (component_of(src_name)?, component_of(dst_name)?);
    if dst_name.is_empty() {
        return Err(Errno::INVAL);
    }
    let (src_dir, dst_dir) = (src_dir.as_fd(), dst_dir.as_fd());
    let source = open_for_change(src_dir, &src_name, DELETE, 0)?;
    let replace = !flags.contains(RenameFlags::NOREPLACE);
    match rename_open(source.as_fd(), dst_dir, &dst_name, replace) {
        Err(Errno::ACCESS) if replace && is_directory_at(dst_dir, &dst_name) => Err(Errno::EXIST),
        other => other,
    }
}

/// Whether `dir/name` is a directory (not following a link).
fn is_directory_at(dir: BorrowedFd<'_>, name: &[u16]) -> bool {
    stat_component(dir, name, AtFlags::SYMLINK_NOFOLLOW)
        .is_ok_and(|stat| FileType::from_raw_mode(stat.st_mode) == FileType::Directory)
}

/// Renames the open `source` to `dst_name` in `dst_dir`: replacing with
/// `FileRenameInformationEx` (POSIX semantics) where supported, the plain
/// class otherwise, which is also what a no-replace rename uses.
fn rename_open(
    source: BorrowedFd<'_>,
    dst_dir: BorrowedFd<'_>,
    dst_name: &[u16],
    replace: bool,
) -> Result<(), Errno> {
    if replace {
        let flags = FILE_RENAME_REPLACE_IF_EXISTS | FILE_RENAME_POSIX_SEMANTICS;
        let (info, len) = rename_information(flags, dst_dir, dst_name);
        let status = nt::set_information(source, &info, len, FileRenameInformationEx);
        if nt::succeeded(status) {
            return Ok(());
        }
        if !unsupported(status) {
            return Err(Errno::from_ntstatus(status));
        }
    }
    // `ReplaceIfExists` is a BOOLEAN at the start of the same union.
    let (info, len) = rename_information(u32::from(replace), dst_dir, dst_name);
    let status = nt::set_information(source, &info, len, FileRenameInformation);
    if nt::succeeded(status) {
        Ok(())
    } else {
        Err(Errno::from_ntstatus(status))
    }
}

/// A `FILE_RENAME_INFORMATION` (`FILE_LINK_INFORMATION` has the same
/// layout) in an 8-byte aligned buffer, and its length in bytes: `flags`
/// (or `ReplaceIfExists` in the low byte), `RootDirectory = dir`, the name
/// and its length in bytes.
fn rename_information(flags: u32, dir: BorrowedFd<'_>, name: &[u16]) -> (Vec<u64>, usize) {
    use std::mem::offset_of;
    use std::os::windows::io::AsRawHandle;
    const ROOT: usize = offset_of!(FILE_RENAME_INFORMATION, RootDirectory);
    const LENGTH: usize = offset_of!(FILE_RENAME_INFORMATION, FileNameLength);
    const NAME: usize = offset_of!(FILE_RENAME_INFORMATION, FileName);
    const _: () = assert!(offset_of!(FILE_LINK_INFORMATION, FileName) == NAME);
    // A component is at most NAME_MAX_UNITS units: the byte count fits.
    let name_bytes: Vec<u8> = name.iter().flat_map(|unit| unit.to_ne_bytes()).collect();
    let len = NAME + name_bytes.len();
    // At least the struct's own size: it declares one name unit.
    let mut bytes = vec![0u8; len.max(std::mem::size_of::<FILE_RENAME_INFORMATION>())];
    bytes[..4].copy_from_slice(&flags.to_ne_bytes());
    bytes[ROOT..ROOT + 8].copy_from_slice(&(dir.as_raw_handle().addr() as u64).to_ne_bytes());
    bytes[LENGTH..LENGTH + 4].copy_from_slice(&(name_bytes.len() as u32).to_ne_bytes());
    bytes[NAME..len].copy_from_slice(&name_bytes);
    (
        nt::aligned(&bytes),
        len.max(std::mem::size_of::<FILE_RENAME_INFORMATION>()),
    )
}

/// `linkat(src_dir, src_name, dst_dir, dst_name, flags)`: a hard link
/// (`FileLinkInformation`), never replacing (`EEXIST`). The source is
/// the name itself (`AT_SYMLINK_FOLLOW` is not supported: `EINVAL`).
/// Directories cannot be linked (`EPERM`, as POSIX).
pub fn linkat<Fd1: AsFd, P1: Arg, Fd2: AsFd, P2: Arg>(
    src_dir: Fd1,
    src_name: P1,
    dst_dir: Fd2,
    dst_name: P2,
    flags: AtFlags,
) -> Result<(), Errno> {
    if !flags.is_empty() {
        return Err(Errno::INVAL);
    }
    let (src_name, dst_name) = (component_of(src_name)?, component_of(dst_name)?);
    if dst_name.is_empty() {
        return Err(Errno::EXIST);
    }
    let source = match open_for_change(src_dir.as_fd(), &src_name, 0, FILE_NON_DIRECTORY_FILE) {
        Err(Errno::ISDIR) => return Err(Errno::PERM),
        other => other?,
    };
    let (info, len) = rename_information(0, dst_dir.as_fd(), &dst_name);
    let status = nt::set_information(source.as_fd(), &info, len, FileLinkInformation);
    if nt::succeeded(status) {
        Ok(())
    } else {
        Err(Errno::from_ntstatus(status))
    }
}
