/**
 * What is never reclaimed, never deleted and never followed (SPEC §1.5, §4):
 * a symlinked lock dir or `info`, a FIFO or huge `info`, malformed records,
 * and a dead pid recorded by another host. Every refusal must also end: the
 * waiter times out with FileLockAcquireError within its budget.
 */
import { execFileSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import * as fs from "node:fs";
import * as path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { type FileLockOptions, FileLockAcquireError, acquireLock } from "../lib/index.ts";
import {
  cleanup,
  deadPid,
  debrisOf,
  fingerprint,
  metric,
  originalRecordBytes,
  publishLikeOriginal,
  tempRoot,
  withinMs,
} from "./fixtures/children.ts";

afterEach(cleanup);

/** A waiter that would reclaim anything aged past 1 ms: budget 200 ms. */
const WAITER: FileLockOptions = { staleMs: 1, retries: 4, retryDelayMs: 50 };
const HOUR_AGO = new Date(Date.now() - 3_600_000);

function deadOwnerRecord(extra: { owner_host_id?: string } = {}): string {
  return originalRecordBytes({
    pid: deadPid(),
    start_time: "Wed Dec  2 08:36:20 2026",
    start_time_format: "utc-v1",
    timestamp: Date.now() - 3_600_000,
    owner_token: randomUUID(),
    ...extra,
  });
}

/** Runs a waiter that must give up (never hang, never acquire). */
async function expectRefused(file: string, options: FileLockOptions = WAITER): Promise<FileLockAcquireError> {
  const error = await withinMs(
    acquireLock(file, options).then(
      async (release) => {
        await release();
        return new Error("the waiter acquired the lock");
      },
      (e: unknown) => e,
    ),
    15_000,
    "waiter on a refused lock",
  );
  expect(error).toBeInstanceOf(FileLockAcquireError);
  const acquireError = error as FileLockAcquireError;
  expect(acquireError.code).toBe("ELOCKED");
  expect(acquireError.lockPath).toBe(`${file}.lock`);
  expect(acquireError.holderInfo?.stale).toBe(false);
  return acquireError;
}

/** Nothing but the lock itself beside it: no `.removing`, no staging left. */
function expectNoDebris(root: string): void {
  expect(debrisOf(root, "state.json")).toEqual(["state.json.lock"]);
}

describe("a symlink is never followed, reclaimed or deleted", () => {
  it("lock dir is a symlink to a dir holding a dead owner's record", async () => {
    const root = tempRoot();
    const file = path.join(root, "state.json");
    const target = path.join(root, "elsewhere");
    fs.mkdirSync(target, { mode: 0o700 });
    fs.writeFileSync(path.join(target, "info"), deadOwnerRecord(), { mode: 0o600 });
    fs.utimesSync(path.join(target, "info"), HOUR_AGO, HOUR_AGO);
    fs.utimesSync(target, HOUR_AGO, HOUR_AGO);
    fs.symlinkSync(target, `${file}.lock`);
    fs.lutimesSync(`${file}.lock`, HOUR_AGO, HOUR_AGO);
    const link = fingerprint(`${file}.lock`);
    const pointee = fingerprint(target);

    const error = await expectRefused(file);
    expect(error.holderInfo?.state).toBe("not_a_lock");

    expect(fingerprint(`${file}.lock`)).toEqual(link);
    expect(fingerprint(target)).toEqual(pointee);
    expectNoDebris(root);
  });

  it("info is a symlink to a file holding a dead owner's record", async () => {
    const root = tempRoot();
    const file = path.join(root, "state.json");
    const target = path.join(root, "elsewhere-info");
    fs.writeFileSync(target, deadOwnerRecord(), { mode: 0o600 });
    fs.mkdirSync(`${file}.lock`, { mode: 0o700 });
    fs.symlinkSync(target, `${file}.lock/info`);
    fs.lutimesSync(`${file}.lock/info`, HOUR_AGO, HOUR_AGO);
    fs.utimesSync(`${file}.lock`, HOUR_AGO, HOUR_AGO);
    const lock = fingerprint(`${file}.lock`);
    const pointee = fingerprint(target);

    await expectRefused(file);

    expect(fingerprint(`${file}.lock`)).toEqual(lock);
    expect(fingerprint(target)).toEqual(pointee);
    expectNoDebris(root);
  });

  it("control: the same dead owner's record as a plain info file is reclaimed at once", async () => {
    const root = tempRoot();
    const file = path.join(root, "state.json");
    publishLikeOriginal(file, deadOwnerRecord());
    const release = await acquireLock(file, { ...WAITER, retries: 0 });
    expect(JSON.parse(fs.readFileSync(`${file}.lock/info`, "utf8")).pid).toBe(process.pid);
    await release();
    expect(debrisOf(root, "state.json")).toEqual([]);
  });
});

describe("an info that cannot be read safely is held, not read-blocked and not reclaimed", () => {
  it("info is a FIFO: the waiter does not hang and times out within its budget", async () => {
    const root = tempRoot();
    const file = path.join(root, "state.json");
    fs.mkdirSync(`${file}.lock`, { mode: 0o700 });
    execFileSync("mkfifo", ["-m", "600", `${file}.lock/info`]);
    fs.utimesSync(`${file}.lock/info`, HOUR_AGO, HOUR_AGO);
    fs.utimesSync(`${file}.lock`, HOUR_AGO, HOUR_AGO);
    const before = fingerprint(`${file}.lock`);

    const started = Date.now();
    await expectRefused(file);
    metric("FIFO info: waiter gave up after (ms, budget 200)", Date.now() - started);

    expect(fingerprint(`${file}.lock`)).toEqual(before);
    expect(fs.lstatSync(`${file}.lock/info`).isFIFO()).toBe(true);
    expectNoDebris(root);
  });

  it("info is 64 MiB (sparse): refused with bounded memory (rss growth < 32 MiB)", async () => {
    const root = tempRoot();
    const file = path.join(root, "state.json");
    fs.mkdirSync(`${file}.lock`, { mode: 0o700 });
    const fd = fs.openSync(`${file}.lock/info`, "w", 0o600);
    fs.ftruncateSync(fd, 64 * 1024 * 1024);
    fs.closeSync(fd);
    fs.utimesSync(`${file}.lock/info`, HOUR_AGO, HOUR_AGO);
    fs.utimesSync(`${file}.lock`, HOUR_AGO, HOUR_AGO);
    const before = fingerprint(`${file}.lock`);

    // The kernel's peak-RSS mark, reset to now (Linux: clear_refs 5).
    let hwmReset = false;
    try {
      fs.writeFileSync("/proc/self/clear_refs", "5");
      hwmReset = true;
    } catch {
      // not permitted here: rely on sampling alone
    }
    const rssBefore = process.memoryUsage().rss;
    let rssPeak = rssBefore;
    const sampler = setInterval(() => {
      rssPeak = Math.max(rssPeak, process.memoryUsage().rss);
    }, 2);
    try {
      await expectRefused(file);
    } finally {
      clearInterval(sampler);
    }
    rssPeak = Math.max(rssPeak, process.memoryUsage().rss);
    let growth = rssPeak - rssBefore;
    if (hwmReset) {
      const hwmKb = Number(/VmHWM:\s+(\d+) kB/.exec(fs.readFileSync("/proc/self/status", "utf8"))![1]);
      growth = Math.max(growth, hwmKb * 1024 - rssBefore);
    }
    metric("64 MiB info: rss growth while refusing (MiB)", +(growth / 2 ** 20).toFixed(2));
    expect(growth).toBeLessThan(32 * 1024 * 1024);

    expect(fingerprint(`${file}.lock`)).toEqual(before);
    expectNoDebris(root);
  });

  it.each([
    ["empty", ""],
    ["truncated JSON", "{"],
    ["JSON null", "null"],
    ["pid 0", JSON.stringify({ pid: 0, start_time: "unknown", start_time_format: "utc-v1", timestamp: 1 })],
  ])("malformed info (%s) is never reclaimed, however old", async (_label, bytes) => {
    const root = tempRoot();
    const file = path.join(root, "state.json");
    fs.mkdirSync(`${file}.lock`, { mode: 0o700 });
    fs.writeFileSync(`${file}.lock/info`, bytes, { mode: 0o600 });
    fs.utimesSync(`${file}.lock/info`, HOUR_AGO, HOUR_AGO);
    fs.utimesSync(`${file}.lock`, HOUR_AGO, HOUR_AGO);
    const before = fingerprint(`${file}.lock`);

    const error = await expectRefused(file);
    expect(error.holderInfo?.state).toBe("malformed");

    expect(fingerprint(`${file}.lock`)).toEqual(before);
    expect(fs.readFileSync(`${file}.lock/info`, "utf8")).toBe(bytes);
    expectNoDebris(root);
  });
});

describe("a record of another host is never judged from here", () => {
  it.each([
    ["an acquirer with another ownerHostId", { ownerHostId: "this-host" }],
    ["an acquirer without ownerHostId", {}],
  ])("a foreign owner_host_id record of a dead pid is not reclaimed by %s", async (_label, hostOptions) => {
    const root = tempRoot();
    const file = path.join(root, "state.json");
    const bytes = deadOwnerRecord({ owner_host_id: "other-host" });
    const lockPath = publishLikeOriginal(file, bytes);
    fs.utimesSync(`${lockPath}/info`, HOUR_AGO, HOUR_AGO);
    fs.utimesSync(lockPath, HOUR_AGO, HOUR_AGO);
    const before = fingerprint(lockPath);

    const error = await expectRefused(file, { ...WAITER, ...hostOptions });
    expect(error.holderInfo).toMatchObject({ state: "record", ownerHostId: "other-host", foreign: true });
    expect(error.message).toContain("other-host");

    expect(fingerprint(lockPath)).toEqual(before);
    expect(fs.readFileSync(`${lockPath}/info`, "utf8")).toBe(bytes);
    expectNoDebris(root);
  });

  it("control: the same record is reclaimed by an acquirer whose ownerHostId is that host", async () => {
    const root = tempRoot();
    const file = path.join(root, "state.json");
    publishLikeOriginal(file, deadOwnerRecord({ owner_host_id: "other-host" }));
    const release = await acquireLock(file, { ...WAITER, retries: 0, ownerHostId: "other-host" });
    expect(JSON.parse(fs.readFileSync(`${file}.lock/info`, "utf8")).pid).toBe(process.pid);
    await release();
    expect(debrisOf(root, "state.json")).toEqual([]);
  });
});
