/**
 * Interop of the owner record across formats: the ORIGINAL format (exact
 * key order `pid,start_time,start_time_format,timestamp,owner_token`) must
 * keep working, and the NEW keys exactlock adds (`process_incarnation`
 * "linux:<start ticks>", `boot_id`, `pid_ns`; see kernel-helpers
 * `newRecordBytes`) must be honoured when present:
 *
 * - another boot id: the owner died with that boot → reclaimed at once;
 * - same boot, another pid namespace: liveness unknown → never reclaimed;
 * - same boot and namespace: alive exactly when the pid is alive with the
 *   same start ticks (other ticks: the pid was reused → reclaimed).
 *
 * The owners are real processes (a live `sleep` child, a reaped child's
 * pid); records are written by hand the way their writers publish them.
 */
import { randomUUID } from "node:crypto";
import * as fs from "node:fs";
import * as path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { acquireLock, FileLockAcquireError, processStartTime } from "../lib/index.ts";
import { cleanup, deadPid, fingerprint, publishLikeOriginal, spawnSleeper, tempRoot } from "./fixtures/children.ts";
import { bootId, btime, legacyRecordBytes, lockNames, newRecordBytes, pidNsOf, startTicks } from "./kernel-helpers.ts";
import { skipUnless } from "./premises.ts";

afterEach(cleanup);

const SHORT = { retries: 5, retryDelayMs: 40 } as const;
const A_START = "Wed Dec  2 08:36:20 2026";

/** The waiter must wait and give up; the record must be untouched. */
async function expectWaits(file: string, lockPath: string, bytes: string): Promise<FileLockAcquireError> {
  const before = fingerprint(lockPath);
  let error: unknown;
  try {
    const release = await acquireLock(file, SHORT);
    await release();
  } catch (e) {
    error = e;
  }
  if (error === undefined) throw new Error("the waiter acquired the lock: it reclaimed a record it must honour");
  expect(error).toBeInstanceOf(FileLockAcquireError);
  expect(fingerprint(lockPath)).toEqual(before);
  expect(fs.readFileSync(`${lockPath}/info`, "utf8")).toBe(bytes);
  return error as FileLockAcquireError;
}

/** The waiter must reclaim at once (one attempt, no waiting). */
async function expectReclaimedAtOnce(file: string, lockPath: string, root: string): Promise<void> {
  const release = await acquireLock(file, { retries: 0 });
  expect(JSON.parse(fs.readFileSync(`${lockPath}/info`, "utf8")).pid).toBe(process.pid);
  await release();
  expect(lockNames(root, "state.json")).toEqual([]);
}

function setup() {
  const root = tempRoot("exactlock-keys-");
  return { root, file: path.join(root, "state.json") };
}

describe("records in the original format", () => {
  it("of a LIVE process (its real start time): the waiter waits", async () => {
    const { file } = setup();
    const sleeper = await spawnSleeper();
    const bytes = legacyRecordBytes({ pid: sleeper.pid, start_time: processStartTime(sleeper.pid)! });
    expect(Object.keys(JSON.parse(bytes))).toEqual(["pid", "start_time", "start_time_format", "timestamp", "owner_token"]);
    const lockPath = publishLikeOriginal(file, bytes);
    const error = await expectWaits(file, lockPath, bytes);
    expect(error.holderInfo).toMatchObject({ pid: sleeper.pid, liveness: "live" });
  });

  it("of a DEAD process: reclaimed at once", async () => {
    const { root, file } = setup();
    const lockPath = publishLikeOriginal(file, legacyRecordBytes({ pid: deadPid(), start_time: A_START }));
    await expectReclaimedAtOnce(file, lockPath, root);
  });
});

describe("records with the new keys (process_incarnation, boot_id, pid_ns)", () => {
  // Linux's keys: start ticks, boot id and pid namespace, read from /proc.
  beforeEach((ctx) => skipUnless(ctx, { linux: true }));

  async function liveOwner() {
    const sleeper = await spawnSleeper();
    return {
      pid: sleeper.pid,
      start_time: processStartTime(sleeper.pid)!,
      ticks: startTicks(sleeper.pid),
      boot_id: bootId(),
      pid_ns: pidNsOf(),
    };
  }

  it("of a LIVE process (right ticks, boot id and pid namespace): the waiter waits", async () => {
    const { file } = setup();
    const owner = await liveOwner();
    const bytes = newRecordBytes(owner);
    const lockPath = publishLikeOriginal(file, bytes);
    const error = await expectWaits(file, lockPath, bytes);
    expect(error.holderInfo).toMatchObject({ pid: owner.pid, liveness: "live" });
  });

  it("of a DEAD process (this boot, this namespace): reclaimed at once", async () => {
    const { root, file } = setup();
    const bytes = newRecordBytes({ pid: deadPid(), start_time: A_START, ticks: "4242", boot_id: bootId(), pid_ns: pidNsOf() });
    const lockPath = publishLikeOriginal(file, bytes);
    await expectReclaimedAtOnce(file, lockPath, root);
  });

  it("with the boot id of another boot, written before this boot began: the owner died with that boot, reclaimed at once (even though the pid is alive now)", async () => {
    const { root, file } = setup();
    const owner = await liveOwner();
    const otherBoot = randomUUID();
    expect(otherBoot).not.toBe(owner.boot_id);
    const before = (btime() - 3_600) * 1000;
    const lockPath = publishLikeOriginal(file, newRecordBytes({ ...owner, boot_id: otherBoot, timestamp: before }));
    await expectReclaimedAtOnce(file, lockPath, root);
  });

  it("with another boot id, written since this boot began: another kernel beside ours (a VM, a sandbox), never reclaimed", async () => {
    const { file } = setup();
    const owner = await liveOwner();
    const bytes = newRecordBytes({ ...owner, pid: deadPid(), boot_id: randomUUID() });
    const lockPath = publishLikeOriginal(file, bytes);
    const error = await expectWaits(file, lockPath, bytes);
    expect(error.holderInfo).toMatchObject({ liveness: "unknown", reason: "foreign_kernel", stale: false });
  });

  it("with another pid namespace, pid alive here: never reclaimed, liveness unknown", async () => {
    const { file } = setup();
    const owner = await liveOwner();
    const otherNs = String(Number(owner.pid_ns) + 1000);
    const bytes = newRecordBytes({ ...owner, pid_ns: otherNs });
    const lockPath = publishLikeOriginal(file, bytes);
    const error = await expectWaits(file, lockPath, bytes);
    expect(error.holderInfo).toMatchObject({ pid: owner.pid, liveness: "unknown", stale: false });
  });

  it("with another pid namespace, pid dead here: never reclaimed, liveness unknown", async () => {
    const { file } = setup();
    const otherNs = String(Number(pidNsOf()) + 1000);
    const pid = deadPid();
    const bytes = newRecordBytes({ pid, start_time: A_START, ticks: "4242", boot_id: bootId(), pid_ns: otherNs });
    const lockPath = publishLikeOriginal(file, bytes);
    const error = await expectWaits(file, lockPath, bytes);
    expect(error.holderInfo).toMatchObject({ pid, liveness: "unknown", stale: false });
  });

  it("with this boot and namespace but other start ticks: the pid was reused, reclaimed at once", async () => {
    const { root, file } = setup();
    const owner = await liveOwner();
    // Two ticks on: one tick apart is taken for the same start, rounded
    // differently (a time namespace's fractional offset).
    const otherTicks = String(Number(owner.ticks) + 2);
    const lockPath = publishLikeOriginal(file, newRecordBytes({ ...owner, ticks: otherTicks }));
    await expectReclaimedAtOnce(file, lockPath, root);
  });
});
