//! The names derived from a file's, and the limit they must fit.
//!
//! A lock on the file `F` uses three names beside it: the lock `F.lock`, a
//! staging directory `F.lock.pending.<pid>.<uuid>` its record is written in
//! before publication, and a quarantine `F.lock.removing.<pid>.<uuid>` a
//! removal parks it at. Each is one path component, at most
//! [`fsx::NAME_MAX`] bytes. The quarantine is one byte longer than the
//! staging, so a file name whose staging just fits would publish a lock
//! that no release can remove: the generation would stay fenced and the
//! lock held until its process exits. Every derived name is therefore
//! checked before anything touches the disk, for the widest pid of the
//! platform rather than this process's, so that a name that locks in one
//! process locks in every other.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::sync::{Mutex, OnceLock};

use crate::sys::os::fd::BorrowedFd;

use crate::fs::fsx;
use crate::fs::tree::QUARANTINE_TAG;
use crate::lock::publish::STAGING_TAG;

/// What a lock's name adds to its file's: `<file>.lock`.
pub const LOCK_SUFFIX: &str = ".lock";

/// The tags of the names derived from a lock's name (see the module docs).
const DERIVED_TAGS: [&str; 2] = [STAGING_TAG, QUARANTINE_TAG];

/// A lock name a derived name of which would exceed [`fsx::NAME_MAX`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TooLong {
    /// The file name's length in bytes (the lock name without
    /// [`LOCK_SUFFIX`]).
    pub file_name_len: usize,
}

/// The length in bytes of the longest name derived from a lock name of
/// `lock_name_len` bytes, for any pid of this platform.
fn longest_derived_len(lock_name_len: usize) -> usize {
    DERIVED_TAGS
        .iter()
        .map(|tag| fsx::longest_tagged_len(lock_name_len, tag))
        .max()
        .unwrap_or(lock_name_len)
}

/// The longest file name, in bytes, whose derived names all fit in
/// `name_max` bytes.
pub fn longest_file_name(name_max: usize) -> usize {
    name_max.saturating_sub(longest_derived_len(0) + LOCK_SUFFIX.len())
}

/// Whether every name derived from `lock_name` fits in [`fsx::NAME_MAX`].
pub fn check(lock_name: &OsStr) -> Result<(), TooLong> {
    if longest_derived_len(lock_name.len()) <= fsx::NAME_MAX {
        return Ok(());
    }
    Err(TooLong {
        file_name_len: lock_name.len().saturating_sub(LOCK_SUFFIX.len()),
    })
}

/// Each device's limit per name, as its filesystem said it.
fn limits_by_device() -> &'static Mutex<HashMap<u64, usize>> {
    static LIMITS: OnceLock<Mutex<HashMap<u64, usize>>> = OnceLock::new();
    LIMITS.get_or_init(Mutex::default)
}

/// Whether every name derived from `lock_name` fits the limit per name of
/// the filesystem holding `parent` (device `dev`), which may be below
/// [`fsx::NAME_MAX`] (eCryptfs allows 143 bytes): else a staging name that
/// just fits would publish a lock whose quarantine name the filesystem
/// refuses, and no release could remove it. The limit is asked once per
/// device (`fstatvfs`); `Err` carries it.
pub fn check_on(parent: BorrowedFd<'_>, dev: u64, lock_name: &OsStr) -> Result<(), usize> {
    let limits = limits_by_device();
    let known = limits
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(&dev)
        .copied();
    let limit = known.unwrap_or_else(|| {
        let limit =
            fsx::name_max_of(parent).map_or(fsx::NAME_MAX, |limit| limit.min(fsx::NAME_MAX));
        limits
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(dev, limit);
        limit
    });
    if longest_derived_len(lock_name.len()) <= limit {
        Ok(())
    } else {
        Err(limit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::tree::quarantine_name;
    use crate::lock::publish::staging_name;
    use crate::sys::platform;

    #[test]
    fn a_filesystem_with_a_smaller_limit_per_name_refuses_what_its_quarantine_would_not_fit() {
        use crate::sys::os::fd::AsFd;
        let dir = crate::testutil::tempdir("names-limit");
        let parent = fsx::open_anchor(&dir).unwrap();
        // A device that says 143 bytes per name (eCryptfs does).
        let dev = u64::MAX - 143;
        limits_by_device().lock().unwrap().insert(dev, 143);
        let longest = longest_file_name(143);
        assert_eq!(
            check_on(parent.as_fd(), dev, &lock_name_of(longest)),
            Ok(())
        );
        // The staging name of one more byte would still fit in 143 for a
        // short pid; its quarantine name, one byte longer, might not.
        assert_eq!(
            check_on(parent.as_fd(), dev, &lock_name_of(longest + 1)),
            Err(143)
        );
        // This directory's own filesystem says 255: the fixed check's answer.
        let here = fsx::dir_identity(parent.as_fd()).unwrap().dev;
        assert_eq!(
            check_on(parent.as_fd(), here, &lock_name_of(longest + 1)),
            Ok(())
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    fn lock_name_of(file_name_len: usize) -> std::ffi::OsString {
        format!("{}{LOCK_SUFFIX}", "n".repeat(file_name_len)).into()
    }

    #[test]
    fn the_longest_file_name_leaves_room_for_every_derived_name_of_any_pid() {
        let longest = longest_file_name(fsx::NAME_MAX);
        #[cfg(target_os = "linux")]
        assert_eq!(longest, 196);
        #[cfg(target_os = "macos")]
        assert_eq!(longest, 198);
        assert_eq!(check(&lock_name_of(longest)), Ok(()));
        assert_eq!(
            check(&lock_name_of(longest + 1)),
            Err(TooLong {
                file_name_len: longest + 1
            })
        );
        // The names this process makes: a pid narrower than the widest
        // leaves them shorter than the limit, never longer.
        let lock = lock_name_of(longest);
        let spare = platform::native::PID_MAX_DIGITS - std::process::id().to_string().len();
        assert_eq!(quarantine_name(&lock).len() + spare, fsx::NAME_MAX);
        assert_eq!(staging_name(&lock).len() + spare + 1, fsx::NAME_MAX);
    }

    #[test]
    fn a_name_whose_staging_would_be_exactly_name_max_here_is_refused() {
        // The case that wedged a lock: the staging name fits exactly, its
        // quarantine is one byte over.
        let overhead = staging_name(&lock_name_of(0)).len();
        let lock = lock_name_of(fsx::NAME_MAX - overhead);
        assert_eq!(staging_name(&lock).len(), fsx::NAME_MAX);
        assert_eq!(quarantine_name(&lock).len(), fsx::NAME_MAX + 1);
        assert!(check(&lock).is_err());
    }
}
