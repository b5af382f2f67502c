//! Filesystem primitives: no-follow, descriptor-relative access; the
//! no-replace and exchange renames with their fallbacks; snapshots of a
//! small tree and its exact removal; what each filesystem carries (the
//! probe behind `exactlock doctor`, and the per-filesystem memory that
//! picks the renames' code path). Uses only [`crate::sys`]; never reads or
//! judges an owner record.

pub mod caps;
pub mod fsx;
pub mod probe;
pub mod rename;
pub mod tree;
