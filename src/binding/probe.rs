//! napi surface of the filesystem probe ([`crate::fs::probe`], behind
//! `exactlock doctor`), of the bench's crash-recovery floor (the
//! platform's exit notice — a pidfd, a kqueue `EVFILT_PROC` — waited on
//! off the JS thread) and of the clock both the floor and the demo's
//! stamps are read on. Conversion only; the probe and the wait run on the
//! libuv pool, as a probe on a hung mount or a wait for an exit may take
//! long.

use std::path::PathBuf;
use std::time::Duration;

use napi::bindgen_prelude::{AsyncTask, Result};
use napi::{Env, Task};
use napi_derive::napi;

use crate::fs::probe::{self, Inotify, Probe, ProbeError, Tried};
use crate::sys::errno::errno_code;
use crate::sys::platform::native;
use crate::sys::wait::{self, HolderExit, HolderWatch, Wake, Woken, holder_exit};

/// Whether one call works on the filesystem.
#[napi(object)]
pub struct NativeProbeCall {
    /// `yes`, `no` (refused), `broken` (claimed success, did not do it),
    /// `unknown` (the try failed otherwise); for inotify `all_changes`,
    /// `this_host_only`, `no_events`, `unavailable`.
    pub result: String,
    /// The errno behind `no`, `unknown` or `unavailable` (`EINVAL`…).
    pub errno: Option<String>,
}

/// One consequence for the lock's guarantees.
#[napi(object)]
pub struct NativeProbeNote {
    pub code: String,
    pub text: String,
}

/// Result of `probeFilesystem`: `ok` with the findings, or `code` and
/// `errno` saying why the directory could not be probed.
#[napi(object)]
pub struct NativeFilesystemProbe {
    pub ok: bool,
    /// `not_found`, `not_a_directory`, `not_writable`, `read_only`,
    /// `no_space`, `no_new_entries`, `io_error`.
    pub code: Option<String>,
    pub errno: Option<String>,
    pub dir: String,
    /// `st_dev`, decimal.
    pub dev: Option<String>,
    /// `statfs` `f_type`, hexadecimal (`0xef53`).
    pub statfs_type: Option<String>,
    pub statfs_name: Option<String>,
    /// The type as mounted (`ext4`, `tmpfs`, `fuse.sshfs`…), else the
    /// `statfs` name.
    pub fs_type: Option<String>,
    pub mount_point: Option<String>,
    pub mount_source: Option<String>,
    /// `local`, `network`, `fuse`, `unknown`.
    pub class: Option<String>,
    pub rename_noreplace: Option<NativeProbeCall>,
    pub rename_exchange: Option<NativeProbeCall>,
    pub flock: Option<NativeProbeCall>,
    pub inotify: Option<NativeProbeCall>,
    pub notes: Vec<NativeProbeNote>,
    /// The scratch directory, if it could not be removed.
    pub leftover: Option<String>,
}

/// Probes the filesystem under `dir` (see `exactlock doctor`).
#[napi(ts_return_type = "Promise<NativeFilesystemProbe>")]
pub fn probe_filesystem(dir: String) -> AsyncTask<ProbeTask> {
    AsyncTask::new(ProbeTask {
        dir: PathBuf::from(dir),
    })
}

pub struct ProbeTask {
    dir: PathBuf,
}

impl Task for ProbeTask {
    type Output = std::result::Result<Probe, ProbeError>;
    type JsValue = NativeFilesystemProbe;

    fn compute(&mut self) -> Result<Self::Output> {
        Ok(probe::probe(&self.dir))
    }

    fn resolve(&mut self, _env: Env, output: Self::Output) -> Result<Self::JsValue> {
        Ok(probe_result(&self.dir, output))
    }
}

fn call(tried: Tried) -> NativeProbeCall {
    NativeProbeCall {
        result: tried.as_str().to_owned(),
        errno: tried.errno().map(|e| errno_code(e).to_owned()),
    }
}

fn inotify_call(inotify: Inotify) -> NativeProbeCall {
    NativeProbeCall {
        result: inotify.as_str().to_owned(),
        errno: match inotify {
            Inotify::Unavailable(errno) => errno.map(|e| errno_code(e).to_owned()),
            _ => None,
        },
    }
}

fn probe_result(
    dir: &std::path::Path,
    output: std::result::Result<Probe, ProbeError>,
) -> NativeFilesystemProbe {
    let dir = dir.to_string_lossy().into_owned();
    match output {
        Ok(found) => NativeFilesystemProbe {
            ok: true,
            code: None,
            errno: None,
            dir,
            dev: Some(found.dev.to_string()),
            statfs_type: Some(format!("{:#x}", found.magic)),
            statfs_name: Some(found.statfs_name.to_owned()),
            fs_type: Some(found.fs_name().to_owned()),
            mount_point: found.mount.as_ref().map(|m| m.mount_point.clone()),
            mount_source: found.mount.as_ref().map(|m| m.source.clone()),
            class: Some(found.class.as_str().to_owned()),
            rename_noreplace: Some(call(found.rename_noreplace)),
            rename_exchange: Some(call(found.rename_exchange)),
            flock: Some(call(found.flock)),
            inotify: Some(inotify_call(found.inotify)),
            notes: probe::consequences(&found)
                .into_iter()
                .map(|note| NativeProbeNote {
                    code: note.code.to_owned(),
                    text: note.text,
                })
                .collect(),
            leftover: found
                .leftover
                .as_ref()
                .map(|p| p.to_string_lossy().into_owned()),
        },
        Err(error) => NativeFilesystemProbe {
            ok: false,
            code: Some(error.code().to_owned()),
            errno: Some(errno_code(error.errno()).to_owned()),
            dir,
            dev: None,
            statfs_type: None,
            statfs_name: None,
            fs_type: None,
            mount_point: None,
            mount_source: None,
            class: None,
            rename_noreplace: None,
            rename_exchange: None,
            flock: None,
            inotify: None,
            notes: Vec::new(),
            leftover: None,
        },
    }
}

/// Test seam (the bench's crash-recovery floor): starts watching `pid`'s
/// exit now, as a waiter watches its holder (Linux: a pidfd; macOS: kqueue
/// `EVFILT_PROC`), then resolves, off the JS thread, with the time in
/// nanoseconds on `process.hrtime.bigint()`'s clock (decimal) at which the
/// kernel told of the exit. `null` if no watch could be made (the process
/// is already gone, or the platform has no notice) or it did not exit
/// within `timeoutMs` (default 60000).
#[napi(ts_return_type = "Promise<string | null>")]
pub fn wait_pid_exit_ns(pid: u32, timeout_ms: Option<u32>) -> AsyncTask<PidExitTask> {
    let holder = match holder_exit(pid) {
        HolderExit::Watch(holder) => Some(holder),
        HolderExit::AlreadyGone | HolderExit::Unwatched => None,
    };
    AsyncTask::new(PidExitTask {
        holder,
        timeout: Duration::from_millis(u64::from(timeout_ms.unwrap_or(60_000))),
    })
}

pub struct PidExitTask {
    holder: Option<HolderWatch>,
    timeout: Duration,
}

impl Task for PidExitTask {
    type Output = Option<String>;
    type JsValue = Option<String>;

    fn compute(&mut self) -> Result<Self::Output> {
        let Some(holder) = self.holder.take() else {
            return Ok(None);
        };
        // Never signalled (and never armed): only the exit or the deadline
        // ends the wait.
        let wake = Wake::new();
        let deadline = std::time::Instant::now() + self.timeout;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            // A timeout, or a failed wait (reported as one), looks again
            // until the deadline.
            if wait::sleep(None, Some(&holder), &wake, left) == Woken::HolderExited {
                return Ok(Some(native::hrtime_ns().to_string()));
            }
        }
    }

    fn resolve(&mut self, _env: Env, output: Self::Output) -> Result<Self::JsValue> {
        Ok(output)
    }
}

/// The monotonic clock `process.hrtime` reads under Node (Linux
/// `CLOCK_MONOTONIC`), now, in nanoseconds (decimal): one clock for every
/// process of the machine, the one `wait_pid_exit_ns` answers in. The demo
/// stamps its sections with it: Bun's `process.hrtime` counts from its own
/// process's start, so its stamps from two processes cannot be compared.
#[napi]
pub fn monotonic_ns() -> String {
    native::hrtime_ns().to_string()
}

/// One step of a hand-off and when it was reached (see `take_trace_for_testing`).
#[napi(object)]
pub struct TraceStamp {
    pub step: String,
    /// On [`monotonic_ns`]'s clock, in nanoseconds (decimal).
    pub ns: String,
}

/// The hand-off steps stamped since the last call, oldest first, when
/// `EXACTLOCK_TRACE=handoff` was set before the first lock was taken (else
/// none): for `bench/handoff.mjs`.
#[napi]
pub fn take_trace_for_testing() -> Vec<TraceStamp> {
    crate::sys::trace::take()
        .into_iter()
        .map(|(step, ns)| TraceStamp {
            step: step.to_string(),
            ns: ns.to_string(),
        })
        .collect()
}
