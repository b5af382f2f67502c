/**
 * `exactlock demo`: several processes contend on one file for a few
 * seconds; some holders are SIGKILLed mid-section and replaced. At the end:
 * sections, kills, hand-off latency (a section's end → the next one's start),
 * reclaim-after-kill latency, exclusive-occupancy violations, lost updates.
 */
import { fork, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { inspectLock } from "../index.js";
import { integerFlag, parseFlags, UsageError } from "./args.js";
import { formatLatency, printJson, quantile, table } from "./format.js";
import { killRecordPath, nowUs, type DemoState, type WorkerMessage } from "./demo-protocol.js";

export const DEMO_HELP = `Usage: exactlock demo [options]

Starts several processes that contend for the lock of one temporary file.
Each holder reads a counter, works 1-4 ms, writes counter + 1 and releases.
About once a second a holder is SIGKILLed in the middle of its section and a
new process takes its place. Shows live progress, then a summary:

  contended           seconds of contention, from the first section (less
                      than asked when every process failed)
  sections            critical sections completed and reported
  holders killed      SIGKILLs sent to processes inside their section
  hand-off latency    a section's end -> the next one's start (p50, p99): the
                      counter's write and rename, the release, the next
                      holder's wake-up, acquisition and read
  reclaim after kill  SIGKILL -> next holder's acquire stamp (p50, max)
  violations          a holder found the occupancy marker of a holder that was
                      not killed, or its own marker changed under it
  lost updates        two sections wrote the same counter value, or the
                      final counter is below the number of sections

Options:
  --seconds N            how long to contend, counted from the first section
                         (the processes' start-up is not counted; default 10)
  --procs N              contending processes (default 5)
  --json                 print the summary as JSON (no progress line)
  -h, --help             show this help

Exit status: 0 when there were no violations, no lost updates and no lock
was left behind; 1 otherwise; 2 for usage errors.
`;

interface DemoOptions {
  seconds: number;
  procs: number;
  json: boolean;
}

export interface DemoSummary {
  /** The seconds asked for (`--seconds`). */
  seconds: number;
  /** The seconds it contended: from the first section to its end (less than asked when every worker failed). */
  secondsRun: number;
  procs: number;
  sections: number;
  kills: number;
  reclaims: number;
  handoff: { n: number; p50Ms: number | null; p99Ms: number | null };
  reclaimAfterKill: { n: number; p50Ms: number | null; maxMs: number | null };
  violations: number;
  lostUpdates: number;
  finalCounter: number;
  lockLeftBehind: boolean;
  /** What was left, as `inspectLock` judges it; null when the lock was free. */
  leftBehindReason: string | null;
  workerErrors: string[];
  ok: boolean;
}

export type Section = Extract<WorkerMessage, { type: "section" }>;

function parseDemoArgs(argv: string[]): DemoOptions | "help" {
  const { flags, positionals } = parseFlags("demo", argv, {
    seconds: { type: "string" },
    procs: { type: "string" },
    json: { type: "boolean" },
  });
  if (flags.help) return "help";
  if (positionals.length > 0) throw new UsageError(`demo takes no arguments, got ${positionals[0]}`, "demo");
  return {
    seconds: integerFlag("demo", flags, "seconds", 10, { min: 1, max: 300 }),
    procs: integerFlag("demo", flags, "procs", 5, { min: 2, max: 64 }),
    json: flags.json === true,
  };
}

/** The running demo: its workers, what they reported, and whom it killed when. */
class Arena {
  readonly dir = realpathSync(mkdtempSync(path.join(tmpdir(), "exactlock-demo-")));
  readonly file = path.join(this.dir, "counter.json");
  readonly marker = path.join(this.dir, "occupied");
  readonly workers = new Set<ChildProcess>();
  readonly sections: Section[] = [];
  readonly killedAtUs = new Map<number, number>();
  readonly errors: string[] = [];
  /** A kill is asked for (set about once a second) and still allowed (before `killsUntil`). */
  killDue = false;
  killsUntil = 0;
  /** How long the contention ran, from the first section (ms); set when it ends. */
  contendedMs = 0;
  stopping = false;
  /** The workers whose runtime has started: asking for the lock, so one of them can reclaim a killed holder's. */
  private readonly startedWorkers = new WeakSet<ChildProcess>();
  /**
   * Settles when a worker first reports entering its section (the
   * contention has begun: `entered` is set) or an error is recorded first
   * (it will not begin as it should: the demo reports what it has).
   */
  readonly begun: Promise<void>;
  entered = false;
  private markBegun: () => void = () => undefined;
  /**
   * Settles when the last worker has exited on its own (each failed: it is
   * reported, and none is replaced): nothing is left to contend.
   */
  readonly deserted: Promise<void>;
  private markDeserted: () => void = () => undefined;

  constructor() {
    this.begun = new Promise((resolve) => (this.markBegun = resolve));
    this.deserted = new Promise((resolve) => (this.markDeserted = resolve));
    const initial: DemoState = { counter: 0, writtenBy: null };
    writeFileSync(this.file, JSON.stringify(initial));
  }

  spawnWorker(): void {
    const worker = fork(path.join(__dirname, "demo-worker.js"), [this.file, this.marker, "1", "4"], {
      stdio: ["ignore", "inherit", "inherit", "ipc"],
    });
    this.workers.add(worker);
    worker.on("message", (message: WorkerMessage) => this.onMessage(worker, message));
    worker.on("error", (error) => this.recordError(`worker: ${error.message}`));
    worker.once("exit", (code, signal) => {
      this.workers.delete(worker);
      if (this.stopping) return;
      // Replace the ones we killed; a worker that exits on its own has failed
      // (its error is reported), and replacing it could loop.
      if (worker.pid !== undefined && this.killedAtUs.has(worker.pid)) this.spawnWorker();
      else if (!this.errors.some((error) => error.startsWith(`pid ${worker.pid}:`))) {
        this.recordError(`pid ${worker.pid}: exited unexpectedly (${signal ?? `status ${code}`})`);
      }
      if (this.workers.size === 0) this.markDeserted();
    });
  }

  private onMessage(worker: ChildProcess, message: WorkerMessage): void {
    if (message.type === "ready") this.startedWorkers.add(worker);
    else if (message.type === "section") this.sections.push(message);
    else if (message.type === "error") this.recordError(`pid ${message.pid}: ${message.message}`);
    else if (message.type === "enter") {
      this.entered = true;
      this.markBegun();
      if (this.killDue && !this.stopping && Date.now() < this.killsUntil && this.anotherRunning(worker)) this.kill(worker);
    }
  }

  recordError(error: string): void {
    this.errors.push(error);
    this.markBegun();
  }

  /**
   * Whether a worker other than `worker`, not killed, has started: it is
   * asking for the lock, and will reclaim `worker`'s if `worker` is killed.
   * Replacements can take seconds to start (an emulator); killing the only
   * started worker would leave the lock to them, and to nobody if the demo
   * ends first. (Started, not entered: where waiters are woken by their
   * timer only, the portable build, a releaser can keep the lock for
   * seconds while the others ask.)
   */
  private anotherRunning(worker: ChildProcess): boolean {
    for (const other of this.workers) {
      const killed = other.pid !== undefined && this.killedAtUs.has(other.pid);
      if (other !== worker && !killed && this.startedWorkers.has(other)) return true;
    }
    return false;
  }

  /** SIGKILLs a worker that just reported entering its section, its kill recorded first. */
  private kill(worker: ChildProcess): void {
    this.killDue = false;
    if (worker.pid === undefined) return;
    this.killedAtUs.set(worker.pid, nowUs());
    writeFileSync(killRecordPath(this.marker, worker.pid), "");
    worker.kill("SIGKILL");
  }

  /** Asks every worker to stop and waits for them (SIGKILL after `graceMs`). */
  async stop(graceMs: number): Promise<void> {
    this.stopping = true;
    const exits = [...this.workers].map((worker) => {
      const exited = worker.exitCode !== null || worker.signalCode !== null;
      return exited ? Promise.resolve() : new Promise<void>((resolve) => worker.once("exit", () => resolve()));
    });
    // A worker killed an instant ago can still look connected; sending to it fails with EPIPE,
    // which is not a worker's error: the callback takes it instead of the 'error' event.
    for (const worker of this.workers) if (worker.connected) worker.send("stop", () => undefined);
    const timer = setTimeout(() => {
      for (const worker of this.workers) worker.kill("SIGKILL");
    }, graceMs);
    await Promise.all(exits);
    clearTimeout(timer);
  }

  finalState(): DemoState {
    return JSON.parse(readFileSync(this.file, "utf8")) as DemoState;
  }

  cleanup(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** Counts two sections writing the same value: each duplicate is a lost update. */
function duplicateWrites(sections: readonly Section[]): number {
  const seen = new Set<number>();
  let duplicates = 0;
  for (const section of sections) {
    if (seen.has(section.wrote)) duplicates += 1;
    seen.add(section.wrote);
  }
  return duplicates;
}

/**
 * Classifies each acquisition: a violation (its marker changed under it, or
 * it found the marker of a holder whose kill was not recorded yet: a holder
 * that could still run), after a killed holder (reclaim, latency from the
 * SIGKILL), or after a reported release (hand-off, latency from the release
 * stamp). The verdicts use no timestamp: the stamps come from several
 * processes, and a clock they do not share would fake or hide a violation.
 */
export function analyseSections(
  sections: readonly Section[],
  killedAtUs: ReadonlyMap<number, number>,
): { handoffMs: number[]; reclaimMs: number[]; violations: number } {
  const releaseOf = new Map(sections.map((s) => [s.wrote, s.releaseUs]));
  const handoffMs: number[] = [];
  const reclaimMs: number[] = [];
  let violations = 0;
  for (const section of sections) {
    if (!section.markerIntact) violations += 1;
    if (section.markerOwner !== null) {
      const killedAt = killedAtUs.get(section.markerOwner);
      // A killed owner's marker is a reclaim only if the kill came before this section had
      // the lock (both stamps are CLOCK_MONOTONIC, read natively: comparable across
      // processes); a kill record written while both were inside does not excuse the overlap.
      if (!section.markerOwnerKilled) violations += 1;
      else if (killedAt !== undefined && killedAt > section.acquiredUs) violations += 1;
      else if (killedAt !== undefined) reclaimMs.push((section.acquiredUs - killedAt) / 1000);
      continue;
    }
    const released = releaseOf.get(section.read);
    // No marker found: the previous holder dropped it. Killed between its drop and its
    // report, it left no release stamp; its lock was reclaimed if the kill came first.
    const killedAt = section.readWriter === null ? undefined : killedAtUs.get(section.readWriter);
    if (released !== undefined) handoffMs.push((section.acquiredUs - released) / 1000);
    else if (killedAt !== undefined && killedAt < section.acquiredUs) reclaimMs.push((section.acquiredUs - killedAt) / 1000);
  }
  return { handoffMs, reclaimMs, violations };
}

async function summarise(arena: Arena, options: DemoOptions): Promise<DemoSummary> {
  const { handoffMs, reclaimMs, violations } = analyseSections(arena.sections, arena.killedAtUs);
  const final = arena.finalState();
  const lostUpdates = Math.max(duplicateWrites(arena.sections), arena.sections.length - final.counter);
  const left = await inspectLock(arena.file);
  const lockLeftBehind = left.state !== "free";
  return {
    seconds: options.seconds,
    secondsRun: Math.round(arena.contendedMs / 100) / 10,
    procs: options.procs,
    sections: arena.sections.length,
    kills: arena.killedAtUs.size,
    reclaims: reclaimMs.length,
    handoff: { n: handoffMs.length, p50Ms: quantile(handoffMs, 0.5), p99Ms: quantile(handoffMs, 0.99) },
    reclaimAfterKill: { n: reclaimMs.length, p50Ms: quantile(reclaimMs, 0.5), maxMs: quantile(reclaimMs, 1) },
    violations,
    lostUpdates,
    finalCounter: final.counter,
    lockLeftBehind,
    leftBehindReason: lockLeftBehind ? left.reason : null,
    workerErrors: arena.errors,
    ok: violations === 0 && lostUpdates === 0 && !lockLeftBehind && arena.errors.length === 0,
  };
}

function progressLine(arena: Arena, elapsedMs: number, options: DemoOptions): string {
  const { violations } = analyseSections(arena.sections, arena.killedAtUs);
  return (
    `\r  ${(elapsedMs / 1000).toFixed(1)} s / ${options.seconds} s   ` +
    `sections ${arena.sections.length}   killed ${arena.killedAtUs.size}   violations ${violations}   `
  );
}

/** How long the workers have to start and take the lock the first time. */
const STARTUP_LIMIT_MS = 60_000;

/**
 * Waits for the first section, then runs the contention for `options.seconds`,
 * scheduling a kill about once a second. The clock starts at the first
 * section, not at the spawn: where starting a runtime takes seconds (an
 * emulator, a cold disk), counting it would leave no time to contend and kill.
 */
async function contend(arena: Arena, options: DemoOptions, showProgress: boolean): Promise<void> {
  let startupTimer: NodeJS.Timeout | undefined;
  await Promise.race([arena.begun, new Promise((resolve) => (startupTimer = setTimeout(resolve, STARTUP_LIMIT_MS)))]);
  clearTimeout(startupTimer);
  if (!arena.entered) {
    // A worker's error came first (it is reported), or nothing came at all.
    if (arena.errors.length === 0) {
      arena.recordError(`no worker entered its section within ${STARTUP_LIMIT_MS / 1000} s of its start`);
    }
    return;
  }
  const start = Date.now();
  // No kill in the last half second: a holder killed as the demo stops would leave its lock
  // for an acquirer that never comes (the demo stops replacing workers), not for the demo's
  // waiters to reclaim, and the final check would count it as left behind.
  arena.killsUntil = start + options.seconds * 1000 - 500;
  const killTimer = setInterval(() => (arena.killDue = Date.now() < arena.killsUntil), 1_000);
  const progressTimer = showProgress
    ? setInterval(() => process.stdout.write(progressLine(arena, Date.now() - start, options)), 200)
    : undefined;
  // Every worker failing ends it early: their errors are the result.
  let runTimer: NodeJS.Timeout | undefined;
  await Promise.race([arena.deserted, new Promise((resolve) => (runTimer = setTimeout(resolve, options.seconds * 1000)))]);
  clearTimeout(runTimer);
  arena.contendedMs = Date.now() - start;
  clearInterval(killTimer);
  arena.killDue = false;
  if (progressTimer) clearInterval(progressTimer);
  if (showProgress) process.stdout.write(`${progressLine(arena, Date.now() - start, options)}\n`);
}

function failures(summary: DemoSummary): string[] {
  const found: string[] = [];
  if (summary.violations > 0) found.push(`${summary.violations} violation(s)`);
  if (summary.lostUpdates > 0) found.push(`${summary.lostUpdates} lost update(s)`);
  if (summary.lockLeftBehind) found.push("a lock was left behind");
  if (summary.workerErrors.length > 0) found.push(`${summary.workerErrors.length} worker error(s)`);
  return found;
}

/** The human-readable summary. */
export function formatSummary(summary: DemoSummary): string {
  const rows: Array<[string, string]> = [
    ["contended", `${summary.secondsRun} s of ${summary.seconds} s asked   (from the first section)`],
    ["sections", `${summary.sections}   (read counter, work 1-4 ms, write counter + 1, under the lock)`],
    ["holders killed", `${summary.kills}   (SIGKILL inside the section, then replaced)`],
    ["reclaims", `${summary.reclaims}   (a waiter took over a killed holder's lock)`],
    [
      "hand-off latency",
      `p50 ${formatLatency(summary.handoff.p50Ms)}   p99 ${formatLatency(summary.handoff.p99Ms)}   (section end -> next start, n=${summary.handoff.n})`,
    ],
    [
      "reclaim after kill",
      `p50 ${formatLatency(summary.reclaimAfterKill.p50Ms)}   max ${formatLatency(summary.reclaimAfterKill.maxMs)}   (SIGKILL -> next acquire, n=${summary.reclaimAfterKill.n})`,
    ],
    ["violations", `${summary.violations}   (two live holders inside the section at once)`],
    ["lost updates", `${summary.lostUpdates}   (final counter ${summary.finalCounter}, sections reported ${summary.sections})`],
    ["lock left behind", summary.lockLeftBehind ? `YES (${summary.leftBehindReason})` : "no"],
  ];
  for (const error of summary.workerErrors) rows.push(["worker error", error]);
  const verdict = summary.ok ? "OK: mutual exclusion held throughout" : `FAILED: ${failures(summary).join(", ")}`;
  return `${table(rows)}\n${verdict}\n`;
}

/** Runs `demo`; resolves to the exit status. */
export async function demoCommand(argv: string[]): Promise<number> {
  const options = parseDemoArgs(argv);
  if (options === "help") {
    process.stdout.write(DEMO_HELP);
    return 0;
  }
  const arena = new Arena();
  try {
    if (!options.json) {
      process.stdout.write(
        `exactlock demo: ${options.procs} processes, ${options.seconds} s, one lock: ${arena.file}.lock\n`,
      );
    }
    for (let i = 0; i < options.procs; i += 1) arena.spawnWorker();
    await contend(arena, options, !options.json && process.stdout.isTTY === true);
    await arena.stop(10_000);
    const summary = await summarise(arena, options);
    if (options.json) printJson(summary);
    else process.stdout.write(formatSummary(summary));
    return summary.ok ? 0 : 1;
  } finally {
    await arena.stop(1_000);
    arena.cleanup();
  }
}
