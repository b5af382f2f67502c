//! exactlock's native core, in four layers; each may use only the layers
//! listed before it.
//!
//! - [`sys`]: the platform — process identity and liveness, kernel
//!   wake-ups, errno names, the fault seam. Knows nothing of locks.
//!   Whatever differs between systems sits in `sys::platform` (`linux`,
//!   `macos`, `portable`; `EXACTLOCK_PLATFORM=portable` forces the last).
//! - [`fs`]: the filesystem primitives the lock stands on — no-follow,
//!   descriptor-relative access, no-replace rename, tree snapshot and exact
//!   removal. Never reads an owner record.
//! - [`lock`]: the lock — owner record, observation, verdict, publication,
//!   the acquire/release state machine, the in-process table, debris, GC.
//! - [`binding`]: the napi surface — conversions between JavaScript values
//!   and the layers below, nothing else.

#![deny(unsafe_code)]
// The napi entry points are reachable only from JavaScript; in the unit-test
// build nothing calls them, so what only they use would read as dead.
#![cfg_attr(test, allow(dead_code))]

mod binding;
mod fs;
mod lock;
mod sys;
#[cfg(test)]
mod testutil;
