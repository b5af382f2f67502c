//! Filesystem primitives: no-follow, descriptor-relative access; the
//! no-replace and exchange renames with their fallbacks; snapshots of a
//! small tree and its exact removal. Uses only [`crate::sys`]; never reads
//! or judges an owner record.

pub mod fsx;
pub mod rename;
pub mod tree;
