/**
 * A loaded machine is not a stuck filesystem.
 *
 * The guard that answers for an attempt stuck in a syscall (a dead NFS or
 * sshfs server) once fired for an attempt whose thread was merely waiting
 * for a CPU: `retries: 0` on a held lock then rejected with ETIMEDOUT ("the
 * filesystem did not answer") instead of ELOCKED naming the holder. Here
 * four busy processes keep both cores of this machine loaded while 200
 * `retries: 0` acquisitions meet a lock held by another process: every one
 * must end ELOCKED, naming that holder, and say how many attempts it made
 * — as many as it really made (the attempt hook counts them).
 *
 * The harsher case reproduces the false timeout every few runs on the old
 * guard: the acquiring process is niced (19) and pinned to one core with four
 * busy processes, so its threads wait tens of milliseconds for a CPU.
 */
import { spawn, type ChildProcess } from "node:child_process";
import * as path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { acquireLock, FileLockAcquireError } from "../lib/index.ts";
import { FileLockTestHooks } from "../lib/testing.ts";
import { Child, cleanup, spawnHolder, tempRoot } from "./fixtures/children.ts";
import { fixture, REPO } from "./kernel-helpers.ts";
import { skipUnless } from "./premises.ts";

const busy: ChildProcess[] = [];
afterEach(async () => {
  for (const child of busy.splice(0)) child.kill("SIGKILL");
  FileLockTestHooks.afterParentMkdir = undefined;
  await cleanup();
});

describe("under load (4 busy processes on this machine's cores)", () => {
  it("200 retries: 0 attempts on a held lock all end ELOCKED, never a filesystem timeout, each with its real attempt count", async () => {
    const root = tempRoot("exactlock-loaded-");
    const file = path.join(root, "state.json");
    const holder = await spawnHolder(file);
    for (let i = 0; i < 4; i++) busy.push(spawn(process.execPath, ["-e", "for (;;) {}"], { stdio: "ignore" }));
    await new Promise((resolve) => setTimeout(resolve, 200));

    const codes = new Map<string, number>();
    const wrongCounts: string[] = [];
    for (let i = 0; i < 200; i++) {
      // Half with the shortest grace a guard gives (retryDelayMs below 50 ms).
      const retryDelayMs = i % 2 === 0 ? 100 : 1;
      let made = 0;
      // The hook runs once in every attempt: it counts them.
      FileLockTestHooks.afterParentMkdir = async () => {
        made++;
      };
      try {
        const release = await acquireLock(file, { retries: 0, retryDelayMs, inlineFastPath: false });
        await release();
        codes.set("acquired", (codes.get("acquired") ?? 0) + 1);
      } catch (error) {
        const code = (error as { code?: string }).code ?? String(error);
        codes.set(code, (codes.get(code) ?? 0) + 1);
        if (error instanceof FileLockAcquireError) {
          expect(error.holderInfo?.pid).toBe(holder.proc.pid);
          if (error.attempts !== made) wrongCounts.push(`${error.attempts} reported, ${made} made`);
        }
      }
    }
    expect(Object.fromEntries(codes)).toEqual({ ELOCKED: 200 });
    expect(wrongCounts).toEqual([]);
  }, 120_000);
});

describe("starved of CPU (nice 19, on one core beside 4 busy processes)", () => {
  for (const hook of ["", "hook"]) {
    it(`15 retries: 0 attempts (the shortest grace) on a held lock all end ELOCKED${hook ? ", each with its real attempt count (hook)" : ""}`, async (ctx) => {
      skipUnless(ctx, { linux: true, tools: ["taskset", "nice"] }); // taskset is util-linux's
      const root = tempRoot("exactlock-starved-");
      const file = path.join(root, "state.json");
      const holder = await spawnHolder(file);
      for (let i = 0; i < 4; i++) {
        busy.push(spawn("taskset", ["-c", "0", process.execPath, "-e", "for (;;) {}"], { stdio: "ignore" }));
      }
      const starved = new Child("taskset", [
        "-c",
        "0",
        "nice",
        "-n",
        "19",
        process.execPath,
        fixture("retries-zero.mjs"),
        path.join(REPO, "dist"),
        file,
        "15",
        "1",
        hook,
      ]);
      const report = JSON.parse(await starved.nextLine("{", 170_000));
      expect(report).toEqual({ codes: { ELOCKED: 15 }, wrongCounts: [], holders: [holder.proc.pid] });
    }, 180_000);
  }
});
