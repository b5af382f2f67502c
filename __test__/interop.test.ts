/**
 * Interop with the original TypeScript module (file-lock 0.15.6 / v0.16):
 * records it writes are honoured exactly, records exactlock writes are the
 * bytes it writes, and start times are the ones `ps -o lstart=` prints under
 * `LC_ALL=C TZ=UTC` (the original's only source of truth for PID reuse).
 */
import { randomUUID } from "node:crypto";
import * as fs from "node:fs";
import * as path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { FileLockAcquireError, acquireLock, processStartTime, withFileLock } from "../lib/index.ts";
import {
  cleanup,
  debrisOf,
  deadPid,
  fingerprint,
  originalRecordBytes,
  psStartTime,
  publishLikeOriginal,
  recordKeys,
  spawnHolder,
  spawnSleeper,
  tempRoot,
} from "./fixtures/children.ts";
import { skipUnless } from "./premises.ts";

afterEach(cleanup);

const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const A_PAST_START = "Thu Jan  1 00:00:00 1970";

async function rejection(promise: Promise<unknown>): Promise<FileLockAcquireError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(FileLockAcquireError);
  return error as FileLockAcquireError;
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

function infoOf(lockPath: string): Record<string, unknown> {
  return JSON.parse(fs.readFileSync(path.join(lockPath, "info"), "utf8"));
}

describe("PID reuse is proven only by a utc-v1 start time", () => {
  it("reclaims at once (retries: 0) a record whose pid is alive but whose utc-v1 start time differs", async () => {
    const root = tempRoot();
    const file = path.join(root, "state.json");
    const sleeper = await spawnSleeper();
    expect(psStartTime(sleeper.pid)).not.toBe(A_PAST_START);
    const lockPath = publishLikeOriginal(
      file,
      originalRecordBytes({
        pid: sleeper.pid,
        start_time: A_PAST_START,
        start_time_format: "utc-v1",
        timestamp: Date.now(),
        owner_token: randomUUID(),
      }),
    );
    const release = await acquireLock(file, { retries: 0 });
    expect(infoOf(lockPath).pid).toBe(process.pid);
    await release();
    expect(fs.existsSync(lockPath)).toBe(false);
    expect(isAlive(sleeper.pid)).toBe(true); // reclaiming never touches the process
    expect(debrisOf(root, "state.json")).toEqual([]);
  });

  it.each([
    ["without start_time_format", undefined],
    ['with start_time_format "utc-v1-old"', "utc-v1-old"],
  ])(
    "does not reclaim the same live-pid record %s: the waiter times out and the lock is untouched byte for byte",
    async (_label, format) => {
      const root = tempRoot();
      const file = path.join(root, "state.json");
      const sleeper = await spawnSleeper();
      const bytes = originalRecordBytes({
        pid: sleeper.pid,
        start_time: A_PAST_START,
        start_time_format: format,
        timestamp: Date.now(),
        owner_token: randomUUID(),
      });
      const lockPath = publishLikeOriginal(file, bytes);
      const before = fingerprint(lockPath);

      const error = await rejection(acquireLock(file, { retries: 5, retryDelayMs: 40 }));
      expect(error.lockPath).toBe(lockPath);
      expect(error.holderInfo?.pid).toBe(sleeper.pid);
      expect(error.holderInfo?.liveness).toBe("live");
      expect(error.message).toContain(`pid ${sleeper.pid}`);

      expect(fingerprint(lockPath)).toEqual(before);
      expect(fs.readFileSync(path.join(lockPath, "info"), "utf8")).toBe(bytes);
      expect(debrisOf(root, "state.json")).toEqual(["state.json.lock"]);
    },
  );
});

describe("records written by the original module", () => {
  it("honours a live original owner (its real ps start time): the waiter waits, times out, and leaves the record alone", async () => {
    const root = tempRoot();
    const file = path.join(root, "state.json");
    const sleeper = await spawnSleeper();
    const startTime = psStartTime(sleeper.pid);
    const bytes = JSON.stringify({
      pid: sleeper.pid,
      start_time: startTime,
      start_time_format: "utc-v1",
      timestamp: Date.now(),
      owner_token: randomUUID(),
    });
    const lockPath = publishLikeOriginal(file, bytes);
    const before = fingerprint(lockPath);

    const error = await rejection(acquireLock(file, { retries: 5, retryDelayMs: 40 }));
    expect(error.holderInfo).toMatchObject({
      state: "record",
      pid: sleeper.pid,
      liveness: "live",
      startTime,
      stale: false,
    });
    expect(fingerprint(lockPath)).toEqual(before);
    expect(fs.readFileSync(path.join(lockPath, "info"), "utf8")).toBe(bytes);
  });

  it("reclaims at once (retries: 0) an original record whose owner is dead", async () => {
    const root = tempRoot();
    const file = path.join(root, "state.json");
    const pid = deadPid();
    const lockPath = publishLikeOriginal(
      file,
      JSON.stringify({
        pid,
        start_time: psStartTime(process.pid),
        start_time_format: "utc-v1",
        timestamp: Date.now(),
        owner_token: randomUUID(),
      }),
    );
    const release = await acquireLock(file, { retries: 0 });
    expect(infoOf(lockPath).pid).toBe(process.pid);
    await release();
    expect(fs.existsSync(lockPath)).toBe(false);
    expect(debrisOf(root, "state.json")).toEqual([]);
  });

  it("reclaims a dead owner's record written directly (mkdir + writeFile, no staging) the same way", async () => {
    const root = tempRoot();
    const file = path.join(root, "state.json");
    const lockPath = `${file}.lock`;
    fs.mkdirSync(lockPath, { mode: 0o700 });
    fs.writeFileSync(
      path.join(lockPath, "info"),
      JSON.stringify({ pid: deadPid(), start_time: "unknown", start_time_format: "utc-v1", timestamp: Date.now() }),
      { mode: 0o600 },
    );
    const release = await acquireLock(file, { retries: 0 });
    expect(infoOf(lockPath).pid).toBe(process.pid);
    await release();
    expect(debrisOf(root, "state.json")).toEqual([]);
  });
});

describe("records written by exactlock", () => {
  async function recordInsideSection(file: string, options?: { ownerHostId?: string }): Promise<string> {
    return withFileLock(file, async () => fs.readFileSync(`${file}.lock/info`, "utf8"), options);
  }

  it("are JSON.stringify bytes: the original's keys in its order, upstream 0.17's process_incarnation where it writes it, boot_id and pid_ns after", async (ctx) => {
    skipUnless(ctx, { linux: true }); // a Linux record: the incarnation, boot id and pid namespace of /proc
    const root = tempRoot();
    const file = path.join(root, "state.json");
    const before = Date.now();
    const bytes = await recordInsideSection(file);
    const after = Date.now();
    const record = JSON.parse(bytes);
    expect(bytes).toBe(JSON.stringify(record));
    expect(Object.keys(record)).toEqual(recordKeys());
    // The incarnation is byte-identical to upstream 0.17's for this
    // process: `linux:` and field 22 of /proc/<pid>/stat.
    const stat = fs.readFileSync(`/proc/${process.pid}/stat`, "latin1");
    const ticks = stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19];
    expect(record.process_incarnation).toBe(`linux:${ticks}`);
    expect(record.boot_id).toBe(fs.readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim());
    expect(record.pid_ns).toBe(/\[(\d+)\]/.exec(fs.readlinkSync("/proc/self/ns/pid"))![1]);
    expect(record.pid).toBe(process.pid);
    expect(record.start_time).toBe(psStartTime(process.pid));
    expect(record.start_time_format).toBe("utc-v1");
    expect(Number.isInteger(record.timestamp)).toBe(true);
    expect(record.timestamp).toBeGreaterThanOrEqual(before);
    expect(record.timestamp).toBeLessThanOrEqual(after);
    expect(record.owner_token).toMatch(UUID_V4);
    expect(fs.existsSync(`${file}.lock`)).toBe(false);
  });

  it("carry owner_host_id after the original's other keys, exactly when ownerHostId is passed", async () => {
    const root = tempRoot();
    const file = path.join(root, "state.json");
    const bytes = await recordInsideSection(file, { ownerHostId: 'host "α"\\7' });
    const record = JSON.parse(bytes);
    expect(bytes).toBe(JSON.stringify(record));
    expect(Object.keys(record)).toEqual(recordKeys(true));
    expect(record.owner_host_id).toBe('host "α"\\7');
  });

  it("get a fresh owner_token per acquisition, a 0700 lock dir and a 0600 info", async () => {
    const root = tempRoot();
    const file = path.join(root, "state.json");
    const seen = new Set<string>();
    for (let i = 0; i < 3; i += 1) {
      await withFileLock(file, async () => {
        expect(fs.statSync(`${file}.lock`).mode & 0o777).toBe(0o700);
        expect(fs.statSync(`${file}.lock/info`).mode & 0o777).toBe(0o600);
        expect(fs.readdirSync(`${file}.lock`)).toEqual(["info"]);
        seen.add(infoOf(`${file}.lock`).owner_token as string);
      });
    }
    expect(seen.size).toBe(3);
  });

  it("name a holder in another process by the start time the original would compute for it with ps", async () => {
    const root = tempRoot();
    const file = path.join(root, "state.json");
    const holder = await spawnHolder(file);
    const record = infoOf(`${file}.lock`);
    expect(record.pid).toBe(holder.pid);
    expect(record.start_time).toBe(psStartTime(holder.pid));
    expect(record.start_time_format).toBe("utc-v1");
  });
});

describe("processStartTime", () => {
  it("equals `ps -o lstart=` under LC_ALL=C TZ=UTC for this process, pid 1 and spawned children", async () => {
    const sleepers = await Promise.all([spawnSleeper(), spawnSleeper(), spawnSleeper()]);
    const root = tempRoot();
    const holder = await spawnHolder(path.join(root, "state.json"));
    const pids = [process.pid, 1, process.ppid, holder.pid, ...sleepers.map((s) => s.pid)];
    for (const pid of pids) {
      const expected = psStartTime(pid);
      expect(expected).toMatch(/^[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4}$/);
      expect({ pid, start: processStartTime(pid) }).toEqual({ pid, start: expected });
    }
  });

  it("is unchanged when this process's TZ and locale change, while ps itself prints another time under that TZ", async () => {
    const sleeper = await spawnSleeper();
    const pids = [process.pid, 1, sleeper.pid];
    const utc = pids.map((pid) => psStartTime(pid));
    const tokyo = pids.map((pid) => psStartTime(pid, "Asia/Tokyo"));
    // Proof that the time zone matters to ps at all:
    for (let i = 0; i < pids.length; i += 1) expect(tokyo[i]).not.toBe(utc[i]);

    const saved = { TZ: process.env.TZ, LC_ALL: process.env.LC_ALL, LANG: process.env.LANG };
    process.env.TZ = "Asia/Tokyo";
    process.env.LC_ALL = "de_DE.UTF-8";
    process.env.LANG = "de_DE.UTF-8";
    try {
      expect(new Date(0).getHours()).toBe(9); // this process now lives in Tokyo
      expect(pids.map((pid) => processStartTime(pid))).toEqual(utc);
      const root = tempRoot();
      const file = path.join(root, "state.json");
      const bytes = await withFileLock(file, async () => fs.readFileSync(`${file}.lock/info`, "utf8"));
      expect(JSON.parse(bytes).start_time).toBe(utc[0]);
    } finally {
      for (const [key, value] of Object.entries(saved)) {
        if (value === undefined) delete process.env[key];
        else process.env[key] = value;
      }
    }
  });

  it("is null for a pid that does not exist", () => {
    expect(processStartTime(deadPid())).toBeNull();
  });
});
