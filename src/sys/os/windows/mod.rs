//! rustix's `fd`, `fs` and `io` on Windows: the names and call shapes the
//! crate's logic is written against, implemented on NT handles.
//!
//! Every `*at` call opens its name with `NtCreateFile` relative to the
//! directory handle it is given (`OBJECT_ATTRIBUTES.RootDirectory`), so a
//! name is one component resolved inside a directory we hold, never a
//! path re-resolved from the root: the `cap-std` discipline the crate keeps
//! on unix, with NT's own means. Renames and deletions go through the
//! handle of what they move or remove (`FileRenameInformation` with the
//! destination's directory handle, `FileDispositionInformationEx` with
//! POSIX semantics), so they act on exactly the file that was opened.
//!
//! What Windows has no counterpart for answers the way a unix filesystem
//! that cannot would, which every caller already handles: exchange renames
//! are `ENOSYS`, mode bits other than the owner's write bit do not exist
//! (`Mode` is accepted and ignored), a lock a filesystem refuses on a
//! directory is `EOPNOTSUPP`. Errors carry POSIX names (see [`io::Errno`]).
//!
//! The facade mirrors a slice of rustix's API; which parts a build uses
//! depends on the target's `cfg`s, hence the `dead_code` allowance.
#![allow(dead_code)]

pub mod fd;
pub mod fs;
pub mod io;
mod nt;

#[cfg(test)]
mod tests;
