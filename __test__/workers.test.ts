/**
 * Hole: a terminated worker_threads Worker leaves an orphan lock behind.
 *
 * The native acquisition outlives the JavaScript environment that started
 * it: when a Worker that is waiting for a lock is terminated, its wait goes
 * on, takes the lock when it frees, and holds it forever (the pid is alive,
 * so nobody may reclaim it); a Worker terminated while HOLDING a lock keeps
 * it held the same way. After the fix the teardown of a Worker's
 * environment cancels its pending acquisitions (and their staging) and
 * gives back the locks it holds.
 *
 * Real threads (node:worker_threads running fixtures/lock-worker.mjs with
 * dist/index.js) and a real holder process. The only timing asserted is the
 * brief's bound: this process gets the lock within 1 s (a 100 × 10 ms
 * budget).
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { Worker } from "node:worker_threads";
import { afterEach, describe, expect, it } from "vitest";
import { acquireLock } from "../lib/index.ts";
import { cleanup, spawnFixture, spawnHolder, tempRoot, withinMs } from "./fixtures/children.ts";
import { waitUntil } from "./helpers.ts";
import { FACADE, fixture, lockNames } from "./kernel-helpers.ts";

const workers: Worker[] = [];
afterEach(async () => {
  await Promise.all(workers.splice(0).map((worker) => worker.terminate()));
  await cleanup();
});

/** Within 1 s: 100 re-checks 10 ms apart, then ELOCKED. */
const ONE_SECOND = { retries: 100, retryDelayMs: 10 } as const;

function startWorker(file: string, mode: "wait" | "hold" | "wait-sync", options: object = {}): { worker: Worker; next: (what: string) => Promise<void> } {
  const worker = new Worker(fixture("lock-worker.mjs"), { workerData: { facade: FACADE, file, mode, options } });
  workers.push(worker);
  const messages: string[] = [];
  const waiting: Array<() => void> = [];
  worker.on("message", (message: string) => {
    messages.push(message);
    for (const wake of waiting.splice(0)) wake();
  });
  worker.on("error", (error) => messages.push(`error ${error}`));
  const next = async (what: string) => {
    for (;;) {
      const failure = messages.find((m) => m.startsWith("error"));
      if (failure) throw new Error(`worker: ${failure}`);
      if (messages.includes(what)) return;
      await withinMs(new Promise<void>((resolve) => waiting.push(resolve)), 20_000, `worker message "${what}"`);
    }
  };
  return { worker, next };
}

const readRecord = (file: string) => JSON.parse(fs.readFileSync(`${file}.lock/info`, "utf8"));

describe("a terminated Worker leaves no lock behind", () => {
  it("a Worker WAITING for a lock is terminated; when the holder releases, this process acquires within 1 s with its own record, and its release leaves nothing", async () => {
    const root = tempRoot("exactlock-workers-");
    const file = path.join(root, "state.json");
    const holder = await spawnHolder(file);

    const { worker, next } = startWorker(file, "wait", { retries: 1000, retryDelayMs: 10 });
    await next("waiting");
    // The native wait has really begun: the waiter's record is staged (named by this process's pid).
    const staged = () => fs.readdirSync(root).filter((n) => n.startsWith(`state.json.lock.pending.${process.pid}.`));
    const stagedRecord = () => {
      try {
        return JSON.parse(fs.readFileSync(path.join(root, staged()[0]!, "info"), "utf8")) as { owner_token: string };
      } catch {
        return undefined; // no staging dir yet, or its record is not written in full yet
      }
    };
    await waitUntil(() => staged().length === 1 && stagedRecord() !== undefined, 10_000, "the Worker's staged record");
    const workerToken = stagedRecord()!.owner_token;
    await worker.terminate();

    holder.send("release");
    await holder.nextLine("released");

    let mine: Record<string, unknown> | undefined;
    const release = await withinMs(
      acquireLock(file, { ...ONE_SECOND, onAcquired: () => (mine = readRecord(file)) }),
      10_000,
      "this process's acquisition",
    );
    expect(mine?.pid).toBe(process.pid);
    expect(mine?.owner_token).not.toBe(workerToken); // ours, not the orphan's
    expect(readRecord(file)).toEqual(mine);
    await release();
    // Nothing is left (the terminated Worker's staging is cleaned up too, perhaps a moment later) ...
    await waitUntil(() => lockNames(root, "state.json").length === 0, 5_000, "an empty directory");
    // ... and no orphan takes the lock afterwards.
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(lockNames(root, "state.json")).toEqual([]);
  });

  it("a Worker HOLDING a lock is terminated: the lock is given back, this process acquires within 1 s", async () => {
    const root = tempRoot("exactlock-workers-");
    const file = path.join(root, "state.json");
    const { worker, next } = startWorker(file, "hold");
    await next("held");
    expect(readRecord(file).pid).toBe(process.pid);
    await worker.terminate();

    const release = await withinMs(acquireLock(file, ONE_SECOND), 10_000, "this process's acquisition");
    await release();
    expect(lockNames(root, "state.json")).toEqual([]);
  });
});

describe("a Worker blocked in acquireLockSync can be stopped", () => {
  const stagedBy = (root: string, pid: number) =>
    fs.readdirSync(root).filter((n) => n.startsWith(`state.json.lock.pending.${pid}.`));

  it("terminate() settles while the Worker waits with retries: Infinity, and the Worker leaves nothing behind", async () => {
    const root = tempRoot("exactlock-workers-");
    const file = path.join(root, "state.json");
    const holder = await spawnHolder(file);
    const { worker, next } = startWorker(file, "wait-sync", { retries: Infinity });
    await next("waiting");
    // The Worker's thread is blocked in the native wait: its record is staged.
    await waitUntil(() => stagedBy(root, process.pid).length === 1, 10_000, "the Worker's staged record");
    await withinMs(worker.terminate(), 5_000, "worker.terminate()");
    // Its staging goes with it; the holder's lock stays the holder's.
    await waitUntil(() => stagedBy(root, process.pid).length === 0, 5_000, "the Worker's staging removed");
    expect(readRecord(file).pid).toBe(holder.proc.pid);
    holder.send("release");
    await holder.nextLine("released");
    const release = await withinMs(acquireLock(file, ONE_SECOND), 10_000, "this process's acquisition");
    await release();
    expect(lockNames(root, "state.json")).toEqual([]);
  });

  it("process.exit() in the main thread returns while a Worker waits in acquireLockSync with retries: Infinity", async () => {
    const root = tempRoot("exactlock-workers-");
    const file = path.join(root, "state.json");
    const holder = await spawnHolder(file);
    const child = spawnFixture("exit-beside-sync-worker.mjs", [FACADE, file]);
    await child.nextLine("exiting");
    const { code } = await withinMs(child.exited, 10_000, "the process's exit");
    expect(code).toBe(7);
    expect(stagedBy(root, child.proc.pid!)).toEqual([]);
    expect(readRecord(file).pid).toBe(holder.proc.pid);
  });
});
