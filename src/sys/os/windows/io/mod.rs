//! rustix's `io` on Windows: [`Errno`] and reads and writes on a handle.

mod errno;

pub use errno::Errno;

use std::os::windows::io::AsRawHandle;

use windows_sys::Win32::Storage::FileSystem::{ReadFile, WriteFile};
use windows_sys::Win32::System::IO::OVERLAPPED;

use super::fd::{AsFd, OwnedFd};

/// rustix's `io::Result`.
pub type Result<T> = std::result::Result<T, Errno>;

/// The most one call moves: `ReadFile`/`WriteFile` count in `u32`. A
/// longer buffer is moved in part, as a short read or write on unix.
fn clamp_len(len: usize) -> u32 {
    u32::try_from(len).unwrap_or(u32::MAX)
}

/// `read(fd, buf)`: reads at the handle's file position. `Ok(0)` at the
/// end of the file.
pub fn read<Fd: AsFd>(fd: Fd, buf: &mut [u8]) -> Result<usize> {
    let mut done = 0u32;
    // SAFETY: `buf` is valid for writes of `clamp_len(buf.len())` bytes for
    // the whole call (synchronous: handles here are opened without
    // FILE_FLAG_OVERLAPPED / with FILE_SYNCHRONOUS_IO_NONALERT); the handle
    // is borrowed, so open; `done` is a valid out-pointer.
    #[allow(unsafe_code)]
    let ok = unsafe {
        ReadFile(
            fd.as_fd().as_raw_handle(),
            buf.as_mut_ptr(),
            clamp_len(buf.len()),
            &mut done,
            std::ptr::null_mut(),
        )
    };
    if ok == 0 {
        return Err(Errno::last_win32());
    }
    Ok(done as usize)
}

/// `write(fd, buf)`: writes at the handle's file position.
pub fn write<Fd: AsFd>(fd: Fd, buf: &[u8]) -> Result<usize> {
    write_with(fd.as_fd(), buf, None)
}

/// `pwrite(fd, buf, offset)`: `WriteFile` with the offset in an
/// `OVERLAPPED`. Unlike POSIX `pwrite`, on a synchronous handle this also
/// moves the handle's file position (to the end of what was written);
/// the crate never mixes positioned and positional writes on one handle.
pub fn pwrite<Fd: AsFd>(fd: Fd, buf: &[u8], offset: u64) -> Result<usize> {
    write_with(fd.as_fd(), buf, Some(offset))
}

/// An `OVERLAPPED` naming byte `offset` of the file.
fn overlapped_at(offset: u64) -> OVERLAPPED {
    let mut overlapped = OVERLAPPED::default();
    // The low and high halves of the offset, as the struct splits it.
    overlapped.Anonymous.Anonymous.Offset = offset as u32;
    overlapped.Anonymous.Anonymous.OffsetHigh = (offset >> 32) as u32;
    overlapped
}

fn write_with(fd: super::fd::BorrowedFd<'_>, buf: &[u8], offset: Option<u64>) -> Result<usize> {
    let mut overlapped = offset.map(overlapped_at);
    let overlapped_ptr = overlapped
        .as_mut()
        .map_or(std::ptr::null_mut(), std::ptr::from_mut);
    let mut done = 0u32;
    // SAFETY: `buf` is valid for reads of `clamp_len(buf.len())` bytes; the
    // handle is borrowed, so open; `done` is a valid out-pointer;
    // `overlapped_ptr` is null or points at `overlapped` on this frame,
    // which outlives the synchronous call.
    #[allow(unsafe_code)]
    let ok = unsafe {
        WriteFile(
            fd.as_raw_handle(),
            buf.as_ptr(),
            clamp_len(buf.len()),
            &mut done,
            overlapped_ptr,
        )
    };
    if ok == 0 {
        return Err(Errno::last_win32());
    }
    Ok(done as usize)
}

/// `fcntl(fd, F_DUPFD_CLOEXEC, min)`: a second handle to the same open
/// file (`DuplicateHandle`), so its file position and locks are shared as
/// a duplicated descriptor's are. Not inheritable (handles never are
/// here: the `CLOEXEC` of Windows). `_min` has no meaning for handles.
pub fn fcntl_dupfd_cloexec<Fd: AsFd>(fd: Fd, _min: i32) -> Result<OwnedFd> {
    fd.as_fd()
        .try_clone_to_owned()
        .map_err(|error| Errno::from_io_error(&error))
}
