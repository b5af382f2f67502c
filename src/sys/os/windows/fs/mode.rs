//! The one permission bit Windows has: `fchmod` and `fchmodat` as the
//! owner's write bit, the read-only attribute of a file.

use windows_sys::Wdk::Storage::FileSystem::{FILE_OPEN, FILE_OPEN_REPARSE_POINT};
use windows_sys::Win32::Storage::FileSystem::{
    FILE_ATTRIBUTE_DIRECTORY, FILE_ATTRIBUTE_NORMAL, FILE_ATTRIBUTE_READONLY, FILE_BASIC_INFO,
    FILE_READ_ATTRIBUTES, FILE_WRITE_ATTRIBUTES, FileBasicInfo, FlushFileBuffers, SYNCHRONIZE,
    SetFileInformationByHandle,
};

use super::super::fd::{AsFd, BorrowedFd, OwnedFd};
use super::super::io::Errno;
use super::super::nt::{self, Create};
use super::arg::{Arg, component_of};
use super::flags::{AtFlags, Mode};
use super::stat::{self, open_for_attributes};

/// `fchmod(fd, mode)`: only the owner's write bit has a meaning on
/// Windows, and only for a file: without it the file is made read-only
/// (`FILE_ATTRIBUTE_READONLY`), with it writable. Directories are left as
/// they are (Windows does not enforce the attribute on them; Explorer
/// reads it as "customized folder"). Nothing is written when the
/// attribute is already right, so a handle without `FILE_WRITE_ATTRIBUTES`
/// does for the common case; otherwise a second handle with that access
/// is opened to the same file.
pub fn fchmod<Fd: AsFd>(fd: Fd, mode: Mode) -> Result<(), Errno> {
    let fd = fd.as_fd();
    let basic = stat::basic_info(fd)?;
    let attributes = basic.FileAttributes;
    if attributes & FILE_ATTRIBUTE_DIRECTORY != 0 {
        return Ok(());
    }
    let wanted = if mode.contains(Mode::WUSR) {
        attributes & !FILE_ATTRIBUTE_READONLY
    } else {
        attributes | FILE_ATTRIBUTE_READONLY
    };
    if wanted == attributes {
        return Ok(());
    }
    set_attributes(attribute_writer(fd)?.as_fd(), wanted)
}

/// Sets a file's attributes and no time (zero times mean "unchanged"); no
/// attribute left is said `FILE_ATTRIBUTE_NORMAL` (zero would also mean
/// "unchanged").
pub(super) fn set_attributes(fd: BorrowedFd<'_>, attributes: u32) -> Result<(), Errno> {
    use std::os::windows::io::AsRawHandle;
    let info = FILE_BASIC_INFO {
        FileAttributes: if attributes == 0 {
            FILE_ATTRIBUTE_NORMAL
        } else {
            attributes
        },
        ..FILE_BASIC_INFO::default()
    };
    // SAFETY: `info` is a FILE_BASIC_INFO, the struct FileBasicInfo takes,
    // read for exactly its size during the call; the handle is borrowed.
    #[allow(unsafe_code)]
    let ok = unsafe {
        SetFileInformationByHandle(
            fd.as_raw_handle(),
            FileBasicInfo,
            std::ptr::from_ref(&info).cast(),
            std::mem::size_of::<FILE_BASIC_INFO>() as u32,
        )
    };
    if ok == 0 {
        Err(Errno::last_win32())
    } else {
        Ok(())
    }
}

/// `fsync(fd)`: `FlushFileBuffers`, for a file open for writing (what
/// `updateFile` flushes before its rename).
pub fn fsync<Fd: AsFd>(fd: Fd) -> Result<(), Errno> {
    use std::os::windows::io::AsRawHandle;
    // SAFETY: the handle is borrowed for the call and nothing else is passed.
    #[allow(unsafe_code)]
    let ok = unsafe { FlushFileBuffers(fd.as_fd().as_raw_handle()) };
    if ok == 0 {
        Err(Errno::last_win32())
    } else {
        Ok(())
    }
}

/// `fchmodat(dir, name, mode, flags)`: [`fchmod`] of `name` in `dir`; with
/// `SYMLINK_NOFOLLOW` of a link itself.
pub fn chmodat<Fd: AsFd, P: Arg>(
    dir: Fd,
    name: P,
    mode: Mode,
    flags: AtFlags,
) -> Result<(), Errno> {
    let name = component_of(name)?;
    fchmod(open_for_attributes(dir.as_fd(), &name, flags)?, mode)
}

/// A second handle to the file `fd` is open on, allowed to change its
/// attributes.
pub(super) fn attribute_writer(fd: BorrowedFd<'_>) -> Result<OwnedFd, Errno> {
    nt::open_at(
        fd,
        &[],
        Create {
            access: SYNCHRONIZE | FILE_READ_ATTRIBUTES | FILE_WRITE_ATTRIBUTES,
            attributes: FILE_ATTRIBUTE_NORMAL,
            disposition: FILE_OPEN,
            options: FILE_OPEN_REPARSE_POINT,
        },
    )
}
