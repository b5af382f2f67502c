//! Descriptors closed off the caller's thread.
//!
//! The last close of a directory that was just removed is where the
//! filesystem frees its inode: on ext4 that `close` costs more than any
//! other call of a lock's cycle (about 100 µs against 10–40 µs, `perf
//! trace` of `bench/floor`), and it is the releaser's last call. Nothing
//! waits for it: the lock's name was freed before, and the directory is
//! gone from every name. So a held lock's descriptors ([`ClosedLater`]) are
//! handed, when the lock is let go, to one thread of the process that
//! closes them, and the release resolves without paying for it.
//!
//! What a close still does when it comes: it drops the `flock` the
//! descriptor holds (of a directory no name leads to any more, or, when a
//! release left it under its quarantine name, one that the debris rules
//! leave alone while it is taken), and it lets the inode number be used
//! again (only once nothing can compare against it). Where the thread
//! cannot be started, descriptors are closed at once, as before.

use crate::sys::os::fd::{AsFd, BorrowedFd, OwnedFd};

/// A descriptor that is closed by the closing thread when dropped.
#[derive(Debug)]
pub struct ClosedLater(Option<OwnedFd>);

impl ClosedLater {
    pub fn new(fd: OwnedFd) -> Self {
        ClosedLater(Some(fd))
    }
}

impl AsFd for ClosedLater {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.0.as_ref().expect("open until dropped").as_fd()
    }
}

impl Drop for ClosedLater {
    fn drop(&mut self) {
        if let Some(fd) = self.0.take() {
            close_later(fd);
        }
    }
}

/// Descriptors waiting for the closing thread at most: past that (the thread
/// starved of CPU, on a loaded machine) a descriptor is closed at once, on
/// the caller's thread, instead of queueing without bound (an adversarial
/// review, starving the thread, saw 6644 descriptors open at once).
#[cfg(unix)]
const BACKLOG: usize = 256;

/// Hands `fd` to the closing thread (or closes it now where there is none).
#[cfg(unix)]
pub fn close_later(fd: OwnedFd) {
    use std::sync::OnceLock;
    use std::sync::mpsc::{SyncSender, sync_channel};
    static CLOSER: OnceLock<Option<SyncSender<OwnedFd>>> = OnceLock::new();
    let closer = CLOSER.get_or_init(|| {
        let (sender, receiver) = sync_channel::<OwnedFd>(BACKLOG);
        std::thread::Builder::new()
            .name("exactlock-close".into())
            .spawn(move || receiver.into_iter().for_each(drop))
            .ok()
            .map(|_| sender)
    });
    match closer {
        Some(sender) => hand_over(sender, fd),
        None => drop(fd),
    }
}

/// Queues `fd` for the closing thread, or closes it now when the queue is
/// full (or the thread is gone).
#[cfg(unix)]
fn hand_over(closer: &std::sync::mpsc::SyncSender<OwnedFd>, fd: OwnedFd) {
    use std::sync::mpsc::TrySendError;
    match closer.try_send(fd) {
        Ok(()) => {}
        Err(TrySendError::Full(fd) | TrySendError::Disconnected(fd)) => drop(fd),
    }
}

/// On Windows a directory whose deletion is pending stays listed until its
/// last handle is closed: closed at once.
#[cfg(not(unix))]
pub fn close_later(fd: OwnedFd) {
    drop(fd);
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use crate::fs::fsx;
    use crate::sys::os::fs::{self, FlockOperation};
    use crate::testutil::tempdir;
    use std::time::{Duration, Instant};

    #[test]
    fn a_dropped_descriptor_is_closed_soon_by_the_closing_thread() {
        let dir = tempdir("closer");
        let held = ClosedLater::new(fsx::open_dir_nofollow(&dir).unwrap());
        fs::flock(&held, FlockOperation::NonBlockingLockExclusive).unwrap();
        let other = fsx::open_dir_nofollow(&dir).unwrap();
        assert!(fs::flock(&other, FlockOperation::NonBlockingLockExclusive).is_err());
        drop(held);
        // The flock goes with the close: seen from another description.
        let since = Instant::now();
        while fs::flock(&other, FlockOperation::NonBlockingLockExclusive).is_err() {
            assert!(since.elapsed() < Duration::from_secs(5), "never closed");
            std::thread::sleep(Duration::from_millis(1));
        }
        std::fs::remove_dir_all(dir).unwrap();
    }

    /// A full queue (the closing thread behind) closes the next descriptor
    /// at once: the queue never grows past its bound.
    #[test]
    fn a_descriptor_past_a_full_queue_is_closed_at_once() {
        let dir = tempdir("closer-full");
        let (queue, waiting) = std::sync::mpsc::sync_channel::<OwnedFd>(1);
        let locked = |fd: &OwnedFd| fs::flock(fd, FlockOperation::NonBlockingLockExclusive).is_ok();
        let first = fsx::open_dir_nofollow(&dir).unwrap();
        assert!(locked(&first));
        hand_over(&queue, first);
        let second = fsx::open_dir_nofollow(&dir).unwrap();
        // The first is queued, still open: its flock still holds.
        assert!(!locked(&second));
        drop(waiting.try_recv().unwrap());
        assert!(locked(&second));
        let third = fsx::open_dir_nofollow(&dir).unwrap();
        hand_over(&queue, second);
        // The queue holds the second: the third waits behind its flock.
        assert!(!locked(&third));
        let fourth = fsx::open_dir_nofollow(&dir).unwrap();
        hand_over(&queue, third);
        // The queue was full: the third was closed at once (it never held
        // the flock, so the fourth still finds the second's).
        assert!(!locked(&fourth));
        drop(waiting.try_recv().unwrap());
        assert!(waiting.try_recv().is_err(), "only the second was queued");
        assert!(locked(&fourth));
        std::fs::remove_dir_all(dir).unwrap();
    }
}
