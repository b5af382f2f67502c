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
  tryAcquireLock,
  withFileLock,
  type HeldFileLock,
  acquireLockSync,
  withFileLockSync,
  type LockReleaseSync,
  processStartTime,
  FILE_LOCK_RELEASE_RETRY_ATTEMPTS,
  FILE_LOCK_RELEASE_RETRY_DELAY_MS,
  type LockRelease,
} from "./lock.js";
export {
  updateFile,
  updateFileSync,
  updateJson,
  updateJsonSync,
  FileUpdateError,
  type UpdateFileOptions,
  type UpdateJsonOptions,
  type UpdateContent,
  type UpdateResult,
  type UpdateStep,
  type JsonUpdater,
} from "./update.js";
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
import { native } from "./native.js";

/** The version of the native core. */
export const nativeVersion: () => string = native.nativeVersion;
/**
 * The kernel mechanisms the native core uses: `"linux"` (inotify, pidfd,
 * /proc, openat2, renameat2), `"macos"` (kqueue, proc_pidinfo,
 * renameatx_np), `"windows"` (handle-relative NtCreateFile and
 * FileRenameInformation, ReadDirectoryChangesW, process handles and creation
 * times), or `"portable"` when `EXACTLOCK_PLATFORM=portable` forced the
 * portable ones on Linux or macOS (timer waits, kill(pid, 0), mkdir/link claims).
 */
export const nativePlatform: () => "linux" | "macos" | "windows" | "portable" = native.nativePlatform;
export * from "./primitives.js";
