//! Process identity for lock records: "is pid N alive?" and "when did it
//! start?", answered from `/proc` without spawning anything.
//!
//! A lock record names its owner by pid plus start time. The pid alone is not
//! an identity (pids are reused), so a stale-lock verdict needs both: the pid
//! is dead, or it is alive but started at a different time than recorded. The
//! start time must be the exact string `ps -o lstart= -p PID` prints under
//! `LC_ALL=C TZ=UTC`, because records written by the original TypeScript
//! module (which shells out to `ps`) and by exactlock are compared for byte
//! equality. Spawning `ps` costs milliseconds and a fork per probe; reading
//! `/proc/<pid>/stat` costs microseconds.
//!
//! How procps-ng 4.0.x computes `lstart` (ps/output.c, `pr_lstart`):
//! `t = boot_time() + TICS_BEGAN / Hertz`, where `boot_time()` is the `btime`
//! line of `/proc/stat` (an integer), `TICS_BEGAN` is field 22 of
//! `/proc/<pid>/stat` and `Hertz` is `sysconf(_SC_CLK_TCK)`, both integers, so
//! the division truncates. `t` is then formatted with
//! `strftime("%a %b %e %H:%M:%S %Y", localtime(t))`. [`start_time`] does the
//! same arithmetic and formats in UTC by hand; the tests compare it with `ps`
//! for every process on the machine.
//!
//! macOS and other non-Linux systems: rustix exposes no safe wrapper for
//! `proc_pidinfo`/`sysctl(KERN_PROC)`, and this crate allows no `unsafe`, so
//! there [`start_time`] is always `None` ([`current_start_time`] is
//! `"unknown"`), and [`probe`] only has `kill(pid, 0)`: it can tell `Gone`
//! from `Running { start_time: None }` but never reports `Exited`. Such
//! records can therefore never be reclaimed on a start-time mismatch, only on
//! ESRCH, which is the safe direction.

use std::fmt::Write as _;
use std::sync::OnceLock;

use rustix::fs::{self, Mode, OFlags};
use rustix::io::Errno;
use rustix::process::Pid;

/// What the OS says about a pid, from one read of `/proc/<pid>/stat`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Probe {
    /// The process exists and has not exited. `start_time` is `None` when it
    /// exists but its start time cannot be read (e.g. `/proc` mounted with
    /// `hidepid`, or not a Linux `/proc`): proof of life, but no identity.
    Running { start_time: Option<String> },
    /// The process has exited but its parent has not reaped it yet (state `Z`
    /// or `X`): the pid still exists, the owner is dead.
    Exited,
    /// No process has this pid (ESRCH).
    Gone,
    /// The OS would not say (pid 0, a pid that is not a valid positive
    /// `pid_t`, an unexpected I/O error). Never evidence of death.
    Unknown,
}

/// The start time of `pid` exactly as `ps -o lstart= -p PID` prints it with
/// `LC_ALL=C TZ=UTC` (e.g. `Wed Dec  2 08:36:20 2026`), or `None` if it
/// cannot be had (no such pid, `/proc` hidden or absent, not Linux).
///
/// Like `ps`, this also answers for a zombie: its start time is still known.
pub fn start_time(pid: u32) -> Option<String> {
    let pid = valid_pid(pid)?;
    let stat = read_stat(pid).ok()?;
    format_start_time(stat.start_ticks)
}

/// This process's start time (see [`start_time`]), or `"unknown"`.
///
/// A successful answer is cached for the life of the process (it cannot
/// change, and every lock record we write carries it). A failure is not
/// cached, so a transient error (e.g. EMFILE at the first call) does not make
/// every later record say `unknown`. A `fork()`ed child without `exec` would
/// inherit the parent's cached value; Node and Bun never do that.
pub fn current_start_time() -> &'static str {
    static CURRENT: OnceLock<String> = OnceLock::new();
    if let Some(value) = CURRENT.get() {
        return value;
    }
    match start_time(std::process::id()) {
        Some(value) => CURRENT.get_or_init(|| value),
        None => "unknown",
    }
}

/// Answers both questions a lock asks about a recorded owner pid, from one
/// read of `/proc/<pid>/stat`: is it alive, and if so, when did it start.
///
/// When `/proc` cannot answer, `kill(pid, 0)` decides: ESRCH is proof the pid
/// is gone whatever `/proc` said. If the signal check says the pid exists,
/// the answer is `Running { start_time: None }` when `/proc` merely hid it
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
            | StatError::ForeignProc => Probe::Running { start_time: None },
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
            start_time: format_start_time(stat.start_ticks),
        },
        // X: dead, being reaped right now. x: the same on kernels < 4.14.
        b'Z' | b'X' | b'x' => Probe::Exited,
        _ => Probe::Running {
            start_time: format_start_time(stat.start_ticks),
        },
    }
}

/// A pid we may look up: a positive `pid_t`. 0 and values above `i32::MAX`
/// (negative as `pid_t`) name process groups in `kill(2)`.
fn valid_pid(pid: u32) -> Option<Pid> {
    Pid::from_raw(i32::try_from(pid).ok()?)
}

/// The fields of `/proc/<pid>/stat` a lock needs.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Stat {
    /// Field 3, one letter (`R`, `S`, `Z`...).
    state: u8,
    /// Field 20.
    num_threads: u64,
    /// Field 22: clock ticks after boot.
    start_ticks: u64,
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
#[cfg(any(target_os = "linux", target_os = "android"))]
fn read_stat(pid: Pid) -> Result<Stat, StatError> {
    if !proc_is_ours() {
        return Err(StatError::ForeignProc);
    }
    let path = format!("/proc/{}/stat", pid.as_raw_nonzero());
    let fd = retry_intr(|| {
        fs::open(
            path.as_str(),
            OFlags::RDONLY | OFlags::CLOEXEC,
            Mode::empty(),
        )
    })
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
    parse_stat(pid.as_raw_nonzero().get(), &buf[..filled]).ok_or(StatError::Malformed)
}

/// Without a Linux `/proc` there is nothing to read (see the module docs).
#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn read_stat(_pid: Pid) -> Result<Stat, StatError> {
    Err(StatError::ForeignProc)
}

/// Parses a `/proc/<pid>/stat` line: `pid (comm) state ppid ...`.
///
/// comm is whatever the process named itself (up to 15 bytes, 64 for kernel
/// threads) and may contain spaces and `)`, so it ends at the LAST `)` of
/// the line; every field after it is a number, so that `)` cannot be forged.
fn parse_stat(pid: i32, line: &[u8]) -> Option<Stat> {
    let open = line.iter().position(|&b| b == b'(')?;
    let close = line.iter().rposition(|&b| b == b')')?;
    // The leading pid must be the one we asked for: a cheap guard against
    // reading something else than we meant to.
    let head = std::str::from_utf8(&line[..open]).ok()?;
    if head.trim_end().parse::<i32>().ok()? != pid {
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
#[cfg(any(target_os = "linux", target_os = "android"))]
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

/// Wall-clock start in seconds since the epoch, then formatted.
fn format_start_time(start_ticks: u64) -> Option<String> {
    let hertz = clock_ticks_per_second()?;
    let secs = boot_time()?.checked_add(start_ticks / hertz)?;
    format_lstart(secs)
}

/// `sysconf(_SC_CLK_TCK)`, the unit of field 22 (100 on every Linux ABI).
#[cfg(any(target_os = "linux", target_os = "android"))]
fn clock_ticks_per_second() -> Option<u64> {
    Some(rustix::param::clock_ticks_per_second()).filter(|&hz| hz > 0)
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn clock_ticks_per_second() -> Option<u64> {
    None
}

/// The `btime` line of `/proc/stat`: the boot time in whole seconds since the
/// epoch, exactly the value procps-ng 4.0.x adds to the start ticks.
///
/// Not `now - /proc/uptime`: that is fractional and jitters between calls, so
/// a process starting near a second boundary would print differently from
/// `ps`. Read once and cached (only on success): `/proc/stat` is large
/// (one line per CPU and per interrupt) and this value changes only if the
/// wall clock is stepped, where a stable value within one process is what a
/// lock wants anyway.
fn boot_time() -> Option<u64> {
    static BOOT: OnceLock<u64> = OnceLock::new();
    if let Some(&secs) = BOOT.get() {
        return Some(secs);
    }
    let secs = read_btime()?;
    Some(*BOOT.get_or_init(|| secs))
}

/// Memory bound for `/proc/stat`; the `intr` line grows with the IRQ count,
/// reaching tens of KiB on big machines.
const PROC_STAT_LIMIT: usize = 16 << 20;

fn read_btime() -> Option<u64> {
    let fd = retry_intr(|| {
        fs::open(
            "/proc/stat",
            OFlags::RDONLY | OFlags::CLOEXEC,
            Mode::empty(),
        )
    })
    .ok()?;
    let mut bytes = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        let n = retry_intr(|| rustix::io::read(&fd, &mut chunk[..])).ok()?;
        if n == 0 {
            break;
        }
        if bytes.len() + n > PROC_STAT_LIMIT {
            return None;
        }
        bytes.extend_from_slice(&chunk[..n]);
    }
    parse_btime(&bytes)
}

fn parse_btime(bytes: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(bytes).ok()?;
    text.lines()
        .find_map(|line| line.strip_prefix("btime "))
        .and_then(|value| value.trim().parse().ok())
}

/// Formats seconds since the epoch as C-locale `%a %b %e %H:%M:%S %Y` in UTC.
///
/// By hand rather than `localtime`/`strftime`, so the result cannot depend on
/// this process's `TZ`, `LC_*` or tz database; that is what makes it equal to
/// `ps` run with `LC_ALL=C TZ=UTC` whatever environment Node was started in.
fn format_lstart(secs: u64) -> Option<String> {
    const WEEKDAYS: [&str; 7] = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let days = i64::try_from(secs / 86_400).ok()?;
    let of_day = secs % 86_400;
    let (year, month, day) = civil_from_days(days);
    // 1970-01-01 was a Thursday.
    let weekday = WEEKDAYS[usize::try_from((days + 4) % 7).ok()?];
    let mut out = String::with_capacity(24);
    write!(
        out,
        "{weekday} {} {day:>2} {:02}:{:02}:{:02} {year}",
        MONTHS[month as usize - 1],
        of_day / 3600,
        of_day / 60 % 60,
        of_day % 60,
    )
    .ok()?;
    Some(out)
}

/// Proleptic Gregorian (year, month 1..=12, day 1..=31) of a day count since
/// 1970-01-01: Howard Hinnant's `civil_from_days`, which works in 400-year
/// eras starting on March 1 so that the leap day is the last day of a year.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097); // day of era, [0, 146096]
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365; // [0, 399]
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // day of year from Mar 1, [0, 365]
    let mp = (5 * doy + 2) / 153; // month from March, [0, 11]
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// Repeats a syscall interrupted by a signal.
fn retry_intr<T>(mut call: impl FnMut() -> rustix::io::Result<T>) -> rustix::io::Result<T> {
    loop {
        match call() {
            Err(Errno::INTR) => continue,
            other => return other,
        }
    }
}

#[cfg(test)]
mod tests;
