//! exactlock's native core.
//!
//! This file only declares the modules; the napi surface lives in
//! `napi_lock` (the lock, GC helpers, inspection) and `napi_primitives`
//! (no-replace rename, tree snapshot, exact removal). Every other module
//! is plain Rust, tested with `cargo test`:
//!
//! - `fsx`: no-follow, descriptor-relative file access;
//! - `rename`, `tree`: the primitives the lock stands on;
//! - `record`, `identity`, `observe`: the owner record and what is on disk;
//! - `process`: start times and liveness from `/proc`;
//! - `verdict`, `report`: may a waiter remove a lock, and who holds it;
//! - `publish`, `acquire`, `release`, `table`, `wait`, `debris`: the state
//!   machine, the in-process table and queue, event-driven waiting, and the
//!   cleanup of what crashed processes leave;
//! - `guard`: reclaimers of one judged lock take turns (`flock`);
//! - `gc`: inspection and identity-bound removal for other tools;
//! - `errno`, `faults`: error names and the fault-injection seam.

#![deny(unsafe_code)]
// The napi entry points are reachable only from JavaScript; in the unit-test
// build nothing calls them, so what only they use would read as dead.
#![cfg_attr(test, allow(dead_code))]

mod acquire;
mod debris;
mod errno;
mod faults;
mod fsx;
mod gc;
mod guard;
mod identity;
mod napi_lock;
mod napi_primitives;
mod observe;
mod process;
#[cfg(test)]
mod proptests;
mod publish;
mod record;
mod release;
mod rename;
mod report;
mod table;
#[cfg(test)]
mod testutil;
mod tree;
mod verdict;
mod wait;

use napi_derive::napi;

/// The version of the native core, for diagnostics.
#[napi]
pub fn native_version() -> String {
    env!("CARGO_PKG_VERSION").to_string()
}
