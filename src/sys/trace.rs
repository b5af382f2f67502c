//! Timestamps of a hand-off's steps, for `bench/handoff.mjs`, which writes
//! where a hand-off's time goes into `bench/RESULTS.md`.
//!
//! Off unless `EXACTLOCK_TRACE=handoff` is set in the environment (read
//! once, at the first stamp); then each [`stamp`] keeps `(step, now)` on `process.hrtime.bigint()`'s clock,
//! in memory (no I/O on the measured path), at most [`MAX_STAMPS`] of them,
//! until JavaScript takes them (`takeTraceForTesting`). Off, a stamp costs
//! one load of a flag.

use std::sync::{Mutex, OnceLock};

use crate::sys::platform::native;

/// The most stamps kept before JavaScript takes them; later ones are
/// dropped (a bench run takes them after every hand-off).
pub const MAX_STAMPS: usize = 4096;

static STAMPS: Mutex<Vec<(&'static str, i128)>> = Mutex::new(Vec::new());

fn enabled() -> bool {
    static ENABLED: OnceLock<bool> = OnceLock::new();
    *ENABLED.get_or_init(|| std::env::var_os("EXACTLOCK_TRACE").is_some_and(|v| v == "handoff"))
}

/// Keeps the time `step` was reached (when tracing is on).
pub fn stamp(step: &'static str) {
    if enabled() {
        let now = native::hrtime_ns();
        let mut stamps = STAMPS.lock().unwrap_or_else(|p| p.into_inner());
        if stamps.len() < MAX_STAMPS {
            stamps.push((step, now));
        }
    }
}

/// The stamps kept so far, oldest first; none are kept after.
pub fn take() -> Vec<(&'static str, i128)> {
    std::mem::take(&mut *STAMPS.lock().unwrap_or_else(|p| p.into_inner()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn off_without_the_switch_keeps_nothing() {
        assert!(!enabled(), "cargo test runs without EXACTLOCK_TRACE");
        stamp("step");
        assert!(take().is_empty());
    }
}
