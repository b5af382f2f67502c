/**
 * Hole: a holder in another pid namespace looks dead or reused.
 *
 * A record's pid is the writer's namespace-local pid. A reader in another
 * pid namespace probes that number in ITS namespace: from the parent, the
 * child namespace's pid 1 is the host's init (alive, another start time:
 * "pid reused"); from the child, the parent's pid does not exist ("dead").
 * Either way a waiter steals a live lock. The fixed exactlock records the
 * writer's pid namespace and never reclaims a record of another namespace
 * (liveness unknown), while a dead holder of the reader's own namespace is
 * still reclaimed at once.
 *
 * Namespaces are real: `unshare --pid --fork --mount-proc` (needs root);
 * `--kill-child` makes the namespace die with the unshare process, which
 * `cleanup()` SIGKILLs.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { acquireLock, FileLockAcquireError } from "../lib/index.ts";
import { clearFaultsForTesting, injectDelayForTesting } from "../lib/testing.ts";
import { Child, cleanup, spawnHolder, tempRoot } from "./fixtures/children.ts";
import { waitUntil } from "./helpers.ts";
import { FACADE, fixture, lockNames } from "./kernel-helpers.ts";
import { type Needs, skipUnless } from "./premises.ts";

/** A child pid namespace: `unshare --pid --fork --mount-proc`. */
const PID_NAMESPACE: Needs = { linux: true, root: true, tools: ["unshare"] };

afterEach(cleanup);

const SHORT = { retries: 6, retryDelayMs: 50 } as const;
const UNSHARE_PID = ["--pid", "--fork", "--mount-proc", "--kill-child=SIGKILL"];

/** `node <fixture> args…` as the init of a fresh pid namespace. */
function inChildPidNamespace(name: string, args: string[]): Child {
  return new Child("unshare", [...UNSHARE_PID, process.execPath, fixture(name), ...args]);
}

const readInfo = (file: string): string => fs.readFileSync(`${file}.lock/info`, "utf8");

/** Acquires in this process; a success is a theft: it is given back, then reported. */
async function waiterHere(file: string, options: object): Promise<FileLockAcquireError> {
  let release: (() => Promise<void>) | undefined;
  try {
    release = await acquireLock(file, options);
  } catch (error) {
    expect(error).toBeInstanceOf(FileLockAcquireError);
    return error as FileLockAcquireError;
  }
  await release();
  throw new Error("the waiter acquired the lock: it reclaimed a live holder of another pid namespace");
}

for (const hostOptions of [{}, { ownerHostId: "h1" }]) {
  const label = "ownerHostId" in hostOptions ? ' (both sides ownerHostId "h1")' : "";

  describe(`pid namespaces${label}`, () => {
    it("holder inside a child pid namespace: a waiter of the parent namespace gets ELOCKED and never reclaims; the holder then releases cleanly", async (ctx) => {
      skipUnless(ctx, PID_NAMESPACE);
      const root = tempRoot("exactlock-pidns-");
      const file = path.join(root, "state.json");
      const holder = inChildPidNamespace("holder.mjs", [file, JSON.stringify({ retries: 100_000, retryDelayMs: 100, ...hostOptions })]);
      const held = await holder.nextLine("held ");
      const nsPid = Number(held.split(" ")[1]);
      const bytes = readInfo(file);
      expect(JSON.parse(bytes).pid).toBe(nsPid); // a namespace-local pid (1 or 2), meaningless here

      const error = await waiterHere(file, { ...SHORT, ...hostOptions });
      expect(error.code).toBe("ELOCKED");
      expect(error.holderInfo?.pid).toBe(nsPid);
      expect(readInfo(file)).toBe(bytes);

      holder.send("release");
      expect(await holder.nextLine("released")).toMatch(/^released /); // `error EMISSING …` would throw
      expect(lockNames(root, "state.json")).toEqual([]);
    });

    it("waiter inside a child pid namespace: it reports ELOCKED for the parent-namespace holder and never reclaims", async (ctx) => {
      skipUnless(ctx, PID_NAMESPACE);
      const root = tempRoot("exactlock-pidns-");
      const file = path.join(root, "state.json");
      const holder = await spawnHolder(file, { retries: 100_000, retryDelayMs: 100, ...hostOptions });
      const bytes = readInfo(file);
      expect(JSON.parse(bytes).pid).toBe(holder.pid);

      const waiter = inChildPidNamespace("try-acquire.mjs", [file, JSON.stringify({ ...SHORT, ...hostOptions })]);
      const outcome = JSON.parse(await waiter.nextLine("{"));
      expect(outcome).toMatchObject({ ok: false, stage: "acquire", code: "ELOCKED" });
      expect(outcome.holderInfo.pid).toBe(holder.pid);
      expect(readInfo(file)).toBe(bytes);

      holder.send("release");
      expect(await holder.nextLine("released")).toMatch(/^released /);
      expect(lockNames(root, "state.json")).toEqual([]);
    });
  });
}

describe("pid namespaces: a dead holder of the reader's own namespace is still reclaimed at once", () => {
  it("control: a SIGKILLed holder of the same (root) namespace is reclaimed by a waiter with default options", async () => {
    const root = tempRoot("exactlock-pidns-");
    const file = path.join(root, "state.json");
    const holder = await spawnHolder(file);
    holder.proc.kill("SIGKILL");
    await holder.exited;
    const release = await acquireLock(file);
    expect(JSON.parse(readInfo(file)).pid).toBe(process.pid);
    await release();
    expect(lockNames(root, "state.json")).toEqual([]);
  });

  it("holder and waiter inside one child pid namespace: the holder is SIGKILLed, the waiter reclaims at once (retries: 0)", async (ctx) => {
    skipUnless(ctx, PID_NAMESPACE);
    const root = tempRoot("exactlock-pidns-");
    const file = path.join(root, "state.json");
    const pair = inChildPidNamespace("ns-pair.mjs", [file]);
    const outcome = JSON.parse(await pair.nextLine("{"));
    expect(outcome).toMatchObject({ ok: true });
    expect(outcome.recordPid).toBe(outcome.self); // the reclaimer's own (namespace-local) pid
    expect(outcome.holderPid).not.toBe(outcome.self);
    expect(lockNames(root, "state.json")).toEqual([]);
  });
});

/**
 * Issue 19, item 7, the other side: a staging directory without a record
 * is reaped at once when its name's pid is dead in the reaper's namespace
 * and nobody holds its `flock`. A live publisher of ANOTHER namespace is
 * exactly such a pid (the name's pid does not exist there): it holds its
 * staging's `flock` until its record is written, and the reaper leaves the
 * directory to it.
 */
describe("pid namespaces: a live publisher's staging seen from a child pid namespace", () => {
  it("a reaper there, to which the staging's pid is dead, leaves the unwritten staging to it (busy); the publisher then publishes", async (ctx) => {
    skipUnless(ctx, PID_NAMESPACE);
    const root = tempRoot("exactlock-pidns-");
    const file = path.join(root, "unwritten.json");
    const lockPath = `${file}.lock`;
    const prefix = `unwritten.json.lock.pending.${process.pid}.`;
    // This process's publication stalls between making its staging (and
    // taking its flock) and writing its record.
    injectDelayForTesting("publish.unwritten", 5_000, "unwritten.json", 1);
    try {
      const acquiring = acquireLock(file, { inlineFastPath: false });
      await waitUntil(() => fs.readdirSync(root).some((name) => name.startsWith(prefix)), 10_000, "the staging");
      const staging = path.join(root, fs.readdirSync(root).find((name) => name.startsWith(prefix))!);
      const script = `require(${JSON.stringify(FACADE)}).reapOrphanedLockStagingDirs(process.argv[1]).then((r) => console.log(JSON.stringify(r)))`;
      const reaper = new Child("unshare", [...UNSHARE_PID, process.execPath, "-e", script, lockPath]);
      const seen = JSON.parse(await reaper.nextLine("{"));
      // The reaper looked while the record was still unwritten.
      expect(fs.readdirSync(staging)).toEqual([]);
      expect(seen).toEqual({ removed: [], retained: [{ path: staging, status: "unknown", removed: false, reason: "busy" }] });
      const release = await acquiring;
      expect(JSON.parse(readInfo(file)).pid).toBe(process.pid);
      await release();
      expect(lockNames(root, "unwritten.json")).toEqual([]);
    } finally {
      clearFaultsForTesting();
    }
  });
});
