/**
 * The uid's inotify budget: `fs.inotify.max_user_instances` (128 by
 * default) counts the instances of every process of the user, editors and
 * test runners included. One instance per waiting lock and per watched
 * held lock used it up with a few dozen locks: past it, waiters fell back
 * to their timer and other programs' `fs.watch` failed with EMFILE. A
 * process now has one instance, whatever it waits for or watches.
 */
import * as path from "node:path";
import { afterEach, expect, it } from "vitest";
import { acquireLock } from "../lib/index.ts";
import { cleanup, spawnFixture, tempRoot } from "./fixtures/children.ts";
import { PORTABLE } from "./helpers.ts";
import { skipUnless } from "./premises.ts";

afterEach(cleanup);

// Skipped under the portable mechanisms: they watch nothing.
it.skipIf(PORTABLE)(
  "150 waits and 150 watched held locks in one process use one inotify instance, and every wait is handed over by an event",
  async (ctx) => {
    skipUnless(ctx, { linux: true }); // inotify, and the uid's instances in /proc
    const root = tempRoot("exactlock-inotify-budget-");
    const count = 150;
    const releases = [];
    for (let i = 0; i < count; i++) releases.push(await acquireLock(path.join(root, `wanted-${i}`)));
    const child = spawnFixture("many-watches.mjs", [root, String(count)]);
    const line = await child.nextLine("waiting ", 60_000);
    const [, instances, watch] = line.split(" ");
    expect(Number(instances)).toBe(1);
    expect(watch).toBe("ok");
    for (const release of releases) await release();
    // Their fallback timer is 60 s: only kernel events get here in time.
    await child.nextLine("acquired", 30_000);
    expect(await child.exited).toEqual({ code: 0, signal: null });
  },
  120_000,
);
