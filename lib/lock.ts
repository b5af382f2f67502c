/**
 * acquireLock / withFileLock: validate, wire the AbortSignal, call the
 * native core, shape its answer. Read top to bottom, one step per function.
 */
import * as native from "../native/index.js";
import { argumentError, FileLockAcquireError, FileLockError, errorFromFailure } from "./errors.js";
import { type FileLockOptions, type ResolvedOptions, resolveOptions } from "./options.js";
import { validateCount, validateFilePath, validateFunction, validateOptionalCount, validateString } from "./validate.js";

/** Releases the lock; also `await using`-disposable. */
export type LockRelease = (() => Promise<void>) & AsyncDisposable;

export const FILE_LOCK_RELEASE_RETRY_ATTEMPTS = 5;
export const FILE_LOCK_RELEASE_RETRY_DELAY_MS = 10;

/** Test seams. */
export const FileLockTestHooks: {
  /** Awaited in each attempt, after the lock's parent exists and before publication. */
  afterParentMkdir?: (lockPath: string) => void | Promise<void>;
} = {};

/** Makes a native step fail with an errno-style code, `times` times or always (tests only). */
export function injectFaultForTesting(step: string, code: string, times?: number): void {
  validateString(step, "step");
  validateString(code, "code");
  validateOptionalCount(times, "times");
  if (!native.injectFaultForTesting(step, code, times)) {
    throw argumentError(
      `step and code must name a known fault step and errno code; received ${JSON.stringify(step)} and ${JSON.stringify(code)}`,
    );
  }
}

/**
 * Makes a native step (`attempt`, `release`, `parent.created`) stall for
 * `ms` milliseconds on lock or directory names containing `only`, `times`
 * times or always (tests only): a slow filesystem, or a window for a race.
 */
export function injectDelayForTesting(step: string, ms: number, only?: string, times?: number): void {
  validateString(step, "step");
  const delay = validateCount(ms, "ms");
  if (only !== undefined) validateString(only, "only");
  validateOptionalCount(times, "times");
  if (!native.injectDelayForTesting(step, delay, only, times)) {
    throw argumentError(`step must name a known delay step; received ${JSON.stringify(step)}`);
  }
}

/** Disarms every injected fault and delay (tests only). */
export function clearFaultsForTesting(): void {
  native.clearFaultsForTesting();
}

function abortReason(signal: AbortSignal): unknown {
  return signal.reason ?? new Error("File lock acquisition aborted");
}

/** Arms a native cancel token that fires when `signal` aborts. */
function wireSignal(signal: AbortSignal | undefined): { token?: number; unwire: () => void } {
  if (!signal) return { unwire: () => {} };
  const token = native.createCancelToken();
  const onAbort = () => native.cancelAcquire(token);
  signal.addEventListener("abort", onAbort, { once: true });
  return { token, unwire: () => signal.removeEventListener("abort", onAbort) };
}

/** The test hook as the native core calls it; remembers what it threw. */
function hookFor(thrown: { error?: unknown }): ((lockPath: string) => Promise<void>) | undefined {
  const hook = FileLockTestHooks.afterParentMkdir;
  if (!hook) return undefined;
  return async (lockPath: string) => {
    try {
      await hook(lockPath);
    } catch (error) {
      thrown.error = error;
      throw error;
    }
  };
}

function makeRelease(generation: string, lockPath: string, inline: boolean): LockRelease {
  let inflight: Promise<void> | undefined;
  const release = (() => {
    inflight ??= releaseGeneration(generation, lockPath, inline).finally(() => {
      inflight = undefined;
    });
    return inflight;
  }) as LockRelease;
  release[Symbol.asyncDispose] = release;
  return release;
}

/** Releases: a first attempt on this thread when `inline`, the retries off it. */
async function releaseGeneration(generation: string, lockPath: string, inline: boolean): Promise<void> {
  let failure: native.LockFailure | null | undefined;
  const first = inline ? native.releaseFirstAttemptNative(generation) : undefined;
  if (first?.done) failure = first.failure;
  else failure = await native.releaseLockNative(generation, first !== undefined && !first.deferred);
  if (failure) throw errorFromFailure({ ...failure, lockPath: failure.lockPath ?? lockPath });
}

function acquireError(
  filePath: string,
  options: ResolvedOptions,
  failure: native.LockFailure,
  signal: AbortSignal | undefined,
  hookError: unknown,
): unknown {
  if (failure.code === "ABORT_ERR" && signal) return abortReason(signal);
  if (failure.code === "EHOOK" && hookError !== undefined) return hookError;
  if (failure.code === "ELOCKED") {
    return new FileLockAcquireError(
      filePath,
      failure.lockPath ?? `${filePath}.lock`,
      failure.attempts ?? 0,
      failure.holder ?? undefined,
      options.ownerHostId !== undefined,
    );
  }
  return errorFromFailure(failure);
}

/**
 * Acquires the lock for `filePath` (the directory `filePath.lock`) and
 * resolves to the function that releases it.
 */
export async function acquireLock(filePath: string, options?: FileLockOptions): Promise<LockRelease> {
  const path = validateFilePath(filePath);
  const resolved = resolveOptions(options);
  const { signal } = resolved;
  if (signal?.aborted) throw abortReason(signal);
  const request: native.AcquireRequest = {
    filePath: path,
    retries: resolved.retries,
    retryDelayMs: resolved.retryDelayMs,
    staleMs: resolved.staleMs,
    ownerHostId: resolved.ownerHostId,
    previousOwnerHostIds: resolved.previousOwnerHostIds,
  };
  const thrown: { error?: unknown } = {};
  const result = firstAttempt(request, resolved) ?? (await waitForLock(request, signal, thrown));
  if (!result.lock) {
    throw acquireError(path, resolved, result.failure!, signal, thrown.error);
  }
  const release = makeRelease(result.lock.generation, result.lock.lockPath, resolved.inlineFastPath);
  if (resolved.onAcquired) await runOnAcquired(resolved.onAcquired, release);
  return release;
}

/**
 * The one attempt on this thread, when allowed: its result, or undefined
 * when the lock is not free (the test hook must be awaited, so it turns
 * the fast path off).
 */
function firstAttempt(request: native.AcquireRequest, options: ResolvedOptions): native.AcquireResult | undefined {
  if (!options.inlineFastPath || FileLockTestHooks.afterParentMkdir) return undefined;
  const result = native.acquireFirstAttemptNative(request);
  return result.lock || result.failure ? result : undefined;
}

/** The full acquisition off this thread: attempts, judging, waiting. */
async function waitForLock(
  request: native.AcquireRequest,
  signal: AbortSignal | undefined,
  thrown: { error?: unknown },
): Promise<native.AcquireResult> {
  const wiring = wireSignal(signal);
  try {
    return await native.acquireLockNative({ ...request, cancelToken: wiring.token }, hookFor(thrown));
  } finally {
    wiring.unwire();
  }
}

/** The later upstream name of {@link acquireLock}. */
export const acquireFileLock = acquireLock;

async function runOnAcquired(onAcquired: () => void, release: LockRelease): Promise<void> {
  try {
    onAcquired();
  } catch (error) {
    try {
      await release();
    } catch (releaseError) {
      throw new AggregateError([error, releaseError], "onAcquired and the release that followed both failed.");
    }
    throw error;
  }
}

/**
 * Runs `fn` while holding the lock for `filePath`, and releases it whether
 * `fn` resolves or throws.
 */
export async function withFileLock<T>(filePath: string, fn: () => Promise<T>, options?: FileLockOptions): Promise<T> {
  validateFunction(fn, "fn");
  const release = await acquireLock(filePath, options);
  let result: T;
  try {
    result = await fn();
  } catch (operationError) {
    try {
      await release();
    } catch (releaseError) {
      throw new AggregateError([operationError, releaseError], "File lock operation and release both failed.");
    }
    throw operationError;
  }
  await release();
  return result;
}

/**
 * `processStartTime(pid)`: as `ps -o lstart=` prints it under `LC_ALL=C TZ=UTC`, or `null`.
 * Never throws: like the original, a `pid` that is no pid (not a number, not a
 * positive integer up to 2^31 − 1) answers `null`, as a pid that is gone does.
 */
export function processStartTime(pid: number): string | null {
  if (typeof pid !== "number") return null;
  return native.processStartTime(pid) ?? null;
}

export { FileLockError };
