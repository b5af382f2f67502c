/**
 * Upstream 0.18's removal transitions (issue 41, item 10). A 0.18.x release
 * publishes `F.lock.removing.owner` — its remover's owner record and the
 * device and inode of the lock directory it removes — renames `F.lock` to
 * `F.lock.removing`, empties and removes it, then the record. A remover
 * killed on the way leaves both, or the record alone. exactlock used to
 * remove a dead owner's `F.lock.removing` and leave `.owner` behind for
 * ever; `gc` did not know it.
 *
 * Now: judged by the remover the record names. Proven dead: both removed
 * exactly, by the next acquisition's scan of the directory or by `gc`;
 * alive: both kept; a record that does not validate: both kept for good.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { acquireLock } from "../lib/index.ts";
import { canonicalRecord, cleanup, deadPid, liveForeignPid, makeRoot, recordJson } from "./helpers.ts";
import { runGc } from "./kernel-helpers.ts";

afterEach(cleanup);

/**
 * What a 0.18 remover killed after its rename leaves beside `file`: the
 * quarantine, its files emptied, and the record naming `owner` and the
 * quarantine's device and inode.
 */
function transition(file: string, owner: number): { quarantine: string; record: string } {
  const quarantine = `${file}.lock.removing`;
  fs.mkdirSync(quarantine, { mode: 0o700 });
  fs.writeFileSync(path.join(quarantine, "info"), "");
  const { dev, ino } = fs.statSync(quarantine, { bigint: true });
  const record = `${quarantine}.owner`;
  const owned = JSON.parse(recordJson(canonicalRecord(owner)));
  fs.writeFileSync(record, JSON.stringify({ owner: owned, rootDev: String(dev), rootIno: String(ino) }), { mode: 0o600 });
  return { quarantine, record };
}

describe("upstream 0.18's F.lock.removing and F.lock.removing.owner", () => {
  it("of a dead remover: both removed by the next acquisition", async () => {
    const root = makeRoot();
    const file = path.join(root, "state.json");
    transition(file, await deadPid());
    await (await acquireLock(file))();
    expect(fs.readdirSync(root)).toEqual([]);
  });

  it("of a live remover: both kept, by an acquisition and by gc", async () => {
    const root = makeRoot();
    const file = path.join(root, "state.json");
    const { quarantine, record } = transition(file, liveForeignPid());
    const bytes = fs.readFileSync(record);
    await (await acquireLock(file))();
    const gc = await runGc(root);
    expect(gc.code).toBe(0);
    expect(fs.readdirSync(root).sort()).toEqual([path.basename(quarantine), path.basename(record)]);
    expect(fs.readFileSync(record)).toEqual(bytes);
  });

  it("of a dead remover: both removed by gc, which says so; a lone record of a dead remover too", async () => {
    const root = makeRoot();
    transition(path.join(root, "a"), await deadPid());
    const lone = transition(path.join(root, "b"), await deadPid());
    fs.rmSync(path.join(lone.quarantine, "info"));
    fs.rmdirSync(lone.quarantine);
    const gc = await runGc(root);
    expect(gc.code).toBe(0);
    expect(fs.readdirSync(root)).toEqual([]);
    expect(gc.stdout).toContain("a.lock.removing");
    expect(gc.stdout).toContain("b.lock.removing.owner");
  });

  it("a record that does not validate, or names another directory: both kept", async () => {
    const root = makeRoot();
    const bad = transition(path.join(root, "bad"), await deadPid());
    fs.writeFileSync(bad.record, "{not json");
    const other = transition(path.join(root, "other"), await deadPid());
    const record = JSON.parse(fs.readFileSync(other.record, "utf8"));
    fs.writeFileSync(other.record, JSON.stringify({ ...record, rootIno: "1" }));
    await (await acquireLock(path.join(root, "bad")))();
    const gc = await runGc(root);
    expect(gc.code).toBe(0);
    expect(fs.readdirSync(root).sort()).toEqual(
      ["bad.lock.removing", "bad.lock.removing.owner", "other.lock.removing", "other.lock.removing.owner"].sort(),
    );
  });
});
