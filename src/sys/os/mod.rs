//! The system calls the crate's logic is written against: descriptors,
//! descriptor-relative file operations, errno values.
//!
//! On Linux and macOS these are `rustix`'s own modules, re-exported
//! unchanged. On Windows, where rustix has no `fs`, [`windows`] gives the
//! same names and call shapes on NT handles: `openat` is `NtCreateFile`
//! relative to a directory handle, `renameat_with(NOREPLACE)` is
//! `FileRenameInformation` with `ReplaceIfExists = FALSE` relative to the
//! destination's handle, `Errno` carries POSIX names mapped from Win32 and
//! NTSTATUS codes. So the lock's logic, its judgements and its tests are
//! one code path on every system; what Windows cannot do (exchange
//! renames, mode bits) answers as a filesystem that cannot, which every
//! caller already handles.

#[cfg(unix)]
pub use rustix::{fd, fs, io};

#[cfg(windows)]
mod windows;
#[cfg(windows)]
pub use windows::{fd, fs, io};

/// The `OsStr` whose bytes (as [`OsStr::as_encoded_bytes`] gives them) are
/// `bytes`: any bytes on unix, where a name is bytes; on Windows only UTF-8,
/// where a name is UTF-16 and a part of one cut at a non-ASCII byte is not
/// a name. `None` then: callers treat the name as not one of ours.
///
/// [`OsStr::as_encoded_bytes`]: std::ffi::OsStr::as_encoded_bytes
pub fn os_str(bytes: &[u8]) -> Option<&std::ffi::OsStr> {
    #[cfg(unix)]
    return Some(std::os::unix::ffi::OsStrExt::from_bytes(bytes));
    #[cfg(windows)]
    return std::str::from_utf8(bytes).ok().map(std::ffi::OsStr::new);
}
