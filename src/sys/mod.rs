//! The platform: what the kernel says about processes (start time,
//! incarnation, liveness), how it wakes a waiter (inotify, pidfd, timers),
//! errno names, and the fault-injection seam. Nothing here knows what a
//! lock directory is.

pub mod debug;
pub mod errno;
pub mod faults;
pub mod incarnation;
pub mod lstart;
pub mod process;
pub mod wait;
