import { afterEach, describe, expect, it } from "bun:test";
import { execFileSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import {
  exactRemoveDirectoryTree,
  exactRemoveDirectoryTreeAsync,
  type NativeDirectorySnapshot,
  renameDirectoryNoReplacePath,
  renameNoReplace,
  renameNoReplacePath,
  snapshotDirectoryTree,
  snapshotDirectoryTreeAsync,
} from "../lib/index.ts";
import { cleanup, tempRoot as sharedTempRoot } from "../__test__/fixtures/children.ts";

afterEach(cleanup);

const tempRoot = (): string => sharedTempRoot("exactlock-prim-bun-");

function lockTree(root: string, name = "f.lock"): string {
  const lock = path.join(root, name);
  fs.mkdirSync(path.join(lock, "sub"), { recursive: true });
  fs.writeFileSync(path.join(lock, "info"), '{"pid":1}');
  fs.writeFileSync(path.join(lock, "sub", "deep"), "deep");
  return lock;
}

function snapshotOf(dir: string): NativeDirectorySnapshot {
  const result = snapshotDirectoryTree(dir);
  expect(result.ok).toBe(true);
  return result.snapshot!;
}

describe("native primitives under bun", () => {
  it("publishes with the exclusive rename and never replaces an empty holder", async () => {
    const root = tempRoot();
    const staging = lockTree(root, "staging");
    const holder = path.join(root, "f.lock");
    fs.mkdirSync(holder);
    for (const result of [renameNoReplacePath(staging, holder), renameDirectoryNoReplacePath(staging, holder)]) {
      expect(result).toMatchObject({ ok: false, code: "destination_exists", mutationState: "not_committed" });
      expect(fs.readdirSync(holder)).toEqual([]);
    }
    fs.rmdirSync(holder);
    const published = await renameNoReplace(staging, holder);
    expect(published).toMatchObject({ ok: true, reason: "none", primitive: "renameat2_noreplace", phase: "complete" });
    expect(published.diagnostic).toEqual({ schemaVersion: 1, collectionState: "unavailable" });
    expect(fs.readFileSync(path.join(holder, "info"), "utf8")).toBe('{"pid":1}');
  });

  it("refuses a symlinked source and a NUL", () => {
    const root = tempRoot();
    const real = lockTree(root, "real");
    fs.symlinkSync(real, path.join(root, "alias"));
    expect(renameNoReplacePath(path.join(root, "alias"), path.join(root, "dst")).code).toBe("reparse_point");
    expect(renameNoReplacePath(`${real}\0`, path.join(root, "dst")).code).toBe("invalid_request");
    expect(fs.existsSync(path.join(root, "dst"))).toBe(false);
  });

  it("snapshot refuses a FIFO without blocking", async () => {
    const root = tempRoot();
    const lock = lockTree(root);
    execFileSync("mkfifo", [path.join(lock, "fifo")]);
    expect(await snapshotDirectoryTreeAsync(lock)).toEqual({ ok: false, code: "unsupported_entry" });
    expect(snapshotDirectoryTree(lock)).toEqual({ ok: false, code: "unsupported_entry" });
  });

  it("exact removal removes the judged tree and nothing after a change", async () => {
    const root = tempRoot();
    const lock = lockTree(root);
    const snapshot = snapshotOf(lock);
    fs.writeFileSync(path.join(lock, "sub", "deep"), "DEEP");
    expect(exactRemoveDirectoryTree(lock, snapshot)).toEqual({
      ok: false,
      code: "identity_mismatch",
      detachedPath: lock,
    });
    expect(fs.readFileSync(path.join(lock, "sub", "deep"), "utf8")).toBe("DEEP");

    // Whatever stands at the old fixed quarantine name is not in the way.
    fs.mkdirSync(`${lock}.removing`);
    expect(await exactRemoveDirectoryTreeAsync(lock, snapshotOf(lock))).toEqual({ ok: true });
    expect(fs.readdirSync(root)).toEqual([`${path.basename(lock)}.removing`]);
    fs.rmdirSync(`${lock}.removing`);
    expect(exactRemoveDirectoryTree(lock, snapshot)).toEqual({ ok: false, code: "not_found" });
    expect(exactRemoveDirectoryTree(lock, { ...snapshot, rootIno: "x" })).toEqual({
      ok: false,
      code: "invalid_request",
    });
  });
});
