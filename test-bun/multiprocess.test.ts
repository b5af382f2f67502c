/**
 * The multi-process evidence under Bun: mutual exclusion across processes,
 * reclaim of a SIGKILLed holder, and the on-disk record bytes. Children run
 * the `.mjs` fixtures under the same runtime (`process.execPath`: bun).
 */
import { afterEach, describe, expect, it } from "bun:test";
import * as fs from "node:fs";
import * as path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { acquireLock, processStartTime, withFileLock } from "../lib/index.ts";
import { ownProcessStart, ownRecordStart } from "../__test__/emulation.ts";
import {
  cleanup,
  debrisOf,
  metric,
  now,
  runCounterWorkers,
  psStartTime,
  recordKeys,
  spawnFixture,
  spawnHolder,
  tempRoot,
} from "../__test__/fixtures/children.ts";

afterEach(cleanup);

function readInfo(lockPath: string): { pid: number } {
  return JSON.parse(fs.readFileSync(path.join(lockPath, "info"), "utf8"));
}

describe("under bun: mutual exclusion across processes", () => {
  it("3 processes × 100 read-increment-write sections end at exactly 300, never two inside at once", async () => {
    const root = tempRoot("exactlock-mp-bun-");
    const { counter, marker, results, exits, wallMs } = await runCounterWorkers(root, 3, 100, 170_000);
    metric("bun: counter 3x100 wall ms", wallMs);

    expect(exits).toEqual(Array.from({ length: 3 }, () => ({ code: 0, signal: null })));
    expect(results.map((r) => r.sections)).toEqual([100, 100, 100]);
    expect(results.map((r) => r.violations)).toEqual([0, 0, 0]);
    expect(fs.readFileSync(counter, "utf8")).toBe("300");
    expect(fs.existsSync(marker)).toBe(false);
    expect(debrisOf(root, "counter")).toEqual([]);
  }, 180_000);
});

describe("under bun: a SIGKILLed holder costs nothing", () => {
  it("a waiter with default options reclaims the lock of a holder SIGKILLed mid-section", async () => {
    const root = tempRoot("exactlock-mp-bun-");
    const file = path.join(root, "state.json");
    const holder = await spawnHolder(file);
    expect(readInfo(`${file}.lock`).pid).toBe(holder.pid);
    const killedAt = now();
    holder.proc.kill("SIGKILL");
    let acquiredAt = 0;
    const release = await acquireLock(file, {
      onAcquired: () => {
        acquiredAt = now();
      },
    });
    metric("bun: reclaim latency, waiter started after the kill (ms)", +(acquiredAt - killedAt).toFixed(2));
    expect(readInfo(`${file}.lock`).pid).toBe(process.pid);
    await release();
    expect(debrisOf(root, "state.json")).toEqual([]);
    expect(acquiredAt - killedAt).toBeLessThan(3_000);
  }, 30_000);

  it("a waiter already waiting is woken by the holder's SIGKILL and reclaims the lock", async () => {
    const root = tempRoot("exactlock-mp-bun-");
    const file = path.join(root, "state.json");
    const holder = await spawnHolder(file);
    let acquiredAt = 0;
    const waiting = acquireLock(file, {
      onAcquired: () => {
        acquiredAt = now();
      },
    });
    await sleep(300);
    expect(acquiredAt).toBe(0);
    const killedAt = now();
    holder.proc.kill("SIGKILL");
    const release = await waiting;
    metric("bun: reclaim latency, waiter already waiting (ms)", +(acquiredAt - killedAt).toFixed(2));
    expect(readInfo(`${file}.lock`).pid).toBe(process.pid);
    await release();
    expect(debrisOf(root, "state.json")).toEqual([]);
    expect(acquiredAt - killedAt).toBeLessThan(3_000);
  }, 30_000);
});

describe("under bun: the record bytes", () => {
  it("are JSON.stringify bytes: the original's keys in its order, process_incarnation where upstream 0.17 writes it, boot_id and pid_ns after", async () => {
    const root = tempRoot("exactlock-mp-bun-");
    const file = path.join(root, "state.json");
    const bytes = await withFileLock(file, async () => fs.readFileSync(`${file}.lock/info`, "utf8"));
    const record = JSON.parse(bytes);
    expect(bytes).toBe(JSON.stringify(record));
    expect(Object.keys(record)).toEqual(recordKeys());
    expect(record.pid).toBe(process.pid);
    // Under qemu-user this process's own start is unknown (__test__/emulation.ts, artefact 1).
    expect(record.start_time).toBe(ownRecordStart(psStartTime(process.pid)));
    expect(record.start_time_format).toBe("utc-v1");
    expect(Number.isInteger(record.timestamp)).toBe(true);
  });

  it("carry owner_host_id after the original's other keys when ownerHostId is passed", async () => {
    const root = tempRoot("exactlock-mp-bun-");
    const file = path.join(root, "state.json");
    const bytes = await withFileLock(file, async () => fs.readFileSync(`${file}.lock/info`, "utf8"), {
      ownerHostId: "bun-host",
    });
    const record = JSON.parse(bytes);
    expect(bytes).toBe(JSON.stringify(record));
    expect(Object.keys(record)).toEqual(recordKeys(true));
    expect(record.owner_host_id).toBe("bun-host");
  });

  it("of a holder child under bun name its ps start time, and processStartTime agrees with ps", async () => {
    const root = tempRoot("exactlock-mp-bun-");
    const file = path.join(root, "state.json");
    const holder = await spawnHolder(file);
    const record = JSON.parse(fs.readFileSync(`${file}.lock/info`, "utf8"));
    expect(record.pid).toBe(holder.pid);
    // The holder publishes its own start (unknown to it under qemu-user); this process reads
    // every other pid's from the kernel (__test__/emulation.ts, artefact 1).
    expect(record.start_time).toBe(ownRecordStart(psStartTime(holder.pid)));
    expect(processStartTime(process.pid)).toBe(ownProcessStart(psStartTime(process.pid)));
    for (const pid of [1, holder.pid]) expect(processStartTime(pid)).toBe(psStartTime(pid));
  });
});
