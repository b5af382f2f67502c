/**
 * Under Bun: a terminated worker_threads Worker leaves no lock behind (the
 * same two scenarios as __test__/workers.test.ts under Node).
 *
 * Hole: the native acquisition outlives the Worker's environment. A Worker
 * terminated while WAITING keeps waiting natively, takes the lock when it
 * frees and holds it forever (the pid is alive: nobody may reclaim it); a
 * Worker terminated while HOLDING keeps it held. After the fix the
 * teardown of a Worker's environment cancels its acquisitions and gives
 * back its locks. Real threads and a real holder process; the only timing
 * asserted is the bound: this process gets the lock within 1 s.
 */
import { afterEach, describe, expect, it } from "bun:test";
import * as fs from "node:fs";
import * as path from "node:path";
import { Worker } from "node:worker_threads";
import { acquireLock } from "../lib/index.ts";
import { cleanup, spawnHolder, tempRoot, withinMs } from "../__test__/fixtures/children.ts";

const REPO = path.resolve(__dirname, "..");
const FACADE = path.join(REPO, "dist", "index.js");
const WORKER = path.join(REPO, "__test__", "fixtures", "lock-worker.mjs");

const workers: Worker[] = [];
afterEach(async () => {
  await Promise.all(workers.splice(0).map((worker) => worker.terminate()));
  await cleanup();
});

/** Within 1 s: 100 re-checks 10 ms apart, then ELOCKED. */
const ONE_SECOND = { retries: 100, retryDelayMs: 10 } as const;

function startWorker(file: string, mode: "wait" | "hold" | "wait-sync", options: object = {}) {
  const worker = new Worker(WORKER, { workerData: { facade: FACADE, file, mode, options } });
  workers.push(worker);
  const messages: string[] = [];
  const waiting: Array<() => void> = [];
  worker.on("message", (message: string) => {
    messages.push(message);
    for (const wake of waiting.splice(0)) wake();
  });
  worker.on("error", (error) => {
    messages.push(`error ${error}`);
    for (const wake of waiting.splice(0)) wake();
  });
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

async function waitUntil(predicate: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

const lockNames = (dir: string) => fs.readdirSync(dir).filter((n) => n.startsWith("state.json.lock")).sort();
const readRecord = (file: string) => JSON.parse(fs.readFileSync(`${file}.lock/info`, "utf8"));

describe("under bun: a terminated Worker leaves no lock behind", () => {
  it("a Worker WAITING for a lock is terminated; when the holder releases, this process acquires within 1 s with its own record, and its release leaves nothing", async () => {
    const root = tempRoot("exactlock-workers-bun-");
    const file = path.join(root, "state.json");
    const holder = await spawnHolder(file);

    const { worker, next } = startWorker(file, "wait", { retries: 1000, retryDelayMs: 10 });
    await next("waiting");
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
    expect(readRecord(file)).toEqual(mine!);
    await release();
    // Nothing is left (the terminated Worker's staging is cleaned up too, perhaps a moment later) ...
    await waitUntil(() => lockNames(root).length === 0, 5_000, "an empty directory");
    // ... and no orphan takes the lock afterwards.
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(lockNames(root)).toEqual([]);
  }, 30_000);

  it("a Worker HOLDING a lock is terminated: the lock is given back, this process acquires within 1 s", async () => {
    const root = tempRoot("exactlock-workers-bun-");
    const file = path.join(root, "state.json");
    const { worker, next } = startWorker(file, "hold");
    await next("held");
    expect(readRecord(file).pid).toBe(process.pid);
    await worker.terminate();

    const release = await withinMs(acquireLock(file, ONE_SECOND), 10_000, "this process's acquisition");
    await release();
    expect(lockNames(root)).toEqual([]);
  }, 30_000);
});

describe("under bun: a Worker blocked in acquireLockSync can be stopped", () => {
  it("terminate() settles while the Worker waits with retries: Infinity, and the Worker leaves nothing behind", async () => {
    const root = tempRoot("exactlock-workers-bun-");
    const file = path.join(root, "state.json");
    const holder = await spawnHolder(file);
    const staged = () => fs.readdirSync(root).filter((n) => n.startsWith(`state.json.lock.pending.${process.pid}.`));
    const { worker, next } = startWorker(file, "wait-sync", { retries: Infinity });
    await next("waiting");
    await waitUntil(() => staged().length === 1, 10_000, "the Worker's staged record");
    await withinMs(worker.terminate(), 5_000, "worker.terminate()");
    await waitUntil(() => staged().length === 0, 5_000, "the Worker's staging removed");
    expect(readRecord(file).pid).toBe(holder.proc.pid);
    holder.send("release");
    await holder.nextLine("released");
    const release = await withinMs(acquireLock(file, ONE_SECOND), 10_000, "this process's acquisition");
    await release();
    expect(lockNames(root)).toEqual([]);
  }, 30_000);
});
