/**
 * The smaller real-world holes, each with real kernel objects:
 * - a planted symlink got a chmod as the victim (mkdir(path) then
 *   chmod(path) when creating a missing parent);
 * - a parent directory replaced while a waiter waits kept the watch on the
 *   old inode (the hand-off waited for the timer);
 * - one EMFILE while the inotify watcher started turned wake-ups off for
 *   the rest of the process;
 * - a takeover that could not delete the judged tree reported success and
 *   left the tree under a `.pending.` name;
 * - every write of a neighbour in the lock's directory woke the waiter
 *   into a full attempt (inotify reports every name of a directory);
 * - a signal whose addEventListener threw left the record staged for the
 *   wait in the lock's directory until the next acquisition.
 */
import { execFileSync, spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { acquireLock, FileLockAcquireError, FileLockError } from "../lib/index.ts";
import { clearFaultsForTesting, injectDelayForTesting } from "../lib/testing.ts";
import { cleanup, now, spawnFixture, spawnHolder, tempRoot } from "./fixtures/children.ts";
import { canonicalRecord, deadPid, inode, infoPathOf, PORTABLE, waitUntil, writeLock } from "./helpers.ts";
import { skipUnless } from "./premises.ts";

const unfreeze: string[] = [];

afterEach(async () => {
  clearFaultsForTesting();
  for (const target of unfreeze.splice(0)) spawnSync("chattr", ["-i", target], { stdio: "ignore" });
  await cleanup();
});

describe("creating a missing parent", () => {
  it("never chmods through a symlink planted between the mkdir and the mode change", async () => {
    const root = tempRoot("exactlock-mkrace-");
    const target = path.join(root, "target");
    fs.mkdirSync(target);
    fs.chmodSync(target, 0o755);
    const file = path.join(root, "new", "state.json");
    // The window between creating `new` and setting its mode, held open.
    injectDelayForTesting("parent.created", 400, "new", 1);
    const outcome = acquireLock(file, { inlineFastPath: false, retries: 20 }).then(
      async (release) => {
        await release();
        return undefined;
      },
      (error: unknown) => error,
    );
    await waitUntil(() => fs.existsSync(path.join(root, "new")), 5_000, "the new parent");
    // The attacker: swap the fresh directory for a symlink to the target.
    fs.renameSync(path.join(root, "new"), path.join(root, "moved"));
    fs.symlinkSync(target, path.join(root, "new"));
    const error = await outcome;
    expect(error).toBeInstanceOf(FileLockError);
    expect(["ELOOP", "ENOTDIR"]).toContain((error as FileLockError).code);
    expect(fs.statSync(target).mode & 0o777).toBe(0o755);
    expect(fs.readdirSync(target)).toEqual([]);
  });
});

describe("waking", () => {
  // Skipped under the portable mechanisms: "at once" is inotify's MOVE_SELF; timer-only
  // waits look at their next timer by design.
  it.skipIf(PORTABLE)("a waiter whose lock's parent directory is replaced looks again at once, not at its next timer", async () => {
    const root = tempRoot("exactlock-replaced-");
    const file = path.join(root, "p", "state.json");
    const holder = await spawnHolder(file);
    const waiting = acquireLock(file, { retries: 100, retryDelayMs: 3_000 });
    await new Promise((resolve) => setTimeout(resolve, 200));
    const replacedAt = now();
    fs.renameSync(path.join(root, "p"), path.join(root, "p.old"));
    // The waiter, woken at once, may recreate `p` itself before this line.
    fs.mkdirSync(path.join(root, "p"), { recursive: true });
    const release = await waiting;
    const tookMs = now() - replacedAt;
    expect(tookMs).toBeLessThan(1_000);
    expect(fs.readdirSync(path.join(root, "p"))).toEqual(["state.json.lock"]);
    await release();
    holder.send("exit");
    await holder.exited;
  });

  it("a waiter sleeps through its neighbours' writes in the lock's directory: they cost it no attempts", async () => {
    const root = tempRoot("exactlock-busy-dir-");
    const file = path.join(root, "state.json");
    const holder = await spawnHolder(file);
    // One timer wake at most within the 1.5 s budget: every other attempt
    // would have been caused by an inotify event.
    const waiting = acquireLock(file, { retries: 1, retryDelayMs: 1_500 }).then(
      () => undefined,
      (error: unknown) => error,
    );
    // The neighbour: a config writer next to the lock (write a temporary
    // file, rename it over the real one, sometimes delete it), 200 times.
    let writes = 0;
    const neighbour = setInterval(() => {
      fs.writeFileSync(path.join(root, "config.json.tmp"), `{"n":${writes}}`);
      fs.renameSync(path.join(root, "config.json.tmp"), path.join(root, "config.json"));
      if (writes % 2 === 0) fs.unlinkSync(path.join(root, "config.json"));
      writes++;
    }, 5);
    const error = await waiting;
    clearInterval(neighbour);
    expect(writes).toBeGreaterThan(100);
    expect(error).toBeInstanceOf(FileLockAcquireError);
    // The first attempt, the timer's, and the last look at the deadline.
    expect((error as FileLockAcquireError).attempts).toBeLessThanOrEqual(3);
    holder.send("exit");
    await holder.exited;
  });

  // Skipped under the portable mechanisms: they start no inotify watcher.
  it.skipIf(PORTABLE)("one EMFILE while the inotify watcher starts does not turn wake-ups off for the rest of the process", async () => {
    const root = tempRoot("exactlock-emfile-");
    const file = path.join(root, "state.json");
    const release = await acquireLock(file);
    const child = spawnFixture("emfile-waiter.mjs", [file]);
    expect(await child.nextLine("first ", 20_000)).toBe("first EMFILE");
    await child.nextLine("waiting", 20_000);
    await new Promise((resolve) => setTimeout(resolve, 300));
    const releasedAt = now();
    await release();
    const acquiredAt = Number((await child.nextLine("acquired ", 20_000)).split(" ")[1]);
    // A wake-up by the timer alone would take retryDelayMs (3 s).
    expect(acquiredAt - releasedAt).toBeLessThan(1_000);
    expect(await child.exited).toEqual({ code: 0, signal: null });
  }, 30_000);
});

describe("taking over a dead owner's lock", () => {
  it("that cannot be deleted gives the judged tree its name back and says why; nothing is left under a staging name", async (ctx) => {
    skipUnless(ctx, { linux: true, root: true, tools: ["chattr"] }); // chattr +i makes the record undeletable even for root
    const root = tempRoot("exactlock-undeletable-");
    const file = path.join(root, "state.json");
    const lock = writeLock(file, canonicalRecord(await deadPid()));
    const bytes = fs.readFileSync(infoPathOf(file));
    const ino = inode(lock);
    execFileSync("chattr", ["+i", infoPathOf(file)]);
    unfreeze.push(infoPathOf(file));
    const error = await acquireLock(file, { retries: 3, retryDelayMs: 10 }).then(
      () => undefined,
      (failure: unknown) => failure,
    );
    expect(error).toBeInstanceOf(FileLockAcquireError);
    expect((error as FileLockAcquireError).holder).toMatch(/\(dead\).*could not be removed \(EPERM\)/);
    expect(fs.readdirSync(root)).toEqual(["state.json.lock"]);
    expect(inode(lock)).toBe(ino);
    expect(fs.readFileSync(infoPathOf(file))).toEqual(bytes);
  });
});

describe("a signal that is an AbortSignal only in shape", () => {
  it("whose addEventListener throws rejects with that error, and the record staged for the wait does not stay", async () => {
    const dir = tempRoot("exactlock-shape-signal-");
    const file = path.join(dir, "state.json");
    const held = await acquireLock(file);
    try {
      // Taken: the first attempt (on this thread: the directory has earned
      // it) stages a record for the wait, which then never starts.
      const failure = new Error("addEventListener refused");
      const signal = {
        aborted: false,
        addEventListener() {
          throw failure;
        },
        removeEventListener() {},
      } as unknown as AbortSignal;
      await expect(acquireLock(file, { signal })).rejects.toBe(failure);
      expect(fs.readdirSync(dir).sort()).toEqual(["state.json.lock"]);
    } finally {
      await held();
    }
    expect(fs.readdirSync(dir)).toEqual([]);
  });
});
