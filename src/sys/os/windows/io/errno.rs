//! POSIX error numbers on Windows, mapped from Win32 errors and NTSTATUS.

use windows_sys::Win32::Foundation as w;

/// An error number with its POSIX name, as rustix's `Errno`.
///
/// The numbers are Linux's (asm-generic), not the MSVC CRT's: the crate is
/// written and tested where `EWOULDBLOCK == EAGAIN` and
/// `ENOTSUP == EOPNOTSUPP`, and those aliases keep meaning the same here.
/// They never reach the OS: Windows calls report Win32 errors or NTSTATUS
/// codes, which [`Errno::from_win32`] and [`Errno::from_ntstatus`] map.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Errno(i32);

/// One row of the name table: the errno, its symbolic name, its message.
struct Described(Errno, &'static str, &'static str);

impl Errno {
    pub const PERM: Errno = Errno(1);
    pub const NOENT: Errno = Errno(2);
    pub const SRCH: Errno = Errno(3);
    pub const INTR: Errno = Errno(4);
    pub const IO: Errno = Errno(5);
    pub const NXIO: Errno = Errno(6);
    pub const BADF: Errno = Errno(9);
    pub const AGAIN: Errno = Errno(11);
    pub const WOULDBLOCK: Errno = Errno::AGAIN;
    pub const NOMEM: Errno = Errno(12);
    pub const ACCESS: Errno = Errno(13);
    pub const FAULT: Errno = Errno(14);
    pub const BUSY: Errno = Errno(16);
    pub const EXIST: Errno = Errno(17);
    pub const XDEV: Errno = Errno(18);
    pub const NOTDIR: Errno = Errno(20);
    pub const ISDIR: Errno = Errno(21);
    pub const INVAL: Errno = Errno(22);
    pub const NFILE: Errno = Errno(23);
    pub const MFILE: Errno = Errno(24);
    pub const NOSPC: Errno = Errno(28);
    pub const ROFS: Errno = Errno(30);
    pub const MLINK: Errno = Errno(31);
    pub const NAMETOOLONG: Errno = Errno(36);
    pub const NOLCK: Errno = Errno(37);
    pub const NOSYS: Errno = Errno(38);
    pub const NOTEMPTY: Errno = Errno(39);
    pub const LOOP: Errno = Errno(40);
    pub const OPNOTSUPP: Errno = Errno(95);
    pub const NOTSUP: Errno = Errno::OPNOTSUPP;
    pub const STALE: Errno = Errno(116);
    pub const DQUOT: Errno = Errno(122);

    /// The number, as rustix's `raw_os_error` gives it (a POSIX errno,
    /// never a Win32 code: see the type's docs).
    pub const fn raw_os_error(self) -> i32 {
        self.0
    }

    /// The errno numbered `raw` (see the type's docs for the numbering).
    pub const fn from_raw_os_error(raw: i32) -> Errno {
        Errno(raw)
    }

    /// The errno a Win32 error code (`GetLastError`) stands for.
    ///
    /// | Win32 error | errno |
    /// |---|---|
    /// | `FILE_NOT_FOUND`, `PATH_NOT_FOUND`, `INVALID_DRIVE`, `BAD_NETPATH`, `BAD_NET_NAME` | `ENOENT` |
    /// | `ALREADY_EXISTS`, `FILE_EXISTS` | `EEXIST` |
    /// | `ACCESS_DENIED` | `EACCES` |
    /// | `PRIVILEGE_NOT_HELD` | `EPERM` |
    /// | `SHARING_VIOLATION`, `LOCK_VIOLATION`, `BUSY`, `CURRENT_DIRECTORY`, `DELETE_PENDING` | `EBUSY` |
    /// | `DIR_NOT_EMPTY` | `ENOTEMPTY` |
    /// | `DIRECTORY` (the name is not a directory) | `ENOTDIR` |
    /// | `DIRECTORY_NOT_SUPPORTED` | `EISDIR` |
    /// | `NOT_SAME_DEVICE` | `EXDEV` |
    /// | `DISK_FULL`, `HANDLE_DISK_FULL` | `ENOSPC` |
    /// | `DISK_QUOTA_EXCEEDED` | `EDQUOT` |
    /// | `WRITE_PROTECT` | `EROFS` |
    /// | `FILENAME_EXCED_RANGE` | `ENAMETOOLONG` |
    /// | `INVALID_NAME`, `BAD_PATHNAME`, `INVALID_PARAMETER` | `EINVAL` |
    /// | `NOT_SUPPORTED`, `INVALID_FUNCTION` | `EOPNOTSUPP` |
    /// | `CALL_NOT_IMPLEMENTED` | `ENOSYS` |
    /// | `TOO_MANY_OPEN_FILES` | `EMFILE` |
    /// | `NOT_ENOUGH_MEMORY`, `OUTOFMEMORY` | `ENOMEM` |
    /// | `INVALID_HANDLE` | `EBADF` |
    /// | `STOPPED_ON_SYMLINK`, `CANT_RESOLVE_FILENAME` | `ELOOP` |
    /// | `TOO_MANY_LINKS` | `EMLINK` |
    /// | `NOACCESS` | `EFAULT` |
    /// | anything else | `EIO` |
    ///
    /// A name whose deletion is pending (`DELETE_PENDING`) is `EBUSY`: it
    /// still stands (so not `ENOENT`, which would tell a creator its parent
    /// is missing) and goes by itself when its last handle closes, which
    /// is what the crate's retry of transient errors waits out.
    pub fn from_win32(code: u32) -> Errno {
        match code {
            w::ERROR_FILE_NOT_FOUND
            | w::ERROR_PATH_NOT_FOUND
            | w::ERROR_INVALID_DRIVE
            | w::ERROR_BAD_NETPATH
            | w::ERROR_BAD_NET_NAME => Errno::NOENT,
            w::ERROR_ALREADY_EXISTS | w::ERROR_FILE_EXISTS => Errno::EXIST,
            w::ERROR_ACCESS_DENIED => Errno::ACCESS,
            w::ERROR_PRIVILEGE_NOT_HELD => Errno::PERM,
            w::ERROR_SHARING_VIOLATION
            | w::ERROR_LOCK_VIOLATION
            | w::ERROR_BUSY
            | w::ERROR_CURRENT_DIRECTORY
            | w::ERROR_DELETE_PENDING => Errno::BUSY,
            w::ERROR_DIR_NOT_EMPTY => Errno::NOTEMPTY,
            w::ERROR_DIRECTORY => Errno::NOTDIR,
            w::ERROR_DIRECTORY_NOT_SUPPORTED => Errno::ISDIR,
            w::ERROR_NOT_SAME_DEVICE => Errno::XDEV,
            w::ERROR_DISK_FULL | w::ERROR_HANDLE_DISK_FULL => Errno::NOSPC,
            w::ERROR_DISK_QUOTA_EXCEEDED => Errno::DQUOT,
            w::ERROR_WRITE_PROTECT => Errno::ROFS,
            w::ERROR_FILENAME_EXCED_RANGE => Errno::NAMETOOLONG,
            w::ERROR_INVALID_NAME | w::ERROR_BAD_PATHNAME | w::ERROR_INVALID_PARAMETER => {
                Errno::INVAL
            }
            w::ERROR_NOT_SUPPORTED | w::ERROR_INVALID_FUNCTION => Errno::OPNOTSUPP,
            w::ERROR_CALL_NOT_IMPLEMENTED => Errno::NOSYS,
            w::ERROR_TOO_MANY_OPEN_FILES => Errno::MFILE,
            w::ERROR_NOT_ENOUGH_MEMORY | w::ERROR_OUTOFMEMORY => Errno::NOMEM,
            w::ERROR_INVALID_HANDLE => Errno::BADF,
            w::ERROR_STOPPED_ON_SYMLINK | w::ERROR_CANT_RESOLVE_FILENAME => Errno::LOOP,
            w::ERROR_TOO_MANY_LINKS => Errno::MLINK,
            w::ERROR_NOACCESS => Errno::FAULT,
            _ => Errno::IO,
        }
    }

    /// The errno an NTSTATUS failure stands for: the statuses the calls
    /// here return, by name (the same choices as [`Errno::from_win32`],
    /// with `FILE_IS_A_DIRECTORY` → `EISDIR`, `NOT_A_DIRECTORY` →
    /// `ENOTDIR`, `OBJECT_NAME_COLLISION` → `EEXIST`, `DELETE_PENDING` →
    /// `EBUSY`, `INVALID_DEVICE_REQUEST` / `INVALID_INFO_CLASS` →
    /// `EOPNOTSUPP`, `NOT_IMPLEMENTED` → `ENOSYS`, `STOPPED_ON_SYMLINK` /
    /// `REPARSE_POINT_NOT_RESOLVED` → `ELOOP`, `FILE_DELETED` →
    /// `ENOENT`), and any other through its Win32 equivalent
    /// (`RtlNtStatusToDosError`), `EIO` when that has none either.
    pub fn from_ntstatus(status: i32) -> Errno {
        Self::from_known_ntstatus(status).unwrap_or_else(|| {
            // SAFETY: a pure table lookup in ntdll on an integer; no
            // pointers, no state.
            #[allow(unsafe_code)]
            let code = unsafe { w::RtlNtStatusToDosError(status) };
            Errno::from_win32(code)
        })
    }

    fn from_known_ntstatus(status: i32) -> Option<Errno> {
        Some(match status {
            w::STATUS_OBJECT_NAME_NOT_FOUND
            | w::STATUS_OBJECT_PATH_NOT_FOUND
            | w::STATUS_NO_SUCH_FILE
            | w::STATUS_BAD_NETWORK_PATH
            | w::STATUS_BAD_NETWORK_NAME
            | w::STATUS_FILE_DELETED => Errno::NOENT,
            w::STATUS_OBJECT_NAME_COLLISION => Errno::EXIST,
            w::STATUS_ACCESS_DENIED | w::STATUS_CANNOT_DELETE => Errno::ACCESS,
            w::STATUS_PRIVILEGE_NOT_HELD => Errno::PERM,
            w::STATUS_SHARING_VIOLATION
            | w::STATUS_FILE_LOCK_CONFLICT
            | w::STATUS_LOCK_NOT_GRANTED
            | w::STATUS_DELETE_PENDING => Errno::BUSY,
            w::STATUS_DIRECTORY_NOT_EMPTY => Errno::NOTEMPTY,
            w::STATUS_NOT_A_DIRECTORY => Errno::NOTDIR,
            w::STATUS_FILE_IS_A_DIRECTORY => Errno::ISDIR,
            w::STATUS_NOT_SAME_DEVICE => Errno::XDEV,
            w::STATUS_DISK_FULL => Errno::NOSPC,
            w::STATUS_DISK_QUOTA_EXCEEDED => Errno::DQUOT,
            w::STATUS_MEDIA_WRITE_PROTECTED => Errno::ROFS,
            w::STATUS_NAME_TOO_LONG => Errno::NAMETOOLONG,
            w::STATUS_OBJECT_NAME_INVALID
            | w::STATUS_OBJECT_PATH_SYNTAX_BAD
            | w::STATUS_INVALID_PARAMETER => Errno::INVAL,
            w::STATUS_NOT_SUPPORTED
            | w::STATUS_INVALID_DEVICE_REQUEST
            | w::STATUS_INVALID_INFO_CLASS => Errno::OPNOTSUPP,
            w::STATUS_NOT_IMPLEMENTED => Errno::NOSYS,
            w::STATUS_TOO_MANY_OPENED_FILES => Errno::MFILE,
            w::STATUS_NO_MEMORY | w::STATUS_INSUFFICIENT_RESOURCES => Errno::NOMEM,
            w::STATUS_INVALID_HANDLE | w::STATUS_FILE_CLOSED => Errno::BADF,
            w::STATUS_STOPPED_ON_SYMLINK | w::STATUS_REPARSE_POINT_NOT_RESOLVED => Errno::LOOP,
            w::STATUS_TOO_MANY_LINKS => Errno::MLINK,
            w::STATUS_ACCESS_VIOLATION => Errno::FAULT,
            _ => return None,
        })
    }

    /// The errno of the calling thread's last Win32 error.
    pub fn last_win32() -> Errno {
        // SAFETY: reads the calling thread's last-error value; no
        // arguments.
        #[allow(unsafe_code)]
        let code = unsafe { w::GetLastError() };
        Errno::from_win32(code)
    }

    /// The errno of a `std::io::Error` from a Win32 call (its raw code is a
    /// Win32 error on Windows); `EIO` for one without a code.
    pub fn from_io_error(error: &std::io::Error) -> Errno {
        error
            .raw_os_error()
            .and_then(|code| u32::try_from(code).ok())
            .map_or(Errno::IO, Errno::from_win32)
    }

    /// Its symbolic name (`"ENOENT"`), `None` for a number not named here.
    pub fn name(self) -> Option<&'static str> {
        self.described().map(|row| row.1)
    }

    fn described(self) -> Option<&'static Described> {
        DESCRIPTIONS.iter().find(|row| row.0 == self)
    }

    /// The `std::io::ErrorKind` of this errno, as `std` gives it on Linux.
    pub fn kind(self) -> std::io::ErrorKind {
        use std::io::ErrorKind as K;
        match self {
            Errno::NOENT => K::NotFound,
            Errno::ACCESS | Errno::PERM => K::PermissionDenied,
            Errno::EXIST => K::AlreadyExists,
            Errno::WOULDBLOCK => K::WouldBlock,
            Errno::INVAL => K::InvalidInput,
            Errno::INTR => K::Interrupted,
            Errno::NOTDIR => K::NotADirectory,
            Errno::ISDIR => K::IsADirectory,
            Errno::NOTEMPTY => K::DirectoryNotEmpty,
            Errno::ROFS => K::ReadOnlyFilesystem,
            Errno::NOSPC => K::StorageFull,
            Errno::BUSY => K::ResourceBusy,
            Errno::XDEV => K::CrossesDevices,
            Errno::NAMETOOLONG => K::InvalidFilename,
            Errno::NOMEM => K::OutOfMemory,
            Errno::OPNOTSUPP | Errno::NOSYS => K::Unsupported,
            Errno::DQUOT => K::QuotaExceeded,
            Errno::STALE => K::StaleNetworkFileHandle,
            Errno::MLINK => K::TooManyLinks,
            _ => K::Other,
        }
    }
}

/// The names and messages (glibc's wording) of the errnos named above.
const DESCRIPTIONS: &[Described] = &[
    Described(Errno::PERM, "EPERM", "Operation not permitted"),
    Described(Errno::NOENT, "ENOENT", "No such file or directory"),
    Described(Errno::SRCH, "ESRCH", "No such process"),
    Described(Errno::INTR, "EINTR", "Interrupted system call"),
    Described(Errno::IO, "EIO", "Input/output error"),
    Described(Errno::NXIO, "ENXIO", "No such device or address"),
    Described(Errno::BADF, "EBADF", "Bad file descriptor"),
    Described(Errno::AGAIN, "EAGAIN", "Resource temporarily unavailable"),
    Described(Errno::NOMEM, "ENOMEM", "Cannot allocate memory"),
    Described(Errno::ACCESS, "EACCES", "Permission denied"),
    Described(Errno::FAULT, "EFAULT", "Bad address"),
    Described(Errno::BUSY, "EBUSY", "Device or resource busy"),
    Described(Errno::EXIST, "EEXIST", "File exists"),
    Described(Errno::XDEV, "EXDEV", "Invalid cross-device link"),
    Described(Errno::NOTDIR, "ENOTDIR", "Not a directory"),
    Described(Errno::ISDIR, "EISDIR", "Is a directory"),
    Described(Errno::INVAL, "EINVAL", "Invalid argument"),
    Described(Errno::NFILE, "ENFILE", "Too many open files in system"),
    Described(Errno::MFILE, "EMFILE", "Too many open files"),
    Described(Errno::NOSPC, "ENOSPC", "No space left on device"),
    Described(Errno::ROFS, "EROFS", "Read-only file system"),
    Described(Errno::MLINK, "EMLINK", "Too many links"),
    Described(Errno::NAMETOOLONG, "ENAMETOOLONG", "File name too long"),
    Described(Errno::NOLCK, "ENOLCK", "No locks available"),
    Described(Errno::NOSYS, "ENOSYS", "Function not implemented"),
    Described(Errno::NOTEMPTY, "ENOTEMPTY", "Directory not empty"),
    Described(Errno::LOOP, "ELOOP", "Too many levels of symbolic links"),
    Described(Errno::OPNOTSUPP, "EOPNOTSUPP", "Operation not supported"),
    Described(Errno::STALE, "ESTALE", "Stale file handle"),
    Described(Errno::DQUOT, "EDQUOT", "Disk quota exceeded"),
];

impl std::fmt::Debug for Errno {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.name() {
            Some(name) => write!(f, "Errno({name})"),
            None => write!(f, "Errno({})", self.0),
        }
    }
}

/// `"No such file or directory (ENOENT)"`: the message with the name,
/// never with `os error N`, which on Windows would read as a Win32 code.
impl std::fmt::Display for Errno {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.described() {
            Some(Described(_, name, message)) => write!(f, "{message} ({name})"),
            None => write!(f, "Unknown error (errno {})", self.0),
        }
    }
}

impl std::error::Error for Errno {}

/// An `io::Error` of the errno's kind whose message is the errno's
/// ([`Errno`]'s `Display`). Not `io::Error::from_raw_os_error`: on Windows
/// that takes a Win32 code and would misname every errno.
impl From<Errno> for std::io::Error {
    fn from(errno: Errno) -> Self {
        std::io::Error::new(errno.kind(), errno)
    }
}
