//! Publication: a lock appears at `<file>.lock` complete or not at all.
//!
//! The record is written into a private staging directory
//! `<file>.lock.pending.<pid>.<uuid>` beside the lock, which is then renamed
//! onto the lock name with a no-replace rename. A plain `rename(2)` would
//! silently replace an existing *empty* directory — a legacy holder between
//! its `mkdir` and its record — so only the no-replace form is used. The
//! staging directory is removed on every path that does not publish it.

use std::ffi::{OsStr, OsString};

use rustix::fd::{AsFd, BorrowedFd};
use rustix::fs::{self, AtFlags, Mode, OFlags};
use rustix::io::Errno;

use crate::fsx;
use crate::identity::INFO_NAME;
use crate::rename::{self, NoReplaceOutcome};

const DIR_MODE: u32 = 0o700;
const INFO_MODE: u32 = 0o600;

/// What a publication left on disk.
#[derive(Debug)]
pub struct Published {
    pub root_dev: u64,
    pub root_ino: u64,
}

/// The result of one publication attempt.
#[derive(Debug)]
pub enum Publication {
    Published(Published),
    /// Something already stands at the lock name.
    Contended,
}

/// A publication that failed for a reason other than contention.
#[derive(Debug)]
pub enum PublishError {
    /// A syscall on the staging directory failed.
    Os(Errno),
    /// The no-replace rename refused for a reason other than an existing
    /// destination; carries the primitive's code.
    Rename(&'static str),
}

/// The staging name for one attempt: `<lock>.pending.<pid>.<uuid>`.
pub fn staging_name(lock_name: &OsStr) -> OsString {
    let suffix = format!(
        ".pending.{}.{}",
        std::process::id(),
        uuid::Uuid::new_v4().hyphenated()
    );
    fsx::with_suffix(lock_name, &suffix)
}

/// Parses the pid out of a staging name of `lock_name`, if it is one.
pub fn staging_pid(lock_name: &OsStr, candidate: &OsStr) -> Option<u32> {
    use std::os::unix::ffi::OsStrExt;
    let rest = candidate
        .as_bytes()
        .strip_prefix(lock_name.as_bytes())?
        .strip_prefix(b".pending.")?;
    let rest = std::str::from_utf8(rest).ok()?;
    let (pid, uuid) = rest.split_once('.')?;
    let valid_pid =
        !pid.is_empty() && !pid.starts_with('0') && pid.bytes().all(|b| b.is_ascii_digit());
    let valid_uuid = uuid.len() == 36 && uuid::Uuid::parse_str(uuid).is_ok();
    if valid_pid && valid_uuid {
        pid.parse().ok()
    } else {
        None
    }
}

/// Stages `record` and publishes it as `lock_name` inside `parent`.
pub fn publish(
    parent: BorrowedFd<'_>,
    lock_name: &OsStr,
    record: &[u8],
) -> Result<Publication, PublishError> {
    crate::faults::check("publish.stage")
        .map_err(|code| PublishError::Os(crate::faults::errno_of(code)))?;
    let staging = staging_name(lock_name);
    fs::mkdirat(parent, &staging, Mode::from_raw_mode(DIR_MODE)).map_err(PublishError::Os)?;
    let result = stage_and_rename(parent, &staging, lock_name, record);
    if !matches!(result, Ok(Publication::Published(_))) {
        remove_staging(parent, &staging);
    }
    result
}

fn stage_and_rename(
    parent: BorrowedFd<'_>,
    staging: &OsStr,
    lock_name: &OsStr,
    record: &[u8],
) -> Result<Publication, PublishError> {
    let dir = fsx::open_child_dir(parent, staging).map_err(PublishError::Os)?;
    // Explicit modes: the umask (even 0777) must not weaken or lock us out.
    fs::fchmod(&dir, Mode::from_raw_mode(DIR_MODE)).map_err(PublishError::Os)?;
    let info = fs::openat(
        &dir,
        INFO_NAME,
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(INFO_MODE),
    )
    .map_err(PublishError::Os)?;
    fs::fchmod(&info, Mode::from_raw_mode(INFO_MODE)).map_err(PublishError::Os)?;
    write_all(info.as_fd(), record).map_err(PublishError::Os)?;
    drop(info);
    let root = fs::fstat(&dir).map_err(PublishError::Os)?;
    crate::faults::check("publish.rename")
        .map_err(|code| PublishError::Os(crate::faults::errno_of(code)))?;
    let outcome: NoReplaceOutcome =
        rename::rename_no_replace_at(parent, staging, parent, lock_name);
    if outcome.ok {
        Ok(Publication::Published(Published {
            root_dev: root.st_dev,
            root_ino: root.st_ino,
        }))
    } else if outcome.refused_with(rename::Refusal::DestinationExists) {
        Ok(Publication::Contended)
    } else {
        Err(PublishError::Rename(outcome.code.unwrap_or("io_error")))
    }
}

fn write_all(fd: BorrowedFd<'_>, mut bytes: &[u8]) -> Result<(), Errno> {
    while !bytes.is_empty() {
        match rustix::io::write(fd, bytes) {
            Ok(0) => return Err(Errno::IO),
            Ok(n) => bytes = &bytes[n..],
            Err(Errno::INTR) => {}
            Err(errno) => return Err(errno),
        }
    }
    Ok(())
}

/// Removes a staging directory this attempt created: its record, then the
/// directory. Best effort: a leftover is reaped later by pid.
pub fn remove_staging(parent: BorrowedFd<'_>, staging: &OsStr) {
    if let Ok(dir) = fsx::open_child_dir(parent, staging) {
        let _ = fs::unlinkat(&dir, INFO_NAME, AtFlags::empty());
    }
    let _ = fs::unlinkat(parent, staging, AtFlags::REMOVEDIR);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn staging_names_round_trip_their_pid() {
        let lock = OsStr::new("state.json.lock");
        let staging = staging_name(lock);
        assert_eq!(staging_pid(lock, &staging), Some(std::process::id()));
        for bad in [
            "state.json.lock.pending.interrupted",
            "state.json.lock.pending.0123.12345678-1234-1234-1234-123456789abc",
            "state.json.lock.pending.12.not-a-uuid",
            "other.lock.pending.12.12345678-1234-1234-1234-123456789abc",
        ] {
            assert_eq!(staging_pid(lock, OsStr::new(bad)), None, "{bad}");
        }
    }
}
