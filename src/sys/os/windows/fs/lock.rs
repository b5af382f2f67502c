//! `flock` as a Windows byte-range lock.

use std::os::windows::io::AsRawHandle;

use windows_sys::Win32::Foundation::{ERROR_LOCK_VIOLATION, ERROR_NOT_LOCKED, GetLastError};
use windows_sys::Win32::Storage::FileSystem::{
    LOCKFILE_EXCLUSIVE_LOCK, LOCKFILE_FAIL_IMMEDIATELY, LockFileEx, UnlockFileEx,
};
use windows_sys::Win32::System::IO::OVERLAPPED;

use super::super::fd::{AsFd, BorrowedFd};
use super::super::io::Errno;
use super::flags::FlockOperation;

/// The byte the lock covers: one, far past any data. Windows locks are
/// mandatory for the range they cover (a read or write of it through
/// another handle fails), so a whole-file lock would break readers; one
/// byte at the last offset a signed 64-bit position reaches blocks no I/O
/// and still excludes every other lock of it.
const LOCK_OFFSET: u64 = i64::MAX as u64 - 1;

/// An OVERLAPPED naming [`LOCK_OFFSET`].
fn lock_position() -> OVERLAPPED {
    let mut overlapped = OVERLAPPED::default();
    overlapped.Anonymous.Anonymous.Offset = LOCK_OFFSET as u32;
    overlapped.Anonymous.Anonymous.OffsetHigh = (LOCK_OFFSET >> 32) as u32;
    overlapped
}

/// `flock(fd, operation)`: `LockFileEx` / `UnlockFileEx` of one byte (see
/// [`LOCK_OFFSET`]). Like `flock`, the lock belongs to the open file (a
/// second open of the same file, even in this process, conflicts with it;
/// a duplicated handle shares it) and goes when its last handle closes.
/// A non-blocking attempt on a held lock is `EWOULDBLOCK`. Unlocking what
/// is not locked succeeds, as it does on unix. A filesystem that has no
/// byte-range locks for the handle (NTFS has none on directories) answers
/// `EOPNOTSUPP`, which callers read as "no advisory locks here".
pub fn flock<Fd: AsFd>(fd: Fd, operation: FlockOperation) -> Result<(), Errno> {
    let fd = fd.as_fd();
    match operation {
        FlockOperation::Unlock | FlockOperation::NonBlockingUnlock => unlock(fd),
        FlockOperation::LockShared => lock(fd, 0),
        FlockOperation::LockExclusive => lock(fd, LOCKFILE_EXCLUSIVE_LOCK),
        FlockOperation::NonBlockingLockShared => lock(fd, LOCKFILE_FAIL_IMMEDIATELY),
        FlockOperation::NonBlockingLockExclusive => {
            lock(fd, LOCKFILE_EXCLUSIVE_LOCK | LOCKFILE_FAIL_IMMEDIATELY)
        }
    }
}

fn lock(fd: BorrowedFd<'_>, flags: u32) -> Result<(), Errno> {
    let mut overlapped = lock_position();
    // SAFETY: `overlapped` lives on this frame for the whole call, which is
    // synchronous (the handle was opened for synchronous I/O), so the
    // kernel does not keep it; the handle is borrowed, so open.
    #[allow(unsafe_code)]
    let ok = unsafe { LockFileEx(fd.as_raw_handle(), flags, 0, 1, 0, &mut overlapped) };
    if ok != 0 {
        return Ok(());
    }
    match Errno::last_win32() {
        // ERROR_LOCK_VIOLATION: held by another open of the file.
        Errno::BUSY => Err(Errno::WOULDBLOCK),
        // NTFS has no byte-range locks on a directory (Windows says
        // ERROR_INVALID_FUNCTION, Wine ERROR_INVALID_HANDLE): the
        // filesystem has no advisory locks for it.
        _ if is_directory(fd) => Err(Errno::OPNOTSUPP),
        errno => Err(errno),
    }
}

fn is_directory(fd: BorrowedFd<'_>) -> bool {
    super::stat::attribute_tag(fd).is_ok_and(|tag| {
        tag.FileAttributes & windows_sys::Win32::Storage::FileSystem::FILE_ATTRIBUTE_DIRECTORY != 0
    })
}

fn unlock(fd: BorrowedFd<'_>) -> Result<(), Errno> {
    let mut overlapped = lock_position();
    // SAFETY: as in `lock`.
    #[allow(unsafe_code)]
    let ok = unsafe { UnlockFileEx(fd.as_raw_handle(), 0, 1, 0, &mut overlapped) };
    if ok != 0 {
        return Ok(());
    }
    // SAFETY: reads the calling thread's last-error value.
    #[allow(unsafe_code)]
    let code = unsafe { GetLastError() };
    // Not locked through this open of the file (Windows says NOT_LOCKED,
    // Wine LOCK_VIOLATION): unlocking it is a no-op, as on unix.
    if code == ERROR_NOT_LOCKED || code == ERROR_LOCK_VIOLATION {
        Ok(())
    } else {
        Err(Errno::from_win32(code))
    }
}
