/**
 * The options of an acquisition: their types, defaults and validation.
 * Every check runs before anything touches the disk.
 */
import type { FileLockError, HolderInfo } from "./errors.js";
import {
  validateHostIds,
  validateLockMode,
  validateNonNegative,
  validateOptionalBoolean,
  validateOptionalFunction,
  validateOptionalSignal,
  validateOptionsObject,
  validateRetries,
  validateTimeout,
} from "./validate.js";

export interface FileLockOptions {
  /** Only ownerless legacy lock directories age out, after this long. Default 10 000. */
  staleMs?: number;
  /**
   * With `retryDelayMs`, the waiting budget: `retries × retryDelayMs` ms.
   * Default 50. `Infinity` waits until the lock is won (or `signal` aborts).
   */
  retries?: number;
  /** The longest a waiter sleeps between looks when no event wakes it. Default 100. */
  retryDelayMs?: number;
  /**
   * The waiting budget in ms, instead of `retries × retryDelayMs` (which it
   * replaces: `retries` is not consulted): `0` makes one attempt, `Infinity`
   * waits until the lock is won. `retryDelayMs` stays only how often a waiter
   * looks when no event wakes it. Not set by default.
   */
  timeout?: number;
  /**
   * Abort while waiting: the acquisition rejects with `signal.reason`; a
   * signal from `AbortSignal.timeout()` rejects with a `FileLockAcquireError`
   * (`ELOCKED`) whose `cause` is that reason, as a spent budget does.
   */
  signal?: AbortSignal;
  /** Called once, right after the lock is published. If it throws, the lock is released and the error propagates. */
  onAcquired?: () => void;
  /**
   * Called at most once per acquisition, when it first finds the lock held
   * by someone else (another process, or another caller of this one) and
   * is about to wait: who holds it, as data and in words. If it throws, the
   * acquisition stops and rejects with that error.
   */
  onContended?: (holder: ContendedHolder) => void;
  /**
   * Called once if the held lock is removed or replaced by someone else
   * while held (proper-lockfile's name), with a `FileLockError` `EMISSING`
   * or `EOWNERCHANGED`; watched by inotify from acquisition to release. A
   * throw is an uncaught exception. `release.signal` tells the same.
   */
  onCompromised?: (error: FileLockError) => void;
  /** A stable identity of this host, for volumes shared between machines. */
  ownerHostId?: string;
  /** Earlier identities of THIS host, whose records count as local. */
  previousOwnerHostIds?: readonly string[];
  /**
   * Default true: while the lock is free, the acquisition's one attempt and
   * the release's first attempt run their few syscalls on the calling
   * thread (about 0.1 ms on a local disk) instead of a round trip through a
   * worker thread; anything that waits or retries runs off the thread
   * either way. Set false where one metadata call can take milliseconds
   * (network filesystems).
   */
  inlineFastPath?: boolean;
  /**
   * The lock directory's permission bits, made exact under any umask: `0o700`
   * by default (its record gets the same less every `x` and every `w` but the owner's: `0o600`), and so do
   * the parent directories an acquisition creates. A lock shared by several
   * users passes the same group mode in every process (`0o770`: each user's
   * waiter can read another's record, wait for a live holder and reclaim a
   * dead one; the users share a group, e.g. through a setgid directory). It
   * must keep the owner's `rwx` (`0o700`–`0o777`).
   */
  mode?: number;
  /**
   * Gives the lock a fencing token once won: `release.fence` (and
   * `lock.fence` in `withFileLock`), a `bigint` strictly greater than every
   * earlier fenced acquisition's of this path — across processes, crashes,
   * reboots and hosts sharing the volume — and never handed out twice. Pass
   * it to the storage you write under the lock, which rejects a write whose
   * token is below the largest it has seen: a holder whose lock was lost
   * (removed by hand, a network partition, a paused VM) cannot overwrite its
   * successor's work. Kept in `F.lock.fence/` beside the lock; costs a rename
   * and an `fsync` per acquisition (the token is on disk before it is
   * handed out). Default false.
   */
  fence?: boolean;
}

/** The holder an acquisition found: the core's description, and the same in words. */
export type ContendedHolder = HolderInfo & { description: string };

/** Every key of {@link FileLockOptions}: any other is an error, not ignored. */
export const FILE_LOCK_OPTION_KEYS = [
  "staleMs",
  "retries",
  "retryDelayMs",
  "timeout",
  "signal",
  "onAcquired",
  "onContended",
  "onCompromised",
  "ownerHostId",
  "previousOwnerHostIds",
  "inlineFastPath",
  "mode",
  "fence",
] as const satisfies readonly (keyof FileLockOptions)[];

export const DEFAULT_STALE_MS = 10_000;
export const DEFAULT_RETRIES = 50;
export const DEFAULT_RETRY_DELAY_MS = 100;

/** Options after validation, with defaults applied. */
export interface ResolvedOptions {
  staleMs: number;
  retries: number;
  retryDelayMs: number;
  timeout?: number;
  signal?: AbortSignal;
  onAcquired?: () => void;
  onContended?: (holder: ContendedHolder) => void;
  onCompromised?: (error: FileLockError) => void;
  ownerHostId?: string;
  previousOwnerHostIds: string[];
  inlineFastPath: boolean;
  mode?: number;
  fence: boolean;
}

/** Validates `options` and applies the defaults. */
export function resolveOptions(options: FileLockOptions | undefined): ResolvedOptions {
  const given = validateOptionsObject(options, "options", FILE_LOCK_OPTION_KEYS);
  const resolved: ResolvedOptions = {
    staleMs: validateNonNegative(given.staleMs, "staleMs", DEFAULT_STALE_MS),
    retries: validateRetries(given.retries, DEFAULT_RETRIES),
    retryDelayMs: validateNonNegative(given.retryDelayMs, "retryDelayMs", DEFAULT_RETRY_DELAY_MS),
    ...validateHostIds(given.ownerHostId, given.previousOwnerHostIds),
    inlineFastPath: validateOptionalBoolean(given.inlineFastPath, "inlineFastPath") ?? true,
    fence: validateOptionalBoolean(given.fence, "fence") ?? false,
  };
  const timeout = validateTimeout(given.timeout);
  if (timeout !== undefined) resolved.timeout = timeout;
  const signal = validateOptionalSignal(given.signal, "signal");
  if (signal) resolved.signal = signal;
  const onAcquired = validateOptionalFunction<() => void>(given.onAcquired, "onAcquired");
  if (onAcquired) resolved.onAcquired = onAcquired;
  const onContended = validateOptionalFunction<(holder: ContendedHolder) => void>(given.onContended, "onContended");
  if (onContended) resolved.onContended = onContended;
  const onCompromised = validateOptionalFunction<(error: FileLockError) => void>(given.onCompromised, "onCompromised");
  if (onCompromised) resolved.onCompromised = onCompromised;
  const mode = validateLockMode(given.mode);
  if (mode !== undefined) resolved.mode = mode;
  return resolved;
}
