/**
 * A lock directory holding more than its record (issue 41, item 2): a
 * `.DS_Store`, an editor's swap file or a note dropped into a held `F.lock/`.
 *
 * The choice (README, "Design choices"): a lock is judged by its record,
 * and removed as the whole tree snapshotted with it, as the original module
 * does. So the release succeeds and removes exactly what it snapshotted; a
 * holder that dies is reclaimed at once, by proof of its death, like any
 * other. What no snapshot reads (a symlink, a FIFO) is never removed: the
 * release frees the lock's name, removes its own record, leaves the rest
 * where it is and rejects with `EFOREIGN` naming where.
 *
 * Before: the release failed `EOWNERCHANGED` saying the record "was
 * replaced", and once the holder had exited nobody could ever take the
 * lock: every waiter, `inspectLock`, `status` and `gc` called the valid
 * record of a dead pid "not readable".
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { acquireLock, inspectLock } from "../lib/index.ts";
import { cleanup, lockPathOf, makeRoot, rejectionOf, startFixture } from "./helpers.ts";

afterEach(cleanup);

describe("a lock directory holding more than its record", () => {
  it("the release removes exactly the tree it snapshotted: record, stray file and stray directory", async () => {
    const root = makeRoot();
    const file = path.join(root, "state.json");
    for (const inlineFastPath of [true, false]) {
      const release = await acquireLock(file, { inlineFastPath });
      fs.writeFileSync(path.join(lockPathOf(file), ".DS_Store"), "Finder was here");
      fs.mkdirSync(path.join(lockPathOf(file), "notes"));
      fs.writeFileSync(path.join(lockPathOf(file), "notes", "todo"), "added while held");
      await release();
      expect(fs.readdirSync(root)).toEqual([]);
    }
  });

  it("a holder SIGKILLed with a stray file beside its record: inspectLock names the dead pid, and a waiter has the lock within 1 s", async () => {
    const root = makeRoot();
    const file = path.join(root, "state.json");
    const holder = startFixture("hold.mjs", [file]);
    const held = await holder.nextLine();
    const pid = Number(held.split(" ")[1]);
    fs.writeFileSync(path.join(lockPathOf(file), ".state.json.swp"), "vim");
    const live = await inspectLock(file);
    expect(live.holder?.pid).toBe(pid);
    expect(live.holder?.liveness).toBe("live");
    const waiter = acquireLock(file, { timeout: 10_000 });
    await new Promise((resolve) => setTimeout(resolve, 100));
    const killedAt = performance.now();
    holder.child.kill("SIGKILL");
    const release = await waiter;
    expect(performance.now() - killedAt).toBeLessThan(1_000);
    expect(JSON.parse(fs.readFileSync(path.join(lockPathOf(file), "info"), "utf8")).pid).toBe(process.pid);
    expect(fs.readdirSync(lockPathOf(file))).toEqual(["info"]);
    await release();
    expect(fs.readdirSync(root)).toEqual([]);
  });

  it("a dead holder's lock with a stray file: inspectLock names the dead pid and calls it stale", async () => {
    const root = makeRoot();
    const file = path.join(root, "state.json");
    const holder = startFixture("hold.mjs", [file]);
    const pid = Number((await holder.nextLine()).split(" ")[1]);
    fs.writeFileSync(path.join(lockPathOf(file), "note"), "left by a user");
    holder.child.kill("SIGKILL");
    await holder.exited;
    const seen = await inspectLock(file);
    expect(seen.state).toBe("record");
    expect(seen.holder?.pid).toBe(pid);
    expect(seen.holder?.liveness).toBe("dead");
    expect(seen.stale).toBe(true);
    expect(seen.description).toContain(`pid ${pid}`);
  });

  it.skipIf(process.platform === "win32")(
    "a symlink dropped into a held lock: the release frees the name, removes its record, leaves the symlink where it is and says where (EFOREIGN)",
    async () => {
      const root = makeRoot();
      const file = path.join(root, "state.json");
      const target = path.join(root, "precious");
      fs.writeFileSync(target, "never touched");
      const release = await acquireLock(file);
      fs.symlinkSync(target, path.join(lockPathOf(file), "link"));
      const error = await rejectionOf(release());
      expect(error.code).toBe("EFOREIGN");
      const left = fs.readdirSync(root).filter((name) => name.startsWith("state.json.lock.removing."));
      expect(left).toHaveLength(1);
      expect(error.message).toContain(path.join(root, left[0]!));
      expect(fs.readdirSync(path.join(root, left[0]!))).toEqual(["link"]);
      expect(fs.readFileSync(target, "utf8")).toBe("never touched");
      // The lock is free, and a second release has nothing left to do.
      await (await acquireLock(file))();
      expect(fs.existsSync(lockPathOf(file))).toBe(false);
    },
  );
});
