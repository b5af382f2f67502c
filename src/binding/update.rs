//! `updateFile`'s native half (see [`crate::lock::update`]): read the
//! locked file, then commit what the updater returned. The target read is
//! kept here, under a handle, between the two calls (the updater runs in
//! JavaScript in between); `dropUpdateNative` lets it go when nothing is
//! committed.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use napi::bindgen_prelude::Buffer;
use napi_derive::napi;

use super::lock::blocking;
use crate::lock::table::{self, Generation};
use crate::lock::update::{self, Commit, Target, UpdateError};

/// Targets read and not yet committed, by handle, with the generation
/// whose lock they were read under.
type Targets = Mutex<HashMap<u32, (Arc<Generation>, Target)>>;

fn targets() -> &'static Targets {
    static TARGETS: OnceLock<Targets> = OnceLock::new();
    TARGETS.get_or_init(Mutex::default)
}

/// Why an update step failed.
#[napi(object)]
pub struct UpdateFailure {
    pub code: String,
    #[napi(ts_type = "\"read\" | \"write\" | \"fsync\" | \"rename\" | \"dirsync\"")]
    pub step: String,
    /// Whether the new content was renamed over the file before it failed.
    pub committed: bool,
}

impl From<UpdateError> for UpdateFailure {
    fn from(error: UpdateError) -> Self {
        UpdateFailure {
            code: error.code.into(),
            step: error.step.as_str().into(),
            committed: error.committed,
        }
    }
}

/// The file as read: a handle to commit to, and its bytes (none: no file).
#[napi(object)]
pub struct UpdateRead {
    pub handle: Option<u32>,
    pub content: Option<Buffer>,
    pub failure: Option<UpdateFailure>,
}

/// What a commit did.
#[napi(object)]
pub struct UpdateCommit {
    pub owner_kept: bool,
    pub deleted: bool,
    pub failure: Option<UpdateFailure>,
}

fn read(generation: String, max_bytes: f64) -> UpdateRead {
    let Some(held) = generation.parse().ok().and_then(table::held) else {
        return UpdateRead {
            handle: None,
            content: None,
            failure: Some(UpdateFailure {
                code: "ERELEASED".into(),
                step: "read".into(),
                committed: false,
            }),
        };
    };
    let limit = if max_bytes >= usize::MAX as f64 {
        usize::MAX
    } else {
        max_bytes as usize
    };
    match update::read(&held, held.reclaimed, limit) {
        Ok((target, content)) => {
            let handle = table::next_id() as u32;
            let mut targets = targets().lock().unwrap_or_else(|p| p.into_inner());
            // Those of generations no longer held (their JavaScript
            // environment went away between the read and the commit: a
            // Worker terminated) are let go here.
            targets.retain(|_, (generation, _)| table::held(generation.id).is_some());
            targets.insert(handle, (held, target));
            UpdateRead {
                handle: Some(handle),
                content: content.map(Buffer::from),
                failure: None,
            }
        }
        Err(error) => UpdateRead {
            handle: None,
            content: None,
            failure: Some(error.into()),
        },
    }
}

/// Reads the file the held `generation` locks, at most `maxBytes`.
#[napi]
pub async fn read_for_update_native(
    generation: String,
    max_bytes: f64,
) -> napi::Result<UpdateRead> {
    blocking(move || read(generation, max_bytes)).await
}

/// [`read_for_update_native`] on the calling thread (`updateFileSync`).
#[napi]
pub fn read_for_update_sync_native(generation: String, max_bytes: f64) -> UpdateRead {
    read(generation, max_bytes)
}

/// What the inline steps of an update take at most: a file this small is
/// read, and written without `fsync`, in well under a millisecond on a
/// local disk.
const INLINE_BYTES: f64 = 1024.0 * 1024.0;

/// [`read_for_update_native`] on the calling thread when the lock's
/// directory earned the inline path (see `crate::lock::fastpath`) and the
/// file is at most [`INLINE_BYTES`]; `null` otherwise (then the async
/// call): a round trip to a worker thread saved, where nothing can stall.
#[napi]
pub fn read_for_update_inline_native(generation: String, max_bytes: f64) -> Option<UpdateRead> {
    let inline = generation
        .parse()
        .ok()
        .and_then(table::held)
        .is_some_and(|held| update::reads_inline(&held));
    if !inline {
        return None;
    }
    let read = read(generation, max_bytes.min(INLINE_BYTES));
    let too_large = read.failure.as_ref().is_some_and(|f| f.code == "EFBIG");
    (!(too_large && max_bytes > INLINE_BYTES)).then_some(read)
}

/// [`commit_update_native`] without `fsync`, on the calling thread, when
/// the lock's directory earned the inline path and the content is at most
/// [`INLINE_BYTES`]; `null` otherwise (the target is kept for the async
/// call).
#[napi]
pub fn commit_update_inline_native(
    handle: u32,
    content: Option<Buffer>,
    new_mode: Option<u32>,
    keep_owner: bool,
) -> Option<UpdateCommit> {
    let inline = targets()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(&handle)
        .is_some_and(|(generation, target)| target.commits_inline(generation));
    let small = content
        .as_ref()
        .is_none_or(|bytes| bytes.len() as f64 <= INLINE_BYTES);
    (inline && small).then(|| {
        commit(
            handle,
            content.map(|bytes| bytes.to_vec()),
            false,
            new_mode,
            keep_owner,
        )
    })
}

fn commit(
    handle: u32,
    content: Option<Vec<u8>>,
    durable: bool,
    new_mode: Option<u32>,
    keep_owner: bool,
) -> UpdateCommit {
    let taken = targets()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .remove(&handle);
    let Some((generation, target)) = taken else {
        return UpdateCommit {
            owner_kept: false,
            deleted: false,
            failure: Some(UpdateFailure {
                code: "ERELEASED".into(),
                step: "rename".into(),
                committed: false,
            }),
        };
    };
    let outcome = update::commit(
        &generation,
        &target,
        &Commit {
            content: content.as_deref(),
            durable,
            new_mode,
            keep_owner,
        },
    );
    match outcome {
        Ok(done) => UpdateCommit {
            owner_kept: done.owner_kept,
            deleted: done.deleted,
            failure: None,
        },
        Err(error) => UpdateCommit {
            owner_kept: false,
            deleted: false,
            failure: Some(error.into()),
        },
    }
}

/// Commits `content` (`null`: deletes the file) to the target read under
/// `handle`.
#[napi]
pub async fn commit_update_native(
    handle: u32,
    content: Option<Buffer>,
    durable: bool,
    new_mode: Option<u32>,
    keep_owner: bool,
) -> napi::Result<UpdateCommit> {
    let content = content.map(|bytes| bytes.to_vec());
    blocking(move || commit(handle, content, durable, new_mode, keep_owner)).await
}

/// [`commit_update_native`] on the calling thread (`updateFileSync`).
#[napi]
pub fn commit_update_sync_native(
    handle: u32,
    content: Option<Buffer>,
    durable: bool,
    new_mode: Option<u32>,
    keep_owner: bool,
) -> UpdateCommit {
    commit(
        handle,
        content.map(|bytes| bytes.to_vec()),
        durable,
        new_mode,
        keep_owner,
    )
}

/// Lets go of a target read but not committed (the updater returned
/// `undefined`, or threw).
#[napi]
pub fn drop_update_native(handle: u32) {
    targets()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .remove(&handle);
}
