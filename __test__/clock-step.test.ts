/**
 * Hole: a wall-clock step makes a live holder look like a reused pid.
 *
 * `start_time` is a wall-clock string derived from /proc/stat `btime`
 * (whole seconds, realtime − boottime). When the clock is stepped between
 * the holder's probe and a waiter's, the two processes compute different
 * strings for the same live process, and a waiter that compares strings
 * judges "pid reused" and steals the lock from a live holder.
 *
 * A real clock step cannot be made safely on a shared machine; the holder
 * is instead started in a private mount namespace where /proc/stat is a
 * copy with `btime` moved by ±1 s — exactly what the holder sees after a
 * step of ∓1 s. The fixed exactlock identifies owners by clock-independent
 * keys (boot id, start ticks, pid namespace), and compares legacy
 * `start_time` strings with a 2 s tolerance.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { acquireLock, FileLockAcquireError, processStartTime } from "../lib/index.ts";
import { Child, cleanup, fingerprint, publishLikeOriginal, spawnSleeper, tempRoot } from "./fixtures/children.ts";
import { btime, fixture, legacyRecordBytes, lockNames, shiftLstart } from "./kernel-helpers.ts";
import { skipUnless } from "./premises.ts";

afterEach(cleanup);

/** The waiter's budget: about 250 ms of waiting, then ELOCKED. */
const SHORT = { retries: 5, retryDelayMs: 50 } as const;

async function rejectionOf(promise: Promise<unknown>): Promise<unknown> {
  try {
    const release = (await promise) as () => Promise<void>;
    await release(); // it stole the lock: give it back so the holder's part of the story can be seen too
  } catch (error) {
    return error;
  }
  throw new Error("expected ELOCKED, but the waiter acquired the lock (it judged the live holder stale)");
}

/**
 * A holder (fixtures/holder.mjs) in a private mount namespace whose
 * /proc/stat says `btime` + `shiftSeconds`. unshare and sh exec, so the
 * child's pid is the holder's pid.
 */
async function holderWithShiftedBtime(root: string, file: string, shiftSeconds: number): Promise<Child> {
  const fakeStat = path.join(root, "stat");
  const script =
    'sed "s/^btime .*/btime $1/" /proc/stat > "$2" && mount --bind "$2" /proc/stat && ' +
    'grep -q "^btime $1\\$" /proc/stat && exec "$3" "$4" "$5"';
  const holder = new Child("unshare", [
    "--mount",
    "--propagation",
    "private",
    "sh",
    "-c",
    script,
    "sh",
    String(btime() + shiftSeconds),
    fakeStat,
    process.execPath,
    fixture("holder.mjs"),
    file,
  ]);
  const held = await holder.nextLine("held ");
  expect(held).toBe(`held ${holder.pid}`);
  return holder;
}

describe("a wall-clock step never makes a live holder look reused", () => {
  for (const shift of [+1, -1]) {
    it(`holder whose boot time reads ${shift > 0 ? "+" : ""}${shift} s: the waiter reports it live (ELOCKED), and its release succeeds`, async (ctx) => {
      // A bind-mounted /proc/stat in a private mount namespace.
      skipUnless(ctx, { linux: true, root: true, tools: ["unshare", "mount", "sed"] });
      const root = tempRoot("exactlock-clock-");
      const file = path.join(root, "state.json");
      const holder = await holderWithShiftedBtime(root, file, shift);
      try {
        // The test can tell: the holder's own start_time differs from the one computed here.
        const record = JSON.parse(fs.readFileSync(`${file}.lock/info`, "utf8"));
        expect(record.pid).toBe(holder.pid);
        const seenHere = processStartTime(holder.pid);
        expect(seenHere).not.toBeNull();
        const precondition = "the holder computes start_time from its (shifted) /proc/stat btime, as ps does";
        expect(record.start_time, precondition).not.toBe(seenHere);
        expect(record.start_time, precondition).toBe(shiftLstart(seenHere!, shift * 1000));

        const error = await rejectionOf(acquireLock(file, SHORT));
        expect(error).toBeInstanceOf(FileLockAcquireError);
        expect((error as FileLockAcquireError).code).toBe("ELOCKED");
        expect((error as FileLockAcquireError).holderInfo).toMatchObject({ pid: holder.pid, liveness: "live", stale: false });

        holder.send("release");
        const released = await holder.nextLine("released"); // an `error EMISSING …` line throws here
        expect(released).toMatch(/^released /);
        expect(lockNames(root, "state.json")).toEqual([]);
      } finally {
        holder.proc.kill("SIGKILL");
      }
    });
  }
});

describe("legacy records (original format) tolerate a 2 s clock step, not more", () => {
  for (const shift of [+1000, -1000]) {
    it(`a live owner whose recorded start_time is its real one ${shift > 0 ? "+" : ""}${shift / 1000} s is not reclaimed (ELOCKED)`, async () => {
      const root = tempRoot("exactlock-clock-");
      const file = path.join(root, "state.json");
      const sleeper = await spawnSleeper();
      const real = processStartTime(sleeper.pid)!;
      const bytes = legacyRecordBytes({ pid: sleeper.pid, start_time: shiftLstart(real, shift) });
      expect(Object.keys(JSON.parse(bytes))).toEqual(["pid", "start_time", "start_time_format", "timestamp", "owner_token"]);
      const lockPath = publishLikeOriginal(file, bytes);
      const before = fingerprint(lockPath);

      const error = await rejectionOf(acquireLock(file, SHORT));
      expect(error).toBeInstanceOf(FileLockAcquireError);
      expect((error as FileLockAcquireError).holderInfo).toMatchObject({ pid: sleeper.pid, liveness: "live" });
      expect(fingerprint(lockPath)).toEqual(before);
      expect(fs.readFileSync(`${lockPath}/info`, "utf8")).toBe(bytes);
    });
  }

  it("a live pid whose recorded start_time is 1 hour off is a reused pid: reclaimed at once (retries: 0)", async () => {
    const root = tempRoot("exactlock-clock-");
    const file = path.join(root, "state.json");
    const sleeper = await spawnSleeper();
    const real = processStartTime(sleeper.pid)!;
    const lockPath = publishLikeOriginal(file, legacyRecordBytes({ pid: sleeper.pid, start_time: shiftLstart(real, 3_600_000) }));
    const release = await acquireLock(file, { retries: 0 });
    expect(JSON.parse(fs.readFileSync(`${lockPath}/info`, "utf8")).pid).toBe(process.pid);
    await release();
    expect(lockNames(root, "state.json")).toEqual([]);
  });
});
