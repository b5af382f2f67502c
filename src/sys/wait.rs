//! Waiting without polling: the kernel wakes a waiter when the lock name is
//! removed or renamed away (inotify on the lock's parent) and when the
//! holder dies (a pidfd becomes readable). A timer every `retryDelayMs`
//! remains as the fallback for filesystems that send no events (network
//! mounts) and for anything missed.
//!
//! There is one inotify instance per process, read by one task on the napi
//! tokio runtime; each waiter holds a subscription for `(directory, name)`
//! and a [`Notify`] that stores a permit, so an event that arrives between a
//! waiter's last look at the disk and its `await` is never lost. No thread
//! per waiter, and no libuv pool thread is ever held while waiting.

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::mem::MaybeUninit;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rustix::fd::{BorrowedFd, OwnedFd};
use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};
use rustix::io::Errno;
use rustix::process::{Pid, PidfdFlags};
use tokio::io::unix::AsyncFd;
use tokio::sync::Notify;

struct Subscriber {
    id: u64,
    name: OsString,
    wake: Arc<Notify>,
}

struct Watcher {
    fd: AsyncFd<OwnedFd>,
    /// Subscribers by watch descriptor: what the dispatcher reads. Never
    /// held across a syscall that can block.
    watches: Mutex<HashMap<i32, Vec<Subscriber>>>,
    /// Serializes adding and removing kernel watches, so that a watch is
    /// never removed between another subscriber's `inotify_add_watch` (which
    /// returns the same descriptor for the same directory) and its entry.
    /// `inotify_add_watch` may block (a permission check on a network
    /// mount); the dispatcher never takes this lock, so wake-ups go on.
    registration: Mutex<()>,
}

/// The process's watcher, started on first use inside the tokio runtime.
/// `None` when inotify is unavailable (other platforms, exhausted limits):
/// waiters then fall back to the timer. A failure is not remembered: one
/// `EMFILE` must not turn wake-ups off for the rest of the process, so the
/// next waiter tries again.
static WATCHER: Mutex<Option<Arc<Watcher>>> = Mutex::new(None);

fn watcher() -> Option<Arc<Watcher>> {
    let mut slot = WATCHER.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(watcher) = slot.as_ref() {
        return Some(watcher.clone());
    }
    let fd = inotify::init(CreateFlags::NONBLOCK | CreateFlags::CLOEXEC).ok()?;
    let watcher = Arc::new(Watcher {
        fd: register(fd)?,
        watches: Mutex::new(HashMap::new()),
        registration: Mutex::new(()),
    });
    tokio::spawn(dispatch(watcher.clone()));
    *slot = Some(watcher.clone());
    Some(watcher)
}

/// The watcher if one runs, without starting one.
fn running_watcher() -> Option<Arc<Watcher>> {
    WATCHER.lock().unwrap_or_else(|p| p.into_inner()).clone()
}

/// Reads events until the descriptor fails, waking the subscribers they
/// concern; then forgets the watcher so that the next waiter starts a new
/// one (its subscribers fall back to their timers meanwhile).
async fn dispatch(watcher: Arc<Watcher>) {
    read_events(&watcher).await;
    let mut slot = WATCHER.lock().unwrap_or_else(|p| p.into_inner());
    if slot
        .as_ref()
        .is_some_and(|current| Arc::ptr_eq(current, &watcher))
    {
        *slot = None;
    }
}

async fn read_events(watcher: &Watcher) {
    let mut buffer = [MaybeUninit::<u8>::uninit(); 4096];
    loop {
        let Ok(mut guard) = watcher.fd.readable().await else {
            return;
        };
        let mut reader = inotify::Reader::new(watcher.fd.get_ref(), &mut buffer);
        loop {
            match reader.next() {
                Ok(event) => {
                    let everyone = event.events().intersects(
                        ReadFlags::QUEUE_OVERFLOW
                            | ReadFlags::IGNORED
                            | ReadFlags::MOVE_SELF
                            | ReadFlags::DELETE_SELF,
                    );
                    let name = event.file_name().map(|name| name.to_bytes().to_vec());
                    wake(watcher, event.wd(), everyone, name.as_deref());
                }
                Err(Errno::AGAIN) => {
                    guard.clear_ready();
                    break;
                }
                Err(Errno::INTR) => continue,
                Err(_) => return,
            }
        }
    }
}

fn wake(watcher: &Watcher, wd: i32, everyone: bool, name: Option<&[u8]>) {
    let watches = watcher.watches.lock().unwrap_or_else(|p| p.into_inner());
    let targets: Box<dyn Iterator<Item = &Subscriber>> = if wd < 0 {
        // Queue overflow: we may have missed anything.
        Box::new(watches.values().flatten())
    } else {
        Box::new(watches.get(&wd).into_iter().flatten())
    };
    for subscriber in targets {
        if everyone || name == Some(subscriber.name.as_bytes()) {
            subscriber.wake.notify_one();
        }
    }
}

/// A waiter's interest in `name` disappearing from a directory. Dropping it
/// unsubscribes (and removes the kernel watch with the last subscriber).
pub struct Subscription {
    wd: i32,
    id: u64,
}

/// Subscribes `wake` to the removal or renaming-away of `name` in the
/// directory `dir`. `None` if the kernel cannot watch it; the timer covers.
pub fn watch(dir: BorrowedFd<'_>, name: &OsStr, wake: Arc<Notify>) -> Option<Subscription> {
    let watcher = watcher()?;
    // inotify takes a path; the magic link of our descriptor names exactly
    // the directory we opened, whatever happened to its path since.
    let path = format!("/proc/self/fd/{}", dir.as_raw_fd());
    // The name deleted or moved away; and the directory itself moved or
    // deleted (replaced by another at its path): every waiter in it looks
    // again, and its next attempt watches whatever the path names now.
    let mask = WatchFlags::DELETE
        | WatchFlags::MOVED_FROM
        | WatchFlags::MOVE_SELF
        | WatchFlags::DELETE_SELF
        | WatchFlags::ONLYDIR;
    let _registering = watcher
        .registration
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    let wd = inotify::add_watch(watcher.fd.get_ref(), path, mask).ok()?;
    static NEXT_SUBSCRIBER: AtomicU64 = AtomicU64::new(1);
    let id = NEXT_SUBSCRIBER.fetch_add(1, Ordering::Relaxed);
    let mut watches = watcher.watches.lock().unwrap_or_else(|p| p.into_inner());
    watches.entry(wd).or_default().push(Subscriber {
        id,
        name: name.to_os_string(),
        wake,
    });
    Some(Subscription { wd, id })
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let Some(watcher) = running_watcher() else {
            return;
        };
        let _registering = watcher
            .registration
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let last = {
            let mut watches = watcher.watches.lock().unwrap_or_else(|p| p.into_inner());
            let Some(subscribers) = watches.get_mut(&self.wd) else {
                return;
            };
            subscribers.retain(|s| s.id != self.id);
            let last = subscribers.is_empty();
            if last {
                watches.remove(&self.wd);
            }
            last
        };
        if last {
            // The directory may be gone already (EINVAL): nothing to undo.
            let _ = inotify::remove_watch(watcher.fd.get_ref(), self.wd);
        }
    }
}

/// How a waiter learns that the holder exited.
pub enum HolderExit {
    /// A pidfd, readable once the process has exited.
    Watch(AsyncFd<OwnedFd>),
    /// The process is already gone: look again at once.
    AlreadyGone,
    /// No pidfd (not a local process, no kernel support): the timer covers.
    Unwatched,
}

/// Opens a pidfd for `pid`.
pub fn holder_exit(pid: u32) -> HolderExit {
    let Some(pid) = i32::try_from(pid).ok().and_then(Pid::from_raw) else {
        return HolderExit::Unwatched;
    };
    match rustix::process::pidfd_open(pid, PidfdFlags::NONBLOCK) {
        Ok(fd) => register(fd).map_or(HolderExit::Unwatched, HolderExit::Watch),
        Err(Errno::SRCH) => HolderExit::AlreadyGone,
        Err(_) => HolderExit::Unwatched,
    }
}

/// Registers an owned descriptor with the runtime's reactor.
#[allow(unsafe_code)]
fn register(fd: OwnedFd) -> Option<AsyncFd<OwnedFd>> {
    // SAFETY: `register` requires a valid open descriptor that stays open
    // and keeps its number for the life of the `AsyncFd`. An `OwnedFd` only
    // exists for a valid open descriptor; the `AsyncFd` takes ownership of
    // it, so nothing else can close or replace it while registered (we
    // never call `into_inner`), and `OwnedFd::as_raw_fd` always returns the
    // same number.
    unsafe { AsyncFd::register(fd).ok() }
}

/// A cancellation flag that an acquisition can also await.
#[derive(Default)]
pub struct Cancel {
    cancelled: AtomicBool,
    notify: Notify,
}

impl Cancel {
    pub fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::SeqCst)
    }

    /// Cancels, and wakes whoever awaits [`Cancel::cancelled`].
    pub fn cancel(&self) {
        self.cancelled.store(true, Ordering::SeqCst);
        self.notify.notify_waiters();
    }

    /// Resolves once cancelled (at once if it already is).
    pub async fn cancelled(&self) {
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            // Registered before the check, so a cancel in between is seen.
            notified.as_mut().enable();
            if self.is_cancelled() {
                return;
            }
            notified.await;
        }
    }
}

/// Waits until `wake` is notified, the holder exits, `cancel` fires or
/// `delay` passes, whichever comes first.
pub async fn until_change(
    wake: &Notify,
    holder: Option<&AsyncFd<OwnedFd>>,
    cancel: &Cancel,
    delay: Duration,
) {
    let exit = async {
        match holder {
            Some(fd) => {
                // Readable means exited; the guard is dropped at once (the
                // pidfd stays readable, and we do not wait on it again).
                let _ = fd.readable().await;
            }
            None => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = wake.notified() => {}
        _ = exit => {}
        _ = cancel.cancelled() => {}
        _ = tokio::time::sleep(delay) => {}
    }
}
