/**
 * The options of an acquisition: their types, defaults and validation.
 * Every check runs before anything touches the disk.
 */
import * as path from "node:path";
import { argumentError } from "./errors.js";

export interface FileLockOptions {
  /** Only ownerless legacy lock directories age out, after this long. Default 10 000. */
  staleMs?: number;
  /** With `retryDelayMs`, the waiting budget: `retries × retryDelayMs` ms. Default 50. */
  retries?: number;
  /** The longest a waiter sleeps between looks when no event wakes it. Default 100. */
  retryDelayMs?: number;
  /** Abort while waiting: the acquisition rejects with `signal.reason`. */
  signal?: AbortSignal;
  /** Called once, right after the lock is published. If it throws, the lock is released and the error propagates. */
  onAcquired?: () => void;
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
}

export const DEFAULT_STALE_MS = 10_000;
export const DEFAULT_RETRIES = 50;
export const DEFAULT_RETRY_DELAY_MS = 100;

/** Options after validation, with defaults applied. */
export interface ResolvedOptions {
  staleMs: number;
  retries: number;
  retryDelayMs: number;
  signal?: AbortSignal;
  onAcquired?: () => void;
  ownerHostId?: string;
  previousOwnerHostIds: string[];
  inlineFastPath: boolean;
}

/** `filePath` must be a non-empty absolute path without NUL. */
export function validateFilePath(filePath: unknown, name = "filePath"): string {
  if (typeof filePath !== "string" || filePath.length === 0 || !path.isAbsolute(filePath)) {
    throw argumentError(`${name} must be a non-empty absolute path`);
  }
  if (filePath.includes("\0")) {
    throw argumentError(`${name} must not contain NUL bytes`);
  }
  return filePath;
}

function nonNegative(value: unknown, name: string, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== "number" || !Number.isFinite(value) || value < 0) {
    throw argumentError(`${name} must be a finite number >= 0`);
  }
  return value;
}

/** Validates the host identity options. */
export function validateHostIds(
  ownerHostId: unknown,
  previousOwnerHostIds: unknown,
): { ownerHostId?: string; previousOwnerHostIds: string[] } {
  if (ownerHostId !== undefined && (typeof ownerHostId !== "string" || ownerHostId.length === 0)) {
    throw argumentError("ownerHostId must be non-empty");
  }
  let previous: string[] = [];
  if (previousOwnerHostIds !== undefined) {
    if (!Array.isArray(previousOwnerHostIds)) {
      throw argumentError("previousOwnerHostIds must be an array of non-empty identities");
    }
    for (const id of previousOwnerHostIds) {
      if (typeof id !== "string" || id.length === 0) {
        throw argumentError("previousOwnerHostIds must contain only non-empty identities");
      }
    }
    previous = [...previousOwnerHostIds];
  }
  return ownerHostId === undefined ? { previousOwnerHostIds: previous } : { ownerHostId, previousOwnerHostIds: previous };
}

/** Validates `options` and applies the defaults. */
export function resolveOptions(options: FileLockOptions | undefined): ResolvedOptions {
  if (options !== undefined && (options === null || typeof options !== "object")) {
    throw argumentError("options must be an object");
  }
  const given = options ?? {};
  const resolved: ResolvedOptions = {
    staleMs: nonNegative(given.staleMs, "staleMs", DEFAULT_STALE_MS),
    retries: nonNegative(given.retries, "retries", DEFAULT_RETRIES),
    retryDelayMs: nonNegative(given.retryDelayMs, "retryDelayMs", DEFAULT_RETRY_DELAY_MS),
    ...validateHostIds(given.ownerHostId, given.previousOwnerHostIds),
    inlineFastPath: true,
  };
  if (given.inlineFastPath !== undefined) {
    if (typeof given.inlineFastPath !== "boolean") throw argumentError("inlineFastPath must be a boolean");
    resolved.inlineFastPath = given.inlineFastPath;
  }
  if (given.signal !== undefined) {
    const signal = given.signal as unknown;
    if (
      signal === null ||
      typeof signal !== "object" ||
      typeof (signal as AbortSignal).aborted !== "boolean" ||
      typeof (signal as AbortSignal).addEventListener !== "function"
    ) {
      throw argumentError("signal must be an AbortSignal");
    }
    resolved.signal = given.signal;
  }
  if (given.onAcquired !== undefined) {
    if (typeof given.onAcquired !== "function") throw argumentError("onAcquired must be a function");
    resolved.onAcquired = given.onAcquired;
  }
  return resolved;
}
