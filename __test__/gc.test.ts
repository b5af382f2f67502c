/**
 * Garbage-collection scenarios of the original (research/upstream.md #35,
 * #68, #75–#81): readFileLockInfoForGc, readFileLockObservationForGc,
 * removeFileLockDirForGc, genericFileLockDirStaleVerdict / IsStale, plus
 * the read-only inspectLock.
 *
 * Upstream's §5.6 scenarios drive `fileLocksGcAdapter.prune` (its
 * `config/file-lock-gc.ts`), which exactlock does not ship; they are
 * reproduced with the same building blocks a GC uses: stale verdict (with
 * the identity judged), then identity-bound removal. The "snapshot hook"
 * that swapped the directory between verdict and removal becomes a real
 * swap on disk between the two calls.
 *
 * Not applicable here (no test is written for them):
 * - #69, #70, #71, #72 (Windows native identity, recorded creation time,
 *   `infoBirthtimeNs`): v0.17 / Windows; exactlock's identity is the nine
 *   v0.16 fields.
 * - #73, #74 (epoch birthtime): v0.17; birthtime is not part of the identity.
 */
import { createHash } from "node:crypto";
import * as fs from "node:fs";
import * as path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import {
  acquireLock,
  type FileLockOwnerToken,
  genericFileLockDirIsStale,
  genericFileLockDirStaleVerdict,
  inspectLock,
  readFileLockInfoForGc,
  readFileLockObservationForGc,
  removeFileLockDirForGc,
} from "../lib/index.ts";
import { injectDelayForTesting } from "../lib/testing.ts";
import {
  canonicalRecord,
  cleanup,
  deadPid,
  exists,
  infoPathOf,
  inode,
  liveForeignPid,
  lockPathOf,
  makeRoot,
  recordJson,
  rejectionOf,
  writeEmptyLock,
  writeLock,
} from "./helpers.ts";

afterEach(cleanup);

const readInfo = (file: string) => fs.readFileSync(infoPathOf(file), "utf8");

async function deadLock(extra = {}) {
  const file = path.join(makeRoot(), "state.json");
  const record = canonicalRecord(await deadPid(), { start_time: "Wed Dec  2 08:36:20 2026", timestamp: 1000, ...extra });
  const lockDir = writeLock(file, record);
  return { file, lockDir, record };
}

describe("readFileLockObservationForGc / readFileLockInfoForGc", () => {
  it("returns the validated record, its exact bytes and the nine-field identity", async () => {
    const { file, lockDir, record } = await deadLock({ owner_host_id: "h1" });
    const observation = await readFileLockObservationForGc(lockDir);
    expect(observation).not.toBeNull();
    expect(observation!.info).toEqual(record);
    expect(observation!.bytes.toString("utf8")).toBe(readInfo(file));
    const dir = fs.lstatSync(lockDir, { bigint: true });
    const info = fs.lstatSync(infoPathOf(file), { bigint: true });
    expect(observation!.identity).toEqual({
      rootDev: String(dir.dev),
      rootIno: String(dir.ino),
      infoDev: String(info.dev),
      infoIno: String(info.ino),
      infoNlink: "1",
      infoSize: String(info.size),
      infoMtimeNs: String(info.mtimeNs),
      infoCtimeNs: String(info.ctimeNs),
      infoSha256: createHash("sha256").update(readInfo(file)).digest("hex"),
    });
    expect(await readFileLockInfoForGc(lockDir)).toEqual(record);
  });

  it("accepts an old-format record without start_time, format or token", async () => {
    const file = path.join(makeRoot(), "state.json");
    const lockDir = writeLock(file, '{"pid":4242,"timestamp":17,"extra":"ignored"}');
    expect(await readFileLockInfoForGc(lockDir)).toEqual({ pid: 4242, timestamp: 17 });
  });

  it.each([
    ["malformed info", (file: string) => writeLock(file, "{")],
    ["an empty lock dir", (file: string) => writeEmptyLock(file)],
    ["no lock dir", (file: string) => lockPathOf(file)],
    ["a missing parent", (file: string) => path.join(path.dirname(file), "nope", "x.lock")],
    [
      "a symlinked info",
      (file: string) => {
        const target = `${file}.target`;
        fs.writeFileSync(target, recordJson({ pid: 1, timestamp: 1 }));
        fs.mkdirSync(lockPathOf(file));
        fs.symlinkSync(target, infoPathOf(file));
        return lockPathOf(file);
      },
    ],
    [
      "a symlinked lock dir",
      (file: string) => {
        const target = `${file}.real-lock`;
        fs.mkdirSync(target);
        fs.writeFileSync(path.join(target, "info"), recordJson({ pid: 1, timestamp: 1 }));
        fs.symlinkSync(target, lockPathOf(file));
        return lockPathOf(file);
      },
    ],
  ])("returns null for %s", async (_what, make) => {
    const lockDir = make(path.join(makeRoot(), "state.json"));
    expect(await readFileLockObservationForGc(lockDir)).toBeNull();
    expect(await readFileLockInfoForGc(lockDir)).toBeNull();
  });

  it("rejects a relative lock dir with a TypeError", async () => {
    const error = await rejectionOf(readFileLockInfoForGc("relative.lock"));
    expect(error).toBeInstanceOf(TypeError);
  });
});

describe("removeFileLockDirForGc", () => {
  it("#35 refuses a plain-object token without a prior observation (owner_changed), keeping the dir", async () => {
    const { file, lockDir, record } = await deadLock();
    const plain: FileLockOwnerToken = { ...record };
    expect(await removeFileLockDirForGc(lockDir, plain)).toBe("owner_changed");
    expect(readInfo(file)).toBe(recordJson(record));
  });

  it("#35 a copy of an observed token carries no removal authority", async () => {
    const { lockDir } = await deadLock();
    const observation = await readFileLockObservationForGc(lockDir);
    const copy = JSON.parse(JSON.stringify(observation!.info));
    expect(await removeFileLockDirForGc(lockDir, copy)).toBe("owner_changed");
    expect(exists(lockDir)).toBe(true);
  });

  it("#68 removes the dir when the on-disk token matches the expected owner and identity", async () => {
    const { lockDir } = await deadLock();
    const observation = await readFileLockObservationForGc(lockDir);
    expect(await removeFileLockDirForGc(lockDir, observation!.info, observation!.identity)).toBe("removed");
    expect(exists(lockDir)).toBe(false);
    expect(fs.readdirSync(path.dirname(lockDir))).toEqual([]);
  });

  it("#68 the observed token alone carries the identity observed with it", async () => {
    const { lockDir } = await deadLock();
    const observation = await readFileLockObservationForGc(lockDir);
    expect(await removeFileLockDirForGc(lockDir, observation!.info)).toBe("removed");
    expect(exists(lockDir)).toBe(false);
  });

  it("refuses (owner_changed) a lock whose exactlock holder lives, whatever the caller judged: the holder keeps its directory's flock", async () => {
    // A verdict can be wrong (a clock stepped, a time namespace, another
    // kernel sharing the volume); the removal itself still proves the
    // holder gone. Before: removed under the live holder, whose release
    // then failed with EMISSING.
    const file = path.join(makeRoot(), "state.json");
    const release = await acquireLock(file);
    const observation = await readFileLockObservationForGc(lockPathOf(file));
    expect(await removeFileLockDirForGc(lockPathOf(file), observation!.info, observation!.identity)).toBe("owner_changed");
    expect(exists(lockPathOf(file))).toBe(true);
    await release();
    expect(exists(lockPathOf(file))).toBe(false);
  });

  it("#75 refuses (owner_changed) when a live owner has reclaimed the same path", async () => {
    const { file, lockDir } = await deadLock();
    const observation = await readFileLockObservationForGc(lockDir);
    const live = recordJson(canonicalRecord(liveForeignPid(), { timestamp: 2000 }));
    fs.writeFileSync(infoPathOf(file), live);
    expect(await removeFileLockDirForGc(lockDir, observation!.info, observation!.identity)).toBe("owner_changed");
    expect(readInfo(file)).toBe(live);
  });

  it("#76 refuses (owner_changed) when only the timestamp differs (same pid reused)", async () => {
    const { file, lockDir, record } = await deadLock();
    const observation = await readFileLockObservationForGc(lockDir);
    const later = recordJson({ ...record, timestamp: 2000 });
    fs.writeFileSync(infoPathOf(file), later);
    expect(await removeFileLockDirForGc(lockDir, observation!.info, observation!.identity)).toBe("owner_changed");
    expect(readInfo(file)).toBe(later);
  });

  // The original answers `missing` here; exactlock says what it sees: a
  // directory still stands at the path (an acquirer mid-mkdir, or an empty
  // dir that took the name), and it is not the generation judged. `missing`
  // is kept for nothing at the path (next test).
  it("#77 refuses (owner_changed, not missing) when the info file is absent but the directory stands", async () => {
    const { file, lockDir } = await deadLock();
    const observation = await readFileLockObservationForGc(lockDir);
    fs.rmSync(infoPathOf(file));
    expect(await removeFileLockDirForGc(lockDir, observation!.info, observation!.identity)).toBe("owner_changed");
    expect(fs.readdirSync(lockDir)).toEqual([]);
  });

  it("refuses (owner_changed) a malformed info at the path, and removes nothing", async () => {
    const { file, lockDir } = await deadLock();
    const observation = await readFileLockObservationForGc(lockDir);
    fs.writeFileSync(infoPathOf(file), "{partial");
    expect(await removeFileLockDirForGc(lockDir, observation!.info, observation!.identity)).toBe("owner_changed");
    expect(fs.readFileSync(infoPathOf(file), "utf8")).toBe("{partial");
  });

  it("without any identity for the record: missing when nothing is there, owner_changed otherwise, as the original", async () => {
    const { lockDir } = await deadLock();
    const observation = await readFileLockObservationForGc(lockDir);
    const copy = { ...observation!.info }; // a copy carries no removal authority
    expect(await removeFileLockDirForGc(lockDir, copy)).toBe("owner_changed");
    expect(fs.existsSync(lockDir)).toBe(true);
    fs.rmSync(lockDir, { recursive: true });
    expect(await removeFileLockDirForGc(lockDir, copy)).toBe("missing");
  });

  it("answers missing when the lock is removed after the observation, owner_changed when it is replaced", async () => {
    // gc.judged stalls the removal between its observation and its guard.
    const removed = (lockDir: string) => fs.rmSync(lockDir, { recursive: true });
    const replaced = (lockDir: string) => {
      removed(lockDir);
      fs.mkdirSync(lockDir, { mode: 0o700 });
    };
    for (const [meanwhile, expected] of [
      [removed, "missing"],
      [replaced, "owner_changed"],
    ] as const) {
      const { lockDir } = await deadLock();
      const observation = await readFileLockObservationForGc(lockDir);
      injectDelayForTesting("gc.judged", 400, path.basename(lockDir), 1);
      const removal = removeFileLockDirForGc(lockDir, observation!.info, observation!.identity);
      await new Promise((resolve) => setTimeout(resolve, 150));
      meanwhile(lockDir);
      expect([meanwhile.name, await removal]).toEqual([meanwhile.name, expected]);
    }
  });

  it("answers missing when nothing is at the lock path", async () => {
    const { lockDir } = await deadLock();
    const observation = await readFileLockObservationForGc(lockDir);
    fs.rmSync(lockDir, { recursive: true });
    expect(await removeFileLockDirForGc(lockDir, observation!.info, observation!.identity)).toBe("missing");
  });

  it("v0.16 identity includes ctime: a chmod of info between verdict and removal is owner_changed", async () => {
    const { file, lockDir } = await deadLock();
    const verdict = await genericFileLockDirStaleVerdict(lockDir, 10_000);
    const observation = await readFileLockObservationForGc(lockDir);
    expect(verdict.stale).toBe(true);
    await new Promise((resolve) => setTimeout(resolve, 5));
    fs.chmodSync(infoPathOf(file), 0o644);
    expect(
      await removeFileLockDirForGc(lockDir, observation!.info, verdict.stale ? verdict.identity : undefined),
    ).toBe("owner_changed");
    expect(exists(infoPathOf(file))).toBe(true);
  });
});

describe("genericFileLockDirStaleVerdict / genericFileLockDirIsStale", () => {
  it("#78 a GC prunes a genuinely dead lock: stale verdict, then identity-bound removal", async () => {
    const { lockDir } = await deadLock();
    const observation = await readFileLockObservationForGc(lockDir);
    const verdict = await genericFileLockDirStaleVerdict(lockDir, 10_000);
    expect(verdict).toEqual({ stale: true, identity: observation!.identity });
    expect(await genericFileLockDirIsStale(lockDir, 10_000)).toBe(true);
    expect(await removeFileLockDirForGc(lockDir, observation!.info, verdict.stale ? verdict.identity : undefined)).toBe(
      "removed",
    );
    expect(exists(lockDir)).toBe(false);
  });

  it("#79 never judges a foreign host-qualified lock stale from local pid evidence", async () => {
    const { file, lockDir, record } = await deadLock({ owner_host_id: "foreign-host" });
    expect(await genericFileLockDirStaleVerdict(lockDir, 0)).toEqual({ stale: false });
    expect(await genericFileLockDirIsStale(lockDir, 0)).toBe(false);
    expect(await genericFileLockDirIsStale(lockDir, 0, "this-host")).toBe(false);
    expect(await genericFileLockDirStaleVerdict(lockDir, 0, "this-host", ["older-host"])).toEqual({ stale: false });
    expect(readInfo(file)).toBe(recordJson(record));
  });

  it("judges a dead owner of this host, or of a previous id of this host, stale", async () => {
    const { lockDir } = await deadLock({ owner_host_id: "old-host" });
    expect(await genericFileLockDirIsStale(lockDir, 0, "old-host")).toBe(true);
    expect((await genericFileLockDirStaleVerdict(lockDir, 0, "new-host", ["old-host"])).stale).toBe(true);
  });

  it("#80 fails closed when a live owner reclaims the stale lock between verdict and removal", async () => {
    const { file, lockDir } = await deadLock();
    const observation = await readFileLockObservationForGc(lockDir);
    const verdict = await genericFileLockDirStaleVerdict(lockDir, 10_000);
    expect(verdict.stale).toBe(true);
    const live = recordJson(canonicalRecord(liveForeignPid()));
    fs.writeFileSync(infoPathOf(file), live);
    expect(await genericFileLockDirIsStale(lockDir, 10_000)).toBe(false);
    expect(
      await removeFileLockDirForGc(lockDir, observation!.info, verdict.stale ? verdict.identity : undefined),
    ).toBe("owner_changed");
    expect(readInfo(file)).toBe(live);
  });

  it("#81 does not let a byte-identical clone (new inode) inherit a stale verdict", async () => {
    const { file, lockDir } = await deadLock();
    const observation = await readFileLockObservationForGc(lockDir);
    const verdict = await genericFileLockDirStaleVerdict(lockDir, 10_000);
    expect(verdict.stale).toBe(true);
    const bytes = readInfo(file);
    const clone = `${lockDir}.clone`;
    fs.mkdirSync(clone, { mode: 0o700 });
    fs.writeFileSync(path.join(clone, "info"), bytes, { mode: 0o600 });
    fs.rmSync(lockDir, { recursive: true });
    fs.renameSync(clone, lockDir);
    const cloneInode = inode(lockDir);
    expect(
      await removeFileLockDirForGc(lockDir, observation!.info, verdict.stale ? verdict.identity : undefined),
    ).toBe("owner_changed");
    expect(inode(lockDir)).toBe(cloneInode);
    expect(readInfo(file)).toBe(bytes);
  });

  it("#81 does not let a clone that recycled the inode numbers inherit a stale verdict", async () => {
    const { file, lockDir } = await deadLock();
    const observation = await readFileLockObservationForGc(lockDir);
    const verdict = await genericFileLockDirStaleVerdict(lockDir, 10_000);
    const bytes = readInfo(file);
    await new Promise((resolve) => setTimeout(resolve, 5));
    fs.rmSync(lockDir, { recursive: true });
    fs.mkdirSync(lockDir, { mode: 0o700 });
    fs.writeFileSync(infoPathOf(file), bytes, { mode: 0o600 });
    expect(
      await removeFileLockDirForGc(lockDir, observation!.info, verdict.stale ? verdict.identity : undefined),
    ).toBe("owner_changed");
    expect(readInfo(file)).toBe(bytes);
  });

  it("keeps a live owner, a malformed record and a young empty dir; reports them not stale", async () => {
    const root = makeRoot();
    const live = writeLock(path.join(root, "live.json"), canonicalRecord(liveForeignPid()));
    const malformed = writeLock(path.join(root, "bad.json"), "not-json", 60_000);
    const empty = writeEmptyLock(path.join(root, "empty.json"));
    for (const lockDir of [live, malformed, empty]) {
      expect(await genericFileLockDirStaleVerdict(lockDir, 1_000), lockDir).toEqual({ stale: false });
    }
    expect(await genericFileLockDirIsStale(path.join(root, "free.json.lock"), 0)).toBe(false);
  });

  it("exactlock: judges an empty legacy dir older than staleMs stale (SPEC §4), and never when host-aware", async () => {
    const lockDir = writeEmptyLock(path.join(makeRoot(), "state.json"), 60_000);
    const verdict = await genericFileLockDirStaleVerdict(lockDir, 10_000);
    expect(verdict.stale).toBe(true);
    if (verdict.stale) expect(verdict.identity.rootIno).toBe(String(inode(lockDir)));
    expect(await genericFileLockDirIsStale(lockDir, 120_000)).toBe(false);
    expect(await genericFileLockDirIsStale(lockDir, 10_000, "this-host")).toBe(false);
    expect(exists(lockDir)).toBe(true);
  });
});

describe("inspectLock (read-only)", () => {
  it("reports a free lock", async () => {
    const file = path.join(makeRoot(), "state.json");
    const inspection = await inspectLock(file);
    expect(inspection.state).toBe("free");
    expect(inspection.lockPath).toBe(lockPathOf(file));
    expect(exists(lockPathOf(file))).toBe(false);
  });

  it("reports a dead owner as stale without removing anything", async () => {
    const { file, record } = await deadLock();
    const inspection = await inspectLock(file);
    expect(inspection.state).toBe("record");
    expect(inspection.stale).toBe(true);
    expect(inspection.holder).toMatchObject({ pid: record.pid, liveness: "dead", foreign: false });
    expect(readInfo(file)).toBe(recordJson(record));
  });

  it("reports a live owner as live and not stale", async () => {
    const file = path.join(makeRoot(), "state.json");
    const record = canonicalRecord(liveForeignPid());
    writeLock(file, record);
    const inspection = await inspectLock(file);
    expect(inspection.stale).toBe(false);
    expect(inspection.holder).toMatchObject({ pid: record.pid, liveness: "live", ownerToken: record.owner_token });
    expect(inspection.description).toContain(`pid ${record.pid} (live)`);
  });
});
