/**
 * Hole: a lock directory in an overlayfs LOWER layer can never be
 * reclaimed or collected.
 *
 * A container image (or any overlay) can carry a lock `F.lock` of a
 * process that is long gone. Renaming a lower-layer directory on overlayfs
 * fails with EXDEV (no redirect_dir), so today every acquisition of F
 * fails at once ("cannot stage the lock record" / EXDEV). After the fix the
 * dead owner's lock is reclaimed at once, like on any local filesystem.
 * `exactlock gc` (removal in place) already removes such a lock today; its
 * test keeps it that way.
 *
 * A real overlay mount (needs root), made and unmounted by the test.
 */
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { acquireLock, withFileLock } from "../lib/index.ts";
import { cleanup, deadPid, tempRoot } from "./fixtures/children.ts";
import { dirWithInfo, legacyRecordBytes, lockNames, runGc } from "./kernel-helpers.ts";
import { type Needs, skipUnless } from "./premises.ts";

afterEach(cleanup);

const OVERLAY_MOUNT: Needs = { linux: true, root: true, tools: ["mount", "umount"] };

const A_START = "Wed Dec  2 08:36:20 2026";

function unmount(merged: string): void {
  if (spawnSync("umount", [merged]).status !== 0) spawnSync("umount", ["-l", merged]);
}

/**
 * Mounts an overlay whose lower layer holds `lockNamesInLower` (each a lock
 * dir with a dead owner's record in the original format), runs `body` with
 * the merged dir, and unmounts whatever happens.
 */
async function withOverlay(
  lockNamesInLower: string[],
  body: (merged: string) => Promise<void>,
  dirsInLower: string[] = [],
): Promise<void> {
  const root = tempRoot("exactlock-overlay-");
  const [lower, upper, work, merged] = ["lower", "upper", "work", "merged"].map((name) => path.join(root, name));
  for (const dir of [lower, upper, work, merged]) fs.mkdirSync(dir!);
  for (const name of dirsInLower) fs.mkdirSync(path.join(lower!, name));
  for (const name of lockNamesInLower) {
    dirWithInfo(path.join(lower!, name), legacyRecordBytes({ pid: deadPid(), start_time: A_START }));
  }
  const mounted = spawnSync("mount", ["-t", "overlay", "overlay", "-o", `lowerdir=${lower},upperdir=${upper},workdir=${work}`, merged!], {
    encoding: "utf8",
  });
  // As root with mount(8) present, a failing mount is a failure of the test, not a reason to skip.
  if (mounted.status !== 0) throw new Error(`cannot mount the overlay: ${mounted.stderr.trim()}`);
  try {
    await body(merged!);
  } finally {
    unmount(merged!);
  }
}

describe("overlayfs: a dead owner's lock in the lower layer", () => {
  it("is reclaimed by the next acquisition with default options, and the release leaves no lock names", async (ctx) => {
    skipUnless(ctx, OVERLAY_MOUNT);
    await withOverlay(["state.json.lock"], async (merged) => {
      const file = path.join(merged, "state.json");
      expect(lockNames(merged, "state.json")).toEqual(["state.json.lock"]);

      const release = await acquireLock(file);
      expect(JSON.parse(fs.readFileSync(`${file}.lock/info`, "utf8")).pid).toBe(process.pid);
      await release();
      expect(lockNames(merged, "state.json")).toEqual([]);

      // The lock works normally afterwards.
      const again = await acquireLock(file, { retries: 0 });
      await again();
      expect(fs.readdirSync(merged)).toEqual([]);
    });
  });

  it("is removed by `exactlock gc MERGED` (it prints the removal), leaving nothing", async (ctx) => {
    skipUnless(ctx, OVERLAY_MOUNT);
    await withOverlay(["other.json.lock"], async (merged) => {
      expect(lockNames(merged, "other.json")).toEqual(["other.json.lock"]);
      const collected = await runGc(merged);
      expect(collected.code, collected.stderr).toBe(0);
      expect(collected.stdout).toContain(path.join(merged, "other.json.lock"));
      expect(fs.readdirSync(merged)).toEqual([]);
    });
  });
});

describe("overlayfs: a parent directory that exists only in the lower layer", () => {
  // The first publication copies the parent up, and overlayfs then reports
  // the upper layer's birth time for it: the lock must keep one key.
  it("is one lock in this process across the copy-up: a nested acquisition is EDEADLK at once, and waiters queue first come first served", async (ctx) => {
    skipUnless(ctx, OVERLAY_MOUNT);
    await withOverlay(
      [],
      async (merged) => {
        const file = path.join(merged, "sub", "state.json");
        const nested = await withFileLock(file, async () => {
          try {
            await withFileLock(file, async () => undefined, { retries: 20, retryDelayMs: 100 });
            return "acquired inside itself";
          } catch (error) {
            return (error as { code?: string }).code;
          }
        });
        expect(nested).toBe("EDEADLK");

        // In-process waiters of a lock whose parent the holder's publication copied up queue in call order.
        const order: string[] = [];
        const other = path.join(merged, "fresh", "other.json");
        const release = await acquireLock(other);
        const waiters = ["first", "second", "third"].map((name) =>
          withFileLock(other, async () => {
            order.push(name);
          }),
        );
        await new Promise((resolve) => setTimeout(resolve, 100));
        await release();
        await Promise.all(waiters);
        expect(order).toEqual(["first", "second", "third"]);
        expect(fs.readdirSync(path.join(merged, "sub"))).toEqual([]);
        expect(fs.readdirSync(path.join(merged, "fresh"))).toEqual([]);
      },
      ["sub", "fresh"],
    );
  });
});
