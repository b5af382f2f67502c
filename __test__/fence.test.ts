/**
 * Fencing tokens (issue 43): `fence: true` gives each acquisition of a
 * path a `bigint` strictly greater than every earlier one's — across
 * processes, SIGKILLs, the lock directory's removal and a fresh process —
 * and never the same twice (src/lock/fence.rs: a head in `F.lock.fence/`
 * moved on by a no-replace rename, flushed before it is handed out).
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { acquireLock, acquireLockSync, inspectLock, withFileLock } from "../lib/index.ts";
import { runCli } from "./cli-helpers.ts";
import { cleanup, lockPathOf, makeRoot, sleep, startFixture } from "./helpers.ts";

afterEach(cleanup);

/** The tokens LOG holds, in the order they were written (a torn last line dropped). */
function tokensIn(log: string): bigint[] {
  return fs
    .readFileSync(log, "utf8")
    .split("\n")
    .filter((line) => /^\d+$/.test(line))
    .map((line) => BigInt(line));
}

function strictlyIncreasing(values: bigint[]): boolean {
  return values.every((value, at) => at === 0 || values[at - 1]! < value);
}

describe("fencing tokens", () => {
  it("only when asked: release.fence, lock.fence and the sync release's; inspectLock shows the last", async () => {
    const file = path.join(makeRoot(), "state.json");
    const plain = await acquireLock(file);
    expect(plain.fence).toBeUndefined();
    await plain();
    expect(fs.existsSync(`${lockPathOf(file)}.fence`)).toBe(false);
    const first = await acquireLock(file, { fence: true });
    expect(typeof first.fence).toBe("bigint");
    await first();
    const second = await withFileLock(file, (lock) => lock.fence, { fence: true });
    const third = acquireLockSync(file, { fence: true });
    expect(third.fence).toBeGreaterThan(second!);
    expect(second).toBeGreaterThan(first.fence!);
    third();
    expect((await inspectLock(file)).fence).toBe(third.fence);
    const status = await runCli(["status", "--json", file]);
    expect(JSON.parse(status.stdout)[0].fence).toBe(String(third.fence));
    expect((await runCli(["status", file])).stdout).toMatch(new RegExp(`\\n  fence +${third.fence} \\(the last token handed out\\)`));
    // The fence outlives every generation: nothing but F.lock.fence is left.
    expect(fs.readdirSync(path.dirname(file))).toEqual(["state.json.lock.fence"]);
  });

  it("a fence that cannot be had: the lock is released and the error says where (EFENCE)", async () => {
    const file = path.join(makeRoot(), "state.json");
    fs.writeFileSync(`${lockPathOf(file)}.fence`, "a file where the fence should be");
    await expect(acquireLock(file, { fence: true })).rejects.toMatchObject({ code: "EFENCE" });
    expect(fs.existsSync(lockPathOf(file))).toBe(false);
    await (await acquireLock(file))();
  });

  it(
    "10 000 fenced acquisitions by 4 processes with SIGKILLs: unique and strictly increasing in section order; still after the lock and every process are gone",
    async () => {
      const root = makeRoot();
      const file = path.join(root, "state.json");
      const log = path.join(root, "tokens.log");
      const target = 10_000;
      let killed = 0;
      const start = () => startFixture("fenced-worker.mjs", [file, log, "5000"]);
      const workers = Array.from({ length: 4 }, start);
      while (fs.existsSync(log) ? tokensIn(log).length < target : true) {
        await sleep(50 + Math.random() * 100);
        if (killed < 40) {
          const at = Math.floor(Math.random() * workers.length);
          workers[at]!.child.kill("SIGKILL");
          workers[at] = start();
          killed += 1;
        }
      }
      for (const worker of workers) worker.child.kill("SIGKILL");
      await Promise.all(workers.map((worker) => worker.exited));
      const tokens = tokensIn(log);
      expect(tokens.length).toBeGreaterThanOrEqual(target);
      expect(new Set(tokens).size).toBe(tokens.length);
      expect(strictlyIncreasing(tokens)).toBe(true);
      // Every process gone, the lock directory removed by hand: a fresh process's token is larger still.
      fs.rmSync(lockPathOf(file), { recursive: true, force: true });
      const fresh = startFixture("fenced-worker.mjs", [file, log, "1"]);
      expect(await fresh.nextLine()).toBe("done");
      const after = tokensIn(log);
      expect(after.at(-1)!).toBeGreaterThan(tokens.at(-1)!);
      expect(killed).toBe(40);
    },
    240_000,
  );
});
