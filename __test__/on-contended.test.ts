/**
 * onContended: told once, with the holder, when an acquisition first finds
 * its lock held by someone else and is about to wait.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { acquireLock, type ContendedHolder, withFileLock } from "../lib/index.ts";
import { cleanup as cleanupChildren, spawnHolder } from "./fixtures/children.ts";
import { cleanup, makeRoot, rejectionOf, sleep } from "./helpers.ts";

afterEach(async () => {
  await cleanupChildren();
  await cleanup();
});

describe("onContended", () => {
  it("fires once, with the other process's pid, before the acquisition waits; the lock comes when it is released", async () => {
    const file = path.join(makeRoot(), "state.json");
    const holder = await spawnHolder(file);
    const seen: ContendedHolder[] = [];
    let acquired = false;
    const waiting = acquireLock(file, {
      retries: 1000,
      retryDelayMs: 20, // many timer wake-ups while it waits: still one call
      onContended: (h) => seen.push(h),
    }).then((release) => {
      acquired = true;
      return release;
    });
    await sleep(400);
    expect(acquired).toBe(false);
    expect(seen).toHaveLength(1);
    expect(seen[0]).toMatchObject({ state: "record", pid: holder.pid, liveness: "live", stale: false });
    expect(seen[0]!.description).toContain(`pid ${holder.pid} (live)`);
    holder.send("release");
    await holder.nextLine("released");
    const release = await waiting;
    await release();
    expect(seen).toHaveLength(1);
  });

  it("is not called when the lock is free", async () => {
    const file = path.join(makeRoot(), "state.json");
    let calls = 0;
    for (const inlineFastPath of [true, false]) {
      const release = await acquireLock(file, { inlineFastPath, onContended: () => calls++ });
      await release();
    }
    expect(calls).toBe(0);
  });

  it("fires for a caller queued behind another caller of this process, naming this process", async () => {
    const file = path.join(makeRoot(), "state.json");
    const first = await acquireLock(file);
    const seen: ContendedHolder[] = [];
    // One caller waits at the head; the second queues behind it.
    const head = acquireLock(file, { retries: 100, retryDelayMs: 100 });
    await sleep(50);
    const queued = acquireLock(file, { retries: 100, retryDelayMs: 100, onContended: (h) => seen.push(h) });
    await sleep(200);
    expect(seen).toHaveLength(1);
    expect(seen[0]).toMatchObject({ state: "record", pid: process.pid, liveness: "live" });
    await first();
    await (await head)();
    await (await queued)();
    expect(seen).toHaveLength(1);
  });

  it("a throw stops the acquisition: it rejects with that error and leaves nothing of its own", async () => {
    const file = path.join(makeRoot(), "state.json");
    const holder = await spawnHolder(file);
    const refusal = new Error("not waiting for that");
    const started = performance.now();
    const error = await rejectionOf(
      withFileLock(file, async () => "never", {
        retries: 1000,
        retryDelayMs: 100,
        onContended: () => {
          throw refusal;
        },
      }),
    );
    expect(error).toBe(refusal);
    expect(performance.now() - started).toBeLessThan(2_000);
    expect(fs.readdirSync(path.dirname(file))).toEqual(["state.json.lock"]);
    holder.send("exit");
    await holder.exited;
  });

  it("a throw is never lost when the budget runs out first: the acquisition rejects with it, not ELOCKED", async () => {
    const file = path.join(makeRoot(), "state.json");
    const holder = await spawnHolder(file);
    for (const options of [{ retries: 0 }, { retries: 1, retryDelayMs: 1 }]) {
      const refusal = new Error("bail");
      let calls = 0;
      const error = await rejectionOf(
        acquireLock(file, {
          ...options,
          onContended: () => {
            calls++;
            throw refusal;
          },
        }),
      );
      expect(error).toBe(refusal);
      expect(calls).toBe(1);
    }
    expect(fs.readdirSync(path.dirname(file))).toEqual(["state.json.lock"]);
    holder.send("exit");
    await holder.exited;
  });

  it("a call that would arrive after the outcome is dropped: the lock won meanwhile is the caller's, never left held", async () => {
    const file = path.join(makeRoot(), "state.json");
    const first = await acquireLock(file);
    let calls = 0;
    // Its outcome is taken at once: it may settle (with "bail") before the release below is awaited.
    const waiting = acquireLock(file, {
      retries: 1000,
      retryDelayMs: 10,
      onContended: () => {
        calls++;
        throw new Error("bail");
      },
    }).then(
      (release) => ({ release }),
      (error: Error) => ({ error }),
    );
    // Keep this thread busy so the callback cannot run before the lock frees.
    const busyUntil = (ms: number) => {
      const end = performance.now() + ms;
      while (performance.now() < end) {}
    };
    busyUntil(50);
    const releasing = first();
    busyUntil(50);
    await releasing;
    const outcome = await waiting;
    if ("release" in outcome) {
      expect(calls).toBe(0);
      await outcome.release();
    } else {
      expect(outcome.error.message).toBe("bail");
      expect(calls).toBe(1);
    }
    expect(fs.readdirSync(path.dirname(file))).toEqual([]);
  });
});
