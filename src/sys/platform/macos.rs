//! macOS: the kernel's process info (`proc_pidinfo(PROC_PIDTBSDINFO)`) for
//! liveness, zombies and start times; `sysctl` for the boot; one `kqueue`
//! per waiter (`EVFILT_VNODE` on the lock's parent, `EVFILT_PROC`
//! `NOTE_EXIT` on the holder, `EVFILT_READ` on the wake pipe) for
//! wake-ups; `renameatx_np` (`RENAME_EXCL`, `RENAME_SWAP`) comes through
//! [`super::rename_with`] (rustix maps the flags). No `openat2` and no
//! `O_PATH`: no-follow opens walk `O_NOFOLLOW | O_DIRECTORY` components
//! (`crate::fs::fsx`), as under the portable mechanisms.
//!
//! Cross-compiled and linked on the Linux machines this project is built
//! on (`-Zbuild-std` and zig; `cargo clippy` is clean for both darwin
//! triples), never run there: what here is checked against Apple's headers
//! and man pages is said where it is used. See the README's "Platforms"
//! section for what is and is not verified.

use std::ffi::{CStr, OsStr, OsString};
use std::mem::MaybeUninit;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rustix::event::kqueue::{
    Event, EventFilter, EventFlags, ProcessEvents, VnodeEvents, kevent, kqueue,
};
use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::fs::{AtFlags, Dev, OFlags};
use rustix::io::Errno;
use rustix::process::Pid;

use super::{OwnStart, ProcMissing, portable};
use crate::sys::process::{Probe, valid_pid};
use crate::sys::wait::{HolderExit, Wake, WakeFd, Woken};

/// A thread's id for [`cpu_wait`]: macOS keeps no account of it that is
/// cheap to read, so there is none to name.
pub fn this_thread() -> i32 {
    0
}

/// macOS: no per-thread account of time spent waiting for a CPU; a stuck
/// attempt is then judged by wall time alone.
pub fn cpu_wait(_tid: i32) -> Option<super::CpuWait> {
    None
}

/// What [`super::name`] says of these mechanisms.
pub const NAME: &str = "macos";

/// What wakes a head for its lock's name, and for its holder's exit (as
/// `NODE_DEBUG=exactlock` says).
pub const NAME_EVENTS: &str = "kqueue EVFILT_VNODE, ";
pub const HOLDER_EVENTS: &str = "kqueue EVFILT_PROC, ";

/// macOS has no pid namespaces: a record without one is complete.
pub const HAS_PID_NAMESPACES: bool = false;

/// Whether the OS names its boot (a record of an earlier boot is told by
/// it): `kern.bootsessionuuid`.
pub const HAS_BOOT_ID: bool = true;

/// Whether a record's `start_time` written here is an incarnation
/// (`windows:<FILETIME>`) rather than `ps -o lstart`'s text: not here.
pub const START_TIME_IS_INCARNATION: bool = false;

/// The most decimal digits a pid can have: the kernel's `PID_MAX` is
/// 99999.
pub const PID_MAX_DIGITS: usize = 5;

/// Upstream's macOS `process_incarnation` is not known byte for byte, so
/// none is written: the start travels as `start_ticks` (microseconds).
pub const INCARNATION_PREFIX: Option<&str> = None;

/// No `O_PATH` on macOS.
pub const PATH_ONLY: Option<OFlags> = None;

/// No single-call no-follow resolution: the caller walks.
pub fn open_nofollow(_path: &Path, _flags: OFlags) -> Option<Result<OwnedFd, Errno>> {
    None
}

/// No open resolved from the kernel's caches alone: no inline fast path.
pub fn open_dir_cached(_path: &Path) -> Option<Result<OwnedFd, Errno>> {
    None
}

pub fn can_open_cached() -> bool {
    false
}

/// A device number as [`super::dev_of`] carries it. macOS's `dev_t` is a
/// signed 32-bit number (major in the top byte, so a major from 128 up
/// reads negative); libuv assigns it to a `uint64_t`, which sign-extends,
/// and the same widening here keeps the number equal to Node's
/// `fs.Stats.dev` (bigint) and distinct for distinct devices.
pub fn dev_number(dev: Dev) -> u64 {
    i64::from(dev).cast_unsigned()
}

// ---------------------------------------------------------------- processes

/// `proc_pidinfo`'s `arg` for `PROC_PIDTBSDINFO`: non-zero finds zombies too.
const FIND_ZOMBIES: u64 = 1;

/// `proc_pidinfo(pid, PROC_PIDTBSDINFO, 1)`: the BSD part of a process,
/// zombies included. The kernel looks zombies up for this flavor only
/// when `arg` is non-zero (XNU `bsd/kern/proc_info.c`: `if (arg) findzomb
/// = 1`); with 0 a zombie is ESRCH, and `kill(pid, 0)` would then read it
/// as alive.
#[allow(unsafe_code)]
fn bsd_info(pid: u32) -> Result<libc::proc_bsdinfo, Errno> {
    let pid = valid_pid(pid).ok_or(Errno::SRCH)?.as_raw_nonzero().get();
    // SAFETY: `proc_bsdinfo` is a plain C struct of integers and `c_char`
    // arrays, for which all-zero bytes are a valid value.
    let mut info: libc::proc_bsdinfo = unsafe { std::mem::zeroed() };
    let size = libc::c_int::try_from(std::mem::size_of::<libc::proc_bsdinfo>())
        .map_err(|_| Errno::INVAL)?;
    // SAFETY: `buffer` points to `info`, a live, writable, properly aligned
    // `proc_bsdinfo` of exactly `size` bytes, and the kernel writes at most
    // `buffersize` bytes into it; nothing else aliases `info` meanwhile.
    let written = unsafe {
        libc::proc_pidinfo(
            pid,
            libc::PROC_PIDTBSDINFO,
            FIND_ZOMBIES,
            (&raw mut info).cast::<libc::c_void>(),
            size,
        )
    };
    if written == size {
        Ok(info)
    } else if written <= 0 {
        Err(last_errno())
    } else {
        // A short answer is not the struct we asked for.
        Err(Errno::IO)
    }
}

fn last_errno() -> Errno {
    Errno::from_io_error(&std::io::Error::last_os_error()).unwrap_or(Errno::IO)
}

/// A start in microseconds since the epoch: macOS's clock-independent
/// identity of a process (`pbi_start_tvsec`, `pbi_start_tvusec` are set
/// once, at fork, and never move).
fn start_micros(info: &libc::proc_bsdinfo) -> Option<u64> {
    info.pbi_start_tvsec
        .checked_mul(1_000_000)?
        .checked_add(info.pbi_start_tvusec)
}

/// Whether `pid` runs, is a zombie (exited, not reaped: dead) or is gone,
/// and its start. When the process info cannot be had (a sandbox says
/// EPERM), `kill(pid, 0)` decides: ESRCH is proof it is gone; otherwise it
/// lives, without an identity (as Linux's `hidepid`).
pub fn probe(pid: u32) -> Probe {
    match bsd_info(pid) {
        Ok(info) if info.pbi_status == libc::SZOMB => Probe::Exited,
        Ok(info) => Probe::Running {
            start_ticks: start_micros(&info),
        },
        Err(_) => match valid_pid(pid).map(rustix::process::test_kill_process) {
            Some(Err(Errno::SRCH)) => Probe::Gone,
            Some(Ok(()) | Err(Errno::PERM)) => Probe::Running { start_ticks: None },
            _ => Probe::Unknown,
        },
    }
}

/// The start of `pid` in microseconds since the epoch (zombies included).
pub fn start_ticks(pid: u32) -> Option<u64> {
    start_micros(&bsd_info(pid).ok()?)
}

/// The start of `pid` in whole seconds, as macOS `ps -o lstart=` prints
/// it: `strftime("%c")` of `p_starttime.tv_sec`, the same value as
/// `pbi_start_tvsec`.
pub fn start_secs_of(pid: u32) -> Option<u64> {
    Some(bsd_info(pid).ok()?.pbi_start_tvsec)
}

/// The wall-clock second of a start given in microseconds.
pub fn start_secs(start_micros: u64) -> Option<u64> {
    Some(start_micros / 1_000_000)
}

/// This process's start. macOS always has the process info, so this never
/// reports [`ProcMissing`]; a failed read is an unknown start.
pub fn own_start() -> Result<OwnStart, ProcMissing> {
    let me = rustix::process::getpid()
        .as_raw_nonzero()
        .get()
        .unsigned_abs();
    Ok(match bsd_info(me) {
        Ok(info) => OwnStart {
            start_secs: Some(info.pbi_start_tvsec),
            start_ticks: start_micros(&info),
        },
        Err(_) => OwnStart::default(),
    })
}

/// `sysctlbyname(name)` into `value`; the number of bytes the kernel wrote.
#[allow(unsafe_code)]
fn sysctl_into<T>(name: &CStr, value: &mut T) -> Option<usize> {
    let mut len = std::mem::size_of::<T>();
    // SAFETY: `name` is a NUL-terminated string; `oldp` points to `value`,
    // a live, writable `T` of `len` bytes, and the kernel writes at most
    // `*oldlenp` bytes there and stores the count in `len`; no new value is
    // set (`newp` null, `newlen` 0). `T` is only ever a C integer struct or
    // a byte array, for which any bytes the kernel writes are valid.
    let status = unsafe {
        libc::sysctlbyname(
            name.as_ptr(),
            (value as *mut T).cast::<libc::c_void>(),
            &raw mut len,
            std::ptr::null_mut(),
            0,
        )
    };
    (status == 0).then_some(len)
}

/// This boot's start on the wall clock (`kern.boottime`), whole seconds.
pub fn boot_secs() -> Option<u64> {
    let mut boottime = libc::timeval {
        tv_sec: 0,
        tv_usec: 0,
    };
    let len = sysctl_into(c"kern.boottime", &mut boottime)?;
    if len != std::mem::size_of::<libc::timeval>() {
        return None;
    }
    u64::try_from(boottime.tv_sec).ok()
}

/// The boot session UUID (`kern.bootsessionuuid`), new at every boot.
pub fn boot_id() -> Option<String> {
    let mut bytes = [0u8; 64];
    let len = sysctl_into(c"kern.bootsessionuuid", &mut bytes)?;
    let text = CStr::from_bytes_until_nul(&bytes[..len.min(bytes.len())])
        .ok()?
        .to_str()
        .ok()?;
    uuid::Uuid::parse_str(text).ok()?;
    Some(text.to_string())
}

/// No pid namespaces on macOS.
pub fn pid_ns() -> Option<u64> {
    None
}

/// Now on `process.hrtime.bigint()`'s clock, in nanoseconds. libuv reads
/// `mach_continuous_time()` on macOS (it counts through sleep), which is
/// `CLOCK_MONOTONIC_RAW` (clock_gettime(3)); rustix names no such clock on
/// Apple systems, so libc's `clock_gettime` reads it.
#[allow(unsafe_code)]
pub fn hrtime_ns() -> i128 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `tp` points to `now`, a live, writable, properly aligned
    // `timespec` that nothing else aliases during the call, which writes
    // only that struct. The only failure is EINVAL for a clock the system
    // lacks (`CLOCK_MONOTONIC_RAW` exists from macOS 10.12; the oldest
    // built for is 10.13), which leaves `now` zero: a wrong reading for a
    // test seam, not unsoundness.
    let _ = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_RAW, &raw mut now) };
    i128::from(now.tv_sec) * 1_000_000_000 + i128::from(now.tv_nsec)
}

// ---------------------------------------------------------------- waiting

/// Registers `changes` on `queue` without reading events: with no room for
/// events, a change the kernel refuses fails the call with its errno.
#[allow(unsafe_code)]
fn register(queue: BorrowedFd<'_>, changes: &[Event]) -> Result<(), Errno> {
    let mut none: [MaybeUninit<Event>; 0] = [];
    // SAFETY: rustix asks that descriptors named by registered events stay
    // valid while the queue lives. Every `EVFILT_VNODE` descriptor is owned
    // by the same struct as the queue and declared after it, so it is
    // closed after the queue; an `EVFILT_READ` descriptor (a wake pipe) may
    // close first, and closing a descriptor removes its registrations
    // (kqueue(2)), so the queue never refers to a reused number. Idents
    // coming back from the kernel are only compared, never used as
    // descriptors. `EVFILT_PROC` names a pid, not a descriptor.
    unsafe { kevent(queue, changes, &mut none, Some(Duration::ZERO)) }.map(|_| ())
}

/// Reads up to 8 events, waiting at most `timeout`.
#[allow(unsafe_code)]
fn next_events(queue: BorrowedFd<'_>, timeout: Duration) -> Result<Vec<Event>, Errno> {
    let mut buffer = [MaybeUninit::<Event>::uninit(); 8];
    // SAFETY: as in `register`: no change is made here, and the events
    // read are plain values.
    let (ready, _) = unsafe { kevent(queue, &[], &mut buffer, Some(timeout)) }?;
    Ok(ready.to_vec())
}

/// What about a directory wakes a waiter: its entries changing (a name
/// added, removed or renamed writes the directory), and the directory
/// itself deleted, renamed or revoked.
fn dir_flags() -> VnodeEvents {
    VnodeEvents::WRITE | VnodeEvents::DELETE | VnodeEvents::RENAME | VnodeEvents::REVOKE
}

fn vnode(fd: BorrowedFd<'_>, flags: VnodeEvents) -> Event {
    Event::new(
        EventFilter::Vnode {
            vnode: fd.as_raw_fd(),
            flags,
        },
        // EV_CLEAR: reported once per batch of changes, not forever after.
        EventFlags::ADD | EventFlags::CLEAR,
        std::ptr::null_mut(),
    )
}

/// A kqueue watching one directory, for one name in it going away, owned
/// by one head waiter. `EVFILT_VNODE` says only that the directory's
/// entries changed, not which: the name's identity (device, inode) is
/// compared with the last one seen, so neighbours' files cost a wake-up of
/// this thread, never an attempt (inotify's name filter, by other means).
pub struct NameWatch {
    // Declared before `dir`: the queue is closed first (see `register`).
    queue: OwnedFd,
    dir: OwnedFd,
    name: OsString,
    seen: Mutex<Option<(u64, u64)>>,
}

impl NameWatch {
    pub fn new(dir: BorrowedFd<'_>, name: &OsStr) -> Option<NameWatch> {
        let dir = rustix::io::fcntl_dupfd_cloexec(dir, 0).ok()?;
        let queue = kqueue().ok()?;
        register(queue.as_fd(), &[vnode(dir.as_fd(), dir_flags())]).ok()?;
        let seen = identity_of(dir.as_fd(), name);
        Some(NameWatch {
            queue,
            dir,
            name: name.to_os_string(),
            seen: Mutex::new(seen),
        })
    }

    /// Whether a vnode event with `flags` concerns the name (or the
    /// directory itself).
    fn concerns_us(&self, flags: VnodeEvents) -> bool {
        if flags.intersects(VnodeEvents::DELETE | VnodeEvents::RENAME | VnodeEvents::REVOKE) {
            return true;
        }
        let now = identity_of(self.dir.as_fd(), &self.name);
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        let changed = *seen != now;
        *seen = now;
        changed
    }

    /// Reads what is queued (without waiting): whether any of it concerns
    /// the name or the directory.
    pub fn relevant_events(&self) -> bool {
        let mut relevant = false;
        while let Ok(events) = next_events(self.queue.as_fd(), Duration::ZERO) {
            if events.is_empty() {
                break;
            }
            for event in events {
                if let EventFilter::Vnode { flags, .. } = event.filter() {
                    relevant |= self.concerns_us(flags);
                }
            }
        }
        relevant
    }
}

fn identity_of(dir: BorrowedFd<'_>, name: &OsStr) -> Option<(u64, u64)> {
    let stat = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW).ok()?;
    Some((super::dev_of(&stat), super::ino_of(&stat)))
}

/// The holder's pid, watched with `EVFILT_PROC` `NOTE_EXIT` while a head
/// sleeps.
pub type HolderWatch = Pid;

/// The holder's pid to watch; `AlreadyGone` when `kill(pid, 0)` says it is.
pub fn holder_exit(pid: u32) -> HolderExit {
    let Some(raw) = valid_pid(pid) else {
        return HolderExit::Unwatched;
    };
    match rustix::process::test_kill_process(raw) {
        Err(Errno::SRCH) => HolderExit::AlreadyGone,
        _ => HolderExit::Watch(raw),
    }
}

/// The wake descriptor: a pipe (macOS has no eventfd).
pub fn wake_fd() -> Option<WakeFd> {
    portable::wake_fd()
}

/// Sleeps until the watched name (or its directory) changes, the holder
/// exits, `wake` is signalled, or `timeout` passes. One kqueue carries all
/// three: the watch's own (its vnode registration persists, so a change
/// between the attempt's look and this sleep is waiting in it), or a fresh
/// one when there is no watch.
pub fn sleep(
    watch: Option<&NameWatch>,
    holder: Option<&HolderWatch>,
    wake: &Wake,
    timeout: Duration,
) -> Woken {
    let fresh;
    let queue = match watch {
        Some(watch) => watch.queue.as_fd(),
        None => match kqueue() {
            Ok(queue) => {
                fresh = queue;
                fresh.as_fd()
            }
            Err(_) => return portable::sleep(wake, timeout),
        },
    };
    let woken = sleep_on(queue, watch, holder, wake, timeout);
    // Leave the watch's queue with its vnode registration only.
    if let Some(pid) = holder {
        let _ = register(queue, &[proc_exit(*pid, EventFlags::DELETE)]);
    }
    if let Some(fd) = wake.pollable() {
        let _ = register(queue, &[read(fd, EventFlags::DELETE)]);
    }
    wake.drain();
    // A name event that came after the wait timed out is read here: it is
    // not thrown away (a synchronous waiter sleeps again after a timed-out
    // slice, and would miss the release until its next look).
    if let Some(watch) = watch
        && watch.relevant_events()
        && woken == Woken::Timeout
    {
        return Woken::NameChanged;
    }
    woken
}

fn proc_exit(pid: Pid, flags: EventFlags) -> Event {
    Event::new(
        EventFilter::Proc {
            pid,
            flags: ProcessEvents::EXIT,
        },
        flags,
        std::ptr::null_mut(),
    )
}

fn read(fd: BorrowedFd<'_>, flags: EventFlags) -> Event {
    Event::new(
        EventFilter::Read(fd.as_raw_fd()),
        flags,
        std::ptr::null_mut(),
    )
}

fn sleep_on(
    queue: BorrowedFd<'_>,
    watch: Option<&NameWatch>,
    holder: Option<&HolderWatch>,
    wake: &Wake,
    timeout: Duration,
) -> Woken {
    let deadline = Instant::now() + timeout;
    if let Some(pid) = holder {
        // ESRCH: it exited (or is a zombie) since it was looked at.
        if register(
            queue,
            &[proc_exit(*pid, EventFlags::ADD | EventFlags::ONESHOT)],
        ) == Err(Errno::SRCH)
        {
            return Woken::HolderExited;
        }
    }
    if let Some(fd) = wake.pollable() {
        // Level-triggered: reported while a byte is in the pipe.
        let _ = register(queue, &[read(fd, EventFlags::ADD)]);
    }
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let events = match next_events(queue, left) {
            Err(Errno::INTR) => continue,
            Err(_) => return Woken::Timeout,
            Ok(events) if events.is_empty() => return Woken::Timeout,
            Ok(events) => events,
        };
        let mut name_changed = false;
        let mut signalled = false;
        for event in events {
            match event.filter() {
                EventFilter::Proc { .. } => return Woken::HolderExited,
                EventFilter::Read(_) => signalled = true,
                EventFilter::Vnode { flags, .. } => {
                    name_changed |= watch.is_some_and(|watch| watch.concerns_us(flags));
                }
                _ => {}
            }
        }
        if signalled {
            return Woken::Signalled;
        }
        if name_changed {
            return Woken::NameChanged;
        }
    }
}

/// How often a held lock's watch looks even without an event: kqueue
/// watches directories, not the record's bytes, so a record rewritten in
/// place (not renamed) is seen at the next look.
const HELD_LOOK_EVERY: Duration = Duration::from_secs(1);

/// The events a held lock's watch wakes for: the lock name's entry in the
/// parent changing, and the published directory changing, moving or
/// going.
pub struct HeldEvents {
    // Declared before the directories: closed first (see `register`).
    queue: OwnedFd,
    _parent: OwnedFd,
    _root: OwnedFd,
}

impl HeldEvents {
    pub fn new(parent: BorrowedFd<'_>, root: BorrowedFd<'_>) -> Result<HeldEvents, Errno> {
        let parent = rustix::io::fcntl_dupfd_cloexec(parent, 0)?;
        let root = rustix::io::fcntl_dupfd_cloexec(root, 0)?;
        let queue = kqueue()?;
        register(
            queue.as_fd(),
            &[
                vnode(parent.as_fd(), dir_flags()),
                vnode(
                    root.as_fd(),
                    dir_flags() | VnodeEvents::ATTRIBUTES | VnodeEvents::LINK,
                ),
            ],
        )?;
        Ok(HeldEvents {
            queue,
            _parent: parent,
            _root: root,
        })
    }

    /// Sleeps until an event, `stop`, or [`HELD_LOOK_EVERY`].
    pub fn wait(&self, stop: BorrowedFd<'_>) -> Result<(), Errno> {
        register(self.queue.as_fd(), &[read(stop, EventFlags::ADD)])?;
        match next_events(self.queue.as_fd(), HELD_LOOK_EVERY) {
            Ok(_) | Err(Errno::INTR) => Ok(()),
            Err(errno) => Err(errno),
        }
    }
}
