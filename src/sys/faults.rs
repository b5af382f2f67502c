//! A test seam for fault injection: makes a named step fail with a chosen
//! code, once or always, or stall for a while (a slow or hung filesystem,
//! a window for a race). Unarmed (the normal case) it costs one relaxed
//! atomic load per step. It is armed only through `injectFaultForTesting`
//! and `injectDelayForTesting`, which the facade exposes for tests.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

/// Steps that can be made to fail.
pub const STEPS: &[&str] = &[
    "publish.stage",
    "publish.rename",
    "observe",
    "reclaim",
    "release.snapshot",
    "release.remove",
];

/// Steps that can be made to stall, each right before its syscalls: one
/// attempt of an acquisition, one release attempt, the moment between
/// creating a missing parent directory and opening it, the moment a
/// staging directory is made and held but its record not yet written, the
/// moment a release has looked at the lock name and is about to free it,
/// and the moment a release has freed the lock name (its directory detached,
/// not yet removed), the moment after an acquisition answered its
/// caller (its thread preempted before it returns), and the moment a GC
/// removal has observed the lock it was asked to remove and not yet guarded
/// it (`gc.judged`). And one that is a length of time rather than a stall:
/// `acquire.elder_grace`, how long a waiter woken by the free name lets
/// the waiters staged before it take the lock ([`armed_duration`]).
pub const DELAY_STEPS: &[&str] = &[
    "attempt",
    "release",
    "parent.created",
    "publish.unwritten",
    "release.detach",
    "release.detached",
    "acquire.answered",
    "gc.judged",
    "acquire.elder_grace",
];

/// Codes a fault may carry (errno names the lock treats as the kernel's).
pub const CODES: &[&str] = &["EBUSY", "EACCES", "EPERM", "ENOSPC", "EIO", "ENOTEMPTY"];

struct Fault {
    code: &'static str,
    /// `None` = always; `Some(n)` = the next n times.
    remaining: Option<u32>,
}

static ARMED: AtomicBool = AtomicBool::new(false);

fn faults() -> &'static Mutex<HashMap<&'static str, Fault>> {
    static FAULTS: OnceLock<Mutex<HashMap<&'static str, Fault>>> = OnceLock::new();
    FAULTS.get_or_init(Mutex::default)
}

/// Arms `step` to fail with `code` for the next `times` calls (`None`:
/// always). Returns false for an unknown step or code.
pub fn arm(step: &str, code: &str, times: Option<u32>) -> bool {
    let (Some(step), Some(code)) = (
        STEPS.iter().find(|s| **s == step),
        CODES.iter().find(|c| **c == code),
    ) else {
        return false;
    };
    let mut faults = faults().lock().unwrap_or_else(|p| p.into_inner());
    faults.insert(
        step,
        Fault {
            code,
            remaining: times,
        },
    );
    ARMED.store(true, Ordering::SeqCst);
    true
}

struct Delay {
    duration: Duration,
    /// Only names (lock names, directory names) containing these bytes.
    only: Option<Vec<u8>>,
    /// `None` = always; `Some(n)` = the next n times.
    remaining: Option<u32>,
}

impl Delay {
    /// Whether it is armed for `name`.
    fn applies_to(&self, name: &OsStr) -> bool {
        self.only.as_deref().is_none_or(|only| {
            only.is_empty()
                || name
                    .as_encoded_bytes()
                    .windows(only.len())
                    .any(|w| w == only)
        })
    }
}

fn delays() -> &'static Mutex<HashMap<&'static str, Delay>> {
    static DELAYS: OnceLock<Mutex<HashMap<&'static str, Delay>>> = OnceLock::new();
    DELAYS.get_or_init(Mutex::default)
}

/// Arms `step` to stall for `ms` milliseconds on names containing `only`
/// (any name when `None`), the next `times` times (`None`: always).
/// Returns false for an unknown step.
pub fn arm_delay(step: &str, ms: u32, only: Option<&str>, times: Option<u32>) -> bool {
    let Some(step) = DELAY_STEPS.iter().find(|s| **s == step) else {
        return false;
    };
    delays().lock().unwrap_or_else(|p| p.into_inner()).insert(
        step,
        Delay {
            duration: Duration::from_millis(u64::from(ms)),
            only: only.map(|only| only.as_bytes().to_vec()),
            remaining: times,
        },
    );
    ARMED.store(true, Ordering::SeqCst);
    true
}

/// Stalls the calling thread if `step` is armed for `name`. Call it only
/// where a blocking syscall could stand: never on the thread that drives
/// waiting.
pub fn pause(step: &'static str, name: &OsStr) {
    if !ARMED.load(Ordering::Relaxed) {
        return;
    }
    let duration = {
        let mut delays = delays().lock().unwrap_or_else(|p| p.into_inner());
        let Some(delay) = delays.get_mut(step) else {
            return;
        };
        let matches = delay.applies_to(name);
        match &mut delay.remaining {
            _ if !matches => return,
            Some(0) => return,
            Some(n) => *n -= 1,
            None => {}
        }
        delay.duration
    };
    std::thread::sleep(duration);
}

/// The duration `step` is armed with for `name` (see [`arm_delay`]), if
/// any, without using up a count: for a step that is a length of time,
/// not a stall.
pub fn armed_duration(step: &'static str, name: &OsStr) -> Option<Duration> {
    if !ARMED.load(Ordering::Relaxed) {
        return None;
    }
    let delays = delays().lock().unwrap_or_else(|p| p.into_inner());
    let delay = delays.get(step)?;
    (delay.applies_to(name) && delay.remaining != Some(0)).then_some(delay.duration)
}

/// Disarms the delay of `step` alone (tests that run beside others).
#[cfg(test)]
pub fn disarm_delay(step: &str) {
    delays()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .remove(step);
}

/// Disarms every fault and delay.
pub fn clear() {
    faults().lock().unwrap_or_else(|p| p.into_inner()).clear();
    delays().lock().unwrap_or_else(|p| p.into_inner()).clear();
    ARMED.store(false, Ordering::SeqCst);
}

/// Whether `step` would fail now (without using up a count).
pub fn is_armed(step: &'static str) -> bool {
    ARMED.load(Ordering::Relaxed)
        && faults()
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(step)
            .is_some_and(|fault| fault.remaining != Some(0))
}

/// Fails with the armed code if `step` is armed.
pub fn check(step: &'static str) -> Result<(), &'static str> {
    if !ARMED.load(Ordering::Relaxed) {
        return Ok(());
    }
    let mut faults = faults().lock().unwrap_or_else(|p| p.into_inner());
    let Some(fault) = faults.get_mut(step) else {
        return Ok(());
    };
    let code = fault.code;
    match &mut fault.remaining {
        None => {}
        Some(0) => return Ok(()),
        Some(n) => *n -= 1,
    }
    Err(code)
}

/// The errno a fault code stands for, for steps that speak errno.
pub fn errno_of(code: &str) -> crate::sys::os::io::Errno {
    use crate::sys::os::io::Errno;
    match code {
        "EBUSY" => Errno::BUSY,
        "EACCES" => Errno::ACCESS,
        "EPERM" => Errno::PERM,
        "ENOSPC" => Errno::NOSPC,
        "ENOTEMPTY" => Errno::NOTEMPTY,
        _ => Errno::IO,
    }
}
