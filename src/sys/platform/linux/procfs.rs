//! Linux's answers about processes, read from `/proc` without spawning
//! anything: whether a pid runs (and is not a zombie), when it started, the
//! boot's wall-clock start, the boot id and our pid namespace.
//!
//! A pid alone is not an identity (pids are reused), so a stale-lock
//! verdict needs the pid's state (running, exited-but-not-reaped, gone) and
//! when the process started: field 22 of `/proc/<pid>/stat`, its start in
//! clock ticks since boot. The ticks are independent of the wall clock; the
//! wall-clock rendering the original module records is `btime + ticks /
//! Hertz` (see [`start_secs`] and [`crate::sys::lstart`]).

use std::sync::OnceLock;

use rustix::fs::{self, Mode, OFlags};
use rustix::io::Errno;
use rustix::process::Pid;

use crate::sys::platform::CpuWait;
use crate::sys::process::{Probe, retry_intr, valid_pid};

/// The parsed `/proc/<pid>/stat` of `pid` (zombies included), or `None`
/// when it cannot be read.
pub fn stat_of(pid: u32) -> Option<Stat> {
    read_stat(valid_pid(pid)?).ok()
}

/// Answers both questions a lock asks about a recorded owner pid, from one
/// read of `/proc/<pid>/stat`: is it alive, and if so, when did it start.
///
/// When `/proc` cannot answer, `kill(pid, 0)` decides: ESRCH is proof the pid
/// is gone whatever `/proc` said. If the signal check says the pid exists,
/// the answer is `Running { start_ticks: None }` when `/proc` merely hid it
/// (ENOENT, EACCES, EPERM, ESRCH: `hidepid`, no `/proc`, a foreign pid
/// namespace's `/proc`, or a race with the exit), and `Unknown` for any other
/// failure (EIO, EMFILE...), since then we cannot even tell a zombie.
///
/// pid 0 and pids above `i32::MAX` are `Unknown` without any syscall: as a
/// `pid_t`, 0 is our own process group and negative values are process
/// groups (-1: every process we may signal), never a lock owner.
pub fn probe(pid: u32) -> Probe {
    let Some(pid) = valid_pid(pid) else {
        return Probe::Unknown;
    };
    let proc_error = match read_stat(pid) {
        Ok(stat) => return classify(&stat),
        Err(error) => error,
    };
    match rustix::process::test_kill_process(pid) {
        Err(Errno::SRCH) => Probe::Gone,
        // EPERM: it exists but belongs to someone we may not signal.
        Ok(()) | Err(Errno::PERM) => match proc_error {
            StatError::Os(Errno::NOENT | Errno::ACCESS | Errno::PERM | Errno::SRCH)
            | StatError::ForeignProc => Probe::Running { start_ticks: None },
            StatError::Os(_) | StatError::Malformed => Probe::Unknown,
        },
        Err(_) => Probe::Unknown,
    }
}

/// Turns a parsed stat line into a verdict.
fn classify(stat: &Stat) -> Probe {
    match stat.state {
        // Z: zombie. But a thread-group leader that called pthread_exit() is
        // also shown as Z while its other threads keep the process running;
        // then num_threads (which counts the leader until the group is
        // reaped) is above 1, and the process is alive and may hold the lock.
        b'Z' if stat.num_threads > 1 => Probe::Running {
            start_ticks: root_ticks(stat.start_ticks),
        },
        // X: dead, being reaped right now. x: the same on kernels < 4.14.
        b'Z' | b'X' | b'x' => Probe::Exited,
        _ => Probe::Running {
            start_ticks: root_ticks(stat.start_ticks),
        },
    }
}

/// A start time as `/proc` showed it to us, in the initial time
/// namespace's terms. The kernel adds the reader's time-namespace boottime
/// offset to field 22 of every `/proc/<pid>/stat` it shows, so two readers
/// in different time namespaces (`unshare --time`, a restored checkpoint)
/// see different ticks for one process; subtracting our own offset makes
/// every reader agree. (It is 0 outside a time namespace. An offset that
/// is not a whole number of ticks, which a restored checkpoint may set,
/// can leave a one-tick difference: the verdict takes starts one tick
/// apart for the same.)
pub fn root_ticks(seen: u64) -> Option<u64> {
    let ticks = i128::from(seen) - own_boottime_offset_ticks();
    u64::try_from(ticks).ok()
}

/// This process's boottime offset in clock ticks, from
/// `/proc/self/timens_offsets` (absent: no time namespaces, offset 0). A
/// process never changes time namespace once it runs threads, so it is
/// read once.
fn own_boottime_offset_ticks() -> i128 {
    static OFFSET: OnceLock<i128> = OnceLock::new();
    *OFFSET.get_or_init(|| {
        let Ok(text) = std::fs::read_to_string("/proc/self/timens_offsets") else {
            return 0;
        };
        let hertz = i128::from(rustix::param::clock_ticks_per_second().max(1));
        parse_boottime_offset_ns(&text).map_or(0, |ns| ns.div_euclid(1_000_000_000 / hertz))
    })
}

/// The `boottime <secs> <nsecs>` line of `timens_offsets`, in nanoseconds.
pub(crate) fn parse_boottime_offset_ns(text: &str) -> Option<i128> {
    let line = text.lines().find(|line| line.starts_with("boottime"))?;
    let mut fields = line.split_ascii_whitespace().skip(1);
    let secs: i128 = fields.next()?.parse().ok()?;
    let nanos: i128 = fields.next()?.parse().ok()?;
    Some(secs * 1_000_000_000 + nanos)
}

/// The fields of `/proc/<pid>/stat` a lock needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stat {
    /// Field 3, one letter (`R`, `S`, `Z`...).
    pub state: u8,
    /// Field 20.
    pub num_threads: u64,
    /// Field 22: clock ticks after boot.
    pub start_ticks: u64,
}

/// Why `/proc/<pid>/stat` gave no [`Stat`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StatError {
    /// open or read failed.
    Os(Errno),
    /// The line does not have the expected shape.
    Malformed,
    /// `/proc` belongs to another pid namespace (its `/proc/self` is not our
    /// pid), so `/proc/<pid>` would describe some other process.
    ForeignProc,
}

/// The longest stat line we accept. 52 fields of at most 20 digits plus a
/// comm of at most 64 bytes (kernel threads) fit in ~1.2 KiB.
const STAT_LIMIT: usize = 4096;

/// Reads and parses `/proc/<pid>/stat` once.
fn read_stat(pid: Pid) -> Result<Stat, StatError> {
    if !proc_is_ours() {
        return Err(StatError::ForeignProc);
    }
    let pid = pid.as_raw_nonzero().get();
    read_stat_file(&format!("/proc/{pid}/stat"), Some(pid))
}

/// This process's own `/proc/self/stat`. `self` names us in whatever pid
/// namespace the mounted `/proc` belongs to, so this works under a foreign
/// `/proc` too (where the line's leading pid is not our `getpid()`).
/// `Err(ENOENT)` when `/proc` is not mounted at all.
pub fn self_stat() -> Result<Stat, Errno> {
    read_stat_file("/proc/self/stat", None).map_err(|error| match error {
        StatError::Os(errno) => errno,
        StatError::Malformed | StatError::ForeignProc => Errno::IO,
    })
}

/// Reads and parses one stat file; with `pid`, its leading pid must be
/// that one.
fn read_stat_file(path: &str, pid: Option<i32>) -> Result<Stat, StatError> {
    let fd = retry_intr(|| fs::open(path, OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty()))
        .map_err(StatError::Os)?;
    let mut buf = [0u8; STAT_LIMIT];
    let mut filled = 0;
    // procfs produces the whole line in the first read when the buffer is big
    // enough; stop at its newline instead of paying for the read that says
    // EOF.
    while !buf[..filled].ends_with(b"\n") {
        if filled == buf.len() {
            return Err(StatError::Malformed);
        }
        match retry_intr(|| rustix::io::read(&fd, &mut buf[filled..])) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(errno) => return Err(StatError::Os(errno)),
        }
    }
    parse_stat(pid, &buf[..filled]).ok_or(StatError::Malformed)
}

/// Parses a `/proc/<pid>/stat` line: `pid (comm) state ppid ...`.
///
/// comm is whatever the process named itself (up to 15 bytes, 64 for kernel
/// threads) and may contain spaces and `)`, so it ends at the LAST `)` of
/// the line; every field after it is a number, so that `)` cannot be forged.
pub(crate) fn parse_stat(pid: Option<i32>, line: &[u8]) -> Option<Stat> {
    let open = line.iter().position(|&b| b == b'(')?;
    let close = line.iter().rposition(|&b| b == b')')?;
    // The leading pid must be the one we asked for: a cheap guard against
    // reading something else than we meant to.
    let head = std::str::from_utf8(&line[..open]).ok()?;
    let leading = head.trim_end().parse::<i32>().ok()?;
    if pid.is_some_and(|pid| pid != leading) {
        return None;
    }
    let rest = std::str::from_utf8(line.get(close + 1..)?).ok()?;
    // rest[0] is field 3 (state), so field N is rest[N - 3].
    let mut fields = rest.split_ascii_whitespace();
    let state = fields.next()?.as_bytes();
    if state.len() != 1 || !state[0].is_ascii_alphabetic() {
        return None;
    }
    let num_threads = fields.nth(20 - 4)?.parse().ok()?;
    let start_ticks = fields.nth(22 - 21)?.parse().ok()?;
    Some(Stat {
        state: state[0],
        num_threads,
        start_ticks,
    })
}

/// Whether `/proc` is the procfs of our own pid namespace. Inside a container
/// that sees the host's `/proc` (or any foreign one), `/proc/<pid>` names a
/// different process than `kill(pid)` would, and trusting it could report a
/// stranger's start time as our owner's. Only a definite answer is cached.
fn proc_is_ours() -> bool {
    static OURS: OnceLock<bool> = OnceLock::new();
    if let Some(&ours) = OURS.get() {
        return ours;
    }
    let Ok(target) = fs::readlink("/proc/self", Vec::new()) else {
        return false;
    };
    let ours = target.to_bytes()
        == rustix::process::getpid()
            .as_raw_nonzero()
            .to_string()
            .as_bytes();
    *OURS.get_or_init(|| ours)
}

/// Reads a `/proc` file whole, at most `limit` bytes; `None` on an error or
/// beyond the limit.
pub fn read_proc_file(path: &str, limit: usize) -> Option<Vec<u8>> {
    let fd = retry_intr(|| fs::open(path, OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty())).ok()?;
    let mut bytes = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        let n = retry_intr(|| rustix::io::read(&fd, &mut chunk[..])).ok()?;
        if n == 0 {
            return Some(bytes);
        }
        if bytes.len() + n > limit {
            return None;
        }
        bytes.extend_from_slice(&chunk[..n]);
    }
}

/// The start of `pid` in clock ticks after boot, in the initial time
/// namespace's terms (zombies included): its identity, whatever `kill(2)`
/// says of its liveness.
pub fn start_ticks(pid: u32) -> Option<u64> {
    root_ticks(stat_of(pid)?.start_ticks)
}

/// The wall-clock start, in seconds since the epoch, of `pid` as `ps -o
/// lstart=` computes it (zombies included).
pub fn start_secs_of(pid: u32) -> Option<u64> {
    seen_start_secs(stat_of(pid)?.start_ticks)
}

/// The wall-clock start, in seconds since the epoch, of a process whose
/// start is `root` ticks in the initial time namespace's terms (a probe's,
/// see [`root_ticks`]), as `ps -o lstart=` run here prints it: the ticks as
/// `/proc` shows them to us again, then [`seen_start_secs`]. (Those ticks
/// with our `btime` would be off by our time namespace's offset: `btime`
/// moves the other way.)
pub fn start_secs(root: u64) -> Option<u64> {
    let seen = u64::try_from(i128::from(root) + own_boottime_offset_ticks()).ok()?;
    seen_start_secs(seen)
}

/// The wall-clock start, in seconds since the epoch, of a process that
/// started `start_ticks` clock ticks after boot (as `/proc` shows them to
/// us), with `btime` as it is now: procps-ng's `btime + ticks / Hertz`,
/// both integers, so the division truncates.
pub fn seen_start_secs(start_ticks: u64) -> Option<u64> {
    let hertz = Some(rustix::param::clock_ticks_per_second()).filter(|&hz| hz > 0)?;
    boot_secs()?.checked_add(start_ticks / hertz)
}

/// Memory bound for `/proc/stat`; the `intr` line grows with the IRQ count,
/// reaching tens of KiB on big machines.
const PROC_STAT_LIMIT: usize = 16 << 20;

/// The `btime` line of `/proc/stat`, read now: this boot's start on the
/// wall clock (`realtime − boottime`, truncated), as the kernel states it
/// now. Never cached: a clock step moves it, and `ps` reads it afresh too.
/// Not `now − /proc/uptime`: that is fractional and jitters between calls,
/// so a process starting near a second boundary would print differently
/// from `ps`.
pub fn boot_secs() -> Option<u64> {
    parse_btime(&read_proc_file("/proc/stat", PROC_STAT_LIMIT)?)
}

pub(crate) fn parse_btime(bytes: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(bytes).ok()?;
    text.lines()
        .find_map(|line| line.strip_prefix("btime "))
        .and_then(|value| value.trim().parse().ok())
}

/// `/proc/sys/kernel/random/boot_id`: 36 characters of UUID.
pub fn boot_id() -> Option<String> {
    let bytes = read_proc_file("/proc/sys/kernel/random/boot_id", 64)?;
    let text = std::str::from_utf8(&bytes).ok()?.trim();
    uuid::Uuid::parse_str(text).ok()?;
    Some(text.to_string())
}

/// The inode of our pid namespace (what `readlink /proc/self/ns/pid`
/// shows in brackets). `self` resolves to us in whatever namespace the
/// mounted `/proc` belongs to, and the link names our own namespace.
pub fn pid_ns() -> Option<u64> {
    fs::stat("/proc/self/ns/pid").ok().map(|stat| stat.st_ino)
}

/// The calling thread's id, for [`cpu_wait`].
pub fn this_thread() -> i32 {
    rustix::thread::gettid().as_raw_nonzero().get()
}

/// What thread `tid` of this process is doing about the CPU: how long it
/// has, in all, been runnable but waiting for a CPU (the second field of
/// its `schedstat`, in nanoseconds), and whether it is runnable now (state
/// `R` in its `stat`). The kernel adds a wait to the total only when the
/// wait ends, so a thread waiting now shows as runnable, not in the total.
/// `None` when it cannot be read (the thread is gone); a kernel that keeps
/// no run-queue account reads a total of 0 throughout.
pub fn cpu_wait(tid: i32) -> Option<CpuWait> {
    let bytes = read_proc_file(&format!("/proc/self/task/{tid}/schedstat"), 256)?;
    let waited = parse_runqueue_wait(&bytes)?;
    let state = read_stat_file(&format!("/proc/self/task/{tid}/stat"), None)
        .ok()?
        .state;
    Some(CpuWait {
        waited,
        runnable: state == b'R',
    })
}

/// The run-queue wait of a `schedstat` line: `<on cpu ns> <waiting ns> <slices>`.
pub(crate) fn parse_runqueue_wait(bytes: &[u8]) -> Option<std::time::Duration> {
    let text = std::str::from_utf8(bytes).ok()?;
    let waiting = text.split_ascii_whitespace().nth(1)?.parse::<u64>().ok()?;
    Some(std::time::Duration::from_nanos(waiting))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runqueue_wait_is_the_second_schedstat_field_and_this_thread_has_one() {
        assert_eq!(
            parse_runqueue_wait(b"405288864 113616538 1005\n"),
            Some(std::time::Duration::from_nanos(113_616_538))
        );
        assert_eq!(parse_runqueue_wait(b"405288864\n"), None);
        assert_eq!(parse_runqueue_wait(b"1 x 3\n"), None);
        // This thread, reading its own account, is running.
        assert!(cpu_wait(this_thread()).is_some_and(|wait| wait.runnable));
    }

    #[test]
    fn parse_btime_finds_the_line() {
        assert_eq!(
            parse_btime(b"cpu  1 2 3\nintr 5 6\nbtime 1796207732\nprocesses 9\n"),
            Some(1_796_207_732)
        );
        assert_eq!(parse_btime(b"cpu  1 2 3\nxbtime 5\n"), None);
    }
}
