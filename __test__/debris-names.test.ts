/**
 * Holes: things deleted, or releases wedged, because of a NAME.
 *
 * 1. Today a directory at `F.lock.removing` (the fixed quarantine name) is
 *    taken for a crashed remover's leftover and deleted whole by the next
 *    release — with whatever a user kept in it — and a directory named like
 *    a staging dir of a dead pid is deleted by the next contended acquire.
 *    After the fix there is no fixed quarantine name; quarantine and staging
 *    names are `F.lock.removing.<pid>.<uuid>` / `F.lock.pending.<pid>.<uuid>`,
 *    unique per use, and a leftover is removed only when its CONTENT proves
 *    it is exactlock's own (an empty directory, or exactly one regular file
 *    `info` holding a valid record) AND its owner is proven dead (the
 *    record's pid is authoritative over the name's pid).
 * 2. Today anything squatting at `F.lock.removing` (a symlink, a file, a
 *    foreign host's lock) makes every release of F fail with
 *    `quarantine_collision`. After the fix releases do not depend on that
 *    name.
 *
 * Evidence: real files and real processes; each planted entry's content
 * (kind, inode, mode, bytes' SHA-256, link target, for every entry below
 * it) is equal before and after.
 */
import { randomUUID } from "node:crypto";
import * as fs from "node:fs";
import * as path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { acquireLock, processStartTime } from "../lib/index.ts";
import { Child, cleanup, deadPid, spawnHolder, spawnSleeper, tempRoot } from "./fixtures/children.ts";
import { waitUntil } from "./helpers.ts";
import { contentOf, dirWithInfo, fixture, legacyRecordBytes, lockNames, plantUserDir, runGc } from "./kernel-helpers.ts";

afterEach(cleanup);

const PATIENT = { retries: 2000, retryDelayMs: 10 } as const;

/** One acquire + release in this process; a failed release names its cycle. */
async function cycle(file: string, i: number): Promise<void> {
  const release = await acquireLock(file, PATIENT);
  try {
    await release();
  } catch (error) {
    const e = error as { code?: string; message?: string };
    throw new Error(`release #${i} of ${file} failed: ${e.code} ${e.message}`);
  }
}

/** Staging dirs of `pid` in `dir`. */
const stagingOf = (dir: string, pid: number): string[] =>
  fs.readdirSync(dir).filter((name) => name.startsWith(`state.json.lock.pending.${pid}.`));

/** try-acquire.mjs in another process. */
async function inAnotherProcess(file: string, options: object, cycles = 1): Promise<Record<string, unknown>> {
  const child = new Child(process.execPath, [fixture("try-acquire.mjs"), file, JSON.stringify(options), String(cycles)]);
  return JSON.parse(await child.nextLine("{"));
}

describe("nothing is deleted because of its name", () => {
  it("user directories at quarantine and staging names survive acquire/release cycles (uncontended and contended) and `exactlock gc`, byte for byte", async () => {
    const root = tempRoot("exactlock-names-");
    const file = path.join(root, "state.json");
    const lock = `${file}.lock`;
    const dead = deadPid();
    const live = await spawnSleeper();
    const liveRecord = legacyRecordBytes({ pid: live.pid, start_time: processStartTime(live.pid)! });
    const deadRecord = legacyRecordBytes({ pid: dead, start_time: "Wed Dec  2 08:36:20 2026" });

    const planted = [
      // The old fixed quarantine name, holding a user's files.
      plantUserDir(`${lock}.removing`),
      // New-style names of a dead pid, holding a user's files (not exactlock's content).
      plantUserDir(`${lock}.removing.${dead}.${randomUUID()}`),
      plantUserDir(`${lock}.pending.${dead}.${randomUUID()}`),
      // Exactly one `info`, a valid record of a LIVE process: the record's pid, not the name's, decides.
      dirWithInfo(`${lock}.pending.${dead}.${randomUUID()}`, liveRecord),
      // A dead owner's record, but not alone: a user's file beside it, so not exactlock's own content.
      plantUserDir(dirWithInfo(`${lock}.pending.${dead}.${randomUUID()}`, deadRecord)),
      // A user's file that happens to be called `info` and is no record.
      dirWithInfo(`${lock}.removing.${dead}.${randomUUID()}`, "my info, not a lock record\n"),
    ];
    const before = Object.fromEntries(planted.map((p) => [p, contentOf(p)]));
    const plantedNames = planted.map((p) => path.basename(p)).sort();

    // Uncontended, in this process and in another one.
    for (let i = 0; i < 3; i += 1) await cycle(file, i);
    expect(await inAnotherProcess(file, PATIENT, 3)).toMatchObject({ ok: true, cycles: 3 });

    // Contended: this process waits (stages its record) while another process holds the lock.
    const holder = await spawnHolder(file);
    const waiting = acquireLock(file, PATIENT);
    await waitUntil(() => stagingOf(root, process.pid).length > 0, 10_000, "this process's staging dir while it waits");
    holder.send("release");
    await holder.nextLine("released");
    const release = await waiting;
    await release();

    // The collector.
    const collected = await runGc(root);
    expect(collected.code, collected.stderr).toBe(0);

    const after = Object.fromEntries(planted.map((p) => [p, contentOf(p)]));
    expect(after).toEqual(before);
    expect(lockNames(root, "state.json")).toEqual(plantedNames);
  });
});

describe("names not derived from a lock's are no debris", () => {
  it("another program's empty `notes.pending.<dead pid>.<uuid>` and dead-record `backup.removing` survive acquisitions, the staging reaper and `exactlock gc`", async () => {
    // Before: the first acquisition in the directory removed all three
    // (an empty directory on its name alone), though no lock's name
    // (`<file>.lock`) is theirs.
    const root = tempRoot("exactlock-names-");
    const file = path.join(root, "state.json");
    const dead = deadPid();
    const deadRecord = legacyRecordBytes({ pid: dead, start_time: "Wed Dec  2 08:36:20 2026" });
    const planted = [
      path.join(root, `notes.pending.${dead}.${randomUUID()}`),
      dirWithInfo(path.join(root, "backup.removing"), deadRecord),
      dirWithInfo(path.join(root, `notes.removing.${dead}.${randomUUID()}`), deadRecord),
    ];
    fs.mkdirSync(planted[0]!, { mode: 0o700 });
    const old = new Date(Date.now() - 3_600_000);
    for (const dir of planted) fs.utimesSync(dir, old, old);
    const before = Object.fromEntries(planted.map((p) => [p, contentOf(p)]));
    expect(await inAnotherProcess(file, PATIENT, 2)).toMatchObject({ ok: true, cycles: 2 });
    await cycle(file, 0);
    const collected = await runGc(root);
    expect(collected.code, collected.stderr).toBe(0);
    expect(Object.fromEntries(planted.map((p) => [p, contentOf(p)]))).toEqual(before);
  });
});

describe("a squatter at F.lock.removing never wedges a release", () => {
  const squatters: Array<[string, (root: string, at: string) => void]> = [
    [
      "a symlink to a directory",
      (root, at) => {
        plantUserDir(path.join(root, "elsewhere"));
        fs.symlinkSync(path.join(root, "elsewhere"), at);
      },
    ],
    ["a regular file", (_root, at) => fs.writeFileSync(at, "a file that happens to have this name\n")],
    [
      "a directory holding a valid record of another host",
      (_root, at) =>
        dirWithInfo(
          at,
          legacyRecordBytes({ pid: deadPid(), start_time: "Wed Dec  2 08:36:20 2026", owner_host_id: "elsewhere" }),
        ),
    ],
  ];

  for (const [label, plant] of squatters) {
    it(`${label}: 20 acquire+release cycles all succeed, the squatter is untouched, and another process then acquires at once`, async () => {
      const root = tempRoot("exactlock-squat-");
      const file = path.join(root, "state.json");
      const squatter = `${file}.lock.removing`;
      plant(root, squatter);
      const before = contentOf(root);

      for (let i = 0; i < 20; i += 1) await cycle(file, i);

      expect(lockNames(root, "state.json")).toEqual(["state.json.lock.removing"]);
      expect(contentOf(root)).toEqual(before);
      const other = await inAnotherProcess(file, { retries: 0 });
      expect(other, JSON.stringify(other)).toMatchObject({ ok: true, cycles: 1 });
      expect(contentOf(root)).toEqual(before);
    });
  }
});
