//! Fuzzes the owner-record parser with arbitrary bytes. The main crate is a
//! `cdylib`, so its source file is included directly.
//!
//! Checks: `parse` never panics; whatever it accepts validates (pid a
//! positive integer, timestamp finite, optional strings non-empty); and a
//! record it accepts survives `parse(to_json(r)) == r`.
#![no_main]
#![allow(dead_code)]

use libfuzzer_sys::fuzz_target;

// The record and what it uses of the platform layer, at the paths the
// sources name each other by (`crate::sys::…`).
#[path = "../../src/sys"]
mod sys {
    pub mod incarnation;
    pub mod lstart;
    pub mod process;
}
#[path = "../../src/lock"]
mod lock {
    pub mod record;
}

use lock::record::OwnerRecord;

fuzz_target!(|bytes: &[u8]| {
    let Some(record) = OwnerRecord::parse(bytes) else {
        return;
    };
    assert!(record.pid.is_finite() && record.pid > 0.0 && record.pid.fract() == 0.0);
    assert!(record.timestamp.is_finite());
    for field in [
        &record.start_time,
        &record.start_time_format,
        &record.owner_token,
        &record.owner_host_id,
    ] {
        assert_ne!(field.as_deref(), Some(""));
    }
    let json = record.to_json();
    assert_eq!(OwnerRecord::parse(json.as_bytes()), Some(record));
});
