//! napi surface of the debris reaper ([`crate::lock::debris`]): upstream
//! 0.17's `reapOrphanedLockStagingDirs` / `inspectFileLockStagingDir`, and
//! the listing `exactlock gc` prints. Conversions only.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use crate::sys::os::fd::AsFd;
use napi::Result;
use napi_derive::napi;

use crate::fs::fsx;
use crate::lock::debris::{self, Decision, Judge, Kind, RootId, Status};
use crate::lock::verdict::HostPolicy;
use crate::sys::errno::{errno_code, errno_text};

/// What was decided about one staging or quarantine directory
/// (`FileLockStagingResult`, plus what the CLI prints).
#[napi(object)]
pub struct StagingResultJs {
    pub path: String,
    pub pid: Option<u32>,
    #[napi(ts_type = "\"alive\" | \"dead\" | \"unknown\"")]
    pub status: String,
    pub removed: bool,
    pub reason: String,
    #[napi(
        ts_type = "\"staging\" | \"quarantine\" | \"legacy_quarantine\" | \"removal_record\" | \"update_temp\""
    )]
    pub kind: String,
    /// The directory as examined, to bind a verdict given by the caller.
    pub root: Option<RootIdJs>,
}

/// A directory's identity; numbers are decimal strings.
#[napi(object)]
pub struct RootIdJs {
    pub dev: String,
    pub ino: String,
    pub ctime_ns: String,
}

impl RootIdJs {
    fn of(root: &RootId) -> Self {
        RootIdJs {
            dev: root.dev.to_string(),
            ino: root.ino.to_string(),
            ctime_ns: root.ctime_ns.to_string(),
        }
    }

    fn parse(&self) -> Option<RootId> {
        Some(RootId {
            dev: self.dev.parse().ok()?,
            ino: self.ino.parse().ok()?,
            ctime_ns: self.ctime_ns.parse().ok()?,
        })
    }
}

fn result_of(dir: &Path, decision: &Decision) -> StagingResultJs {
    StagingResultJs {
        path: dir.join(&decision.name).to_string_lossy().into_owned(),
        pid: decision.pid,
        status: decision.status.as_str().to_string(),
        removed: decision.removed,
        reason: decision.reason.to_string(),
        kind: decision.kind.as_str().to_string(),
        root: decision.root.as_ref().map(RootIdJs::of),
    }
}

#[napi(object)]
pub struct DebrisListing {
    pub decisions: Vec<StagingResultJs>,
    /// Set when the directory could not be listed.
    pub code: Option<String>,
    pub message: Option<String>,
}

/// Examines the debris in `dir` — of the lock named `lockName`, or of every
/// lock — and with `remove`, removes what is provably abandoned: at most
/// `limit` candidates, of the kinds listed (`staging`, `quarantine`,
/// `legacy_quarantine`, `removal_record`, `update_temp`).
/// `ownerHostId` and `previousOwnerHostIds` judge host-qualified records as
/// a process with them would (and make a name's bare pid unjudgeable).
#[napi]
pub async fn reap_lock_debris_native(
    dir: String,
    lock_name: Option<String>,
    kinds: Vec<String>,
    remove: bool,
    limit: u32,
    owner_host_id: Option<String>,
    previous_owner_host_ids: Option<Vec<String>>,
) -> Result<DebrisListing> {
    let kinds: Vec<Kind> = debris::ALL_KINDS
        .iter()
        .copied()
        .filter(|kind| kinds.iter().any(|wanted| wanted == kind.as_str()))
        .collect();
    let policy = HostPolicy {
        owner_host_id,
        previous_owner_host_ids: previous_owner_host_ids.unwrap_or_default(),
    };
    super::lock::blocking(move || {
        reap(
            &PathBuf::from(dir),
            lock_name,
            &kinds,
            remove,
            limit,
            &policy,
        )
    })
    .await
}

fn reap(
    dir: &Path,
    lock_name: Option<String>,
    kinds: &[Kind],
    remove: bool,
    limit: u32,
    policy: &HostPolicy,
) -> DebrisListing {
    let listed = fsx::open_anchor(dir).and_then(|parent| {
        let names = debris::candidates(
            parent.as_fd(),
            lock_name.as_deref().map(OsStr::new),
            kinds,
            limit as usize,
        )?;
        Ok(names
            .iter()
            .map(|name| debris::decide(parent.as_fd(), name, policy, &Judge::Kernel, remove))
            .map(|decision| result_of(dir, &decision))
            .collect())
    });
    match listed {
        Ok(decisions) => DebrisListing {
            decisions,
            code: None,
            message: None,
        },
        Err(errno) => DebrisListing {
            decisions: Vec::new(),
            code: Some(errno_code(errno).to_string()),
            message: Some(format!(
                "cannot list {}: {}",
                dir.display(),
                errno_text(errno)
            )),
        },
    }
}

/// `inspectFileLockStagingDir`: the decision about one directory; with
/// `status` (a caller's probe answered for the owner), bound to `root`, the
/// directory it was shown.
#[napi]
pub async fn inspect_staging_dir_native(
    path: String,
    remove: bool,
    status: Option<String>,
    root: Option<RootIdJs>,
) -> Result<StagingResultJs> {
    let given = match (status.as_deref(), root.as_ref().and_then(RootIdJs::parse)) {
        (Some(status), Some(root)) => Judge::Given {
            status: match status {
                "alive" => Status::Alive,
                "dead" => Status::Dead,
                _ => Status::Unknown,
            },
            root,
        },
        _ => Judge::Kernel,
    };
    super::lock::blocking(move || inspect(path, remove, &given)).await
}

fn inspect(path: String, remove: bool, judge: &Judge) -> StagingResultJs {
    let as_given = |decision: &Decision| StagingResultJs {
        path: path.clone(),
        ..result_of(Path::new(""), decision)
    };
    let Ok((parent_path, name)) = fsx::split_final(Path::new(&path)) else {
        return unverified(&path);
    };
    match fsx::open_anchor(&parent_path) {
        Ok(parent) => as_given(&debris::decide(
            parent.as_fd(),
            &name,
            &HostPolicy::default(),
            judge,
            remove,
        )),
        Err(crate::sys::os::io::Errno::NOENT) => StagingResultJs {
            reason: "enoent_already_gone".into(),
            ..unverified(&path)
        },
        Err(_) => unverified(&path),
    }
}

fn unverified(path: &str) -> StagingResultJs {
    StagingResultJs {
        path: path.to_string(),
        pid: None,
        status: "unknown".into(),
        removed: false,
        reason: "unverified_staging_directory".into(),
        kind: "staging".into(),
        root: None,
    }
}

/// `fileLockStagingOwnerPid(name)`: the pid in a staging name
/// `<file>.lock.pending.<pid>.<uuid>`, or `null`.
#[napi]
pub fn staging_owner_pid(name: String) -> Option<u32> {
    match debris::classify_name(OsStr::new(&name)) {
        Some((_, Kind::Staging, pid)) => pid,
        _ => None,
    }
}
