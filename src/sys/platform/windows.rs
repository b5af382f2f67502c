//! Windows: the process object (`OpenProcess`, `GetProcessTimes`, a wait
//! on its handle) for liveness, exited processes and start times;
//! `ReadDirectoryChangesW` on an overlapped handle for a directory's
//! names; one `WaitForMultipleObjects` over the directory's event, the
//! holder's process handle and the wake event for wake-ups. No `openat2`
//! and no `O_PATH`: no-follow opens are `crate::sys::os`'s handle-relative
//! `NtCreateFile` walk.
//!
//! Cross-compiled on Linux (`x86_64-pc-windows-gnu`, `-Zbuild-std`) and
//! tested under Wine; what Wine does differently from Microsoft's
//! documentation is said where it matters.

use std::ffi::{OsStr, c_void};
use std::os::windows::io::{AsHandle, AsRawHandle, BorrowedHandle, FromRawHandle, OwnedHandle};
use std::path::Path;
use std::ptr::NonNull;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use windows_sys::Win32::Foundation::{
    ERROR_ACCESS_DENIED, ERROR_INVALID_PARAMETER, ERROR_IO_INCOMPLETE, ERROR_IO_PENDING,
    ERROR_OPERATION_ABORTED, FILETIME, GetLastError, HANDLE, INVALID_HANDLE_VALUE, WAIT_FAILED,
    WAIT_OBJECT_0, WAIT_TIMEOUT,
};
use windows_sys::Win32::Storage::FileSystem::{
    FILE_FLAG_BACKUP_SEMANTICS, FILE_FLAG_OVERLAPPED, FILE_LIST_DIRECTORY, FILE_NOTIFY_CHANGE,
    FILE_NOTIFY_CHANGE_ATTRIBUTES, FILE_NOTIFY_CHANGE_CREATION, FILE_NOTIFY_CHANGE_DIR_NAME,
    FILE_NOTIFY_CHANGE_FILE_NAME, FILE_NOTIFY_CHANGE_LAST_WRITE, FILE_NOTIFY_CHANGE_SECURITY,
    FILE_NOTIFY_CHANGE_SIZE, FILE_SHARE_DELETE, FILE_SHARE_READ, FILE_SHARE_WRITE, ReOpenFile,
    ReadDirectoryChangesW,
};
use windows_sys::Win32::System::IO::{CancelIoEx, GetOverlappedResult, OVERLAPPED};
use windows_sys::Win32::System::Performance::{QueryPerformanceCounter, QueryPerformanceFrequency};
use windows_sys::Win32::System::SystemInformation::{GetSystemTimeAsFileTime, GetTickCount64};
use windows_sys::Win32::System::Threading::{
    CreateEventW, GetCurrentProcess, GetProcessId, GetProcessTimes, INFINITE, OpenProcess,
    PROCESS_QUERY_LIMITED_INFORMATION, PROCESS_SYNCHRONIZE, ResetEvent, SetEvent,
    WaitForMultipleObjects, WaitForSingleObject,
};

use super::{CpuWait, OwnStart, ProcMissing};
use crate::sys::os::fs::OFlags;
use crate::sys::os::io::Errno;
use crate::sys::process::Probe;
use crate::sys::wait::{HolderExit, Wake, WakeFd, Woken};

/// A thread's id for [`cpu_wait`]: Windows keeps no per-thread account of
/// time spent waiting for a CPU that is cheap to read, so there is none.
pub fn this_thread() -> i32 {
    0
}

/// No per-thread account of time spent waiting for a CPU; a stuck attempt
/// is then judged by wall time alone (as on macOS).
pub fn cpu_wait(_tid: i32) -> Option<CpuWait> {
    None
}

/// What [`super::name`] says of these mechanisms.
pub const NAME: &str = "windows";

/// What wakes a head for its lock's name, and for its holder's exit (as
/// `NODE_DEBUG=exactlock` says).
pub const NAME_EVENTS: &str = "ReadDirectoryChangesW, ";
pub const HOLDER_EVENTS: &str = "the holder's process handle, ";

/// Windows has no pid namespaces: a record without one is complete.
pub const HAS_PID_NAMESPACES: bool = false;

/// Whether the OS names its boot (a record of an earlier boot is told by
/// it): none is documented; a creation FILETIME is absolute, so a pid of an earlier boot cannot match one anyway.
pub const HAS_BOOT_ID: bool = false;

/// Whether a record's `start_time` written here is an incarnation: the
/// original module writes `windows:<creation FILETIME>` on Windows, so a
/// `start_time` in `ps -o lstart`'s form was written under a unix kernel
/// (WSL2, or a Mac or Linux box sharing the volume).
pub const START_TIME_IS_INCARNATION: bool = true;

/// The most decimal digits a pid can have: a pid is a `DWORD`, at most
/// 4294967295.
pub const PID_MAX_DIGITS: usize = 10;

/// Upstream's Windows `process_incarnation` prefix: the natives'
/// `Process.incarnation` is `windows:<creation FILETIME>` (see
/// [`upstream_start_time`]), so the incarnation of a start read as
/// [`start_ticks`] is this prefix and the ticks in decimal.
pub const INCARNATION_PREFIX: Option<&str> = Some("windows:");

/// No `O_PATH` on Windows: every handle-relative open names its access.
pub const PATH_ONLY: Option<OFlags> = None;

/// No single-call no-follow resolution: the caller walks the path one
/// component at a time from its volume's root (`fsx::open_dir_nofollow`),
/// each opened relative to the last with `NOFOLLOW`.
pub fn open_nofollow(_path: &Path, _flags: OFlags) -> Option<Result<OwnedHandle, Errno>> {
    None
}

/// No open resolved from the kernel's caches alone: no inline fast path.
pub fn open_dir_cached(_path: &Path) -> Option<Result<OwnedHandle, Errno>> {
    None
}

pub fn can_open_cached() -> bool {
    false
}

/// A device number as [`super::dev_of`] carries it: the volume serial
/// number, already widened to `u64` by `crate::sys::os`'s `fstat`, kept as
/// is (Node's `fs.Stats.dev` on Windows is the same serial).
pub fn dev_number(dev: crate::sys::os::fs::Dev) -> u64 {
    dev
}

// ---------------------------------------------------------------- handles

/// Takes ownership of `raw`, a handle a Win32 call has just returned to
/// us, or `None` if the call failed (null, or `INVALID_HANDLE_VALUE` for
/// the file functions).
#[allow(unsafe_code)]
fn owned(raw: HANDLE) -> Option<OwnedHandle> {
    if raw.is_null() || raw == INVALID_HANDLE_VALUE {
        return None;
    }
    // SAFETY: every caller passes the return value of a call that creates a
    // handle (`OpenProcess`, `CreateEventW`, `ReOpenFile`) straight through:
    // it is open, owned by nobody else, and is closed once, by the
    // `OwnedHandle`.
    Some(unsafe { OwnedHandle::from_raw_handle(raw) })
}

/// The calling thread's last Win32 error.
#[allow(unsafe_code)]
fn last_error() -> u32 {
    // SAFETY: reads a thread-local value; no arguments.
    unsafe { GetLastError() }
}

fn last_errno() -> Errno {
    Errno::from_win32(last_error())
}

/// A `WaitFor*` timeout in milliseconds: rounded up, so a wait never ends
/// before `timeout` (a sub-millisecond remainder would otherwise spin), and
/// kept below `INFINITE`.
fn wait_millis(timeout: Duration) -> u32 {
    let millis = timeout.as_nanos().div_ceil(1_000_000);
    u32::try_from(millis).unwrap_or(u32::MAX).min(INFINITE - 1)
}

/// Whether the waitable object `handle` is signalled now, without waiting.
#[allow(unsafe_code)]
fn is_signalled(handle: BorrowedHandle<'_>) -> bool {
    // SAFETY: `handle` is borrowed, so open for the call; a zero timeout
    // only tests its state.
    unsafe { WaitForSingleObject(handle.as_raw_handle(), 0) == WAIT_OBJECT_0 }
}

/// Which of `handles` was signalled first (the lowest index when several
/// are), `Ok(None)` when `timeout` passed, `Err` when the wait failed.
#[allow(unsafe_code)]
fn wait_any(handles: &[HANDLE], timeout: Duration) -> Result<Option<usize>, Errno> {
    let count =
        u32::try_from(handles.len()).map_err(|_| Errno::from_win32(ERROR_INVALID_PARAMETER))?;
    // SAFETY: `handles` points to `count` handle values, every one of them
    // borrowed by the caller from an owner that outlives this call (the
    // watch, the holder's handle, the wake); the call only reads the array.
    let result =
        unsafe { WaitForMultipleObjects(count, handles.as_ptr(), 0, wait_millis(timeout)) };
    match result {
        WAIT_TIMEOUT => Ok(None),
        WAIT_FAILED => Err(last_errno()),
        index if (WAIT_OBJECT_0..WAIT_OBJECT_0 + count).contains(&index) => {
            Ok(Some((index - WAIT_OBJECT_0) as usize))
        }
        // WAIT_ABANDONED_n is for mutexes, of which there are none here.
        _ => Err(Errno::from_win32(ERROR_INVALID_PARAMETER)),
    }
}

// ---------------------------------------------------------------- processes

/// `OpenProcess(access, FALSE, pid)`, or the Win32 error. A handle to a
/// process that has exited still opens while any process holds a handle
/// to its object (Windows' zombie); the caller tells that by waiting on it.
#[allow(unsafe_code)]
fn open_process(pid: u32, access: u32) -> Result<OwnedHandle, u32> {
    // SAFETY: plain values in; the handle returned, if any, is ours.
    let raw = unsafe { OpenProcess(access, 0, pid) };
    let handle = owned(raw).ok_or_else(last_error)?;
    // The kernel ignores a pid's two low bits when it looks one up
    // (process ids are multiples of 4), so pid 4001 opens process 4000;
    // no process has the pid asked for then. 0 is a failed query, not an
    // answer: never taken as proof of absence.
    match process_id(handle.as_handle()) {
        0 => Ok(handle),
        id if id == pid => Ok(handle),
        _ => Err(ERROR_INVALID_PARAMETER),
    }
}

#[allow(unsafe_code)]
fn process_id(process: BorrowedHandle<'_>) -> u32 {
    // SAFETY: `process` is an open process handle, borrowed for the call;
    // every caller opened it with `PROCESS_QUERY_LIMITED_INFORMATION`,
    // the access `GetProcessId` needs (0, a failure, otherwise).
    unsafe { GetProcessId(process.as_raw_handle()) }
}

/// When the process behind `process` was created and, once it has exited,
/// when it exited: `FILETIME`s as numbers, 100 ns intervals since
/// 1601-01-01 UTC. The creation time is set once, when the process object
/// is created, and never moved by a clock step: the incarnation. The exit
/// time is zero while the process runs.
#[derive(Clone, Copy)]
struct Times {
    created: u64,
    exited: u64,
}

/// The creation time of the process behind `process` (see [`Times`]).
fn creation_ticks(process: BorrowedHandle<'_>) -> Option<u64> {
    process_times(process).map(|times| times.created)
}

/// `GetProcessTimes` of `process`; `None` if it cannot be read.
#[allow(unsafe_code)]
fn process_times(process: BorrowedHandle<'_>) -> Option<Times> {
    let zero = FILETIME {
        dwLowDateTime: 0,
        dwHighDateTime: 0,
    };
    let (mut created, mut exited, mut kernel, mut user) = (zero, zero, zero, zero);
    // SAFETY: `process` is an open process handle with
    // `PROCESS_QUERY_LIMITED_INFORMATION` (or the pseudo-handle of this
    // process), borrowed for the call; the four pointers are to live,
    // writable `FILETIME`s that nothing else aliases during it.
    let ok = unsafe {
        GetProcessTimes(
            process.as_raw_handle(),
            &raw mut created,
            &raw mut exited,
            &raw mut kernel,
            &raw mut user,
        )
    };
    let number =
        |time: FILETIME| (u64::from(time.dwHighDateTime) << 32) | u64::from(time.dwLowDateTime);
    let times = Times {
        created: number(created),
        exited: number(exited),
    };
    (ok != 0 && times.created != 0).then_some(times)
}

/// Whether `pid` runs, has exited (its object lingers because someone
/// holds a handle to it: dead), or is gone, and its start.
///
/// - `ERROR_INVALID_PARAMETER`: no process object has this pid: gone.
/// - opened, and the handle is signalled: the process has exited, whatever
///   its exit code (a process may exit with `STILL_ACTIVE`, 259, so the
///   code alone proves nothing).
/// - `ERROR_ACCESS_DENIED` (a protected or another user's process, which
///   denies `SYNCHRONIZE`): it exists; with the query right alone its
///   times are read: an exit time proves it has exited (its object
///   lingers), else it runs. Without even that right it reads as running,
///   which only makes a waiter wait.
pub fn probe(pid: u32) -> Probe {
    if pid == 0 {
        return Probe::Unknown;
    }
    match open_process(pid, PROCESS_QUERY_LIMITED_INFORMATION | PROCESS_SYNCHRONIZE) {
        Ok(process) if is_signalled(process.as_handle()) => Probe::Exited,
        Ok(process) => Probe::Running {
            start_ticks: creation_ticks(process.as_handle()),
        },
        Err(ERROR_INVALID_PARAMETER) => Probe::Gone,
        Err(ERROR_ACCESS_DENIED) => {
            let times = open_process(pid, PROCESS_QUERY_LIMITED_INFORMATION)
                .ok()
                .and_then(|process| process_times(process.as_handle()));
            match times {
                Some(times) if times.exited != 0 => Probe::Exited,
                times => Probe::Running {
                    start_ticks: times.map(|times| times.created),
                },
            }
        }
        Err(_) => Probe::Unknown,
    }
}

/// The start of `pid` as a `FILETIME` (100 ns since 1601), exited
/// processes whose object lingers included.
pub fn start_ticks(pid: u32) -> Option<u64> {
    if pid == 0 {
        return None;
    }
    let process = open_process(pid, PROCESS_QUERY_LIMITED_INFORMATION).ok()?;
    creation_ticks(process.as_handle())
}

/// `FILETIME` ticks per second.
const TICKS_PER_SEC: u64 = 10_000_000;

/// Seconds from 1601-01-01 (the `FILETIME` epoch) to 1970-01-01.
const EPOCH_DIFFERENCE_SECS: u64 = 11_644_473_600;

/// The wall-clock second (Unix) of a start given as a `FILETIME`.
pub fn start_secs(start_ticks: u64) -> Option<u64> {
    (start_ticks / TICKS_PER_SEC).checked_sub(EPOCH_DIFFERENCE_SECS)
}

/// This process's start, from its own pseudo-handle. Windows always has
/// it, so this never reports [`ProcMissing`].
#[allow(unsafe_code)]
pub fn own_start() -> Result<OwnStart, ProcMissing> {
    // SAFETY: no arguments; the pseudo-handle it returns needs no closing
    // and is valid for the life of the process.
    let me = unsafe { GetCurrentProcess() };
    // SAFETY: the current-process pseudo-handle is always open.
    let me = unsafe { BorrowedHandle::borrow_raw(me) };
    let ticks = creation_ticks(me);
    Ok(OwnStart {
        start_secs: ticks.and_then(start_secs),
        start_ticks: ticks,
    })
}

/// The `start_time` the original module writes on Windows for `pid`: the
/// natives' `Process.fromPid(pid)?.incarnation`, `windows:<creation>`,
/// the creation `FILETIME` as one unsigned 64-bit number in decimal (upstream
/// gajae-code `crates/pi-shell/src/process.rs`, `Process::incarnation`).
/// Upstream opens the process with `PROCESS_TERMINATE |
/// PROCESS_QUERY_LIMITED_INFORMATION | SYNCHRONIZE`, so it has `null`
/// (written as `"unknown"`) where only the query right is granted; this
/// reads with the query right alone, and both give the same string
/// whenever both give one.
pub fn upstream_start_time(pid: u32) -> Option<String> {
    let ticks = start_ticks(pid)?;
    INCARNATION_PREFIX.map(|prefix| format!("{prefix}{ticks}"))
}

/// Now on the wall clock as a `FILETIME`.
#[allow(unsafe_code)]
fn now_ticks() -> u64 {
    let mut now = FILETIME {
        dwLowDateTime: 0,
        dwHighDateTime: 0,
    };
    // SAFETY: `now` is a live, writable `FILETIME` the call fills.
    unsafe { GetSystemTimeAsFileTime(&raw mut now) };
    (u64::from(now.dwHighDateTime) << 32) | u64::from(now.dwLowDateTime)
}

/// This boot's start on the wall clock, whole seconds since the Unix
/// epoch: now minus the milliseconds since boot (`GetTickCount64`, which
/// counts through sleep and hibernation). Within about a second: the tick
/// count advances in 10–16 ms steps and is read just after the clock, and
/// the result is truncated; like Linux's `btime` it moves with clock steps.
#[allow(unsafe_code)]
pub fn boot_secs() -> Option<u64> {
    let now = now_ticks();
    // SAFETY: no arguments.
    let up_millis = unsafe { GetTickCount64() };
    let booted = now.checked_sub(up_millis.checked_mul(10_000)?)?;
    start_secs(booted)
}

/// No documented per-boot identifier on Windows: a record's boot is judged
/// by the pid and its start alone.
pub fn boot_id() -> Option<String> {
    None
}

/// No pid namespaces on Windows.
pub fn pid_ns() -> Option<u64> {
    None
}

/// Now on `process.hrtime.bigint()`'s clock, in nanoseconds. Node reads
/// libuv's `uv_hrtime()`, which on Windows (`src/win/util.c`,
/// `uv__hrtime(UV__NANOSEC)`) is `QueryPerformanceCounter` divided by
/// `QueryPerformanceFrequency / 1e9` in `double`s, truncated to `uint64_t`:
/// the same arithmetic here gives the same number, rounding included.
#[allow(unsafe_code)]
pub fn hrtime_ns() -> i128 {
    let (mut counter, mut frequency) = (0i64, 0i64);
    // SAFETY: each pointer is to a live, writable `i64` the call fills;
    // both calls always succeed from Windows XP on.
    unsafe {
        QueryPerformanceFrequency(&raw mut frequency);
        QueryPerformanceCounter(&raw mut counter);
    }
    if frequency <= 0 {
        return 0;
    }
    let scaled_frequency = frequency as f64 / 1e9;
    i128::from((counter as f64 / scaled_frequency) as u64)
}

// ---------------------------------------------------------------- events

/// A manual-reset event, not signalled: set while a signal is pending.
#[allow(unsafe_code)]
fn manual_reset_event() -> Option<OwnedHandle> {
    // SAFETY: null security attributes and name are allowed (a private,
    // unnamed event); the handle returned, if any, is ours.
    owned(unsafe { CreateEventW(std::ptr::null(), 1, 0, std::ptr::null()) })
}

/// The wake descriptor: a manual-reset event (`Wake::signal` sets it,
/// `Wake::drain` resets it).
pub fn wake_fd() -> Option<WakeFd> {
    manual_reset_event().map(WakeFd::Event)
}

/// Signals the event `event` (`Wake::signal`).
#[allow(unsafe_code)]
pub fn set_event(event: BorrowedHandle<'_>) {
    // SAFETY: `event` is an open event handle, borrowed for the call.
    unsafe { SetEvent(event.as_raw_handle()) };
}

/// Clears the event `event` (`Wake::drain`).
#[allow(unsafe_code)]
pub fn reset_event(event: BorrowedHandle<'_>) {
    // SAFETY: `event` is an open event handle, borrowed for the call.
    unsafe { ResetEvent(event.as_raw_handle()) };
}

/// Whether the event `event` is set (`Wake::is_signalled`).
pub fn event_is_set(event: BorrowedHandle<'_>) -> bool {
    is_signalled(event)
}

/// The held-lock watch without kernel events: sleeps until `stop` is set
/// or `every` passes.
pub fn held_wait(stop: BorrowedHandle<'_>, every: Duration) -> Result<(), Errno> {
    wait_any(&[stop.as_raw_handle()], every).map(|_| ())
}

// ---------------------------------------------------------------- directory changes

/// Bytes for one batch of `FILE_NOTIFY_INFORMATION` records. Local
/// volumes accept any size; a batch that does not fit is reported as an
/// overflow (zero bytes), which a watch treats as "something changed".
const NOTIFY_BYTES: usize = NOTIFY_BYTES_U32 as usize;
const NOTIFY_BYTES_U32: u32 = 8 * 1024;

/// The buffer `ReadDirectoryChangesW` fills: it must be `DWORD`-aligned,
/// and every record in it starts on a `DWORD` boundary.
#[repr(C, align(8))]
struct NotifyBuffer([u8; NOTIFY_BYTES]);

/// What the kernel writes to while a read is pending: both must stay at
/// one address until the read completes or is cancelled and waited for.
#[repr(C)]
struct PendingRead {
    overlapped: OVERLAPPED,
    buffer: NotifyBuffer,
}

/// What a completed read said.
enum Batch {
    /// Changes to these names (as the directory spells them).
    Names(Vec<String>),
    /// More changes than the buffer held, or the directory itself went
    /// (deleted, its volume dismounted): anything may have changed.
    Overflow,
    /// Cancelled (the thread that issued the read exited): nothing.
    Cancelled,
}

/// One directory's name changes, read asynchronously: a handle to the
/// directory opened for overlapped I/O, one pending `ReadDirectoryChangesW`
/// and the event it sets when it completes.
struct DirChanges {
    dir: OwnedHandle,
    /// Set when the pending read completes (and reset when the next one is
    /// issued).
    event: OwnedHandle,
    filter: FILE_NOTIFY_CHANGE,
    /// Allocated with `Box`; owned here. No Rust reference to it exists
    /// while a read is pending: the kernel writes to it then.
    read: NonNull<PendingRead>,
    /// Whether a read is pending (else the directory can no longer be
    /// watched: `event` is never set again).
    armed: bool,
}

// SAFETY: `DirChanges` owns its handles and its `PendingRead` outright (no
// other pointer to it escapes but the one lent to the kernel for the
// pending read), so moving it to another thread moves sole ownership. An
// overlapped read is not bound to a thread for completion or cancellation
// (`CancelIoEx` and `GetOverlappedResult` work from any thread); if the
// issuing thread exits, Windows cancels the read, which completes with
// `ERROR_OPERATION_ABORTED` and is re-issued (`Batch::Cancelled`).
#[allow(unsafe_code)]
unsafe impl Send for DirChanges {}

impl DirChanges {
    /// Watches the directory `dir` for `filter` changes: reopens it for
    /// listing with overlapped I/O (the crate's directory handles are
    /// synchronous, and may lack `FILE_LIST_DIRECTORY`), sharing
    /// everything so the watch never blocks a rename or a delete.
    fn new(dir: BorrowedHandle<'_>, filter: FILE_NOTIFY_CHANGE) -> Result<DirChanges, Errno> {
        let dir = reopen_for_changes(dir)?;
        let event = manual_reset_event().ok_or_else(last_errno)?;
        let read = NonNull::from(Box::leak(Box::new(PendingRead {
            overlapped: OVERLAPPED::default(),
            buffer: NotifyBuffer([0; NOTIFY_BYTES]),
        })));
        let mut changes = DirChanges {
            dir,
            event,
            filter,
            read,
            armed: false,
        };
        changes.arm()?;
        Ok(changes)
    }

    /// Issues the next read. Its event is reset by the call and set when
    /// changes arrive.
    #[allow(unsafe_code)]
    fn arm(&mut self) -> Result<(), Errno> {
        debug_assert!(!self.armed);
        let read = self.read.as_ptr();
        // SAFETY: no read is pending (`armed` is false), so nothing but this
        // function touches `*read`; the write goes through the raw pointer,
        // creating no reference that outlives it.
        unsafe {
            (*read).overlapped = OVERLAPPED {
                hEvent: self.event.as_raw_handle(),
                ..OVERLAPPED::default()
            };
        }
        // SAFETY: `self.dir` is an open directory handle with
        // `FILE_LIST_DIRECTORY`, opened for overlapped I/O. The buffer and
        // the OVERLAPPED are in the `PendingRead` this struct owns, at a
        // fixed heap address that is freed only in `Drop`, after the read
        // is cancelled and waited for; `NOTIFY_BYTES` is the buffer's size
        // and it is 8-byte aligned (`DWORD` alignment required). The event
        // in the OVERLAPPED is owned by `self` and outlives the read for
        // the same reason. No completion routine; the byte count is not
        // asked for (it is meaningless for overlapped calls).
        let ok = unsafe {
            ReadDirectoryChangesW(
                self.dir.as_raw_handle(),
                (&raw mut (*read).buffer).cast::<c_void>(),
                NOTIFY_BYTES_U32,
                0,
                self.filter,
                std::ptr::null_mut(),
                &raw mut (*read).overlapped,
                None,
            )
        };
        if ok == 0 && last_error() != ERROR_IO_PENDING {
            return Err(last_errno());
        }
        self.armed = true;
        Ok(())
    }

    /// The event to wait on, while a read is pending.
    fn pollable(&self) -> Option<HANDLE> {
        self.armed.then(|| self.event.as_raw_handle())
    }

    /// If the pending read has completed, what it said (and the next read
    /// is issued); `None` while it is still pending, or when there is none.
    fn take_batch(&mut self) -> Option<Batch> {
        if !self.armed {
            return None;
        }
        let batch = match self.result(false) {
            Err(ERROR_IO_INCOMPLETE) => return None,
            Ok(0) => Batch::Overflow,
            // A batch that does not parse may have named anything.
            Ok(bytes) => self.names(bytes).map_or(Batch::Overflow, Batch::Names),
            Err(ERROR_OPERATION_ABORTED) => Batch::Cancelled,
            // ERROR_NOTIFY_ENUM_DIR (overflow), ERROR_ACCESS_DENIED (the
            // directory is being deleted), or any other end of the watch.
            Err(_) => Batch::Overflow,
        };
        self.armed = false;
        // A directory that cannot be watched again leaves the watch
        // unarmed: the timer covers, and the caller's next look sees why.
        let _ = self.arm();
        Some(batch)
    }

    /// `GetOverlappedResult` of the pending read: the bytes written, or the
    /// Win32 error (`ERROR_IO_INCOMPLETE` while pending, when not waiting).
    #[allow(unsafe_code)]
    fn result(&self, wait: bool) -> Result<u32, u32> {
        let mut bytes = 0u32;
        // SAFETY: `self.dir` is the handle the read was issued on and the
        // OVERLAPPED is that read's, alive until `Drop` (see `arm`); the call
        // only reads it. `bytes` is a live, writable `u32`.
        let ok = unsafe {
            GetOverlappedResult(
                self.dir.as_raw_handle(),
                &raw const (*self.read.as_ptr()).overlapped,
                &raw mut bytes,
                i32::from(wait),
            )
        };
        if ok == 0 {
            Err(last_error())
        } else {
            Ok(bytes)
        }
    }

    /// The names in the first `bytes` bytes of a completed read's buffer
    /// (`None` when they do not parse).
    #[allow(unsafe_code)]
    fn names(&self, bytes: u32) -> Option<Vec<String>> {
        // SAFETY: the read has completed (`GetOverlappedResult` said so), so
        // the kernel no longer writes to the buffer and this shared
        // reference is the only access until the next `arm`, which needs
        // `&mut self` and so cannot overlap it.
        let buffer = unsafe { &(*self.read.as_ptr()).buffer.0 };
        let filled = &buffer[..(bytes as usize).min(NOTIFY_BYTES)];
        notify_names(filled)
    }
}

impl Drop for DirChanges {
    #[allow(unsafe_code)]
    fn drop(&mut self) {
        if self.armed {
            // SAFETY: the handle and OVERLAPPED of the read in flight,
            // alive until the end of this function; the call only reads them.
            let _ = unsafe {
                CancelIoEx(
                    self.dir.as_raw_handle(),
                    &raw const (*self.read.as_ptr()).overlapped,
                )
            };
            // Wait until the kernel is done with the buffer, whether the
            // read was cancelled or had completed meanwhile (then
            // `CancelIoEx` fails with ERROR_NOT_FOUND and the event is
            // already set). Cancelling a pending read fails only for a
            // closed handle, and `self.dir` is open, so this wait ends.
            let _ = self.result(true);
        }
        // SAFETY: `read` came from `Box::leak` in `new` and is freed only
        // here, once; no read is pending any more (none was armed, or the
        // wait above saw it end), so the kernel holds no pointer to it.
        drop(unsafe { Box::from_raw(self.read.as_ptr()) });
    }
}

/// `ReOpenFile` of the directory `dir` with `FILE_LIST_DIRECTORY`,
/// overlapped I/O, every sharing mode, and backup semantics (needed to
/// open a directory).
#[allow(unsafe_code)]
fn reopen_for_changes(dir: BorrowedHandle<'_>) -> Result<OwnedHandle, Errno> {
    // SAFETY: `dir` is an open handle to a directory, borrowed for the
    // call; the handle returned, if any, is a new one and ours.
    let raw = unsafe {
        ReOpenFile(
            dir.as_raw_handle(),
            FILE_LIST_DIRECTORY,
            FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE,
            FILE_FLAG_BACKUP_SEMANTICS | FILE_FLAG_OVERLAPPED,
        )
    };
    owned(raw).ok_or_else(last_errno)
}

/// The file names in a batch of `FILE_NOTIFY_INFORMATION` records:
/// `NextEntryOffset` (bytes to the next record, 0 for the last), `Action`,
/// `FileNameLength` (bytes), then the name in UTF-16, not terminated.
/// `None` for a batch that does not parse (then anything may have changed).
fn notify_names(batch: &[u8]) -> Option<Vec<String>> {
    let mut names = Vec::new();
    let mut at = 0usize;
    loop {
        let record = batch.get(at..)?;
        let next = read_u32(record, 0)? as usize;
        let name_bytes = read_u32(record, 8)? as usize;
        let name = record.get(12..12 + name_bytes)?;
        let units: Vec<u16> = name
            .chunks_exact(2)
            .map(|pair| u16::from_le_bytes([pair[0], pair[1]]))
            .collect();
        names.push(String::from_utf16_lossy(&units));
        if next == 0 {
            return Some(names);
        }
        at = at.checked_add(next)?;
    }
}

fn read_u32(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
}

/// Whether a name a change notification reported may be `ours`: equal
/// ignoring case (NTFS and FAT compare names so), or a short 8.3 name
/// (`LOCKFI~1.LOC`), which the notification may give instead of the long
/// one.
fn may_name(reported: &str, ours: &str) -> bool {
    reported.to_lowercase() == ours.to_lowercase() || reported.contains('~')
}

// ---------------------------------------------------------------- waiting

/// A watch on one directory for one name in it being added, removed or
/// renamed, owned by one head waiter. `ReadDirectoryChangesW` reports
/// names, so neighbours' changes cost a wake-up of this thread, never an
/// attempt (inotify's name filter).
pub struct NameWatch {
    /// Locked by the head for the whole of its [`sleep`] (only it uses
    /// the watch).
    changes: Mutex<DirChanges>,
    name: String,
}

impl NameWatch {
    /// Watches `name` in the directory `dir`; `None` if the directory
    /// cannot be reopened for listing or the read cannot be issued.
    pub fn new(dir: BorrowedHandle<'_>, name: &OsStr) -> Option<NameWatch> {
        let changes = DirChanges::new(
            dir,
            FILE_NOTIFY_CHANGE_FILE_NAME | FILE_NOTIFY_CHANGE_DIR_NAME,
        )
        .ok()?;
        Some(NameWatch {
            changes: Mutex::new(changes),
            name: name.to_string_lossy().into_owned(),
        })
    }

    /// Whether `batch` concerns the name (an overflow may).
    fn concerns_us(&self, batch: &Batch) -> bool {
        match batch {
            Batch::Names(names) => names.iter().any(|name| may_name(name, &self.name)),
            Batch::Overflow => true,
            Batch::Cancelled => false,
        }
    }

    /// Reads what has arrived (without waiting): whether any of it
    /// concerns the name. The read is re-issued, so later changes queue.
    #[cfg(test)]
    pub fn relevant_events(&self) -> bool {
        let mut changes = self.changes.lock().unwrap_or_else(|p| p.into_inner());
        self.relevant_in(&mut changes)
    }

    fn relevant_in(&self, changes: &mut DirChanges) -> bool {
        changes
            .take_batch()
            .is_some_and(|batch| self.concerns_us(&batch))
    }
}

/// The holder's process handle, with `SYNCHRONIZE`: signalled when it exits.
pub type HolderWatch = OwnedHandle;

/// The holder's process handle to wait on; `AlreadyGone` when no process
/// has the pid or it has exited already; `Unwatched` when it may not be
/// opened (another session's process): the timer covers.
pub fn holder_exit(pid: u32) -> HolderExit {
    if pid == 0 {
        return HolderExit::Unwatched;
    }
    match open_process(pid, PROCESS_QUERY_LIMITED_INFORMATION | PROCESS_SYNCHRONIZE) {
        Ok(process) if is_signalled(process.as_handle()) => HolderExit::AlreadyGone,
        Ok(process) => HolderExit::Watch(process),
        Err(ERROR_INVALID_PARAMETER) => HolderExit::AlreadyGone,
        Err(_) => HolderExit::Unwatched,
    }
}

/// Sleeps until the watched name changes, the holder exits, `wake` is
/// signalled, or `timeout` passes: one `WaitForMultipleObjects` on the
/// holder's process handle, the wake event and the watch's read event, in
/// that order of precedence. The watch's read stays pending between
/// sleeps, so a change between the attempt's look and this sleep is
/// waiting in it. Changes to other names are slept through.
pub fn sleep(
    watch: Option<&NameWatch>,
    holder: Option<&HolderWatch>,
    wake: &Wake,
    timeout: Duration,
) -> Woken {
    let mut changes = watch.map(|watch| watch.changes.lock().unwrap_or_else(|p| p.into_inner()));
    let deadline = Instant::now() + timeout;
    let woken = loop {
        let mut handles = Vec::with_capacity(3);
        let holder_at = holder.map(|process| push(&mut handles, process.as_raw_handle()));
        let wake_at = wake
            .pollable()
            .map(|event| push(&mut handles, event.as_raw_handle()));
        let watch_at = changes
            .as_deref()
            .and_then(DirChanges::pollable)
            .map(|event| push(&mut handles, event));
        let left = deadline.saturating_duration_since(Instant::now());
        let signalled = if handles.is_empty() {
            // Nothing to wait on (no wake event could be made): a plain
            // sleep; signals are seen at its end.
            std::thread::sleep(left);
            break Woken::Timeout;
        } else {
            match wait_any(&handles, left) {
                Ok(Some(index)) => index,
                Ok(None) => break Woken::Timeout,
                // Not expected with handles that are open; sleeping out the
                // time keeps a caller's retries from spinning.
                Err(_) => {
                    std::thread::sleep(deadline.saturating_duration_since(Instant::now()));
                    break Woken::Timeout;
                }
            }
        };
        if Some(signalled) == holder_at {
            break Woken::HolderExited;
        }
        if Some(signalled) == wake_at {
            break Woken::Signalled;
        }
        if Some(signalled) == watch_at
            && let (Some(watch), Some(changes)) = (watch, changes.as_deref_mut())
            && watch.relevant_in(changes)
        {
            break Woken::NameChanged;
        }
        // Another name's change: its read is re-issued; sleep on.
    };
    wake.drain();
    if let (Some(watch), Some(changes)) = (watch, changes.as_deref_mut()) {
        // Consume what has arrived, as the other platforms do: the caller
        // looks now, so those changes are seen by that look. One about the
        // name that came after the wait timed out is said so (a synchronous
        // waiter sleeps again after a timed-out slice).
        if watch.relevant_in(changes) && woken == Woken::Timeout {
            return Woken::NameChanged;
        }
    }
    woken
}

/// Appends `handle`, returning its index.
fn push(handles: &mut Vec<HANDLE>, handle: HANDLE) -> usize {
    handles.push(handle);
    handles.len() - 1
}

/// How often a held lock's watch looks even without an event: a safety
/// net for a change notification lost (a network volume, a filter driver)
/// or a watch that could not be re-armed.
const HELD_LOOK_EVERY: Duration = Duration::from_secs(1);

/// The events a held lock's watch wakes for: names changing in the lock's
/// parent (its own name among them), and the published directory's
/// entries changing in name, size, times, attributes or security (the
/// record rewritten in place included), or the directory going.
pub struct HeldEvents {
    dirs: Mutex<[DirChanges; 2]>,
}

impl HeldEvents {
    pub fn new(parent: BorrowedHandle<'_>, root: BorrowedHandle<'_>) -> Result<HeldEvents, Errno> {
        let names = FILE_NOTIFY_CHANGE_FILE_NAME | FILE_NOTIFY_CHANGE_DIR_NAME;
        let contents = names
            | FILE_NOTIFY_CHANGE_ATTRIBUTES
            | FILE_NOTIFY_CHANGE_SIZE
            | FILE_NOTIFY_CHANGE_LAST_WRITE
            | FILE_NOTIFY_CHANGE_CREATION
            | FILE_NOTIFY_CHANGE_SECURITY;
        Ok(HeldEvents {
            dirs: Mutex::new([
                DirChanges::new(parent, names)?,
                DirChanges::new(root, contents)?,
            ]),
        })
    }

    /// Sleeps until either directory changes, `stop` is set, or
    /// [`HELD_LOOK_EVERY`] passes. A completed read is re-issued before
    /// returning, so its event does not stay set.
    pub fn wait(&self, stop: BorrowedHandle<'_>) -> Result<(), Errno> {
        let mut dirs = self.dirs.lock().unwrap_or_else(|p| p.into_inner());
        let mut handles = vec![stop.as_raw_handle()];
        handles.extend(dirs.iter().filter_map(DirChanges::pollable));
        wait_any(&handles, HELD_LOOK_EVERY)?;
        for dir in dirs.iter_mut() {
            let _ = dir.take_batch();
        }
        Ok(())
    }
}

#[cfg(test)]
mod kernel_tests;

#[cfg(test)]
mod tests {
    use super::*;

    /// One `FILE_NOTIFY_INFORMATION` record, padded to a `DWORD` boundary.
    fn record(next: u32, action: u32, name: &str) -> Vec<u8> {
        let units: Vec<u8> = name.encode_utf16().flat_map(u16::to_le_bytes).collect();
        let mut bytes = [next, action, units.len() as u32]
            .iter()
            .flat_map(|field| field.to_le_bytes())
            .collect::<Vec<u8>>();
        bytes.extend(units);
        while bytes.len() % 4 != 0 {
            bytes.push(0);
        }
        bytes
    }

    #[test]
    fn notify_records_parse_to_their_names() {
        let first = record(0, 2, "a.lock");
        let mut batch = record(first.len() as u32, 4, "a.lock");
        batch.extend(record(0, 5, "b.lock"));
        assert_eq!(notify_names(&batch).unwrap(), ["a.lock", "b.lock"]);
        assert_eq!(notify_names(&first).unwrap(), ["a.lock"]);
        // Truncated or pointing past the end: not a batch.
        assert_eq!(notify_names(&first[..first.len() - 4]), None);
        assert_eq!(notify_names(&record(64, 1, "x")), None);
        assert_eq!(notify_names(&[]), None);
    }

    #[test]
    fn a_reported_name_may_be_ours_in_another_case_or_short() {
        assert!(may_name("target.lock", "target.lock"));
        assert!(may_name("TARGET.LOCK", "target.lock"));
        assert!(may_name("TARGET~1.LOC", "target.lock"));
        assert!(!may_name("other.lock", "target.lock"));
        assert!(!may_name("target.lock.pending", "target.lock"));
    }

    #[test]
    fn filetimes_convert_to_unix_seconds() {
        // 1970-01-01 and 2026-12-02 10:35:32 UTC as FILETIMEs.
        assert_eq!(start_secs(116_444_736_000_000_000), Some(0));
        assert_eq!(
            start_secs(116_444_736_000_000_000 + 1_796_207_732 * TICKS_PER_SEC + 9_999_999),
            Some(1_796_207_732)
        );
        assert_eq!(start_secs(TICKS_PER_SEC), None, "before 1970");
    }

    #[test]
    fn wait_timeouts_round_up_and_stay_finite() {
        assert_eq!(wait_millis(Duration::ZERO), 0);
        assert_eq!(wait_millis(Duration::from_nanos(1)), 1);
        assert_eq!(wait_millis(Duration::from_millis(100)), 100);
        assert_eq!(wait_millis(Duration::MAX), INFINITE - 1);
    }
}
