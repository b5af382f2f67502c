//! The stale verdict: may a waiter remove the lock it observed?
//!
//! The answer is "yes" only on proof. The rules, in order (SPEC §4):
//! a transient read → no; no readable record while host-aware → no; an `info`
//! that is not a valid record → no; a legacy empty directory → only once its
//! mtime is older than `staleMs`; a record from another host (or a
//! host-qualified record seen without a host id, or an unqualified record
//! seen with one) → no; PID reuse proven by a canonical start time → yes;
//! owner alive → no; owner proven dead → yes; anything else → no.
//!
//! Whether the owner is alive is decided by its incarnation when the
//! record carries one (boot id, start ticks, pid namespace; see
//! [`crate::sys::incarnation`]), which no clock step or container moves:
//! another boot id on a record written before this boot began → it died
//! with that boot; another boot id on a record written since → another
//! running kernel (a VM or sandbox sharing the directory), unknown;
//! another pid namespace → unknown (its pid names nobody we can see); same
//! boot and namespace → alive exactly when the pid runs with the same
//! start ticks. A record without one (the original module's) keeps the
//! `utc-v1` rule, with a tolerance for the wall clock: see
//! [`legacy_start_matches`].

use crate::lock::observe::{Observation, Owner};
use crate::lock::record::OwnerRecord;
use crate::sys::lstart::{CLOCK_SLACK_SECS, parse_lstart};
use crate::sys::process::Probe;
use crate::sys::{incarnation, lstart, process};

/// The judge: this process's boot and pid namespace, and how it asks the
/// kernel about a pid. Parameters, so the rules can be tested without
/// processes or clocks.
pub struct Observer<'a> {
    pub boot_id: Option<String>,
    pub pid_ns: Option<u64>,
    pub probe: &'a dyn Fn(u32) -> Probe,
    /// The wall-clock start (seconds since the epoch) of a process that
    /// started this many clock ticks after boot, as `ps` renders it now.
    pub start_secs: &'a dyn Fn(u64) -> Option<u64>,
    /// This boot's wall-clock start, in seconds since the epoch.
    pub boot_secs: &'a dyn Fn() -> Option<u64>,
}

impl Observer<'static> {
    /// This process, asking the kernel.
    pub fn local() -> Self {
        let (boot_id, pid_ns) = incarnation::observer();
        Observer {
            boot_id,
            pid_ns,
            probe: &process::probe,
            start_secs: &lstart::start_secs,
            boot_secs: &lstart::boot_secs,
        }
    }
}

/// Whose lock this process may judge: its host identity and the earlier
/// identities of this same host.
#[derive(Clone, Debug, Default)]
pub struct HostPolicy {
    pub owner_host_id: Option<String>,
    pub previous_owner_host_ids: Vec<String>,
}

impl HostPolicy {
    /// Whether a record from `record_host` belongs to a host whose pids we
    /// cannot probe. One predicate for the verdict and the diagnostics.
    pub fn is_foreign(&self, record_host: Option<&str>) -> bool {
        match (self.owner_host_id.as_deref(), record_host) {
            (None, None) => false,
            // A host-qualified record may come from another machine sharing
            // the volume; without our own id we cannot tell.
            (None, Some(_)) => true,
            // An unqualified record may come from a host-unaware writer on
            // another machine: foreign to a host-aware acquirer.
            (Some(_), None) => true,
            (Some(ours), Some(theirs)) => {
                theirs != ours && !self.previous_owner_host_ids.iter().any(|id| id == theirs)
            }
        }
    }
}

/// What the kernel says about a record's owner.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Liveness {
    /// Running, and not contradicted by its start.
    Live,
    /// The pid runs, but a different process: its start differs.
    PidReused,
    /// Exited, not yet reaped by its parent (a zombie).
    DeadNotReaped,
    /// No such process.
    Dead,
    /// The record was written during an earlier boot of this machine.
    PreviousBoot,
    /// The record was written since this boot began, by another running
    /// kernel (a VM, a sandbox like gVisor, WSL2) sharing the directory:
    /// its pid names nobody we can probe.
    ForeignKernel,
    /// The record's pid belongs to another pid namespace (a container, or
    /// the host seen from one): it names nobody we can probe.
    ForeignNamespace,
    /// Cannot tell (foreign host, pid out of range, probe failure).
    Unknown,
}

impl Liveness {
    /// The contract's word for it: an owner of an earlier boot is `dead`,
    /// one of another pid namespace `unknown` (the verdict's reason tells
    /// them apart from the plain cases).
    pub fn as_str(self) -> &'static str {
        match self {
            Liveness::Live => "live",
            Liveness::PidReused => "pid_reused",
            Liveness::DeadNotReaped => "dead_not_reaped",
            Liveness::Dead | Liveness::PreviousBoot => "dead",
            Liveness::ForeignNamespace | Liveness::ForeignKernel | Liveness::Unknown => "unknown",
        }
    }

    /// Whether this is proof that the owner is gone.
    pub fn proves_gone(self) -> bool {
        matches!(
            self,
            Liveness::PidReused | Liveness::DeadNotReaped | Liveness::Dead | Liveness::PreviousBoot
        )
    }
}

/// The liveness of a record's owner, as `observer` sees it.
pub fn liveness_of(record: &OwnerRecord, observer: &Observer<'_>) -> Liveness {
    let pid = match probeable_pid(record, observer) {
        Ok(pid) => pid,
        Err(decided) => return decided,
    };
    match (observer.probe)(pid) {
        Probe::Running { start_ticks } => {
            let same = match (record.start_ticks(), start_ticks) {
                // One tick apart is the same start: a time namespace whose
                // boottime offset is not a whole number of ticks (a restored
                // checkpoint sets it to the nanosecond) rounds the holder's
                // ticks and ours differently. A pid reused by a process
                // started within one tick of the first is out of reach: the
                // pid must come round the whole pid space in between.
                (Some(recorded), Some(now)) => recorded.abs_diff(now) <= 1,
                (Some(_), None) => true,
                (None, now) => legacy_start_matches(record, now.and_then(observer.start_secs)),
            };
            if same {
                Liveness::Live
            } else {
                Liveness::PidReused
            }
        }
        Probe::Exited => Liveness::DeadNotReaped,
        Probe::Gone => Liveness::Dead,
        Probe::Unknown => Liveness::Unknown,
    }
}

/// The record's pid, when a probe of it here can tell whether its owner
/// lives; else the liveness decided without one: no pid, a record of another
/// OS, another boot or another kernel, or of another pid namespace (there
/// the pid names nobody a probe of this system finds: a process with that
/// pid here, or none, proves nothing). Whoever probes — the kernel, or a
/// caller's probe — answers only for a pid this gives.
pub fn probeable_pid(record: &OwnerRecord, observer: &Observer<'_>) -> Result<u32, Liveness> {
    let Some(pid) = record.pid_u32() else {
        return Err(Liveness::Unknown);
    };
    if written_under_another_os(record) {
        return Err(Liveness::ForeignKernel);
    }
    if let (Some(theirs), Some(ours)) = (record.boot_id.as_deref(), observer.boot_id.as_deref())
        && theirs != ours
    {
        // macOS's shape (start ticks, no incarnation, no pid namespace)
        // under another boot id, where this OS's writers name their pid
        // namespace: a Mac's record (say, beside the Linux VM it shares a
        // directory with, the VM restarted since), never an earlier boot of
        // ours, whatever the wall clock says. (Under our own boot id the
        // same shape is a writer of this kernel without a pid namespace,
        // judged by its pid.)
        let macs = record.start_ticks.is_some()
            && record.process_incarnation.is_none()
            && record.pid_ns.is_none()
            && incarnation::is_foreign_start_ticks_alone();
        return Err(if macs {
            Liveness::ForeignKernel
        } else {
            boot_of(record, observer)
        });
    }
    if let Some(theirs) = record.pid_ns.as_deref()
        && observer.pid_ns.map(|ours| ours.to_string()).as_deref() != Some(theirs)
    {
        return Err(Liveness::ForeignNamespace);
    }
    Ok(pid)
}

/// A record written under another OS's kernel: its incarnation (or a
/// `start_time` written as one) is another platform's (`windows:` read on
/// Linux, `linux:` read on Windows), it carries a boot id where this OS
/// names no boot, a `start_time` in `ps -o lstart`'s form where the
/// original writes an incarnation instead (the original module's unix
/// record read on Windows). Its pid names nobody we can probe: a local
/// process with that pid, or none, proves nothing.
fn written_under_another_os(record: &OwnerRecord) -> bool {
    let foreign = |value: Option<&str>| value.is_some_and(incarnation::is_foreign_incarnation);
    foreign(record.process_incarnation.as_deref())
        || foreign(record.canonical_start_time())
        || record
            .canonical_start_time()
            .is_some_and(incarnation::is_foreign_lstart)
        || (record.boot_id.is_some() && !incarnation::names_its_boot())
}

/// The owner of a record from another boot id: dead with an earlier boot
/// when the record is older than this boot (by more than the clock
/// slack), else a kernel running beside ours.
fn boot_of(record: &OwnerRecord, observer: &Observer<'_>) -> Liveness {
    let booted_ms = (observer.boot_secs)()
        .and_then(|secs| secs.checked_sub(CLOCK_SLACK_SECS))
        .map(|secs| secs as f64 * 1000.0);
    match booted_ms {
        Some(booted_ms) if record.timestamp < booted_ms => Liveness::PreviousBoot,
        _ => Liveness::ForeignKernel,
    }
}

/// The `utc-v1` rule for a record without an incarnation (the original
/// module's): only a canonical `start_time` can prove reuse, and only when
/// it is not the running process's start. Both are `ps -o lstart`
/// renderings of the wall clock, so two within [`CLOCK_SLACK_SECS`] are the
/// same start seen across `btime` rounding or a clock step; anything
/// further apart, or not a time at all, is another process.
fn legacy_start_matches(record: &OwnerRecord, running_since: Option<u64>) -> bool {
    let (Some(recorded), Some(running_since)) = (record.canonical_start_time(), running_since)
    else {
        return true;
    };
    parse_lstart(recorded)
        .is_some_and(|recorded| recorded.abs_diff(running_since) <= CLOCK_SLACK_SECS)
}

/// Why a lock is (or is not) removable; stable strings for JS.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    Free,
    Transient,
    NotALock,
    NoRecordHostAware,
    MalformedRecord,
    LegacyEmptyFresh,
    LegacyEmptyAged,
    ForeignHost,
    PidReused,
    OwnerAlive,
    OwnerDead,
    OwnerDeadNotReaped,
    OwnerPreviousBoot,
    ForeignPidNamespace,
    ForeignKernel,
    LivenessUnknown,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Free => "free",
            Reason::Transient => "transient",
            Reason::NotALock => "not_a_lock",
            Reason::NoRecordHostAware => "no_record_host_aware",
            Reason::MalformedRecord => "malformed_record",
            Reason::LegacyEmptyFresh => "legacy_empty_fresh",
            Reason::LegacyEmptyAged => "legacy_empty_aged",
            Reason::ForeignHost => "foreign_host",
            Reason::PidReused => "pid_reused",
            Reason::OwnerAlive => "owner_alive",
            Reason::OwnerDead => "owner_dead",
            Reason::OwnerDeadNotReaped => "owner_dead_not_reaped",
            Reason::OwnerPreviousBoot => "owner_previous_boot",
            Reason::ForeignPidNamespace => "foreign_pid_namespace",
            Reason::ForeignKernel => "foreign_kernel",
            Reason::LivenessUnknown => "liveness_unknown",
        }
    }
}

/// A verdict with its reason and, for a record, the owner's liveness.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Verdict {
    pub stale: bool,
    pub reason: Reason,
    pub liveness: Option<Liveness>,
}

/// As `NODE_DEBUG=exactlock` shows a verdict: `stale (owner_dead, dead)`.
impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let verdict = if self.stale { "stale" } else { "not stale" };
        match self.liveness {
            Some(liveness) => write!(
                f,
                "{verdict} ({}, {})",
                self.reason.as_str(),
                liveness.as_str()
            ),
            None => write!(f, "{verdict} ({})", self.reason.as_str()),
        }
    }
}

impl Verdict {
    fn keep(reason: Reason) -> Self {
        Verdict {
            stale: false,
            reason,
            liveness: None,
        }
    }
}

/// Judges an observation. `now_ms` and `probe` are parameters so the rules
/// can be tested without clocks or processes.
pub fn judge(
    observation: &Observation,
    policy: &HostPolicy,
    stale_ms: f64,
    now_ns: i128,
    observer: &Observer<'_>,
) -> Verdict {
    let owner = match observation {
        Observation::Missing => return Verdict::keep(Reason::Free),
        Observation::Transient { .. } => return Verdict::keep(Reason::Transient),
        Observation::Refused { .. } => return Verdict::keep(Reason::NotALock),
        Observation::Lock { owner, .. } => owner,
    };
    let record = match owner {
        Owner::Valid { record, .. } => record,
        _ if policy.owner_host_id.is_some() => return Verdict::keep(Reason::NoRecordHostAware),
        Owner::Unrecognized | Owner::Malformed => return Verdict::keep(Reason::MalformedRecord),
        Owner::NoRecord { dir_mtime_ns } => {
            let age_ms = (now_ns - dir_mtime_ns) as f64 / 1e6;
            let reason = if age_ms > stale_ms {
                Reason::LegacyEmptyAged
            } else {
                Reason::LegacyEmptyFresh
            };
            return Verdict {
                stale: reason == Reason::LegacyEmptyAged,
                reason,
                liveness: None,
            };
        }
    };
    judge_record(record, policy, observer)
}

/// The verdict on a valid owner record (the last rules of [`judge`]): it
/// depends on the record alone, not on the tree around it.
pub fn judge_record(record: &OwnerRecord, policy: &HostPolicy, observer: &Observer<'_>) -> Verdict {
    if policy.is_foreign(record.owner_host_id.as_deref()) {
        return Verdict {
            stale: false,
            reason: Reason::ForeignHost,
            liveness: Some(Liveness::Unknown),
        };
    }
    let liveness = liveness_of(record, observer);
    let reason = match liveness {
        Liveness::PidReused => Reason::PidReused,
        Liveness::Live => Reason::OwnerAlive,
        Liveness::Dead => Reason::OwnerDead,
        Liveness::DeadNotReaped => Reason::OwnerDeadNotReaped,
        Liveness::PreviousBoot => Reason::OwnerPreviousBoot,
        Liveness::ForeignNamespace => Reason::ForeignPidNamespace,
        Liveness::ForeignKernel => Reason::ForeignKernel,
        Liveness::Unknown => Reason::LivenessUnknown,
    };
    Verdict {
        stale: liveness.proves_gone(),
        reason,
        liveness: Some(liveness),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::tree::TreeSnapshot;
    use crate::sys::lstart::format_lstart;
    use crate::sys::platform::native;

    const BOOT: &str = "5b1a7f0e-7a44-4c1b-9e5d-1f2a3b4c5d6e";
    const NS: u64 = 4_026_531_836;
    /// In these tests a tick is a second after the epoch, so a running
    /// process that started `T0_SECS` ticks after boot renders as `T0`.
    const T0_SECS: u64 = 1_796_200_580;

    /// The original module's `start_time` of a process started at
    /// [`T0_SECS`], as it writes it on this OS: `ps -o lstart`'s text, or
    /// on Windows the incarnation (here, of `T0_SECS` ticks).
    fn t0() -> String {
        if native::START_TIME_IS_INCARNATION {
            format!("{}{T0_SECS}", native::INCARNATION_PREFIX.unwrap())
        } else {
            format_lstart(T0_SECS).unwrap()
        }
    }

    fn record(host: Option<&str>, start: Option<&str>, format: Option<&str>) -> OwnerRecord {
        OwnerRecord {
            pid: 4242.0,
            start_time: start.map(str::to_string),
            start_time_format: format.map(str::to_string),
            timestamp: 1.0,
            owner_host_id: host.map(str::to_string),
            ..OwnerRecord::default()
        }
    }

    /// A record exactlock writes here: the legacy keys plus the incarnation
    /// (in upstream's form where the platform has one, else `start_ticks`),
    /// and where the OS has them, the boot and the pid namespace.
    fn incarnated(ticks: u64, boot: &str, ns: u64) -> OwnerRecord {
        let prefix = native::INCARNATION_PREFIX;
        let incarnation = prefix.map(|prefix| format!("{prefix}{ticks}"));
        let start_time = match &incarnation {
            Some(incarnation) if native::START_TIME_IS_INCARNATION => incarnation.clone(),
            _ => t0(),
        };
        OwnerRecord {
            process_incarnation: incarnation,
            start_ticks: prefix.is_none().then_some(ticks),
            boot_id: native::HAS_BOOT_ID.then(|| boot.to_string()),
            pid_ns: native::HAS_BOOT_ID.then(|| ns.to_string()),
            ..record(None, Some(&start_time), Some("utc-v1"))
        }
    }

    fn lock(owner: Owner) -> Observation {
        Observation::Lock {
            snapshot: TreeSnapshot {
                root_dev: 1,
                root_ino: 2,
                entries: Vec::new(),
            },
            owner,
        }
    }

    fn valid(record: OwnerRecord) -> Observation {
        lock(Owner::Valid {
            bytes: record.to_json().into_bytes(),
            record: Box::new(record),
        })
    }

    fn running(ticks: u64) -> impl Fn(u32) -> Probe {
        move |_| Probe::Running {
            start_ticks: Some(ticks),
        }
    }

    fn seconds(ticks: u64) -> Option<u64> {
        Some(ticks)
    }

    /// This boot began at second 1 000 000 (1970-01-12).
    fn booted() -> Option<u64> {
        Some(1_000_000)
    }

    /// An observer on boot [`BOOT`], namespace [`NS`].
    fn observer(probe: &dyn Fn(u32) -> Probe) -> Observer<'_> {
        Observer {
            boot_id: Some(BOOT.to_string()),
            pid_ns: Some(NS),
            probe,
            start_secs: &seconds,
            boot_secs: &booted,
        }
    }

    fn liveness(record: &OwnerRecord, probe: impl Fn(u32) -> Probe) -> Liveness {
        liveness_of(record, &observer(&probe))
    }

    #[test]
    fn a_record_written_under_another_os_is_never_proven_dead_or_reused_by_a_local_pid() {
        // Windows' own form, read on unix: the process_incarnation exactlock
        // writes there, and the start_time the original module writes there.
        let windows = "windows:134095012345678901";
        let by_incarnation = OwnerRecord {
            process_incarnation: Some(windows.into()),
            ..record(None, Some(windows), Some("utc-v1"))
        };
        let by_start_time = record(None, Some(windows), Some("utc-v1"));
        // Linux's, read on Windows: the incarnation, and the boot id only unix writes.
        let linux = OwnerRecord {
            process_incarnation: Some("linux:7".into()),
            boot_id: Some(BOOT.into()),
            ..record(None, Some(&t0()), Some("utc-v1"))
        };
        // The original module's unix record (an `lstart` start time, no
        // incarnation, no boot id: WSL2 on `/mnt/c`), read on Windows.
        let unix_original = record(None, format_lstart(T0_SECS).as_deref(), Some("utc-v1"));
        let foreigners = if cfg!(windows) {
            vec![&linux, &unix_original]
        } else {
            vec![&by_incarnation, &by_start_time]
        };
        for foreign in foreigners {
            for probe in [
                Probe::Gone,
                Probe::Exited,
                Probe::Running {
                    start_ticks: Some(7),
                },
            ] {
                let answer = probe.clone();
                let said = liveness(foreign, move |_| answer.clone());
                assert_eq!(said, Liveness::ForeignKernel, "{foreign:?} with {probe:?}");
                assert!(!said.proves_gone());
            }
        }
        // macOS's record (start ticks, its boot session, no pid namespace)
        // where this OS's writers name theirs: even one written before this
        // boot began (timestamp 1 ms) is another kernel's, alive for all we
        // know (a Mac beside the Linux VM it shares a directory with, the
        // VM restarted since), never an earlier boot of ours.
        if native::HAS_PID_NAMESPACES {
            let mac = OwnerRecord {
                start_ticks: Some(7),
                boot_id: Some("00000000-0000-4000-8000-000000000000".into()),
                ..record(None, format_lstart(T0_SECS).as_deref(), Some("utc-v1"))
            };
            for probe in [
                Probe::Gone,
                Probe::Running {
                    start_ticks: Some(8),
                },
            ] {
                assert_eq!(
                    liveness(&mac, move |_| probe.clone()),
                    Liveness::ForeignKernel
                );
            }
        }
        // The same shape under this boot's id is a writer of this kernel
        // without a pid namespace (SPEC §2 lets it leave `pid_ns` out):
        // judged by its pid, a gone one dead.
        if native::HAS_PID_NAMESPACES {
            let ours_without_ns = OwnerRecord {
                start_ticks: Some(7),
                boot_id: Some(BOOT.into()),
                ..record(None, Some(&t0()), Some("utc-v1"))
            };
            assert_eq!(liveness(&ours_without_ns, |_| Probe::Gone), Liveness::Dead);
        }
        // This OS's own form stays ours: a gone pid is dead.
        assert_eq!(
            liveness(&incarnated(7, BOOT, NS), |_| Probe::Gone),
            Liveness::Dead
        );
    }

    fn verdict(
        observation: &Observation,
        policy: &HostPolicy,
        probe: impl Fn(u32) -> Probe,
    ) -> Verdict {
        judge(observation, policy, 10_000.0, 0, &observer(&probe))
    }

    #[test]
    fn dead_owner_is_stale_and_zombie_too() {
        let observation = valid(record(None, Some(&t0()), Some("utc-v1")));
        let policy = HostPolicy::default();
        assert!(verdict(&observation, &policy, |_| Probe::Gone).stale);
        let zombie = verdict(&observation, &policy, |_| Probe::Exited);
        assert_eq!(zombie.reason, Reason::OwnerDeadNotReaped);
        assert!(zombie.stale);
    }

    #[test]
    fn live_owner_is_never_stale_however_old() {
        let observation = valid(record(None, Some(&t0()), Some("utc-v1")));
        let probe = running(T0_SECS);
        let verdict = judge(
            &observation,
            &HostPolicy::default(),
            0.0,
            i128::MAX / 2,
            &observer(&probe),
        );
        assert_eq!(verdict.reason, Reason::OwnerAlive);
        assert!(!verdict.stale);
    }

    #[test]
    fn an_incarnation_decides_whatever_the_wall_clock_did() {
        let ours = incarnated(777, BOOT, NS);
        // Same ticks: alive, even with a start_time an hour off (the clock
        // moved, the process did not).
        let mut stepped = ours.clone();
        if !native::START_TIME_IS_INCARNATION {
            stepped.start_time = format_lstart(T0_SECS + 3600);
        }
        assert_eq!(liveness(&stepped, running(777)), Liveness::Live);
        // One tick off: the same start, rounded differently (a time
        // namespace's offset of a fraction of a tick).
        assert_eq!(liveness(&ours, running(778)), Liveness::Live);
        assert_eq!(liveness(&ours, running(776)), Liveness::Live);
        // Further: another process has the pid.
        assert_eq!(liveness(&ours, running(779)), Liveness::PidReused);
        // Ticks unreadable now: proof of life only.
        assert_eq!(
            liveness(&ours, |_| Probe::Running { start_ticks: None }),
            Liveness::Live
        );
        assert_eq!(liveness(&ours, |_| Probe::Gone), Liveness::Dead);
        assert_eq!(liveness(&ours, |_| Probe::Exited), Liveness::DeadNotReaped);
    }

    // Windows has neither a boot id nor pid namespaces (a creation time is absolute).
    #[cfg(unix)]
    #[test]
    fn another_boot_proves_death_and_another_namespace_proves_nothing() {
        // Written before this boot began (timestamp 1 ms after the epoch).
        let other_boot = incarnated(777, "00000000-0000-4000-8000-000000000000", NS);
        assert_eq!(liveness(&other_boot, running(777)), Liveness::PreviousBoot);
        // Written since: another kernel runs beside ours (a VM, gVisor).
        let beside = OwnerRecord {
            timestamp: 1_000_000_000.0 + 60_000.0,
            ..other_boot.clone()
        };
        assert_eq!(liveness(&beside, |_| Probe::Gone), Liveness::ForeignKernel);
        let judged = verdict(&valid(beside), &HostPolicy::default(), |_| Probe::Gone);
        assert_eq!(
            (judged.stale, judged.reason),
            (false, Reason::ForeignKernel)
        );
        let other_ns = incarnated(777, BOOT, NS + 1);
        // Whatever the pid looks like from here: dead, reused or alive.
        for probe in [
            Probe::Gone,
            Probe::Exited,
            Probe::Running {
                start_ticks: Some(1),
            },
        ] {
            let probe = move |_| probe.clone();
            assert_eq!(liveness(&other_ns, probe), Liveness::ForeignNamespace);
        }
        let policy = HostPolicy::default();
        let judged = verdict(&valid(other_ns), &policy, |_| Probe::Gone);
        assert_eq!(
            (judged.stale, judged.reason),
            (false, Reason::ForeignPidNamespace)
        );
        let judged = verdict(&valid(other_boot), &policy, running(777));
        assert_eq!(
            (judged.stale, judged.reason),
            (true, Reason::OwnerPreviousBoot)
        );
        // An observer that cannot tell its own namespace proves nothing
        // about a record that names one.
        let probe = |_| Probe::Gone;
        let blind = Observer {
            pid_ns: None,
            ..observer(&probe)
        };
        assert_eq!(
            liveness_of(&incarnated(777, BOOT, NS), &blind),
            Liveness::ForeignNamespace
        );
    }

    // `ps -o lstart`'s rule: on Windows such a start time is another OS's.
    #[cfg(unix)]
    #[test]
    fn a_legacy_start_time_within_the_clock_slack_is_the_same_process() {
        let at = |secs: u64| record(None, format_lstart(secs).as_deref(), Some("utc-v1"));
        for off_by in [0, 1, CLOCK_SLACK_SECS] {
            assert_eq!(
                liveness(&at(T0_SECS + off_by), running(T0_SECS)),
                Liveness::Live
            );
            assert_eq!(
                liveness(&at(T0_SECS - off_by), running(T0_SECS)),
                Liveness::Live
            );
        }
        assert_eq!(
            liveness(&at(T0_SECS + CLOCK_SLACK_SECS + 1), running(T0_SECS)),
            Liveness::PidReused
        );
        assert_eq!(
            liveness(&at(T0_SECS - 3600), running(T0_SECS)),
            Liveness::PidReused
        );
        // Not a time at all: upstream's own test writes such a value to
        // prove reuse.
        let odd = record(None, Some("different-incarnation"), Some("utc-v1"));
        assert_eq!(liveness(&odd, running(T0_SECS)), Liveness::PidReused);
    }

    #[test]
    fn pid_reuse_needs_the_canonical_marker() {
        let canonical = valid(record(None, Some(&t0()), Some("utc-v1")));
        let other = running(T0_SECS + 86_400);
        assert_eq!(
            verdict(&canonical, &HostPolicy::default(), &other).reason,
            Reason::PidReused
        );
        for legacy in [
            record(None, Some(&t0()), None),
            record(None, Some(&t0()), Some("utc-v1-old")),
            record(None, Some("unknown"), Some("utc-v1")),
            record(None, None, Some("utc-v1")),
        ] {
            let judged = verdict(&valid(legacy), &HostPolicy::default(), &other);
            assert_eq!(judged.reason, Reason::OwnerAlive);
        }
        // An unknown current start time never proves reuse.
        let unknown_now = |_| Probe::Running { start_ticks: None };
        assert!(!verdict(&canonical, &HostPolicy::default(), unknown_now).stale);
    }

    #[test]
    fn unknown_liveness_is_kept() {
        let observation = valid(record(None, Some(&t0()), Some("utc-v1")));
        let judged = verdict(&observation, &HostPolicy::default(), |_| Probe::Unknown);
        assert_eq!(judged.reason, Reason::LivenessUnknown);
        assert!(!judged.stale);
    }

    #[test]
    fn host_rules() {
        let gone = |_| Probe::Gone;
        let none = HostPolicy::default();
        let ours = HostPolicy {
            owner_host_id: Some("h1".into()),
            previous_owner_host_ids: vec!["h0".into()],
        };
        let foreign = valid(record(Some("h9"), None, None));
        let qualified_ours = valid(record(Some("h1"), None, None));
        let qualified_previous = valid(record(Some("h0"), None, None));
        let unqualified = valid(record(None, None, None));
        assert_eq!(verdict(&foreign, &ours, gone).reason, Reason::ForeignHost);
        assert_eq!(
            verdict(&qualified_ours, &none, gone).reason,
            Reason::ForeignHost
        );
        assert_eq!(
            verdict(&unqualified, &ours, gone).reason,
            Reason::ForeignHost
        );
        assert!(verdict(&qualified_ours, &ours, gone).stale);
        assert!(verdict(&qualified_previous, &ours, gone).stale);
    }

    #[test]
    fn records_that_do_not_validate_are_kept() {
        let gone = |_| Probe::Gone;
        for owner in [Owner::Malformed, Owner::Unrecognized] {
            let judged = judge(
                &lock(owner),
                &HostPolicy::default(),
                0.0,
                i128::MAX / 2,
                &observer(&gone),
            );
            assert_eq!(judged.reason, Reason::MalformedRecord);
        }
        let refused = Observation::Refused {
            code: "reparse_point",
        };
        assert!(!verdict(&refused, &HostPolicy::default(), gone).stale);
        let transient = Observation::Transient { code: "EACCES" };
        assert!(!verdict(&transient, &HostPolicy::default(), gone).stale);
    }

    #[test]
    fn legacy_empty_dir_ages_out_unless_host_aware() {
        let gone = |_| Probe::Gone;
        let empty = lock(Owner::NoRecord { dir_mtime_ns: 0 });
        let at =
            |now_ns, policy: &HostPolicy| judge(&empty, policy, 10_000.0, now_ns, &observer(&gone));
        assert_eq!(
            at(5_000_000_000, &HostPolicy::default()).reason,
            Reason::LegacyEmptyFresh
        );
        assert!(at(11_000_000_000, &HostPolicy::default()).stale);
        let host_aware = HostPolicy {
            owner_host_id: Some("h1".into()),
            previous_owner_host_ids: Vec::new(),
        };
        assert_eq!(
            at(11_000_000_000, &host_aware).reason,
            Reason::NoRecordHostAware
        );
    }
}
