#!/usr/bin/env node
// Chaos run: P worker processes contend on one file with `withFileLock` while
// a killer SIGKILLs random holders and waiters and respawns them. At the end
// (every process exited) it checks the evidence and reports.
//
//   npm run chaos -- --seconds 60 --procs 6 [--kill-every-ms 100] [--json] [--keep]
//
// See chaos/README.md for what is measured and how each figure is defined.
import { spawn } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { fileURLToPath } from "node:url";
import { acquireLock } from "../dist/index.js";

const here = path.dirname(fileURLToPath(import.meta.url));

function parseArgs(argv) {
  const args = {
    seconds: 10,
    procs: 4,
    killEveryMs: 100,
    holderBias: 0.6,
    holdMinMs: 1,
    holdMaxMs: 4,
    drainMs: 30_000,
    json: false,
    keep: false,
    dir: undefined,
  };
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i];
    const value = () => {
      const v = argv[++i];
      if (v === undefined) usage(`${flag} needs a value`);
      return v;
    };
    const number = () => {
      const n = Number(value());
      if (!Number.isFinite(n) || n < 0) usage(`${flag} needs a non-negative number`);
      return n;
    };
    switch (flag) {
      case "--seconds": args.seconds = number(); break;
      case "--procs": args.procs = Math.max(2, Math.floor(number())); break;
      case "--kill-every-ms": args.killEveryMs = number(); break;
      case "--holder-bias": args.holderBias = number(); break;
      case "--hold-min-ms": args.holdMinMs = number(); break;
      case "--hold-max-ms": args.holdMaxMs = number(); break;
      case "--drain-ms": args.drainMs = number(); break;
      case "--dir": args.dir = value(); break;
      case "--json": args.json = true; break;
      case "--keep": args.keep = true; break;
      case "--help": usage(); break;
      default: usage(`unknown argument ${flag}`);
    }
  }
  return args;
}

function usage(problem) {
  if (problem) process.stderr.write(`chaos: ${problem}\n`);
  process.stderr.write(
    "usage: node chaos/run.mjs --seconds N --procs P [--kill-every-ms MS] [--holder-bias 0..1]\n" +
      "       [--hold-min-ms MS] [--hold-max-ms MS] [--drain-ms MS] [--dir DIR] [--json] [--keep]\n",
  );
  process.exit(2);
}

const args = parseArgs(process.argv.slice(2));
const root = args.dir
  ? (fs.mkdirSync(args.dir, { recursive: true }), fs.realpathSync(args.dir))
  : fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "exactlock-chaos-")));
// The lock's parent holds only what the lock and the sections touch; logs
// and state files live beside it so the debris listing sees only lock names.
const dataDir = path.join(root, "data");
const logDir = path.join(root, "logs");
const stateDir = path.join(root, "state");
for (const dir of [dataDir, logDir, stateDir]) fs.mkdirSync(dir, { recursive: true });
const file = path.join(dataDir, "counter");
const lockPath = `${file}.lock`;
const marker = path.join(dataDir, "section.marker");
const stopPath = path.join(root, "stop");
fs.writeFileSync(file, "0".repeat(20));

/** Worker options: half the slots use the defaults, half a short retryDelayMs. */
function optionsFor(slot) {
  return slot % 2 === 0 ? {} : { retries: 2000, retryDelayMs: 5 };
}

const slots = [];
const stats = {
  spawned: 0,
  kills: { holding: 0, releasing: 0, waiting: 0 },
  workerFailures: [],
  hung: 0,
};
let stopping = false;
let incarnation = 0;

function spawnWorker(slot) {
  const id = ++incarnation;
  const state = path.join(stateDir, String(slot.index));
  fs.writeFileSync(state, "S");
  const config = {
    slot: slot.index,
    file,
    counter: file,
    marker,
    log: path.join(logDir, `${slot.index}.${id}.log`),
    state,
    stop: stopPath,
    holdMinMs: args.holdMinMs,
    holdMaxMs: args.holdMaxMs,
    options: optionsFor(slot.index),
  };
  const child = spawn(process.execPath, [path.join(here, "worker.mjs"), JSON.stringify(config)], {
    stdio: ["ignore", "ignore", "pipe"],
  });
  stats.spawned++;
  let stderr = "";
  child.stderr.setEncoding("utf8");
  child.stderr.on("data", (chunk) => {
    if (stderr.length < 4000) stderr += chunk;
  });
  slot.child = child;
  slot.state = state;
  slot.killedByUs = false;
  slot.exited = new Promise((resolve) => {
    child.on("exit", (code, signal) => {
      slot.child = undefined;
      if (!(slot.killedByUs && signal === "SIGKILL") && code !== 0) {
        stats.workerFailures.push({ slot: slot.index, incarnation: id, code, signal, stderr: stderr.trim() });
      }
      if (!stopping) spawnWorker(slot);
      resolve();
    });
  });
}

function stateOf(slot) {
  try {
    return fs.readFileSync(slot.state, "latin1")[0];
  } catch {
    return "?";
  }
}

/** One killer tick: SIGKILL a holder (with probability holderBias, when one holds) or a waiter. */
function killOne() {
  const live = slots.filter((slot) => slot.child && !slot.killedByUs);
  const byState = { holding: [], waiting: [] };
  const states = new Map();
  for (const slot of live) {
    const state = stateOf(slot);
    states.set(slot, state);
    if (state === "H" || state === "R") byState.holding.push(slot);
    else if (state === "W") byState.waiting.push(slot);
  }
  const wantHolder = Math.random() < args.holderBias;
  const pool = wantHolder && byState.holding.length > 0 ? byState.holding : byState.waiting;
  if (pool.length === 0) return;
  const victim = pool[Math.floor(Math.random() * pool.length)];
  // Re-read right before the kill, so the label is as fresh as it can be.
  const state = stateOf(victim);
  victim.killedByUs = true;
  victim.child.kill("SIGKILL");
  stats.lastKillAt = Date.now();
  if (state === "H") stats.kills.holding++;
  else if (state === "R") stats.kills.releasing++;
  else if (state === "W") stats.kills.waiting++;
  else stats.kills.other = (stats.kills.other ?? 0) + 1;
}

function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Entries of `dir` that are lock debris: staging dirs, detached trees, quarantine names. */
function debrisIn(dir) {
  return fs
    .readdirSync(dir)
    .filter((name) => /\.pending\./.test(name) || /\.removing(\.|$)/.test(name) || /\.quarantine/.test(name));
}

/** Parses every log: counter values written, and the V/T/E/M lines. */
function readLogs() {
  const values = [];
  const violations = [];
  const errors = [];
  let timeouts = 0;
  let leftoverMarkers = 0;
  for (const name of fs.readdirSync(logDir)) {
    const text = fs.readFileSync(path.join(logDir, name), "utf8");
    for (const line of text.split("\n")) {
      if (line === "") continue;
      if (/^\d+$/.test(line)) values.push(Number(line));
      else if (line.startsWith("V ")) violations.push(`${name}: ${line}`);
      else if (line.startsWith("E ")) errors.push(`${name}: ${line}`);
      else if (line.startsWith("T ")) timeouts++;
      else if (line.startsWith("M ")) leftoverMarkers++;
      else if (line.startsWith("D ")) errors.push(`${name}: ${line}`);
      else errors.push(`${name}: unparsable log line ${JSON.stringify(line)}`);
    }
  }
  return { values, violations, errors, timeouts, leftoverMarkers };
}

async function main() {
  for (let index = 0; index < args.procs; index++) {
    const slot = { index };
    slots.push(slot);
    spawnWorker(slot);
  }
  const started = Date.now();
  const deadline = started + args.seconds * 1000;
  // Give the first workers a moment to load before the killer starts.
  await sleep(Math.min(500, args.seconds * 100));
  while (Date.now() < deadline) {
    killOne();
    await sleep(args.killEveryMs * (0.5 + Math.random()));
  }
  // Drain: no more kills; every worker finishes its section and exits.
  stopping = true;
  fs.writeFileSync(stopPath, "");
  const drained = Promise.all(slots.map((slot) => slot.exited));
  const timedOut = await Promise.race([drained.then(() => false), sleep(args.drainMs).then(() => true)]);
  if (timedOut) {
    for (const slot of slots) {
      if (slot.child) {
        stats.hung++;
        slot.killedByUs = true;
        slot.child.kill("SIGKILL");
      }
    }
    await drained;
  }
  const elapsedMs = Date.now() - started;
  // An empty staging or quarantine dir a killed process left is judged by
  // its name's pid only once it is UNWRITTEN_MIN_AGE (1 s) old: until then
  // it could be a live publisher's of another pid namespace. So the next
  // acquirers below run at least that long after the last kill, as any
  // acquirer coming later would.
  const sinceLastKill = Date.now() - (stats.lastKillAt ?? 0);
  if (sinceLastKill < 1_100) await sleep(1_100 - sinceLastKill);
  return analyse(elapsedMs);
}

async function analyse(elapsedMs) {
  const finalCounter = Number(fs.readFileSync(file, "latin1"));
  const logs = readLogs();
  const seen = new Map();
  for (const value of logs.values) seen.set(value, (seen.get(value) ?? 0) + 1);
  const duplicates = [...seen].filter(([, n]) => n > 1).map(([value, n]) => ({ value, times: n }));
  // A LOST UPDATE is a completed section (one that logged the value v it
  // wrote to the counter) whose increment vanished: either the final counter
  // is below v (a later writer went back), or another section also wrote v
  // (it read v - 1 after v was written, or together with us) — each extra
  // copy of a value counts once. With the lock correct both are impossible:
  // sections are serialized, each reads the previous write, so the values
  // written are exactly 1..finalCounter, each once.
  const lostUpdates =
    logs.values.filter((v) => v > finalCounter || v < 1).length +
    duplicates.reduce((sum, d) => sum + d.times - 1, 0);
  // Values 1..finalCounter that no log holds: a holder was killed between
  // its counter write and its log append. Only a kill inside a section can
  // cause one, so there can be no more than holding kills.
  const unlogged = finalCounter - [...seen.keys()].filter((v) => v >= 1 && v <= finalCounter).length;
  const holdingKills = stats.kills.holding + stats.kills.releasing;

  const beforeFinal = fs.readdirSync(dataDir).sort();
  // What the kills left, before anyone cleans up: a lock of a dead owner,
  // staging dirs of waiters killed while publishing, a quarantine dir
  // (`.removing.<pid>.<uuid>`) of a holder killed while releasing. Informational: the next acquirers are
  // responsible for it, and that is what is checked below.
  const leftByKills = debrisIn(dataDir);
  // The next acquirers, after every process has exited:
  // 1. one ordinary acquire (retries: 0 = one attempt, no waiting): a lock
  //    of a dead owner must be reclaimed by it at once, and, as the first
  //    acquisition of this lock in this process, it reaps the staging and
  //    quarantine dirs that killed waiters, publishers and releasers left;
  // 2. while it holds, one contended acquire (retries: 0; it must give up
  //    with ELOCKED), which must leave nothing behind;
  // 3. the release.
  // Whatever lock debris survives these is DEBRIS.
  let finalAcquire = "ok";
  let contendedAcquire = "not run";
  try {
    const release = await acquireLock(file, { retries: 0 });
    try {
      await acquireLock(file, { retries: 0 }).then(
        async (second) => {
          contendedAcquire = "entered while the lock was held";
          await second();
        },
        (error) => {
          contendedAcquire = error?.code === "ELOCKED" ? "ELOCKED" : `${error?.code}: ${error?.message}`;
        },
      );
    } finally {
      await release();
    }
  } catch (error) {
    finalAcquire = `${error?.code ?? "error"}: ${error?.message ?? error}`;
  }
  let markerLeft = false;
  if (fs.existsSync(marker)) {
    // The last holder killed inside its section left it (every process is
    // gone, so its owner is dead); not lock debris.
    markerLeft = true;
    fs.unlinkSync(marker);
  }
  const debris = debrisIn(dataDir);
  if (finalAcquire !== "ok" && fs.existsSync(lockPath)) debris.push(path.basename(lockPath));
  if (fs.existsSync(lockPath)) debris.push(`${path.basename(lockPath)} (still present after release)`);
  const afterFinal = fs.readdirSync(dataDir).sort();

  const report = {
    seconds: args.seconds,
    procs: args.procs,
    elapsedMs,
    sections: logs.values.length,
    sectionsPerSecond: Math.round((logs.values.length / elapsedMs) * 1000),
    finalCounter,
    spawned: stats.spawned,
    kills: {
      total: stats.kills.holding + stats.kills.releasing + stats.kills.waiting + (stats.kills.other ?? 0),
      holding: holdingKills,
      holdingInSection: stats.kills.holding,
      holdingInRelease: stats.kills.releasing,
      waiting: stats.kills.waiting,
      other: stats.kills.other ?? 0,
    },
    violations: logs.violations.length,
    violationSamples: logs.violations.slice(0, 10),
    duplicates: duplicates.length,
    duplicateSamples: duplicates.slice(0, 10),
    lostUpdates,
    unlogged,
    leftoverMarkersReplaced: logs.leftoverMarkers,
    timeouts: logs.timeouts,
    workerErrors: logs.errors.length + stats.workerFailures.length,
    workerErrorSamples: [...logs.errors, ...stats.workerFailures.map((f) => JSON.stringify(f))].slice(0, 10),
    hung: stats.hung,
    beforeFinalAcquire: beforeFinal,
    leftByKills,
    finalAcquire,
    contendedAcquire,
    markerLeftByKilledHolder: markerLeft,
    debris,
    afterFinal,
    dir: root,
  };
  const failures = [];
  if (report.sections === 0) failures.push("no section completed");
  if (report.violations > 0) failures.push("violations");
  if (report.duplicates > 0) failures.push("duplicate counter values");
  if (report.lostUpdates > 0) failures.push("lost updates");
  if (report.unlogged > holdingKills) failures.push("more unlogged increments than holders killed");
  if (report.debris.length > 0) failures.push("debris");
  if (report.finalAcquire !== "ok") failures.push("final acquire failed");
  if (report.contendedAcquire !== "ELOCKED") failures.push("contended final acquire did not give up with ELOCKED");
  if (report.workerErrors > 0) failures.push("worker errors");
  if (report.hung > 0) failures.push("workers hung");
  report.failures = failures;
  report.ok = failures.length === 0;
  if (!args.keep && report.ok) fs.rmSync(root, { recursive: true, force: true });
  return report;
}

function print(report) {
  if (args.json) {
    process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
    return;
  }
  const k = report.kills;
  const lines = [
    `chaos: ${report.procs} procs, ${(report.elapsedMs / 1000).toFixed(1)} s`,
    `  sections            ${report.sections} (${report.sectionsPerSecond}/s), final counter ${report.finalCounter}`,
    `  kills               ${k.total}: holding ${k.holding} (in section ${k.holdingInSection}, in release ${k.holdingInRelease}), waiting ${k.waiting}`,
    `  processes spawned   ${report.spawned}`,
    `  violations          ${report.violations}`,
    `  duplicate values    ${report.duplicates}`,
    `  lost updates        ${report.lostUpdates}`,
    `  unlogged increments ${report.unlogged} (holder killed between counter write and log; <= holding kills)`,
    `  leftover markers    ${report.leftoverMarkersReplaced} replaced (holders killed inside their section)`,
    `  acquire timeouts    ${report.timeouts}`,
    `  worker errors       ${report.workerErrors}`,
    `  left by kills       ${report.leftByKills.length === 0 ? "nothing" : report.leftByKills.join(", ")}`,
    `  final acquire       ${report.finalAcquire}; contended acquire while held: ${report.contendedAcquire}`,
    `  debris              ${report.debris.length === 0 ? "none" : report.debris.join(", ")}`,
    report.ok ? "  OK" : `  FAILED: ${report.failures.join(", ")} (evidence kept in ${report.dir})`,
  ];
  for (const sample of [...report.violationSamples, ...report.workerErrorSamples]) lines.push(`    ${sample}`);
  process.stdout.write(`${lines.join("\n")}\n`);
}

const report = await main();
print(report);
process.exit(report.ok ? 0 : 1);
