/**
 * Every way a wait for a held lock ends, one row each (README, "How a wait
 * ends"): the error's class, code and cause. The holder is another process
 * (holder.mjs), alive throughout. Elapsed times are checked only from below:
 * a budget must not end early.
 */
import * as fs from "node:fs";
import { getEventListeners } from "node:events";
import * as path from "node:path";
import { pathToFileURL } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import {
  acquireLock,
  acquireLockSync,
  FileLockAcquireError,
  FileLockError,
  tryAcquireLock,
  withFileLock,
  withFileLockSync,
} from "../lib/index.ts";
import { spawnHolder } from "./fixtures/children.ts";
import { cleanup, lockPathOf, makeRoot, rejectionOf } from "./helpers.ts";

afterEach(cleanup);

async function heldElsewhere(): Promise<{ file: string; pid: number; release: () => Promise<void> }> {
  const file = path.join(makeRoot(), "state.json");
  const holder = await spawnHolder(file);
  return {
    file,
    pid: holder.pid,
    release: async () => {
      holder.send("release");
      await holder.nextLine("released ");
    },
  };
}

interface Row {
  way: string;
  options: () => object;
  /** The least time the wait must last, in ms. */
  atLeastMs: number;
  /** What it ends with: the class and code, or the abort reason itself. */
  expect: (error: unknown, pid: number, options: Record<string, unknown>) => void;
}

function lockedByHolder(error: unknown, pid: number): FileLockAcquireError {
  expect(error).toBeInstanceOf(FileLockAcquireError);
  const acquireError = error as FileLockAcquireError;
  expect(acquireError.code).toBe("ELOCKED");
  expect(acquireError.holderInfo?.pid).toBe(pid);
  expect(acquireError.holder).toContain(`pid ${pid} (live)`);
  return acquireError;
}

const rows: Row[] = [
  {
    way: "the budget retries × retryDelayMs is spent",
    options: () => ({ retries: 3, retryDelayMs: 50 }),
    atLeastMs: 150,
    expect: (error, pid) => expect(lockedByHolder(error, pid).cause).toBeUndefined(),
  },
  {
    way: "timeout is spent (it replaces retries × retryDelayMs: 10 × 10 ms would be 100 ms)",
    options: () => ({ timeout: 600, retries: 10, retryDelayMs: 10 }),
    atLeastMs: 600,
    expect: (error, pid) => expect(lockedByHolder(error, pid).cause).toBeUndefined(),
  },
  {
    way: "timeout: 0 makes one attempt",
    options: () => ({ timeout: 0, retries: 1000, retryDelayMs: 1000 }),
    atLeastMs: 0,
    expect: (error, pid) => expect(lockedByHolder(error, pid).attempts).toBe(1),
  },
  {
    way: "the signal is aborted (AbortController): the signal's reason, as the original rejects",
    options: () => {
      const controller = new AbortController();
      setTimeout(() => controller.abort(new Error("stop waiting")), 200);
      return { retries: Infinity, signal: controller.signal };
    },
    atLeastMs: 200,
    expect: (error, _pid, options) => expect(error).toBe((options.signal as AbortSignal).reason),
  },
  {
    way: "the signal is AbortSignal.timeout(): FileLockAcquireError, its TimeoutError the cause",
    options: () => ({ retries: Infinity, signal: AbortSignal.timeout(300) }),
    atLeastMs: 300,
    expect: (error, pid, options) => {
      const acquireError = lockedByHolder(error, pid);
      expect(acquireError.cause).toBe((options.signal as AbortSignal).reason);
      expect((acquireError.cause as Error).name).toBe("TimeoutError");
      expect(acquireError.message).toContain("when its signal timed out");
    },
  },
];

describe("how a wait ends", () => {
  it.each(rows)("$way", async (row) => {
    const { file, pid } = await heldElsewhere();
    const options = row.options() as Record<string, unknown>;
    const started = performance.now();
    const error = await rejectionOf(acquireLock(file, options));
    const elapsed = performance.now() - started;
    row.expect(error, pid, options);
    expect(elapsed).toBeGreaterThanOrEqual(row.atLeastMs - 1);
    expect(fs.readdirSync(path.dirname(file)).sort()).toEqual(["state.json.lock"]);
  });

  it("one signal shared by many waits (a shutdown signal): one listener, no leak warning, every wait aborted", async () => {
    const root = makeRoot();
    const files = Array.from({ length: 12 }, (_, i) => path.join(root, `state-${i}.json`));
    const held = await Promise.all(files.map((file) => acquireLock(file)));
    const warnings: string[] = [];
    const onWarning = (warning: Error) => void warnings.push(`${warning.name}: ${warning.message}`);
    process.on("warning", onWarning);
    try {
      const shutdown = new AbortController();
      const reason = new Error("shutting down");
      const waits = files.map((file) => rejectionOf(acquireLock(file, { signal: shutdown.signal, timeout: 30_000 })));
      await new Promise((resolve) => setTimeout(resolve, 100));
      expect(getEventListeners(shutdown.signal, "abort")).toHaveLength(1);
      shutdown.abort(reason);
      for (const error of await Promise.all(waits)) expect(error).toBe(reason);
      expect(getEventListeners(shutdown.signal, "abort")).toHaveLength(0);
      // Node emits its warning on the next tick.
      await new Promise((resolve) => setImmediate(resolve));
      expect(warnings).toEqual([]);
    } finally {
      process.off("warning", onWarning);
      await Promise.all(held.map((release) => release()));
    }
  });

  it("tryAcquireLock: undefined while another process holds the lock, the release once it is free", async () => {
    const { file, release } = await heldElsewhere();
    expect(await tryAcquireLock(file, { retries: 1000, retryDelayMs: 1000 })).toBeUndefined();
    await release();
    const mine = await tryAcquireLock(file);
    expect(typeof mine).toBe("function");
    expect(JSON.parse(fs.readFileSync(path.join(lockPathOf(file), "info"), "utf8")).pid).toBe(process.pid);
    await mine!();
    expect(fs.existsSync(lockPathOf(file))).toBe(false);
  });

  it("tryAcquireLock honours options as acquireLock reads them, inherited ones too", async () => {
    const file = path.join(makeRoot(), "state.json");
    let called = 0;
    const options = Object.create({ onAcquired: () => called++ }) as object;
    const release = await tryAcquireLock(file, options);
    expect(called).toBe(1);
    await release!();
  });

  it("a signal aborted before the call rejects with its reason at once, a TimeoutError too (SPEC §3: no attempt, no holder)", async () => {
    const { file } = await heldElsewhere();
    const signal = AbortSignal.timeout(1);
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(signal.aborted).toBe(true);
    expect(await rejectionOf(acquireLock(file, { signal }))).toBe(signal.reason);
    expect(await rejectionOf(tryAcquireLock(file, { signal }))).toBe(signal.reason);
  });

  it("only AbortSignal.timeout()'s DOMException counts as a timeout: an Error named TimeoutError is the reason itself", async () => {
    const { file } = await heldElsewhere();
    const controller = new AbortController();
    const mine = Object.assign(new Error("mine"), { name: "TimeoutError" });
    setTimeout(() => controller.abort(mine), 100);
    expect(await rejectionOf(acquireLock(file, { retries: Infinity, signal: controller.signal }))).toBe(mine);
  });

  it("tryAcquireLock rejects what is not contention as acquireLock does", async () => {
    const error = await rejectionOf(tryAcquireLock("relative/state.json"));
    expect(error).toBeInstanceOf(TypeError);
    expect(await rejectionOf(tryAcquireLock("/x", "nope" as never))).toBeInstanceOf(TypeError);
  });

  it("retryDelayMs: 10 with timeout: 10_000 waits the full 10 s (not 50 × 10 ms)", { timeout: 30_000 }, async () => {
    const { file, pid } = await heldElsewhere();
    const started = performance.now();
    const error = await rejectionOf(acquireLock(file, { retryDelayMs: 10, timeout: 10_000 }));
    const elapsed = performance.now() - started;
    lockedByHolder(error, pid);
    expect(elapsed).toBeGreaterThanOrEqual(10_000 - 1);
  });

  it("timeout: Infinity waits until the holder releases", async () => {
    const { file, release } = await heldElsewhere();
    const waiting = acquireLock(file, { timeout: Infinity, retries: 0, retryDelayMs: 10 });
    await new Promise((resolve) => setTimeout(resolve, 300));
    await release();
    await (await waiting)();
  });

  it("acquireLockSync: timeout bounds the blocking wait the same way", async () => {
    const { file, pid } = await heldElsewhere();
    const started = performance.now();
    let error: unknown;
    try {
      acquireLockSync(file, { timeout: 400, retries: 1, retryDelayMs: 10 });
    } catch (thrown) {
      error = thrown;
    }
    expect(performance.now() - started).toBeGreaterThanOrEqual(399);
    lockedByHolder(error, pid);
  });

  it.each([-1, Number.NaN, "100", null])("timeout %s is a TypeError before the disk", async (timeout) => {
    const root = makeRoot();
    const error = await rejectionOf(acquireLock(path.join(root, "a", "state.json"), { timeout } as never));
    expect(error).toBeInstanceOf(TypeError);
    expect(error.message).toContain("timeout");
    expect(fs.readdirSync(root)).toEqual([]);
  });
});

describe("withFileLock hands its function the held lock", () => {
  it("its lockPath, and a signal that aborts with EMISSING when someone else removes the lock", async () => {
    const file = path.join(makeRoot(), "state.json");
    let signalReason: unknown;
    const outcome = await withFileLock(file, async (lock) => {
      expect(lock.lockPath).toBe(lockPathOf(file));
      const aborted = new Promise((resolve) => lock.signal.addEventListener("abort", () => resolve(lock.signal.reason)));
      fs.rmSync(lock.lockPath, { recursive: true });
      signalReason = await aborted;
    }).then(
      () => "released",
      (error: unknown) => error,
    );
    expect(signalReason).toBeInstanceOf(FileLockError);
    expect((signalReason as FileLockError).code).toBe("EMISSING");
    // The lock was gone at release too: the release says so.
    expect((outcome as FileLockError).code).toBe("EMISSING");
  });

  it("withFileLockSync too; a function that takes no argument is called as before", () => {
    const file = path.join(makeRoot(), "state.json");
    expect(withFileLockSync(file, (lock) => lock.lockPath)).toBe(lockPathOf(file));
    expect(withFileLockSync(file, () => 7)).toBe(7);
  });
});

describe("the path: an absolute string or a file: URL", () => {
  it("a file: URL names the same lock as its path", async () => {
    const file = path.join(makeRoot(), "with space é.json");
    const release = await acquireLock(pathToFileURL(file));
    expect(fs.existsSync(lockPathOf(file))).toBe(true);
    expect(await tryAcquireLock(file)).toBeUndefined();
    await release();
  });

  it.each([
    ["a relative path", "state.json", "must be an absolute path (or a URL object with the file: scheme): resolve it first"],
    ["an http: URL", new URL("http://example.com/state.json"), "must be a file: URL"],
    ["a file: URL with a host", new URL("file://server/share/state.json"), "names no local path"],
  ])("%s is a TypeError naming the fix", async (_what, filePath, words) => {
    const error = await rejectionOf(acquireLock(filePath as string));
    expect(error).toBeInstanceOf(TypeError);
    expect(error.code).toBe("ERR_INVALID_ARG_VALUE");
    expect(error.message).toContain(words);
  });
});
