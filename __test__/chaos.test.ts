/**
 * A short chaos run (chaos/run.mjs) as part of the suite: 4 worker processes
 * contend on one file for 8 s while holders and waiters are SIGKILLed and
 * respawned. Needs the compiled facade (`npm run build`).
 */
import { spawn } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { PORTABLE } from "./helpers.ts";

// vitest provides __dirname (tests type-check as CommonJS, where import.meta is not allowed).
const repo = path.resolve(__dirname, "..");
const roots: string[] = [];
afterAll(() => {
  for (const root of roots) fs.rmSync(root, { recursive: true, force: true });
});

interface ChaosReport {
  ok: boolean;
  failures: string[];
  sections: number;
  finalCounter: number;
  kills: { total: number; holding: number; waiting: number };
  violations: number;
  violationSamples: string[];
  duplicates: number;
  lostUpdates: number;
  unlogged: number;
  workerErrors: number;
  workerErrorSamples: string[];
  hung: number;
  finalAcquire: string;
  debris: string[];
  afterFinal: string[];
}

function runChaos(argv: string[]): Promise<{ code: number | null; report: ChaosReport; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [path.join(repo, "chaos", "run.mjs"), ...argv], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
    child.on("error", reject);
    child.on("exit", (code) => {
      try {
        resolve({ code, report: JSON.parse(stdout) as ChaosReport, stderr });
      } catch (error) {
        reject(new Error(`chaos run printed no report (exit ${code}): ${stdout}\n${stderr}`, { cause: error }));
      }
    });
  });
}

describe("chaos: processes SIGKILLed while holding and while waiting", () => {
  it(
    "keeps exclusion, loses no update and leaves no debris over an 8 s run with 4 processes",
    async () => {
      const dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "exactlock-chaos-test-")));
      roots.push(dir);
      const { code, report } = await runChaos([
        "--seconds", "8", "--procs", "4", "--json", "--keep", "--dir", dir,
      ]);
      // The evidence first, so a failure shows what went wrong.
      expect(report.violationSamples).toEqual([]);
      expect(report.workerErrorSamples).toEqual([]);
      expect(report.violations).toBe(0);
      expect(report.duplicates).toBe(0);
      expect(report.lostUpdates).toBe(0);
      expect(report.hung).toBe(0);
      // The run must have been a real one: sections done, holders and
      // waiters actually killed. Forced portable, one thing may stop it early:
      // an empty lock directory left by a kill (see below) holds the lock for
      // 10 s, so from that kill on nobody holds and nobody is killed holding
      // (3 holding kills were seen in one CI run). Only then is a short run
      // accepted, and the branch below checks that it is exactly that
      // directory. Otherwise portable runs as many sections as native here
      // (268 to 597 in three 8 s runs alone), but kills fewer holders: its
      // waiters sleep on timers, so fewer processes are inside a section when
      // the killer looks (15 to 19 alone, 4 with the whole suite beside it).
      const stoppedByEmptyLockDir = PORTABLE && report.debris.length > 0;
      expect(report.sections).toBeGreaterThan(stoppedByEmptyLockDir ? 0 : 100);
      expect(report.kills.holding).toBeGreaterThan(stoppedByEmptyLockDir ? 0 : PORTABLE ? 1 : 5);
      expect(report.kills.waiting).toBeGreaterThan(5);
      // Every increment the counter shows is accounted for: logged by its
      // section, or lost with a holder killed between its write and its log.
      expect(report.finalCounter - report.sections).toBe(report.unlogged);
      expect(report.unlogged).toBeLessThanOrEqual(report.kills.holding);
      if (PORTABLE && report.debris.length > 0) {
        // Forced portable, there is no exclusive rename: a process SIGKILLed
        // between its mkdir claim and its rename (publishing), or between the
        // record's unlink and the rmdir (reclaiming in place), leaves an empty
        // lock directory. That is a holder until it is staleMs (10 s) old — the
        // original module's behaviour, safe, and longer than this run's final
        // check waits. Nothing else may be left, and it must be empty.
        expect(report.finalAcquire).toMatch(/empty lock directory without an owner record/);
        expect(report.debris).toEqual(["counter.lock", "counter.lock (still present after release)"]);
        expect(fs.readdirSync(path.join(dir, "data", "counter.lock"))).toEqual([]);
        expect(report.afterFinal).toEqual(["counter", "counter.lock"]);
        expect(report.failures.sort()).toEqual(
          ["contended final acquire did not give up with ELOCKED", "debris", "final acquire failed"],
        );
        return;
      }
      expect(report.debris).toEqual([]);
      expect(report.finalAcquire).toBe("ok");
      // Nothing of the lock is left: only the counter remains.
      expect(report.afterFinal).toEqual(["counter"]);
      expect(report.failures).toEqual([]);
      expect(report.ok).toBe(true);
      expect(code).toBe(0);
    },
    120_000,
  );
});
