/**
 * Hole: an unbounded `ownerHostId` makes records exactlock cannot read back.
 *
 * Today any non-empty host id is accepted (70 000 characters too), and a
 * record larger than the reader's bound is "malformed": a killed holder
 * with such a record is never reclaimed. After the fix `ownerHostId` and
 * every entry of `previousOwnerHostIds` are at most 256 bytes of UTF-8;
 * longer ones reject with a TypeError (ERR_INVALID_ARG_VALUE) before
 * anything touches the disk, and the largest record that can then be
 * written (256 characters that JSON escapes as `\uXXXX`) is read back and
 * reclaimed like any other.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { acquireLock } from "../lib/index.ts";
import { cleanup, spawnHolder, tempRoot } from "./fixtures/children.ts";
import { lockNames } from "./kernel-helpers.ts";

afterEach(cleanup);

const bytes = (text: string): number => Buffer.byteLength(text, "utf8");

const TOO_LONG: Array<[string, string]> = [
  ["257 ASCII bytes", "a".repeat(257)],
  ["257 bytes of 129 characters (two-byte é)", `${"é".repeat(128)}a`],
  ["70 000 characters", "x".repeat(70_000)],
];
const LONGEST: Array<[string, string]> = [
  ["256 ASCII bytes", "a".repeat(256)],
  ["256 bytes of 128 two-byte characters", "é".repeat(128)],
  ["256 bytes of 64 four-byte characters", "😀".repeat(64)],
];

async function argumentRejection(promise: Promise<unknown>): Promise<TypeError & { code?: string }> {
  try {
    const release = (await promise) as () => Promise<void>;
    await release();
  } catch (error) {
    return error as TypeError & { code?: string };
  }
  throw new Error("the acquisition succeeded: the over-long host id was accepted");
}

describe("ownerHostId is at most 256 bytes of UTF-8", () => {
  for (const [label, id] of TOO_LONG) {
    for (const where of ["ownerHostId", "previousOwnerHostIds"] as const) {
      it(`${where} of ${label} rejects with ERR_INVALID_ARG_VALUE before the disk`, async () => {
        expect(bytes(id)).toBeGreaterThan(256);
        const root = tempRoot("exactlock-hostid-");
        const file = path.join(root, "missing-parent", "state.json");
        const options = where === "ownerHostId" ? { ownerHostId: id } : { ownerHostId: "h1", previousOwnerHostIds: ["h0", id] };
        const error = await argumentRejection(acquireLock(file, options));
        expect(error).toBeInstanceOf(TypeError);
        expect(error.code).toBe("ERR_INVALID_ARG_VALUE");
        expect(fs.readdirSync(root)).toEqual([]); // no parent dir created, no lock
      });
    }
  }

  for (const [label, id] of LONGEST) {
    it(`ownerHostId and previousOwnerHostIds of ${label} work: acquire, record, release`, async () => {
      expect(bytes(id)).toBe(256);
      const root = tempRoot("exactlock-hostid-");
      const file = path.join(root, "missing-parent", "state.json");
      let record: Record<string, unknown> = {};
      const release = await acquireLock(file, {
        ownerHostId: id,
        onAcquired: () => {
          record = JSON.parse(fs.readFileSync(`${file}.lock/info`, "utf8"));
        },
      });
      expect(record.owner_host_id).toBe(id);
      await release();
      const again = await acquireLock(file, { ownerHostId: "h-new", previousOwnerHostIds: [id] });
      await again();
      expect(lockNames(path.dirname(file), "state.json")).toEqual([]);
    });
  }
});

describe("the largest record exactlock writes is read back", () => {
  it('a holder with ownerHostId "\\u0001"×256 (each escaped as \\u0001 in the JSON) is SIGKILLed: a waiter with the same id reclaims at once', async () => {
    const id = "\u0001".repeat(256);
    const root = tempRoot("exactlock-hostid-");
    const file = path.join(root, "state.json");
    const holder = await spawnHolder(file, { ownerHostId: id });
    const text = fs.readFileSync(`${file}.lock/info`, "utf8");
    expect(text).toContain("\\u0001".repeat(256));
    expect(JSON.parse(text)).toMatchObject({ pid: holder.pid, owner_host_id: id });

    holder.proc.kill("SIGKILL");
    await holder.exited;
    const release = await acquireLock(file, { ownerHostId: id, retries: 0 });
    expect(JSON.parse(fs.readFileSync(`${file}.lock/info`, "utf8"))).toMatchObject({ pid: process.pid, owner_host_id: id });
    await release();
    expect(lockNames(root, "state.json")).toEqual([]);
  });
});
