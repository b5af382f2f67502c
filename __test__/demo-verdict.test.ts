/**
 * The verdict of `exactlock demo`: a false violation tells a user the lock
 * is broken, a missed one hides a broken lock. It is drawn from what each
 * section found (the occupancy marker, the demo's kill records) and from
 * stamps of one clock, CLOCK_MONOTONIC read natively in every process (Bun's
 * process.hrtime counts from each process's own start: comparing those
 * reported a violation per kill).
 */
import { type ChildProcess, fork } from "node:child_process";
import { once } from "node:events";
import { writeFileSync } from "node:fs";
import * as path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { analyseSections, type Section } from "../lib/cli/demo.ts";
import type { WorkerMessage } from "../lib/cli/demo-protocol.ts";
import { makeTempDir, removeDir, ROOT } from "./cli-helpers.ts";

/** A section as a worker reports it; by default a hand-off from the section that wrote 0. */
function section(fields: Partial<Section>): Section {
  return {
    type: "section",
    pid: 200,
    acquiredUs: 1_000,
    releaseUs: 5_000,
    read: 0,
    readWriter: null,
    wrote: 1,
    markerOwner: null,
    markerOwnerKilled: false,
    markerIntact: true,
    ...fields,
  };
}

describe("the demo's verdict, from what the sections found", () => {
  it("counts a section whose marker changed under it as a violation", () => {
    expect(analyseSections([section({ markerIntact: false })], new Map()).violations).toBe(1);
  });

  it("counts a section that found the marker of a holder the demo never killed as a violation", () => {
    const found = section({ markerOwner: 100, markerOwnerKilled: false });
    expect(analyseSections([found], new Map()).violations).toBe(1);
  });

  it("counts a section that found the marker of a holder whose kill was not recorded yet as a violation", () => {
    // The demo killed pid 100 later: the kill stamp is known, but the section saw no record.
    const found = section({ markerOwner: 100, markerOwnerKilled: false });
    expect(analyseSections([found], new Map([[100, 900]])).violations).toBe(1);
  });

  it("counts a section that found a killed holder's marker as a reclaim when the kill came before its acquisition", () => {
    const found = section({ markerOwner: 100, markerOwnerKilled: true, acquiredUs: 9_000 });
    const verdict = analyseSections([found], new Map([[100, 7_000]]));
    expect(verdict.violations).toBe(0);
    expect(verdict.reclaimMs).toEqual([2]);
    expect(verdict.handoffMs).toEqual([]);
  });

  it("counts a killed holder's marker as a violation when the section had the lock before that kill", () => {
    // Both inside at once: the kill record was written while the overlap went on, and the
    // killed holder, which would have seen its marker change, reports nothing.
    const found = section({ markerOwner: 100, markerOwnerKilled: true, acquiredUs: 2_000 });
    expect(analyseSections([found], new Map([[100, 7_000]])).violations).toBe(1);
  });

  it("measures a hand-off from the previous section's release stamp", () => {
    const first = section({ pid: 100, acquiredUs: 1_000, releaseUs: 3_000, read: 0, wrote: 1 });
    const second = section({ pid: 200, acquiredUs: 4_500, releaseUs: 9_000, read: 1, readWriter: 100, wrote: 2 });
    const verdict = analyseSections([first, second], new Map());
    expect(verdict).toEqual({ handoffMs: [1.5], reclaimMs: [], violations: 0 });
  });
});

describe("the demo's workers, when their sections really overlap", () => {
  let dir: string;
  const workers: ChildProcess[] = [];
  beforeEach(() => {
    dir = makeTempDir("demo-verdict");
  });
  afterEach(async () => {
    for (const worker of workers.splice(0)) {
      if (worker.exitCode === null && worker.signalCode === null) {
        worker.kill("SIGKILL");
        await once(worker, "exit");
      }
    }
    removeDir(dir);
  });

  it("two workers each locking their own file, one occupancy marker: violations are found", async () => {
    // The lock cannot keep them apart (two locks), so nothing but the marker evidence stands
    // between their overlapping sections and a verdict of 0.
    const marker = path.join(dir, "occupied");
    const sections: Section[] = [];
    const errors: string[] = [];
    let stopping = false;
    // 100 sections reported, or a worker gone before that (its error is then in `errors`).
    const enough = new Promise<void>((resolve) => {
      for (const name of ["a.json", "b.json"]) {
        const file = path.join(dir, name);
        writeFileSync(file, JSON.stringify({ counter: 0, writtenBy: null }));
        const worker = fork(path.join(ROOT, "dist", "cli", "demo-worker.js"), [file, marker, "5", "10"], {
          stdio: ["ignore", "inherit", "inherit", "ipc"],
        });
        workers.push(worker);
        worker.on("message", (message: WorkerMessage) => {
          if (message.type === "section") sections.push(message);
          if (message.type === "error") errors.push(message.message);
          if (sections.length >= 100) resolve();
        });
        worker.once("exit", (code, signal) => {
          if (!stopping) errors.push(`pid ${worker.pid} exited (${signal ?? `status ${code}`})`);
          resolve();
        });
      }
    });
    await enough;
    expect(errors).toEqual([]);
    stopping = true;
    const exits = workers.map((worker) => once(worker, "exit"));
    for (const worker of workers) worker.send("stop");
    await Promise.all(exits);
    expect(errors).toEqual([]);
    const { violations } = analyseSections(sections, new Map());
    expect(violations).toBeGreaterThan(0);
    // Both kinds of evidence were seen: a marker changed under its holder, and a marker
    // found of a holder never killed.
    expect(sections.some((s) => !s.markerIntact)).toBe(true);
    expect(sections.some((s) => s.markerOwner !== null && !s.markerOwnerKilled)).toBe(true);
  }, 30_000);
});
