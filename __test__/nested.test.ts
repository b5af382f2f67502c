/**
 * A nested acquisition of a lock its own call chain holds: an error at
 * once (EDEADLK), never a wait for itself. Calls from unrelated async
 * contexts of the same process still queue, in order.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { acquireLock, FileLockAcquireError, FileLockError, withFileLock } from "../lib/index.ts";
import { cleanup, makeRoot, rejectionOf, runFixture, sleep } from "./helpers.ts";

afterEach(cleanup);

/** The error of a nested acquisition, and how long it took to come. */
async function timed(promise: Promise<unknown>): Promise<{ error: any; ms: number }> {
  const started = performance.now();
  const error = await rejectionOf(promise);
  return { error, ms: performance.now() - started };
}

describe("a nested acquisition of a lock the call chain holds", () => {
  it("rejects at once with EDEADLK naming the lock, and the outer function goes on and releases", async () => {
    const file = path.join(makeRoot(), "state.json");
    const outcome = await withFileLock(file, async () => {
      const nested = await timed(withFileLock(file, async () => "never", { retries: 100, retryDelayMs: 100 }));
      // ... also deeper in the chain, and through acquireLock.
      const deeper = await (async () => {
        await sleep(1);
        return timed(acquireLock(file));
      })();
      return { nested, deeper };
    });
    for (const { error, ms } of [outcome.nested, outcome.deeper]) {
      expect(ms).toBeLessThan(50);
      expect(error).toBeInstanceOf(FileLockError);
      expect(error).not.toBeInstanceOf(FileLockAcquireError);
      expect(error.code).toBe("EDEADLK");
      expect(error.lockPath).toBe(`${file}.lock`);
      expect(error.message).toContain(`${file}.lock`);
      expect(error.message).toContain("this call chain already holds it");
    }
    expect(fs.readdirSync(path.dirname(file))).toEqual([]);
  });

  it("refuses it inside the work of a thenable the function returns (a lazy query builder)", async () => {
    const file = path.join(makeRoot(), "state.json");
    // The work starts only when `then` is called: it must run inside the chain too.
    const lazy = {
      then(resolve: (value: unknown) => void) {
        rejectionOf(acquireLock(file, { retries: 100, retryDelayMs: 100 })).then(resolve);
      },
    };
    const error = await timed(withFileLock(file, () => lazy as unknown as Promise<unknown>).then((e) => Promise.reject(e)));
    expect(error.ms).toBeLessThan(50);
    expect(error.error.code).toBe("EDEADLK");
  });

  it("recognises the lock through an alias of its directory (a symlink)", async () => {
    const root = makeRoot();
    fs.mkdirSync(path.join(root, "real"));
    fs.symlinkSync(path.join(root, "real"), path.join(root, "alias"));
    const error = await withFileLock(path.join(root, "real", "state.json"), () =>
      rejectionOf(withFileLock(path.join(root, "alias", "state.json"), async () => "never")),
    );
    expect(error.code).toBe("EDEADLK");
  });

  it("lets the chain take other locks, and the same lock once the outer one is released", async () => {
    const root = makeRoot();
    const a = path.join(root, "a.json");
    const b = path.join(root, "b.json");
    let later: Promise<string> | undefined;
    const inner = await withFileLock(a, async () => {
      // Started inside the function, run after it returned: the lock is free by then.
      later = new Promise((resolve, reject) => {
        setTimeout(() => withFileLock(a, async () => "later").then(resolve, reject), 50);
      });
      return withFileLock(b, async () => withFileLock(path.join(root, "c.json"), async () => "inner"));
    });
    expect(inner).toBe("inner");
    expect(await later).toBe("later");
  });

  it("does not touch unrelated callers of the process: they queue behind the holder, in order", async () => {
    const file = path.join(makeRoot(), "state.json");
    const order: string[] = [];
    let releaseOuter!: () => void;
    const outer = withFileLock(file, async () => {
      order.push("outer");
      await new Promise<void>((resolve) => {
        releaseOuter = resolve;
      });
    });
    await sleep(20);
    // Two siblings from the top level: other async contexts than the outer function's.
    const first = withFileLock(file, async () => void order.push("first"), { retries: 100, retryDelayMs: 100 });
    const second = withFileLock(file, async () => void order.push("second"), { retries: 100, retryDelayMs: 100 });
    await sleep(200);
    expect(order).toEqual(["outer"]);
    releaseOuter();
    await Promise.all([outer, first, second]);
    expect(order).toEqual(["outer", "first", "second"]);
  });

  it("lets a task that outlived its function wait for the release, however far the release has got", async () => {
    // Started inside fn, it asks for the same lock a few microtasks after fn
    // returned, while the release runs off the thread (inlineFastPath off, as
    // on a network mount): it queues behind the release, never EDEADLK.
    const file = path.join(makeRoot(), "state.json");
    const outcomes: Record<string, number> = {};
    for (let round = 0; round < 200; round++) {
      let task: Promise<string | undefined> | undefined;
      await withFileLock(
        file,
        async () => {
          task = (async () => {
            for (let i = 0; i < 2 + (round % 40); i++) await null;
            return acquireLock(file, { retries: 20, retryDelayMs: 50 }).then(
              (release) => release().then(() => "acquired"),
              (error: FileLockError) => error.code,
            );
          })();
        },
        { inlineFastPath: false },
      );
      const outcome = String(await task);
      outcomes[outcome] = (outcomes[outcome] ?? 0) + 1;
    }
    expect(outcomes).toEqual({ acquired: 200 });
  });

  it("refuses a task only while its function is pending: one asking a microtask after fn settled waits", async () => {
    const file = path.join(makeRoot(), "state.json");
    const ask = () =>
      acquireLock(file, { retries: 20, retryDelayMs: 50 }).then(
        (release) => release().then(() => "acquired"),
        (error: FileLockError) => String(error.code),
      );
    const seen: string[] = [];
    for (const inlineFastPath of [true, false]) {
      // A task fn leaves behind, asking k microtasks after fn returned (k = 0:
      // while fn runs, refused).
      for (let k = 0; k <= 3; k++) {
        let task: Promise<string> | undefined;
        await withFileLock(
          file,
          async () => {
            task = (async () => {
              for (let i = 0; i < k; i++) await null;
              return ask();
            })();
          },
          { inlineFastPath },
        );
        seen.push(`${inlineFastPath}/${k}:${await task}`);
      }
      let queued: Promise<string> | undefined;
      await withFileLock(
        file,
        () => {
          queued = new Promise((resolve) => queueMicrotask(() => resolve(ask())));
          return 42;
        },
        { inlineFastPath },
      );
      seen.push(`${inlineFastPath}/queueMicrotask:${await queued}`);
      // Asked while fn is still pending, though fn settles before the core answers.
      let pending: Promise<string> | undefined;
      await withFileLock(
        file,
        async () => {
          await null;
          pending = ask();
        },
        { inlineFastPath },
      );
      seen.push(`${inlineFastPath}/pending:${await pending}`);
      seen.push(`${inlineFastPath}/awaited:${await withFileLock(file, async () => ask(), { inlineFastPath })}`);
    }
    expect(seen.filter((outcome) => outcome.endsWith("EDEADLK"))).toEqual([
      "true/0:EDEADLK",
      "true/pending:EDEADLK",
      "true/awaited:EDEADLK",
      "false/0:EDEADLK",
      "false/pending:EDEADLK",
      "false/awaited:EDEADLK",
    ]);
    expect(seen).toHaveLength(14);
  });
});

describe("what telling the chains apart costs the rest of the process", () => {
  // Node's AsyncLocalStorage (to Node 22) turns promise hooks on for the whole
  // process at its first run(), and every promise pays for them from then on
  // (an await 3× slower on Node 20). A fresh process (vitest's workers may run
  // stores of their own) shows whether they are on: a continuation's
  // executionAsyncId() is 0 without them.
  it("leaves no promise hook on once no withFileLock function runs, and still refuses a nested acquisition", () => {
    const seen = JSON.parse(runFixture("promise-hooks.mjs", [makeRoot()]));
    expect(seen.fresh).toBe(0);
    // On while a function runs (that is how its chain is known) ...
    expect(seen.inside).toBeGreaterThan(0);
    expect(seen.whileSecondRuns).toBeGreaterThan(0);
    // ... and off again once none does: after one, after two that overlapped,
    // after a synchronous one.
    expect(seen.afterOne).toBe(0);
    expect(seen.afterBoth).toBe(0);
    expect(seen.afterSync).toBe(0);
    expect(seen.afterBurst).toBe(0);
    // A burst of calls turns the store off once, after it, not at each call.
    expect(seen.burstTurnedOff).toBe(1);
    expect(seen.sync).toBe("ran");
    // A function that outlived another still knows what it holds; a
    // continuation that outlived its function asks as anyone else; a later
    // function's chain is known again.
    expect(seen.nestedInSecond).toBe("EDEADLK");
    expect(seen.outliving).toBe("acquired");
    expect(seen.nestedLater).toBe("EDEADLK");
    // The program's own store is not turned off (nor, so, its hooks).
    expect(seen.ownStore).toBe("mine");
    expect(seen.afterOwnStore).toBeGreaterThan(0);
  });

  // That set-up compiles Node's hook machinery on its first use, once per
  // process (about 1.3 ms on Node 20): done while holding the lock, it made a
  // fresh process's first empty withFileLock hold its lock about 2 ms.
  it("sets the store up before a process's first lock is taken, not while it is held", () => {
    const seen = JSON.parse(runFixture("first-hold.mjs", [path.join(makeRoot(), "state.json")]));
    if (seen.setUp) {
      expect(seen.steps).toEqual(["store set up", "lock taken", "fn runs"]);
    } else {
      // A store without async_hooks (Node 24's AsyncContextFrame): nothing to set up.
      expect(seen.steps).toEqual(["lock taken", "fn runs"]);
    }
  });
});
