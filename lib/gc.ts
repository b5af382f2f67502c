/**
 * Read-only inspection and identity-bound removal, for status displays and
 * garbage collectors. Nothing here removes by pathname alone.
 */
import type * as Binding from "../native/index.js";
import { native } from "./native.js";
import { describeHolder, errorFromFailure, type LockLiveness, type LockReason, type LockState } from "./errors.js";
import { DEFAULT_STALE_MS, FILE_LOCK_OPTION_KEYS } from "./options.js";
import {
  validateDirIdentity,
  validateFilePath,
  validateLockFilePath,
  validateHostIds,
  validateNonNegative,
  validateOptionsObject,
  validateOwnerToken,
} from "./validate.js";

export interface FileLockOwnerToken {
  pid: number;
  start_time?: string;
  start_time_format?: string;
  /** Upstream 0.17's clock-independent incarnation (`linux:<start ticks>`). */
  process_incarnation?: string;
  owner_host_id?: string;
  owner_token?: string;
  timestamp: number;
  /** The kernel's boot id when the record was written. */
  boot_id?: string;
  /** The start in clock ticks since boot (another writer's spelling of the incarnation). */
  start_ticks?: number;
  /** The writer's pid namespace (decimal inode number). */
  pid_ns?: string;
}

export interface GenericFileLockDirIdentity {
  rootDev: string;
  rootIno: string;
  infoDev: string;
  infoIno: string;
  infoNlink: string;
  infoSize: string;
  infoMtimeNs: string;
  infoCtimeNs: string;
  infoSha256: string;
}

export type FileLockGcRemoval = "removed" | "owner_changed" | "missing" | "cleanup_failed";

export type GenericFileLockDirStaleVerdict = { stale: false } | { stale: true; identity: GenericFileLockDirIdentity };

export interface FileLockGcObservation {
  info: FileLockOwnerToken;
  bytes: Buffer;
  identity: GenericFileLockDirIdentity;
}

/**
 * Removal authority: the identity observed for an owner object returned by
 * an observation. Keyed by the object itself, so a plain object built by
 * hand (or a copy) carries no authority.
 */
const authority = new WeakMap<object, GenericFileLockDirIdentity>();

function dropUndefined(record: Binding.OwnerRecordJs): FileLockOwnerToken {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(record)) if (value !== undefined && value !== null) out[key] = value;
  return out as unknown as FileLockOwnerToken;
}

/** The valid owner record at `lockDir`, its bytes and identity, or `null`. */
export async function readFileLockObservationForGc(lockDir: string): Promise<FileLockGcObservation | null> {
  const path = validateFilePath(lockDir, "lockDir");
  const result = await native.readLockObservationNative(path);
  if (result.failure) throw errorFromFailure(result.failure);
  if (!result.observation) return null;
  const info = dropUndefined(result.observation.info);
  const identity = result.observation.identity;
  authority.set(info, identity);
  return { info, bytes: result.observation.bytes, identity };
}

/** The valid owner record at `lockDir`, or `null`. */
export async function readFileLockInfoForGc(lockDir: string): Promise<FileLockOwnerToken | null> {
  return (await readFileLockObservationForGc(lockDir))?.info ?? null;
}

/**
 * Removes `lockDir` only if it still holds the `expected` owner generation
 * and is still exactly the object observed before the decision
 * (`preVerdictIdentity`, or the identity recorded when `expected` was read).
 */
export async function removeFileLockDirForGc(
  lockDir: string,
  expected: FileLockOwnerToken,
  preVerdictIdentity?: GenericFileLockDirIdentity,
): Promise<FileLockGcRemoval> {
  const path = validateFilePath(lockDir, "lockDir");
  validateOwnerToken(expected, "expected");
  if (preVerdictIdentity !== undefined) validateDirIdentity(preVerdictIdentity, "preVerdictIdentity");
  const identity = preVerdictIdentity ?? authority.get(expected);
  // Without an identity nothing is removed: the answer is only `missing`
  // (nothing there) or `owner_changed`.
  const removal = await native.removeLockDirForGcNative(path, expected as Binding.OwnerRecordJs, identity);
  return removal as FileLockGcRemoval;
}

/** Whether a waiter would reclaim `lockDir` now, with the identity judged. */
export async function genericFileLockDirStaleVerdict(
  lockDir: string,
  staleMs: number = DEFAULT_STALE_MS,
  ownerHostId?: string,
  previousOwnerHostIds?: readonly string[],
): Promise<GenericFileLockDirStaleVerdict> {
  const path = validateFilePath(lockDir, "lockDir");
  const ms = validateNonNegative(staleMs, "staleMs", DEFAULT_STALE_MS);
  const hosts = validateHostIds(ownerHostId, previousOwnerHostIds);
  const result = await native.staleVerdictNative(path, ms, hosts.ownerHostId, hosts.previousOwnerHostIds);
  if (result.failure) throw errorFromFailure(result.failure);
  return result.stale && result.identity ? { stale: true, identity: result.identity } : { stale: false };
}

/** Whether a waiter would reclaim `lockDir` now. */
export async function genericFileLockDirIsStale(
  lockDir: string,
  staleMs: number = DEFAULT_STALE_MS,
  ownerHostId?: string,
): Promise<boolean> {
  return (await genericFileLockDirStaleVerdict(lockDir, staleMs, ownerHostId)).stale;
}

export type { LockLiveness };

export interface LockInspection {
  filePath: string;
  lockPath: string;
  state: LockState;
  /** The holder's record, when there is a valid one. */
  holder?: {
    pid: number;
    liveness: LockLiveness;
    since: string;
    startTime?: string;
    ownerToken?: string;
    ownerHostId?: string;
    foreign: boolean;
  };
  /** Whether a waiter with the same options would reclaim it now, and why. */
  stale: boolean;
  reason: LockReason;
  /** One sentence, as an error message would put it. */
  description: string;
  /** The last fencing token handed out for this lock, if it was ever acquired with `fence: true`. */
  fence?: bigint;
}

export interface InspectOptions {
  staleMs?: number;
  ownerHostId?: string;
  previousOwnerHostIds?: readonly string[];
}

/** Who holds the lock for `filePath`, whether they are alive, and whether a waiter would reclaim it. Read-only. */
export async function inspectLock(filePath: string | URL, options?: InspectOptions): Promise<LockInspection> {
  const path = validateLockFilePath(filePath);
  // An acquisition's options object may be shared with inspectLock: its
  // keys are known here too (and ignored); any other is an error.
  const given = validateOptionsObject(options, "options", FILE_LOCK_OPTION_KEYS);
  const staleMs = validateNonNegative(given.staleMs, "staleMs", DEFAULT_STALE_MS);
  const hosts = validateHostIds(given.ownerHostId, given.previousOwnerHostIds);
  const result = await native.inspectLockNative(path, staleMs, hosts.ownerHostId, hosts.previousOwnerHostIds);
  if (result.failure || !result.holder) throw errorFromFailure(result.failure!);
  const info = result.holder;
  const inspection: LockInspection = {
    filePath: path,
    lockPath: result.lockPath,
    state: info.state as LockInspection["state"],
    stale: info.stale,
    reason: info.reason as LockReason,
    description: info.state === "free" ? "free" : describeHolder(info, hosts.ownerHostId !== undefined),
  };
  if (result.fence != null) inspection.fence = BigInt(result.fence);
  if (info.state === "record" && info.pid != null && info.timestamp != null) {
    inspection.holder = {
      pid: info.pid,
      liveness: (info.liveness ?? "unknown") as LockLiveness,
      since: new Date(info.timestamp).toISOString(),
      foreign: info.foreign,
      ...(info.startTime ? { startTime: info.startTime } : {}),
      ...(info.ownerToken ? { ownerToken: info.ownerToken } : {}),
      ...(info.ownerHostId ? { ownerHostId: info.ownerHostId } : {}),
    };
  }
  return inspection;
}

/**
 * Whether an acquisition of `filePath` would have to wait now: something is
 * at the lock path that a waiter would not reclaim (a live or unprovable
 * holder, a fresh ownerless directory, something that is not a lock).
 * False when the lock is free or provably stale. A snapshot: by the time it
 * returns, the answer may have changed; use it to report, never to decide
 * whether to acquire.
 */
export async function isLocked(filePath: string | URL, options?: InspectOptions): Promise<boolean> {
  const inspection = await inspectLock(filePath, options);
  return inspection.state !== "free" && !inspection.stale;
}
