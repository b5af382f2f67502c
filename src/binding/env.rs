//! One scope per JavaScript environment: the main thread, and each
//! `worker_threads` Worker (Node and Bun). A scope knows its environment's
//! pending acquisitions and the locks it holds.
//!
//! An environment can go away while an acquisition waits on the process-wide
//! runtime (a Worker terminated): the promise it would resolve is gone, and
//! so is every JavaScript reference that could release what it wins. A lock
//! published then would be held by a live pid forever, reclaimable by
//! no one. So the environment's cleanup hook cancels what is pending and
//! gives back what is held, and an acquisition that completes after the
//! teardown gives its lock back at once instead of adopting it.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use napi::{Env, Result};

use crate::lock::acquire::Claim;
use crate::lock::acquire::Handover;
use crate::lock::release::{self, ReleaseError};
use crate::lock::table::Generation;
use crate::sys::wait::Cancel;

/// What one environment has going.
#[derive(Default)]
pub struct Scope {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    torn_down: bool,
    pending: Vec<Weak<Cancel>>,
    held: HashSet<u64>,
    /// The record an inline attempt staged, for the acquisition its caller
    /// starts next (see [`Scope::hand_over`]), by the file it is for.
    handed: Option<(String, Handover)>,
}

/// Scopes by environment (the `napi_env` pointer, which is unique while
/// the environment lives; a scope leaves the map at its teardown).
fn all_scopes() -> &'static Mutex<HashMap<usize, Arc<Scope>>> {
    static SCOPES: OnceLock<Mutex<HashMap<usize, Arc<Scope>>>> = OnceLock::new();
    SCOPES.get_or_init(Mutex::default)
}

/// The scope of `env`, made (and its cleanup hook registered) on first use.
pub fn scope_of(env: &Env) -> Result<Arc<Scope>> {
    let key = env.raw() as usize;
    let mut scopes = all_scopes().lock().unwrap_or_else(|p| p.into_inner());
    if let Some(scope) = scopes.get(&key) {
        return Ok(scope.clone());
    }
    let scope = Arc::new(Scope::default());
    env.add_env_cleanup_hook((key, scope.clone()), |(key, scope)| {
        all_scopes()
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&key);
        scope.tear_down();
    })?;
    scopes.insert(key, scope.clone());
    Ok(scope)
}

impl Scope {
    /// Counts an acquisition as pending until it ends; `false` when the
    /// environment is already gone (then it must not start).
    pub fn track(&self, cancel: &Arc<Cancel>) -> bool {
        let mut state = self.lock();
        state.pending.retain(|pending| pending.strong_count() > 0);
        if !state.torn_down {
            state.pending.push(Arc::downgrade(cancel));
        }
        !state.torn_down
    }

    /// Hands a won lock to this environment, which will release it; `None`
    /// when the environment is gone: the claim is dropped, which gives the
    /// lock back.
    pub fn adopt(&self, claim: Claim) -> Option<Arc<Generation>> {
        let mut state = self.lock();
        if state.torn_down {
            drop(state);
            drop(claim);
            return None;
        }
        let generation = claim.take();
        state.held.insert(generation.id);
        Some(generation)
    }

    /// A release of `id` by this environment ended with `result`: it no
    /// longer holds `id` — unless the release failed transiently (the lock
    /// stays fenced, release pending), which the environment keeps, to
    /// give back at its teardown. If the teardown came first (it could not
    /// give back a generation whose release was running), the generation
    /// is given back now, off this thread.
    pub fn settle(&self, id: u64, result: &std::result::Result<(), ReleaseError>) {
        let pending = matches!(result, Err(ReleaseError::Pending(_)));
        let mut state = self.lock();
        if !pending {
            state.held.remove(&id);
        } else if state.torn_down {
            drop(state);
            match tokio::runtime::Handle::try_current() {
                Ok(runtime) => {
                    runtime.spawn_blocking(move || release::give_back(id));
                }
                Err(_) => release::give_back(id),
            }
        }
    }

    /// Keeps the record an inline attempt on `file_path` staged, for the
    /// acquisition its caller starts next on this environment's thread
    /// ([`Scope::take_handed`]): the facade starts it right after, in the
    /// same synchronous run, with no other call of this environment between
    /// them. Whatever was kept before and not taken is dropped (its staging
    /// removed), and the environment's teardown drops what is kept.
    pub fn hand_over(&self, file_path: &str, handover: Handover) {
        let before = self.lock().handed.replace((file_path.to_owned(), handover));
        drop(before);
    }

    /// The staged record handed over for `file_path`, if that is what was
    /// kept; anything else kept is dropped. Called by every acquisition
    /// this environment starts, so nothing kept outlives the next one.
    pub fn take_handed(&self, file_path: &str) -> Option<Handover> {
        let handed = self.lock().handed.take();
        handed.and_then(|(path, handover)| (path == file_path).then_some(handover))
    }

    /// Drops the staged record kept for the next acquisition (its staging
    /// removed): for a caller that will not start that acquisition after
    /// all, and at the environment's teardown.
    pub fn drop_handed(&self) {
        let handed = self.lock().handed.take();
        drop(handed);
    }

    fn tear_down(&self) {
        self.drop_handed();
        let (pending, held) = {
            let mut state = self.lock();
            state.torn_down = true;
            (
                std::mem::take(&mut state.pending),
                std::mem::take(&mut state.held),
            )
        };
        for cancel in pending.iter().filter_map(Weak::upgrade) {
            cancel.cancel();
        }
        for id in held {
            release::give_back(id);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}
