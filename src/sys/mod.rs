//! The platform: what the kernel says about processes (start time,
//! incarnation, liveness), how it wakes a waiter, errno names, and the
//! fault-injection seam. May use only `rustix` (and, in `platform`, `libc`
//! where rustix has no wrapper); never touches a lock directory nor reads a
//! record. Everything OS-specific sits in [`platform`], one file per OS and
//! one portable; the modules beside it are the crate's interface to it.

pub mod clock;
pub mod closer;
pub mod debug;
pub mod errno;
pub mod faults;
pub mod incarnation;
pub mod lstart;
pub mod os;
pub mod platform;
pub mod process;
pub mod stderr;
pub mod trace;
pub mod unique;
pub mod wait;
