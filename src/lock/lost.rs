//! Telling a holder that its lock was lost: removed, or replaced by
//! someone else's, while it still holds it.
//!
//! A [`LossWatch`] exists only while someone listens (`release.signal`,
//! `onCompromised`): a kernel watch of its own ([`HeldEvents`]: on Linux
//! a subscription to the process's one inotify instance, kqueue on macOS)
//! on the lock's parent for the lock name going or
//! coming, and on the published directory itself for being moved or
//! deleted and for its record being changed. A thread of its own sleeps on
//! that and on a [`Wake`] that stops it; nothing polls the disk on a timer,
//! except under the portable mechanisms, which have no such watch. Each event is only a reason to look: the
//! verdict comes from [`standing`], the same identity the release checks
//! (the published root, held open since publication, and the record's
//! bytes), so events of our own writes, of neighbours' files or of a
//! rewrite with the same bytes never cry wolf. A generation that is being
//! released (or was given back) is not lost: the watch ends silently.

use std::ffi::OsStr;
use std::sync::Arc;

use crate::sys::os::fd::{AsFd, BorrowedFd};
use crate::sys::os::io::Errno;

use crate::fs::fsx;
use crate::lock::identity::INFO_NAME;
use crate::lock::record::{MAX_RECORD_BYTES, OwnerRecord};
use crate::lock::table::{self, Generation};
use crate::sys::wait::{HeldEvents, Wake};

/// How a held lock was lost.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Loss {
    /// Nothing of ours stands at the lock name any more, and nothing else
    /// does either (or our directory lost its record).
    Removed,
    /// Something else stands at the lock name, or our record was rewritten
    /// with other bytes; the pid of the record there now, when it has one.
    Replaced { by_pid: Option<u32> },
}

/// What stands at a generation's lock name now.
#[derive(Debug, PartialEq, Eq)]
pub enum Standing {
    Ours,
    Lost(Loss),
}

/// Whether `generation` still stands as published: its root at the lock
/// name, holding its record (unchanged, or rewritten with the same bytes).
pub fn standing(generation: &Generation) -> Standing {
    let parent = generation.parent.as_fd();
    let root = generation.root.as_fd();
    let published = &generation.published;
    let at_name = fsx::stat_nofollow(parent, &generation.lock_name)
        .ok()
        .map(|stat| (fsx::dev_of(&stat), fsx::ino_of(&stat)));
    match at_name {
        None => return Standing::Lost(Loss::Removed),
        Some(seen) if seen != (published.root_dev, published.root_ino) => {
            return Standing::Lost(Loss::Replaced {
                by_pid: pid_at(parent, &generation.lock_name),
            });
        }
        Some(_) => {}
    }
    if published.files_look_unchanged(root) && published.names_unchanged(root) {
        return Standing::Ours;
    }
    match fsx::read_regular_bounded(root, OsStr::new(INFO_NAME), MAX_RECORD_BYTES) {
        Ok(read) if read.bytes == generation.record_bytes => Standing::Ours,
        Ok(read) => Standing::Lost(Loss::Replaced {
            by_pid: OwnerRecord::parse(&read.bytes).and_then(|record| pid_of(&record)),
        }),
        Err(fsx::ReadRefusal::Os(Errno::NOENT)) => Standing::Lost(Loss::Removed),
        Err(_) => Standing::Lost(Loss::Replaced { by_pid: None }),
    }
}

/// How long a record seen mid-rewrite (truncated, half written) is given
/// to settle before its bytes are judged.
const REWRITE_SETTLE: std::time::Duration = std::time::Duration::from_millis(25);

/// [`standing`], looking twice at a record that differs while our
/// directory still stands: a writer that truncates and writes (the same
/// bytes, say) shows a moment of other bytes that is not a loss.
fn settled_standing(generation: &Generation) -> Standing {
    match standing(generation) {
        Standing::Lost(Loss::Replaced { .. }) if root_still_at_name(generation) => {
            std::thread::sleep(REWRITE_SETTLE);
            standing(generation)
        }
        other => other,
    }
}

fn root_still_at_name(generation: &Generation) -> bool {
    fsx::stat_nofollow(generation.parent.as_fd(), &generation.lock_name).is_ok_and(|stat| {
        (fsx::dev_of(&stat), fsx::ino_of(&stat))
            == (generation.published.root_dev, generation.published.root_ino)
    })
}

fn pid_at(parent: BorrowedFd<'_>, name: &OsStr) -> Option<u32> {
    crate::lock::observe::glance_record(parent, name).and_then(|record| pid_of(&record))
}

fn pid_of(record: &OwnerRecord) -> Option<u32> {
    (record.pid.fract() == 0.0 && record.pid >= 1.0 && record.pid <= f64::from(u32::MAX))
        .then_some(record.pid as u32)
}

/// A running watch; dropping it stops it.
pub struct LossWatch {
    stop: Arc<Wake>,
}

impl Drop for LossWatch {
    fn drop(&mut self) {
        self.stop.signal();
    }
}

/// Watches generation `id` while it is held, and calls `lost` once if it
/// is lost (at once if it already is). `NOENT` if `id` is not held; another
/// error when no watch can be made at all (no descriptor or thread for it:
/// the kernel's events, when refused, are replaced by a timer).
pub fn watch(id: u64, lost: Box<dyn FnOnce(Loss) + Send>) -> Result<LossWatch, Errno> {
    let generation = table::held(id).ok_or(Errno::NOENT)?;
    let events = HeldEvents::new(generation.parent.as_fd(), generation.root.as_fd());
    let stop = Wake::new();
    stop.arm();
    // The only way to stop the watch's thread: without it (descriptors
    // exhausted) the watch cannot be made.
    if stop.pollable().is_none() {
        return Err(Errno::MFILE);
    }
    let stopped = stop.clone();
    std::thread::Builder::new()
        .name("exactlock-held".into())
        .spawn(move || watch_until_lost(id, &generation, &events, &stopped, lost))
        .map_err(|_| Errno::AGAIN)?;
    Ok(LossWatch { stop })
}

/// The watch's thread: looks once, then after each batch of events, until
/// the lock is lost (told once), released, or the watch is stopped.
fn watch_until_lost(
    id: u64,
    generation: &Generation,
    events: &HeldEvents,
    stop: &Wake,
    lost: Box<dyn FnOnce(Loss) + Send>,
) {
    loop {
        if stop.is_signalled() || table::held(id).is_none() {
            return;
        }
        if let Standing::Lost(loss) = settled_standing(generation) {
            // Not lost if it is being released: the release moves it away.
            if table::held(id).is_some() && !stop.is_signalled() {
                lost(loss);
            }
            return;
        }
        let Some(stop_fd) = stop.pollable() else {
            return;
        };
        if events.wait(stop_fd).is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{acquire_free as acquire, tempdir};
    use std::sync::mpsc;
    use std::time::Duration;

    fn watched(id: u64) -> (LossWatch, mpsc::Receiver<Loss>) {
        let (tx, rx) = mpsc::channel();
        let watch = watch(
            id,
            Box::new(move |loss| {
                let _ = tx.send(loss);
            }),
        )
        .unwrap();
        (watch, rx)
    }

    #[test]
    fn a_removed_lock_is_reported_removed() {
        let root = tempdir("lost-removed");
        let id = acquire(&root);
        let (_watch, lost) = watched(id);
        assert!(lost.recv_timeout(Duration::from_millis(100)).is_err());
        std::fs::remove_dir_all(root.join("f.lock")).unwrap();
        assert_eq!(
            lost.recv_timeout(Duration::from_secs(2)).unwrap(),
            Loss::Removed
        );
        table::forget(id);
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn a_replaced_lock_names_the_new_owner_and_a_same_bytes_rewrite_is_not_a_loss() {
        let root = tempdir("lost-replaced");
        let id = acquire(&root);
        let (_watch, lost) = watched(id);
        let info = root.join("f.lock").join(INFO_NAME);
        let bytes = std::fs::read(&info).unwrap();
        // Our own bytes, written again: still ours.
        std::fs::write(&info, &bytes).unwrap();
        assert!(lost.recv_timeout(Duration::from_millis(200)).is_err());
        // Someone else's lock at the name, published whole (as a lock is: staged, then
        // renamed into place), so the watch cannot catch it before its record exists.
        std::fs::create_dir(root.join("staged")).unwrap();
        std::fs::write(
            root.join("staged").join(INFO_NAME),
            br#"{"pid":4242,"timestamp":1}"#,
        )
        .unwrap();
        std::fs::rename(root.join("f.lock"), root.join("gone")).unwrap();
        std::fs::rename(root.join("staged"), root.join("f.lock")).unwrap();
        let loss = lost.recv_timeout(Duration::from_secs(2)).unwrap();
        assert!(
            matches!(loss, Loss::Replaced { by_pid: Some(4242) } | Loss::Removed),
            "{loss:?}"
        );
        table::forget(id);
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn a_release_is_not_a_loss_and_ends_the_watch() {
        let root = tempdir("lost-released");
        let id = acquire(&root);
        let (watch, lost) = watched(id);
        let generation = table::begin_release(id).unwrap();
        crate::lock::release::remove_generation(&generation).unwrap();
        table::forget(id);
        assert!(lost.recv_timeout(Duration::from_millis(200)).is_err());
        drop(watch);
        // Our handles first: where a deletion waits for the last handle (Wine,
        // FAT, SMB), the removed lock's name stays until then.
        drop(generation);
        std::fs::remove_dir_all(root).unwrap();
    }
}
