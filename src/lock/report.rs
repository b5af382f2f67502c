//! Who holds a lock, for people: the error a waiter gives up with, the
//! status display, the CLI. Computed from an observation and its verdict;
//! never used as authority for anything.

use crate::lock::observe::{Observation, Owner};
use crate::lock::record::OwnerRecord;
use crate::lock::verdict::{HostPolicy, Verdict};

/// The shape of what stands at a lock path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HolderState {
    Free,
    Record,
    Malformed,
    NoRecord,
    NotALock,
    Transient,
}

impl HolderState {
    pub fn as_str(self) -> &'static str {
        match self {
            HolderState::Free => "free",
            HolderState::Record => "record",
            HolderState::Malformed => "malformed",
            HolderState::NoRecord => "no_record",
            HolderState::NotALock => "not_a_lock",
            HolderState::Transient => "transient",
        }
    }
}

/// A description of a lock's holder.
#[derive(Clone, Debug)]
pub struct Holder {
    pub state: HolderState,
    pub record: Option<OwnerRecord>,
    /// The record comes from a host whose pids this process cannot probe.
    pub foreign: bool,
    pub verdict: Verdict,
    /// The refusal or transient code, when the state has one.
    pub code: Option<&'static str>,
    /// Why a lock judged stale could not be removed (e.g. `EACCES`).
    pub removal_failure: Option<&'static str>,
}

impl Holder {
    /// A holder that could not be looked at (its directory unreadable).
    pub fn unreadable(code: &'static str) -> Holder {
        Holder {
            state: HolderState::Transient,
            record: None,
            foreign: false,
            verdict: Verdict {
                stale: false,
                reason: crate::lock::verdict::Reason::Transient,
                liveness: None,
            },
            code: Some(code),
            removal_failure: None,
        }
    }

    /// The same holder, whose stale lock could not be removed for `code`.
    pub fn unremovable(mut self, code: &'static str) -> Holder {
        self.removal_failure = Some(code);
        self
    }
}

/// A holder known by its valid record alone.
pub fn describe_record(record: OwnerRecord, verdict: Verdict, policy: &HostPolicy) -> Holder {
    Holder {
        state: HolderState::Record,
        foreign: policy.is_foreign(record.owner_host_id.as_deref()),
        record: Some(record),
        verdict,
        code: None,
        removal_failure: None,
    }
}

/// Describes the holder an observation shows.
pub fn describe(observation: &Observation, verdict: Verdict, policy: &HostPolicy) -> Holder {
    let (state, record, code) = match observation {
        Observation::Missing => (HolderState::Free, None, None),
        Observation::Refused { code } => (HolderState::NotALock, None, Some(*code)),
        Observation::Transient { code } => (HolderState::Transient, None, Some(*code)),
        Observation::Lock { owner, .. } => match owner {
            Owner::Valid { record, .. } => (HolderState::Record, Some((**record).clone()), None),
            Owner::Malformed | Owner::Unrecognized => (HolderState::Malformed, None, None),
            Owner::NoRecord { .. } => (HolderState::NoRecord, None, None),
        },
    };
    let foreign = record
        .as_ref()
        .is_some_and(|r| policy.is_foreign(r.owner_host_id.as_deref()));
    Holder {
        state,
        record,
        foreign,
        verdict,
        code,
        removal_failure: None,
    }
}
