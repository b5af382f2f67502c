/**
 * The synchronous API: acquireLockSync / withFileLockSync block the
 * calling thread while another process holds the lock, honour the budget,
 * throw the same typed errors, exclude the async API across processes, and
 * never wait for their own process (EDEADLK instead of a deadlock).
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import {
  acquireLock,
  acquireLockSync,
  FileLockAcquireError,
  FileLockError,
  withFileLock,
  withFileLockSync,
} from "../lib/index.ts";
import { clearFaultsForTesting, injectDelayForTesting, injectFaultForTesting } from "../lib/testing.ts";
import { canonicalRecord, cleanup, deadPid, makeRoot, startFixture, writeLock } from "./helpers.ts";

afterEach(() => {
  clearFaultsForTesting();
  return cleanup();
});

/** A holder in another process that releases by itself after `ms`. */
async function holderFor(file: string, ms: number) {
  const holder = startFixture("hold.mjs", [file]);
  expect(await holder.nextLine()).toMatch(/^held \d+$/);
  setTimeout(() => holder.send("release"), ms);
  return holder;
}

describe("acquireLockSync", () => {
  it("takes a free lock and gives it back, also through Symbol.dispose (which does nothing after a release); a second release is ERELEASED", () => {
    const file = path.join(makeRoot(), "state.json");
    const release = acquireLockSync(file);
    expect(JSON.parse(fs.readFileSync(`${file}.lock/info`, "utf8")).pid).toBe(process.pid);
    release();
    expect(fs.existsSync(`${file}.lock`)).toBe(false);
    expect(() => release()).toThrow(expect.objectContaining({ code: "ERELEASED" }));
    const disposable = acquireLockSync(file);
    disposable[Symbol.dispose]();
    expect(fs.existsSync(`${file}.lock`)).toBe(false);
    // Released early inside `using`: the block's end adds nothing, no ERELEASED.
    const early = acquireLockSync(file);
    early();
    early[Symbol.dispose]();
    expect(() => early()).toThrow(expect.objectContaining({ code: "ERELEASED" }));
    // After a transient failure (the lock fenced) the disposal releases again.
    const fenced = acquireLockSync(file);
    injectFaultForTesting("release.remove", "EBUSY", 5);
    expect(() => fenced()).toThrow(expect.objectContaining({ code: "EBUSY" }));
    expect(fs.existsSync(`${file}.lock`)).toBe(true);
    fenced[Symbol.dispose]();
    expect(fs.existsSync(`${file}.lock`)).toBe(false);
  });

  it("reclaims a dead owner's lock at once", async () => {
    const file = path.join(makeRoot(), "state.json");
    writeLock(file, canonicalRecord(await deadPid()));
    const release = acquireLockSync(file, { retries: 0 });
    release();
  });

  it("blocks this thread while another process holds the lock, and takes it when that one releases", async () => {
    const file = path.join(makeRoot(), "state.json");
    // This thread is blocked while it waits: the holder releases on a timer of its own.
    const holder = startFixture("hold.mjs", [file, "{}", "400"]);
    expect(await holder.nextLine()).toMatch(/^held/);
    const started = performance.now();
    const release = acquireLockSync(file, { retries: 100, retryDelayMs: 100 });
    expect(performance.now() - started).toBeGreaterThanOrEqual(250);
    expect(JSON.parse(fs.readFileSync(`${file}.lock/info`, "utf8")).pid).toBe(process.pid);
    release();
  });

  it("throws FileLockAcquireError (ELOCKED, a FileLockError) naming the holder when the budget is spent", async () => {
    const file = path.join(makeRoot(), "state.json");
    const holder = await holderFor(file, 60_000);
    const started = performance.now();
    let error: unknown;
    try {
      acquireLockSync(file, { retries: 3, retryDelayMs: 100 });
    } catch (caught) {
      error = caught;
    }
    expect(performance.now() - started).toBeGreaterThanOrEqual(250);
    expect(error).toBeInstanceOf(FileLockAcquireError);
    expect(error).toBeInstanceOf(FileLockError);
    expect((error as FileLockAcquireError).holderInfo?.pid).toBe(holder.child.pid);
  });

  it("never waits for its own process: EDEADLK at once while an async acquisition holds or waits for the lock", async () => {
    const file = path.join(makeRoot(), "state.json");
    const release = await acquireLock(file);
    const started = performance.now();
    expect(() => acquireLockSync(file, { retries: 100, retryDelayMs: 100 })).toThrow(
      expect.objectContaining({ code: "EDEADLK", lockPath: `${file}.lock` }),
    );
    const waiting = acquireLock(file, { retries: 100, retryDelayMs: 100 });
    await new Promise((resolve) => setTimeout(resolve, 20));
    await release();
    const second = await waiting;
    // An async waiter queued: still refused, never overtaken.
    const queued = acquireLock(file, { retries: 100, retryDelayMs: 100 });
    expect(() => acquireLockSync(file)).toThrow(expect.objectContaining({ code: "EDEADLK" }));
    expect(performance.now() - started).toBeLessThan(2_000);
    await second();
    await (await queued)();
    // Free again: the synchronous call takes it.
    acquireLockSync(file)();
  });
});

describe("sync and async in one process", () => {
  it("serialize: an async acquisition waits while the sync one holds, and takes the lock at its release", async () => {
    const file = path.join(makeRoot(), "state.json");
    const order: string[] = [];
    const releaseSync = acquireLockSync(file);
    order.push("sync holds");
    const waiting = acquireLock(file, { retries: 100, retryDelayMs: 100 }).then((release) => {
      order.push("async holds");
      return release;
    });
    await new Promise((resolve) => setTimeout(resolve, 150));
    expect(order).toEqual(["sync holds"]);
    releaseSync();
    order.push("sync released");
    await (await waiting)();
    expect(order).toEqual(["sync holds", "sync released", "async holds"]);
  });
});

describe("sync never overtakes async", () => {
  it("an async call made just before (not yet in the queue) is not overtaken: EDEADLK, and the async call gets the lock", async () => {
    const file = path.join(makeRoot(), "state.json");
    for (const inlineFastPath of [false, true]) {
      const order: string[] = [];
      const first = acquireLock(file, { inlineFastPath }).then((release) => {
        order.push("async");
        return release;
      });
      let refused: unknown;
      try {
        acquireLockSync(file)();
        order.push("sync");
      } catch (error) {
        refused = error;
      }
      await (await first)();
      if (inlineFastPath && order[0] === "sync") throw new Error("sync overtook the async call");
      if (refused !== undefined) expect((refused as FileLockError).code).toBe("EDEADLK");
      expect(order[0]).toBe("async");
    }
  });
});

describe("sync beside a slow async acquisition", () => {
  it("an async acquisition of another lock, stalled on its way to its queue (a slow mount), refuses no synchronous one", async () => {
    const root = makeRoot();
    const slow = path.join(root, "slow.json");
    const free = path.join(root, "free.json");
    // The async acquisition's first attempt stalls before it can know its key.
    injectDelayForTesting("attempt", 1_500, "slow.json.lock", 1);
    const stalled = acquireLock(slow, { inlineFastPath: false });
    try {
      await new Promise((resolve) => setTimeout(resolve, 200));
      // retries: 0 — a refusal would be EDEADLK, not a wait.
      const release = acquireLockSync(free, { retries: 0 });
      expect(JSON.parse(fs.readFileSync(`${free}.lock/info`, "utf8")).pid).toBe(process.pid);
      release();
      // The same lock is still never overtaken while that call is on its way.
      expect(() => acquireLockSync(slow)).toThrow(expect.objectContaining({ code: "EDEADLK" }));
    } finally {
      await (await stalled)();
    }
    acquireLockSync(slow)();
  });
});

describe("sync beside a stalled async acquisition of the same file name in another directory", () => {
  it("takes the free lock at once (issue 41, item 7: arrivals were told apart by file name alone)", async () => {
    const root = makeRoot();
    const [fast, slow] = ["fast", "slow"].map((dir) => path.join(root, dir, "state.json"));
    fs.mkdirSync(path.dirname(fast));
    fs.mkdirSync(path.dirname(slow));
    // The async call's first attempt stalls 1.5 s before it knows its key (a slow mount).
    injectDelayForTesting("attempt", 1_500, "state.json.lock", 1);
    const stalled = acquireLock(slow, { inlineFastPath: false });
    try {
      await new Promise((resolve) => setTimeout(resolve, 100));
      const started = performance.now();
      const release = acquireLockSync(fast, { retries: 0 });
      expect(performance.now() - started).toBeLessThan(1_000);
      expect(JSON.parse(fs.readFileSync(`${fast}.lock/info`, "utf8")).pid).toBe(process.pid);
      release();
    } finally {
      await (await stalled)();
    }
  });

  it("an earlier async call by an alias, arriving late, is neither overtaken nor waited for: EDEADLK once it is in line", async () => {
    const root = makeRoot();
    const real = path.join(root, "real");
    fs.mkdirSync(real);
    fs.symlinkSync(real, path.join(root, "alias"));
    const [file, alias] = [path.join(real, "state.json"), path.join(root, "alias", "state.json")];
    // Another process holds the lock, and releases it by itself after 600 ms (this thread blocks).
    const holder = startFixture("hold.mjs", [file, "{}", "600"]);
    expect(await holder.nextLine()).toMatch(/^held /);
    // The async call (by the alias) stalls 200 ms in its first attempt, before it knows its key.
    injectDelayForTesting("attempt", 200, "state.json.lock", 1);
    const stalled = acquireLock(alias, { inlineFastPath: false, timeout: 10_000 });
    const started = performance.now();
    let outcome = "taken";
    try {
      acquireLockSync(file, { timeout: 5_000 })();
    } catch (error) {
      outcome = (error as FileLockError).code;
    }
    const took = performance.now() - started;
    // It went past the stalled call (another path) and waited for the other process; once the
    // alias arrived ahead of it in this process's line for the same lock, it refused at its next
    // look (the holder's release at the latest) rather than wait on its own process.
    expect(outcome).toBe("EDEADLK");
    expect(took).toBeLessThan(2_000);
    await (await stalled)();
    holder.send("exit");
    await holder.exited;
  });
});

describe("sync beside an async acquisition of the same lock name", () => {
  it("refuses nothing for a lock in another directory once that call has reached its queue; for the same lock, EDEADLK still", async () => {
    const root = makeRoot();
    const here = path.join(root, "here", "state.json");
    fs.mkdirSync(path.dirname(here));
    for (const [target, refused] of [
      [path.join(root, "there", "state.json"), false],
      [path.join(root, "again", "state.json"), true],
    ] as const) {
      // The async call's first attempt, off this thread, creates its parent
      // and stalls there 30 ms before it knows which lock it is for.
      injectDelayForTesting("parent.created", 30, path.basename(path.dirname(target)), 1);
      const away = acquireLock(target, { inlineFastPath: false });
      // retries: 0 — it would not wait for another process; a refusal is EDEADLK.
      const asked = refused ? target : here;
      if (refused) {
        expect(() => acquireLockSync(asked, { retries: 0 })).toThrow(
          expect.objectContaining({ code: "EDEADLK", lockPath: `${target}.lock` }),
        );
      } else {
        const release = acquireLockSync(asked, { retries: 0 });
        expect(JSON.parse(fs.readFileSync(`${here}.lock/info`, "utf8")).pid).toBe(process.pid);
        release();
      }
      await (await away)();
    }
  });
});

describe("withFileLockSync", () => {
  it("refuses a function whose work would run after the release: an async one before locking, one returning a promise after", () => {
    const file = path.join(makeRoot(), "state.json");
    let ran = false;
    const refused = () =>
      withFileLockSync(file, async () => {
        ran = true;
      });
    expect(refused).toThrow(TypeError);
    expect(refused).toThrow(/async function.*use withFileLock/);
    expect(ran).toBe(false);
    expect(fs.existsSync(`${file}.lock`)).toBe(false);
    let thrown: any;
    try {
      withFileLockSync(file, () => Promise.resolve("late"));
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(TypeError);
    expect(thrown.code).toBe("ERR_INVALID_ARG_VALUE");
    expect(thrown.message).toContain(`released ${file}.lock`);
    // Released all the same.
    expect(fs.existsSync(`${file}.lock`)).toBe(false);
  });

  it("returns fn's value, releases when fn throws, and refuses a nested acquisition of the same lock", () => {
    const file = path.join(makeRoot(), "state.json");
    expect(withFileLockSync(file, () => 42)).toBe(42);
    expect(() =>
      withFileLockSync(file, () => {
        throw new Error("body failed");
      }),
    ).toThrow("body failed");
    expect(fs.existsSync(`${file}.lock`)).toBe(false);
    const nested = withFileLockSync(file, () => {
      try {
        withFileLockSync(file, () => 0);
      } catch (error) {
        return error as FileLockError;
      }
      return undefined;
    });
    expect(nested?.code).toBe("EDEADLK");
  });

  it("serializes with withFileLock across processes: a mixed counter of 2 sync and 2 async processes loses no update", async () => {
    const root = makeRoot();
    const file = path.join(root, "counter.json");
    const counter = path.join(root, "counter.txt");
    fs.writeFileSync(counter, "0");
    const marker = path.join(root, "inside");
    const modes = ["sync", "async", "sync", "async"];
    const workers = modes.map((mode) => startFixture("counter-worker.mjs", [file, counter, marker, "100", mode]));
    for (const worker of workers) expect(await worker.nextLine()).toBe("ready");
    for (const worker of workers) worker.send("go");
    const reports = await Promise.all(workers.map(async (worker) => JSON.parse(await worker.nextLine())));
    expect(reports.map((report) => report.violations)).toEqual([0, 0, 0, 0]);
    expect(reports.map((report) => report.sections)).toEqual([100, 100, 100, 100]);
    expect(Number(fs.readFileSync(counter, "utf8"))).toBe(400);
    // And in one process: the sync API beside async callers of another lock.
    const other = path.join(root, "other.json");
    await withFileLock(other, async () => {
      expect(withFileLockSync(file, () => "inside")).toBe("inside");
    });
  }, 120_000);
});
