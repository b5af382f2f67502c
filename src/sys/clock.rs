//! The wall clock, read where a record is stamped or an mtime is aged.
//! Never used to decide that a holder is gone (a clock step must not
//! displace anyone: SPEC §1.2); only to date records and to age what has
//! no owner (an ownerless lock directory's `staleMs`, debris, temps).

use std::time::{SystemTime, UNIX_EPOCH};

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
