//! napi surface of the loss watch ([`crate::lock::lost`]): `release.signal`
//! and `onCompromised` start one for a held generation, and the release
//! stops it. The callback is weak: a watched lock does not keep the
//! process alive.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi::{Result, Status};
use napi_derive::napi;

use crate::lock::lost::{self, Loss, LossWatch};
use crate::lock::table;

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

/// Starts watching the held `generation` for its loss; `onLost` is called
/// at most once. Returns the watch's handle, or `null` when the generation
/// is not held (released already).
#[napi(ts_args_type = "generation: string, onLost: (loss: LockLoss) => void")]
pub fn watch_held_lock_native(generation: String, on_lost: LossFunction) -> Result<Option<u32>> {
    let Ok(id) = generation.parse::<u64>() else {
        return Ok(None);
    };
    let Some(held) = table::held(id) else {
        return Ok(None);
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
            Ok(Some(handle))
        }
        Err(errno) if errno == rustix::io::Errno::NOENT => Ok(None),
        Err(errno) => Err(napi::Error::new(
            Status::GenericFailure,
            format!(
                "cannot watch the held lock {shown} for its loss ({})",
                crate::sys::errno::errno_code(errno)
            ),
        )),
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
