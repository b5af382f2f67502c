//! rustix's `fs` on Windows: handle-relative opens, renames, deletions,
//! stats, listings and locks (see the parent module's docs).

mod arg;
mod at;
mod change;
mod dir;
mod flags;
mod lock;
mod mode;
mod path;
mod stat;
mod volume;

pub use at::{mkdirat, openat, statat};
pub use change::{delete_open, linkat, open_dir_for_delete, renameat, renameat_with, unlinkat};
pub use dir::Dir;
pub use flags::{AtFlags, FlockOperation, Mode, OFlags, RenameFlags, StatVfsMountFlags};
pub use lock::flock;
pub use mode::{chmodat, fchmod, fsync};
pub use path::{chmod, lstat, open, stat};
pub use stat::{Dev, FileType, Stat, fstat};
pub use volume::fstatvfs;

// What the facade's tests look at beyond rustix's names.
#[cfg(test)]
pub(crate) use stat::{S_IFDIR, S_IFLNK, S_IFREG, is_link_tag, mode_of, unix_time};
#[cfg(test)]
pub(crate) use volume::volume_info;
