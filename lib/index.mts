/**
 * exactlock's entry for `import`: the CommonJS build (./index.js), loaded
 * with `require`, its names exported again.
 *
 * Why not let Node import ./index.js itself: an ES module that imports a
 * CommonJS file makes Node lex that file's source, and every file it
 * re-exports, for the names it exports (cjs-module-lexer); a `require` reads
 * none of that. Measured here: an `import` of the package 22 ms through the
 * lexer, 16 ms through this entry, 15 ms for a bare `require`. A CLI that
 * locks a file pays it at every start.
 *
 * One instance either way: `import` and `require` in one process get the
 * same functions, the same in-process lock table (no dual-package hazard).
 * A name of ./index.js missing below fails `__test__/esm.test.ts`; one
 * listed that it lacks fails to compile. Types come from ./index.d.ts for
 * both entries (package.json), with their docs: what this file exports is
 * what Node's own import of ./index.js gave, named exports and a default
 * that is the whole API.
 */
import { createRequire } from "node:module";
import type * as Api from "./index.js";

const api: typeof Api = createRequire(import.meta.url)("./index.js");

/** The whole API, as `import exactlock from "exactlock"` gave it before. */
export default api;

export const {
  acquireLock,
  acquireFileLock,
  tryAcquireLock,
  withFileLock,
  acquireLockSync,
  withFileLockSync,
  processStartTime,
  FILE_LOCK_RELEASE_RETRY_ATTEMPTS,
  FILE_LOCK_RELEASE_RETRY_DELAY_MS,
  reapOrphanedLockStagingDirs,
  inspectFileLockStagingDir,
  fileLockStagingOwnerPid,
  FileLockAcquireError,
  FileLockError,
  describeHolder,
  readFileLockInfoForGc,
  readFileLockObservationForGc,
  removeFileLockDirForGc,
  genericFileLockDirStaleVerdict,
  genericFileLockDirIsStale,
  inspectLock,
  isLocked,
  probeFilesystem,
  nativeVersion,
  nativePlatform,
  renameNoReplace,
  renameNoReplacePath,
  renameNoReplacePathAsync,
  renameDirectoryNoReplacePath,
  renameDirectoryNoReplacePathAsync,
  snapshotDirectoryTree,
  snapshotDirectoryTreeAsync,
  exactRemoveDirectoryTree,
  exactRemoveDirectoryTreeAsync,
} = api;
