/**
 * A directory that cannot hold a lock is an error naming it, at once — not
 * contention (issue 41, item 5). Every `mkdir` in such a directory fails,
 * and a waiter used to spend its whole budget on them (for ever with
 * `timeout: Infinity`), then report a holder that did not exist.
 *
 * - `/proc`: the kernel's filesystem answers `ENOENT` to a `mkdir`.
 * - A directory removed while its path still leads to it: a bind mount
 *   whose source was removed (root), or `/proc/self/fd/N` of a descriptor
 *   held on it (any user).
 */
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { acquireLock, acquireLockSync } from "../lib/index.ts";
import { cleanup, makeRoot, rejectionOf } from "./helpers.ts";
import { IS_ROOT, ON_LINUX } from "./premises.ts";

afterEach(cleanup);

/** The rejection of `acquireLock(file, { timeout: Infinity })`, and how long it took. */
async function refusal(file: string): Promise<{ error: any; ms: number }> {
  const started = performance.now();
  const error = await rejectionOf(acquireLock(file, { timeout: Infinity }));
  return { error, ms: performance.now() - started };
}

const onLinux = ON_LINUX;
const asRoot = onLinux && IS_ROOT;

describe("a directory that cannot hold a lock", () => {
  it.skipIf(!onLinux)("/proc: ENOENT naming the directory within 1 s, even with timeout: Infinity (Linux)", async () => {
    const { error, ms } = await refusal("/proc/state.json");
    expect(error.code).toBe("ENOENT");
    expect(error.message).toContain("its directory /proc refuses new entries");
    expect(ms).toBeLessThan(1000);
    expect(() => acquireLockSync("/proc/state.json", { timeout: Infinity })).toThrow(/its directory \/proc refuses new entries/);
  });

  it.skipIf(!onLinux)("removed while a path still leads to it (/proc/self/fd/N): ENOENT naming it within 1 s (Linux)", async () => {
    const dir = path.join(makeRoot(), "gone");
    fs.mkdirSync(dir);
    const fd = fs.openSync(dir, "r");
    try {
      fs.rmdirSync(dir);
      const parent = `/proc/self/fd/${fd}`;
      const { error, ms } = await refusal(path.join(parent, "state.json"));
      expect(error.code).toBe("ENOENT");
      expect(error.message).toContain(`its directory ${parent} has been removed, but its path still leads to it`);
      expect(ms).toBeLessThan(1000);
    } finally {
      fs.closeSync(fd);
    }
  });

  it.skipIf(!asRoot)("a bind mount whose source was removed: ENOENT naming it within 1 s (Linux, root)", async () => {
    const root = makeRoot();
    const [source, view] = [path.join(root, "source"), path.join(root, "view")];
    fs.mkdirSync(source);
    fs.mkdirSync(view);
    const mounted = spawnSync("mount", ["--bind", source, view], { encoding: "utf8" });
    expect(mounted.status, mounted.stderr).toBe(0);
    try {
      fs.rmdirSync(source);
      const { error, ms } = await refusal(path.join(view, "state.json"));
      expect(error.code).toBe("ENOENT");
      expect(error.message).toContain(`its directory ${view} has been removed, but its path still leads to it`);
      expect(ms).toBeLessThan(1000);
      expect(fs.readdirSync(root)).toEqual(["view"]);
    } finally {
      if (spawnSync("umount", [view]).status !== 0) spawnSync("umount", ["-l", view]);
    }
  });
});
