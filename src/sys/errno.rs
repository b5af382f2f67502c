//! Errno names and the one definition of "transient".

use crate::sys::os::io::Errno;

/// The symbolic name of an errno (`"EACCES"`), as Node's `err.code` spells
/// it, so errors look the same whether fs or exactlock raised them.
pub fn errno_code(errno: Errno) -> &'static str {
    const NAMES: &[(Errno, &str)] = &[
        (Errno::ACCESS, "EACCES"),
        (Errno::PERM, "EPERM"),
        (Errno::BUSY, "EBUSY"),
        (Errno::NOTEMPTY, "ENOTEMPTY"),
        (Errno::NOENT, "ENOENT"),
        (Errno::NOTDIR, "ENOTDIR"),
        (Errno::ISDIR, "EISDIR"),
        (Errno::EXIST, "EEXIST"),
        (Errno::LOOP, "ELOOP"),
        (Errno::NAMETOOLONG, "ENAMETOOLONG"),
        (Errno::NOSPC, "ENOSPC"),
        (Errno::DQUOT, "EDQUOT"),
        (Errno::ROFS, "EROFS"),
        (Errno::IO, "EIO"),
        (Errno::INVAL, "EINVAL"),
        (Errno::XDEV, "EXDEV"),
        (Errno::NOSYS, "ENOSYS"),
        (Errno::INTR, "EINTR"),
        (Errno::AGAIN, "EAGAIN"),
        (Errno::MFILE, "EMFILE"),
        (Errno::NFILE, "ENFILE"),
        (Errno::NOMEM, "ENOMEM"),
        (Errno::NXIO, "ENXIO"),
        (Errno::SRCH, "ESRCH"),
        (Errno::MLINK, "EMLINK"),
        (Errno::STALE, "ESTALE"),
        (Errno::FAULT, "EFAULT"),
        (Errno::BADF, "EBADF"),
    ];
    NAMES
        .iter()
        .find(|(candidate, _)| *candidate == errno)
        .map(|(_, name)| *name)
        .unwrap_or("EIO")
}

/// Errors that mean "another party is in the middle of something here" and
/// are worth retrying rather than reporting: a contender publishing or
/// removing, an indexer or antivirus holding a handle.
pub fn is_transient(errno: Errno) -> bool {
    matches!(
        errno,
        Errno::BUSY | Errno::PERM | Errno::ACCESS | Errno::NOTEMPTY
    )
}

/// Whether `flock` failed because the filesystem has no advisory locks, so
/// a caller proceeds unguarded (as the original module always does):
/// `ENOLCK` (NFS without a lock daemon), `EOPNOTSUPP` and `EINVAL` (Linux
/// filesystems without locks), and `ENOTSUP`, macOS's answer for a
/// filesystem whose `VNOP_ADVLOCK` is XNU's `err_advlock` (macFUSE mounts,
/// for one). `ENOTSUP` and `EOPNOTSUPP` are one number on Linux and two on
/// macOS, hence the comparisons rather than a pattern.
pub fn is_flock_unsupported(errno: Errno) -> bool {
    errno == Errno::NOLCK
        || errno == Errno::OPNOTSUPP
        || errno == Errno::NOTSUP
        || errno == Errno::INVAL
}

/// A human sentence for an errno, for messages.
pub fn errno_text(errno: Errno) -> String {
    std::io::Error::from(errno).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_node() {
        assert_eq!(errno_code(Errno::ACCESS), "EACCES");
        assert_eq!(errno_code(Errno::NAMETOOLONG), "ENAMETOOLONG");
        assert!(is_transient(Errno::NOTEMPTY));
        assert!(!is_transient(Errno::IO));
    }

    #[test]
    fn a_filesystem_without_locks_is_told_apart_from_a_held_lock() {
        for errno in [Errno::NOLCK, Errno::OPNOTSUPP, Errno::NOTSUP, Errno::INVAL] {
            assert!(is_flock_unsupported(errno), "{errno:?}");
        }
        assert!(!is_flock_unsupported(Errno::WOULDBLOCK));
        assert!(!is_flock_unsupported(Errno::IO));
    }
}
