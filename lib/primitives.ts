/**
 * Native primitives, exported as the original `pi-natives` named them:
 * atomic no-replace rename, directory-tree snapshot and exact tree removal.
 *
 * Refusals are result objects (`{ ok: false, code, … }`), never throws: a
 * path the native side cannot use (empty, NUL, missing) or a snapshot whose
 * numbers or kinds do not parse is `invalid_request` (or `not_found`, …),
 * as in the original. The only throws are argument *type* errors, caught
 * here before the native call: a path that is not a string, or a snapshot
 * without the snapshot shape (a TypeError with code `ERR_INVALID_ARG_TYPE`;
 * the async variants reject).
 */
import { native } from "./native.js";
import { validateSnapshotShape, validateString } from "./validate.js";

export type NoReplaceMutationState = "not_committed" | "committed" | "unknown";
export type NoReplaceDurabilityState = "not_attempted" | "proven" | "not_provable";
export type NoReplaceReason =
  | "none"
  | "destination_exists"
  | "atomic_unavailable"
  | "cross_device"
  | "permission_denied"
  | "io_failure"
  | "invalid_request"
  | "interrupted"
  | "identity_violation"
  | "durability_not_provable"
  | "sharing_violation"
  | "unknown";
export type NoReplacePrimitive =
  | "renameat2_noreplace"
  | "linkat_noreplace"
  | "mkdirat_renameat_noreplace"
  | "renameatx_np_excl"
  | "windows_rename_noreplace"
  | "unsupported"
  | "unknown";
export type NoReplacePhase =
  | "preflight"
  | "file_sync"
  | "rename"
  | "source_unlink"
  | "source_parent_sync"
  | "destination_parent_sync"
  | "terminal_identity"
  | "complete"
  | "unknown";

/** Result of every no-replace rename. */
export interface NativeNoReplaceResult {
  ok: boolean;
  /** e.g. `destination_exists`, `reparse_point`, `not_found`, `invalid_request`. */
  code?: string;
  mutationState: NoReplaceMutationState;
  durabilityState: NoReplaceDurabilityState;
  reason: NoReplaceReason;
  primitive: NoReplacePrimitive;
  phase: NoReplacePhase;
  diagnostic: { schemaVersion: number; collectionState: "complete" | "partial" | "unavailable" };
}

/** One entry of a snapshot. All numbers are decimal strings. */
export interface NativeDirectoryEntry {
  /** `/`-separated path below the root; `""` for the root itself. */
  relativePath: string;
  kind: "directory" | "file";
  dev: string;
  ino: string;
  nlink: string;
  size: string;
  mtimeNs: string;
  ctimeNs: string;
  /** Lowercase hex SHA-256 of the content (files only). */
  sha256?: string;
}

/** A directory tree: the root first, then depth-first pre-order, names sorted bytewise. */
export interface NativeDirectorySnapshot {
  rootDev: string;
  rootIno: string;
  entries: NativeDirectoryEntry[];
}

export interface NativeDirectoryTreeResult {
  ok: boolean;
  /** `reparse_point`, `unsupported_entry`, `not_utf8`, `not_found`, `not_directory`,
   * `hard_link_unsupported`, `tree_changed`, `limit_exceeded`, `invalid_request`, `io_error`. */
  code?: string;
  snapshot?: NativeDirectorySnapshot;
}

export interface NativeExactUnlinkResult {
  ok: boolean;
  /** `not_found`, `identity_mismatch`, `quarantine_collision`, `tree_changed`, `invalid_request`, `io_error`, … */
  code?: string;
  /** Where the tree now lives when it could be neither removed nor put back. */
  detachedPath?: string;
  /** A different object that took the path meanwhile; never removed. */
  retainedSuccessorPath?: string;
}

/** Renames `src` to `dst` unless `dst` exists (an empty directory counts as existing). */
export function renameNoReplacePath(src: string, dst: string): NativeNoReplaceResult {
  return native.renameNoReplacePath(validateString(src, "src"), validateString(dst, "dst"));
}

/** {@link renameNoReplacePath} off the JS thread. */
export async function renameNoReplacePathAsync(src: string, dst: string): Promise<NativeNoReplaceResult> {
  return native.renameNoReplacePathAsync(validateString(src, "src"), validateString(dst, "dst"));
}

/** The SPEC §3 name of {@link renameNoReplacePathAsync}. */
export const renameNoReplace: (src: string, dst: string) => Promise<NativeNoReplaceResult> =
  renameNoReplacePathAsync;

/** Publishes the directory `src` as `dst` with the mkdirat + renameat fallback
 * (for filesystems that refuse RENAME_NOREPLACE); never replaces anything. */
export function renameDirectoryNoReplacePath(src: string, dst: string): NativeNoReplaceResult {
  return native.renameDirectoryNoReplacePath(validateString(src, "src"), validateString(dst, "dst"));
}

/** {@link renameDirectoryNoReplacePath} off the JS thread. */
export async function renameDirectoryNoReplacePathAsync(src: string, dst: string): Promise<NativeNoReplaceResult> {
  return native.renameDirectoryNoReplacePathAsync(validateString(src, "src"), validateString(dst, "dst"));
}

/** Snapshots the directory tree at `path` (no-follow, never opens a FIFO, bounded). */
export function snapshotDirectoryTree(path: string): NativeDirectoryTreeResult {
  return native.snapshotDirectoryTree(validateString(path, "path"));
}

/** {@link snapshotDirectoryTree} off the JS thread. */
export async function snapshotDirectoryTreeAsync(path: string): Promise<NativeDirectoryTreeResult> {
  return native.snapshotDirectoryTreeAsync(validateString(path, "path"));
}

/** Removes the tree at `path` only if it is still exactly `snapshot`;
 * otherwise deletes nothing. */
export function exactRemoveDirectoryTree(path: string, snapshot: NativeDirectorySnapshot): NativeExactUnlinkResult {
  validateString(path, "path");
  validateSnapshotShape(snapshot);
  return native.exactRemoveDirectoryTree(path, snapshot);
}

/** {@link exactRemoveDirectoryTree} off the JS thread. */
export async function exactRemoveDirectoryTreeAsync(
  path: string,
  snapshot: NativeDirectorySnapshot,
): Promise<NativeExactUnlinkResult> {
  validateString(path, "path");
  validateSnapshotShape(snapshot);
  return native.exactRemoveDirectoryTreeAsync(path, snapshot);
}
