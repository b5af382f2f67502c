//! napi surface of the loss watch ([`crate::lock::lost`]): `release.signal`
//! and `onCompromised` start one for a held generation, and the release
//! stops it. The callback is weak: a watched lock does not keep the
//! process alive.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use napi::Status;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi_derive::napi;

use crate::binding::lock::LockFailure;
use crate::lock::lost::{self, Loss, LossWatch};
use crate::lock::table;
use crate::sys::errno::{errno_code, errno_text};

/// What the JavaScript callback is told.
#[napi(object)]
pub struct LockLoss {
    /// `EMISSING` (removed) or `EOWNERCHANGED` (replaced).
    pub code: String,
    /// The pid in the record that stands there now, when there is one.
    pub pid: Option<u32>,
    pub lock_path: String,
}

type LossFunction = ThreadsafeFunction<LockLoss, (), LockLoss, Status, false, true>;

fn watches() -> &'static Mutex<HashMap<u32, LossWatch>> {
    static WATCHES: OnceLock<Mutex<HashMap<u32, LossWatch>>> = OnceLock::new();
    WATCHES.get_or_init(Mutex::default)
}

/// How starting a watch went: its handle, or why none could be made.
#[napi(object)]
pub struct WatchStart {
    /// The watch's handle; `null` when the generation is not held
    /// (released already) or on failure.
    pub handle: Option<u32>,
    pub failure: Option<LockFailure>,
}

/// Starts watching the held `generation` for its loss; `onLost` is called
/// at most once.
#[napi(ts_args_type = "generation: string, onLost: (loss: LockLoss) => void")]
pub fn watch_held_lock_native(generation: String, on_lost: LossFunction) -> WatchStart {
    let none = |failure| WatchStart {
        handle: None,
        failure,
    };
    let Ok(id) = generation.parse::<u64>() else {
        return none(None);
    };
    let Some(held) = table::held(id) else {
        return none(None);
    };
    let lock_path = held.lock_path.to_string_lossy().into_owned();
    let shown = lock_path.clone();
    drop(held);
    let notify = Box::new(move |loss: Loss| {
        let (code, pid) = match loss {
            Loss::Removed => ("EMISSING", None),
            Loss::Replaced { by_pid } => ("EOWNERCHANGED", by_pid),
        };
        let _ = on_lost.call(
            LockLoss {
                code: code.into(),
                pid,
                lock_path,
            },
            ThreadsafeFunctionCallMode::NonBlocking,
        );
    });
    match lost::watch(id, notify) {
        Ok(watch) => {
            let handle = u32::try_from(id % u64::from(u32::MAX)).unwrap_or(0);
            watches()
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(handle, watch);
            WatchStart {
                handle: Some(handle),
                failure: None,
            }
        }
        Err(errno) if errno == crate::sys::os::io::Errno::NOENT => none(None),
        Err(errno) => none(Some(LockFailure {
            code: errno_code(errno).into(),
            message: format!(
                "Cannot watch the held lock {shown} for its loss: {} (no descriptor or thread \
                 could be had for the watch).",
                errno_text(errno)
            ),
            lock_path: Some(shown),
            attempts: None,
            holder: None,
        })),
    }
}

/// Stops a watch (before a release, which would otherwise look like a loss).
#[napi]
pub fn unwatch_held_lock_native(handle: u32) {
    watches()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .remove(&handle);
}
