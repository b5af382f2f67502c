// Where a hand-off's time goes: `npm run bench:handoff [-- --handoffs N]`.
//
// This process holds the lock; a child waits for it (default options, its record staged and its
// thread asleep on the kernel's events) and is handed it when this process releases. Both load
// the native module with EXACTLOCK_TRACE=handoff, which stamps each step of the hand-off on
// CLOCK_MONOTONIC, in memory (src/sys/trace.rs); the JavaScript ends are stamped with
// process.hrtime.bigint(), the same clock. Per hand-off:
//
//   release() called           → the native release begins       (releaser: JavaScript to native)
//   the native release begins  → the name freed                  (releaser: its syscalls up to the detach)
//   the name freed             → the waiter woken                (the kernel's inotify wake-up of the waiting thread)
//   the waiter woken           → published                       (the waiter's attempt: its syscalls, the rename)
//   published                  → the promise resolved            (the in-process table, the result)
//   the promise resolved       → JavaScript runs on it           (the hop to the JavaScript thread)
//   JavaScript runs on it      → onAcquired runs                 (the facade: the release made, onAcquired called)
//
// Prints the p50 and p90 of each step and of the whole, then the same hand-off measured without
// tracing (a second child, the switch off) for comparison.
//
// With --crash, the holder is a child that is SIGKILLed instead (`npm run bench:handoff --
// --crash [--handoffs N]`, N crashes for each kind of waiter): from the kill to the waiter's last wake-up (the kernel's teardown of the holder),
// to its publication (the judgement, the exchange, the exact removal), and on to onAcquired, for
// a fresh waiter process per crash (as the bench's (d) runs it: its first acquisition, its
// JavaScript compiled on first use) and for one waiter that has acquired before. Timing is noisy on shared machines: read
// the p50s, and compare runs made on the same machine.
import { fork } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const dist = path.join(here, "..", "dist");
const argv = process.argv.slice(2);
const handoffsAt = argv.indexOf("--handoffs");
const HANDOFFS = handoffsAt >= 0 ? Number(argv[handoffsAt + 1]) : 50;
const CRASH = argv.includes("--crash");
const role = process.env.EXACTLOCK_HANDOFF_ROLE;

const { acquireLock } = await import(path.join(dist, "index.js"));
const { native } = await import(path.join(dist, "native.js"));
const now = () => process.hrtime.bigint();
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));


function child(file, traced, childRole = "waiter") {
  const env = { ...process.env, EXACTLOCK_HANDOFF_ROLE: childRole, EXACTLOCK_HANDOFF_FILE: file };
  if (traced) env.EXACTLOCK_TRACE = "handoff";
  else delete env.EXACTLOCK_TRACE;
  const proc = fork(fileURLToPath(import.meta.url), [], { env, stdio: ["ignore", "inherit", "inherit", "ipc"] });
  const queue = [];
  const takers = [];
  let exited;
  proc.on("message", (m) => (takers.length ? takers.shift().resolve(m) : queue.push(m)));
  // A child that dies fails the run instead of leaving it waiting for ever (a holder's kill is awaited as its exit).
  proc.on("exit", (code, signal) => {
    exited = new Error(`the ${childRole} child exited (${signal ?? `status ${code}`}) before answering`);
    for (const taker of takers.splice(0)) taker.reject(exited);
  });
  const next = () =>
    new Promise((resolve, reject) => {
      if (queue.length) resolve(queue.shift());
      else if (exited) reject(exited);
      else takers.push({ resolve, reject });
    });
  const exit = new Promise((resolve) => proc.once("exit", resolve));
  return { proc, next, exit };
}

/** The last stamp of `step` at or before `until` (or the last at all). */
function stampOf(trace, step, until = Infinity) {
  const found = trace.filter((s) => s.step === step && Number(BigInt(s.ns)) <= until).map((s) => BigInt(s.ns));
  if (found.length === 0) throw new Error(`no stamp "${step}" in ${JSON.stringify(trace)}`);
  return found[found.length - 1];
}

async function handoffs(file, traced) {
  const waiter = child(file, traced);
  await waiter.next();
  const rows = [];
  // Hand-offs whose waiting thread ran only after the releaser's release()
  // had resolved (the waiter queued on the releaser's CPU, behind it).
  let wokenAfterReleaser = 0;
  for (let i = 0; i < HANDOFFS; i++) {
    const release = await acquireLock(file);
    waiter.proc.send("go");
    await waiter.next();
    await sleep(30 + Math.random() * 40);
    native.takeTraceForTesting();
    const releasedAt = now();
    await release();
    const releaseResolved = now();
    const ours = native.takeTraceForTesting();
    const got = await waiter.next();
    const onAcquired = BigInt(got.onAcquiredAt);
    if (!traced) {
      rows.push({ total: onAcquired - releasedAt });
      continue;
    }
    const begins = stampOf(ours, "release: the native release begins");
    const freed = stampOf(ours, "release: the name freed");
    const published = stampOf(got.trace, "waiter: published");
    const woken = stampOf(got.trace, "waiter: woken", Number(published));
    const resolved = stampOf(got.trace, "waiter: the promise resolved from its thread");
    const taken = stampOf(got.trace, "waiter: the JavaScript thread takes the result");
    const continued = BigInt(got.continuedAt);
    if (woken > releaseResolved) wokenAfterReleaser++;
    rows.push({
      "release() called → the native release begins": begins - releasedAt,
      "the native release begins → the name freed": freed - begins,
      "the name freed → the waiter woken": woken - freed,
      "(beside it) the name freed → the releaser's release() resolved": releaseResolved - freed,
      "the waiter woken → published": published - woken,
      ...waiterSteps(got.trace, freed, published),
      "published → the promise resolved": resolved - published,
      "the promise resolved → the JavaScript thread takes it": taken - resolved,
      "the JavaScript thread takes it → JavaScript runs on it": continued - taken,
      "JavaScript runs on it → onAcquired runs": onAcquired - continued,
      total: onAcquired - releasedAt,
    });
  }
  await stopChild(waiter);
  return { rows, wokenAfterReleaser };
}

/**
 * SIGKILLs a holder child while a traced waiter waits, `HANDOFFS` times; a
 * fresh waiter process for each when `fresh`, else one for all.
 */
async function crashes(file, fresh) {
  const rows = [];
  // Crashes whose waiter did not sleep on its watch after the kill (no wake-up to measure from),
  // and crashes whose waiter woke after the kill, found the holder still there and slept again.
  let unmeasured = 0;
  let wokeEarly = 0;
  let waiter;
  // One waiter for every crash: its first crash (a cold one) is run and not counted.
  for (let i = fresh ? 0 : -1; i < HANDOFFS; i++) {
    const holder = child(file, false, "holder");
    await holder.next();
    if (fresh || !waiter) {
      if (waiter) await stopChild(waiter);
      waiter = child(file, true);
      await waiter.next();
    }
    waiter.proc.send("go");
    await waiter.next();
    await sleep(30 + Math.random() * 20);
    const killedAt = now();
    holder.proc.kill("SIGKILL");
    const got = await waiter.next();
    await holder.exit;
    if (i < 0) continue;
    const published = stampOf(got.trace, "waiter: published");
    const wakes = got.trace
      .filter((s) => s.step === "waiter: its sleep returns")
      .map((s) => BigInt(s.ns))
      .filter((ns) => ns >= killedAt && ns <= published);
    if (wakes.length === 0) {
      unmeasured++;
      continue;
    }
    if (wakes.length > 1) wokeEarly++;
    const woke = wakes[wakes.length - 1];
    const resolved = stampOf(got.trace, "waiter: the promise resolved from its thread");
    const taken = stampOf(got.trace, "waiter: the JavaScript thread takes the result");
    const continued = BigInt(got.continuedAt);
    const onAcquired = BigInt(got.onAcquiredAt);
    rows.push({
      "SIGKILL → the waiter's last wake-up": woke - killedAt,
      "the last wake-up → published": published - woke,
      "published → the promise resolved": resolved - published,
      "the promise resolved → the JavaScript thread takes it": taken - resolved,
      "the JavaScript thread takes it → JavaScript runs on it": continued - taken,
      "JavaScript runs on it → onAcquired runs": onAcquired - continued,
      "the last wake-up → onAcquired runs": onAcquired - woke,
      total: onAcquired - killedAt,
    });
  }
  await stopChild(waiter);
  return { rows, unmeasured, wokeEarly };
}

async function stopChild(child) {
  if (child.proc.connected) child.proc.send("exit");
  await child.exit;
}

/** The waiter's own steps from the name freed to its publication, in order. */
const WAITER_STEPS = [
  "waiter: its sleep returns",
  "waiter: woken",
  "waiter: its attempt begins",
  "waiter: the parent pinned",
  "waiter: its record made",
  "waiter: the staged record renewed",
  "waiter: renamed",
  "waiter: published",
];

/**
 * The rows above, cut finer, each from the one before: its sleep returns
 * (the kernel's wake-up), it is woken (its subscription read, the elders
 * looked at), its attempt begins, the parent is pinned again by path, its
 * record is made, the staged record renewed and checked, the rename, and
 * the lock recorded as held. A step the hand-off did not pass is left out.
 * Each step's last stamp is used: a waiter that lost a race and slept again
 * counts its earlier tries in the first row.
 */
function waiterSteps(trace, freed, published) {
  const rows = {};
  let before = ["the name freed", freed];
  for (const step of WAITER_STEPS) {
    const at = trace.filter((s) => s.step === step && BigInt(s.ns) <= published && BigInt(s.ns) >= before[1]).map((s) => BigInt(s.ns)).pop();
    if (at === undefined) continue;
    rows[`${SUB_ROW}${short(before[0])} → ${short(step)}`] = at - before[1];
    before = [step, at];
  }
  return rows;
}

/** The indent that marks a finer row. */
const SUB_ROW = "  ";
function short(step) {
  return step.replace("waiter: ", "");
}

/**
 * Every step any hand-off passed, in the hand-off's order: the rows every
 * traced hand-off has, with the waiter's finer steps under "the waiter woken
 * → published", ordered by where they end (then where they begin), however
 * late a hand-off first passed them.
 */
function stepOrder(rows) {
  const names = WAITER_STEPS.map(short);
  const main = Object.keys(rows[0]).filter((key) => !key.startsWith(SUB_ROW));
  const under = main.indexOf("the waiter woken → published");
  const rank = (key) => {
    if (!key.startsWith(SUB_ROW)) return [main.indexOf(key) + (main.indexOf(key) > under ? 1 : 0), 0, 0];
    const [from, to] = key.slice(SUB_ROW.length).split(" → ");
    return [under + 1, names.indexOf(to), names.indexOf(from)];
  };
  const keys = [...new Set(rows.flatMap((row) => Object.keys(row)))];
  return keys.sort((a, b) => {
    const [x, y] = [rank(a), rank(b)];
    return x[0] - y[0] || x[1] - y[1] || x[2] - y[2];
  });
}

/** Prints each step's p50 and p90 over the rows that have it; answers the width of its first column. */
function printSteps(rows, steps) {
  const width = Math.max(...steps.map((s) => s.length));
  console.log(`  ${"step".padEnd(width)}        p50        p90`);
  for (const step of steps) {
    const values = rows.map((row) => row[step]).filter((value) => value !== undefined);
    console.log(`  ${step.padEnd(width)}  ${us(quantile(values, 0.5))}  ${us(quantile(values, 0.9))}`);
  }
  return width;
}

function quantile(values, q) {
  const sorted = [...values].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
}
function us(ns) {
  return `${(Number(ns) / 1000).toFixed(0).padStart(6)} µs`;
}

async function main() {
  if (process.env.EXACTLOCK_TRACE !== "handoff") {
    // The switch is read once, when the native module loads: run again with it set.
    const again = fork(fileURLToPath(import.meta.url), argv, { env: { ...process.env, EXACTLOCK_TRACE: "handoff" }, stdio: "inherit" });
    again.on("exit", (code) => process.exit(code ?? 1));
    return;
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "exactlock-handoff-"));
  const file = path.join(dir, "state.json");
  try {
    if (CRASH) return await printCrashes(file);
    console.log(`exactlock hand-off breakdown: ${HANDOFFS} hand-offs, holder keeps the lock 30-70 ms after the waiter asked`);
    console.log(`  node ${process.version}, ${os.availableParallelism()} CPUs, loadavg ${os.loadavg().map((l) => l.toFixed(2)).join(" ")}, ${dir}`);
    const { rows: traced, wokenAfterReleaser } = await handoffs(file, true);
    const { rows: plain } = await handoffs(file, false);
    const width = printSteps(traced, stepOrder(traced));
    console.log(`  (the indented rows cut "the name freed → … published" finer, each from the one before)`);
    console.log(`  the waiter's thread ran only after the releaser's release() resolved: ${wokenAfterReleaser} of ${traced.length}`);
    const totals = plain.map((row) => row.total);
    console.log(`  ${"total, tracing off".padEnd(width)}  ${us(quantile(totals, 0.5))}  ${us(quantile(totals, 0.9))}`);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

async function printCrashes(file) {
  console.log(`exactlock crash recovery breakdown: ${HANDOFFS} SIGKILLed holders, the waiter waiting 30-50 ms first`);
  console.log(`  node ${process.version}, ${os.availableParallelism()} CPUs, loadavg ${os.loadavg().map((l) => l.toFixed(2)).join(" ")}, ${path.dirname(file)}`);
  console.log(`  (the first row includes the waiting thread's own wake-up: the bench's (d) floor is the kill → a pidfd readable in its parent)`);
  const kinds = [
    ["a fresh waiter process per crash (as the bench's (d))", true],
    ["one waiter process for every crash (after one crash not counted)", false],
  ];
  for (const [title, fresh] of kinds) {
    const { rows, unmeasured, wokeEarly } = await crashes(file, fresh);
    console.log(`  ${title}`);
    if (rows.length === 0) {
      console.log(`    no crash measured: the waiter never slept on its watch after the kill (${unmeasured} of ${HANDOFFS})`);
      continue;
    }
    printSteps(rows, Object.keys(rows[0]));
    console.log(`  the waiter woke after the kill, found the holder still there and slept again: ${wokeEarly} of ${rows.length}`);
    if (unmeasured > 0) console.log(`  not measured (no wake-up by its watch after the kill): ${unmeasured}`);
  }
}

// The role last: every declaration above is initialized by then.
if (role === "holder") {
  await acquireLock(process.env.EXACTLOCK_HANDOFF_FILE);
  process.send({ type: "held" });
  // Held until it is killed, or its parent goes.
  const keepAlive = setInterval(() => undefined, 1 << 30);
  process.on("disconnect", () => clearInterval(keepAlive));
} else if (role === "waiter") {
  const file = process.env.EXACTLOCK_HANDOFF_FILE;
  // When the native promise's first continuation runs on this thread: the
  // facade's await sees it one microtask later.
  let continuedAt = 0n;
  const acquireLockNative = native.acquireLockNative;
  native.acquireLockNative = (...args) =>
    acquireLockNative(...args).then((result) => {
      continuedAt = now();
      return result;
    });
  process.on("message", async (message) => {
    if (message === "exit") process.exit(0);
    native.takeTraceForTesting();
    let onAcquiredAt = 0n;
    const acquiring = acquireLock(file, { onAcquired: () => void (onAcquiredAt = now()) });
    process.send({ type: "waiting" });
    const release = await acquiring;
    const trace = native.takeTraceForTesting();
    await release();
    process.send({ type: "acquired", onAcquiredAt: String(onAcquiredAt), continuedAt: String(continuedAt), trace });
  });
  process.send({ type: "ready" });
} else {
  await main();
}
