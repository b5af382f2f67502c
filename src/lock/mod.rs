//! The lock: the owner record and a lock directory's identity, what stands
//! at a lock path and whether it may be reclaimed, publication, the
//! acquire/release state machine, the in-process table and queue, debris of
//! crashed processes, and the GC helpers. Built on [`crate::fs`] and
//! [`crate::sys`]; knows nothing of JavaScript.

pub mod acquire;
pub mod debris;
pub mod elders;
pub mod fastpath;
pub mod fence;
pub mod gc;
pub mod guard;
pub mod head_threads;
pub mod identity;
pub mod lost;
pub mod names;
pub mod observe;
#[cfg(test)]
mod proptests;
pub mod publish;
pub mod record;
pub mod release;
pub mod report;
pub mod table;
pub mod transition;
pub mod update;
pub mod verdict;
pub mod volume;
