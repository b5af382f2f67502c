//! A test seam for fault injection: makes a named step fail with a chosen
//! code, once or always. Unarmed (the normal case) it costs one relaxed
//! atomic load per step. It is armed only through `injectFaultForTesting`,
//! which the facade exposes on `FileLockTestHooks` for tests.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};

/// Steps that can be made to fail.
pub const STEPS: &[&str] = &[
    "publish.stage",
    "publish.rename",
    "observe",
    "reclaim",
    "release.snapshot",
    "release.remove",
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

/// Disarms every fault.
pub fn clear() {
    faults().lock().unwrap_or_else(|p| p.into_inner()).clear();
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
pub fn errno_of(code: &str) -> rustix::io::Errno {
    use rustix::io::Errno;
    match code {
        "EBUSY" => Errno::BUSY,
        "EACCES" => Errno::ACCESS,
        "EPERM" => Errno::PERM,
        "ENOSPC" => Errno::NOSPC,
        "ENOTEMPTY" => Errno::NOTEMPTY,
        _ => Errno::IO,
    }
}
