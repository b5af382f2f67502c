/**
 * Hole (found in review): a holder in another time namespace looked like a
 * reused pid. Field 22 of /proc/<pid>/stat — the start in clock ticks since
 * boot, which exactlock records as the owner's incarnation — is shown to
 * each reader shifted by the reader's own time-namespace boottime offset.
 * A holder in a child time namespace recorded its ticks with its offset; a
 * waiter in the initial namespace read them without it, saw other ticks,
 * judged "pid reused" and took a live holder's lock. exactlock now records
 * and compares ticks in the initial time namespace's terms (each reader
 * subtracts its own offset), so both sides agree.
 *
 * Namespaces are real: `unshare --time --boottime N --fork` (needs root and
 * a kernel with time namespaces).
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { acquireLock, FileLockAcquireError, inspectLock, processStartTime } from "../lib/index.ts";
import { Child, cleanup, spawnHolder, spawnSleeper, tempRoot } from "./fixtures/children.ts";
import { fixture, legacyRecordBytes, lockNames } from "./kernel-helpers.ts";
import { skipFor, skipUnless } from "./premises.ts";

afterEach(cleanup);

const SHORT = { retries: 6, retryDelayMs: 50 } as const;
const OFFSET_SECS = 100_000;

/** `node <fixture> args…` in a fresh time namespace whose boot clock is ahead by OFFSET_SECS. */
function inChildTimeNamespace(name: string, args: string[]): Child {
  return new Child("unshare", [
    "--time",
    "--boottime",
    String(OFFSET_SECS),
    "--fork",
    "--kill-child=SIGKILL",
    process.execPath,
    fixture(name),
    ...args,
  ]);
}

/** Skips the running test, with the reason, unless this kernel and user can make a time namespace (unshare --time). */
function skipWithoutTimeNamespaces(ctx: { skip: (note?: string) => void }): void {
  skipUnless(ctx, { linux: true, root: true, tools: ["unshare"] });
  if (!fs.existsSync("/proc/self/timens_offsets")) skipFor(ctx, "this kernel has no time namespaces (no /proc/self/timens_offsets)");
}

describe("time namespaces", () => {
  it("holder in a child time namespace: a waiter of the initial one sees it live, gets ELOCKED, never reclaims", async (ctx) => {
    skipWithoutTimeNamespaces(ctx);
    const root = tempRoot("exactlock-timens-");
    const file = path.join(root, "state.json");
    const holder = inChildTimeNamespace("holder.mjs", [file]);
    await holder.nextLine("held ");
    const bytes = fs.readFileSync(`${file}.lock/info`, "utf8");

    const inspection = await inspectLock(file);
    expect(inspection).toMatchObject({ stale: false, reason: "owner_alive" });
    const error = await acquireLock(file, SHORT).then(
      async (release) => {
        await release();
        throw new Error("the waiter acquired the lock: it judged a live holder in a time namespace reused");
      },
      (failure: unknown) => failure,
    );
    expect(error).toBeInstanceOf(FileLockAcquireError);
    expect(fs.readFileSync(`${file}.lock/info`, "utf8")).toBe(bytes);

    holder.send("release");
    expect(await holder.nextLine("released")).toMatch(/^released /);
    expect(lockNames(root, "state.json")).toEqual([]);
  });

  it("waiter in a child time namespace: it reports ELOCKED for a holder of the initial one and never reclaims", async (ctx) => {
    skipWithoutTimeNamespaces(ctx);
    const root = tempRoot("exactlock-timens-");
    const file = path.join(root, "state.json");
    const holder = await spawnHolder(file);
    const bytes = fs.readFileSync(`${file}.lock/info`, "utf8");

    const waiter = inChildTimeNamespace("try-acquire.mjs", [file, JSON.stringify(SHORT)]);
    const outcome = JSON.parse(await waiter.nextLine("{"));
    expect(outcome).toMatchObject({ ok: false, stage: "acquire", code: "ELOCKED" });
    expect(outcome.holderInfo).toMatchObject({ pid: holder.pid, liveness: "live" });
    expect(fs.readFileSync(`${file}.lock/info`, "utf8")).toBe(bytes);

    holder.send("release");
    expect(await holder.nextLine("released")).toMatch(/^released /);
    expect(lockNames(root, "state.json")).toEqual([]);
  });

  it("waiter in a child time namespace: a live holder of the original module's format (an lstart start time) is live, never reclaimed", async (ctx) => {
    // The start time a waiter computes for the pid must be `ps -o lstart`'s
    // as run where it runs: the probe's ticks in the initial namespace's
    // terms with the btime of the waiter's namespace were off by its
    // offset, so the live holder looked "pid reused" and its lock was
    // taken (helper-21).
    skipWithoutTimeNamespaces(ctx);
    const root = tempRoot("exactlock-timens-");
    const file = path.join(root, "state.json");
    const holder = await spawnSleeper();
    const record = legacyRecordBytes({ pid: holder.pid, start_time: processStartTime(holder.pid)! });
    fs.mkdirSync(`${file}.lock`, { mode: 0o700 });
    fs.writeFileSync(`${file}.lock/info`, record, { mode: 0o600 });

    const waiter = inChildTimeNamespace("try-acquire.mjs", [file, JSON.stringify(SHORT)]);
    const outcome = JSON.parse(await waiter.nextLine("{"));
    expect(outcome).toMatchObject({ ok: false, stage: "acquire", code: "ELOCKED" });
    expect(outcome.holderInfo).toMatchObject({ pid: holder.pid, liveness: "live" });
    expect(fs.readFileSync(`${file}.lock/info`, "utf8")).toBe(record);
  });
});
