//! Debris a crashed process can leave beside a lock, and its removal.
//!
//! Two kinds exist. A staging directory `<lock>.pending.<pid>.<uuid>` whose
//! creator was killed between `mkdir` and publication; and a detached tree
//! `<lock>.removing` whose remover was killed between detaching a verified
//! lock and deleting it. Each is removed only on proof: the staging pid is
//! gone, or the detached tree's owner is gone (or it is already empty, the
//! state a remover leaves after deleting `info`). A live process's debris is
//! its own business and is left alone.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

use rustix::fd::{AsFd, BorrowedFd};
use rustix::fs::{Dir, OFlags};

use crate::fs::fsx;
use crate::fs::tree;
use crate::lock::observe::{Observation, Owner, observe};
use crate::lock::publish::staging_pid;
use crate::lock::verdict::{HostPolicy, liveness_of};
use crate::sys::process::{self, Probe};

/// The name a remover parks a verified tree under before deleting it.
pub fn removing_name(lock_name: &OsStr) -> std::ffi::OsString {
    fsx::with_suffix(lock_name, ".removing")
}

/// At most this many staging candidates are examined per call, so a
/// directory full of debris cannot stall an acquisition.
const MAX_STAGING_CANDIDATES: usize = 64;

/// Removes `<lock>.removing` if it is provably abandoned. Returns whether
/// the name is free afterwards.
pub fn reap_removing(parent: BorrowedFd<'_>, lock_name: &OsStr, policy: &HostPolicy) -> bool {
    let name = removing_name(lock_name);
    let observation = match observe(parent, &name) {
        Ok(observation) => observation,
        Err(_) => return false,
    };
    let abandoned = match &observation {
        Observation::Missing => return true,
        // Only a remover ever creates this name, after verifying what it
        // detached; so what stands here is garbage, with one exception: a
        // remover that detached a live successor by mistake and is about
        // to put it back. That tree holds a valid record of a live (or
        // unprovable) owner, and only that is kept. An empty directory, or
        // one whose `info` is empty or partial, is the residue of a remover
        // that was killed mid-deletion (or of the original module's scrub).
        Observation::Lock { owner, .. } => match owner {
            Owner::Valid { record, .. } => {
                !policy.is_foreign(record.owner_host_id.as_deref())
                    && liveness_of(record, process::probe).proves_gone()
            }
            Owner::NoRecord { .. } | Owner::Malformed | Owner::Unrecognized => true,
        },
        Observation::Refused { .. } | Observation::Transient { .. } => false,
    };
    if !abandoned {
        return false;
    }
    let Observation::Lock { snapshot, .. } = observation else {
        return false;
    };
    tree::remove_tree_in_place_at(parent, &name, &snapshot).ok
}

/// Removes staging directories (of `lock_name`, or of any lock when `None`)
/// whose creating process is gone. Never touches a symlink or anything not
/// named like our staging.
pub fn reap_staging_of(parent: BorrowedFd<'_>, lock_name: Option<&OsStr>) -> usize {
    let Ok(listing) = rustix::fs::openat(
        parent,
        ".",
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    ) else {
        return 0;
    };
    let Ok(mut dir) = Dir::read_from(listing.as_fd()) else {
        return 0;
    };
    let mut candidates = Vec::new();
    while let Some(Ok(entry)) = dir.next() {
        let name = OsStr::from_bytes(entry.file_name().to_bytes());
        let Some(lock) = lock_of_staging(name) else {
            continue;
        };
        if lock_name.is_some_and(|wanted| wanted != lock) {
            continue;
        }
        if let Some(pid) = staging_pid(lock, name) {
            candidates.push((name.to_os_string(), pid));
        }
        if candidates.len() >= MAX_STAGING_CANDIDATES {
            break;
        }
    }
    let mut removed = 0;
    for (name, pid) in candidates {
        if pid == std::process::id() || !matches!(process::probe(pid), Probe::Gone | Probe::Exited)
        {
            continue;
        }
        // The record inside is authoritative over the pid in the name: a
        // takeover that was killed mid-exchange can leave another owner's
        // live lock under a dead process's staging name.
        let Ok(Observation::Lock { snapshot, owner }) = observe(parent, &name) else {
            continue;
        };
        if let Owner::Valid { record, .. } = &owner
            && !liveness_of(record, process::probe).proves_gone()
        {
            continue;
        }
        if tree::remove_tree_in_place_at(parent, &name, &snapshot).ok {
            removed += 1;
        }
    }
    removed
}

/// The lock name a staging name belongs to: the part before `.pending.`.
fn lock_of_staging(name: &OsStr) -> Option<&OsStr> {
    let bytes = name.as_bytes();
    let at = bytes
        .windows(9)
        .rposition(|window| window == b".pending.")?;
    Some(OsStr::from_bytes(&bytes[..at]))
}
