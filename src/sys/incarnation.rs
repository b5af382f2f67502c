//! Which process this is, in terms no clock step or container can bend:
//! the boot it belongs to, when it started in that boot, and the pid
//! namespace its pid means something in.
//!
//! - The boot id (`/proc/sys/kernel/random/boot_id`) is a random UUID the
//!   kernel draws at boot. Another boot id means the owner died with that
//!   boot. Containers share the kernel, hence the boot id.
//! - The start, in clock ticks since boot (field 22 of `/proc/<pid>/stat`),
//!   is counted on the boot clock: a wall-clock step does not move it. Two
//!   processes with one pid and different ticks are different processes.
//! - The pid namespace (the inode of `/proc/self/ns/pid`): a pid names a
//!   process only inside one namespace. A record written in another
//!   namespace names some process we cannot see by that number.
//!
//! The start ticks travel in the record as upstream 0.17's
//! `process_incarnation`, `linux:<ticks>`: byte-identical to what upstream
//! writes for the same process, so its readers judge our records by the
//! ticks too instead of by the wall-clock `start_time`.
//!
//! On macOS the same three are the boot session UUID
//! (`kern.bootsessionuuid`), the start in microseconds since the epoch
//! (`proc_pidinfo`), and no pid namespace (there is none); the start
//! travels as the contract's `start_ticks` key, since upstream's macOS
//! incarnation string is not known byte for byte. All of it is read the
//! OS's own way ([`crate::sys::platform::native`]), also under
//! `EXACTLOCK_PLATFORM=portable`.

use std::sync::{Arc, OnceLock};

#[cfg(unix)]
use crate::sys::lstart;
use crate::sys::platform::native;

/// The value written as `start_time` when it cannot be had.
pub const UNKNOWN_START_TIME: &str = "unknown";

/// Who this process is, read once (see the module docs); or, for a lock
/// held in the name of a child it started ([`of_child`]), who that child is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThisProcess {
    pub pid: u32,
    /// `ps -o lstart=` form of our start, for the original module's
    /// readers, or `"unknown"`. Rendered once: the original renders its own
    /// once per process too, and the value only serves readers that compare
    /// it with a tolerance or by the ticks.
    pub start_time: String,
    pub start_ticks: Option<u64>,
    pub boot_id: Option<String>,
    pub pid_ns: Option<u64>,
}

/// The kernel interface exactlock cannot work without is missing.
pub use crate::sys::platform::ProcMissing;

/// This process's identity, read on first use and kept for the life of the
/// process (none of it can change: a process never leaves its boot or its
/// pid namespace). `Err` when `/proc` is not mounted: then no owner could
/// ever be proven dead or alive by its start, and exactlock refuses to
/// lock rather than write records nobody can judge. Only a complete answer
/// is kept: one that missed a part (a transient `EMFILE`) is used once and
/// read again next time, so one bad moment cannot strip every later record
/// of its incarnation.
pub fn this_process() -> Result<Arc<ThisProcess>, ProcMissing> {
    static THIS: OnceLock<Arc<ThisProcess>> = OnceLock::new();
    if let Some(this) = THIS.get() {
        return Ok(this.clone());
    }
    let own = native::own_start()?;
    // The record's `start_time` as the original module renders it: `ps`'s
    // `lstart`, or on Windows the incarnation itself.
    #[cfg(unix)]
    let rendered = own.start_secs.and_then(lstart::format_lstart);
    #[cfg(windows)]
    let rendered = own.start_ticks.and_then(incarnation_of_ticks);
    let this = ThisProcess {
        pid: crate::sys::unique::own_pid(),
        start_time: rendered
            .clone()
            .unwrap_or_else(|| UNKNOWN_START_TIME.to_string()),
        start_ticks: own.start_ticks,
        boot_id: native::boot_id(),
        pid_ns: native::pid_ns(),
    };
    let complete = rendered.is_some()
        && (this.boot_id.is_some() || !native::HAS_BOOT_ID)
        && (this.pid_ns.is_some() || !native::HAS_PID_NAMESPACES);
    if complete {
        return Ok(THIS.get_or_init(|| Arc::new(this)).clone());
    }
    Ok(Arc::new(this))
}

/// The identity of `pid`, a child this process started so that a lock be
/// held in its name (`exactlock run`: the lock then lives as long as the
/// command does, as flock(1)'s does, whatever happens to this process). It
/// shares this process's boot and pid namespace; its start is read now.
/// `None` when it is not running, or its start cannot be read.
#[cfg(unix)]
pub fn of_child(pid: u32) -> Option<ThisProcess> {
    let crate::sys::process::Probe::Running {
        start_ticks: Some(ticks),
    } = crate::sys::process::probe(pid)
    else {
        return None;
    };
    let this = this_process().ok()?;
    Some(ThisProcess {
        pid,
        start_time: lstart::start_secs(ticks)
            .and_then(lstart::format_lstart)
            .unwrap_or_else(|| UNKNOWN_START_TIME.to_string()),
        start_ticks: Some(ticks),
        boot_id: this.boot_id.clone(),
        pid_ns: this.pid_ns,
    })
}

/// The boot id and pid namespace of this process, as an observer judging
/// someone else's record: `None` for what cannot be read.
pub fn observer() -> (Option<String>, Option<u64>) {
    match this_process() {
        Ok(this) => (this.boot_id.clone(), this.pid_ns),
        Err(ProcMissing) => (None, None),
    }
}

/// The `process_incarnation` value of a process whose start reads `ticks`:
/// upstream 0.17's `linux:<ticks>` on Linux; `None` where upstream's form
/// is not known byte for byte (macOS), so the record carries `start_ticks`
/// instead.
pub fn incarnation_of_ticks(ticks: u64) -> Option<String> {
    native::INCARNATION_PREFIX.map(|prefix| format!("{prefix}{ticks}"))
}

/// The incarnation prefixes of the platforms that write one, this one's
/// among them.
const WRITTEN_PREFIXES: [&str; 2] = ["linux:", "windows:"];

/// Whether `value` (a record's `process_incarnation`, or a `start_time`
/// written as one) is of another platform's form: its owner ran under
/// another OS's kernel (Windows and WSL2 sharing `C:`, a Mac and a Linux
/// box sharing a mount), so no pid of ours names it.
pub fn is_foreign_incarnation(value: &str) -> bool {
    WRITTEN_PREFIXES
        .iter()
        .any(|prefix| value.starts_with(prefix) && native::INCARNATION_PREFIX != Some(prefix))
}

/// Whether a record of another boot carrying `start_ticks` but neither an
/// incarnation nor a pid namespace was written under another OS's kernel:
/// where this OS's writers name their pid namespace (Linux: exactlock
/// always, with its incarnation), it is macOS's shape — say, a Mac's
/// record beside the Linux VM it shares a directory with, whose restart
/// gives that VM a later boot than the record's timestamp.
pub fn is_foreign_start_ticks_alone() -> bool {
    native::HAS_PID_NAMESPACES
}

/// Whether a canonical `start_time` in `ps -o lstart`'s form was written
/// under another OS's kernel: where the original writes its `start_time`
/// as an incarnation (Windows), one in `lstart`'s form is a unix writer's,
/// and no local start time can be compared with it.
pub fn is_foreign_lstart(start_time: &str) -> bool {
    native::START_TIME_IS_INCARNATION && crate::sys::lstart::parse_lstart(start_time).is_some()
}

/// Whether this OS names its boots (a record carrying a boot id where it
/// names none was written under another kernel).
pub fn names_its_boot() -> bool {
    native::HAS_BOOT_ID
}

/// The ticks of an incarnation string written on this platform, `None`
/// for any other form (another platform's, or not one at all).
pub fn ticks_of_incarnation(incarnation: &str) -> Option<u64> {
    let digits = incarnation.strip_prefix(native::INCARNATION_PREFIX?)?;
    let canonical = !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits == "0" || !digits.starts_with('0'));
    canonical.then(|| digits.parse().ok()).flatten()
}

// Both read Linux's `/proc` and its upstream incarnation prefix.
#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn this_process_matches_the_kernel_and_ps() {
        let this = this_process().expect("/proc is mounted where tests run");
        let ticks = this.start_ticks.expect("our own ticks are readable");
        assert_eq!(
            crate::sys::platform::linux::procfs::start_ticks(std::process::id()),
            Some(ticks)
        );
        assert_eq!(
            this.boot_id.as_deref(),
            std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
                .ok()
                .as_deref()
                .map(str::trim)
        );
        let link = std::fs::read_link("/proc/self/ns/pid").unwrap();
        assert_eq!(
            link.to_string_lossy(),
            format!("pid:[{}]", this.pid_ns.unwrap())
        );
        assert_eq!(
            Some(this.start_time.clone()),
            lstart::start_time(std::process::id())
        );
        // Kept: the same allocation every time.
        assert!(Arc::ptr_eq(&this, &this_process().unwrap()));
    }

    #[test]
    fn incarnation_strings_round_trip_only_in_upstreams_form() {
        assert_eq!(
            incarnation_of_ticks(123456789).as_deref(),
            Some("linux:123456789")
        );
        assert_eq!(ticks_of_incarnation("linux:123456789"), Some(123456789));
        assert_eq!(ticks_of_incarnation("linux:0"), Some(0));
        for other in [
            "linux:",
            "linux:007",
            "linux:12a",
            "linux: 12",
            "darwin:1:2",
            "windows:5",
            "12",
        ] {
            assert_eq!(ticks_of_incarnation(other), None, "{other}");
        }
    }
}
