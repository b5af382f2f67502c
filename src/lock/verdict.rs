//! The stale verdict: may a waiter remove the lock it observed?
//!
//! The answer is "yes" only on proof. The rules, in order (SPEC §4):
//! a transient read → no; no readable record while host-aware → no; an `info`
//! that is not a valid record → no; a legacy empty directory → only once its
//! mtime is older than `staleMs`; a record from another host (or a
//! host-qualified record seen without a host id, or an unqualified record
//! seen with one) → no; PID reuse proven by a canonical start time → yes;
//! owner alive → no; owner proven dead → yes; anything else → no.

use crate::lock::observe::{Observation, Owner};
use crate::lock::record::OwnerRecord;
use crate::sys::process::Probe;

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
    /// Running, and not contradicted by the start time.
    Live,
    /// The pid runs, but a different process: the canonical start time
    /// differs.
    PidReused,
    /// Exited, not yet reaped by its parent (a zombie).
    DeadNotReaped,
    /// No such process.
    Dead,
    /// Cannot tell (foreign host, pid out of range, probe failure).
    Unknown,
}

impl Liveness {
    pub fn as_str(self) -> &'static str {
        match self {
            Liveness::Live => "live",
            Liveness::PidReused => "pid_reused",
            Liveness::DeadNotReaped => "dead_not_reaped",
            Liveness::Dead => "dead",
            Liveness::Unknown => "unknown",
        }
    }

    /// Whether this is proof that the owner is gone.
    pub fn proves_gone(self) -> bool {
        matches!(
            self,
            Liveness::PidReused | Liveness::DeadNotReaped | Liveness::Dead
        )
    }
}

/// The liveness of a record's owner on this host, from one probe.
pub fn liveness_of(record: &OwnerRecord, probe: impl Fn(u32) -> Probe) -> Liveness {
    let Some(pid) = record.pid_u32() else {
        return Liveness::Unknown;
    };
    match probe(pid) {
        Probe::Running { start_time } => match (record.canonical_start_time(), start_time) {
            (Some(recorded), Some(current)) if recorded != current => Liveness::PidReused,
            _ => Liveness::Live,
        },
        Probe::Exited => Liveness::DeadNotReaped,
        Probe::Gone => Liveness::Dead,
        Probe::Unknown => Liveness::Unknown,
    }
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
    probe: impl Fn(u32) -> Probe,
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
    judge_record(record, policy, probe)
}

/// The verdict on a valid owner record (the last rules of [`judge`]): it
/// depends on the record alone, not on the tree around it.
pub fn judge_record(
    record: &OwnerRecord,
    policy: &HostPolicy,
    probe: impl Fn(u32) -> Probe,
) -> Verdict {
    if policy.is_foreign(record.owner_host_id.as_deref()) {
        return Verdict {
            stale: false,
            reason: Reason::ForeignHost,
            liveness: Some(Liveness::Unknown),
        };
    }
    let liveness = liveness_of(record, probe);
    let reason = match liveness {
        Liveness::PidReused => Reason::PidReused,
        Liveness::Live => Reason::OwnerAlive,
        Liveness::Dead => Reason::OwnerDead,
        Liveness::DeadNotReaped => Reason::OwnerDeadNotReaped,
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

    fn record(host: Option<&str>, start: Option<&str>, format: Option<&str>) -> OwnerRecord {
        OwnerRecord {
            pid: 4242.0,
            start_time: start.map(str::to_string),
            start_time_format: format.map(str::to_string),
            timestamp: 1.0,
            owner_token: None,
            owner_host_id: host.map(str::to_string),
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
            record,
        })
    }

    fn running(start: &str) -> impl Fn(u32) -> Probe {
        let start = start.to_string();
        move |_| Probe::Running {
            start_time: Some(start.clone()),
        }
    }

    const T0: &str = "Wed Dec  2 08:36:20 2026";

    #[test]
    fn dead_owner_is_stale_and_zombie_too() {
        let observation = valid(record(None, Some(T0), Some("utc-v1")));
        let policy = HostPolicy::default();
        assert!(judge(&observation, &policy, 10_000.0, 0, |_| Probe::Gone).stale);
        let zombie = judge(&observation, &policy, 10_000.0, 0, |_| Probe::Exited);
        assert_eq!(zombie.reason, Reason::OwnerDeadNotReaped);
        assert!(zombie.stale);
    }

    #[test]
    fn live_owner_is_never_stale_however_old() {
        let observation = valid(record(None, Some(T0), Some("utc-v1")));
        let verdict = judge(
            &observation,
            &HostPolicy::default(),
            0.0,
            i128::MAX / 2,
            running(T0),
        );
        assert_eq!(verdict.reason, Reason::OwnerAlive);
        assert!(!verdict.stale);
    }

    #[test]
    fn pid_reuse_needs_the_canonical_marker() {
        let canonical = valid(record(None, Some(T0), Some("utc-v1")));
        let other = running("Thu Dec  3 01:00:00 2026");
        assert_eq!(
            judge(&canonical, &HostPolicy::default(), 1.0, 0, &other).reason,
            Reason::PidReused
        );
        for legacy in [
            record(None, Some(T0), None),
            record(None, Some(T0), Some("utc-v1-old")),
            record(None, Some("unknown"), Some("utc-v1")),
            record(None, None, Some("utc-v1")),
        ] {
            let verdict = judge(&valid(legacy), &HostPolicy::default(), 1.0, 0, &other);
            assert_eq!(verdict.reason, Reason::OwnerAlive);
        }
        // An unknown current start time never proves reuse.
        let unknown_now = |_| Probe::Running { start_time: None };
        assert!(!judge(&canonical, &HostPolicy::default(), 1.0, 0, unknown_now).stale);
    }

    #[test]
    fn unknown_liveness_is_kept() {
        let observation = valid(record(None, Some(T0), Some("utc-v1")));
        let verdict = judge(&observation, &HostPolicy::default(), 0.0, 0, |_| {
            Probe::Unknown
        });
        assert_eq!(verdict.reason, Reason::LivenessUnknown);
        assert!(!verdict.stale);
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
        assert_eq!(
            judge(&foreign, &ours, 0.0, 0, gone).reason,
            Reason::ForeignHost
        );
        assert_eq!(
            judge(&qualified_ours, &none, 0.0, 0, gone).reason,
            Reason::ForeignHost
        );
        assert_eq!(
            judge(&unqualified, &ours, 0.0, 0, gone).reason,
            Reason::ForeignHost
        );
        assert!(judge(&qualified_ours, &ours, 0.0, 0, gone).stale);
        assert!(judge(&qualified_previous, &ours, 0.0, 0, gone).stale);
    }

    #[test]
    fn records_that_do_not_validate_are_kept() {
        let gone = |_| Probe::Gone;
        for owner in [Owner::Malformed, Owner::Unrecognized] {
            let verdict = judge(
                &lock(owner),
                &HostPolicy::default(),
                0.0,
                i128::MAX / 2,
                gone,
            );
            assert_eq!(verdict.reason, Reason::MalformedRecord);
        }
        let refused = Observation::Refused {
            code: "reparse_point",
        };
        assert!(!judge(&refused, &HostPolicy::default(), 0.0, 0, gone).stale);
        let transient = Observation::Transient { code: "EACCES" };
        assert!(!judge(&transient, &HostPolicy::default(), 0.0, 0, gone).stale);
    }

    #[test]
    fn legacy_empty_dir_ages_out_unless_host_aware() {
        let gone = |_| Probe::Gone;
        let empty = lock(Owner::NoRecord { dir_mtime_ns: 0 });
        let fresh = judge(
            &empty,
            &HostPolicy::default(),
            10_000.0,
            5_000_000_000,
            gone,
        );
        assert_eq!(fresh.reason, Reason::LegacyEmptyFresh);
        let aged = judge(
            &empty,
            &HostPolicy::default(),
            10_000.0,
            11_000_000_000,
            gone,
        );
        assert!(aged.stale);
        let host_aware = HostPolicy {
            owner_host_id: Some("h1".into()),
            previous_owner_host_ids: Vec::new(),
        };
        let verdict = judge(&empty, &host_aware, 10_000.0, 11_000_000_000, gone);
        assert_eq!(verdict.reason, Reason::NoRecordHostAware);
    }
}
