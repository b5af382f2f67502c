//! Judge the volume, not a cache.
//!
//! On a network or FUSE mount the client answers `stat`, lookups and
//! directory listings from its own cache. sshfs, by default, keeps a
//! positive answer for 20 s and forgets it only when *this* client changes
//! the name: after another host released a lock, the client still shows the
//! lock directory (the `mkdir` and `renameat2` of a publication are refused
//! by the kernel from that cached entry, without asking the server), while
//! the `info` inside, looked up afresh, is gone. Judged from the cache, the
//! lock looks "held by an empty directory" for as long as the cache lasts —
//! longer than a whole default waiting budget.
//!
//! So on such a mount ([`may_serve_stale`], by `statfs` type) an observation
//! that finds the lock missing or ownerless is never taken as the truth.
//! The server is asked instead, with an operation no client cache can
//! answer: renaming the lock name onto a *non-empty* directory of ours
//! ([`on_server`]). POSIX rename never replaces a non-empty directory, so
//! the call cannot change anything: the server fails it with `ENOENT`
//! exactly when nothing stands at the lock name, and with `ENOTEMPTY`,
//! `EEXIST`, `EISDIR` or `ENOTDIR` when something does (a lock, an empty
//! legacy holder, a file). Only then does a waiter publish past the cache.

use std::ffi::OsStr;

use crate::sys::os::fd::BorrowedFd;
use crate::sys::os::fs;
use crate::sys::os::io::Errno;

/// What the server says stands at a lock name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnServer {
    /// Nothing: the name is free on the volume, whatever the client shows.
    Absent,
    /// Something (a lock, an empty directory, a file).
    Present,
    /// The server did not say (another error): trust nothing, decide nothing.
    Unknown,
}

/// Whether `dir` is on a filesystem whose client may serve stale metadata:
/// FUSE (sshfs, rclone, s3fs…), NFS, SMB/CIFS, 9p, Ceph, AFS, Coda, the
/// cluster filesystems, and any `statfs` type the probe's table does not
/// know (asking the server costs one rename, and only on an observation
/// that could not be believed anyway). Local filesystems (and overlayfs
/// of local layers) answer from the one true copy.
#[cfg(any(target_os = "linux", target_os = "android"))]
pub fn may_serve_stale(dir: BorrowedFd<'_>) -> bool {
    use crate::fs::probe::{Class, class_by_magic};
    class_by_magic(dir) != Class::Local
}

/// On macOS the kernel says which mounts keep their data on this machine
/// (`MNT_LOCAL`: APFS, HFS+, a disk image); NFS, SMB, AFP, WebDAV and
/// FUSE mounts of a server do not carry it. Only the latter are asked: on
/// a local disk the client's answer is the truth, and publishing past it
/// would replace an empty directory made in the meantime.
#[cfg(target_os = "macos")]
pub fn may_serve_stale(dir: BorrowedFd<'_>) -> bool {
    // `MNT_LOCAL` is declared as a `c_int`, `f_flags` is a `u32`: the same
    // bit, reinterpreted.
    const MNT_LOCAL: u32 = libc::MNT_LOCAL.cast_unsigned();
    match fs::fstatfs(dir) {
        Ok(statfs) => statfs.f_flags & MNT_LOCAL == 0,
        // Not told: ask the server, as for an unknown type on Linux.
        Err(_) => true,
    }
}

/// Elsewhere the filesystem type is not told apart: every answer is
/// checked with the server (it costs one rename on a contended attempt).
#[cfg(not(any(target_os = "linux", target_os = "android", target_os = "macos")))]
pub fn may_serve_stale(_dir: BorrowedFd<'_>) -> bool {
    true
}

/// Whether a rename onto a name failed because of what stands there.
/// `EPERM` counts: SFTP has no code for "not empty" or "exists", and sshfs
/// reports the server's generic failure as `EPERM` (a permission problem
/// is `EACCES` there).
pub fn refused_by_what_stands(errno: Errno) -> bool {
    matches!(
        errno,
        Errno::NOTEMPTY | Errno::EXIST | Errno::ISDIR | Errno::NOTDIR | Errno::PERM
    )
}

/// Asks the server whether anything stands at `name` in `parent`, by
/// renaming it onto `probe`: a directory of ours in `parent` that is not
/// empty (a staged record). Never changes anything (see the module docs).
///
/// Should the rename succeed all the same (`probe` was emptied behind our
/// back), what it moved is put back at once and the answer is
/// [`OnServer::Present`].
pub fn on_server(parent: BorrowedFd<'_>, name: &OsStr, probe: &OsStr) -> OnServer {
    match fs::renameat(parent, name, parent, probe) {
        Err(Errno::NOENT) => OnServer::Absent,
        Err(errno) if refused_by_what_stands(errno) => OnServer::Present,
        Err(_) => OnServer::Unknown,
        Ok(()) => {
            // Nothing takes the name meanwhile that a no-replace rename
            // would not refuse: a plain rename back could replace only an
            // empty directory someone made in this instant.
            let _ = crate::fs::rename::exclusive_rename_at(parent, probe, parent, name)
                .or_else(|_| fs::renameat(parent, probe, parent, name));
            OnServer::Present
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::fsx;
    use crate::sys::os::fd::AsFd;
    use crate::testutil::{listing, tempdir};

    #[test]
    fn the_probe_tells_absent_from_present_and_changes_nothing() {
        let root = tempdir("volume-probe");
        std::fs::create_dir(root.join("probe")).unwrap();
        std::fs::write(root.join("probe/info"), b"ours").unwrap();
        let parent = fsx::open_dir_nofollow(&root).unwrap();
        let (lock, probe) = (OsStr::new("f.lock"), OsStr::new("probe"));
        assert_eq!(on_server(parent.as_fd(), lock, probe), OnServer::Absent);

        // An empty legacy holder, a lock with a record, a regular file: all
        // present, all left exactly where and as they were.
        std::fs::create_dir(root.join("f.lock")).unwrap();
        assert_eq!(on_server(parent.as_fd(), lock, probe), OnServer::Present);
        std::fs::write(root.join("f.lock/info"), b"theirs").unwrap();
        assert_eq!(on_server(parent.as_fd(), lock, probe), OnServer::Present);
        assert_eq!(std::fs::read(root.join("f.lock/info")).unwrap(), b"theirs");
        std::fs::remove_dir_all(root.join("f.lock")).unwrap();
        std::fs::write(root.join("f.lock"), b"a file").unwrap();
        assert_eq!(on_server(parent.as_fd(), lock, probe), OnServer::Present);
        assert_eq!(listing(&root), ["f.lock", "probe"]);
        assert_eq!(std::fs::read(root.join("probe/info")).unwrap(), b"ours");
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn local_temp_dirs_do_not_serve_stale_metadata() {
        let root = tempdir("volume-local");
        let dir = fsx::open_dir_nofollow(&root).unwrap();
        // The test machines' temp dirs are ext4 or tmpfs (APFS on a Mac);
        // where filesystems are not told apart (Windows), every answer is checked.
        assert_eq!(may_serve_stale(dir.as_fd()), cfg!(windows));
        std::fs::remove_dir_all(root).unwrap();
    }
}
