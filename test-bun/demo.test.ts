/**
 * `exactlock demo` run by Bun, as `bunx exactlock demo` runs it: the demo and
 * its workers are Bun processes (`process.execPath`). Bun's `process.hrtime`
 * counts from its own process's start, so a verdict drawn by comparing
 * stamps of two processes reported one violation per kill that never
 * happened. Needs dist/ (npm test's pretest builds it).
 */
import { describe, expect, it } from "bun:test";
import { spawnSync } from "node:child_process";
import * as path from "node:path";

const CLI = path.resolve(__dirname, "..", "bin", "exactlock.js");

describe("exactlock demo under bun", () => {
  it("--seconds 3 --procs 3: holders killed and reclaimed, 0 violations, 0 lost updates, no lock left", () => {
    const run = spawnSync(process.execPath, [CLI, "demo", "--seconds", "3", "--procs", "3", "--json"], {
      encoding: "utf8",
      timeout: 60_000,
    });
    expect(run.stderr).toBe("");
    const summary = JSON.parse(run.stdout);
    // Kills are what the false violations came from: without one the test would prove nothing.
    expect(summary.kills).toBeGreaterThan(0);
    expect(summary).toMatchObject({ violations: 0, lostUpdates: 0, lockLeftBehind: false, workerErrors: [], ok: true });
    // Each kill is followed by a waiter's takeover, and the demo tells it from a hand-off.
    expect(summary.reclaims).toBeGreaterThan(0);
    expect(summary.handoff.n).toBeGreaterThan(0);
    expect(run.status).toBe(0);
  }, 60_000);
});
