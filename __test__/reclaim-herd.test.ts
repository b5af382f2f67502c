/**
 * Several waiters reclaim a SIGKILLed holder's lock at the same moment (all
 * are woken by the holder's death). Exactly one must win each hand-off: no
 * two holders at once, no holder whose lock is taken away (release fails
 * with owner_changed/missing), no waiter left waiting for a lock nobody
 * holds. `exactlock demo` found this; this is the focused reproduction.
 */
import { spawn } from "node:child_process";
import * as path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { makeTempDir, Proc, removeDir, ROOT, startHolder } from "./cli-helpers.ts";

const WAITER = path.join(ROOT, "__test__", "fixtures", "cli-herd-waiter.mjs");
const WAITERS = 6;
const ROUNDS = 8;

let dir: string;
beforeEach(() => {
  dir = makeTempDir("herd");
});
afterEach(() => removeDir(dir));

interface Report {
  pid: number;
  overlap: boolean;
  acquireError: string | null;
  releaseError: string | null;
}

async function round(index: number): Promise<Report[]> {
  const file = path.join(dir, `state-${index}.json`);
  const marker = path.join(dir, `occupied-${index}`);
  const holder = await startHolder(file);
  const waiters = Array.from(
    { length: WAITERS },
    () => new Proc(spawn(process.execPath, [WAITER, file, marker], { stdio: ["ignore", "pipe", "pipe"] })),
  );
  // Let every waiter start and block on the live holder, then kill it.
  await new Promise((resolve) => setTimeout(resolve, 1_000));
  holder.kill("SIGKILL");
  const timer = setTimeout(() => waiters.forEach((w) => w.kill("SIGKILL")), 45_000);
  const finished = await Promise.all(waiters.map((w) => w.exited));
  clearTimeout(timer);
  await holder.exited;
  return finished.map((f) => JSON.parse(f.stdout.trim() || '{"pid":0,"overlap":false,"acquireError":"killed: hung","releaseError":null}'));
}

describe("reclaim by a herd of waiters", () => {
  it(`${WAITERS} waiters reclaiming a SIGKILLed holder's lock: one holder at a time, every release succeeds (${ROUNDS} rounds)`, async () => {
    const problems: Array<Report & { round: number }> = [];
    for (let index = 0; index < ROUNDS; index += 1) {
      for (const report of await round(index)) {
        if (report.overlap || report.acquireError || report.releaseError) problems.push({ round: index, ...report });
      }
    }
    expect(problems).toEqual([]);
  }, 240_000);
});
