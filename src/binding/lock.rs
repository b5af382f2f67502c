//! napi surface of the lock: acquire, release, cancellation, the GC
//! helpers, inspection and the test seams. Conversions only; the work is in
//! `acquire`, `release`, `gc`.
//!
//! Async functions resolve to objects carrying either a value or a
//! `failure {code, message, …}`: napi's `async fn` cannot reject with a
//! custom `code`, so the facade turns a failure into a typed error.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use napi::JsDeferred;
use napi::bindgen_prelude::{Buffer, Either, Function, Object, Promise, PromiseRaw};
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi::{Env, Result, Status};
use napi_derive::napi;

use crate::binding::env::{Scope, scope_of};
use crate::lock::acquire::{self, AcquireError, AcquireOptions, Claim, Hook};
use crate::lock::gc;
use crate::lock::identity::LockDirIdentity;
use crate::lock::publish::LockMode;
use crate::lock::record::OwnerRecord;
use crate::lock::release::{self, FirstAttempt, ReleaseError};
use crate::lock::report::Holder;
use crate::lock::verdict::HostPolicy;
use crate::sys::errno::{errno_code, errno_text};
use crate::sys::faults;
use crate::sys::lstart;
use crate::sys::wait::Cancel;

/// A failure the facade turns into a typed error.
#[napi(object)]
pub struct LockFailure {
    pub code: String,
    pub message: String,
    pub lock_path: Option<String>,
    pub attempts: Option<u32>,
    pub holder: Option<HolderInfo>,
}

fn failure(code: &str, message: String) -> LockFailure {
    LockFailure {
        code: code.to_string(),
        message,
        lock_path: None,
        attempts: None,
        holder: None,
    }
}

fn errno_failure(errno: crate::sys::os::io::Errno, what: &str, path: &str) -> LockFailure {
    failure(
        errno_code(errno),
        format!("{what} {path}: {}.", errno_text(errno)),
    )
}

/// Who holds a lock, as data; the facade words it.
#[napi(object)]
pub struct HolderInfo {
    /// `free`, `record`, `malformed`, `no_record`, `not_a_lock`, `transient`.
    pub state: String,
    pub pid: Option<f64>,
    /// `live`, `pid_reused`, `dead_not_reaped`, `dead`, `unknown`.
    pub liveness: Option<String>,
    pub timestamp: Option<f64>,
    pub start_time: Option<String>,
    pub owner_token: Option<String>,
    pub owner_host_id: Option<String>,
    pub foreign: bool,
    /// Whether a waiter with the same options would reclaim it now.
    pub stale: bool,
    pub reason: String,
    pub code: Option<String>,
    /// Why a lock judged stale could not be removed (e.g. `EACCES`).
    pub removal_failure: Option<String>,
}

impl From<&Holder> for HolderInfo {
    fn from(holder: &Holder) -> Self {
        let record = holder.record.as_ref();
        HolderInfo {
            state: holder.state.as_str().to_string(),
            pid: record.map(|r| r.pid),
            liveness: holder.verdict.liveness.map(|l| l.as_str().to_string()),
            timestamp: record.map(|r| r.timestamp),
            start_time: record.and_then(|r| r.start_time.clone()),
            owner_token: record.and_then(|r| r.owner_token.clone()),
            owner_host_id: record.and_then(|r| r.owner_host_id.clone()),
            foreign: holder.foreign,
            stale: holder.verdict.stale,
            reason: holder.verdict.reason.as_str().to_string(),
            code: holder.code.map(str::to_string),
            removal_failure: holder.removal_failure.map(str::to_string),
        }
    }
}

/// Options of one acquisition, validated and defaulted by the facade.
#[napi(object)]
pub struct AcquireRequest {
    pub file_path: String,
    pub retries: f64,
    pub retry_delay_ms: f64,
    /// `timeout`: the waiting budget in ms, instead of `retries × retryDelayMs`.
    pub timeout_ms: Option<f64>,
    pub stale_ms: f64,
    pub owner_host_id: Option<String>,
    pub previous_owner_host_ids: Option<Vec<String>>,
    /// From `createCancelToken`, when the caller passed an AbortSignal.
    pub cancel_token: Option<u32>,
    /// Generations (`HeldLock.generation`) the caller's call chain holds.
    pub held_by_caller: Option<Vec<String>>,
    /// `mode`: the lock directory's permission bits (validated by the facade).
    pub mode: Option<u32>,
    /// A child of this process to hold the lock in the name of (`exactlock
    /// run`; not part of the public API).
    pub on_behalf_of: Option<u32>,
}

#[napi(object)]
pub struct HeldLock {
    /// Opaque handle for `releaseLockNative`.
    pub generation: String,
    pub lock_path: String,
}

#[napi(object)]
pub struct AcquireResult {
    pub lock: Option<HeldLock>,
    pub failure: Option<LockFailure>,
}

fn cancels() -> &'static Mutex<HashMap<u32, Arc<Cancel>>> {
    static CANCELS: OnceLock<Mutex<HashMap<u32, Arc<Cancel>>>> = OnceLock::new();
    CANCELS.get_or_init(Mutex::default)
}

/// A token that `cancelAcquire` can later use to abort one acquisition.
#[napi]
pub fn create_cancel_token() -> u32 {
    let id = crate::lock::table::next_id() as u32;
    cancels()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(id, Arc::new(Cancel::default()));
    id
}

/// Aborts the acquisition that uses `token` (the AbortSignal fired).
#[napi]
pub fn cancel_acquire(token: u32) {
    if let Some(cancel) = cancels()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(&token)
    {
        cancel.cancel();
    }
}

/// The acquisition's cancel flag: the caller's token's, or a fresh one
/// (the environment's teardown cancels it either way).
fn take_cancel(token: Option<u32>) -> Arc<Cancel> {
    token
        .and_then(|t| {
            cancels()
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get(&t)
                .cloned()
        })
        .unwrap_or_default()
}

fn forget_cancel(token: Option<u32>) {
    if let Some(token) = token {
        cancels()
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&token);
    }
}

type HookFunction = ThreadsafeFunction<String, Promise<()>, String, Status, false>;

/// `onContended(holder)`, called on the JavaScript thread; never waited for.
type ContendedFunction = ThreadsafeFunction<HolderInfo, (), HolderInfo, Status, false>;

fn contended_hook_of(function: ContendedFunction) -> acquire::ContendedHook {
    Arc::new(move |holder: &Holder| {
        let _ = function.call(
            HolderInfo::from(holder),
            ThreadsafeFunctionCallMode::NonBlocking,
        );
    })
}

fn hook_of(function: HookFunction) -> Hook {
    let function = Arc::new(function);
    Arc::new(move |lock_path: String| {
        let function = function.clone();
        Box::pin(async move {
            let promise = function
                .call_async(lock_path)
                .await
                .map_err(|e| e.reason.clone())?;
            promise.await.map_err(|e| e.reason.clone())
        })
    })
}

fn policy_of(owner_host_id: Option<String>, previous: Option<Vec<String>>) -> HostPolicy {
    HostPolicy {
        owner_host_id,
        previous_owner_host_ids: previous.unwrap_or_default(),
    }
}

fn options_of(
    request: AcquireRequest,
    cancel: Arc<Cancel>,
    after_parent_mkdir: Option<Hook>,
    on_contended: Option<acquire::ContendedHook>,
    sequence: u64,
) -> Arc<AcquireOptions> {
    let retry_delay = Duration::from_secs_f64(request.retry_delay_ms.max(0.0) / 1000.0);
    Arc::new(AcquireOptions {
        file_path: PathBuf::from(&request.file_path),
        budget: acquire::waiting_budget(request.retries, retry_delay, request.timeout_ms),
        retry_delay,
        stale_ms: request.stale_ms,
        policy: policy_of(request.owner_host_id, request.previous_owner_host_ids),
        cancel,
        after_parent_mkdir,
        sequence,
        held_by_caller: request
            .held_by_caller
            .unwrap_or_default()
            .iter()
            .filter_map(|id| id.parse().ok())
            .collect(),
        on_contended,
        mode: request.mode.and_then(LockMode::new).unwrap_or_default(),
        on_behalf_of: request.on_behalf_of,
    })
}

/// The answer for JavaScript: a won lock is adopted by the caller's
/// environment (or given back if that is gone), or the failure.
fn acquire_result(
    scope: &Scope,
    result: std::result::Result<Option<Claim>, AcquireError>,
) -> AcquireResult {
    match result {
        Ok(claim) => AcquireResult {
            lock: claim
                .and_then(|claim| scope.adopt(claim))
                .map(|generation| HeldLock {
                    generation: generation.id.to_string(),
                    lock_path: generation.lock_path.to_string_lossy().into_owned(),
                }),
            failure: None,
        },
        Err(error) => AcquireResult {
            lock: None,
            failure: Some(acquire_failure(error)),
        },
    }
}

/// The first attempt, synchronously on the calling thread, when the lock
/// is free (see `acquire::acquire_first_attempt`): the generation won (a
/// string: its lock path is the request's file path and `.lock`), a
/// failure, or `null`, not now — then the caller goes on with
/// `acquireLockNative`. Not an [`AcquireResult`]: the common answer is
/// one string, where two objects and three named properties cost the
/// cycle about 2 µs (`perf` of a loop of cycles on tmpfs).
///
/// The request comes as arguments, in [`AcquireRequest`]'s order, not as
/// that object (which has no cancel token here): napi reads an object's
/// fields by name, making and interning each name on every call, which cost
/// the cycle about 2.5 µs (`perf`, as above); arguments cost none of it.
#[napi(ts_return_type = "string | LockFailure | null")]
#[allow(
    clippy::too_many_arguments,
    reason = "AcquireRequest's fields, see above"
)]
pub fn acquire_first_attempt_native(
    env: Env,
    file_path: String,
    retries: f64,
    retry_delay_ms: f64,
    timeout_ms: Option<f64>,
    stale_ms: f64,
    owner_host_id: Option<String>,
    previous_owner_host_ids: Option<Vec<String>>,
    held_by_caller: Option<Vec<String>>,
    mode: Option<u32>,
) -> Result<Either<String, Option<LockFailure>>> {
    let request = AcquireRequest {
        file_path,
        retries,
        retry_delay_ms,
        timeout_ms,
        stale_ms,
        owner_host_id,
        previous_owner_host_ids,
        cancel_token: None,
        held_by_caller,
        mode,
        on_behalf_of: None,
    };
    let scope = scope_of(&env)?;
    let file_path = request.file_path.clone();
    let options = options_of(
        request,
        Arc::default(),
        None,
        None,
        crate::lock::table::next_id(),
    );
    let result = match acquire::acquire_first_attempt(options) {
        Ok(acquire::Inline::Won(claim)) => Ok(Some(claim)),
        Ok(acquire::Inline::NotNow(handover)) => {
            if let Some(handover) = handover {
                scope.hand_over(&file_path, handover);
            }
            Ok(None)
        }
        Err(error) => Err(error),
    };
    Ok(match result {
        Ok(claim) => match claim.and_then(|claim| scope.adopt(claim)) {
            Some(generation) => Either::A(generation.id.to_string()),
            None => Either::B(None),
        },
        Err(error) => Either::B(Some(acquire_failure(error))),
    })
}

/// Acquires a lock; resolves once published or failed. The caller's place
/// in this process's queue is taken here, synchronously, so waiters are
/// served in the order they called.
#[napi(
    ts_args_type = "request: AcquireRequest, afterParentMkdir?: (lockPath: string) => Promise<void>, onContended?: (holder: HolderInfo) => void",
    ts_return_type = "Promise<AcquireResult>"
)]
pub fn acquire_lock_native<'env>(
    env: &'env Env,
    request: AcquireRequest,
    after_parent_mkdir: Option<HookFunction>,
    on_contended: Option<ContendedFunction>,
) -> Result<Object<'env>> {
    let sequence = crate::lock::table::next_id();
    let arrival = acquire::arrive(Path::new(&request.file_path), sequence);
    let scope = scope_of(env)?;
    let handover = scope.take_handed(&request.file_path);
    let token = request.cancel_token;
    let cancel = take_cancel(token);
    scope.track(&cancel);
    let options = options_of(
        request,
        cancel,
        after_parent_mkdir.map(hook_of),
        on_contended.map(contended_hook_of),
        sequence,
    );
    let (deferred, promise) = env.create_deferred()?;
    let answer = Arc::new(JsAnswer {
        deferred: Mutex::new(Some(deferred)),
        scope,
        token,
    });
    napi::bindgen_prelude::spawn(acquire::acquire(options, arrival, answer, handover));
    Ok(promise)
}

/// Acquires a lock on the calling thread, blocking it while it waits for
/// another process (`acquireLockSync`); never waits for this process
/// (EDEADLK instead: see [`acquire::acquire_blocking`]).
///
/// `stillRunning` is a JavaScript function that returns `true`; it is
/// called while the wait sleeps. When the thread's environment is being
/// torn down (a Worker's `terminate()`, or the main thread's
/// `process.exit()` joining a Worker blocked here), V8 refuses to run
/// JavaScript on it and the call fails: nothing else reaches a thread
/// blocked in native code, so that failure is how the wait learns to stop.
#[napi(ts_args_type = "request: AcquireRequest, stillRunning: () => boolean")]
pub fn acquire_lock_sync_native(
    env: Env,
    request: AcquireRequest,
    still_running: Function<'_, (), bool>,
) -> Result<AcquireResult> {
    let sequence = crate::lock::table::next_id();
    let scope = scope_of(&env)?;
    let options = options_of(request, Arc::default(), None, None, sequence);
    // One handle scope per call: a wait of hours makes tens of thousands
    // of calls, whose handles would otherwise live until it returns.
    let caller_wants_it = || env.run_in_scope(|| still_running.call(())).unwrap_or(false);
    Ok(acquire_result(
        &scope,
        acquire::acquire_blocking(options, &caller_wants_it).map(Some),
    ))
}

/// Gives up the record the last inline first attempt staged for the wait
/// that was to follow (its staging removed): the facade failed before it
/// could start that wait (a signal whose `addEventListener` threw).
#[napi]
pub fn drop_handed_over_native(env: Env) -> Result<()> {
    scope_of(&env)?.drop_handed();
    Ok(())
}

/// Releases on the calling thread (`releaseSync`): the failure, or `null`.
#[napi]
pub fn release_lock_sync_native(generation: String) -> Option<LockFailure> {
    let Ok(id) = generation.parse::<u64>() else {
        return Some(release_failure(ReleaseError::Unknown));
    };
    release::release_blocking(id).err().map(release_failure)
}

type Resolver = Box<dyn FnOnce(Env) -> Result<AcquireResult> + Send>;

/// The promise of one acquisition, settled from whichever thread gets
/// there first (the head's thread when it wins: no hop through the
/// runtime's thread on the way to JavaScript).
struct JsAnswer {
    deferred: Mutex<Option<JsDeferred<AcquireResult, Resolver>>>,
    scope: Arc<Scope>,
    token: Option<u32>,
}

impl acquire::Answer for JsAnswer {
    fn settle(&self, outcome: std::result::Result<Claim, AcquireError>) -> bool {
        let Some(deferred) = self
            .deferred
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        else {
            // Settled already: a claim passed in is dropped here, which
            // gives its lock back.
            return false;
        };
        forget_cancel(self.token);
        let result = acquire_result(&self.scope, outcome.map(Some));
        crate::sys::trace::stamp("waiter: the promise resolved from its thread");
        deferred.resolve(Box::new(move |_env| {
            crate::sys::trace::stamp("waiter: the JavaScript thread takes the result");
            Ok(result)
        }));
        true
    }

    fn is_settled(&self) -> bool {
        self.deferred
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_none()
    }
}

fn acquire_failure(error: AcquireError) -> LockFailure {
    match error {
        AcquireError::Timeout {
            lock_path,
            attempts,
            holder,
        } => LockFailure {
            code: "ELOCKED".into(),
            message: String::new(),
            lock_path: Some(lock_path.to_string_lossy().into_owned()),
            attempts: Some(attempts),
            holder: Some(HolderInfo::from(holder.as_ref())),
        },
        AcquireError::Stalled {
            lock_path,
            attempts,
        } => LockFailure {
            lock_path: Some(lock_path.to_string_lossy().into_owned()),
            attempts: Some(attempts),
            ..failure(
                "ETIMEDOUT",
                format!(
                    "Failed to acquire file lock at {}: the filesystem did not answer within the \
                     waiting budget (a syscall of attempt {attempts} is still running); check the \
                     mount that holds it, or allow a longer budget (timeout, or retries x retryDelayMs).",
                    lock_path.display()
                ),
            )
        },
        AcquireError::Aborted { attempts, holder } => LockFailure {
            attempts: Some(attempts),
            holder: holder.as_deref().map(HolderInfo::from),
            ..failure("ABORT_ERR", "File lock acquisition aborted".into())
        },
        AcquireError::Hook(message) => failure("EHOOK", message),
        AcquireError::Io {
            lock_path,
            code,
            message,
        } => LockFailure {
            lock_path: Some(lock_path.to_string_lossy().into_owned()),
            ..failure(code, message)
        },
    }
}

fn release_failure(error: ReleaseError) -> LockFailure {
    match error {
        ReleaseError::Unknown => failure(
            "ERELEASED",
            "Failed to release file lock: already released.".into(),
        ),
        ReleaseError::AlreadyReleasing => failure(
            "ERELEASING",
            "Failed to release file lock: a release of this generation is already running.".into(),
        ),
        ReleaseError::Missing => {
            failure("EMISSING", "Failed to release file lock: missing.".into())
        }
        ReleaseError::OwnerChanged => failure(
            "EOWNERCHANGED",
            "Failed to release file lock: owner_changed.".into(),
        ),
        ReleaseError::Pending(code) => failure(
            code,
            format!("Failed to release file lock: transient removal failure ({code})."),
        ),
        ReleaseError::LeftForeign(path) => failure(
            "EFOREIGN",
            format!(
                "Released the file lock (its name is free and this process's record removed), but \
                 its directory held entries someone else put there that exactlock does not remove \
                 (a symlink, FIFO, socket or device, or more than it snapshots): they were left \
                 where they are, in the directory now at {}.",
                path.display()
            ),
        ),
    }
}

fn unknown_generation() -> LockFailure {
    failure("ERELEASED", "unknown lock generation".into())
}

/// How `releaseFirstAttemptNative` left a release that did not fail.
#[napi]
pub enum ReleaseStep {
    /// Released: the release is over.
    Released,
    /// Not over: call `releaseLockNative` with `continued`.
    Continue,
    /// No attempt was made on the calling thread (the lock's directory has
    /// not earned the inline path): call `releaseLockNative` without
    /// `continued`, the release is still to begin.
    Deferred,
}

/// The first release attempt, synchronously on the calling thread: it
/// never sleeps; the retries that need a pause are `releaseLockNative`'s.
/// A failure ends the release. A number, not an object, for the common
/// answer (see `acquire_first_attempt_native`).
#[napi(ts_return_type = "ReleaseStep | LockFailure")]
pub fn release_first_attempt_native(
    env: Env,
    generation: String,
) -> Result<Either<ReleaseStep, LockFailure>> {
    let scope = scope_of(&env)?;
    let Ok(id) = generation.parse::<u64>() else {
        return Ok(Either::B(unknown_generation()));
    };
    Ok(match release::release_first_attempt(id) {
        FirstAttempt::Done(result) => match settle(&scope, id, result) {
            Ok(()) => Either::A(ReleaseStep::Released),
            Err(error) => Either::B(release_failure(error)),
        },
        FirstAttempt::Continue => Either::A(ReleaseStep::Continue),
        FirstAttempt::Deferred => Either::A(ReleaseStep::Deferred),
    })
}

/// Releases a generation (`continued`: after `releaseFirstAttemptNative`);
/// resolves to `null` on success or a failure.
#[napi(ts_return_type = "Promise<LockFailure | null>")]
pub fn release_lock_native<'env>(
    env: &'env Env,
    generation: String,
    continued: Option<bool>,
) -> Result<PromiseRaw<'env, Option<LockFailure>>> {
    let scope = scope_of(env)?;
    env.spawn_future(async move {
        let Ok(id) = generation.parse::<u64>() else {
            return Ok(Some(unknown_generation()));
        };
        let result = release::release(id, continued.unwrap_or(false)).await;
        Ok(settle(&scope, id, result).err().map(release_failure))
    })
}

/// The environment settles the release (see [`Scope::settle`]).
fn settle(
    scope: &Scope,
    id: u64,
    result: std::result::Result<(), ReleaseError>,
) -> std::result::Result<(), ReleaseError> {
    scope.settle(id, &result);
    result
}

/// `processStartTime(pid)`: the start time as `ps -o lstart=` prints it
/// under `LC_ALL=C TZ=UTC`, or `null`.
#[napi]
pub fn process_start_time(pid: f64) -> Option<String> {
    if !(pid.is_finite() && pid > 0.0 && pid.fract() == 0.0 && pid <= f64::from(i32::MAX)) {
        return None;
    }
    lstart::start_time(pid as u32)
}

/// The owner record with the original's snake_case keys.
#[napi(object)]
pub struct OwnerRecordJs {
    pub pid: f64,
    #[napi(js_name = "start_time")]
    pub start_time: Option<String>,
    #[napi(js_name = "start_time_format")]
    pub start_time_format: Option<String>,
    pub timestamp: f64,
    #[napi(js_name = "owner_token")]
    pub owner_token: Option<String>,
    #[napi(js_name = "owner_host_id")]
    pub owner_host_id: Option<String>,
    #[napi(js_name = "process_incarnation")]
    pub process_incarnation: Option<String>,
    #[napi(js_name = "boot_id")]
    pub boot_id: Option<String>,
    #[napi(js_name = "start_ticks")]
    pub start_ticks: Option<f64>,
    #[napi(js_name = "pid_ns")]
    pub pid_ns: Option<String>,
}

impl From<&OwnerRecord> for OwnerRecordJs {
    fn from(r: &OwnerRecord) -> Self {
        OwnerRecordJs {
            pid: r.pid,
            start_time: r.start_time.clone(),
            start_time_format: r.start_time_format.clone(),
            timestamp: r.timestamp,
            owner_token: r.owner_token.clone(),
            owner_host_id: r.owner_host_id.clone(),
            process_incarnation: r.process_incarnation.clone(),
            boot_id: r.boot_id.clone(),
            start_ticks: r.start_ticks.map(|ticks| ticks as f64),
            pid_ns: r.pid_ns.clone(),
        }
    }
}

impl From<&OwnerRecordJs> for OwnerRecord {
    fn from(r: &OwnerRecordJs) -> Self {
        OwnerRecord {
            pid: r.pid,
            start_time: r.start_time.clone(),
            start_time_format: r.start_time_format.clone(),
            timestamp: r.timestamp,
            owner_token: r.owner_token.clone(),
            owner_host_id: r.owner_host_id.clone(),
            process_incarnation: r.process_incarnation.clone(),
            boot_id: r.boot_id.clone(),
            start_ticks: r
                .start_ticks
                .filter(|ticks| *ticks >= 0.0 && ticks.fract() == 0.0)
                .map(|ticks| ticks as u64),
            pid_ns: r.pid_ns.clone(),
        }
    }
}

/// `GenericFileLockDirIdentity`: nine decimal strings.
#[napi(object)]
pub struct LockDirIdentityJs {
    pub root_dev: String,
    pub root_ino: String,
    pub info_dev: String,
    pub info_ino: String,
    pub info_nlink: String,
    pub info_size: String,
    pub info_mtime_ns: String,
    pub info_ctime_ns: String,
    pub info_sha256: String,
}

impl From<&LockDirIdentity> for LockDirIdentityJs {
    fn from(identity: &LockDirIdentity) -> Self {
        let [
            root_dev,
            root_ino,
            info_dev,
            info_ino,
            info_nlink,
            info_size,
            info_mtime_ns,
            info_ctime_ns,
            info_sha256,
        ] = identity.to_strings();
        LockDirIdentityJs {
            root_dev,
            root_ino,
            info_dev,
            info_ino,
            info_nlink,
            info_size,
            info_mtime_ns,
            info_ctime_ns,
            info_sha256,
        }
    }
}

impl LockDirIdentityJs {
    fn parse(&self) -> Option<LockDirIdentity> {
        LockDirIdentity::from_strings([
            &self.root_dev,
            &self.root_ino,
            &self.info_dev,
            &self.info_ino,
            &self.info_nlink,
            &self.info_size,
            &self.info_mtime_ns,
            &self.info_ctime_ns,
            &self.info_sha256,
        ])
    }
}

#[napi(object)]
pub struct GcObservationJs {
    pub info: OwnerRecordJs,
    pub bytes: Buffer,
    pub identity: LockDirIdentityJs,
}

#[napi(object)]
pub struct GcObservationResult {
    pub observation: Option<GcObservationJs>,
    pub failure: Option<LockFailure>,
}

/// Runs filesystem work for an async entry point on a blocking thread:
/// never on the runtime's worker thread, which only waits.
pub(super) async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|error| napi::Error::from_reason(format!("exactlock internal error: {error}")))
}

/// `readFileLockObservationForGc`.
#[napi]
pub async fn read_lock_observation_native(lock_dir: String) -> Result<GcObservationResult> {
    blocking(move || read_lock_observation(lock_dir)).await
}

fn read_lock_observation(lock_dir: String) -> GcObservationResult {
    match gc::read_observation(&PathBuf::from(&lock_dir)) {
        Ok(observation) => GcObservationResult {
            observation: observation.map(|o| GcObservationJs {
                info: OwnerRecordJs::from(&o.record),
                bytes: Buffer::from(o.bytes),
                identity: LockDirIdentityJs::from(&o.identity),
            }),
            failure: None,
        },
        Err(errno) => GcObservationResult {
            observation: None,
            failure: Some(errno_failure(errno, "Failed to read file lock", &lock_dir)),
        },
    }
}

#[napi(object)]
pub struct StaleVerdictResult {
    pub stale: bool,
    pub reason: String,
    pub identity: Option<LockDirIdentityJs>,
    pub failure: Option<LockFailure>,
}

/// `genericFileLockDirStaleVerdict`.
#[napi]
pub async fn stale_verdict_native(
    lock_dir: String,
    stale_ms: f64,
    owner_host_id: Option<String>,
    previous_owner_host_ids: Option<Vec<String>>,
) -> Result<StaleVerdictResult> {
    let policy = policy_of(owner_host_id, previous_owner_host_ids);
    blocking(
        move || match gc::stale_verdict(&PathBuf::from(&lock_dir), stale_ms, &policy) {
            Ok((verdict, identity)) => StaleVerdictResult {
                stale: verdict.stale,
                reason: verdict.reason.as_str().to_string(),
                identity: identity.as_ref().map(LockDirIdentityJs::from),
                failure: None,
            },
            Err(errno) => StaleVerdictResult {
                stale: false,
                reason: "error".into(),
                identity: None,
                failure: Some(errno_failure(errno, "Failed to judge file lock", &lock_dir)),
            },
        },
    )
    .await
}

/// `removeFileLockDirForGc`: `removed`, `owner_changed`, `missing` or
/// `cleanup_failed`. Without an identity (none was observed for
/// `expected`) nothing is removed.
#[napi]
pub async fn remove_lock_dir_for_gc_native(
    lock_dir: String,
    expected: OwnerRecordJs,
    identity: Option<LockDirIdentityJs>,
) -> Result<String> {
    let identity = match identity.as_ref().map(LockDirIdentityJs::parse) {
        None => None,
        Some(Some(identity)) => Some(identity),
        // Not an identity any observation could have given.
        Some(None) => return Ok(gc::GcRemoval::OwnerChanged.as_str().to_string()),
    };
    let expected = OwnerRecord::from(&expected);
    blocking(move || {
        gc::remove_for_gc(&PathBuf::from(lock_dir), &expected, identity.as_ref())
            .as_str()
            .to_string()
    })
    .await
}

#[napi(object)]
pub struct InspectResult {
    pub lock_path: String,
    pub holder: Option<HolderInfo>,
    pub failure: Option<LockFailure>,
}

/// `inspectLock`: read-only.
#[napi]
pub async fn inspect_lock_native(
    file_path: String,
    stale_ms: f64,
    owner_host_id: Option<String>,
    previous_owner_host_ids: Option<Vec<String>>,
) -> Result<InspectResult> {
    let policy = policy_of(owner_host_id, previous_owner_host_ids);
    blocking(move || inspect_lock(file_path, stale_ms, &policy)).await
}

fn inspect_lock(file_path: String, stale_ms: f64, policy: &HostPolicy) -> InspectResult {
    let path = PathBuf::from(&file_path);
    match gc::inspect(&path, stale_ms, policy) {
        Ok(inspection) => InspectResult {
            lock_path: inspection.lock_path.to_string_lossy().into_owned(),
            holder: Some(HolderInfo::from(&inspection.holder)),
            failure: None,
        },
        Err(errno) => InspectResult {
            lock_path: acquire::lock_path_of(&path).to_string_lossy().into_owned(),
            holder: None,
            failure: Some(errno_failure(
                errno,
                "Failed to inspect file lock",
                &file_path,
            )),
        },
    }
}

/// Test seam: makes `step` fail with `code` the next `times` times (always
/// when omitted). Returns false for an unknown step or code.
#[napi]
pub fn inject_fault_for_testing(step: String, code: String, times: Option<u32>) -> bool {
    faults::arm(&step, &code, times)
}

/// Test seam: makes `step` (`attempt`, `release`, `parent.created`, `publish.unwritten`,
/// `release.detached`) stall (or, for `acquire.elder_grace`, sets the grace a
/// waiter gives the waiters staged before it)
/// for `ms` milliseconds on names containing `only`, the next `times` times
/// (always when omitted). Returns false for an unknown step.
#[napi]
pub fn inject_delay_for_testing(
    step: String,
    ms: u32,
    only: Option<String>,
    times: Option<u32>,
) -> bool {
    faults::arm_delay(&step, ms, only.as_deref(), times)
}

/// Test seam: disarms every injected fault.
#[napi]
pub fn clear_faults_for_testing() {
    faults::clear();
}

/// The lock's runtime: one worker thread per process. Everything it runs
/// is a few non-blocking syscalls or a wait on the kernel (inotify, pidfd,
/// kqueue, timers), so one thread serves every acquisition, and a waiter's wake-up
/// (the inotify dispatcher notifying the waiter) stays on that thread
/// instead of waking a second one: measured, the contended counter of
/// `npm run bench` runs about 15 % faster than with one worker per core.
#[napi_derive::module_init]
fn init_runtime() {
    // NODE_DEBUG and EXACTLOCK_PLATFORM are read when the module loads, as
    // Node reads NODE_DEBUG at start-up.
    let _ = crate::sys::debug::enabled();
    crate::debug!(
        "kernel mechanisms: {} ({}=portable forces the portable ones)",
        crate::sys::platform::name(),
        crate::sys::platform::SWITCH
    );
    if let Ok(runtime) = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("exactlock")
        .enable_all()
        .build()
    {
        napi::bindgen_prelude::create_custom_tokio_runtime(runtime);
    }
}
