import { execFileSync } from "node:child_process";
import * as fs from "node:fs";
import * as net from "node:net";
import * as path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import {
  exactRemoveDirectoryTree,
  exactRemoveDirectoryTreeAsync,
  type NativeDirectorySnapshot,
  type NativeNoReplaceResult,
  renameDirectoryNoReplacePath,
  renameDirectoryNoReplacePathAsync,
  renameNoReplace,
  renameNoReplacePath,
  renameNoReplacePathAsync,
  snapshotDirectoryTree,
  snapshotDirectoryTreeAsync,
} from "../lib/index.ts";
import { cleanup, tempRoot as sharedTempRoot } from "./fixtures/children.ts";
import { PORTABLE } from "./helpers.ts";

afterEach(cleanup);

const tempRoot = (): string => sharedTempRoot("exactlock-prim-");

const INFO = '{"pid":1,"owner_token":"t"}';

/** `<root>/f.lock` with `info` and `sub/deep`. */
function lockTree(root: string, name = "f.lock"): string {
  const lock = path.join(root, name);
  fs.mkdirSync(path.join(lock, "sub"), { recursive: true });
  fs.writeFileSync(path.join(lock, "info"), INFO);
  fs.writeFileSync(path.join(lock, "sub", "deep"), "deep");
  return lock;
}

function expectIntact(lock: string): void {
  expect(fs.readFileSync(path.join(lock, "info"), "utf8")).toBe(INFO);
  expect(fs.readFileSync(path.join(lock, "sub", "deep"), "utf8")).toBe("deep");
  // Nothing left detached beside it under a quarantine name.
  const beside = fs.readdirSync(path.dirname(lock)).filter((name) => name.includes(".removing"));
  expect(beside).toEqual([]);
}

function snapshotOf(dir: string): NativeDirectorySnapshot {
  const result = snapshotDirectoryTree(dir);
  expect(result).toMatchObject({ ok: true });
  return result.snapshot!;
}

function expectRefused(result: NativeNoReplaceResult, code: string, reason: string): void {
  expect(result.ok).toBe(false);
  expect(result.code).toBe(code);
  expect(result.reason).toBe(reason);
  expect(result.mutationState).toBe("not_committed");
  expect(result.diagnostic).toEqual({ schemaVersion: 1, collectionState: "unavailable" });
}

/** Rejects if `promise` has not settled within `ms` (a blocked native call). */
function within<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`did not return within ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

describe("renameNoReplacePath", () => {
  it("publishes a staged directory with the exclusive rename", async () => {
    const root = tempRoot();
    const staging = lockTree(root, "staging");
    const result = renameNoReplacePath(staging, path.join(root, "f.lock"));
    expect(result).toEqual({
      ok: true,
      mutationState: "committed",
      durabilityState: "not_attempted",
      reason: "none",
      // The portable mechanisms have no exclusive rename: the mkdirat claim publishes.
      primitive: PORTABLE ? "mkdirat_renameat_noreplace" : "renameat2_noreplace",
      phase: "complete",
      diagnostic: { schemaVersion: 1, collectionState: "unavailable" },
    });
    expectIntact(path.join(root, "f.lock"));
    expect(fs.existsSync(staging)).toBe(false);

    const again = lockTree(root, "staging2");
    const asyncResult = await renameNoReplacePathAsync(again, path.join(root, "g.lock"));
    expect(asyncResult.ok).toBe(true);
    expect(renameNoReplace).toBe(renameNoReplacePathAsync);
    expect((await renameNoReplace(path.join(root, "g.lock"), path.join(root, "h.lock"))).ok).toBe(true);
  });

  it("never replaces an empty directory at the destination (a holder)", async () => {
    const root = tempRoot();
    const staging = lockTree(root, "staging");
    const holder = path.join(root, "f.lock");
    fs.mkdirSync(holder);
    const holderIno = fs.statSync(holder).ino;
    for (const result of [
      renameNoReplacePath(staging, holder),
      await renameNoReplacePathAsync(staging, holder),
      renameDirectoryNoReplacePath(staging, holder),
      await renameDirectoryNoReplacePathAsync(staging, holder),
    ]) {
      expectRefused(result, "destination_exists", "destination_exists");
      expect(result.phase).toBe("rename");
      expect(fs.readdirSync(holder)).toEqual([]);
      expect(fs.statSync(holder).ino).toBe(holderIno);
      expectIntact(staging);
    }
  });

  it("refuses a populated destination and leaves both trees intact", () => {
    const root = tempRoot();
    const first = lockTree(root, "a");
    const second = lockTree(root, "b");
    fs.writeFileSync(path.join(second, "marker"), "b");
    expectRefused(renameNoReplacePath(first, second), "destination_exists", "destination_exists");
    expectIntact(first);
    expect(fs.readFileSync(path.join(second, "marker"), "utf8")).toBe("b");
  });

  it("refuses a symlinked source and a symlinked ancestor", () => {
    const root = tempRoot();
    const real = lockTree(root, "real");
    fs.symlinkSync(real, path.join(root, "alias"));
    const viaLink = renameNoReplacePath(path.join(root, "alias"), path.join(root, "dst"));
    expectRefused(viaLink, "reparse_point", "identity_violation");
    expect(viaLink.phase).toBe("preflight");
    expect(fs.lstatSync(path.join(root, "alias")).isSymbolicLink()).toBe(true);

    fs.mkdirSync(path.join(root, "parent"));
    fs.symlinkSync(path.join(root, "parent"), path.join(root, "parent-alias"));
    const viaAncestor = renameNoReplacePath(real, path.join(root, "parent-alias", "dst"));
    expectRefused(viaAncestor, "reparse_point", "identity_violation");
    expectRefused(
      renameDirectoryNoReplacePath(path.join(root, "alias"), path.join(root, "dst")),
      "reparse_point",
      "identity_violation",
    );
    expectIntact(real);
    expect(fs.readdirSync(path.join(root, "parent"))).toEqual([]);
  });

  it("answers a NUL in a path with invalid_request before touching anything", async () => {
    const root = tempRoot();
    const staging = lockTree(root, "staging");
    for (const result of [
      renameNoReplacePath(`${staging}\0x`, path.join(root, "dst")),
      renameNoReplacePath(staging, path.join(root, "d\0st")),
      await renameNoReplacePathAsync(staging, `${root}/dst\0`),
      renameDirectoryNoReplacePath(staging, path.join(root, "d\0st")),
    ]) {
      expectRefused(result, "invalid_request", "invalid_request");
      expect(result.phase).toBe("preflight");
    }
    expectIntact(staging);
    expect(fs.readdirSync(root)).toEqual(["staging"]);
  });

  it("reports a missing source as not_found", () => {
    const root = tempRoot();
    expectRefused(
      renameNoReplacePath(path.join(root, "nope"), path.join(root, "dst")),
      "not_found",
      "invalid_request",
    );
  });

  it("rejects a non-string path as an argument error", async () => {
    expect(() => renameNoReplacePath(42 as unknown as string, "/tmp/x")).toThrow(TypeError);
    await expect(renameNoReplacePathAsync("/tmp/x", undefined as unknown as string)).rejects.toThrow(TypeError);
  });
});

describe("renameDirectoryNoReplacePath (mkdirat + renameat fallback)", () => {
  it("publishes the source directory itself", async () => {
    const root = tempRoot();
    const staging = lockTree(root, "staging");
    const ino = fs.statSync(staging).ino;
    const result = renameDirectoryNoReplacePath(staging, path.join(root, "f.lock"));
    expect(result).toMatchObject({ ok: true, primitive: "mkdirat_renameat_noreplace", phase: "complete" });
    expect(fs.statSync(path.join(root, "f.lock")).ino).toBe(ino);
    expectIntact(path.join(root, "f.lock"));

    const other = lockTree(root, "other");
    const asyncResult = await renameDirectoryNoReplacePathAsync(other, path.join(root, "g.lock"));
    expect(asyncResult).toMatchObject({ ok: true, primitive: "mkdirat_renameat_noreplace" });
  });

  it("refuses a regular-file source without leaving a claim behind", () => {
    const root = tempRoot();
    fs.writeFileSync(path.join(root, "file"), "x");
    const result = renameDirectoryNoReplacePath(path.join(root, "file"), path.join(root, "dst"));
    expectRefused(result, "not_directory", "identity_violation");
    expect(fs.existsSync(path.join(root, "dst"))).toBe(false);
  });
});

describe("snapshotDirectoryTree", () => {
  it("lists the tree root first, sorted pre-order, with digests and decimal strings", async () => {
    const root = tempRoot();
    const lock = lockTree(root);
    fs.writeFileSync(path.join(lock, "a"), "abc");
    const snapshot = snapshotOf(lock);
    const stat = fs.statSync(lock, { bigint: true });
    expect(snapshot.rootDev).toBe(stat.dev.toString());
    expect(snapshot.rootIno).toBe(stat.ino.toString());
    expect(snapshot.entries.map((e) => [e.relativePath, e.kind])).toEqual([
      ["", "directory"],
      ["a", "file"],
      ["info", "file"],
      ["sub", "directory"],
      ["sub/deep", "file"],
    ]);
    const a = snapshot.entries[1]!;
    const aStat = fs.statSync(path.join(lock, "a"), { bigint: true });
    expect(a).toEqual({
      relativePath: "a",
      kind: "file",
      dev: aStat.dev.toString(),
      ino: aStat.ino.toString(),
      nlink: "1",
      size: "3",
      mtimeNs: aStat.mtimeNs.toString(),
      ctimeNs: aStat.ctimeNs.toString(),
      sha256: "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
    });
    expect(snapshot.entries[0]!.sha256).toBeUndefined();
    expect(await snapshotDirectoryTreeAsync(lock)).toEqual({ ok: true, snapshot });
  });

  it("refuses a symlink at the root and inside", async () => {
    const root = tempRoot();
    const lock = lockTree(root);
    fs.symlinkSync(lock, path.join(root, "alias"));
    expect(snapshotDirectoryTree(path.join(root, "alias"))).toEqual({ ok: false, code: "reparse_point" });
    expect(await snapshotDirectoryTreeAsync(path.join(root, "alias"))).toEqual({ ok: false, code: "reparse_point" });
    fs.symlinkSync("/etc/passwd", path.join(lock, "sub", "info-link"));
    expect(snapshotDirectoryTree(lock)).toEqual({ ok: false, code: "reparse_point" });
  });

  it("refuses a FIFO inside without opening it (returns at once)", async () => {
    const root = tempRoot();
    const lock = lockTree(root);
    execFileSync("mkfifo", [path.join(lock, "sub", "fifo")]);
    const started = Date.now();
    expect(await within(snapshotDirectoryTreeAsync(lock), 5_000)).toEqual({ ok: false, code: "unsupported_entry" });
    expect(snapshotDirectoryTree(lock)).toEqual({ ok: false, code: "unsupported_entry" });
    expect(Date.now() - started).toBeLessThan(5_000);
  });

  it("refuses a socket inside", async () => {
    const root = tempRoot();
    const lock = lockTree(root);
    const server = net.createServer();
    await new Promise<void>((resolve) => server.listen(path.join(lock, "sock"), resolve));
    try {
      expect(snapshotDirectoryTree(lock)).toEqual({ ok: false, code: "unsupported_entry" });
    } finally {
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });

  it("refuses a non-UTF-8 name", () => {
    const root = tempRoot();
    const lock = lockTree(root);
    fs.writeFileSync(Buffer.concat([Buffer.from(`${lock}/bad-`), Buffer.from([0xff])]), "x");
    expect(snapshotDirectoryTree(lock)).toEqual({ ok: false, code: "not_utf8" });
  });

  it("refuses a file with a second hard link", () => {
    const root = tempRoot();
    const lock = lockTree(root);
    fs.linkSync(path.join(lock, "info"), path.join(root, "outside"));
    expect(snapshotDirectoryTree(lock)).toEqual({ ok: false, code: "hard_link_unsupported" });
  });

  it("answers missing, non-directory and NUL paths", () => {
    const root = tempRoot();
    fs.writeFileSync(path.join(root, "file"), "x");
    expect(snapshotDirectoryTree(path.join(root, "missing"))).toEqual({ ok: false, code: "not_found" });
    expect(snapshotDirectoryTree(path.join(root, "file"))).toEqual({ ok: false, code: "not_directory" });
    expect(snapshotDirectoryTree(`${root}/a\0b`)).toEqual({ ok: false, code: "invalid_request" });
  });

  it("enforces the per-file, total-bytes and entry-count limits", () => {
    const root = tempRoot();
    const big = path.join(root, "big");
    fs.mkdirSync(big);
    fs.writeFileSync(path.join(big, "huge"), "");
    fs.truncateSync(path.join(big, "huge"), 1024 * 1024 + 1);
    expect(snapshotDirectoryTree(big)).toEqual({ ok: false, code: "limit_exceeded" });

    const total = path.join(root, "total");
    fs.mkdirSync(total);
    for (let i = 0; i < 17; i++) {
      const file = path.join(total, `f${String(i).padStart(2, "0")}`);
      fs.writeFileSync(file, "");
      fs.truncateSync(file, 1024 * 1024);
    }
    expect(snapshotDirectoryTree(total)).toEqual({ ok: false, code: "limit_exceeded" });

    const many = path.join(root, "many");
    fs.mkdirSync(many);
    for (let i = 0; i < 4096; i++) fs.writeFileSync(path.join(many, `e${i}`), "");
    expect(snapshotDirectoryTree(many)).toEqual({ ok: false, code: "limit_exceeded" });
    fs.rmSync(path.join(many, "e0"));
    expect(snapshotOf(many).entries).toHaveLength(4096);
  });
});

describe("exactRemoveDirectoryTree", () => {
  it("removes exactly the judged tree", async () => {
    const root = tempRoot();
    const lock = lockTree(root);
    expect(exactRemoveDirectoryTree(lock, snapshotOf(lock))).toEqual({ ok: true });
    expect(fs.readdirSync(root)).toEqual([]);

    const again = lockTree(root);
    expect(await exactRemoveDirectoryTreeAsync(again, snapshotOf(again))).toEqual({ ok: true });
    expect(fs.readdirSync(root)).toEqual([]);
  });

  const changes: [string, (lock: string) => void][] = [
    ["a file rewritten with the same size", (lock) => fs.writeFileSync(path.join(lock, "sub", "deep"), "DEEP")],
    ["a file added", (lock) => fs.writeFileSync(path.join(lock, "sub", "extra"), "")],
    [
      "a file swapped for a byte-identical copy",
      (lock) => {
        fs.copyFileSync(path.join(lock, "info"), path.join(lock, "copy"));
        fs.renameSync(path.join(lock, "copy"), path.join(lock, "info"));
      },
    ],
    ["a file removed", (lock) => fs.rmSync(path.join(lock, "sub", "deep"))],
    ["a FIFO added", (lock) => execFileSync("mkfifo", [path.join(lock, "fifo")])],
  ];
  for (const [what, change] of changes) {
    it(`deletes nothing after ${what}`, async () => {
      const root = tempRoot();
      const lock = lockTree(root);
      const snapshot = snapshotOf(lock);
      change(lock);
      const before = fs.readdirSync(lock).sort();
      const result = await within(exactRemoveDirectoryTreeAsync(lock, snapshot), 5_000);
      // detachedPath: where the examined tree lives now (put back at its name).
      expect(result).toEqual({ ok: false, code: "identity_mismatch", detachedPath: lock });
      expect(fs.readdirSync(lock).sort()).toEqual(before);
      expect(fs.readdirSync(root)).toEqual([path.basename(lock)]);
      if (what !== "a file removed") {
        expect(fs.readFileSync(path.join(lock, "info"), "utf8")).toBe(INFO);
      }
    });
  }

  it("spares a successor created at the path (same bytes, new objects)", () => {
    const root = tempRoot();
    const lock = lockTree(root);
    const snapshot = snapshotOf(lock);
    // Hold the originals open so the successor cannot recycle their inode numbers.
    const pins = [lock, path.join(lock, "sub"), path.join(lock, "info"), path.join(lock, "sub", "deep")].map((p) =>
      fs.openSync(p, "r"),
    );
    try {
      fs.rmSync(lock, { recursive: true });
      lockTree(root);
      const successorIno = fs.statSync(lock).ino;
      expect(exactRemoveDirectoryTree(lock, snapshot)).toEqual({
        ok: false,
        code: "identity_mismatch",
        detachedPath: lock,
      });
      expectIntact(lock);
      expect(fs.statSync(lock).ino).toBe(successorIno);
    } finally {
      for (const fd of pins) fs.closeSync(fd);
    }
  });

  it("detaches to a name unique per use: whatever stands at <path>.removing is neither in the way nor touched", () => {
    const root = tempRoot();
    const lock = lockTree(root);
    const snapshot = snapshotOf(lock);
    fs.mkdirSync(`${lock}.removing`);
    fs.writeFileSync(path.join(`${lock}.removing`, "debris"), "d");
    expect(exactRemoveDirectoryTree(lock, snapshot)).toEqual({ ok: true });
    expect(fs.readdirSync(root)).toEqual([`${path.basename(lock)}.removing`]);
    expect(fs.readFileSync(path.join(`${lock}.removing`, "debris"), "utf8")).toBe("d");
  });

  it("refuses a symlink swapped in at the path", () => {
    const root = tempRoot();
    const lock = lockTree(root);
    const snapshot = snapshotOf(lock);
    fs.renameSync(lock, path.join(root, "real"));
    fs.symlinkSync(path.join(root, "real"), lock);
    expect(exactRemoveDirectoryTree(lock, snapshot)).toEqual({
      ok: false,
      code: "identity_mismatch",
      detachedPath: lock,
    });
    expect(fs.lstatSync(lock).isSymbolicLink()).toBe(true);
    expectIntact(path.join(root, "real"));
  });

  it("reports a missing tree as not_found", async () => {
    const root = tempRoot();
    const lock = lockTree(root);
    const snapshot = snapshotOf(lock);
    fs.rmSync(lock, { recursive: true });
    expect(exactRemoveDirectoryTree(lock, snapshot)).toEqual({ ok: false, code: "not_found" });
    expect(await exactRemoveDirectoryTreeAsync(lock, snapshot)).toEqual({ ok: false, code: "not_found" });
  });

  it("rejects a snapshot without the snapshot shape with ERR_INVALID_ARG_TYPE, deleting nothing", async () => {
    const root = tempRoot();
    const lock = lockTree(root);
    const snapshot = snapshotOf(lock);
    const misshapen: [unknown, RegExp][] = [
      [{ ...snapshot, entries: snapshot.entries.map((e) => ({ ...e, size: 3 })) }, /^snapshot\.entries\[0\]\.size must be a string/],
      [{ ...snapshot, rootIno: Number(snapshot.rootIno) }, /^snapshot\.rootIno must be a string/],
      [{ rootDev: snapshot.rootDev }, /^snapshot\.rootIno must be a string; received undefined/],
      [null, /^snapshot must be an object; received null/],
      ["snapshot", /^snapshot must be an object; received type string/],
    ];
    for (const [bad, message] of misshapen) {
      const expected = { name: "TypeError", code: "ERR_INVALID_ARG_TYPE", message: expect.stringMatching(message) };
      expect(() => exactRemoveDirectoryTree(lock, bad as NativeDirectorySnapshot)).toThrow(
        expect.objectContaining(expected),
      );
      await expect(exactRemoveDirectoryTreeAsync(lock, bad as NativeDirectorySnapshot)).rejects.toMatchObject(expected);
    }
    expectIntact(lock);
  });

  it("answers a snapshot whose strings do not parse with invalid_request, never a throw", async () => {
    const root = tempRoot();
    const lock = lockTree(root);
    const snapshot = snapshotOf(lock);
    const broken: NativeDirectorySnapshot[] = [
      { ...snapshot, rootIno: "12x" },
      { ...snapshot, rootDev: "-1" },
      { ...snapshot, entries: snapshot.entries.map((e) => ({ ...e, kind: "symlink" as never })) },
      { ...snapshot, entries: snapshot.entries.map((e) => ({ ...e, mtimeNs: "1.5" })) },
      { ...snapshot, entries: snapshot.entries.map((e) => ({ ...e, sha256: e.sha256 ? "XYZ" : undefined })) },
    ];
    for (const bad of broken) {
      expect(exactRemoveDirectoryTree(lock, bad)).toEqual({ ok: false, code: "invalid_request" });
      expect(await exactRemoveDirectoryTreeAsync(lock, bad)).toEqual({ ok: false, code: "invalid_request" });
    }
    expectIntact(lock);
    expect(exactRemoveDirectoryTree(`${lock}\0`, snapshot)).toEqual({ ok: false, code: "invalid_request" });
    expectIntact(lock);
  });
});
