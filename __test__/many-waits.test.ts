/**
 * Many locks waited for at once in one process. Each lock's first waiter
 * sleeps on a thread of its own; on the runtime's blocking pool (512
 * threads at most) 520 of them took every thread, and the process's other
 * blocking steps queued behind the waits: its releases made off the calling
 * thread among them, so waits failed ELOCKED with their locks released
 * (src/lock/head_threads.rs: the waits now have a pool of their own).
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { acquireLock, inspectLock } from "../lib/index.ts";
import { cleanup, makeRoot } from "./helpers.ts";

afterEach(cleanup);

const LOCKS = 520;
// Releases off the calling thread, as on network mounts.
const offThread = { inlineFastPath: false } as const;

describe(`${LOCKS} locks waited for at once in one process`, () => {
  // Before, the releases below queued behind the waits for a thread, and 195 of 520 waits ran out
  // of their 8 s budget with their locks released 1 s into it.
  it("each wait gets its lock when this process releases it; short calls run beside them", { timeout: 60_000 }, async () => {
    const root = makeRoot();
    const files = Array.from({ length: LOCKS }, (_, i) => path.join(root, `state-${i}.json`));
    const held = await Promise.all(files.map((file) => acquireLock(file, offThread)));
    const waits = files.map((file) =>
      acquireLock(file, { ...offThread, timeout: 8_000 }).then(
        (release) => release().then(() => "acquired"),
        (error: { code?: string }) => error.code ?? String(error),
      ),
    );
    // Every wait asleep (a thread each), then short calls beside them.
    await new Promise((resolve) => setTimeout(resolve, 1000));
    const inspection = await inspectLock(path.join(root, "free.json"));
    const free = await acquireLock(path.join(root, "free.json"), offThread);
    await free();
    expect(inspection.state).toBe("free");
    await Promise.all(held.map((release) => release()));
    const outcomes = await Promise.all(waits);
    const tally: Record<string, number> = {};
    for (const outcome of outcomes) tally[outcome] = (tally[outcome] ?? 0) + 1;
    expect(tally).toEqual({ acquired: LOCKS });
    // Nothing left behind: no lock, no staging.
    expect(fs.readdirSync(root)).toEqual([]);
  });
});
