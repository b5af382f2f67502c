/**
 * Hole: one slow filesystem stalled every lock of the process, and abort
 * was ignored. All waiting ran on one runtime thread that also made the
 * blocking syscalls: with one lock's syscalls delayed 3 s, an unrelated
 * lock's hand-off took 24 s, and an abort fired at 103 ms was answered
 * with the lock at 24 s.
 *
 * Now every attempt's syscalls run on a blocking thread of their own and
 * the runtime thread only waits. The delay seam (`injectDelayForTesting`)
 * stalls every attempt on the slow lock's name for 3 s — a mount whose
 * metadata calls hang — while another lock in the same process is handed
 * over from a child holder, again and again. The slow acquisition uses
 * `inlineFastPath: false` in the first tests; the last one shows that the
 * default does not freeze the caller either: a directory earns the inline
 * path only after an attempt off the thread found its filesystem local and
 * quick.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { acquireLock, FileLockError, type LockRelease } from "../lib/index.ts";
import { clearFaultsForTesting, injectDelayForTesting } from "../lib/testing.ts";
import { cleanup, handOffs as handOffsWith, median, metric, now, spawnHolder, tempRoot } from "./fixtures/children.ts";
import { PORTABLE } from "./helpers.ts";

/** `count` hand-offs of `file` from a child holder to this process; their latencies (ms). */
const handOffs = (file: string, count: number) => handOffsWith(file, count, acquireLock, 30);

const STALL_MS = 3_000;

afterEach(async () => {
  clearFaultsForTesting();
  await cleanup();
});

describe("a stuck syscall on one lock", () => {
  // Skipped under the portable mechanisms: its hand-offs wait with retryDelayMs
  // 1000 for a kernel wake-up; timer-only waits make each take a second, which
  // spends the stuck waiter's budget before the abort this test measures.
  it.skipIf(PORTABLE)("does not delay another lock's hand-off beyond 10x its normal p50, and abort answers within 200 ms", async () => {
    const root = tempRoot("exactlock-slowfs-");
    const fast = path.join(root, "fast", "fast.json");
    const slow = path.join(root, "slow", "slow.json");
    fs.mkdirSync(path.dirname(fast));
    fs.mkdirSync(path.dirname(slow));

    const normal = median(await handOffs(fast, 10));

    // The slow lock is held by a child; our waiter's every attempt on it
    // stalls 3 s before its syscalls, one after the other.
    const slowHolder = await spawnHolder(slow);
    injectDelayForTesting("attempt", STALL_MS, "slow.json");
    const controller = new AbortController();
    const stuck = acquireLock(slow, {
      signal: controller.signal,
      inlineFastPath: false,
      retries: 1_000,
      retryDelayMs: 10,
    });
    const stuckOutcome = stuck.then(
      (release: LockRelease) => ({ release }),
      (error: unknown) => ({ error }),
    );
    await new Promise((resolve) => setTimeout(resolve, 50)); // the slow attempt is under way

    const during = await handOffs(fast, 10);
    const duringP50 = median(during);
    metric("hand-off p50 with another lock's syscalls stalled (ms)", {
      normal: +normal.toFixed(3),
      during: +duringP50.toFixed(3),
      max: +Math.max(...during).toFixed(3),
    });
    expect(duringP50).toBeLessThan(Math.max(10 * normal, 5));
    // Not one of them waited out a stall.
    expect(Math.max(...during)).toBeLessThan(STALL_MS / 3);

    const abortedAt = now();
    controller.abort();
    const outcome = await stuckOutcome;
    const answeredIn = now() - abortedAt;
    metric("abort answered while the attempt is stuck (ms)", +answeredIn.toFixed(2));
    expect(outcome).toHaveProperty("error");
    expect((outcome as { error: Error }).error.name).toBe("AbortError");
    expect(answeredIn).toBeLessThan(200);

    // The stuck attempt ends on its own and cleans up: nothing of it is
    // left beside the slow lock, and the holder's lock is untouched.
    clearFaultsForTesting();
    await new Promise((resolve) => setTimeout(resolve, STALL_MS + 500));
    expect(fs.readdirSync(path.dirname(slow))).toEqual(["slow.json.lock"]);
    slowHolder.send("release");
    await slowHolder.nextLine("released ");
    const release = await acquireLock(slow, { retries: 0 });
    await release();
  }, 60_000);

  it("with default options, the first acquisition in a directory never makes its syscalls on the caller's thread", async () => {
    const root = tempRoot("exactlock-slowfs-");
    const slow = path.join(root, "slow", "slow.json");
    fs.mkdirSync(path.dirname(slow));
    injectDelayForTesting("attempt", STALL_MS, "slow.json");
    injectDelayForTesting("parent.created", STALL_MS, "slow");
    const controller = new AbortController();
    const started = now();
    const acquisition = acquireLock(slow, { signal: controller.signal }).then(
      () => "acquired",
      (error: Error) => error.name,
    );
    const returnedAfter = now() - started;
    // The event loop turns: a 20 ms timer fires on time.
    const timerStarted = now();
    await new Promise((resolve) => setTimeout(resolve, 20));
    const timerLate = now() - timerStarted - 20;
    controller.abort();
    const abortedAt = now();
    expect(await acquisition).toBe("AbortError");
    const answeredIn = now() - abortedAt;
    metric("default options on a stalled directory (ms)", {
      returnedAfter: +returnedAfter.toFixed(2),
      timerLate: +timerLate.toFixed(2),
      abortAnsweredIn: +answeredIn.toFixed(2),
    });
    expect(returnedAfter).toBeLessThan(100);
    expect(timerLate).toBeLessThan(100);
    expect(answeredIn).toBeLessThan(200);
    clearFaultsForTesting();
    await new Promise((resolve) => setTimeout(resolve, STALL_MS + 500));
    expect(fs.readdirSync(path.dirname(slow))).toEqual([]);
  }, 30_000);

  it("answers when the budget is spent though no attempt came back, and the late attempt gives back what it won", async () => {
    const root = tempRoot("exactlock-slowfs-");
    const slow = path.join(root, "slow", "slow.json");
    fs.mkdirSync(path.dirname(slow));
    injectDelayForTesting("attempt", 1_500, "slow.json", 1);
    const started = now();
    const error = await acquireLock(slow, { inlineFastPath: false, retries: 2, retryDelayMs: 100 }).then(
      () => undefined,
      (failure: unknown) => failure,
    );
    const answeredIn = now() - started;
    metric("budget 200 ms, attempt stuck 1.5 s: answered in (ms)", +answeredIn.toFixed(1));
    expect(error).toBeInstanceOf(FileLockError);
    expect((error as FileLockError).code).toBe("ETIMEDOUT");
    expect((error as Error).message).toContain(`${slow}.lock`);
    // The budget (200 ms) plus at most one retry delay.
    expect(answeredIn).toBeLessThan(600);

    // The attempt comes back at 1.5 s and wins the free lock for nobody:
    // it is given back at once.
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    expect(fs.readdirSync(path.dirname(slow))).toEqual([]);
  }, 30_000);
});
