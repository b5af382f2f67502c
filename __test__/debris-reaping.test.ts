/**
 * Hole: debris of killed processes outlives them.
 *
 * A waiter keeps its record staged in `F.lock.pending.<pid>.<uuid>` while
 * it waits; a publisher or reclaimer killed mid-way leaves a staging or a
 * quarantine (`F.lock.removing.<pid>.<uuid>`) directory. Today such debris
 * is reaped only by a later acquisition that finds the lock HELD (never by
 * an uncontended one) and never by `exactlock gc`. After the fix the next
 * acquisition of F in any process, and `exactlock gc`, remove it when the
 * name's pid is proven dead and the content is exactlock's own (empty, or
 * exactly one `info` holding a dead owner's record). A live process's
 * staging is never touched.
 *
 * Everything is real: killed child processes, their staging dirs, reaped
 * (dead) pids, the CLI in a child process.
 */
import { randomUUID } from "node:crypto";
import * as fs from "node:fs";
import * as path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { acquireLock } from "../lib/index.ts";
import { Child, cleanup, deadPid, spawnHolder, spawnSleeper, tempRoot } from "./fixtures/children.ts";
import { waitUntil } from "./helpers.ts";
import { skipUnless } from "./premises.ts";
import {
  bootId,
  CLI,
  contentOf,
  dirWithInfo,
  fixture,
  lockNames,
  newRecordBytes,
  pidNsOf,
  runGc,
} from "./kernel-helpers.ts";

afterEach(cleanup);

/** One uncontended acquire + release of `file` with default options, in a NEW process. */
async function freshAcquisition(file: string): Promise<Record<string, unknown>> {
  const child = new Child(process.execPath, [fixture("try-acquire.mjs"), file]);
  return JSON.parse(await child.nextLine("{"));
}

/**
 * A killed waiter's staging dir: child A holds F, child B waits on F with
 * default options (its record staged at `F.lock.pending.<B>.<uuid>`), B is
 * SIGKILLed, A releases. Returns the staging dir B left.
 */
async function killedWaitersStaging(root: string, file: string): Promise<string> {
  const holder = await spawnHolder(file);
  const waiter = new Child(process.execPath, [fixture("hold.mjs"), file]);
  const prefix = `state.json.lock.pending.${waiter.pid}.`;
  const staged = () => fs.readdirSync(root).filter((name) => name.startsWith(prefix));
  // Waiting means its record is staged in full (a kill between its mkdir
  // and its write would leave an unwritten dir: another case, below).
  const recorded = () => {
    try {
      return staged().length === 1 && fs.statSync(path.join(root, staged()[0]!, "info")).size > 0;
    } catch {
      return false;
    }
  };
  await waitUntil(recorded, 10_000, "the waiter's staged record");
  const staging = path.join(root, staged()[0]!);
  waiter.proc.kill("SIGKILL");
  await waiter.exited;
  holder.send("release");
  await holder.nextLine("released");
  expect(lockNames(root, "state.json")).toEqual([path.basename(staging)]);
  return staging;
}

describe("a SIGKILLed waiter's staging dir", () => {
  it("is gone after the next uncontended acquire + release of F in a new process", async () => {
    const root = tempRoot("exactlock-debris-");
    const file = path.join(root, "state.json");
    await killedWaitersStaging(root, file);

    expect(await freshAcquisition(file)).toMatchObject({ ok: true });
    expect(lockNames(root, "state.json")).toEqual([]);
  });

  // The link count of a directory counts its subdirectories on ext4 and
  // tmpfs (the temp dir here); on btrfs it does not (README).
  it("is gone after the next acquisition of F in a process that had locked F there before", async () => {
    const root = tempRoot("exactlock-debris-");
    const file = path.join(root, "state.json");
    // This process scanned the directory, and its lock earned the inline path.
    for (let i = 0; i < 3; i++) await (await acquireLock(file))();
    await killedWaitersStaging(root, file);

    // Reaped on a thread of its own, while the acquisition goes on.
    await (await acquireLock(file))();
    await waitUntil(() => lockNames(root, "state.json").length === 0, 5_000, "the staging reaped");
  });

  it("of another lock, alive when this process last looked and killed since, is gone after this process's next acquisition there", async () => {
    const root = tempRoot("exactlock-debris-");
    const [file, other] = [path.join(root, "state.json"), path.join(root, "other.json")];
    const holder = await spawnHolder(other);
    const waiter = new Child(process.execPath, [fixture("hold.mjs"), other]);
    const staged = () => lockNames(root, "other.json").filter((name) => name.includes(`.pending.${waiter.pid}.`));
    await waitUntil(() => staged().length === 1, 10_000, "the waiter's staging");
    // This process's first look at the directory: the waiter lives.
    await (await acquireLock(file))();
    expect(staged()).toHaveLength(1);
    waiter.proc.kill("SIGKILL");
    await waiter.exited;
    holder.send("release");
    await holder.nextLine("released");
    expect(staged()).toHaveLength(1);

    // The processes a scan left are looked at again at most every 100 ms.
    await new Promise((resolve) => setTimeout(resolve, 150));
    await (await acquireLock(file))();
    await waitUntil(() => lockNames(root, "other.json").length === 0, 5_000, "the staging reaped");
  });

  it("is removed by `exactlock gc DIR`, which prints a decision line naming it", async () => {
    const root = tempRoot("exactlock-debris-");
    const file = path.join(root, "state.json");
    const staging = await killedWaitersStaging(root, file);

    const collected = await runGc(root);
    expect(collected.code, collected.stderr).toBe(0);
    const lines = collected.stdout.split("\n").filter((line) => line.includes(staging));
    expect(lines.some((line) => /remov/i.test(line)), collected.stdout).toBe(true);
    expect(lockNames(root, "state.json")).toEqual([]);
  });
});

describe("debris a killed publisher or reclaimer leaves", () => {
  // The records planted carry Linux's boot id and pid namespace (/proc).
  beforeEach((ctx) => skipUnless(ctx, { linux: true }));

  /**
   * An empty dir, backdated an hour: left by a process killed long ago. (A
   * fresh empty one is not judged by its name's pid until it is a second
   * old: it may be a live publisher's of another pid namespace.)
   */
  const emptyDir = (dir: string): string => {
    fs.mkdirSync(dir, { mode: 0o700 });
    const hourAgo = new Date(Date.now() - 3_600_000);
    fs.utimesSync(dir, hourAgo, hourAgo);
    return dir;
  };

  /** The four kinds of debris of a dead pid, plus an empty staging dir of a LIVE process. */
  async function plantDebris(root: string) {
    const lock = path.join(root, "state.json.lock");
    const dead = deadPid();
    const live = await spawnSleeper();
    const deadRecord = newRecordBytes({
      pid: dead,
      start_time: "Wed Dec  2 08:36:20 2026",
      ticks: "123456",
      boot_id: bootId(),
      pid_ns: pidNsOf(),
    });
    const debris = [
      dirWithInfo(`${lock}.pending.${dead}.${randomUUID()}`, deadRecord),
      emptyDir(`${lock}.pending.${dead}.${randomUUID()}`),
      dirWithInfo(`${lock}.removing.${dead}.${randomUUID()}`, deadRecord),
      emptyDir(`${lock}.removing.${dead}.${randomUUID()}`),
    ];
    const liveStaging = emptyDir(`${lock}.pending.${live.pid}.${randomUUID()}`);
    return { debris, liveStaging, liveBefore: contentOf(liveStaging) };
  }

  it("is gone after the next acquisition of F in a new process; a live process's staging survives", async () => {
    const root = tempRoot("exactlock-debris-");
    const file = path.join(root, "state.json");
    const { debris, liveStaging, liveBefore } = await plantDebris(root);
    expect(lockNames(root, "state.json")).toHaveLength(5);

    expect(await freshAcquisition(file)).toMatchObject({ ok: true });
    expect({ left: lockNames(root, "state.json") }).toEqual({ left: [path.basename(liveStaging)] });
    expect(debris.filter((d) => fs.existsSync(d))).toEqual([]);
    expect(contentOf(liveStaging)).toEqual(liveBefore);
  });

  it("is removed by `exactlock gc DIR`; a live process's staging survives", async () => {
    const root = tempRoot("exactlock-debris-");
    const { debris, liveStaging, liveBefore } = await plantDebris(root);

    const collected = await runGc(root);
    expect(collected.code, collected.stderr).toBe(0);
    expect({ left: lockNames(root, "state.json") }).toEqual({ left: [path.basename(liveStaging)] });
    expect(debris.filter((d) => fs.existsSync(d))).toEqual([]);
    expect(contentOf(liveStaging)).toEqual(liveBefore);
  });
});

/**
 * Issue 19, item 7: a staging directory without a record (empty, or only
 * an empty `info`) whose name's pid is dead, just made. Upstream 0.17 reaps
 * it at once; so does exactlock, where the death is proven in its pid
 * namespace (the pid is dead here, and no live exactlock publisher — in any
 * namespace — holds the directory's `flock`). A live pid's is kept and
 * reported alive.
 */
describe("a just-made staging directory without a record", () => {
  /** The dir with its mtime an hour ahead: just made, however slowly the run goes. */
  const justMade = (dir: string, emptyInfo: boolean): string => {
    fs.mkdirSync(dir, { mode: 0o700 });
    if (emptyInfo) fs.writeFileSync(path.join(dir, "info"), "");
    const ahead = new Date(Date.now() + 3_600_000);
    fs.utimesSync(dir, ahead, ahead);
    return dir;
  };

  async function plant(root: string) {
    const lock = path.join(root, "state.json.lock");
    const dead = deadPid();
    const live = await spawnSleeper();
    const deadOnes = [
      justMade(`${lock}.pending.${dead}.${randomUUID()}`, false),
      justMade(`${lock}.pending.${dead}.${randomUUID()}`, true),
    ];
    const liveOne = justMade(`${lock}.pending.${live.pid}.${randomUUID()}`, false);
    return { deadOnes, liveOne, livePid: live.pid };
  }

  it("a dead pid's is gone after the next acquisition of F in a new process; a live pid's stays", async () => {
    const root = tempRoot("exactlock-debris-");
    const { deadOnes, liveOne } = await plant(root);
    expect(await freshAcquisition(path.join(root, "state.json"))).toMatchObject({ ok: true });
    expect(deadOnes.filter((dir) => fs.existsSync(dir))).toEqual([]);
    expect(lockNames(root, "state.json")).toEqual([path.basename(liveOne)]);
  });

  it("a dead pid's is removed by `exactlock gc` at once; a live pid's is kept and reported alive", async () => {
    const root = tempRoot("exactlock-debris-");
    const { deadOnes, liveOne, livePid } = await plant(root);
    const child = new Child(process.execPath, [CLI, "gc", root, "--json"]);
    let stdout = "";
    child.proc.stdout!.on("data", (chunk: string) => (stdout += chunk));
    const { code } = await child.exited;
    expect(code, child.stderr).toBe(0);
    const decisions: { lockPath: string; action: string; reason: string; pid?: number; holder?: string }[] =
      JSON.parse(stdout).decisions;
    const byPath = new Map(decisions.map((decision) => [decision.lockPath, decision]));
    for (const dir of deadOnes) expect(byPath.get(dir)).toMatchObject({ action: "removed", reason: "removed" });
    expect(byPath.get(liveOne)).toMatchObject({
      action: "kept",
      reason: "file_lock_staging_owner_alive",
      pid: livePid,
      holder: `staging directory of pid ${livePid} (alive)`,
    });
    expect(deadOnes.filter((dir) => fs.existsSync(dir))).toEqual([]);
    expect(lockNames(root, "state.json")).toEqual([path.basename(liveOne)]);
  });
});
