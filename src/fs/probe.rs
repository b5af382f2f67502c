//! What the filesystem under a directory can do for a lock, found by
//! trying it (`exactlock doctor DIR`, `probeFilesystem(dir)`).
//!
//! A lock stands on a few kernel calls that not every filesystem carries:
//! `renameat2(RENAME_NOREPLACE)` to publish, `renameat2(RENAME_EXCHANGE)` to
//! replace a stale lock in one step, `flock` for the reclaimers' turns, and
//! inotify to wake a waiter when the lock goes. Whether a call works is a
//! property of the filesystem *and* of the server or daemon behind it (NFS,
//! a FUSE daemon), so nothing here guesses from the type alone: each call is
//! tried in a scratch directory made under DIR with a unique name
//! (`.exactlock-doctor.<pid>.<uuid>`) and removed afterwards. The `statfs`
//! type (refined by `/proc/self/mountinfo`, which names a FUSE mount's
//! subtype such as `fuse.sshfs`) says what cannot be tried from one host:
//! whether other hosts write there, whose changes inotify never reports.
//!
//! What a probe found about the renames is handed to [`super::caps`], the
//! per-filesystem memory the lock consults, so a lock on a filesystem the
//! probe saw refuse a flag goes straight to its fallback.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use crate::sys::os::fd::{AsFd, BorrowedFd, OwnedFd};
use crate::sys::os::fs::{self, AtFlags, FlockOperation, Mode, OFlags, RenameFlags};
use crate::sys::os::io::Errno;

use crate::fs::{caps, fsx};
use crate::sys::errno::is_flock_unsupported;

mod kind;
mod notes;

pub use kind::classify;

/// The class of `dir`'s filesystem by its `statfs` magic alone: one
/// syscall, no tries, no mountinfo (what the lock asks on every attempt:
/// may it run inline? may the client's view be stale?). `Unknown` when
/// `statfs` fails or the type is not in the table. Linux only: the table
/// holds Linux's magic numbers (macOS asks `MNT_LOCAL` instead).
#[cfg(target_os = "linux")]
pub fn class_by_magic(dir: crate::sys::os::fd::BorrowedFd<'_>) -> Class {
    fsx::statfs_magic(dir).map_or(Class::Unknown, |magic| kind::name_of_magic(magic).1)
}
use kind::{mount_of, statfs_of};
pub use notes::consequences;

/// Where the data of a filesystem lives, as far as a lock cares: who else
/// can write there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// Local storage or memory: every writer is on this host.
    Local,
    /// A network or cluster filesystem (or a share of another machine, a
    /// VM's host): other hosts may write there.
    Network,
    /// A FUSE mount whose daemon we do not know: local or remote, it cannot
    /// tell; treated like a network one.
    Fuse,
    /// A `statfs` type this table does not know.
    Unknown,
}

impl Class {
    pub fn as_str(self) -> &'static str {
        match self {
            Class::Local => "local",
            Class::Network => "network",
            Class::Fuse => "fuse",
            Class::Unknown => "unknown",
        }
    }

    /// Whether other hosts (or a daemon's other clients) may change what
    /// is seen here.
    pub fn may_be_shared(self) -> bool {
        self != Class::Local
    }
}

/// The result of trying one call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tried {
    /// It worked and did what it says.
    Works,
    /// The filesystem refused it (`EINVAL`, `ENOTSUP`, `ENOSYS`…).
    Refused(Errno),
    /// It claimed success but did not do what it says (a no-replace rename
    /// that replaced, an exchange that did not swap, a `flock` that does
    /// not exclude a second open of the same file).
    Broken,
    /// The try itself failed for another reason (the errno): no verdict.
    Failed(Errno),
}

impl Tried {
    pub fn as_str(self) -> &'static str {
        match self {
            Tried::Works => "yes",
            Tried::Refused(_) => "no",
            Tried::Broken => "broken",
            Tried::Failed(_) => "unknown",
        }
    }

    /// The errno behind a refusal or a failed try.
    pub fn errno(self) -> Option<Errno> {
        match self {
            Tried::Refused(errno) | Tried::Failed(errno) => Some(errno),
            Tried::Works | Tried::Broken => None,
        }
    }
}

/// What inotify sees on this filesystem.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Inotify {
    /// Events arrive, and every writer is on this host: all changes.
    #[cfg_attr(
        not(target_os = "linux"),
        allow(dead_code, reason = "what the Linux probe finds")
    )]
    AllChanges,
    /// Events arrive for this host's changes; other hosts' (or the
    /// server's) changes raise none here.
    #[cfg_attr(
        not(target_os = "linux"),
        allow(dead_code, reason = "what the Linux probe finds")
    )]
    ThisHostOnly,
    /// A watch was set but our own change raised no event.
    #[cfg_attr(
        not(target_os = "linux"),
        allow(dead_code, reason = "what the Linux probe finds")
    )]
    NoEvents,
    /// No watch could be set (the errno), or no inotify on this platform.
    Unavailable(Option<Errno>),
}

impl Inotify {
    pub fn as_str(self) -> &'static str {
        match self {
            Inotify::AllChanges => "all_changes",
            Inotify::ThisHostOnly => "this_host_only",
            Inotify::NoEvents => "no_events",
            Inotify::Unavailable(_) => "unavailable",
        }
    }
}

/// The mount that holds the directory, from `/proc/self/mountinfo`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mount {
    /// The type as mounted (`ext4`, `tmpfs`, `fuse.sshfs`, `nfs4`…).
    pub fs_type: String,
    pub source: String,
    pub mount_point: String,
}

/// Everything one probe found.
#[derive(Clone, Debug)]
pub struct Probe {
    /// `st_dev` of the directory: the key of the per-filesystem memory.
    pub dev: u64,
    /// `statfs` `f_type`.
    pub magic: u64,
    /// The name `statfs` alone gives (`ext2/ext3/ext4` for 0xEF53).
    pub statfs_name: &'static str,
    pub mount: Option<Mount>,
    pub class: Class,
    pub rename_noreplace: Tried,
    pub rename_exchange: Tried,
    pub flock: Tried,
    pub inotify: Inotify,
    /// The scratch directory could not be removed again (its path).
    pub leftover: Option<PathBuf>,
}

impl Probe {
    /// Teaches `caps` what this probe found: a refusal is remembered, a
    /// success forgets one. A try that failed for another reason says
    /// nothing.
    pub fn teach(&self, caps: &caps::Caps) {
        for (flag, tried) in [
            (caps::Flag::NoReplace, self.rename_noreplace),
            (caps::Flag::Exchange, self.rename_exchange),
        ] {
            match tried {
                Tried::Works => caps.learned(self.dev, flag, true),
                // A flag that "worked" without doing its job is no better
                // than a refused one: the fallback is the safe path.
                Tried::Refused(_) | Tried::Broken => caps.learned(self.dev, flag, false),
                Tried::Failed(_) => {}
            }
        }
    }

    /// The filesystem's name: the mounted type when known (it tells ext4
    /// from ext2 and names FUSE subtypes), else the `statfs` one.
    pub fn fs_name(&self) -> &str {
        self.mount
            .as_ref()
            .map_or(self.statfs_name, |mount| mount.fs_type.as_str())
    }
}

/// Why a directory could not be probed: the stable `code`, and the errno.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProbeError {
    /// The directory does not exist.
    NotFound,
    /// The path (or a component of it) is not a directory.
    NotADirectory,
    /// No permission to look at it or to create the scratch directory.
    NotWritable(Errno),
    /// The filesystem is mounted read-only: no lock can be made there.
    ReadOnly,
    /// No space or inodes left for the scratch directory.
    NoSpace(Errno),
    /// The directory exists but takes no new entries (a virtual
    /// filesystem such as `/proc`).
    NoNewEntries(Errno),
    /// Anything else (the errno).
    Io(Errno),
}

impl ProbeError {
    pub fn code(self) -> &'static str {
        match self {
            ProbeError::NotFound => "not_found",
            ProbeError::NotADirectory => "not_a_directory",
            ProbeError::NotWritable(_) => "not_writable",
            ProbeError::ReadOnly => "read_only",
            ProbeError::NoSpace(_) => "no_space",
            ProbeError::NoNewEntries(_) => "no_new_entries",
            ProbeError::Io(_) => "io_error",
        }
    }

    pub fn errno(self) -> Errno {
        match self {
            ProbeError::NotFound => Errno::NOENT,
            ProbeError::NotADirectory => Errno::NOTDIR,
            ProbeError::ReadOnly => Errno::ROFS,
            ProbeError::NotWritable(errno)
            | ProbeError::NoSpace(errno)
            | ProbeError::NoNewEntries(errno)
            | ProbeError::Io(errno) => errno,
        }
    }

    fn of(errno: Errno) -> ProbeError {
        match errno {
            Errno::NOENT => ProbeError::NotFound,
            Errno::NOTDIR => ProbeError::NotADirectory,
            Errno::ACCESS | Errno::PERM => ProbeError::NotWritable(errno),
            Errno::ROFS => ProbeError::ReadOnly,
            Errno::NOSPC | Errno::DQUOT => ProbeError::NoSpace(errno),
            other => ProbeError::Io(other),
        }
    }
}

/// The prefix of scratch directory names.
pub const SCRATCH_PREFIX: &str = ".exactlock-doctor";

/// Probes the filesystem under `dir` (a directory; symlinks to one are
/// followed, as a user naming it means the place it points to). Creates
/// and removes a scratch directory in it. What it finds about the renames
/// is remembered for the lock ([`Probe::teach`]).
pub fn probe(dir: &Path) -> Result<Probe, ProbeError> {
    let fd = fs::open(
        dir,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(ProbeError::of)?;
    let stat = fs::fstat(&fd).map_err(ProbeError::of)?;
    let dev = fsx::dev_of(&stat);
    let (magic, statfs_name, read_only) = statfs_of(fd.as_fd()).map_err(ProbeError::of)?;
    if read_only {
        return Err(ProbeError::ReadOnly);
    }
    let mount = mount_of(fd.as_fd(), dev);
    let class = classify(magic, mount.as_ref().map(|m| m.fs_type.as_str()));

    let scratch_name = format!(
        "{SCRATCH_PREFIX}.{}.{}",
        crate::sys::unique::own_pid(),
        crate::sys::unique::fresh_uuid().hyphenated()
    );
    fs::mkdirat(&fd, scratch_name.as_str(), Mode::from_raw_mode(0o700)).map_err(|errno| {
        match errno {
            // The directory was just opened: it exists, it refuses entries.
            Errno::NOENT | Errno::NOTSUP => ProbeError::NoNewEntries(errno),
            other => ProbeError::of(other),
        }
    })?;
    let scratch_path = dir.join(&scratch_name);
    let tries = fsx::open_child_dir(fd.as_fd(), OsStr::new(&scratch_name))
        .map(|scratch| try_calls(scratch.as_fd(), &scratch_path, class));
    let removed = remove_scratch(fd.as_fd(), &scratch_name);
    let (rename_noreplace, rename_exchange, flock, inotify) = tries.map_err(ProbeError::of)?;
    let probe = Probe {
        dev,
        magic,
        statfs_name,
        mount,
        class,
        rename_noreplace,
        rename_exchange,
        flock,
        inotify,
        leftover: (!removed).then_some(scratch_path),
    };
    probe.teach(caps::global());
    Ok(probe)
}

/// Runs every try inside the (empty, private) scratch directory.
fn try_calls(
    scratch: BorrowedFd<'_>,
    scratch_path: &Path,
    class: Class,
) -> (Tried, Tried, Tried, Inotify) {
    let (noreplace, exchange) = try_renames(scratch);
    (
        noreplace,
        exchange,
        try_flock(scratch),
        try_inotify(scratch, scratch_path, class),
    )
}

/// The no-replace rename, then the exchange, on two directories `a` and
/// `b` made for the purpose.
fn try_renames(scratch: BorrowedFd<'_>) -> (Tried, Tried) {
    let dir_mode = Mode::from_raw_mode(0o700);
    for name in ["a", "b"] {
        if let Err(errno) = fs::mkdirat(scratch, name, dir_mode) {
            return (Tried::Failed(errno), Tried::Failed(errno));
        }
    }
    // NOREPLACE must move `a` to the free name `c`, and must refuse to move
    // `c` onto `b` (an empty directory, which a plain rename replaces).
    let noreplace = match fs::renameat_with(scratch, "a", scratch, "c", RenameFlags::NOREPLACE) {
        Ok(()) => match fs::renameat_with(scratch, "c", scratch, "b", RenameFlags::NOREPLACE) {
            Err(Errno::EXIST) | Err(Errno::NOTEMPTY) => Tried::Works,
            Ok(()) => Tried::Broken,
            Err(errno) => Tried::Failed(errno),
        },
        Err(errno @ (Errno::INVAL | Errno::NOSYS | Errno::NOTSUP)) => Tried::Refused(errno),
        Err(errno) => Tried::Failed(errno),
    };
    // Whichever names are left (`c` and `b`, or `a` and `b` if nothing
    // moved, or only `b` if the broken rename replaced it), exchange two.
    let first = ["c", "a"]
        .into_iter()
        .find(|name| fsx::stat_nofollow(scratch, OsStr::new(name)).is_ok());
    let exchange = match first {
        Some(first) => try_exchange(scratch, first, "b"),
        None => Tried::Failed(Errno::NOENT),
    };
    (noreplace, exchange)
}

/// Exchanges `first` and `second` and checks that their inodes swapped.
fn try_exchange(scratch: BorrowedFd<'_>, first: &str, second: &str) -> Tried {
    let ino = |name: &str| fsx::stat_nofollow(scratch, OsStr::new(name)).map(|s| fsx::ino_of(&s));
    let (Ok(before_first), Ok(before_second)) = (ino(first), ino(second)) else {
        return Tried::Failed(Errno::NOENT);
    };
    match fs::renameat_with(scratch, first, scratch, second, RenameFlags::EXCHANGE) {
        Ok(()) => match (ino(first), ino(second)) {
            (Ok(now_first), Ok(now_second))
                if now_first == before_second && now_second == before_first =>
            {
                Tried::Works
            }
            _ => Tried::Broken,
        },
        Err(errno @ (Errno::INVAL | Errno::NOSYS | Errno::NOTSUP)) => Tried::Refused(errno),
        Err(errno) => Tried::Failed(errno),
    }
}

/// An exclusive `flock` on one open of a file, then on a second open of
/// it (a second open file description, as another process would have):
/// the second must be refused.
fn try_flock(scratch: BorrowedFd<'_>) -> Tried {
    let open = || {
        fs::openat(
            scratch,
            "flock",
            OFlags::RDWR | OFlags::CREATE | OFlags::CLOEXEC | OFlags::NOFOLLOW,
            Mode::from_raw_mode(0o600),
        )
    };
    let (first, second) = match (open(), open()) {
        (Ok(first), Ok(second)) => (first, second),
        (Err(errno), _) | (_, Err(errno)) => return Tried::Failed(errno),
    };
    match fs::flock(&first, FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => {}
        Err(errno) if is_flock_unsupported(errno) || errno == Errno::NOSYS => {
            return Tried::Refused(errno);
        }
        Err(errno) => return Tried::Failed(errno),
    }
    match fs::flock(&second, FlockOperation::NonBlockingLockExclusive) {
        Err(Errno::WOULDBLOCK) => Tried::Works,
        Ok(()) => Tried::Broken,
        Err(errno) => Tried::Failed(errno),
    }
}

/// Watches the scratch directory, creates a file in it, and reads the
/// event back. Only this host's change can be made here; what other hosts
/// would see follows from the class.
#[cfg(target_os = "linux")]
fn try_inotify(scratch: BorrowedFd<'_>, scratch_path: &Path, class: Class) -> Inotify {
    use crate::sys::os::fs::inotify::{self, CreateFlags, Reader, WatchFlags};
    use std::mem::MaybeUninit;
    let instance = match inotify::init(CreateFlags::NONBLOCK | CreateFlags::CLOEXEC) {
        Ok(fd) => fd,
        Err(errno) => return Inotify::Unavailable(Some(errno)),
    };
    if let Err(errno) = inotify::add_watch(&instance, scratch_path, WatchFlags::CREATE) {
        return Inotify::Unavailable(Some(errno));
    }
    if let Err(errno) = fs::openat(
        scratch,
        "inotify",
        OFlags::WRONLY | OFlags::CREATE | OFlags::CLOEXEC | OFlags::NOFOLLOW,
        Mode::from_raw_mode(0o600),
    ) {
        return Inotify::Unavailable(Some(errno));
    }
    let mut buffer = [MaybeUninit::<u8>::uninit(); 1024];
    let mut reader = Reader::new(&instance, &mut buffer);
    let saw = loop {
        match reader.next() {
            Ok(event) => {
                if event
                    .file_name()
                    .is_some_and(|name| name.to_bytes() == b"inotify")
                {
                    break true;
                }
            }
            Err(Errno::INTR) => {}
            Err(_) => break false,
        }
    };
    match (saw, class) {
        (false, _) => Inotify::NoEvents,
        (true, Class::Local) => Inotify::AllChanges,
        (true, _) => Inotify::ThisHostOnly,
    }
}

#[cfg(not(target_os = "linux"))]
fn try_inotify(_scratch: BorrowedFd<'_>, _scratch_path: &Path, _class: Class) -> Inotify {
    Inotify::Unavailable(None)
}

/// Removes the scratch directory: it holds only what the tries made (files
/// and empty directories, one level). `false` if something stayed.
fn remove_scratch(parent: BorrowedFd<'_>, name: &str) -> bool {
    if let Ok(scratch) = fsx::open_child_dir(parent, OsStr::new(name)) {
        remove_entries(&scratch);
    }
    fs::unlinkat(parent, name, AtFlags::REMOVEDIR).is_ok()
}

fn remove_entries(scratch: &OwnedFd) {
    for name in ["a", "b", "c"] {
        let _ = fs::unlinkat(scratch, name, AtFlags::REMOVEDIR);
    }
    for name in ["flock", "inotify"] {
        let _ = fs::unlinkat(scratch, name, AtFlags::empty());
    }
}

// The probe's tests read Linux's `statfs` magics, `/dev/shm` and
// `/proc/self/mountinfo`.
#[cfg(all(test, target_os = "linux"))]
mod tests;
