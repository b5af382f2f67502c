//! The acquire state machine.
//!
//! Each attempt: make sure the parent exists, publish (complete or not at
//! all), and if the lock is held, judge it. A stale lock is removed exactly
//! (only the object that was judged) and the attempt repeats at once; a held
//! one is waited on until the kernel says something changed (the name went
//! away, the holder exited), this process's queue hands over, or
//! `retryDelayMs` passes. The budget is time: `retries × retryDelayMs` from
//! the first attempt; early wake-ups do not use it up.
//!
//! Waiters of one process for one lock queue in FIFO order in memory; only
//! the head contends on disk.

use std::ffi::OsString;
use std::future::Future;
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;
use tokio::io::unix::AsyncFd;
use tokio::sync::Notify;

use crate::fs::fsx;
use crate::fs::tree::{self, TreeSnapshot};
use crate::lock::debris;
use crate::lock::guard::{self, Guarded};
use crate::lock::observe::{Observation, glance_record, observe};
use crate::lock::publish::{
    Publication, PublishError, Published, Staged, StagedPublication, Takeover, publish,
    publish_over,
};
use crate::lock::record::OwnerRecord;
use crate::lock::release;
use crate::lock::report::{Holder, describe, describe_record};
use crate::lock::table::{self, Generation, LockKey, Ticket};
use crate::lock::verdict::{HostPolicy, Liveness, judge, judge_record};
use crate::sys::errno::{errno_code, errno_text};
use crate::sys::process;
use crate::sys::wait::{self, Cancel, HolderExit, Subscription};

/// A test seam awaited between parent creation and publication in each
/// attempt (`FileLockTestHooks.afterParentMkdir`). Its error text aborts the
/// acquisition.
pub type Hook =
    Arc<dyn Fn(String) -> Pin<Box<dyn Future<Output = Result<(), String>> + Send>> + Send + Sync>;

/// Everything one acquisition needs, validated by the caller.
pub struct AcquireOptions {
    pub file_path: PathBuf,
    pub retries: f64,
    pub retry_delay: Duration,
    pub stale_ms: f64,
    pub policy: HostPolicy,
    pub cancel: Arc<Cancel>,
    pub after_parent_mkdir: Option<Hook>,
    /// The caller's place in line, from [`table::next_id`] at call time.
    pub sequence: u64,
}

/// Why an acquisition ended without the lock.
#[derive(Debug)]
pub enum AcquireError {
    /// The waiting budget ran out; the holder as last seen.
    Timeout {
        lock_path: PathBuf,
        attempts: u32,
        holder: Box<Holder>,
    },
    Aborted,
    /// The test hook failed; its message.
    Hook(String),
    /// A filesystem error that retrying will not cure.
    Io {
        lock_path: PathBuf,
        code: &'static str,
        message: String,
    },
}

/// At most this many attempts in a row skip the wait (after a reclaim, or a
/// lock that vanished); then the waiter sleeps, so a hostile filesystem that
/// keeps changing cannot make us spin.
const MAX_IMMEDIATE_RETRIES: u32 = 16;

/// `<file>.lock`.
pub fn lock_path_of(file_path: &Path) -> PathBuf {
    let mut bytes = file_path.as_os_str().to_os_string().into_vec();
    bytes.extend_from_slice(b".lock");
    PathBuf::from(OsString::from_vec(bytes))
}

/// Milliseconds since the epoch, as `Date.now()` gives them.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Nanoseconds since the epoch (for comparing with directory mtimes).
pub fn now_ns() -> i128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as i128)
        .unwrap_or(0)
}

/// What judging the holder of a contended lock concluded.
enum Judged {
    /// Look again at once (the lock vanished, or was reclaimed).
    Retry,
    /// A stale lock was replaced by ours.
    Won(Published),
    /// Held by someone we must wait for.
    Held(Holder),
}

/// Leaves the in-process queue however the acquisition ends.
struct QueuePlace(Ticket);

impl Drop for QueuePlace {
    fn drop(&mut self) {
        table::dequeue(&self.0);
    }
}

/// The state one acquisition carries across attempts.
struct Attempts<'a> {
    options: &'a AcquireOptions,
    lock_path: PathBuf,
    parent_path: PathBuf,
    lock_name: OsString,
    owner_token: String,
    wake: Arc<Notify>,
    deadline: Instant,
    count: u32,
    place: Option<QueuePlace>,
    /// Held until this acquisition has a place in its queue.
    arrival: Option<table::Arrival>,
    subscription: Option<Subscription>,
    /// Our record, staged while waiting (see [`Staged`]).
    staged: Option<Staged>,
    reaped_staging: bool,
}

/// Acquires the lock for `options.file_path`. `arrival` was taken when the
/// caller asked; it is let go once this acquisition has its queue place.
pub async fn acquire(
    options: AcquireOptions,
    arrival: table::Arrival,
) -> Result<Arc<Generation>, AcquireError> {
    let mut attempts = Attempts::new(&options)?;
    attempts.arrival = Some(arrival);
    options.cancel.attach(attempts.wake.clone());
    attempts.run().await
}

/// One attempt made on the caller's thread, for the uncontended case: make
/// the parent, publish if nothing stands at the lock name and nobody of
/// this process waits for it. It never waits, never judges a holder and
/// runs no hook, so it is a bounded handful of syscalls. `Ok(None)` means
/// the lock is not free now: [`acquire`] takes over and makes the attempt
/// whole (this one only looked), so the attempt count is unchanged.
pub fn acquire_first_attempt(
    options: &AcquireOptions,
) -> Result<Option<Arc<Generation>>, AcquireError> {
    let mut attempts = Attempts::new(options)?;
    attempts.make_parent()?;
    let parent = attempts.open_parent()?;
    let key = attempts.key_of(parent.as_fd())?;
    if !table::nobody_waits_for(&key) {
        return Ok(None);
    }
    release::retry_pending(&key);
    let record = attempts.record();
    match attempts.try_publish(parent.as_fd(), &record) {
        Ok(Some(published)) => Ok(Some(attempts.held(key, parent, published, record))),
        // Held, or the parent vanished meanwhile: the full state machine
        // knows what to do with either.
        Ok(None) | Err(PublishError::Os(Errno::NOENT)) => Ok(None),
        Err(error) => Err(attempts.publish_error(error)),
    }
}

impl<'a> Attempts<'a> {
    fn new(options: &'a AcquireOptions) -> Result<Self, AcquireError> {
        let lock_path = lock_path_of(&options.file_path);
        let (parent_path, lock_name) = fsx::split_final(&lock_path)
            .map_err(|errno| io_error(&lock_path, errno, "the lock path has no final name"))?;
        let budget = Duration::from_secs_f64(
            (options.retries * options.retry_delay.as_secs_f64()).clamp(0.0, 1e9),
        );
        Ok(Attempts {
            options,
            lock_path,
            parent_path,
            lock_name,
            owner_token: uuid::Uuid::new_v4().hyphenated().to_string(),
            wake: Arc::new(Notify::new()),
            deadline: Instant::now() + budget,
            count: 0,
            place: None,
            arrival: None,
            subscription: None,
            staged: None,
            reaped_staging: false,
        })
    }
}

impl Attempts<'_> {
    async fn run(&mut self) -> Result<Arc<Generation>, AcquireError> {
        let mut immediate = 0u32;
        loop {
            self.check_cancel()?;
            self.count += 1;
            let parent = self.prepare_parent().await?;
            let key = self.key_of(parent.as_fd())?;
            self.join_queue(&key);
            if !table::is_head(&self.place.as_ref().expect("joined").0) {
                // Another acquisition in this process is ahead: wait for the
                // hand-over without touching the disk.
                self.wait_for_turn(parent.as_fd()).await?;
                continue;
            }
            release::retry_pending(&key);
            let record = self.record();
            match self.try_publish(parent.as_fd(), &record) {
                Ok(Some(published)) => return Ok(self.held(key, parent, published, record)),
                Ok(None) => {}
                // The parent vanished between creating it and publishing.
                Err(PublishError::Os(Errno::NOENT)) if immediate < MAX_IMMEDIATE_RETRIES => {
                    immediate += 1;
                    continue;
                }
                Err(error) => return Err(self.publish_error(error)),
            }
            let holder = match self.judge_holder(parent.as_fd(), &record)? {
                Judged::Won(published) => return Ok(self.held(key, parent, published, record)),
                Judged::Retry if immediate < MAX_IMMEDIATE_RETRIES => {
                    immediate += 1;
                    continue;
                }
                Judged::Retry => None,
                Judged::Held(holder) => Some(holder),
            };
            let exit = match holder.as_ref().map(|h| self.holder_exit(h)) {
                Some(HolderExit::AlreadyGone) if immediate < MAX_IMMEDIATE_RETRIES => {
                    // The holder died between the probe and the pidfd.
                    immediate += 1;
                    continue;
                }
                Some(HolderExit::Watch(fd)) => Some(fd),
                _ => None,
            };
            immediate = 0;
            self.stage_for_wake(parent.as_fd())?;
            self.wait_or_give_up(parent.as_fd(), exit, holder).await?;
        }
    }

    /// Records a publication as this process's held generation.
    fn held(
        &self,
        key: LockKey,
        parent: OwnedFd,
        published: Published,
        record: Vec<u8>,
    ) -> Arc<Generation> {
        let parent_path = key.parent().map(Path::to_path_buf).unwrap_or_default();
        table::insert_held(Generation {
            id: table::next_id(),
            key,
            parent,
            parent_path,
            lock_name: self.lock_name.clone(),
            root: published.root,
            published: published.tree,
            record_bytes: record,
            owner_token: self.owner_token.clone(),
            policy: self.options.policy.clone(),
        })
    }

    fn publish_error(&self, error: PublishError) -> AcquireError {
        match error {
            PublishError::Os(errno) => self.io(errno, "cannot stage the lock record"),
            PublishError::Rename(code) => AcquireError::Io {
                lock_path: self.lock_path.clone(),
                code: rename_error_code(code),
                message: format!(
                    "Failed to publish file lock at {}: the no-replace rename failed ({code}).",
                    self.lock_path.display()
                ),
            },
        }
    }

    fn check_cancel(&self) -> Result<(), AcquireError> {
        if self.options.cancel.is_cancelled() {
            Err(AcquireError::Aborted)
        } else {
            Ok(())
        }
    }

    /// Creates missing parents, runs the test hook, and opens the parent.
    async fn prepare_parent(&self) -> Result<OwnedFd, AcquireError> {
        self.make_parent()?;
        if let Some(hook) = &self.options.after_parent_mkdir {
            hook(self.lock_path.to_string_lossy().into_owned())
                .await
                .map_err(AcquireError::Hook)?;
            self.check_cancel()?;
        }
        self.open_parent()
    }

    fn make_parent(&self) -> Result<(), AcquireError> {
        fsx::create_dir_all(&self.parent_path, Mode::from_raw_mode(0o700))
            .map_err(|errno| self.io(errno, "cannot create the lock's parent directory"))
    }

    fn open_parent(&self) -> Result<OwnedFd, AcquireError> {
        // Symlinks in the parent path are followed on purpose: aliased
        // paths name the same lock. Everything below the parent is
        // resolved relative to this descriptor, no-follow.
        rustix::fs::open(
            &self.parent_path,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|errno| self.io(errno, "cannot open the lock's parent directory"))
    }

    /// The lock's canonical key: the parent as the kernel names it now.
    fn key_of(&self, parent: BorrowedFd<'_>) -> Result<LockKey, AcquireError> {
        Ok(fsx::fd_path(parent)
            .map_err(|errno| self.io(errno, "cannot resolve the lock's parent directory"))?
            .join(&self.lock_name))
    }

    /// The record this attempt would publish, stamped now.
    fn record(&self) -> Vec<u8> {
        OwnerRecord::for_this_process(
            process::current_start_time(),
            now_ms(),
            self.owner_token.clone(),
            self.options.policy.owner_host_id.clone(),
        )
        .to_json()
        .into_bytes()
    }

    /// Publishes `record` unless something already stands at the lock
    /// name; `None` when the lock is taken.
    fn try_publish(
        &mut self,
        parent: BorrowedFd<'_>,
        record: &[u8],
    ) -> Result<Option<Published>, PublishError> {
        // Look before leaping: a held lock costs one `stat` instead of a
        // staging directory made, renamed in vain and removed. The
        // no-replace rename stays the arbiter when the name is free.
        if fsx::stat_nofollow(parent, &self.lock_name).is_ok() {
            return Ok(None);
        }
        if let Some(mut staged) = self.staged.take()
            && staged.fits(parent, record)
        {
            match staged.publish(&self.lock_name, record)? {
                StagedPublication::Published(published) => return Ok(Some(published)),
                StagedPublication::Contended => {
                    self.staged = Some(staged);
                    return Ok(None);
                }
                StagedPublication::Lost => {}
            }
        }
        Ok(match publish(parent, &self.lock_name, record)? {
            Publication::Published(published) => Some(published),
            Publication::Contended => None,
        })
    }

    /// Stages our record while the lock is held, so that the wake-up that
    /// frees it costs one rename. A failure that would also fail the
    /// publication (no permission, no space, a name too long) fails the
    /// acquisition now rather than after the wait; a parent that vanished
    /// is left to the next attempt.
    fn stage_for_wake(&mut self, parent: BorrowedFd<'_>) -> Result<(), AcquireError> {
        if self.staged.is_some() || Instant::now() >= self.deadline {
            return Ok(());
        }
        match Staged::new(parent, &self.lock_name, &self.record()) {
            Ok(staged) => self.staged = Some(staged),
            Err(PublishError::Os(Errno::NOENT)) => {}
            Err(error) => return Err(self.publish_error(error)),
        }
        Ok(())
    }

    fn join_queue(&mut self, key: &LockKey) {
        let same = self.place.as_ref().is_some_and(|place| place.0.key == *key);
        if !same {
            self.place = None;
            self.subscription = None;
            self.place = Some(QueuePlace(table::enqueue(
                key.clone(),
                self.options.sequence,
                self.wake.clone(),
            )));
            self.arrival = None;
        }
    }

    /// Observes the holder and takes over a provably stale lock.
    fn judge_holder(
        &mut self,
        parent: BorrowedFd<'_>,
        record: &[u8],
    ) -> Result<Judged, AcquireError> {
        // Subscribe before looking, so a release between the look and the
        // wait still wakes us (the notification stores a permit). Only
        // contended attempts pay for the watch.
        if self.subscription.is_none() {
            self.subscription = wait::watch(parent, &self.lock_name, self.wake.clone());
        }
        if let Some(holder) = self.holder_at_a_glance(parent) {
            return Ok(Judged::Held(holder));
        }
        let observation = observe(parent, &self.lock_name)
            .map_err(|e| self.io(e.0, "cannot read the lock's owner record"))?;
        let verdict = judge(
            &observation,
            &self.options.policy,
            self.options.stale_ms,
            now_ns(),
            process::probe,
        );
        match &observation {
            Observation::Missing => return Ok(Judged::Retry),
            Observation::Lock { snapshot, .. } if verdict.stale => {
                return self.take_over(parent, record, snapshot);
            }
            _ => {}
        }
        self.reap_staging_once(parent);
        Ok(Judged::Held(describe(
            &observation,
            verdict,
            &self.options.policy,
        )))
    }

    /// A first look at the record alone, which is all a holder that must be
    /// waited for (alive, or on another host) needs. Anything else is
    /// observed in full, identity first, before a verdict may act on it.
    fn holder_at_a_glance(&mut self, parent: BorrowedFd<'_>) -> Option<Holder> {
        let record = glance_record(parent, &self.lock_name)?;
        let verdict = judge_record(&record, &self.options.policy, process::probe);
        if verdict.stale {
            return None;
        }
        self.reap_staging_once(parent);
        Some(describe_record(record, verdict, &self.options.policy))
    }

    /// Staging dirs of dead acquirers are reaped by the first contended
    /// attempt of each acquisition.
    fn reap_staging_once(&mut self, parent: BorrowedFd<'_>) {
        if !self.reaped_staging {
            self.reaped_staging = true;
            debris::reap_staging_of(parent, Some(&self.lock_name));
        }
    }

    /// Replaces a stale lock with ours in one atomic exchange, or, where
    /// the filesystem cannot exchange, removes it exactly and lets the next
    /// attempt publish.
    fn take_over(
        &self,
        parent: BorrowedFd<'_>,
        record: &[u8],
        judged: &TreeSnapshot,
    ) -> Result<Judged, AcquireError> {
        if crate::sys::faults::check("reclaim").is_err() {
            // Test seam: the reclaim is refused; the stale holder stays.
            return Ok(Judged::Held(self.holder_now(parent)));
        }
        // Reclaimers of one judged directory take turns, each re-checking
        // that the name still names it.
        let guard = match guard::guard_judged(parent, &self.lock_name, judged) {
            Guarded::Acquired(guard) => guard,
            Guarded::Gone => return Ok(Judged::Retry),
            // Another waiter is replacing it right now; its exchange wakes
            // us through the watch.
            Guarded::Busy => return Ok(Judged::Held(self.holder_now(parent))),
        };
        match publish_over(parent, &self.lock_name, record, judged) {
            Ok(Takeover::Published(published)) => return Ok(Judged::Won(published)),
            Ok(Takeover::NotJudged) | Ok(Takeover::Vanished) => return Ok(Judged::Retry),
            Ok(Takeover::Unsupported) => {}
            Err(error) => return Err(self.publish_error(error)),
        }
        // No exchange on this filesystem: remove the judged tree in place,
        // through a descriptor of it, never by moving the name away (a
        // detach could grab a successor that reused the judged inode
        // number). The name goes only by `rmdir` of the emptied judged
        // directory, which cannot remove a non-empty successor.
        let outcome = tree::remove_tree_in_place_at(parent, &self.lock_name, judged);
        drop(guard);
        let retry = outcome.ok
            || matches!(
                outcome.code,
                Some("not_found") | Some("identity_mismatch") | Some("tree_changed")
            );
        Ok(if retry {
            Judged::Retry
        } else {
            Judged::Held(self.holder_now(parent))
        })
    }

    /// The holder as observed now, for a report.
    fn holder_now(&self, parent: BorrowedFd<'_>) -> Holder {
        let observation = observe(parent, &self.lock_name).unwrap_or(Observation::Missing);
        let verdict = judge(
            &observation,
            &self.options.policy,
            self.options.stale_ms,
            now_ns(),
            process::probe,
        );
        describe(&observation, verdict, &self.options.policy)
    }

    /// How to learn that a live local holder exited.
    fn holder_exit(&self, holder: &Holder) -> HolderExit {
        let live_local = !holder.foreign && holder.verdict.liveness == Some(Liveness::Live);
        let pid = holder.record.as_ref().and_then(OwnerRecord::pid_u32);
        match pid {
            // Our own process: the in-process queue and inotify wake us.
            Some(pid) if live_local && pid != std::process::id() => wait::holder_exit(pid),
            _ => HolderExit::Unwatched,
        }
    }

    /// Gives up when the budget is spent (describing `holder`, or the
    /// holder as observed now), else waits for a change.
    async fn wait_or_give_up(
        &self,
        parent: BorrowedFd<'_>,
        exit: Option<AsyncFd<OwnedFd>>,
        holder: Option<Holder>,
    ) -> Result<(), AcquireError> {
        if Instant::now() < self.deadline {
            return self.sleep(exit).await;
        }
        let holder = holder.unwrap_or_else(|| self.holder_now(parent));
        Err(self.timeout(holder))
    }

    /// Waits, without polling, until this waiter reaches the head of its
    /// queue (the waiter ahead notifies it) or its budget is spent.
    async fn wait_for_turn(&self, parent: BorrowedFd<'_>) -> Result<(), AcquireError> {
        let remaining = self.deadline.saturating_duration_since(Instant::now());
        if remaining.is_zero() {
            return Err(self.timeout(self.holder_now(parent)));
        }
        wait::until_change(&self.wake, None, remaining).await;
        self.check_cancel()
    }

    async fn sleep(&self, exit: Option<AsyncFd<OwnedFd>>) -> Result<(), AcquireError> {
        let remaining = self.deadline.saturating_duration_since(Instant::now());
        let delay = self.options.retry_delay.min(remaining);
        wait::until_change(&self.wake, exit.as_ref(), delay).await;
        self.check_cancel()
    }

    fn timeout(&self, holder: Holder) -> AcquireError {
        AcquireError::Timeout {
            lock_path: self.lock_path.clone(),
            attempts: self.count,
            holder: Box::new(holder),
        }
    }

    fn io(&self, errno: Errno, what: &str) -> AcquireError {
        io_error(&self.lock_path, errno, what)
    }
}

fn io_error(lock_path: &Path, errno: Errno, what: &str) -> AcquireError {
    AcquireError::Io {
        lock_path: lock_path.to_path_buf(),
        code: errno_code(errno),
        message: format!(
            "Failed to acquire file lock at {}: {what}: {}.",
            lock_path.display(),
            errno_text(errno)
        ),
    }
}

/// The error code a publication failure surfaces as: the errno-style name
/// where the primitive's code has one.
fn rename_error_code(code: &str) -> &'static str {
    match code {
        "permission_denied" => "EACCES",
        "cross_device" => "EXDEV",
        "not_found" => "ENOENT",
        "reparse_point" => "ELOOP",
        _ => "EPUBLISH",
    }
}
