/**
 * exactlock — a cross-process lock for a file path.
 *
 * This facade validates arguments, applies defaults, wires AbortSignal and
 * shapes errors; the native core (Rust, ../native) does the locking. Test
 * seams live apart, in `exactlock/testing` (./testing.ts).
 */
export {
  acquireLock,
  acquireFileLock,
  withFileLock,
  acquireLockSync,
  withFileLockSync,
  type LockReleaseSync,
  processStartTime,
  FILE_LOCK_RELEASE_RETRY_ATTEMPTS,
  FILE_LOCK_RELEASE_RETRY_DELAY_MS,
  type LockRelease,
} from "./lock.js";
export {
  reapOrphanedLockStagingDirs,
  inspectFileLockStagingDir,
  fileLockStagingOwnerPid,
  type FileLockStagingResult,
  type FileLockStagingStatus,
  type FileLockStagingProbe,
} from "./debris.js";
export {
  FileLockAcquireError,
  FileLockError,
  describeHolder,
  type ErrnoCode,
  type FileLockErrorCode,
  type FileLockOwnCode,
  type HolderInfo,
  type LockReason,
  type LockState,
} from "./errors.js";
export type { ContendedHolder, FileLockOptions } from "./options.js";
export {
  readFileLockInfoForGc,
  readFileLockObservationForGc,
  removeFileLockDirForGc,
  genericFileLockDirStaleVerdict,
  genericFileLockDirIsStale,
  inspectLock,
  isLocked,
  type FileLockOwnerToken,
  type FileLockGcRemoval,
  type FileLockGcObservation,
  type GenericFileLockDirIdentity,
  type GenericFileLockDirStaleVerdict,
  type LockInspection,
  type LockLiveness,
  type InspectOptions,
} from "./gc.js";
export {
  probeFilesystem,
  type FilesystemClass,
  type FilesystemProbe,
  type FilesystemProbeFailure,
  type ProbeCall,
  type ProbeCallResult,
  type ProbeFailureCode,
  type ProbeInotify,
} from "./probe.js";
import * as native from "../native/index.js";

/** The version of the native core. */
export const nativeVersion: () => string = native.nativeVersion;
export * from "./primitives.js";
