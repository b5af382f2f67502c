/**
 * inspectLock: one read-only look that names the holder, its liveness and
 * whether a waiter would reclaim it — for every verdict there is.
 */
import { spawn } from "node:child_process";
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, symlinkSync, utimesSync, writeFileSync } from "node:fs";
import * as path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { acquireLock, inspectLock, isLocked, processStartTime } from "../lib/index.ts";
import { deadOwnerLock, HOLDER, makeTempDir, Proc, removeDir, startHolder } from "./cli-helpers.ts";
import { PORTABLE, processState as procState } from "./helpers.ts";

let dir: string;
const running: Proc[] = [];

beforeEach(() => {
  dir = makeTempDir("inspect");
});

afterEach(async () => {
  for (const proc of running.splice(0)) {
    proc.kill("SIGKILL");
    await proc.exited;
  }
  removeDir(dir);
});

/** Writes `F.lock/info` by hand with the given record. */
function writeRecord(file: string, record: Record<string, unknown>): void {
  mkdirSync(`${file}.lock`, { mode: 0o700 });
  writeFileSync(path.join(`${file}.lock`, "info"), JSON.stringify(record), { mode: 0o600 });
}

function canonicalRecord(pid: number, startTime: string | null, extra: Record<string, unknown> = {}) {
  return {
    pid,
    start_time: startTime ?? "unknown",
    start_time_format: "utc-v1",
    timestamp: Date.now() - 5_000,
    owner_token: "6f1c2b9e-3f4a-4d6b-9c1e-2a7b8c9d0e1f",
    ...extra,
  };
}

/** A snapshot of everything under `dir`, to prove a look changed nothing. */
function listing(at: string): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(at, { withFileTypes: true })) {
    const full = path.join(at, entry.name);
    out.push(full);
    if (entry.isDirectory() && !entry.isSymbolicLink()) out.push(...listing(full));
  }
  return out.sort();
}


describe("inspectLock", () => {
  it("free: no lock dir", async () => {
    const file = path.join(dir, "state.json");
    const inspection = await inspectLock(file);
    expect(inspection).toMatchObject({
      filePath: file,
      lockPath: `${file}.lock`,
      state: "free",
      stale: false,
      reason: "free",
      description: "free",
    });
    expect(inspection.holder).toBeUndefined();
  });

  it("live: another process holds it — its pid, start time, token; not stale", async () => {
    const file = path.join(dir, "state.json");
    const holder = await startHolder(file);
    running.push(holder);
    const before = listing(dir);
    const inspection = await inspectLock(file);
    expect(inspection).toMatchObject({ state: "record", stale: false, reason: "owner_alive" });
    expect(inspection.holder).toMatchObject({ pid: holder.pid, liveness: "live", foreign: false });
    expect(inspection.holder!.startTime).toBe(processStartTime(holder.pid));
    expect(inspection.holder!.ownerToken).toMatch(/^[0-9a-f-]{36}$/);
    expect(Date.parse(inspection.holder!.since)).toBeLessThanOrEqual(Date.now());
    expect(inspection.description).toContain(`pid ${holder.pid} (live)`);
    expect(listing(dir)).toEqual(before);
  });

  it("dead: the owner exited without releasing — a waiter would reclaim it", async () => {
    const file = path.join(dir, "state.json");
    const pid = await deadOwnerLock(file);
    const before = listing(dir);
    const inspection = await inspectLock(file);
    expect(inspection).toMatchObject({ state: "record", stale: true, reason: "owner_dead" });
    expect(inspection.holder).toMatchObject({ pid, liveness: "dead" });
    expect(listing(dir)).toEqual(before);
  });

  // Skipped under the portable mechanisms: kill(pid, 0) reads a zombie as alive
  // (platform.test.ts tests that instead).
  it.skipIf(PORTABLE)("dead, not reaped: the owner is a zombie whose parent never waits for it — reclaimable", async () => {
    const file = path.join(dir, "state.json");
    // sh starts the holder in the background, then becomes `sleep`, which never reaps it.
    const parent = new Proc(
      spawn("sh", ["-c", `"$0" "$1" "$2" exit & exec sleep 60`, process.execPath, HOLDER, file], {
        stdio: ["ignore", "pipe", "pipe"],
      }),
    );
    running.push(parent);
    const { pid } = await parent.waitForLine<{ held?: boolean; pid: number }>((line) => line.held === true);
    for (let i = 0; i < 400 && procState(pid) !== "Z"; i += 1) await new Promise((r) => setTimeout(r, 25));
    expect(procState(pid)).toBe("Z");
    const inspection = await inspectLock(file);
    expect(inspection).toMatchObject({ state: "record", stale: true, reason: "owner_dead_not_reaped" });
    expect(inspection.holder).toMatchObject({ pid, liveness: "dead_not_reaped" });
    expect(inspection.description).toContain("dead but not reaped");
  });

  it("pid reused: the pid runs but its canonical start time differs — reclaimable", async () => {
    const file = path.join(dir, "state.json");
    writeRecord(file, canonicalRecord(process.pid, "Thu Jan  1 00:00:00 1970"));
    const inspection = await inspectLock(file);
    expect(inspection).toMatchObject({ state: "record", stale: true, reason: "pid_reused" });
    expect(inspection.holder).toMatchObject({ pid: process.pid, liveness: "pid_reused" });
  });

  it("the same record with the pid's real start time is live, not reused", async () => {
    const file = path.join(dir, "state.json");
    writeRecord(file, canonicalRecord(process.pid, processStartTime(process.pid)));
    const inspection = await inspectLock(file);
    expect(inspection).toMatchObject({ stale: false, reason: "owner_alive", holder: { liveness: "live" } });
  });

  it("unknown (foreign host): a record from another host is never reclaimed, whatever its pid", async () => {
    const file = path.join(dir, "state.json");
    writeRecord(file, canonicalRecord(2_000_000_000, "unknown", { owner_host_id: "build-box-7" }));
    const hostAware = await inspectLock(file, { ownerHostId: "laptop-1" });
    expect(hostAware).toMatchObject({ state: "record", stale: false, reason: "foreign_host" });
    expect(hostAware.holder).toMatchObject({ liveness: "unknown", foreign: true, ownerHostId: "build-box-7" });
    expect(hostAware.description).toContain("on host build-box-7");
    // Without an ownerHostId a host-qualified record is foreign too.
    expect(await inspectLock(file)).toMatchObject({ stale: false, reason: "foreign_host" });
    // With the host's own (or a previous) id it is judged locally: that pid does not exist.
    expect(await inspectLock(file, { ownerHostId: "build-box-7" })).toMatchObject({ stale: true, reason: "owner_dead" });
    expect(
      await inspectLock(file, { ownerHostId: "build-box-8", previousOwnerHostIds: ["build-box-7"] }),
    ).toMatchObject({ stale: true, reason: "owner_dead" });
  });

  it("unknown (local): a pid no kernel can have is never reclaimed", async () => {
    const file = path.join(dir, "state.json");
    writeRecord(file, canonicalRecord(2 ** 40, "unknown"));
    const inspection = await inspectLock(file);
    expect(inspection).toMatchObject({ state: "record", stale: false, reason: "liveness_unknown" });
    expect(inspection.holder).toMatchObject({ liveness: "unknown" });
  });

  it("malformed: an info that is not a record is never reclaimed, however old", async () => {
    const file = path.join(dir, "state.json");
    mkdirSync(`${file}.lock`);
    writeFileSync(path.join(`${file}.lock`, "info"), "{not json");
    const old = new Date(Date.now() - 86_400_000);
    utimesSync(`${file}.lock`, old, old);
    const inspection = await inspectLock(file, { staleMs: 1 });
    expect(inspection).toMatchObject({ state: "malformed", stale: false, reason: "malformed_record" });
    expect(inspection.holder).toBeUndefined();
  });

  it("a FIFO info is refused (not a lock) and the look does not hang on it", async () => {
    const file = path.join(dir, "state.json");
    mkdirSync(`${file}.lock`);
    execFileSync("mkfifo", [path.join(`${file}.lock`, "info")]);
    const inspection = await inspectLock(file);
    expect(inspection).toMatchObject({ state: "not_a_lock", stale: false, reason: "not_a_lock" });
  });

  it("legacy empty dir: kept while younger than staleMs, reclaimable once older", async () => {
    const file = path.join(dir, "state.json");
    mkdirSync(`${file}.lock`);
    const fresh = await inspectLock(file, { staleMs: 60_000 });
    expect(fresh).toMatchObject({ state: "no_record", stale: false, reason: "legacy_empty_fresh" });
    const old = new Date(Date.now() - 120_000);
    utimesSync(`${file}.lock`, old, old);
    const aged = await inspectLock(file, { staleMs: 60_000 });
    expect(aged).toMatchObject({ state: "no_record", stale: true, reason: "legacy_empty_aged" });
    // With an ownerHostId a record-less dir is never reclaimed.
    expect(await inspectLock(file, { staleMs: 60_000, ownerHostId: "h1" })).toMatchObject({
      stale: false,
      reason: "no_record_host_aware",
    });
    expect(existsSync(`${file}.lock`)).toBe(true);
  });

  it("symlink: a symlink at the lock path is not a lock — never followed, never reclaimable", async () => {
    const file = path.join(dir, "state.json");
    const elsewhere = path.join(dir, "elsewhere");
    await deadOwnerLock(elsewhere);
    symlinkSync(`${elsewhere}.lock`, `${file}.lock`);
    const inspection = await inspectLock(file);
    expect(inspection).toMatchObject({ state: "not_a_lock", stale: false, reason: "not_a_lock" });
    expect(inspection.holder).toBeUndefined();
    expect(existsSync(path.join(`${elsewhere}.lock`, "info"))).toBe(true);
  });

  it("rejects a relative path with a TypeError before touching the disk", async () => {
    await expect(inspectLock("relative/state.json")).rejects.toMatchObject({
      name: "TypeError",
      code: "ERR_INVALID_ARG_VALUE",
    });
  });
});

describe("isLocked", () => {
  it("false when free, true while another process holds it, false again once it released", async () => {
    const file = path.join(dir, "state.json");
    expect(await isLocked(file)).toBe(false);
    const holder = await startHolder(file);
    running.push(holder);
    expect(await isLocked(file)).toBe(true);
    holder.kill("SIGKILL");
    await holder.exited;
    // A dead owner's lock is provably stale: a waiter would take it at once.
    expect(await isLocked(file)).toBe(false);
    expect(existsSync(`${file}.lock`)).toBe(true); // read-only: nothing was reclaimed
  });

  it("true for this process's own lock, and for what a waiter would not reclaim", async () => {
    const file = path.join(dir, "state.json");
    const release = await acquireLock(file);
    expect(await isLocked(file)).toBe(true);
    await release();
    expect(await isLocked(file)).toBe(false);
    // A fresh ownerless directory, and something that is not a lock at all.
    mkdirSync(`${file}.lock`);
    expect(await isLocked(file, { staleMs: 60_000 })).toBe(true);
    const old = new Date(Date.now() - 120_000);
    utimesSync(`${file}.lock`, old, old);
    expect(await isLocked(file, { staleMs: 60_000 })).toBe(false);
    const other = path.join(dir, "other.json");
    symlinkSync(dir, `${other}.lock`);
    expect(await isLocked(other)).toBe(true);
  });

  it("a dead owner's record without a host id, seen by a host-aware reader, counts as locked (never reclaimed)", async () => {
    const file = path.join(dir, "state.json");
    await deadOwnerLock(file);
    expect(await isLocked(file)).toBe(false);
    expect(await isLocked(file, { ownerHostId: "host-a" })).toBe(true);
  });
});
