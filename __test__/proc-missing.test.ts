/**
 * Holes around /proc:
 *
 * 1. Without /proc mounted (a minimal container, a chroot) exactlock cannot
 *    know who is alive, and today says so misleadingly: ENOENT "cannot
 *    resolve the lock's parent directory". After the fix the acquisition
 *    rejects with an error whose message names /proc and says it is needed.
 *    Real: a child process in a private mount namespace where /proc was
 *    unmounted (`unshare --mount` + `umount -l /proc`, needs root).
 * 2. The lock's parent directory is resolved through /proc/self/fd, and a
 *    name ending in " (deleted)" is taken for a removed directory: today a
 *    parent directory literally named `notes (deleted)` cannot be locked
 *    (ENOENT). After the fix it is locked like any other.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { acquireLock } from "../lib/index.ts";
import { Child, cleanup, tempRoot } from "./fixtures/children.ts";
import { fixture, lockNames } from "./kernel-helpers.ts";
import { skipFor, skipUnless } from "./premises.ts";

afterEach(cleanup);

describe("without /proc", () => {
  it("acquireLock rejects with an error that names /proc and says it is needed", async (ctx) => {
    // A mount namespace without /proc: unshare --mount, umount -l /proc.
    skipUnless(ctx, { linux: true, root: true, tools: ["unshare", "umount"] });
    const root = tempRoot("exactlock-noprocfs-");
    const file = path.join(root, "state.json");
    const child = new Child("unshare", [
      "--mount",
      "--propagation",
      "private",
      "sh",
      "-c",
      'umount -l /proc || { echo "umount failed" >&2; exit 3; }; test ! -e /proc/self/stat || exit 3; exec "$@"',
      "sh",
      process.execPath,
      fixture("try-acquire.mjs"),
      file,
    ]);
    let line: string;
    try {
      line = await child.nextLine("{");
    } catch (error) {
      const { code } = await child.exited;
      if (code === 3) skipFor(ctx, `/proc could not be unmounted in a private mount namespace: ${child.stderr.trim()}`);
      throw error;
    }
    const outcome = JSON.parse(line);
    expect(outcome).toMatchObject({ ok: false, stage: "acquire", code: "ENOPROC" });
    const message = String(outcome.message).split(root).join("<root>"); // the temp path never counts as naming /proc
    expect(message).toMatch(/\/proc\b/);
    expect(message).toMatch(/need|requir/i);
    expect(lockNames(root, "state.json")).toEqual([]);
  });
});

describe('a parent directory named "… (deleted)"', () => {
  it('"notes (deleted)/state.json" is locked and released like any other path', async () => {
    const root = tempRoot("exactlock-deletedname-");
    const parent = path.join(root, "notes (deleted)");
    fs.mkdirSync(parent);
    const file = path.join(parent, "state.json");

    let record: Record<string, unknown> = {};
    const release = await acquireLock(file, {
      onAcquired: () => {
        record = JSON.parse(fs.readFileSync(`${file}.lock/info`, "utf8"));
      },
    });
    expect(record.pid).toBe(process.pid);
    await release();
    expect(lockNames(parent, "state.json")).toEqual([]);

    // The same through a lock whose parent is created on the way.
    const nested = path.join(root, "more (deleted)", "state.json");
    const again = await acquireLock(nested);
    await again();
    expect(lockNames(path.dirname(nested), "state.json")).toEqual([]);
  });
});
