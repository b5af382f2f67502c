/**
 * acquireLock / withFileLock: validate, wire the AbortSignal, call the
 * native core, shape its answer. Read top to bottom, one step per function.
 *
 * The functions a lock passes through between its taking and its caller's
 * code (`settleContended`, `makeRelease`, `equipRelease`, `runOnAcquired`,
 * `heldFileLock`; `startHolding` in ./chain.ts) are written as
 * parenthesized function expressions: V8 compiles those when the module
 * loads, where it compiles a plain declaration at its first call. A
 * process that takes a lock soon after loading us (a CLI, a fresh waiter)
 * pays the same either way, but before it holds anything, not with its
 * first lock held and its waiters waiting (about 110 µs of a fresh
 * waiter's crash recovery: bench/RESULTS.md, twelfth round). One that
 * never takes a lock asynchronously pays about 0.1 ms at the import for
 * nothing; and V8 drops the bytecode of functions left unused over
 * several full garbage collections, so a process whose first lock comes
 * long after the import may compile them again then, as before.
 */
import type * as Binding from "../native/index.js";
import { holdsSettledBeforeNow, locksHeldByChain, prepareChain, runHoldingSync, startHolding } from "./chain.js";
import { native } from "./native.js";
import {
  argumentError,
  describeHolder,
  FileLockAcquireError,
  FileLockError,
  errorFromFailure,
  holderInfoOf,
  invalidThisError,
  releaseErrorFromFailure,
} from "./errors.js";
import { type FileLockOptions, type ResolvedOptions, resolveOptions } from "./options.js";
import { validateCount, validateFunction, validateLockFilePath, validateOptionalCount, validateString } from "./validate.js";

/**
 * Releases the lock; also `await using`-disposable (a disposal after a
 * release call that is done adds nothing: releasing early inside the block
 * is no error at its end; after a transient failure it releases again).
 * Its `signal` aborts —
 * with a {@link FileLockError} `EMISSING` (removed) or `EOWNERCHANGED`
 * (replaced) — the moment someone else removes or replaces the held lock;
 * it is watched (inotify) only once `signal` is read, until the release.
 */
export type LockRelease = (() => Promise<void>) & AsyncDisposable & { readonly signal: AbortSignal };

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
 * Makes a native step (`attempt`, `release`, `parent.created`,
 * `publish.unwritten`: a staging directory made but its record not yet
 * written, `release.detach`: a release that has looked at the lock name
 * and is about to free it, `release.detached`: the lock name freed by a release, its
 * directory not yet removed, `acquire.answered`: the thread of an
 * acquisition that waited, after it answered its caller, `gc.judged`: a
 * `removeFileLockDirForGc` that has observed the lock and not yet begun to
 * remove it) stall for `ms` milliseconds on lock or directory names
 * containing `only`, `times` times or always (tests only): a slow
 * filesystem, or a window for a race. One step is a length of time, not a
 * stall: `acquire.elder_grace`, how long a waiter woken by the free name
 * lets the waiters of other processes that staged before it take the lock
 * (2 ms by default).
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

/** The reason `AbortSignal.timeout()` aborts with: a DOMException named TimeoutError. */
function isTimeoutReason(reason: unknown): boolean {
  return typeof DOMException === "function" && reason instanceof DOMException && reason.name === "TimeoutError";
}

function abortReason(signal: AbortSignal): unknown {
  return signal.reason ?? new Error("File lock acquisition aborted");
}

/**
 * The waits under each AbortSignal, and the one listener that cancels them
 * all: a signal shared by many waits (an application's shutdown signal) gets
 * one listener, not one per wait, which past ten made Node print a
 * `MaxListenersExceededWarning` about a leak there was not.
 */
const waitsUnder = new WeakMap<AbortSignal, { tokens: Set<number>; onAbort: () => void }>();

/**
 * Arms a native cancel token that fires when `signal` aborts; also when
 * `needed` without a signal (a callback that may stop the acquisition).
 */
function wireSignal(signal: AbortSignal | undefined, needed: boolean): { token?: number; unwire: () => void } {
  if (!signal && !needed) return { unwire: () => {} };
  const token = native.createCancelToken();
  if (!signal) return { token, unwire: () => {} };
  let waits = waitsUnder.get(signal);
  if (!waits) {
    const tokens = new Set<number>();
    const onAbort = () => {
      for (const waiting of tokens) native.cancelAcquire(waiting);
    };
    signal.addEventListener("abort", onAbort, { once: true });
    waits = { tokens, onAbort };
    waitsUnder.set(signal, waits);
  }
  const wired = waits;
  wired.tokens.add(token);
  return {
    token,
    unwire: () => {
      wired.tokens.delete(token);
      if (wired.tokens.size > 0 || waitsUnder.get(signal) !== wired) return;
      signal.removeEventListener("abort", wired.onAbort);
      waitsUnder.delete(signal);
    },
  };
}

/**
 * `onContended` as the core calls it (on this thread, never awaited): with
 * the holder in words too; a throw stops the acquisition with that error.
 */
function contendedFor(
  options: ResolvedOptions,
  token: number | undefined,
  thrown: Thrown,
): ((holder: Binding.HolderInfo) => void) | undefined {
  const { onContended } = options;
  if (!onContended) return undefined;
  const hostAware = options.ownerHostId !== undefined;
  return (holder: Binding.HolderInfo) => {
    // Once, and only while the acquisition is pending: a call queued
    // before the outcome but delivered after it is dropped (the outcome
    // then tells the caller, see settleContended).
    if (thrown.contendedCalled || thrown.settled) return;
    thrown.contendedCalled = true;
    try {
      onContended({ ...holderInfoOf(holder), description: describeHolder(holder, hostAware) });
    } catch (error) {
      thrown.contended = error ?? new Error("onContended threw a nullish value");
      if (token !== undefined) native.cancelAcquire(token);
    }
  };
}

/** What the callbacks of one acquisition threw, and whether its outcome is known. */
interface Thrown {
  error?: unknown;
  contended?: unknown;
  contendedCalled?: boolean;
  settled?: boolean;
}

/**
 * Settles `onContended` with the outcome: the core tells the callback from
 * another thread and does not wait for it, so the outcome can arrive
 * first. A budget spent on a holder it was never told about tells it now;
 * a throw wins over any outcome (a lock won meanwhile is given back).
 */
const settleContended = (function settleContended(
  result: Binding.AcquireResult,
  contended: ((holder: Binding.HolderInfo) => void) | undefined,
  thrown: Thrown,
  inline: boolean,
): Promise<never> | undefined {
  if (contended && !thrown.contendedCalled && result.failure?.code === "ELOCKED" && result.failure.holder) {
    contended(result.failure.holder);
  }
  thrown.settled = true;
  // Nothing thrown (the common case): no promise, so a lock that was waited
  // for reaches its caller without one more turn of the microtask queue.
  if (thrown.contended === undefined) return undefined;
  return giveBackAndThrow(result, thrown.contended, inline);
});

/** A lock won while `onContended` threw goes back; then the throw is the outcome. */
async function giveBackAndThrow(result: Binding.AcquireResult, error: unknown, inline: boolean): Promise<never> {
  if (result.lock) {
    await releaseGeneration(result.lock.generation, result.lock.lockPath, inline).catch(() => {});
  }
  throw error;
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

/**
 * Every key `await using` (`name` "asyncDispose") or `using` ("dispose")
 * may look a disposer up by: this realm's symbol, Node's own registered
 * key, and the key TypeScript's and esbuild's downlevel helpers fall back
 * to in a realm that lacks the symbol (vitest's vmThreads/vmForks pools on
 * Node 20).
 */
function disposeKeys(own: symbol | undefined, name: string): readonly symbol[] {
  const keys = [own, Symbol.for(`nodejs.${name}`), Symbol.for(`Symbol.${name}`)];
  return [...new Set(keys.filter((key): key is symbol => typeof key === "symbol"))];
}

/**
 * How a release call ended, as a later disposal sees it: `"done"` when
 * nothing is left to do (released, or the lock is gone or someone else's,
 * or another release has it), `"retry"` when it failed transiently and the
 * lock stays fenced to this generation, which another call retries.
 */
type Ending = "done" | "retry";

/** The codes after which a release has nothing left to retry. */
const FINAL_RELEASE_CODES = new Set(["ERELEASED", "ERELEASING", "EMISSING", "EOWNERCHANGED", "EFOREIGN"]);

function endingOf(error: unknown): Ending {
  return error instanceof FileLockError && FINAL_RELEASE_CODES.has(error.code) ? "done" : "retry";
}

/** What the shared prototype knows of one release function (see {@link equipRelease}). */
interface Equipped {
  /** Its loss watch, which watches nothing until `signal` is read; the release stops it first. */
  readonly listeners: LossListeners;
  /**
   * How its last call ended, set by the release itself once it has: a
   * disposal after a call that is done adds nothing, so a lock released
   * early inside a `using` block is no error at the block's end (disposal
   * is idempotent, as TC39's proposal advises); after a transient failure
   * it releases again, which retries, as a second call would.
   */
  called?: Ending;
  /** An async release's call still in flight (which `called` is set by), for a disposal to wait out. */
  ending?: Promise<void>;
  /** Its disposer, made the first time a dispose key is read. */
  disposer?: () => unknown;
}

const EQUIPPED = new WeakMap<object, Equipped>();

/**
 * What `receiver`, a release function, is equipped with. Read through
 * anything but a release itself (a bound copy, a proxy, an object made
 * from it) there is nothing to hand out: a throw, as Node's own getters
 * do, not an `undefined` that a `fetch({ signal })` would take for "never
 * aborts", nor a disposal that is not the release's own.
 */
function equippedOf(receiver: object, what: string): Equipped {
  const equipped = EQUIPPED.get(receiver);
  if (!equipped) {
    throw invalidThisError(
      `Value of "this" must be a release function of exactlock: ${what} the function acquireLock ` +
        "resolved to (or withFileLock's lock) itself, not a bound copy or a proxy of it.",
    );
  }
  return equipped;
}

/**
 * What every release function inherits, for one set of dispose keys: its
 * `signal`, and each dispose key naming its disposer (`disposerOf`: the
 * release unless a call of it is done). Shared, so a release is equipped
 * with two cheap steps instead of a property definition per key: on a
 * hand-off, the first thing JavaScript does with a lock that was waited
 * for, after the process slept, was that (about 25 µs of a cold hand-off
 * against 11: `bench/RESULTS.md`).
 */
function releasePrototype(
  keys: readonly symbol[],
  disposerOf: (release: () => unknown, equipped: Equipped) => () => unknown,
): object {
  const proto = Object.create(Function.prototype, {
    signal: {
      get(this: object) {
        return equippedOf(this, "read `signal` from").listeners.signal;
      },
      enumerable: true,
    },
  });
  for (const key of keys) {
    Object.defineProperty(proto, key, {
      get(this: () => unknown) {
        const equipped = equippedOf(this, "dispose of");
        equipped.disposer ??= disposerOf(this, equipped);
        return equipped.disposer;
      },
    });
  }
  // Shared by every release of the process: nobody's change reaches the others.
  return Object.freeze(proto);
}

const ASYNC_DISPOSE_KEYS = disposeKeys(Symbol.asyncDispose, "asyncDispose");
const DISPOSE_KEYS = disposeKeys(Symbol.dispose, "dispose");
const ASYNC_RELEASE = releasePrototype(ASYNC_DISPOSE_KEYS, (release, equipped) => async () => {
  // Its failure is the caller's to see (on the promise the call returned).
  if (equipped.ending) await equipped.ending.catch(() => {});
  if (equipped.called !== "done") await release();
});
const SYNC_RELEASE = releasePrototype(DISPOSE_KEYS, (release, equipped) => () => {
  if (equipped.called !== "done") release();
});

/**
 * Gives a release function what every release carries: its `signal` and
 * its disposer (`prototype`: {@link ASYNC_RELEASE} or {@link SYNC_RELEASE}),
 * from `equipped`, which the function itself keeps up: it stops the loss
 * watch first and notes its first call.
 */
const equipRelease = (function equipRelease<R extends () => unknown>(
  release: R,
  equipped: Equipped,
  prototype: object,
): R & { readonly signal: AbortSignal } {
  Object.setPrototypeOf(release, prototype);
  EQUIPPED.set(release, equipped);
  return release as R & { readonly signal: AbortSignal };
});

/** The error a lost lock is reported with: removed, or replaced (by whom when known). */
function lossError(loss: Binding.LockLoss): FileLockError {
  const what =
    loss.code === "EMISSING"
      ? "was removed"
      : `was replaced by ${loss.pid != null ? `pid ${loss.pid}'s lock` : "another owner's lock"}`;
  return new FileLockError(
    loss.code,
    `The lock ${loss.lockPath} ${what} while this process held it: what it guards is no longer protected; ` +
      "stop writing, find what removed it, and acquire it again.",
    loss.lockPath,
  );
}

/**
 * Watches a held generation for its loss while someone listens: started by
 * the first read of `release.signal` or by `onCompromised`, stopped by the
 * release (which would otherwise look like a loss).
 */
class LossListeners {
  private handle: number | null | undefined;
  private controller: AbortController | undefined;
  private lost: FileLockError | undefined;

  constructor(
    private readonly generation: string,
    private readonly onCompromised: ((error: FileLockError) => void) | undefined,
  ) {
    if (onCompromised) this.start();
  }

  get signal(): AbortSignal {
    if (!this.controller) {
      // A watch that cannot be made throws here, and no signal is handed
      // out that would never fire; a later read tries again.
      if (!this.lost) this.start();
      this.controller = new AbortController();
      if (this.lost) this.controller.abort(this.lost);
    }
    return this.controller.signal;
  }

  stop(): void {
    if (this.handle != null) native.unwatchHeldLockNative(this.handle);
    this.handle = null;
  }

  private start(): void {
    if (this.handle !== undefined) return;
    const started = native.watchHeldLockNative(this.generation, (loss) => this.report(lossError(loss)));
    if (started.failure) throw errorFromFailure(started.failure);
    this.handle = started.handle ?? null;
  }

  private report(error: FileLockError): void {
    if (this.lost || this.handle === null) return;
    this.lost = error;
    this.controller?.abort(error);
    if (this.onCompromised) {
      const onCompromised = this.onCompromised;
      try {
        onCompromised(error);
      } catch (thrown) {
        // As any callback's throw: an uncaught exception, not a lost one.
        process.nextTick(() => {
          throw thrown;
        });
      }
    }
  }
}

const makeRelease = (function makeRelease(
  generation: string,
  lockPath: string,
  inline: boolean,
  onCompromised: ((error: FileLockError) => void) | undefined,
): LockRelease {
  let inflight: Promise<void> | undefined;
  const equipped: Equipped = { listeners: new LossListeners(generation, onCompromised) };
  const release = () => {
    equipped.listeners.stop();
    if (!inflight) {
      const ending = releaseGeneration(generation, lockPath, inline);
      equipped.ending = ending;
      // The caller's promise is `inflight`, not `ending`: a rejection the
      // caller leaves unhandled is still reported, though a disposal waits
      // `ending` out. One reaction per call, not three: each promise is
      // charged for by the promise hooks withFileLock turns on (lib/chain.ts).
      inflight = ending.then(
        () => {
          inflight = undefined;
          equipped.called = "done";
        },
        (error: unknown) => {
          inflight = undefined;
          equipped.called = endingOf(error);
          throw error;
        },
      );
    }
    return inflight;
  };
  return equipRelease(release, equipped, ASYNC_RELEASE) as LockRelease;
});

/** Releases: a first attempt on this thread when `inline`, the retries off it. */
async function releaseGeneration(generation: string, lockPath: string, inline: boolean): Promise<void> {
  const first = inline ? native.releaseFirstAttemptNative(generation) : undefined;
  if (first === native.ReleaseStep.Released) return;
  const failure =
    typeof first === "object" ? first : await native.releaseLockNative(generation, first === native.ReleaseStep.Continue);
  if (failure) throw releaseErrorFromFailure(failure, lockPath);
}

function acquireError(
  filePath: string,
  options: ResolvedOptions,
  failure: Binding.LockFailure,
  signal: AbortSignal | undefined,
  thrown: Thrown,
): unknown {
  const locked = (signalTimeout?: unknown) =>
    new FileLockAcquireError(
      filePath,
      failure.lockPath ?? `${filePath}.lock`,
      failure.attempts ?? 0,
      failure.holder ?? undefined,
      options.ownerHostId !== undefined,
      signalTimeout,
    );
  if (failure.code === "ABORT_ERR" && signal) {
    const reason = abortReason(signal);
    // AbortSignal.timeout(): the wait ran out of time, as a spent budget does.
    return isTimeoutReason(reason) ? locked(reason) : reason;
  }
  if (failure.code === "EHOOK" && thrown.error !== undefined) return thrown.error;
  if (failure.code === "ELOCKED") return locked();
  return errorFromFailure(failure);
}

/**
 * Acquires the lock for `filePath` (the directory `filePath.lock`) and
 * resolves to the function that releases it.
 */
export async function acquireLock(filePath: string | URL, options?: FileLockOptions): Promise<LockRelease> {
  return (await acquire(filePath, options)).release;
}

/**
 * Takes the lock for `filePath` if it can be had in one attempt (free, or
 * its holder provably gone), without waiting: the release, or `undefined`
 * when someone else holds it. `timeout` is 0 whatever `options` says; every
 * other failure rejects as {@link acquireLock}'s does.
 */
export async function tryAcquireLock(filePath: string | URL, options?: FileLockOptions): Promise<LockRelease | undefined> {
  try {
    return (await acquire(filePath, options, { timeout: 0 })).release;
  } catch (error) {
    if (error instanceof FileLockAcquireError) return undefined;
    throw error;
  }
}

/** What the function {@link withFileLock} runs is handed: the lock it holds. */
export interface HeldFileLock {
  /** The lock directory, `filePath + ".lock"`. */
  readonly lockPath: string;
  /**
   * Aborts (its reason a `FileLockError`, `EMISSING` or `EOWNERCHANGED`) if
   * the lock is removed or replaced by someone else while held: pass it to
   * the work that must stop then. Watched from its first read.
   */
  readonly signal: AbortSignal;
}

const heldFileLock = (function heldFileLock(lockPath: string, release: { readonly signal: AbortSignal }): HeldFileLock {
  return Object.freeze({
    lockPath,
    get signal() {
      return release.signal;
    },
  });
});

/**
 * {@link acquireLock} in the name of `pid`, a child this process started
 * and waits for: its record names that child, so the lock lives as long as
 * the child does (`exactlock run`'s command, as flock(1)'s lock lives with
 * its command), whatever happens to this process. Not exported: a record
 * naming another process is for the CLI's own child only.
 */
export async function acquireLockFor(pid: number, filePath: string, options: FileLockOptions): Promise<LockRelease> {
  return (await acquire(filePath, options, { onBehalfOf: pid })).release;
}

/** {@link acquireLock}, also naming the generation won and the lock's path. */
async function acquire(
  filePath: string | URL,
  options: FileLockOptions | undefined,
  override?: { timeout?: number; onBehalfOf?: number },
): Promise<{ release: LockRelease; generation: string; lockPath: string }> {
  const path = validateLockFilePath(filePath);
  const resolved = resolveOptions(options);
  // tryAcquireLock: one attempt, whatever the options say (applied after them,
  // so inherited and non-enumerable options count as they do for acquireLock).
  if (override?.timeout !== undefined) resolved.timeout = override.timeout;
  const onBehalfOf = override?.onBehalfOf;
  const { signal } = resolved;
  // Already aborted, of whatever reason: rejected before any attempt with the
  // reason itself (SPEC §3), as the original does; there is no holder to name.
  if (signal?.aborted) throw abortReason(signal);
  let heldByCaller = locksHeldByChain();
  // A hold whose function settled just before this call dies a microtask
  // later: it must refuse nothing (see holdsSettledBeforeNow).
  let settledBefore = heldByCaller ? holdsSettledBeforeNow() : undefined;
  let generation: string;
  let lockPath: string;
  for (;;) {
    const first = onBehalfOf === undefined ? firstAttempt(path, resolved, heldByCaller) : undefined;
    if (typeof first === "string") {
      generation = first;
      lockPath = lockPathOf(path);
      break;
    }
    const thrown: Thrown = {};
    const request = { ...requestOf(path, resolved, heldByCaller), onBehalfOf };
    const result = first ? { failure: first } : await waitForLock(request, resolved, thrown);
    if (result.lock) {
      ({ generation, lockPath } = result.lock);
      break;
    }
    if (result.failure!.code === "EDEADLK" && settledBefore) {
      const dead = await settledBefore;
      settledBefore = undefined;
      if (dead.length > 0) {
        const live = heldByCaller!.filter((generation) => !dead.includes(generation));
        heldByCaller = live.length > 0 ? live : undefined;
        continue;
      }
    }
    throw acquireError(path, resolved, result.failure!, signal, thrown);
  }
  let release: LockRelease;
  try {
    release = makeRelease(generation, lockPath, resolved.inlineFastPath, resolved.onCompromised);
  } catch (watchError) {
    // The loss watch `onCompromised` asks for could not be made: the lock
    // goes back rather than to a caller who was promised that watch.
    await releaseGeneration(generation, lockPath, false).catch((releaseError: unknown) => {
      throw new AggregateError([watchError, releaseError], "File lock loss watch and release both failed.");
    });
    throw watchError;
  }
  if (resolved.onAcquired) await runOnAcquired(resolved.onAcquired, release);
  return { release, generation, lockPath };
}

/**
 * What the core is asked for: the validated options, and the locks the
 * caller's chain holds (`locksHeldByChain()`).
 */
function requestOf(path: string, resolved: ResolvedOptions, heldByCaller: string[] | undefined): Binding.AcquireRequest {
  return {
    filePath: path,
    retries: resolved.retries,
    retryDelayMs: resolved.retryDelayMs,
    timeoutMs: resolved.timeout,
    staleMs: resolved.staleMs,
    ownerHostId: resolved.ownerHostId,
    previousOwnerHostIds: resolved.previousOwnerHostIds,
    heldByCaller,
    mode: resolved.mode,
  };
}

/**
 * The one attempt on this thread, when allowed: the generation won, the
 * failure, or undefined when the lock is not free (the test hook must be
 * awaited, so it turns the fast path off). The request goes as arguments,
 * in {@link requestOf}'s order (an object costs the core a named read per
 * field).
 */
function firstAttempt(
  path: string,
  options: ResolvedOptions,
  heldByCaller: string[] | undefined,
): string | Binding.LockFailure | undefined {
  if (!options.inlineFastPath || FileLockTestHooks.afterParentMkdir) return undefined;
  const answer = native.acquireFirstAttemptNative(
    path,
    options.retries,
    options.retryDelayMs,
    options.timeout,
    options.staleMs,
    options.ownerHostId,
    options.previousOwnerHostIds,
    heldByCaller,
    options.mode,
  );
  return answer ?? undefined;
}

/**
 * The lock directory of `filePath`, as the core names it: the path and
 * `.lock`, the path as it reaches the core (a lone surrogate, which
 * cannot reach a filesystem, as U+FFFD).
 */
function lockPathOf(filePath: string): string {
  const wellFormed = filePath as string & { isWellFormed(): boolean; toWellFormed(): string };
  return `${wellFormed.isWellFormed() ? filePath : wellFormed.toWellFormed()}.lock`;
}

/** The full acquisition off this thread: attempts, judging, waiting. */
async function waitForLock(
  request: Binding.AcquireRequest,
  options: ResolvedOptions,
  thrown: Thrown,
): Promise<Binding.AcquireResult> {
  let wiring: ReturnType<typeof wireSignal>;
  try {
    wiring = wireSignal(options.signal, options.onContended !== undefined);
  } catch (error) {
    // A signal that is an AbortSignal only in shape, whose
    // addEventListener threw: the wait will not start, so the record the
    // first attempt staged for it goes now, not at the next acquisition.
    native.dropHandedOverNative();
    throw error;
  }
  const contended = contendedFor(options, wiring.token, thrown);
  try {
    const result = await native.acquireLockNative({ ...request, cancelToken: wiring.token }, hookFor(thrown), contended);
    const contendedThrew = settleContended(result, contended, thrown, options.inlineFastPath);
    if (contendedThrew) await contendedThrew;
    return result;
  } finally {
    wiring.unwire();
  }
}

/** The later upstream name of {@link acquireLock}. */
export const acquireFileLock = acquireLock;

const runOnAcquired = (async function runOnAcquired(onAcquired: () => void, release: LockRelease): Promise<void> {
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
});

/**
 * Runs `fn` while holding the lock for `filePath`, and releases it whether
 * `fn` resolves or throws. Inside `fn` (and whatever it awaits), acquiring
 * the same lock again rejects at once with `EDEADLK`: it would wait for
 * itself.
 */
export async function withFileLock<T>(
  filePath: string | URL,
  fn: (lock: HeldFileLock) => T | PromiseLike<T>,
  options?: FileLockOptions,
): Promise<Awaited<T>> {
  validateFunction(fn, "fn");
  prepareChain();
  const { release, generation, lockPath } = await acquire(filePath, options);
  const lock = heldFileLock(lockPath, release);
  let result: Awaited<T>;
  try {
    const { settled, leave } = startHolding(generation, () => fn(lock));
    try {
      result = await settled;
    } finally {
      leave();
    }
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
 * Releases a lock taken by {@link acquireLockSync}, on the calling thread;
 * also `using`-disposable (a disposal after a release call that is done
 * adds nothing; after a transient failure it releases again).
 */
export type LockReleaseSync = (() => void) & Disposable & { readonly signal: AbortSignal };

/**
 * Acquires the lock for `filePath` on the calling thread, which it BLOCKS
 * while the lock is held by another process (up to the budget: `timeout`,
 * or `retries × retryDelayMs`; `Infinity` blocks until it is won): for
 * scripts and exit paths. It never waits for this process — if this
 * process already holds the lock or waits for it (from any thread), it
 * throws `EDEADLK` at once rather than block the thread that may have to
 * release it. No `signal` or `onContended` (they need the event loop this
 * call blocks). Throws the typed errors {@link acquireLock} rejects with.
 */
export function acquireLockSync(filePath: string | URL, options?: FileLockOptions): LockReleaseSync {
  return acquireSync(filePath, options).release;
}

/**
 * Asked by a synchronous acquisition while it blocks this thread: while
 * JavaScript can run here the answer is true; once the thread is torn down
 * (a Worker terminated, `process.exit()` joining one) the call fails, and
 * the acquisition gives up instead of blocking the teardown.
 */
const stillRunning = (): boolean => true;

/** {@link acquireLockSync}, also naming the generation won. */
function acquireSync(
  filePath: string | URL,
  options: FileLockOptions | undefined,
): { release: LockReleaseSync; generation: string; lockPath: string } {
  const path = validateLockFilePath(filePath);
  const resolved = resolveOptions(options);
  refuseAsyncOnly(resolved);
  const request = requestOf(path, resolved, locksHeldByChain());
  const result = native.acquireLockSyncNative(request, stillRunning);
  if (!result.lock) throw acquireError(path, resolved, result.failure!, undefined, {});
  const { generation, lockPath } = result.lock;
  let listeners: LossListeners;
  try {
    listeners = new LossListeners(generation, resolved.onCompromised);
  } catch (watchError) {
    // As in acquireLock: no lock without the watch that was asked for.
    const failure = native.releaseLockSyncNative(generation);
    if (failure) {
      throw new AggregateError(
        [watchError, releaseErrorFromFailure(failure, lockPath)],
        "File lock loss watch and release both failed.",
      );
    }
    throw watchError;
  }
  const equipped: Equipped = { listeners };
  const release = equipRelease(
    () => {
      listeners.stop();
      const failure = native.releaseLockSyncNative(generation);
      const error = failure ? releaseErrorFromFailure(failure, lockPath) : undefined;
      equipped.called = error ? endingOf(error) : "done";
      if (error) throw error;
    },
    equipped,
    SYNC_RELEASE,
  ) as LockReleaseSync;
  if (resolved.onAcquired) {
    try {
      resolved.onAcquired();
    } catch (error) {
      release();
      throw error;
    }
  }
  return { release, generation, lockPath };
}

/**
 * Runs `fn` while holding the lock for `filePath`, all on the calling
 * thread (see {@link acquireLockSync}: it blocks while it waits), and
 * releases it whether `fn` returns or throws. A nested acquisition of the
 * same lock inside `fn` is `EDEADLK`.
 */
export function withFileLockSync<T>(filePath: string | URL, fn: (lock: HeldFileLock) => T, options?: FileLockOptions): T {
  validateFunction(fn, "fn");
  // Its work would run after the release, unprotected: refused before any
  // lock is taken (and, for a function that returns a promise without being
  // async, once it has: see below).
  if (isAsyncFunction(fn)) {
    throw argumentError(
      "fn is an async function: withFileLockSync releases the lock when fn returns, before what it awaits runs; use withFileLock",
    );
  }
  prepareChain();
  const { release, generation, lockPath } = acquireSync(filePath, options);
  const lock = heldFileLock(lockPath, release);
  let result: T;
  try {
    result = runHoldingSync(generation, () => fn(lock));
  } catch (operationError) {
    try {
      release();
    } catch (releaseError) {
      throw new AggregateError([operationError, releaseError], "File lock operation and release both failed.");
    }
    throw operationError;
  }
  release();
  if (isThenable(result)) {
    throw argumentError(
      `fn returned a promise: withFileLockSync released ${lockPath} when fn returned, before that promise settled, so what it does is not under the lock; use withFileLock`,
    );
  }
  return result;
}

const AsyncFunction = Object.getPrototypeOf(async () => {}).constructor;
const AsyncGeneratorFunction = Object.getPrototypeOf(async function* () {}).constructor;

function isAsyncFunction(fn: unknown): boolean {
  return fn instanceof AsyncFunction || fn instanceof AsyncGeneratorFunction;
}

function isThenable(value: unknown): boolean {
  return (
    (typeof value === "object" || typeof value === "function") &&
    value !== null &&
    typeof (value as { then?: unknown }).then === "function"
  );
}

/** The options that need the event loop a synchronous acquisition blocks. */
function refuseAsyncOnly(options: ResolvedOptions): void {
  for (const name of ["signal", "onContended"] as const) {
    if (options[name] !== undefined) {
      throw argumentError(
        `${name} cannot serve a synchronous acquisition: it needs the event loop that acquireLockSync blocks; use acquireLock`,
      );
    }
  }
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
