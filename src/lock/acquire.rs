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
//!
//! Threads. The head of a lock's queue contends on a blocking thread of
//! its own ([`contend`]): it makes each attempt there and sleeps there
//! between them, in `poll` on its kernel watches ([`wait`]), so a kernel
//! event reaches the thread that acts on it directly, and it settles the
//! caller itself when it wins ([`Answer`]). The runtime's thread only
//! queues the others and guards the caller: on abort, or when the budget
//! is spent while an attempt is stuck in a syscall, it answers at once;
//! the stuck attempt cleans up after itself when it returns (a lock it won
//! then is given straight back: see [`Claim`]). A filesystem that stalls a
//! syscall stalls that one head, never another lock's hand-off.

use std::ffi::OsString;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::sys::os::fd::{AsFd, BorrowedFd, OwnedFd};
use crate::sys::os::io::Errno;

use crate::fs::fsx;
use crate::fs::tree::{self, TreeSnapshot};
use crate::lock::debris;
use crate::lock::elders::{self, Elders};
use crate::lock::fastpath;
use crate::lock::fence;
use crate::lock::guard::{self, Guarded};
use crate::lock::head_threads;
use crate::lock::names;
use crate::lock::observe::{Observation, Owner, glance_record, observe};
use crate::lock::publish::{
    self, Attempted, LockMode, PastCache, Publication, PublishError, Published, Staged,
    StagedPublication, Takeover, publish, publish_over,
};
use crate::lock::record::OwnerRecord;
use crate::lock::release;
use crate::lock::report::{Holder, HolderState, describe, describe_record};
use crate::lock::table::{self, Generation, LockKey, Ticket};
use crate::lock::verdict::{HostPolicy, Liveness, Observer, judge, judge_record};
use crate::lock::volume;
use crate::sys::clock;
use crate::sys::closer::ClosedLater;
use crate::sys::errno::{errno_code, errno_text};
use crate::sys::incarnation::{self, ThisProcess};
use crate::sys::platform;
use crate::sys::wait::{self, Cancel, HolderExit, HolderWatch, Wake, Watch};

/// A test seam awaited between parent creation and publication in each
/// attempt (`FileLockTestHooks.afterParentMkdir`). Its error text aborts the
/// acquisition.
pub type Hook =
    Arc<dyn Fn(String) -> Pin<Box<dyn Future<Output = Result<(), String>> + Send>> + Send + Sync>;

/// Told once per acquisition, when it first finds the lock held by someone
/// else and is about to wait (`onContended`): who holds it.
pub type ContendedHook = Arc<dyn Fn(&Holder) + Send + Sync>;

/// Everything one acquisition needs, validated by the caller.
pub struct AcquireOptions {
    pub file_path: PathBuf,
    /// How long to wait for the lock, from the first attempt ([`waiting_budget`]).
    pub budget: Duration,
    pub retry_delay: Duration,
    pub stale_ms: f64,
    pub policy: HostPolicy,
    pub cancel: Arc<Cancel>,
    pub after_parent_mkdir: Option<Hook>,
    /// The caller's place in line, from [`table::next_id`] at call time.
    pub sequence: u64,
    /// Generations the caller's own call chain holds (its async context):
    /// waiting for one of them would wait for itself.
    pub held_by_caller: Vec<u64>,
    pub on_contended: Option<ContendedHook>,
    /// The lock directory's permission bits (and its record's, and those of
    /// the parents it makes): `mode`.
    pub mode: LockMode,
    /// A child of this process the lock is held in the name of (its record
    /// names that child: `exactlock run`'s command), or `None`: this one.
    pub on_behalf_of: Option<u32>,
    /// Whether the lock, once won, gets a fencing token (see [`fence`]).
    pub fence: bool,
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
    /// The budget ran out while the filesystem had not answered an attempt
    /// that had not yet seen any holder.
    Stalled { lock_path: PathBuf, attempts: u32 },
    /// The caller's signal aborted the wait (or its thread is going away);
    /// the attempts made and the holder as last seen, when it got that far.
    Aborted {
        attempts: u32,
        holder: Option<Box<Holder>>,
    },
    /// The test hook failed; its message.
    Hook(String),
    /// A filesystem error that retrying will not cure.
    Io {
        lock_path: PathBuf,
        code: &'static str,
        message: String,
    },
}

/// A lock this process has just won, not yet handed to anyone who will
/// release it. Whoever takes it ([`Claim::take`]) owns the release; if it
/// is dropped instead — the acquisition was given up, or its JavaScript
/// environment went away while the attempt ran — the lock is given back at
/// once, so no published lock is ever left without an owner that can
/// release it.
pub struct Claim(Option<Arc<Generation>>);

impl Claim {
    pub fn new(generation: Arc<Generation>) -> Self {
        Claim(Some(generation))
    }

    /// The generation claimed.
    pub fn generation(&self) -> &Generation {
        self.0.as_ref().expect("claimed until taken")
    }

    /// Takes ownership of the release.
    pub fn take(mut self) -> Arc<Generation> {
        self.0.take().expect("claimed until taken")
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        let Some(generation) = self.0.take() else {
            return;
        };
        let id = generation.id;
        drop(generation);
        // Releasing makes syscalls: never on the runtime's worker thread.
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn_blocking(move || release::give_back(id));
            }
            Err(_) => release::give_back(id),
        }
    }
}

/// The least time an attempt may take past the deadline before the caller
/// is answered without it.
const STEP_GRACE: Duration = Duration::from_millis(50);

/// How many graces past the deadline a head that never got a thread to
/// run on is waited for (see [`Guard::head_stuck`]).
const STARVED_GRACES: u32 = 20;

/// How long an abort waits for the head to clean up and answer before it
/// answers for a head stuck in a syscall.
const ABORT_GRACE: Duration = Duration::from_millis(100);

/// At most this many attempts in a row skip the wait (after a reclaim, or a
/// lock that vanished); then the waiter sleeps, so a hostile filesystem that
/// keeps changing cannot make us spin.
const MAX_IMMEDIATE_RETRIES: u32 = 16;

/// Counts an acquisition of `file_path`'s lock as arriving (see
/// [`table::Arrival`]) from the moment its caller asked: taken on the
/// caller's thread, before anything touches the disk.
pub fn arrive(file_path: &Path, sequence: u64) -> table::Arrival {
    let lock_path = lock_path_of(file_path);
    // A path without a final name fails its first attempt; it arrives
    // under the whole path, which no other lock name can equal.
    let name = fsx::split_final(&lock_path)
        .map(|(_, name)| name)
        .unwrap_or_else(|_| lock_path.clone().into_os_string());
    table::arrive(&lock_path, &name, sequence)
}

/// `<file>.lock`.
pub fn lock_path_of(file_path: &Path) -> PathBuf {
    let mut path = file_path.as_os_str().to_os_string();
    path.push(names::LOCK_SUFFIX);
    PathBuf::from(path)
}

/// Where an acquisition's outcome goes: settled exactly once, by whoever
/// gets there first — the head's thread when it wins or fails, or the
/// runtime's thread on abort or a budget spent while an attempt is stuck.
pub trait Answer: Send + Sync {
    /// Settles with `outcome`; `false` if it was settled already (a claim
    /// passed then is dropped, which gives the lock back).
    fn settle(&self, outcome: Result<Claim, AcquireError>) -> bool;
    fn is_settled(&self) -> bool;
}

/// What one attempt concluded.
enum Step {
    /// The lock is ours.
    Won(Claim),
    /// Another acquisition of this process is ahead in the queue.
    NotHead,
    /// Look again at once (the lock vanished, or was reclaimed).
    Retry,
    /// Held by someone we must wait for; the kernel's notice of the
    /// holder's exit when it is a local live process.
    Held {
        holder: Box<Holder>,
        exit: Option<HolderWatch>,
    },
}

/// What judging the holder of a contended lock concluded.
enum Judged {
    Retry,
    Won(Published),
    Held(Holder),
}

/// Leaves the in-process queue however the acquisition ends.
struct QueuePlace(Ticket);

impl Drop for QueuePlace {
    fn drop(&mut self) {
        table::dequeue(&self.0);
    }
}

/// What an acquisition has seen so far, for the answer the runtime's thread
/// gives when the head's thread cannot (stuck in a syscall).
#[derive(Default)]
struct Progress {
    attempts: std::sync::atomic::AtomicU32,
    /// The thread the head runs on now (see [`Guard::head_stuck`]); 0
    /// while it has none, or where threads are not told apart.
    head_thread: std::sync::atomic::AtomicI32,
    /// Time the head has spent awaiting the test hook on the JavaScript
    /// thread (a wait for JavaScript, not for the filesystem), and since
    /// when it awaits it now.
    in_hook: std::sync::Mutex<(Duration, Option<Instant>)>,
    last_holder: std::sync::Mutex<Option<Holder>>,
}

impl Progress {
    fn count_attempt(&self) {
        self.attempts
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }

    /// All the time spent in the hook up to `now`.
    fn hook_time(&self, now: Instant) -> Duration {
        let (done, since) = *self.in_hook.lock().unwrap_or_else(|p| p.into_inner());
        done + since.map_or(Duration::ZERO, |since| now.saturating_duration_since(since))
    }

    fn hook_begins(&self) {
        self.in_hook.lock().unwrap_or_else(|p| p.into_inner()).1 = Some(Instant::now());
    }

    fn hook_ends(&self) {
        let mut in_hook = self.in_hook.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(since) = in_hook.1.take() {
            in_hook.0 += since.elapsed();
        }
    }

    fn saw(&self, holder: Option<Holder>) {
        *self.last_holder.lock().unwrap_or_else(|p| p.into_inner()) = holder;
    }

    fn last_holder(&self) -> Option<Holder> {
        self.last_holder
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The error for an aborted wait: how far it got.
    fn aborted(&self) -> AcquireError {
        AcquireError::Aborted {
            attempts: self.attempts.load(std::sync::atomic::Ordering::SeqCst),
            holder: self.last_holder().map(Box::new),
        }
    }

    /// The error for a spent budget: the holder as last seen, or a
    /// filesystem that never answered.
    fn budget_spent(&self, lock_path: &Path) -> AcquireError {
        let attempts = self.attempts.load(std::sync::atomic::Ordering::SeqCst);
        match self.last_holder() {
            Some(holder) => AcquireError::Timeout {
                lock_path: lock_path.to_path_buf(),
                attempts,
                holder: Box::new(holder),
            },
            None => AcquireError::Stalled {
                lock_path: lock_path.to_path_buf(),
                attempts,
            },
        }
    }
}

/// The state one acquisition carries across attempts. It moves to the
/// head's thread and back.
struct Attempts {
    options: Arc<AcquireOptions>,
    this: Arc<ThisProcess>,
    lock_path: PathBuf,
    parent_path: PathBuf,
    lock_name: OsString,
    owner_token: String,
    wake: Arc<Wake>,
    deadline: Instant,
    progress: Arc<Progress>,
    place: Option<QueuePlace>,
    /// Held until this acquisition has a place in its queue.
    arrival: Option<table::Arrival>,
    /// First in its queue but letting an acquisition that asked before it
    /// reach its queue first (see [`table::Turn::AfterArrival`]): until
    /// this instant at most, which is [`table::ARRIVAL_GRACE`] after it
    /// first found itself doing so (`arrival_patience`), or its deadline if
    /// that is later and the earlier caller asked for this very path.
    after_arrival: Option<Instant>,
    arrival_patience: Option<Instant>,
    watch: Option<Watch>,
    /// The waiters of other processes whose records were staged before
    /// ours (see [`elders`]).
    elders: Option<Elders>,
    /// Whether it slept for the lock at least once.
    waited: bool,
    /// Our record, staged while waiting (see [`Staged`]).
    staged: Option<Staged>,
    /// Whether this acquisition already looked for dead waiters' debris.
    reaped_while_contended: bool,
    /// Woken by the kernel's notice of the holder's exit: the next look goes
    /// straight to the full observation a reclaim needs (the glance would
    /// only read the record and probe the pid to find them gone).
    holder_exited: bool,
    /// Whether `on_contended` was told.
    announced: bool,
    /// Whether the lock was taken over from a dead holder.
    reclaimed: bool,
    /// A synchronous acquisition: it blocks its caller's thread, so it
    /// never waits for anything of its own process (see [`acquire_blocking`]).
    blocking: bool,
}

/// Acquires the lock for `options.file_path` and settles `answer`.
/// `arrival` was taken when the caller asked; it is let go once this
/// acquisition has its queue place.
pub async fn acquire(
    options: Arc<AcquireOptions>,
    arrival: table::Arrival,
    answer: Arc<dyn Answer>,
    handover: Option<Handover>,
) {
    let mut attempts = match Attempts::new(options.clone()) {
        Ok(attempts) => attempts,
        Err(error) => {
            answer.settle(Err(error));
            return;
        }
    };
    attempts.arrival = Some(arrival);
    if let Some(Handover {
        staged,
        owner_token,
    }) = handover
    {
        attempts.staged = Some(staged);
        attempts.owner_token = owner_token;
    }
    options.cancel.attach(attempts.wake.clone());
    let guard = Guard {
        options: options.clone(),
        lock_path: attempts.lock_path.clone(),
        wake: attempts.wake.clone(),
        deadline: attempts.deadline,
        progress: attempts.progress.clone(),
        answer,
    };
    guard.run(attempts).await;
}

/// A synchronous acquisition (`acquireLockSync`): the whole state machine
/// on the calling thread, which it blocks while it waits — for another
/// process, within the budget. It never waits for its own process: another
/// acquisition of this process ahead in the queue, or a generation of this
/// process holding the lock, may need the very thread it would block (their
/// JavaScript runs there) to ever finish; that is `EDEADLK` at once, so it
/// neither deadlocks nor overtakes them.
///
/// Nothing can cancel it from outside while it blocks its caller's thread
/// (no signal: the event loop is blocked too), but its caller's thread can
/// be torn down: a Worker terminated, or the main thread's
/// `process.exit()` joining a Worker blocked here. So while it sleeps it
/// asks `caller_wants_it` at least every [`CALLER_CHECK`], and gives up
/// (removing what it staged) as soon as the answer is no.
pub fn acquire_blocking(
    options: Arc<AcquireOptions>,
    caller_wants_it: &dyn Fn() -> bool,
) -> Result<Claim, AcquireError> {
    let mut attempts = Attempts::new(options)?;
    // No arrival of its own: it never waits behind anyone of this process,
    // and counting itself would hide those who are still arriving.
    attempts.blocking = true;
    let answer = BlockingAnswer::default();
    match contend(attempts, &answer, caller_wants_it) {
        Contended::Settled => answer.take(),
        Contended::NotHead(attempts) => Err(attempts.would_block_its_own_process()),
    }
}

/// The answer of a synchronous acquisition: kept for its caller to take.
#[derive(Default)]
struct BlockingAnswer(Mutex<Option<Result<Claim, AcquireError>>>);

impl BlockingAnswer {
    fn take(&self) -> Result<Claim, AcquireError> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .unwrap_or(Err(AcquireError::Aborted {
                attempts: 0,
                holder: None,
            }))
    }
}

impl Answer for BlockingAnswer {
    fn settle(&self, outcome: Result<Claim, AcquireError>) -> bool {
        let mut slot = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if slot.is_some() {
            return false;
        }
        *slot = Some(outcome);
        true
    }

    fn is_settled(&self) -> bool {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).is_some()
    }
}

/// One attempt made on the caller's thread, for the uncontended case: make
/// the parent, publish if nothing stands at the lock name and nobody of
/// this process waits for it. It never waits, never judges a holder and
/// runs no hook, so it is a bounded handful of syscalls — made only in a
/// directory an earlier attempt found to be on a local, fast filesystem
/// ([`fastpath`]). `Ok(None)` means the lock is not free now, or this
/// directory has not earned the inline path: [`acquire`] takes over and
/// makes the attempt whole (this one only looked), so the attempt count is
/// unchanged.
pub fn acquire_first_attempt(options: Arc<AcquireOptions>) -> Result<Inline, AcquireError> {
    let mut attempts = Attempts::new(options)?;
    let started = Instant::now();
    let Some(parent) = fastpath::inline_parent(&attempts.parent_path) else {
        return Ok(Inline::NotNow(None));
    };
    let outcome = attempts.inline_attempt(parent);
    fastpath::inline_took(&attempts.parent_path, started.elapsed());
    outcome
}

/// What the inline attempt ([`acquire_first_attempt`]) came to.
pub enum Inline {
    Won(Claim),
    /// Not now: [`acquire`] takes over, handed the record this attempt
    /// staged when it found the lock taken (see [`publish::publish_or_stage`]).
    NotNow(Option<Handover>),
}

/// A record an inline attempt staged, for the acquisition that takes over:
/// it goes on as the same owner (the same `owner_token`), so what an
/// observer read in the staging is what the lock says once published.
pub struct Handover {
    staged: Staged,
    owner_token: String,
}

/// How a head's contention ended.
enum Contended {
    /// The answer is settled (by the head, or already by the guard).
    Settled,
    /// Another acquisition of this process is ahead: wait for the turn.
    NotHead(Box<Attempts>),
}

/// The runtime side of one acquisition: hands the head's work to a
/// blocking thread, queues behind other heads of this process, and answers
/// the caller when the head cannot.
struct Guard {
    options: Arc<AcquireOptions>,
    lock_path: PathBuf,
    wake: Arc<Wake>,
    deadline: Instant,
    progress: Arc<Progress>,
    answer: Arc<dyn Answer>,
}

impl Guard {
    async fn run(&self, mut attempts: Attempts) {
        loop {
            let answer = self.answer.clone();
            self.progress.head_thread.store(0, Ordering::SeqCst);
            let progress = self.progress.clone();
            // An asynchronous caller is never blocked: only an abort or a
            // teardown (through `cancel`) stops its head. Its thread is one
            // of the heads' own pool, never one a short step needs.
            let mut head = head_threads::spawn(move || {
                progress
                    .head_thread
                    .store(platform::native::this_thread(), Ordering::SeqCst);
                contend(attempts, &*answer, &|| true)
            });
            let cancel = self.options.cancel.clone();
            // The head settles a spent budget itself; this only covers a
            // head stuck in a syscall, one retry delay (at least
            // STEP_GRACE) after the deadline.
            let not_before = self.deadline.max(Instant::now());
            let grace = self.options.retry_delay.max(STEP_GRACE);
            let ended = tokio::select! {
                biased;
                ended = &mut head => ended,
                _ = cancel.cancelled() => {
                    self.abort(head).await;
                    return;
                }
                _ = self.head_stuck(not_before, grace) => {
                    self.answer.settle(Err(self.budget_spent()));
                    return;
                }
            };
            match ended {
                Ok(Contended::Settled) => return,
                Ok(Contended::NotHead(back)) => {
                    attempts = *back;
                    // It waits for another acquisition of this process: its
                    // release, too, lets the waiter it wakes run first.
                    attempts.waited = true;
                }
                Err(_) => {
                    self.answer.settle(Err(self.internal_error()));
                    return;
                }
            }
            // First in its queue, letting an earlier caller of this lock's
            // name reach its queue first: a moment, whatever the budget (an
            // acquisition that will not wait is not failed for it), woken
            // as soon as that caller gets there.
            if let Some(until) = attempts.after_arrival.take() {
                let pause = until.saturating_duration_since(Instant::now());
                wait::until_signalled(&self.wake, &self.options.cancel, pause).await;
                continue;
            }
            // Another acquisition in this process is ahead: wait for the
            // hand-over without touching the disk.
            let remaining = self.deadline.saturating_duration_since(Instant::now());
            if remaining.is_zero() {
                let holder = describe_off_thread(attempts).await;
                *self
                    .progress
                    .last_holder
                    .lock()
                    .unwrap_or_else(|p| p.into_inner()) = holder;
                self.answer.settle(Err(self.budget_spent()));
                return;
            }
            wait::until_signalled(&self.wake, &self.options.cancel, remaining).await;
        }
    }

    /// Resolves once the head, from `not_before` on, has not come back for
    /// `grace` of time in which its thread could run: the wall time less
    /// what the thread spent runnable but waiting for a CPU. A head stuck
    /// in a syscall (a dead server) does not wait for a CPU, so its time
    /// counts in full; one that is merely not scheduled on a loaded
    /// machine is not stuck, and answering for it would report a
    /// filesystem that "did not answer" while a holder was there to see.
    /// Time the head spends awaiting the test hook (`afterParentMkdir`,
    /// run on the JavaScript thread) does not count either.
    /// Where the system keeps no such account (macOS), wall time counts;
    /// and a head that has no thread to run on is waited for at most
    /// [`STARVED_GRACES`] graces.
    async fn head_stuck(&self, not_before: Instant, grace: Duration) {
        tokio::time::sleep_until(not_before.into()).await;
        let head_wait = || {
            let thread = self.progress.head_thread.load(Ordering::SeqCst);
            if thread == 0 {
                return None;
            }
            platform::native::cpu_wait(thread).map(|wait| (thread, wait))
        };
        let accounted = platform::native::this_thread() != 0;
        let mut baseline = head_wait();
        let mut hook_before = self.progress.hook_time(Instant::now());
        let mut able = Duration::ZERO;
        let mut without_thread = Duration::ZERO;
        let mut counted_to = Instant::now();
        loop {
            tokio::time::sleep(grace.saturating_sub(able).max(Duration::from_millis(1))).await;
            let now = Instant::now();
            let span = now - counted_to;
            let current = head_wait();
            let waited_for_cpu = match (baseline, current) {
                _ if !accounted => Duration::ZERO,
                // Runnable at either end: waiting for a CPU (the kernel
                // adds a wait to the total only when it ends), or on one.
                (Some((before, was)), Some((thread, is))) if before == thread => {
                    if was.runnable || is.runnable {
                        span
                    } else {
                        is.waited.saturating_sub(was.waited).min(span)
                    }
                }
                // The head had no thread at one end of the span: it was
                // waiting for one.
                _ => {
                    without_thread += span;
                    span
                }
            };
            // Time spent awaiting JavaScript (the test hook) is no syscall.
            let hook_now = self.progress.hook_time(now);
            let in_hook = hook_now.saturating_sub(hook_before);
            hook_before = hook_now;
            able += span.saturating_sub(waited_for_cpu + in_hook);
            counted_to = now;
            baseline = current;
            if able >= grace || without_thread >= grace * STARVED_GRACES {
                return;
            }
        }
    }

    /// Answers an abort. The head, woken by it, removes what it staged
    /// and answers itself; only a head stuck in a syscall for
    /// [`ABORT_GRACE`] is answered for (it cleans up when it returns).
    async fn abort(&self, mut head: tokio::task::JoinHandle<Contended>) {
        if let Ok(Ok(Contended::NotHead(attempts))) =
            tokio::time::timeout(ABORT_GRACE, &mut head).await
        {
            let _ = tokio::task::spawn_blocking(move || drop(attempts)).await;
        }
        self.answer.settle(Err(self.progress.aborted()));
    }

    fn budget_spent(&self) -> AcquireError {
        self.progress.budget_spent(&self.lock_path)
    }

    fn internal_error(&self) -> AcquireError {
        AcquireError::Io {
            lock_path: self.lock_path.clone(),
            code: "EIO",
            message: format!(
                "Failed to acquire file lock at {}: an attempt ended unexpectedly (internal error).",
                self.lock_path.display()
            ),
        }
    }
}

/// The holder as it stands now, looked at off the runtime's thread (for
/// a waiter whose budget ran out behind another of this process); the
/// acquisition's state is dropped there too.
async fn describe_off_thread(attempts: Attempts) -> Option<Holder> {
    tokio::task::spawn_blocking(move || {
        let holder = attempts.holder_now_by_path();
        drop(attempts);
        holder
    })
    .await
    .ok()
}

/// The head's work, on its own thread: attempt, sleep until something
/// changes, attempt again, until the lock is won, the budget is spent, the
/// caller aborts, or another acquisition of this process is ahead. It
/// settles `answer` itself (but for the last case), and stops as soon as
/// it finds it settled by the guard (abort, stuck past the budget): then
/// it drops its state here, removing a staged record and giving back a
/// lock it won for nobody.
fn contend(
    mut attempts: Attempts,
    answer: &dyn Answer,
    caller_wants_it: &dyn Fn() -> bool,
) -> Contended {
    attempts.wake.arm();
    let mut immediate = 0u32;
    loop {
        if answer.is_settled() {
            return Contended::Settled;
        }
        if attempts.options.cancel.is_cancelled() {
            let aborted = attempts.progress.aborted();
            return attempts.finish(answer, Err(aborted));
        }
        attempts.progress.count_attempt();
        crate::debug!("attempt on {}", attempts.lock_path.display());
        if let Err(error) = attempts.run_hook() {
            return attempts.finish(answer, Err(error));
        }
        let (holder, exit) = match attempts.attempt() {
            Err(error) => return attempts.finish(answer, Err(error)),
            Ok(Step::Won(claim)) => {
                crate::sys::trace::stamp("waiter: published");
                crate::debug!("acquired {}", attempts.lock_path.display());
                return attempts.finish(answer, Ok(claim));
            }
            Ok(Step::NotHead) => {
                // Queued behind another caller of this process: it waits
                // for whoever holds the lock now.
                if !attempts.announced && attempts.options.on_contended.is_some() {
                    let holder = attempts.holder_now_by_path();
                    if holder.state != HolderState::Free {
                        attempts.announce(&holder);
                    }
                }
                return Contended::NotHead(Box::new(attempts));
            }
            Ok(Step::Retry) if immediate < MAX_IMMEDIATE_RETRIES => {
                immediate += 1;
                continue;
            }
            Ok(Step::Retry) => (None, None),
            Ok(Step::Held { holder, exit }) => {
                immediate = 0;
                attempts.announce(&holder);
                (Some(*holder), exit)
            }
        };
        if holder.is_some() {
            attempts.progress.saw(holder);
        }
        let remaining = attempts.deadline.saturating_duration_since(Instant::now());
        if remaining.is_zero() {
            return attempts.settle_spent_budget(answer);
        }
        let delay = fallback_sleep(attempts.options.retry_delay).min(remaining);
        crate::debug!(
            "waiting for {}: up to {} ms, woken by {}{}this process, or the timer ({} mechanisms)",
            attempts.lock_path.display(),
            delay.as_millis(),
            if attempts.watch.is_some() {
                wait::NAME_EVENTS
            } else {
                ""
            },
            if exit.is_some() {
                wait::HOLDER_EVENTS
            } else {
                ""
            },
            crate::sys::platform::name(),
        );
        let Some(woken) = attempts.sleep_in_turn(exit.as_ref(), delay, caller_wants_it) else {
            crate::debug!(
                "giving up on {}: the calling thread is being torn down",
                attempts.lock_path.display()
            );
            let aborted = attempts.progress.aborted();
            return attempts.finish(answer, Err(aborted));
        };
        crate::sys::trace::stamp("waiter: woken");
        attempts.holder_exited = woken == wait::Woken::HolderExited;
        crate::debug!(
            "woken on {}: {}",
            attempts.lock_path.display(),
            woken.as_str()
        );
    }
}

/// This process's own subdirectories beside the lock `key`, which are no
/// debris: its lock directories and its waiters' staged records there
/// (counted alike by every attempt, inline or not, so that one waiter's
/// staging is never taken for new by another acquisition).
fn own_subdirectories(key: &LockKey) -> u64 {
    table::generations_in(&key.parent)
        + crate::lock::publish::stagings_in((key.parent.dev, key.parent.ino))
}

/// How often a synchronous acquisition that sleeps asks whether its caller
/// still wants it (see [`acquire_blocking`]): the longest a terminated
/// Worker, or a `process.exit()` that joins it, waits for it.
const CALLER_CHECK: Duration = Duration::from_millis(50);

/// The waiting budget: `timeoutMs` when the caller gave one (`Infinity`
/// waits until the lock is won), else `retries × retryDelay`; at most
/// [`UNBOUNDED_BUDGET_SECS`], and 0 for anything not a number. `timeout`
/// bounds the wait whatever `retryDelayMs` is: the delay is only how often a
/// waiter looks when no event wakes it.
pub fn waiting_budget(retries: f64, retry_delay: Duration, timeout_ms: Option<f64>) -> Duration {
    let secs = match timeout_ms {
        Some(ms) if ms.is_nan() => 0.0,
        Some(ms) => (ms / 1000.0).clamp(0.0, UNBOUNDED_BUDGET_SECS),
        None => budget_secs(retries, retry_delay.as_secs_f64()),
    };
    Duration::from_secs_f64(secs)
}

/// The waiting budget in seconds: `retries × retryDelay`, at most
/// [`UNBOUNDED_BUDGET_SECS`]; infinite `retries` is that bound whatever the
/// delay (even 0: `∞ × 0` is no number), and anything not a number is 0.
fn budget_secs(retries: f64, retry_delay_secs: f64) -> f64 {
    if retries == f64::INFINITY {
        return UNBOUNDED_BUDGET_SECS;
    }
    let budget = retries * retry_delay_secs;
    if budget.is_nan() {
        0.0
    } else {
        budget.clamp(0.0, UNBOUNDED_BUDGET_SECS)
    }
}

/// How long a head sleeps when no event wakes it: `retryDelayMs`, or
/// [`ZERO_DELAY_FALLBACK`] for a delay of 0 (which leaves time to wait only
/// with `retries: Infinity`): a waiter never spins.
fn fallback_sleep(retry_delay: Duration) -> Duration {
    if retry_delay.is_zero() {
        ZERO_DELAY_FALLBACK
    } else {
        retry_delay
    }
}

/// The fallback sleep of a waiter whose `retryDelayMs` is 0 (the default delay).
const ZERO_DELAY_FALLBACK: Duration = Duration::from_millis(100);

/// Who an observation shows, for `NODE_DEBUG=exactlock`.
fn observed_owner(observation: &Observation) -> String {
    match observation {
        Observation::Lock {
            owner: Owner::Valid { record, .. },
            ..
        } => format!("pid {}", record.pid),
        Observation::Missing => "nothing".into(),
        _ => "no valid record".into(),
    }
}

/// A budget no waiter outlives (about 31 years): `retries: Infinity`.
const UNBOUNDED_BUDGET_SECS: f64 = 1e9;

impl Attempts {
    /// Sleeps for up to `delay` until something changes (see
    /// [`wait::sleep`]); a synchronous acquisition sleeps in slices of
    /// [`CALLER_CHECK`] and asks its caller between them. `None` when the
    /// caller no longer wants it.
    fn sleep(
        &self,
        exit: Option<&HolderWatch>,
        delay: Duration,
        caller_wants_it: &dyn Fn() -> bool,
    ) -> Option<wait::Woken> {
        if !self.blocking {
            return Some(wait::sleep(self.watch.as_ref(), exit, &self.wake, delay));
        }
        let until = Instant::now() + delay;
        loop {
            let slice = until
                .saturating_duration_since(Instant::now())
                .min(CALLER_CHECK);
            let woken = wait::sleep(self.watch.as_ref(), exit, &self.wake, slice);
            if !caller_wants_it() {
                return None;
            }
            if woken != wait::Woken::Timeout || Instant::now() >= until {
                return Some(woken);
            }
        }
    }

    /// [`Attempts::sleep`] in turn with other processes' waiters: woken by
    /// the name, it lets those whose records were staged before ours take
    /// the lock first, each for at most its grace in all (see [`elders`]);
    /// at the end of a grace the attempt is made, and finds the lock taken
    /// if the elder took it.
    fn sleep_in_turn(
        &mut self,
        exit: Option<&HolderWatch>,
        delay: Duration,
        caller_wants_it: &dyn Fn() -> bool,
    ) -> Option<wait::Woken> {
        self.note_elders();
        self.waited = true;
        let mut woken = self.sleep(exit, delay, caller_wants_it)?;
        while woken == wait::Woken::NameChanged {
            let Some(left) = self.turn_of_an_elder() else {
                break;
            };
            let left = left.min(self.deadline.saturating_duration_since(Instant::now()));
            crate::debug!(
                "{} waiter(s) of other processes staged before us on {}: letting them go first, for up to {} ms",
                self.elders.as_ref().map_or(0, Elders::len),
                self.lock_path.display(),
                left.as_millis(),
            );
            let started = Instant::now();
            // The holder that was is no longer of interest: the name is free.
            let again = self.sleep(None, left, caller_wants_it)?;
            if let Some(elders) = self.elders.as_mut() {
                elders.gave(started.elapsed());
            }
            if again == wait::Woken::Timeout {
                break;
            }
            woken = again;
        }
        Some(woken)
    }

    /// How much longer the first waiter staged before ours may go first
    /// (see [`Elders::turn_left`]).
    fn turn_of_an_elder(&mut self) -> Option<Duration> {
        match (self.elders.as_mut(), self.staged.as_ref()) {
            (Some(elders), Some(staged)) if elders.are_before(staged) => {
                let left = elders.turn_left(staged.parent(), elders::grace(&self.lock_name))?;
                // Only while the name is free: taken (by the elder, whose
                // publication woke us where events name it, or by a
                // newcomer), the attempt judges its holder and watches it.
                let free = matches!(
                    fsx::stat_nofollow(staged.parent(), &self.lock_name),
                    Err(Errno::NOENT)
                );
                free.then_some(left)
            }
            _ => None,
        }
    }

    /// Reads, once per staging, which waiters of other processes staged
    /// before it. Only where the name's events wake us: a waiter woken by
    /// its timer alone looks when it looks, and takes no turns.
    fn note_elders(&mut self) {
        let Some(staged) = self.staged.as_ref() else {
            return;
        };
        if self.watch.is_none() || self.elders.as_ref().is_some_and(|e| e.are_before(staged)) {
            return;
        }
        self.elders = Some(Elders::before(staged, &self.lock_name));
    }

    /// The inline attempt (see [`acquire_first_attempt`]).
    fn inline_attempt(&mut self, parent: fastpath::InlineParent) -> Result<Inline, AcquireError> {
        let fastpath::InlineParent {
            dir: parent,
            identity,
            links: parent_links,
        } = parent;
        if parent_links == 0 {
            // Removed: the attempt off the thread finds out what the path
            // leads to now.
            return Ok(Inline::NotNow(None));
        }
        let key = LockKey {
            parent: identity,
            name: self.lock_name.clone(),
        };
        self.refuse_names_too_long_here(parent.as_fd(), &key)?;
        self.refuse_if_held_by_caller(&key)?;
        if !table::nobody_waits_for(&key) {
            return Ok(Inline::NotNow(None));
        }
        // The first scan of a directory's debris judges every candidate: off
        // the thread. A later one (debris may have appeared since: a
        // process killed while it waited here) runs on a thread of its
        // own: this one lists nothing.
        if !debris::scanned_before(&key.parent) {
            return Ok(Inline::NotNow(None));
        }
        debris::reap_soon_when_changed(
            parent.as_fd(),
            &key.parent,
            debris::links_beside(parent_links, own_subdirectories(&key)),
            &self.options.policy,
        );
        release::retry_pending(&key);
        let record = self.record();
        // An acquisition that will wait if the lock is taken stages its
        // record at once: no look first, and a taken lock hands the staging
        // to the wait. One that will not wait looks first, so that a taken
        // lock costs it one `stat`.
        let outcome = if self.options.budget.is_zero() {
            self.try_publish(parent.as_fd(), &record)
                .map(|published| published.ok_or(None))
        } else {
            let parent_id = (key.parent.dev, key.parent.ino);
            publish::publish_or_stage(
                parent.as_fd(),
                parent_id,
                &self.lock_name,
                &record,
                self.options.mode,
            )
            .map(|attempted| match attempted {
                Attempted::Published(published) => Ok(published),
                Attempted::Contended(staged) => Err(staged),
            })
        };
        match outcome {
            Ok(Ok(published)) => {
                crate::debug!(
                    "acquired {} (free, on the calling thread)",
                    self.lock_path.display()
                );
                Ok(Inline::Won(self.won(key, parent, published, record)?))
            }
            Ok(Err(staged)) => Ok(Inline::NotNow(staged.map(|staged| Handover {
                staged,
                owner_token: self.owner_token.clone(),
            }))),
            // The parent vanished meanwhile: the full state machine knows
            // what to do.
            Err(PublishError::Os(Errno::NOENT)) => Ok(Inline::NotNow(None)),
            Err(error) => Err(self.publish_error(error)),
        }
    }

    fn new(options: Arc<AcquireOptions>) -> Result<Self, AcquireError> {
        let lock_path = lock_path_of(&options.file_path);
        let (parent_path, lock_name) = fsx::split_final(&lock_path)
            .map_err(|errno| io_error(&lock_path, errno, "the lock path has no final name"))?;
        // Before anything touches the disk (not even a missing parent is
        // made): a name whose quarantine would not fit publishes a lock no
        // release can remove.
        names::check(&lock_name).map_err(|too_long| name_too_long(&lock_path, too_long))?;
        let this = incarnation::this_process().map_err(|_| proc_missing(&lock_path))?;
        let this = match options.on_behalf_of {
            None => this,
            Some(pid) => Arc::new(owner_child(pid).ok_or_else(|| child_gone(&lock_path, pid))?),
        };
        let budget = options.budget;
        Ok(Attempts {
            options,
            this,
            lock_path,
            parent_path,
            lock_name,
            owner_token: crate::sys::unique::fresh_uuid_text(),
            wake: Wake::new(),
            deadline: Instant::now() + budget,
            progress: Arc::default(),
            place: None,
            arrival: None,
            after_arrival: None,
            arrival_patience: None,
            watch: None,
            elders: None,
            waited: false,
            staged: None,
            reaped_while_contended: false,
            holder_exited: false,
            announced: false,
            reclaimed: false,
            blocking: false,
        })
    }

    /// Runs the test hook (`afterParentMkdir`), if any, after making the
    /// parent: it is awaited on this (blocking) thread.
    fn run_hook(&mut self) -> Result<(), AcquireError> {
        let Some(hook) = self.options.after_parent_mkdir.clone() else {
            return Ok(());
        };
        self.make_parent()?;
        let runtime = tokio::runtime::Handle::current();
        self.progress.hook_begins();
        let outcome = runtime
            .block_on(hook(self.lock_path.to_string_lossy().into_owned()))
            .map_err(AcquireError::Hook);
        self.progress.hook_ends();
        outcome
    }

    /// Settles a spent budget: the holder as last seen (looked at now if
    /// none was).
    fn settle_spent_budget(&mut self, answer: &dyn Answer) -> Contended {
        if self.progress.last_holder().is_none() {
            self.progress.saw(Some(self.holder_now_by_path()));
        }
        let spent = self.progress.budget_spent(&self.lock_path);
        self.finish(answer, Err(spent))
    }

    /// Ends the acquisition with `outcome`. Nothing of it is left when its
    /// caller hears: a staging it did not use is removed, and it has left
    /// this process's queue (the next in line is woken). Else a caller that
    /// runs on at once (its release, a next acquisition that will not
    /// wait) could find its own finished acquisition still ahead in the
    /// queue, while this thread, preempted on a loaded machine, has not yet
    /// dropped it: `ELOCKED` "free at the last look" on a free lock.
    fn finish(&mut self, answer: &dyn Answer, outcome: Result<Claim, AcquireError>) -> Contended {
        self.staged = None;
        self.place = None;
        self.arrival = None;
        answer.settle(outcome);
        crate::sys::faults::pause("acquire.answered", &self.lock_name);
        Contended::Settled
    }

    /// One whole attempt (see the module docs); on a blocking thread. What
    /// it took teaches [`fastpath`] whether this directory's attempts may
    /// run inline later.
    fn attempt(&mut self) -> Result<Step, AcquireError> {
        let started = Instant::now();
        crate::sys::faults::pause("attempt", &self.lock_name);
        crate::sys::trace::stamp("waiter: its attempt begins");
        let parent = self.make_parent()?;
        crate::sys::trace::stamp("waiter: the parent pinned");
        let lesson =
            fastpath::needs_lesson(&self.parent_path).then(|| fastpath::Lesson::of(parent.as_fd()));
        let step = self.attempt_at(parent);
        fastpath::learn(&self.parent_path, lesson, started.elapsed());
        step
    }

    /// The attempt in the open `parent`.
    fn attempt_at(&mut self, parent: OwnedFd) -> Result<Step, AcquireError> {
        // What woke us is spent by this attempt, whatever it returns.
        let holder_exited = std::mem::take(&mut self.holder_exited);
        let (key, parent_links) = self.key_of(parent.as_fd())?;
        if parent_links == 0 {
            return self.check_removed_parent(&key);
        }
        self.refuse_names_too_long_here(parent.as_fd(), &key)?;
        self.refuse_if_held_by_caller(&key)?;
        // Before joining the queue: anyone of this process holding the lock
        // or queued for it is never waited for nor overtaken. An earlier
        // call of the same lock name still on its way to its queue (an
        // async call made just before this one) is let arrive first, so
        // that its key tells whether it is for this lock; one that does not
        // arrive in time may be, and is not overtaken either.
        // Earlier calls of this very path are let arrive first; then
        // whoever of this process holds or queues for the lock. A
        // synchronous acquisition looks again at every attempt, and when
        // its publication is refused: an earlier call of another path that
        // arrives late (see `table::same_path_still_arriving`) may turn out
        // to be for this lock, and take it.
        if self.blocking {
            let first = self.place.is_none();
            let same_path_arriving = first
                && table::same_path_still_arriving(
                    &key.name,
                    self.options.sequence,
                    &self.lock_path,
                );
            if same_path_arriving
                || table::held_here(&key)
                || (first && table::anyone_queued_for(&key))
            {
                return Err(self.would_block_its_own_process());
            }
        }
        debris::reap_when_changed(
            parent.as_fd(),
            &key.parent,
            debris::links_beside(parent_links, own_subdirectories(&key)),
            &self.options.policy,
        );
        self.join_queue(&key);
        match table::turn(&self.place.as_ref().expect("joined").0, &self.lock_path) {
            table::Turn::Head => {}
            table::Turn::Behind => return Ok(Step::NotHead),
            // A synchronous acquisition has let earlier arrivals go first
            // already (above): only one of this very path is surely ahead.
            table::Turn::AfterArrival { same_path } if self.blocking => {
                if same_path {
                    return Err(self.would_block_its_own_process());
                }
            }
            table::Turn::AfterArrival { same_path } => {
                let grace = *self
                    .arrival_patience
                    .get_or_insert_with(|| Instant::now() + table::ARRIVAL_GRACE);
                // Past it, a first attempt that slow (stuck on a dead
                // mount, maybe for another directory) is passed over. One
                // called with this very path is for this lock: it is let
                // go first as long as the budget lasts (its mount is ours,
                // as slow for us as for it).
                let until = if same_path {
                    grace.max(self.deadline)
                } else {
                    grace
                };
                if Instant::now() < until {
                    self.after_arrival = Some(until);
                    return Ok(Step::NotHead);
                }
            }
        }
        release::retry_pending(&key);
        let record = self.record();
        crate::sys::trace::stamp("waiter: its record made");
        // Woken by the holder's exit, the name almost surely still holds
        // its directory (a holder that released first freed the name, and
        // that woke us before its exit did): the judgement comes first, and
        // finding the name free sends us round again to publish.
        if !holder_exited {
            match self.try_publish(parent.as_fd(), &record) {
                Ok(Some(published)) => {
                    return Ok(Step::Won(self.won(key, parent, published, record)?));
                }
                Ok(None) => {}
                // The parent vanished between creating it and publishing.
                Err(PublishError::Os(Errno::NOENT)) => return Ok(Step::Retry),
                Err(error) => return Err(self.publish_error(error)),
            }
        }
        if self.blocking && table::held_here(&key) {
            return Err(self.would_block_its_own_process());
        }
        let holder = match self.judge_holder(parent.as_fd(), &record, holder_exited)? {
            Judged::Won(published) => {
                return Ok(Step::Won(self.won(key, parent, published, record)?));
            }
            Judged::Retry => return Ok(Step::Retry),
            Judged::Held(holder) => holder,
        };
        let exit = match self.holder_exit(&holder) {
            // The holder died between the probe and the pidfd.
            HolderExit::AlreadyGone => return Ok(Step::Retry),
            HolderExit::Watch(fd) => Some(fd),
            HolderExit::Unwatched => None,
        };
        self.stage_for_wake(parent.as_fd())?;
        Ok(Step::Held {
            holder: Box::new(holder),
            exit,
        })
    }

    /// The holder as it stands now, opening the parent afresh.
    fn holder_now_by_path(&self) -> Holder {
        match fsx::open_anchor(&self.parent_path) {
            Ok(parent) => self.holder_now(parent.as_fd()),
            Err(errno) => Holder::unreadable(errno_code(errno)),
        }
    }

    /// Records a publication as this process's held generation.
    fn held(&self, key: LockKey, parent: OwnedFd, published: Published, record: Vec<u8>) -> Claim {
        let releases_inline = fastpath::is_fast_dir(&self.parent_path, &key.parent);
        let parent = table::share_parent(&key.parent, parent);
        Claim::new(table::insert_held(Generation {
            id: table::next_id(),
            key,
            lock_path: self.lock_path.clone(),
            parent,
            parent_path: self.parent_path.clone(),
            lock_name: self.lock_name.clone(),
            root: ClosedLater::new(published.root),
            published: published.tree,
            record_bytes: record,
            #[cfg(any(target_os = "linux", target_os = "android"))]
            root_listed: AtomicBool::new(false),
            root_guarded: AtomicBool::new(true),
            waited: self.waited,
            releases_inline,
            fence: std::sync::OnceLock::new(),
            reclaimed: self.reclaimed,
        }))
    }

    /// [`Attempts::held`], fenced when asked (see [`fence`]): a lock whose
    /// fence cannot be had is given back (the claim dropped) before the
    /// error is told, never handed out without it.
    fn won(
        &self,
        key: LockKey,
        parent: OwnedFd,
        published: Published,
        record: Vec<u8>,
    ) -> Result<Claim, AcquireError> {
        let claim = self.held(key, parent, published, record);
        if self.options.fence {
            let generation = claim.generation();
            let value = fence::advance(
                generation.parent.as_fd(),
                generation.key.parent,
                &generation.lock_name,
                self.options.mode,
            )
            .map_err(|error| self.fence_error(error))?;
            let _ = generation.fence.set(value);
        }
        Ok(claim)
    }

    fn fence_error(&self, error: fence::FenceError) -> AcquireError {
        let (code, why) = match error {
            fence::FenceError::Os(errno) => (errno_code(errno), errno_text(errno)),
            fence::FenceError::Unusable => (
                "EFENCE",
                "it is not a directory holding one numeric head (a file or a symlink stands \
                 there, or its head could not be moved on)"
                    .to_string(),
            ),
        };
        AcquireError::Io {
            lock_path: self.lock_path.clone(),
            code,
            message: format!(
                "Failed to acquire file lock at {}: its fence {} could not be advanced: {why}. \
                 The lock was released; fix or remove the fence directory and retry.",
                self.lock_path.display(),
                self.parent_path
                    .join(fence::fence_name(&self.lock_name))
                    .display()
            ),
        }
    }

    fn publish_error(&self, error: PublishError) -> AcquireError {
        match error {
            // The staging name is longer than this filesystem allows (its
            // limit is below the NAME_MAX the names were checked against).
            PublishError::Os(Errno::NAMETOOLONG) => {
                let limit = fsx::open_anchor(&self.parent_path)
                    .ok()
                    .and_then(|parent| fsx::name_max_of(parent.as_fd()));
                self.name_too_long_here(limit)
            }
            PublishError::Os(errno) => self.io(errno, "cannot stage the lock record"),
            PublishError::DirRefuses => self.unusable_parent(
                "refuses new entries as if it did not exist (ENOENT), as the kernel's own \
                 filesystems do (/proc)",
            ),
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

    /// The error for a lock directory's parent that can hold no lock, and
    /// never will: retrying would only spend the budget.
    fn unusable_parent(&self, why: &str) -> AcquireError {
        AcquireError::Io {
            lock_path: self.lock_path.clone(),
            code: "ENOENT",
            message: format!(
                "Failed to acquire file lock at {}: its directory {} {why}, so no lock can be \
                 made there; lock a file in a directory on a filesystem that takes new files.",
                self.lock_path.display(),
                self.parent_path.display()
            ),
        }
    }

    /// A parent found removed (no links) when opened: the path opened
    /// afresh may lead to a new directory (it was replaced: try again), or
    /// still to the removed one — a bind mount whose source was removed,
    /// which nothing can be created in, ever.
    fn check_removed_parent(&self, key: &LockKey) -> Result<Step, AcquireError> {
        let again = fsx::open_anchor(&self.parent_path)
            .and_then(|parent| fsx::dir_identity_and_links(parent.as_fd()));
        match again {
            Ok((identity, 0)) if identity == key.parent => Err(self.unusable_parent(
                "has been removed, but its path still leads to it (a bind mount whose source \
                 was removed, say)",
            )),
            _ => Ok(Step::Retry),
        }
    }

    /// Opens the parent directory, creating it (and its missing ancestors)
    /// first, through descriptors only (see [`fsx::open_or_create_dir`]).
    /// Symlinks in the existing part of the path are followed on purpose:
    /// aliased paths name the same lock, keyed by the directory itself.
    fn make_parent(&mut self) -> Result<OwnedFd, AcquireError> {
        fsx::open_or_create_dir(&self.parent_path, self.options.mode.dir())
            .map_err(|errno| self.io(errno, "cannot create the lock's parent directory"))
    }

    /// The lock's canonical key in `parent` (the parent's identity and the
    /// lock name), and the parent's link count (see [`debris`]).
    fn key_of(&self, parent: BorrowedFd<'_>) -> Result<(LockKey, u64), AcquireError> {
        LockKey::with_parent_links(parent, &self.lock_name)
            .map_err(|errno| self.io(errno, "cannot read the lock's parent directory"))
    }

    /// Why a synchronous acquisition refuses to wait for its own process.
    fn would_block_its_own_process(&self) -> AcquireError {
        AcquireError::Io {
            lock_path: self.lock_path.clone(),
            code: "EDEADLK",
            message: format!(
                "Failed to acquire file lock at {} synchronously: this process already holds it or \
                 waits for it, and blocking this thread could keep that holder from ever releasing \
                 it; release it first, or use acquireLock (async) to queue behind it.",
                self.lock_path.display()
            ),
        }
    }

    /// Tells `on_contended` who holds the lock, the first time only.
    fn announce(&mut self, holder: &Holder) {
        if self.announced {
            return;
        }
        self.announced = true;
        if let Some(hook) = &self.options.on_contended {
            hook(holder);
        }
    }

    /// A lock the caller's own call chain holds would never be released
    /// while the caller waits for it: that is an error at once, not a
    /// wait for the whole budget. (The key compares directories, so an
    /// alias of the path is recognised too.)
    fn refuse_if_held_by_caller(&self, key: &LockKey) -> Result<(), AcquireError> {
        let held = self
            .options
            .held_by_caller
            .iter()
            .filter_map(|id| table::held(*id))
            .any(|generation| generation.key == *key);
        if !held {
            return Ok(());
        }
        Err(AcquireError::Io {
            lock_path: self.lock_path.clone(),
            code: "EDEADLK",
            message: format!(
                "Failed to acquire file lock at {}: this call chain already holds it (a nested \
                 acquisition inside withFileLock's function), and waiting for it would wait for \
                 itself; use the lock you hold, or acquire it outside the function.",
                self.lock_path.display()
            ),
        })
    }

    /// The record this attempt would publish, stamped now.
    fn record(&self) -> Vec<u8> {
        OwnerRecord::for_this_process(
            &self.this,
            clock::now_ms(),
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
        // On a local, fast filesystem a staged record needs no look first:
        // its no-replace rename is the look, and one refused leaves it
        // staged for the next wake. (On a network mount, where a waiter
        // wakes on its timer and each call is a round trip, the look stays
        // first: one call for a lock still held, not five.)
        let looks_first = !fastpath::is_fast(&self.parent_path);
        if looks_first && fsx::stat_nofollow(parent, &self.lock_name).is_ok() {
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
        // Look before leaping: a held lock costs one `stat` instead of a
        // staging directory made, renamed in vain and removed. The
        // no-replace rename stays the arbiter when the name is free.
        if !looks_first && fsx::stat_nofollow(parent, &self.lock_name).is_ok() {
            return Ok(None);
        }
        Ok(
            match publish(parent, &self.lock_name, record, self.options.mode)? {
                Publication::Published(published) => Some(published),
                Publication::Contended => None,
            },
        )
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
        match Staged::new(parent, &self.lock_name, &self.record(), self.options.mode) {
            Ok(staged) => self.staged = Some(staged),
            Err(PublishError::Os(Errno::NOENT)) => {}
            Err(error) => return Err(self.publish_error(error)),
        }
        Ok(())
    }

    /// Takes this acquisition's place in the queue of `key`; a new key (the
    /// parent directory was replaced) means a new queue and a new watch.
    fn join_queue(&mut self, key: &LockKey) {
        let same = self.place.as_ref().is_some_and(|place| place.0.key == *key);
        if !same {
            self.place = None;
            self.watch = None;
            self.place = Some(QueuePlace(table::enqueue(
                key.clone(),
                self.options.sequence,
                self.wake.clone(),
            )));
            self.arrival = None;
        }
    }

    /// Observes the holder and takes over a provably stale lock; after
    /// the holder's exit (`holder_exited`) without a first glance, which
    /// could only find it gone.
    fn judge_holder(
        &mut self,
        parent: BorrowedFd<'_>,
        record: &[u8],
        holder_exited: bool,
    ) -> Result<Judged, AcquireError> {
        // Watch before looking, so a release between the look and the
        // sleep still wakes us (the event waits in the queue). Only
        // contended attempts pay for the watch.
        if !self
            .watch
            .as_ref()
            .is_some_and(|watch| watch.watches(parent))
        {
            self.watch = Watch::new(parent, &self.lock_name);
        }
        if !holder_exited && let Some(holder) = self.holder_at_a_glance(parent) {
            return Ok(Judged::Held(holder));
        }
        let observation = observe(parent, &self.lock_name)
            .map_err(|e| self.io(e.0, "cannot read the lock's owner record"))?;
        if let Some(judged) = self.judge_past_cache(parent, record, &observation)? {
            return Ok(judged);
        }
        let verdict = self.judge(&observation);
        crate::debug!(
            "verdict on {} ({}): {verdict}",
            self.lock_path.display(),
            observed_owner(&observation)
        );
        match &observation {
            Observation::Missing => return Ok(Judged::Retry),
            Observation::Lock { snapshot, .. } if verdict.stale => {
                return self.take_over(parent, record, snapshot);
            }
            _ => {}
        }
        self.reap_while_contended(parent);
        Ok(Judged::Held(describe(
            &observation,
            verdict,
            &self.options.policy,
        )))
    }

    /// On a mount whose client may serve stale metadata, a lock that looks
    /// missing although the publication was refused, held by an empty
    /// directory, or anything but a valid record, is checked with the
    /// server before anyone believes it
    /// (see [`crate::lock::volume`]): if the server has nothing at the lock
    /// name, the lock is free and our staged record is published past the
    /// client's cache. `None`: the observation stands.
    fn judge_past_cache(
        &mut self,
        parent: BorrowedFd<'_>,
        record: &[u8],
        observation: &Observation,
    ) -> Result<Option<Judged>, AcquireError> {
        // Only a valid record read through `open` (which the server answers)
        // is taken as it is; anything else may be the cache's picture: a
        // listing that still shows an `info` the server no longer has
        // ("unrecognized"), a size cached from another generation
        // ("malformed"), a directory gone under our handle.
        let doubtful = !matches!(
            observation,
            Observation::Lock {
                owner: Owner::Valid { .. },
                ..
            }
        );
        if !doubtful || !volume::may_serve_stale(parent) {
            return Ok(None);
        }
        let mut staged = match self.staged.take() {
            Some(staged) if staged.fits(parent, record) => staged,
            _ => match Staged::new(parent, &self.lock_name, record, self.options.mode) {
                Ok(staged) => staged,
                Err(PublishError::Os(Errno::NOENT)) => return Ok(Some(Judged::Retry)),
                Err(error) => return Err(self.publish_error(error)),
            },
        };
        let outcome = staged
            .publish_past_cache(&self.lock_name, record)
            .map_err(|error| self.publish_error(error))?;
        crate::debug!(
            "asked the server about {} (the client's cache may be stale): {}",
            self.lock_path.display(),
            match &outcome {
                PastCache::Published(_) => "free, published",
                PastCache::Present => "something stands there",
                PastCache::Unknown => "no answer",
                PastCache::Lost => "our staging vanished",
            }
        );
        match outcome {
            PastCache::Published(published) => Ok(Some(Judged::Won(published))),
            PastCache::Lost => Ok(Some(Judged::Retry)),
            PastCache::Present | PastCache::Unknown => {
                self.staged = Some(staged);
                Ok(None)
            }
        }
    }

    /// A first look at the record alone, which is all a holder that must be
    /// waited for (alive, or on another host) needs. Anything else is
    /// observed in full, identity first, before a verdict may act on it.
    fn holder_at_a_glance(&mut self, parent: BorrowedFd<'_>) -> Option<Holder> {
        let record = glance_record(parent, &self.lock_name)?;
        let verdict = judge_record(&record, &self.options.policy, &Observer::local());
        if verdict.stale {
            return None;
        }
        crate::debug!(
            "verdict on {} (pid {}): {verdict}",
            self.lock_path.display(),
            record.pid
        );
        self.reap_while_contended(parent);
        Some(describe_record(record, verdict, &self.options.policy))
    }

    /// Waiters that were killed while this one waits leave their staged
    /// records: the first contended attempt of each acquisition looks at
    /// those named by pids that are gone (cheap enough for every hand-off).
    fn reap_while_contended(&mut self, parent: BorrowedFd<'_>) {
        if !self.reaped_while_contended {
            self.reaped_while_contended = true;
            let _ = debris::reap_named_by_gone_pids(parent, &self.lock_name, &self.options.policy);
        }
    }

    /// Replaces a stale lock with ours in one atomic exchange, or, where
    /// the filesystem cannot exchange, removes it exactly and lets the next
    /// attempt publish.
    fn take_over(
        &mut self,
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
        crate::debug!(
            "reclaiming {}: exchanging the judged directory for ours",
            self.lock_path.display()
        );
        // The record staged for the wait is the one exchanged, if it is
        // staged in this parent still.
        let with_staged = match self.staged.as_mut() {
            Some(staged) if staged.fits(parent, record) => {
                staged.publish_over(&self.lock_name, record, judged)
            }
            _ => Ok(None),
        };
        let takeover = match with_staged {
            Ok(Some(takeover)) => Ok(takeover),
            Ok(None) => {
                // Our staging is gone, or its name holds something else.
                self.staged = None;
                publish_over(parent, &self.lock_name, record, self.options.mode, judged)
            }
            Err(error) => Err(error),
        };
        match takeover {
            Ok(Takeover::Published(published)) => {
                crate::debug!("reclaimed {}", self.lock_path.display());
                self.reclaimed = true;
                return Ok(Judged::Won(published));
            }
            // `ENOENT`: our staging (or the parent) vanished before the
            // exchange; nothing was swapped.
            Ok(Takeover::NotJudged)
            | Ok(Takeover::Vanished)
            | Err(PublishError::Os(Errno::NOENT)) => return Ok(Judged::Retry),
            Ok(Takeover::Undeletable(code)) => {
                return Ok(Judged::Held(self.holder_now(parent).unremovable(code)));
            }
            Ok(Takeover::Unsupported) => {}
            Err(error) => return Err(self.publish_error(error)),
        }
        // No exchange here: remove the judged tree in place, through a
        // descriptor of it, never by moving the name away (a detach could
        // grab a successor that reused the judged inode number). The name
        // goes only by `rmdir` of the emptied judged directory, which
        // cannot remove a non-empty successor.
        let outcome = tree::remove_tree_in_place_at(parent, &self.lock_name, judged);
        drop(guard);
        crate::debug!(
            "reclaiming {} in place (no exchange here): {}",
            self.lock_path.display(),
            if outcome.ok {
                "removed"
            } else {
                outcome.code.unwrap_or("failed")
            }
        );
        self.reclaimed |= outcome.ok;
        let retry = outcome.ok
            || matches!(
                outcome.code,
                Some("not_found") | Some("identity_mismatch") | Some("tree_changed")
            );
        Ok(if retry {
            Judged::Retry
        } else {
            let code = outcome.os_code.or(outcome.code).unwrap_or("io_error");
            Judged::Held(self.holder_now(parent).unremovable(code))
        })
    }

    /// The holder as observed now, for a report.
    fn holder_now(&self, parent: BorrowedFd<'_>) -> Holder {
        let observation = observe(parent, &self.lock_name).unwrap_or(Observation::Missing);
        let verdict = self.judge(&observation);
        describe(&observation, verdict, &self.options.policy)
    }

    /// The verdict on `observation` under this acquisition's options, now.
    fn judge(&self, observation: &Observation) -> crate::lock::verdict::Verdict {
        judge(
            observation,
            &self.options.policy,
            self.options.stale_ms,
            clock::now_ns(),
            &Observer::local(),
        )
    }

    /// How to learn that a live local holder exited.
    fn holder_exit(&self, holder: &Holder) -> HolderExit {
        let live_local = !holder.foreign && holder.verdict.liveness == Some(Liveness::Live);
        let pid = holder.record.as_ref().and_then(OwnerRecord::pid_u32);
        match pid {
            // Our own process: the in-process queue and inotify wake us.
            Some(pid) if live_local && pid != crate::sys::unique::own_pid() => {
                wait::holder_exit(pid)
            }
            _ => HolderExit::Unwatched,
        }
    }

    fn io(&self, errno: Errno, what: &str) -> AcquireError {
        io_error(&self.lock_path, errno, what)
    }

    /// Refuses, before publishing, a lock whose derived names do not all
    /// fit the limit per name of the filesystem it is on (see
    /// [`names::check_on`]).
    fn refuse_names_too_long_here(
        &self,
        parent: BorrowedFd<'_>,
        key: &LockKey,
    ) -> Result<(), AcquireError> {
        names::check_on(parent, key.parent.dev, &self.lock_name)
            .map_err(|limit| self.name_too_long_here(Some(limit)))
    }

    /// The filesystem's limit per name (`limit`, when it says) is below
    /// what the names derived from this lock's need. Said with that limit
    /// and the longest file name it leaves.
    fn name_too_long_here(&self, limit: Option<usize>) -> AcquireError {
        let (limit, longest) = match limit {
            Some(limit) => (
                format!("{limit} bytes"),
                format!("{} bytes", names::longest_file_name(limit)),
            ),
            None => (
                format!("fewer than {} bytes", fsx::NAME_MAX),
                "shorter".to_string(),
            ),
        };
        AcquireError::Io {
            lock_path: self.lock_path.clone(),
            code: errno_code(Errno::NAMETOOLONG),
            message: format!(
                "Failed to acquire file lock at {}: the filesystem does not take the names \
                 derived from the lock's (its staging `<name>.lock.pending.<pid>.<uuid>` and \
                 quarantine `<name>.lock.removing.<pid>.<uuid>`): it allows {limit} per name, so \
                 the longest file name exactlock can lock there is {longest} (the file name is {} \
                 bytes); shorten the file name, or lock a file on another filesystem.",
                self.lock_path.display(),
                self.lock_name
                    .len()
                    .saturating_sub(names::LOCK_SUFFIX.len()),
            ),
        }
    }
}

/// A file name too long for the names derived from it (see
/// [`names`]): refused before anything touched the disk.
fn name_too_long(lock_path: &Path, too_long: names::TooLong) -> AcquireError {
    let longest = names::longest_file_name(fsx::NAME_MAX);
    AcquireError::Io {
        lock_path: lock_path.to_path_buf(),
        code: errno_code(Errno::NAMETOOLONG),
        message: format!(
            "Failed to acquire file lock at {}: the file name is {} bytes, and the longest \
             exactlock can lock is {longest} bytes: the names it derives from it (the lock \
             `<name>.lock`, its staging `<name>.lock.pending.<pid>.<uuid>` and quarantine \
             `<name>.lock.removing.<pid>.<uuid>`) must each fit the limit of {} bytes per name \
             (NAME_MAX) for any pid of up to {} digits; shorten the file name.",
            lock_path.display(),
            too_long.file_name_len,
            fsx::NAME_MAX,
            crate::sys::platform::native::PID_MAX_DIGITS,
        ),
    }
}

fn io_error(lock_path: &Path, errno: Errno, what: &str) -> AcquireError {
    AcquireError::Io {
        lock_path: lock_path.to_path_buf(),
        code: errno_code(errno),
        message: format!(
            "Failed to acquire file lock at {}: {what}: {}; {}.",
            lock_path.display(),
            errno_text(errno),
            next_step(errno)
        ),
    }
}

/// What a user can do about an acquisition that failed with `errno`.
fn next_step(errno: Errno) -> &'static str {
    match errno {
        Errno::ACCESS | Errno::PERM => {
            "check the permissions of the lock's directory (and that it is not immutable), or lock \
             a file in a directory this process may write"
        }
        Errno::ROFS => "the filesystem is read-only: lock a file on a writable one",
        Errno::NOSPC | Errno::DQUOT => "free space or inodes on that filesystem, then retry",
        Errno::NOTDIR | Errno::NOENT => {
            "a component of the path is not a directory (or vanished): fix the path"
        }
        Errno::NAMETOOLONG => "shorten the path",
        Errno::LOOP => "a symlink stands where the path needs a directory: fix the path",
        Errno::MFILE | Errno::NFILE => {
            "this process is out of file descriptors: close some, or raise the limit"
        }
        _ => "check the filesystem that holds the lock (dmesg, the mount), then retry",
    }
}

/// The identity of the child `pid` a lock is to be held for (see
/// [`incarnation::of_child`]); unix only (no such child elsewhere).
fn owner_child(pid: u32) -> Option<ThisProcess> {
    #[cfg(unix)]
    return incarnation::of_child(pid);
    #[cfg(not(unix))]
    return {
        let _ = pid;
        None
    };
}

/// The child a lock was to be held for is not running.
fn child_gone(lock_path: &Path, pid: u32) -> AcquireError {
    AcquireError::Io {
        lock_path: lock_path.to_path_buf(),
        code: "ESRCH",
        message: format!(
            "Failed to acquire file lock at {} in the name of pid {pid}: that process is not \
             running (or its start cannot be read), so no record could name it.",
            lock_path.display()
        ),
    }
}

/// `/proc` is not mounted: no owner could be judged (see
/// [`incarnation::this_process`]).
fn proc_missing(lock_path: &Path) -> AcquireError {
    AcquireError::Io {
        lock_path: lock_path.to_path_buf(),
        code: "ENOPROC",
        message: format!(
            "Failed to acquire file lock at {}: /proc is not mounted. exactlock needs the Linux \
             procfs at /proc to tell a lock owner's start and pid namespace, without which no \
             crashed owner could ever be proven dead; mount it (mount -t proc proc /proc) and \
             retry.",
            lock_path.display()
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsStr;
    use std::path::Path;

    #[test]
    fn the_budget_is_retries_times_the_delay_and_infinite_retries_wait_for_good() {
        assert_eq!(budget_secs(50.0, 0.1), 5.0);
        assert_eq!(budget_secs(0.0, 0.1), 0.0);
        assert_eq!(budget_secs(f64::INFINITY, 0.1), UNBOUNDED_BUDGET_SECS);
        // ∞ × 0 is NaN: still unbounded, never a panic in Duration.
        assert_eq!(budget_secs(f64::INFINITY, 0.0), UNBOUNDED_BUDGET_SECS);
        assert_eq!(budget_secs(f64::NAN, 0.1), 0.0);
        assert_eq!(budget_secs(1e300, 1e300), UNBOUNDED_BUDGET_SECS);
        assert!(
            Instant::now()
                .checked_add(Duration::from_secs_f64(UNBOUNDED_BUDGET_SECS))
                .is_some()
        );
    }

    #[test]
    fn a_timeout_is_the_budget_whatever_the_delay_and_retries() {
        let ms = Duration::from_millis;
        // retryDelayMs 10 with the default 50 retries would be 0.5 s; a timeout of 10 s is 10 s.
        assert_eq!(waiting_budget(50.0, ms(10), Some(10_000.0)), ms(10_000));
        assert_eq!(waiting_budget(50.0, ms(10), None), ms(500));
        assert_eq!(waiting_budget(0.0, ms(0), Some(250.0)), ms(250));
        assert_eq!(
            waiting_budget(f64::INFINITY, ms(100), Some(0.0)),
            Duration::ZERO
        );
        assert_eq!(
            waiting_budget(0.0, ms(100), Some(f64::INFINITY)),
            Duration::from_secs_f64(UNBOUNDED_BUDGET_SECS)
        );
        assert_eq!(
            waiting_budget(50.0, ms(100), Some(f64::NAN)),
            Duration::ZERO
        );
    }

    // Not on Windows: under Wine the temp volume is one whose client may
    // serve stale metadata (`volume::may_serve_stale`), where a lock found
    // missing is published at once past the cache, in the judging attempt.
    #[cfg(unix)]
    #[test]
    fn a_waiter_woken_by_its_holders_exit_judges_first_and_a_free_name_sends_it_round_to_publish() {
        let dir = crate::testutil::tempdir("holder-exited");
        let options = crate::testutil::acquire_options(
            &dir.join("f"),
            Duration::from_secs(5),
            Duration::from_millis(10),
        );
        let mut attempts = Attempts::new(options).unwrap();
        // The holder released and exited, and its exit woke us first: the
        // name is free. The attempt looks at it instead of renaming at once,
        // publishes nothing, and goes round.
        attempts.holder_exited = true;
        let first = match attempts.attempt() {
            Ok(Step::Retry) => "retry".to_string(),
            Ok(Step::Won(_)) => "won".to_string(),
            Ok(Step::NotHead) => "not head".to_string(),
            Ok(Step::Held { .. }) => "held".to_string(),
            Err(error) => format!("{error:?}"),
        };
        assert_eq!(first, "retry");
        assert!(
            !attempts.holder_exited,
            "the wake-up is spent by one attempt"
        );
        assert!(!dir.join("f.lock").exists());
        // Round again: the next attempt publishes.
        let Ok(Step::Won(claim)) = attempts.attempt() else {
            panic!("the second attempt takes the free lock");
        };
        assert!(dir.join("f.lock").join("info").is_file());
        let id = claim.take().id;
        release::release_blocking(id).unwrap();
        drop(attempts);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A waiter of `file` in `dir` asleep on the name, its record staged,
    /// and the directory that holds the name for now; the grace it gives
    /// the waiters staged before it is `grace` (the seam, for this file's
    /// name only).
    /// The seam holds one grace at a time: its tests take turns.
    static ELDER_SEAM: std::sync::Mutex<()> = std::sync::Mutex::new(());

    fn staged_waiter(dir: &Path, file: &str, grace: Duration) -> Attempts {
        assert!(crate::sys::faults::arm_delay(
            "acquire.elder_grace",
            u32::try_from(grace.as_millis()).unwrap(),
            Some(file),
            None,
        ));
        std::fs::create_dir(dir.join(format!("{file}.lock"))).unwrap();
        let options = crate::testutil::acquire_options(
            &dir.join(file),
            Duration::from_secs(60),
            Duration::from_secs(30),
        );
        let mut attempts = Attempts::new(options).unwrap();
        let parent = fsx::open_anchor(dir).unwrap();
        let record = attempts.record();
        attempts.staged = Some(
            Staged::new(
                parent.as_fd(),
                &attempts.lock_name,
                &record,
                LockMode::PRIVATE,
            )
            .unwrap(),
        );
        attempts.watch = Watch::new(parent.as_fd(), &attempts.lock_name);
        assert!(
            attempts.watch.is_some(),
            "the name's events are watched here"
        );
        attempts
    }

    /// A test's scene: its turn at the seam, a fresh directory, another
    /// process's waiter staged there first (`with_elder`), then the
    /// waiter under test (see [`staged_waiter`]), and the lock's path.
    #[allow(clippy::type_complexity)]
    fn waiter_behind(
        file: &str,
        grace: Duration,
        with_elder: bool,
    ) -> (
        std::sync::MutexGuard<'static, ()>,
        std::path::PathBuf,
        Option<Staged>,
        Attempts,
        std::path::PathBuf,
    ) {
        let turn = ELDER_SEAM.lock().unwrap_or_else(|p| p.into_inner());
        let dir = crate::testutil::tempdir(file);
        let elder = with_elder.then(|| elder_of(&dir, file));
        let attempts = staged_waiter(&dir, file, grace);
        let lock = dir.join(format!("{file}.lock"));
        (turn, dir, elder, attempts, lock)
    }

    /// Another process's waiter, staged before whoever stages next.
    fn elder_of(dir: &Path, file: &str) -> Staged {
        elders::OURS_ARE_OTHERS.with(|ours| ours.set(true));
        let parent = fsx::open_anchor(dir).unwrap();
        let elder = Staged::new(
            parent.as_fd(),
            OsStr::new(&format!("{file}.lock")),
            b"{}",
            LockMode::PRIVATE,
        )
        .unwrap();
        // The next staging's ctime is later even at a coarse clock tick.
        std::thread::sleep(Duration::from_millis(30));
        elder
    }

    /// The waiter's attempt wins the free lock (the other stagings of the
    /// test, `others`, still there); released, and the test's seam,
    /// stagings and directory cleaned up.
    fn takes_the_free_lock<T>(mut attempts: Attempts, dir: &Path, others: T) {
        let Ok(Step::Won(claim)) = attempts.attempt() else {
            panic!("the waiter takes the free lock");
        };
        drop(attempts);
        release::release_blocking(claim.take().id).unwrap();
        crate::sys::faults::disarm_delay("acquire.elder_grace");
        drop(others);
        std::fs::remove_dir_all(dir).unwrap();
    }

    /// Sleeps in turn until woken by the name (not the 20 s timer);
    /// how long since `started`.
    fn woken_by_the_name(attempts: &mut Attempts, started: Instant) -> Duration {
        let woken = attempts.sleep_in_turn(None, Duration::from_secs(20), &|| true);
        assert_eq!(woken, Some(wait::Woken::NameChanged), "woken by the name");
        started.elapsed()
    }

    /// The holder of `lock`, which releases it after `delay`.
    fn releases_after(lock: std::path::PathBuf, delay: Duration) -> std::thread::JoinHandle<()> {
        std::thread::spawn(move || {
            std::thread::sleep(delay);
            remove_lock(&lock);
        })
    }

    fn remove_lock(lock: &Path) {
        let _ = std::fs::remove_file(lock.join("info"));
        std::fs::remove_dir(lock).unwrap();
    }

    #[test]
    fn a_waiter_woken_by_the_free_name_lets_a_waiter_staged_before_it_go_first() {
        let (_turn, dir, elder, mut attempts, lock) =
            waiter_behind("elder-first", Duration::from_secs(30), true);
        let mut elder = elder.expect("staged");
        let started = Instant::now();
        let others = std::thread::spawn(move || {
            // The holder releases; the elder's thread is slow to run,
            // then it publishes, holds, and releases in turn.
            std::thread::sleep(Duration::from_millis(100));
            remove_lock(&lock);
            std::thread::sleep(Duration::from_millis(300));
            let published = elder
                .publish(OsStr::new("elder-first.lock"), b"{}")
                .unwrap();
            assert!(matches!(published, StagedPublication::Published(_)));
            std::thread::sleep(Duration::from_millis(200));
            // Its descriptors closed first: Windows deletes nothing
            // still open.
            drop((published, elder));
            remove_lock(&lock);
        });
        // Woken only once the elder took its turn (Linux wakes us when it
        // releases; Windows also when its publication names the lock),
        // and holding the lock only after it let go.
        let mut woken_at = Vec::new();
        let claim = loop {
            woken_at.push(woken_by_the_name(&mut attempts, started));
            match attempts.attempt() {
                Ok(Step::Won(claim)) => break claim,
                Ok(Step::Held { .. }) if woken_at.len() < 3 => {}
                _ => panic!("the waiter takes the lock after its elder ({woken_at:?})"),
            }
        };
        let held_at = started.elapsed();
        others.join().unwrap();
        assert!(
            woken_at[0] >= Duration::from_millis(400),
            "the waiter stayed asleep while its elder was staged ({woken_at:?})"
        );
        assert!(held_at >= Duration::from_millis(600), "{held_at:?}");
        release::release_blocking(claim.take().id).unwrap();
        crate::sys::faults::disarm_delay("acquire.elder_grace");
        drop(attempts);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn an_elder_that_does_not_take_the_free_name_within_its_grace_loses_its_turn() {
        let (_turn, dir, elder, mut attempts, lock) =
            waiter_behind("elder-slow", Duration::from_millis(300), true);
        let elder = elder.expect("staged");
        let started = Instant::now();
        let holder = releases_after(lock, Duration::from_millis(100));
        let waited = woken_by_the_name(&mut attempts, started);
        holder.join().unwrap();
        assert!(waited >= Duration::from_millis(400), "{waited:?}");
        assert!(waited < Duration::from_secs(20), "{waited:?}");
        assert_eq!(
            attempts.turn_of_an_elder(),
            None,
            "the elder is still staged, and its turn is over"
        );
        takes_the_free_lock(attempts, &dir, elder);
    }

    #[test]
    fn an_elders_grace_is_counted_over_all_wake_ups_so_barging_newcomers_cannot_make_it_last() {
        let (_turn, dir, elder, mut attempts, lock) =
            waiter_behind("elder-stopped", Duration::from_millis(1_000), true);
        // A stopped process's staging: it never publishes.
        let elder = elder.expect("staged");
        let started = Instant::now();
        let others = std::thread::spawn(move || {
            // The holder releases; a newcomer takes the free name while
            // the waiter lets the elder go first (800 of its 1000 ms), and
            // releases two seconds later.
            std::thread::sleep(Duration::from_millis(100));
            remove_lock(&lock);
            std::thread::sleep(Duration::from_millis(800));
            std::fs::create_dir(&lock).unwrap();
            std::thread::sleep(Duration::from_millis(2_000));
            remove_lock(&lock);
        });
        // The waiter finds the newcomer holding the lock (when its grace
        // ends, or at once where events name the newcomer), sleeps on it,
        // and takes the lock once the newcomer has released it and what is
        // left of the elder's grace (none, or 200 ms) has gone by: not a
        // second grace of 1000 ms, which would end at about 3.9 s.
        let claim = loop {
            woken_by_the_name(&mut attempts, started);
            match attempts.attempt() {
                Ok(Step::Won(claim)) => break claim,
                Ok(Step::Held { .. }) if started.elapsed() < Duration::from_secs(10) => {}
                _ => panic!("the waiter takes the lock after the newcomer"),
            }
        };
        let held_at = started.elapsed();
        others.join().unwrap();
        assert!(held_at >= Duration::from_millis(2_900), "{held_at:?}");
        assert!(
            held_at < Duration::from_millis(3_500),
            "the elder got no second grace ({held_at:?})"
        );
        release::release_blocking(claim.take().id).unwrap();
        crate::sys::faults::disarm_delay("acquire.elder_grace");
        drop((attempts, elder));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_waiter_with_no_elder_takes_the_free_name_at_once() {
        let (_turn, dir, _, mut attempts, lock) =
            waiter_behind("elder-none", Duration::from_secs(30), false);
        // Staged after ours: it stands behind us.
        let parent = fsx::open_anchor(&dir).unwrap();
        let later = Staged::new(
            parent.as_fd(),
            OsStr::new("elder-none.lock"),
            b"{}",
            LockMode::PRIVATE,
        )
        .unwrap();
        let started = Instant::now();
        let holder = releases_after(lock, Duration::from_millis(100));
        // Woken by the name, and nobody before it to wait for: not after a
        // grace (30 s here).
        let waited = woken_by_the_name(&mut attempts, started);
        holder.join().unwrap();
        assert!(waited < Duration::from_secs(10), "{waited:?}");
        takes_the_free_lock(attempts, &dir, later);
    }

    #[test]
    fn a_waiter_with_no_delay_sleeps_on_events_with_the_default_fallback_never_spins() {
        assert_eq!(fallback_sleep(Duration::ZERO), ZERO_DELAY_FALLBACK);
        assert_eq!(
            fallback_sleep(Duration::from_millis(5)),
            Duration::from_millis(5)
        );
    }
}
