//! napi surface of the no-replace rename ([`crate::fs::rename`]) and the tree
//! snapshot / exact removal ([`crate::fs::tree`]).
//!
//! Conversion only. 64-bit numbers travel as decimal strings (a JS number
//! loses precision above 2^53). No function here throws for a refused
//! operation or a malformed snapshot: every outcome is a result object, as in
//! the original. The `…Async` variants run the blocking syscalls on the libuv
//! pool (`AsyncTask`), never on the JS thread.

// Under `cfg(test)` napi-derive leaves out the module registration that
// references these items, so the unit-test build alone sees them as unused.

use std::path::{Path, PathBuf};

use napi::bindgen_prelude::{AsyncTask, Result};
use napi::{Env, Task};
use napi_derive::napi;

use crate::fs::rename::{self, NoReplaceOutcome};
use crate::fs::tree::{self, EntryKind, ExactUnlinkOutcome, TreeEntry, TreeError, TreeSnapshot};

/// Always `{schemaVersion: 1, collectionState: "unavailable"}` from these
/// entry points (kept for the original's shape).
#[napi(object)]
pub struct NativeNoReplaceDiagnostic {
    pub schema_version: u32,
    #[napi(ts_type = "\"complete\" | \"partial\" | \"unavailable\"")]
    pub collection_state: String,
}

/// Result of `renameNoReplacePath` and friends.
#[napi(object)]
pub struct NativeNoReplaceResult {
    pub ok: bool,
    pub code: Option<String>,
    #[napi(ts_type = "\"not_committed\" | \"committed\" | \"unknown\"")]
    pub mutation_state: String,
    #[napi(ts_type = "\"not_attempted\" | \"proven\" | \"not_provable\"")]
    pub durability_state: String,
    #[napi(
        ts_type = "\"none\" | \"destination_exists\" | \"atomic_unavailable\" | \"cross_device\" | \"permission_denied\" | \"io_failure\" | \"invalid_request\" | \"interrupted\" | \"identity_violation\" | \"durability_not_provable\" | \"sharing_violation\" | \"unknown\""
    )]
    pub reason: String,
    #[napi(
        ts_type = "\"renameat2_noreplace\" | \"linkat_noreplace\" | \"mkdirat_renameat_noreplace\" | \"renameatx_np_excl\" | \"windows_rename_noreplace\" | \"unsupported\" | \"unknown\""
    )]
    pub primitive: String,
    #[napi(
        ts_type = "\"preflight\" | \"file_sync\" | \"rename\" | \"source_unlink\" | \"source_parent_sync\" | \"destination_parent_sync\" | \"terminal_identity\" | \"complete\" | \"unknown\""
    )]
    pub phase: String,
    pub diagnostic: NativeNoReplaceDiagnostic,
}

/// One entry of a directory snapshot; numbers are decimal strings.
#[napi(object)]
pub struct NativeDirectoryEntry {
    pub relative_path: String,
    #[napi(ts_type = "\"directory\" | \"file\"")]
    pub kind: String,
    pub dev: String,
    pub ino: String,
    pub nlink: String,
    pub size: String,
    pub mtime_ns: String,
    pub ctime_ns: String,
    pub sha256: Option<String>,
}

/// A directory tree as `snapshotDirectoryTree` saw it.
#[napi(object)]
pub struct NativeDirectorySnapshot {
    pub root_dev: String,
    pub root_ino: String,
    pub entries: Vec<NativeDirectoryEntry>,
}

/// Result of `snapshotDirectoryTree`.
#[napi(object)]
pub struct NativeDirectoryTreeResult {
    pub ok: bool,
    pub code: Option<String>,
    pub snapshot: Option<NativeDirectorySnapshot>,
}

/// Result of `exactRemoveDirectoryTree`.
#[napi(object)]
pub struct NativeExactUnlinkResult {
    pub ok: bool,
    pub code: Option<String>,
    pub detached_path: Option<String>,
    pub retained_successor_path: Option<String>,
}

/// Atomically renames `src` to `dst` unless `dst` exists.
#[napi]
pub fn rename_no_replace_path(src: String, dst: String) -> NativeNoReplaceResult {
    no_replace_result(rename::rename_no_replace(Path::new(&src), Path::new(&dst)))
}

/// `renameNoReplacePath`, run on the libuv pool instead of the JS thread.
#[napi(ts_return_type = "Promise<NativeNoReplaceResult>")]
pub fn rename_no_replace_path_async(src: String, dst: String) -> AsyncTask<RenameTask> {
    AsyncTask::new(RenameTask {
        src: PathBuf::from(src),
        dst: PathBuf::from(dst),
        directory_fallback: false,
    })
}

/// Publishes the directory `src` as `dst` with the `mkdirat` + `renameat`
/// fallback (for filesystems that refuse the exclusive flag).
#[napi]
pub fn rename_directory_no_replace_path(src: String, dst: String) -> NativeNoReplaceResult {
    no_replace_result(rename::rename_directory_no_replace(
        Path::new(&src),
        Path::new(&dst),
    ))
}

/// `renameDirectoryNoReplacePath`, run on the libuv pool.
#[napi(ts_return_type = "Promise<NativeNoReplaceResult>")]
pub fn rename_directory_no_replace_path_async(src: String, dst: String) -> AsyncTask<RenameTask> {
    AsyncTask::new(RenameTask {
        src: PathBuf::from(src),
        dst: PathBuf::from(dst),
        directory_fallback: true,
    })
}

/// Snapshots the directory tree at `path` (no-follow, bounded).
#[napi]
pub fn snapshot_directory_tree(path: String) -> NativeDirectoryTreeResult {
    tree_result(tree::snapshot_tree(Path::new(&path)))
}

/// `snapshotDirectoryTree`, run on the libuv pool.
#[napi(ts_return_type = "Promise<NativeDirectoryTreeResult>")]
pub fn snapshot_directory_tree_async(path: String) -> AsyncTask<SnapshotTask> {
    AsyncTask::new(SnapshotTask {
        path: PathBuf::from(path),
    })
}

/// Removes the tree at `path` only if it is still exactly `snapshot`.
#[napi]
pub fn exact_remove_directory_tree(
    path: String,
    snapshot: NativeDirectorySnapshot,
) -> NativeExactUnlinkResult {
    exact_remove(Path::new(&path), parse_snapshot(&snapshot).as_ref())
}

/// `exactRemoveDirectoryTree`, run on the libuv pool.
#[napi(ts_return_type = "Promise<NativeExactUnlinkResult>")]
pub fn exact_remove_directory_tree_async(
    path: String,
    snapshot: NativeDirectorySnapshot,
) -> AsyncTask<ExactRemoveTask> {
    AsyncTask::new(ExactRemoveTask {
        path: PathBuf::from(path),
        expected: parse_snapshot(&snapshot),
    })
}

/// A no-replace rename run off the JS thread.
pub struct RenameTask {
    src: PathBuf,
    dst: PathBuf,
    directory_fallback: bool,
}

impl Task for RenameTask {
    type Output = NoReplaceOutcome;
    type JsValue = NativeNoReplaceResult;

    fn compute(&mut self) -> Result<Self::Output> {
        Ok(if self.directory_fallback {
            rename::rename_directory_no_replace(&self.src, &self.dst)
        } else {
            rename::rename_no_replace(&self.src, &self.dst)
        })
    }

    fn resolve(&mut self, _env: Env, output: Self::Output) -> Result<Self::JsValue> {
        Ok(no_replace_result(output))
    }
}

/// A tree snapshot run off the JS thread.
pub struct SnapshotTask {
    path: PathBuf,
}

impl Task for SnapshotTask {
    type Output = std::result::Result<TreeSnapshot, TreeError>;
    type JsValue = NativeDirectoryTreeResult;

    fn compute(&mut self) -> Result<Self::Output> {
        Ok(tree::snapshot_tree(&self.path))
    }

    fn resolve(&mut self, _env: Env, output: Self::Output) -> Result<Self::JsValue> {
        Ok(tree_result(output))
    }
}

/// An exact removal run off the JS thread. `expected` is `None` when the
/// snapshot handed in did not parse.
pub struct ExactRemoveTask {
    path: PathBuf,
    expected: Option<TreeSnapshot>,
}

impl Task for ExactRemoveTask {
    type Output = ExactUnlinkOutcome;
    type JsValue = NativeExactUnlinkResult;

    fn compute(&mut self) -> Result<Self::Output> {
        Ok(exact_remove_outcome(&self.path, self.expected.as_ref()))
    }

    fn resolve(&mut self, _env: Env, output: Self::Output) -> Result<Self::JsValue> {
        Ok(unlink_result(output))
    }
}

fn exact_remove(path: &Path, expected: Option<&TreeSnapshot>) -> NativeExactUnlinkResult {
    unlink_result(exact_remove_outcome(path, expected))
}

fn exact_remove_outcome(path: &Path, expected: Option<&TreeSnapshot>) -> ExactUnlinkOutcome {
    match expected {
        Some(expected) => tree::exact_remove_tree(path, expected),
        None => ExactUnlinkOutcome::failed(TreeError::InvalidRequest),
    }
}

fn no_replace_result(outcome: NoReplaceOutcome) -> NativeNoReplaceResult {
    NativeNoReplaceResult {
        ok: outcome.ok,
        code: outcome.code.map(str::to_owned),
        mutation_state: outcome.mutation_state.as_str().to_owned(),
        durability_state: outcome.durability_state.as_str().to_owned(),
        reason: outcome.reason.as_str().to_owned(),
        primitive: outcome.primitive.as_str().to_owned(),
        phase: outcome.phase.as_str().to_owned(),
        diagnostic: NativeNoReplaceDiagnostic {
            schema_version: 1,
            collection_state: "unavailable".to_owned(),
        },
    }
}

fn tree_result(result: std::result::Result<TreeSnapshot, TreeError>) -> NativeDirectoryTreeResult {
    match result {
        Ok(snapshot) => NativeDirectoryTreeResult {
            ok: true,
            code: None,
            snapshot: Some(NativeDirectorySnapshot {
                root_dev: snapshot.root_dev.to_string(),
                root_ino: snapshot.root_ino.to_string(),
                entries: snapshot.entries.iter().map(native_entry).collect(),
            }),
        },
        Err(error) => NativeDirectoryTreeResult {
            ok: false,
            code: Some(error.code().to_owned()),
            snapshot: None,
        },
    }
}

fn native_entry(entry: &TreeEntry) -> NativeDirectoryEntry {
    NativeDirectoryEntry {
        relative_path: entry.relative_path.clone(),
        kind: entry.kind.as_str().to_owned(),
        dev: entry.dev.to_string(),
        ino: entry.ino.to_string(),
        nlink: entry.nlink.to_string(),
        size: entry.size.to_string(),
        mtime_ns: entry.mtime_ns.to_string(),
        ctime_ns: entry.ctime_ns.to_string(),
        sha256: entry.sha256.clone(),
    }
}

fn unlink_result(outcome: ExactUnlinkOutcome) -> NativeExactUnlinkResult {
    let shown = |path: Option<PathBuf>| path.map(|path| path.to_string_lossy().into_owned());
    NativeExactUnlinkResult {
        ok: outcome.ok,
        code: outcome.code.map(str::to_owned),
        detached_path: shown(outcome.detached_path),
        retained_successor_path: shown(outcome.retained_successor_path),
    }
}

/// The snapshot handed in from JS, or `None` if any field does not parse
/// (bad decimal, unknown kind, digest where none belongs or malformed).
fn parse_snapshot(native: &NativeDirectorySnapshot) -> Option<TreeSnapshot> {
    let entries = native
        .entries
        .iter()
        .map(parse_entry)
        .collect::<Option<Vec<_>>>()?;
    Some(TreeSnapshot {
        root_dev: parse_unsigned(&native.root_dev)?,
        root_ino: parse_unsigned(&native.root_ino)?,
        entries,
    })
}

fn parse_entry(native: &NativeDirectoryEntry) -> Option<TreeEntry> {
    let kind = match native.kind.as_str() {
        "directory" => EntryKind::Directory,
        "file" => EntryKind::File,
        _ => return None,
    };
    let sha256 = match (kind, &native.sha256) {
        (EntryKind::Directory, None) => None,
        (EntryKind::File, Some(hex)) if is_sha256_hex(hex) => Some(hex.clone()),
        _ => return None,
    };
    Some(TreeEntry {
        relative_path: native.relative_path.clone(),
        kind,
        dev: parse_unsigned(&native.dev)?,
        ino: parse_unsigned(&native.ino)?,
        nlink: parse_unsigned(&native.nlink)?,
        size: parse_unsigned(&native.size)?,
        mtime_ns: parse_signed(&native.mtime_ns)?,
        ctime_ns: parse_signed(&native.ctime_ns)?,
        sha256,
    })
}

/// A plain decimal: ASCII digits only (no sign, no spaces, not empty).
fn parse_unsigned(text: &str) -> Option<u64> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// A decimal with an optional leading `-` (times before 1970).
fn parse_signed(text: &str) -> Option<i128> {
    let digits = text.strip_prefix('-').unwrap_or(text);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

fn is_sha256_hex(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimals_are_strict() {
        assert_eq!(parse_unsigned("42"), Some(42));
        assert_eq!(parse_unsigned("18446744073709551615"), Some(u64::MAX));
        for bad in ["", "+1", "-1", " 1", "1.0", "0x10", "18446744073709551616"] {
            assert_eq!(parse_unsigned(bad), None, "{bad:?}");
        }
        assert_eq!(parse_signed("-1500000000"), Some(-1_500_000_000));
        assert_eq!(
            parse_signed("1764665780123456789"),
            Some(1_764_665_780_123_456_789)
        );
        for bad in ["", "-", "--1", "+1", "1e9"] {
            assert_eq!(parse_signed(bad), None, "{bad:?}");
        }
    }
}
