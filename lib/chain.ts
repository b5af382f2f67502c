/**
 * The locks held by the running call chain: the generations of the
 * `withFileLock` functions it runs inside. The core refuses (EDEADLK) an
 * acquisition of one of them that is still held, instead of letting it wait
 * for itself; unrelated calls of the process carry other stores and queue.
 *
 * Why the store is turned off between uses: Node's AsyncLocalStorage (up to
 * Node 22, and in Node 24 under `--no-async-context-frame`) is built on
 * async_hooks, and its first `run()` turns promise hooks on for the whole
 * process, for good. From then on every promise of the user's program pays
 * for them (an `await` measured at 120 ns before one `withFileLock` and 360
 * ns after it, Node 20). So on that implementation the store is disabled
 * whenever no `withFileLock` function is running (from the moment the
 * microtask queue drains with none running): the hooks then go off again
 * (unless the program has stores of its own enabled), and cost only while
 * a lock's function runs. Nothing is lost by it: a chain holds a lock
 * through this store only while that function runs, and a continuation that
 * outlives it keeps the store it had (its hold dead, refusing nothing).
 * Where AsyncLocalStorage propagates without hooks (Node 24's
 * AsyncContextFrame, Bun), `disable()` would only clear the current
 * context's value, and nothing is gained: left alone there.
 */
import { AsyncLocalStorage } from "node:async_hooks";

/**
 * One `withFileLock` function's hold as its chain carries it: live until
 * the function has settled. A continuation that outlives the function keeps
 * the hold in its store, dead: its acquisition of the same lock then waits
 * for the release like anyone's, whether or not the store is still on and
 * however far the release has got.
 */
interface Hold {
  readonly generation: string;
  live: boolean;
  /** fn has returned (its promise may still be pending). */
  returned: boolean;
}

const heldByChain = new AsyncLocalStorage<readonly Hold[]>();

/** True where a `run()` turns on process-wide promise hooks (see above). */
const hooksCostTheProcess =
  process.versions.bun === undefined &&
  typeof (AsyncLocalStorage.prototype as { _enable?: unknown })._enable === "function";

/** `withFileLock` functions running now, across every chain of this thread. */
let running = 0;

/** The generations the running chain holds through `withFileLock` functions still running. */
export function locksHeldByChain(): string[] | undefined {
  const live = liveHolds();
  return live.length > 0 ? live.map((hold) => hold.generation) : undefined;
}

/**
 * For an acquisition refused for a hold of its chain: the generations among
 * the chain's holds whose function had already settled when it was called.
 * Such a hold dies by a reaction to fn's promise, queued when it settled,
 * so before this microtask, queued now; a function that settles later (or
 * has not returned yet) is not counted.
 */
export function holdsSettledBeforeNow(): Promise<string[]> | undefined {
  const returned = liveHolds().filter((hold) => hold.returned);
  if (returned.length === 0) return undefined;
  return Promise.resolve().then(() => returned.filter((hold) => !hold.live).map((hold) => hold.generation));
}

const NO_HOLDS: readonly Hold[] = [];

/** The chain's holds still live (no array made for a call outside any chain: the common case). */
function liveHolds(): readonly Hold[] {
  const store = heldByChain.getStore();
  return store === undefined ? NO_HOLDS : store.filter((hold) => hold.live);
}

/** Whether a turn-off is queued (see {@link leave}). */
let turnOffQueued = false;

/**
 * Ends one function's hold. The store is turned off once the microtask
 * queue has drained with no function running, not at once: a program that
 * runs `withFileLock` after `withFileLock` in one burst (a loop of awaits)
 * would otherwise turn the hooks on and off at every call, which cost each
 * call about 6 µs (a tenth of a cycle on tmpfs), against the fraction of a
 * µs its few promises pay while they stay on. A `nextTick`, not a timer:
 * nothing keeps the process alive (under fake timers that fake `nextTick`
 * too, as Jest's do, the turn-off waits for their clock: a cost, not a
 * fault). While the store stays on, what the chains of ended functions
 * carry is dead (see {@link Hold}) and refuses nothing.
 */
function leave(): void {
  running -= 1;
  if (running === 0 && hooksCostTheProcess && !turnOffQueued) {
    turnOffQueued = true;
    process.nextTick(turnOffIfIdle);
  }
}

function turnOffIfIdle(): void {
  turnOffQueued = false;
  if (running === 0) heldByChain.disable();
}

/** Whether this process's store has been turned on once (see {@link prepareChain}). */
let prepared = false;

/**
 * Called before a `withFileLock`'s (or `withFileLockSync`'s) acquisition.
 * The first `run()` of a store built on async_hooks sets up Node's hook
 * machinery, its functions compiled
 * on their first call: about 1.3 ms on Node 20, once per process, which
 * would be spent holding the first lock (a fresh process's empty
 * `withFileLock` held its lock 1.5–2.2 ms, `acquireLock`'s 0.5–0.7). So the
 * first time, the store is turned on here, around nothing, and left as
 * {@link leave} leaves it: off once the microtask queue drains with no
 * function running (the acquisition's own promises meanwhile set up the
 * rest of the hooks). The same work, done before the lock is taken; the
 * store turned on again inside the hold then costs tens of µs.
 */
export function prepareChain(): void {
  if (prepared || !hooksCostTheProcess) return;
  prepared = true;
  running += 1;
  try {
    heldByChain.run(NO_HOLDS, () => undefined);
  } finally {
    leave();
  }
}

/**
 * Starts running `fn` with `generation` added to the chain's held locks:
 * its promise (a thenable it returns is adopted inside the chain, so its
 * `then` runs holding it), and the `leave` the caller must call once that
 * promise settled. Not async: the caller awaits `fn`'s promise itself, so
 * the release follows `fn` with no extra turn of the microtask queue.
 * Compiled as the module loads, not with a lock held (see ./lock.ts).
 */
export const startHolding = (function startHolding<T>(generation: string, fn: () => T | PromiseLike<T>): { settled: Promise<Awaited<T>>; leave: () => void } {
  const hold: Hold = { generation, live: true, returned: false };
  const chain = [...liveHolds(), hold];
  running += 1;
  const die = () => {
    hold.live = false;
  };
  const end = () => {
    die();
    leave();
  };
  try {
    const settled = heldByChain.run(chain, () => Promise.resolve(fn()) as Promise<Awaited<T>>);
    hold.returned = true;
    // Dead once fn's promise settles: a reaction queued then, not only at the
    // caller's await, which may come a turn later than a task fn left behind.
    settled.then(die, die);
    return { settled, leave: end };
  } catch (error) {
    end();
    throw error;
  }
});

/** {@link startHolding} for a synchronous `fn`, run and left at once. */
export function runHoldingSync<T>(generation: string, fn: () => T): T {
  const hold: Hold = { generation, live: true, returned: false };
  const chain = [...liveHolds(), hold];
  running += 1;
  try {
    return heldByChain.run(chain, fn);
  } finally {
    hold.live = false;
    leave();
  }
}
