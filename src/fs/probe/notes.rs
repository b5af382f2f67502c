//! What follows for a lock's guarantees from what a probe found: one
//! stable code and one sentence per consequence (`exactlock doctor`
//! prints them).

use super::{Inotify, Probe, Tried};

/// One consequence for the lock's guarantees of what a probe found: a
/// stable code and a sentence.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Note {
    pub code: &'static str,
    pub text: String,
}

/// What follows from a probe for a lock on this filesystem.
pub fn consequences(probe: &Probe) -> Vec<Note> {
    let mut notes = Vec::new();
    let mut note = |code: &'static str, text: String| notes.push(Note { code, text });
    let shared = probe.class.may_be_shared();
    let errno_of = |tried: Tried| {
        tried.errno().map_or(String::new(), |e| {
            format!(" ({})", crate::sys::errno::errno_code(e))
        })
    };

    match probe.rename_noreplace {
        Tried::Works => note(
            "publish_atomic",
            "a lock is published with one renameat2(RENAME_NOREPLACE): complete or not at all, never over another".into(),
        ),
        tried => note(
            "publish_fallback",
            format!(
                "no working RENAME_NOREPLACE{}: locks are published with mkdirat + renameat, chosen at once for this filesystem (no failing call per attempt); a populated lock is never replaced, an empty directory put in place of the claim between the two calls could be",
                errno_of(tried)
            ),
        ),
    }
    match probe.rename_exchange {
        Tried::Works => note(
            "reclaim_exchange",
            "a stale lock is replaced by ours in one renameat2(RENAME_EXCHANGE): the lock name is never free".into(),
        ),
        tried => note(
            "reclaim_in_place",
            format!(
                "no working RENAME_EXCHANGE{}: a stale lock is removed in place (bound to what was judged), then published; in between any waiter may win it",
                errno_of(tried)
            ),
        ),
    }
    if probe.fs_name() == "overlay" || probe.statfs_name == "overlayfs" {
        note(
            "overlay_lower_layer",
            "overlayfs: a stale lock in a lower layer cannot be exchanged (EXDEV); it is removed in place".into(),
        );
    }
    match probe.flock {
        Tried::Works if shared => note(
            "flock_this_host",
            "flock excludes here (reclaimers of one stale lock take turns); whether it excludes other hosts depends on the server".into(),
        ),
        Tried::Works => note(
            "flock_excludes",
            "flock excludes: reclaimers of one stale lock take turns".into(),
        ),
        tried => note(
            "flock_unguarded",
            format!(
                "no working flock{}: reclaims are unguarded (as the original module always is); each still checks the lock is what it judged",
                errno_of(tried)
            ),
        ),
    }
    match probe.inotify {
        Inotify::AllChanges => note(
            "wake_prompt",
            "local filesystem: a release wakes waiters at once (inotify), and so does a holder's death (pidfd)".into(),
        ),
        Inotify::ThisHostOnly => note(
            "wake_by_timer",
            format!(
                "{} filesystem: changes made on other hosts raise no inotify event here; waiters wake by timer every retryDelayMs (100 ms by default) for those, at once for this host's releases and deaths",
                probe.class.as_str()
            ),
        ),
        Inotify::NoEvents => note(
            "wake_by_timer",
            "inotify reports no events here: waiters wake by timer every retryDelayMs (100 ms by default); a holder's death on this host still wakes at once (pidfd)".into(),
        ),
        Inotify::Unavailable(errno) => note(
            "wake_by_timer",
            format!(
                "no inotify here{}: waiters wake by timer every retryDelayMs (100 ms by default); a holder's death on this host still wakes at once (pidfd)",
                errno.map_or(String::new(), |e| format!(" ({})", crate::sys::errno::errno_code(e)))
            ),
        ),
    }
    if shared {
        note(
            "host_id_required",
            format!(
                "{} filesystem: if processes on other hosts lock files here, reclaim across hosts requires ownerHostId (one id per host): without it another host's lock reads as from an earlier boot of this one and is reclaimed while its holder lives; with it, other hosts' locks are never reclaimed from here",
                probe.class.as_str()
            ),
        );
        note(
            "verdict_from_server",
            "metadata calls go to a server or daemon: a hung one stalls the attempt (ETIMEDOUT once the budget is spent); the inline fast path is not used here".into(),
        );
    }
    if probe.statfs_name == "tmpfs" || probe.statfs_name == "ramfs" {
        note(
            "memory_only",
            "in memory: locks (like every file here) are gone at unmount or reboot, which is harmless for a lock".into(),
        );
    }
    notes
}
