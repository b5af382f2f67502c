//! Whole-path opens: rustix's `open`, `stat`, `lstat` and `chmod` (which
//! resolve a path the way the OS does, links followed but for `lstat`'s
//! last component). The crate's no-follow walk (`fsx::open_dir_nofollow`)
//! starts from a root opened here, then goes one component at a time.

use std::os::windows::fs::OpenOptionsExt;
use std::path::{Component, Path, PathBuf};

use windows_sys::Win32::Storage::FileSystem::{
    FILE_FLAG_BACKUP_SEMANTICS, FILE_LIST_DIRECTORY, FILE_READ_ATTRIBUTES, FILE_TRAVERSE,
    SYNCHRONIZE,
};

use super::super::fd::OwnedFd;
use super::super::io::Errno;
use super::arg::Arg;
use super::at;
use super::flags::{AtFlags, Mode, OFlags};
use super::mode;
use super::stat::{self, Stat};

/// Opens the directory at `path` as Win32 resolves it (`CreateFileW`:
/// relative to the current directory, `C:\`, `\\server\share\`, `\\?\`
/// prefixes, links followed), for use as the anchor of relative opens.
fn open_win32_dir(path: &Path) -> Result<OwnedFd, Errno> {
    std::fs::OpenOptions::new()
        .access_mode(SYNCHRONIZE | FILE_READ_ATTRIBUTES | FILE_LIST_DIRECTORY | FILE_TRAVERSE)
        .share_mode(super::super::nt::SHARE_ALL)
        // Without it CreateFileW opens no directory.
        .custom_flags(FILE_FLAG_BACKUP_SEMANTICS)
        .open(path)
        .map(OwnedFd::from)
        .map_err(|error| Errno::from_io_error(&error))
}

/// A path's parent to open and its last component; `None` for a path that
/// ends in no name (`C:\`, `.`, `..`), which is opened as a whole.
fn split_last(path: &Path) -> Option<(PathBuf, &std::ffi::OsStr)> {
    match path.components().next_back()? {
        Component::Normal(name) => {
            let parent = path
                .parent()
                .filter(|parent| !parent.as_os_str().is_empty());
            Some((
                parent.map_or_else(|| PathBuf::from("."), Path::to_path_buf),
                name,
            ))
        }
        _ => None,
    }
}

/// rustix's `open(path, flags, mode)`: the parent of `path` opened as
/// Win32 resolves it, then the last component with [`at::openat`]'s
/// semantics (`NOFOLLOW` applies to the last component, as on unix). A
/// path ending in no name (`C:\`, `.`) is opened whole; it can only be an
/// existing directory.
pub fn open<P: Arg>(path: P, flags: OFlags, mode: Mode) -> Result<OwnedFd, Errno> {
    let path = path.as_os_str_arg()?;
    let path = Path::new(&*path);
    match split_last(path) {
        Some((parent, name)) => at::openat(open_win32_dir(&parent)?, name, flags, mode),
        None => {
            let whole = open_win32_dir(path)?;
            at::openat(whole, ".", flags, mode)
        }
    }
}

/// `stat(path)`, links followed.
pub fn stat<P: Arg>(path: P) -> Result<Stat, Errno> {
    stat_path(path, AtFlags::empty())
}

/// `lstat(path)`: a link in the last component described itself.
pub fn lstat<P: Arg>(path: P) -> Result<Stat, Errno> {
    stat_path(path, AtFlags::SYMLINK_NOFOLLOW)
}

fn stat_path<P: Arg>(path: P, flags: AtFlags) -> Result<Stat, Errno> {
    let path = path.as_os_str_arg()?;
    let path = Path::new(&*path);
    match split_last(path) {
        Some((parent, name)) => at::statat(open_win32_dir(&parent)?, name, flags),
        None => stat::fstat(open_win32_dir(path)?),
    }
}

/// `chmod(path, mode)`: [`mode::fchmod`] of the file at `path`.
pub fn chmod<P: Arg>(path: P, mode: Mode) -> Result<(), Errno> {
    let path = path.as_os_str_arg()?;
    let path = Path::new(&*path);
    match split_last(path) {
        Some((parent, name)) => {
            mode::chmodat(open_win32_dir(&parent)?, name, mode, AtFlags::empty())
        }
        None => mode::fchmod(open_win32_dir(path)?, mode),
    }
}
