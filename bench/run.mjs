// npm run bench [-- --quick] [-- --only a,b,...,g] [-- --procs N] [-- --json FILE] [-- --dir DIR]
//               [-- --fs tmpfs,xfs,btrfs,overlayfs,sshfs]   (as root: see bench/fs.mjs)
//
// exactlock against proper-lockfile 4.1.2 and lockfile 1.0.4 (and, for the
// uncontended cycle, a Rust loop of exactly the syscalls one exactlock cycle
// makes), in one run, on a temp dir under os.tmpdir() (or under DIR, to
// measure another filesystem; the header shows what `exactlock doctor`
// says of it). Prints medians, p99
// and ratios. Asserts only correctness: lost updates and errors make the run
// exit non-zero; timing is reported, never asserted.
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import { createRequire } from "node:module";
import os from "node:os";
import path from "node:path";
import {
  LF_POLL,
  LF_STALE,
  LIBRARIES,
  BASELINES,
  SPIN,
  PL_RETRIES,
  PL_STALE,
  adapter,
  fmtMs,
  monoNs,
  nsToMs,
  ratio,
  root,
  sleep,
  spawnWorker,
  summary,
  table,
  us,
} from "./lib.mjs";

// The crash floor waits on each holder's pidfd on a libuv pool thread; 5
// runs at a time (proper-lockfile, lockfile) must not queue behind the
// default 4 threads. Read when the pool first starts, which is later.
process.env.UV_THREADPOOL_SIZE ??= "16";

const argv = process.argv.slice(2);
if (argv.some((a) => a === "--fs" || a.startsWith("--fs="))) {
  // Per filesystem: this bench on the temp dir, then (a)-(d) on each named mount (bench/fs.mjs).
  const { benchFilesystems } = await import("./fs.mjs");
  process.exit(await benchFilesystems(argv));
}
const quick = argv.includes("--quick");
const onlyArg = argv.find((a) => a.startsWith("--only"));
const only = onlyArg
  ? new Set((onlyArg.includes("=") ? onlyArg.split("=")[1] : argv[argv.indexOf(onlyArg) + 1]).split(","))
  : null;
const jsonAt = argv.indexOf("--json");
const jsonFile = jsonAt >= 0 ? argv[jsonAt + 1] : null;
const dirAt = argv.indexOf("--dir");
const underDir = dirAt >= 0 ? argv[dirAt + 1] : os.tmpdir();
if (dirAt >= 0 && !(underDir && fs.existsSync(underDir) && fs.statSync(underDir).isDirectory())) {
  console.error(`bench: --dir wants an existing directory, got ${JSON.stringify(underDir)}`);
  process.exit(2);
}

const CONFIG = quick
  ? { cycles: 600, warmup: 100, rounds: 3, procs: 4, sections: 50, handoffs: 15, crashes: 5, idleWaiters: 100, idleWindowMs: 2000 }
  : { cycles: 3000, warmup: 300, rounds: 10, procs: 4, sections: 200, handoffs: 50, crashes: 20, idleWaiters: 100, idleWindowMs: 5000 };

// `--procs N`: processes of the contended counter (default 4); the total
// number of sections stays the same.
const procsAt = argv.indexOf("--procs");
if (procsAt >= 0) {
  const procs = Number(argv[procsAt + 1]);
  if (!Number.isInteger(procs) || procs < 2) {
    console.error("bench: --procs wants an integer >= 2");
    process.exit(2);
  }
  CONFIG.sections = Math.round((CONFIG.sections * CONFIG.procs) / procs);
  CONFIG.procs = procs;
}

const results = { config: CONFIG, quick, scenarios: {} };
const failures = [];
const log = (...a) => console.log(...a);

function sh(cmd, args) {
  try {
    return execFileSync(cmd, args, { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim();
  } catch {
    return null;
  }
}

// ---------- setup ----------

if (!fs.existsSync(path.join(root, "dist", "index.js")) || !fs.existsSync(path.join(root, "native", "index.js"))) {
  console.error("bench: build first (npm run build)");
  process.exit(2);
}
const base = fs.realpathSync(fs.mkdtempSync(path.join(underDir, "exactlock-bench-")));
const { probeFilesystem } = await import(path.join(root, "dist", "index.js"));
const probed = await probeFilesystem(base);
const doctorLine = probed.ok
  ? `${probed.fsType} (${probed.class}) noreplace=${probed.renameNoreplace.result} exchange=${probed.renameExchange.result} ` +
    `flock=${probed.flock.result} inotify=${probed.inotify.result}`
  : `cannot probe: ${probed.message}`;
// The first line: a path under two stacked mounts (/dev/shm often) lists both.
const fsType = sh("findmnt", ["-n", "-o", "FSTYPE", "-T", base])?.split("\n")[0] ?? "unknown";
const statType = sh("stat", ["-f", "-c", "%T", base]) ?? "unknown";
const cpuModel = (fs.readFileSync("/proc/cpuinfo", "utf8").match(/model name\s*:\s*(.*)/) ?? [])[1] ?? os.cpus()[0]?.model;
const bunBin = path.join(root, "node_modules", ".bin", "bun");
const machine = {
  date: new Date().toISOString(),
  command: `npm run bench${argv.length ? ` -- ${argv.join(" ")}` : ""}`,
  nproc: sh("nproc", []) ?? String(os.cpus().length),
  cpu: cpuModel,
  kernel: `${os.type()} ${os.release()}`,
  node: process.version,
  bun: sh(bunBin, ["--version"]) ?? "not found",
  tmpdir: base,
  filesystem: `${fsType} (stat -f: ${statType})`,
  doctor: doctorLine,
  loadavg: os.loadavg().map((l) => l.toFixed(2)).join(" "),
};
results.machine = machine;
log(`exactlock benchmark${quick ? " (--quick)" : ""}`);
for (const [k, v] of Object.entries(machine)) log(`  ${k.padEnd(10)} ${v}`);
if (fsType !== "ext4") log(`  NOTE: the temp dir is on ${fsType}, not ext4; figures are not comparable with the ext4 anchors.`);
const pkgVersion = (name) => JSON.parse(fs.readFileSync(path.join(root, "node_modules", name, "package.json"), "utf8")).version;
log(`  versions   exactlock ${pkgVersion("../")}, proper-lockfile ${pkgVersion("proper-lockfile")}, lockfile ${pkgVersion("lockfile")}`);
log("");

let dirSeq = 0;
const freshDir = (tag) => {
  const dir = path.join(base, `${tag}-${++dirSeq}`);
  fs.mkdirSync(dir);
  return dir;
};

const libs = {};
for (const name of BASELINES) libs[name] = await adapter(name);
const { waitPidExitNs } = await import(path.join(root, "dist", "testing.js"));

const wants = (id) => !only || only.has(id);

// ---------- (f) the floor binary ----------

function buildFloor() {
  const manifest = path.join(root, "bench", "floor", "Cargo.toml");
  const targetDir = path.join(root, "target", "bench-floor");
  try {
    execFileSync("cargo", ["build", "--release", "--quiet", "--manifest-path", manifest, "--target-dir", targetDir], {
      stdio: ["ignore", "ignore", "inherit"],
    });
    return path.join(targetDir, "release", "exactlock-floor");
  } catch (error) {
    log(`  floor: cargo build failed (${error.message.split("\n")[0]}); floor rows skipped`);
    return null;
  }
}

function runFloor(bin, plan, iterations, warmup) {
  const dir = freshDir(`floor-${plan}`);
  const out = execFileSync(bin, [dir, String(iterations), String(warmup), plan, "samples"], { encoding: "utf8" });
  const parsed = JSON.parse(out);
  return { samples: parsed.samples.map((s) => s / 1000), syscalls: parsed.syscalls, refused: parsed.noreplace_refused };
}

// ---------- (a) uncontended cycles (+ f) ----------

async function uncontended() {
  const { cycles, warmup, rounds } = CONFIG;
  const per = Math.ceil(cycles / rounds);
  log(`(a) uncontended acquire+release, ${per * rounds} cycles each after ${warmup} warm-up, interleaved in ${rounds} rounds`);
  log(`    exactlock: withFileLock(file, async () => {}) with default options; proper-lockfile: lock()+release()`);
  log(`    (defaults, realpath on, file exists); lockfile: lock()+unlock() (defaults); ${SPIN}: fs.promises mkdir+rmdir;`);
  log(`    floor: bench/floor (Rust)`);
  const floorBin = buildFloor();
  const dir = freshDir("uncontended");
  const files = {};
  for (const name of BASELINES) {
    files[name] = path.join(dir, `${name}.json`);
    fs.writeFileSync(files[name], "{}");
  }
  const cycle = {
    exactlock: (f) => libs.exactlock.withLock(f, async () => {}),
    "proper-lockfile": async (f) => (await libs["proper-lockfile"].acquire(f, "uncontended"))(),
    lockfile: async (f) => (await libs.lockfile.acquire(f, "uncontended"))(),
    [SPIN]: (f) => libs[SPIN].withLock(f, async () => {}),
  };
  const samples = Object.fromEntries(BASELINES.map((n) => [n, []]));
  const floor = { current: [], v0: [], format: [] };
  let syscalls = {};
  let claimed = "";
  for (const name of BASELINES) for (let i = 0; i < warmup; i++) await cycle[name](files[name]);
  for (let r = 0; r < rounds; r++) {
    for (const name of BASELINES) {
      const f = files[name];
      const run = cycle[name];
      for (let i = 0; i < per; i++) {
        const s = monoNs();
        await run(f);
        samples[name].push(nsToMs(monoNs() - s));
      }
    }
    if (floorBin) {
      for (const plan of Object.keys(floor)) {
        const got = runFloor(floorBin, plan, per, Math.min(50, warmup));
        floor[plan].push(...got.samples);
        syscalls[plan] = got.syscalls;
        if (got.refused) claimed = ", RENAME_NOREPLACE refused: mkdirat claim";
      }
    }
  }
  const stats = Object.fromEntries(BASELINES.map((n) => [n, summary(samples[n])]));
  const floorStats = floorBin ? Object.fromEntries(Object.keys(floor).map((p) => [p, summary(floor[p])])) : {};
  const ex = stats.exactlock;
  const rows = [];
  if (floorBin) {
    rows.push([`floor: exactlock's ${syscalls.current} syscalls${claimed}`, us(floorStats.current.median), us(floorStats.current.p99), ratio(ex.median, floorStats.current.median)]);
  }
  for (const name of BASELINES) rows.push([name, us(stats[name].median), us(stats[name].p99), ratio(ex.median, stats[name].median)]);
  if (floorBin) {
    rows.push([`ref: format minimum (${syscalls.format} syscalls)`, us(floorStats.format.median), us(floorStats.format.p99), ratio(ex.median, floorStats.format.median)]);
    rows.push([`ref: floor of the v0 list (${syscalls.v0} syscalls)`, us(floorStats.v0.median), us(floorStats.v0.p99), ratio(ex.median, floorStats.v0.median)]);
  }
  log(table(rows, ["", "median", "p99", "exactlock ÷ row (median)"]));
  const pl = stats["proper-lockfile"];
  const lf = stats.lockfile;
  log(`    exactlock/floor ${ratio(ex.median, floorStats.current?.median)}; proper-lockfile is ${ratio(pl.median, ex.median)} exactlock's median, lockfile ${ratio(lf.median, ex.median)}, ${SPIN} ${ratio(stats[SPIN].median, ex.median)}`);
  log("");
  results.scenarios.uncontended = { stats, floor: floorStats, floorSyscalls: syscalls };
}

// ---------- (b) contended counter ----------

/** Section time, hand-over gap and how often the releaser ran the next
 * section itself, from the workers' per-section stamps. */
function sectionFlow(done) {
  const sections = done
    .flatMap((d, worker) => (d.stamps ?? []).map(([held, sectionDone]) => ({ worker, held: BigInt(held), sectionDone: BigInt(sectionDone) })))
    .sort((a, b) => (a.held < b.held ? -1 : a.held > b.held ? 1 : 0));
  const section = [];
  const gap = [];
  let same = 0;
  for (let i = 0; i < sections.length; i++) {
    section.push(nsToMs(sections[i].sectionDone - sections[i].held));
    if (i === 0) continue;
    gap.push(nsToMs(sections[i].held - sections[i - 1].sectionDone));
    if (sections[i].worker === sections[i - 1].worker) same++;
  }
  return {
    sectionMs: summary(section).median,
    gapMs: summary(gap).median,
    sameProcessPct: gap.length ? (100 * same) / gap.length : 0,
  };
}

/** CPU time of the counter's processes per section done, and the main threads' share of it. */
function cpuPerSection(done, completed) {
  const total = done.reduce((sum, d) => sum + (d.cpuUs ?? 0), 0);
  const main = done.every((d) => typeof d.mainThreadUs === "number") ? done.reduce((sum, d) => sum + d.mainThreadUs, 0) : null;
  return {
    perSectionUs: completed > 0 ? total / completed : null,
    mainThreadPct: main === null || total === 0 ? null : (main / total) * 100,
  };
}

/** Per process of the contended counter: sections done in all, sections
 * done by the time the first process had finished all of its own (while
 * every process was still asking), and the wait from asking for the lock
 * to holding it. */
function fairness(done) {
  const perWorker = done.map((d) =>
    (d.stamps ?? []).map(([held, , released, asked]) => ({ held: BigInt(held), released: BigInt(released), asked: BigInt(asked) })),
  );
  const finishes = perWorker.filter((s) => s.length > 0).map((s) => s[s.length - 1].released);
  const firstFinish = finishes.reduce((a, b) => (b < a ? b : a), finishes[0] ?? 0n);
  return perWorker.map((s) => {
    const waits = summary(s.map((x) => nsToMs(x.held - x.asked)));
    return {
      sections: s.length,
      byFirstFinish: s.filter((x) => x.released <= firstFinish).length,
      waitP50Ms: waits.median,
      waitP99Ms: waits.p99,
      waitMaxMs: waits.max,
    };
  });
}

async function contended() {
  const { procs, sections } = CONFIG;
  log(`(b) contended counter: ${procs} processes × ${sections} sections (read the counter file, write it +1, under the lock)`);
  log(`    exactlock defaults; proper-lockfile retries ${JSON.stringify(PL_RETRIES)}; lockfile wait 60 s, pollPeriod ${LF_POLL}`);
  const rows = [];
  const out = {};
  for (const name of BASELINES) {
    const dir = freshDir(`counter-${name}`);
    const file = path.join(dir, "counter");
    fs.writeFileSync(file, "0");
    const workers = Array.from({ length: procs }, () => spawnWorker(["counter", name, file, String(sections)], { timeoutMs: 600_000 }));
    await Promise.all(workers.map((w) => w.next("ready")));
    const start = monoNs();
    for (const w of workers) w.send({ type: "go" });
    const done = await Promise.all(workers.map((w) => w.next("done")));
    const wallMs = nsToMs(monoNs() - start);
    await Promise.all(workers.map((w) => w.exit));
    const expected = procs * sections;
    const final = Number(fs.readFileSync(file, "utf8"));
    const errors = done.reduce((n, d) => n + d.errors, 0);
    const completed = expected - errors;
    const lost = completed - final;
    const perSecond = (completed / wallMs) * 1000;
    const flow = sectionFlow(done);
    const fair = fairness(done);
    const cpu = cpuPerSection(done, completed);
    out[name] = { expected, final, errors, lost, wallMs, perSecond, flow, cpu, fairness: fair, firstError: done.find((d) => d.firstError)?.firstError };
    rows.push([
      name,
      String(final),
      String(lost),
      String(errors),
      fmtMs(wallMs),
      perSecond.toFixed(0),
      fmtMs(flow.sectionMs),
      fmtMs(flow.gapMs),
      `${flow.sameProcessPct.toFixed(0)} %`,
      cpu.perSectionUs === null ? "n/a" : fmtMs(cpu.perSectionUs / 1000),
      cpu.mainThreadPct === null ? "-" : `${cpu.mainThreadPct.toFixed(0)} %`,
    ]);
    if (lost !== 0) failures.push(`(b) ${name}: ${lost} lost updates (counter ${final}, ${completed} sections completed)`);
    if (errors !== 0) failures.push(`(b) ${name}: ${errors} sections failed to get the lock (${JSON.stringify(out[name].firstError)})`);
  }
  log(table(rows, ["", "counter", "lost", "errors", "wall", "sections/s", "section p50", "gap p50", "same process", "cpu/section", "main thread"]));
  log(`    section: read+write of the counter under the lock; gap: from the end of one section to the start of`);
  log(`    the next (release, hand-over, acquisition); same process: the next section ran in the process that just released;`);
  log(`    cpu/section: the CPU time of all ${procs} processes (every thread) over the sections done, the section's own I/O`);
  log(`    included; main thread: its share of it (the rest: libuv's pool, V8's threads, the lock's own threads).`);
  log(`    With ${os.availableParallelism()} CPUs for ${procs} processes, sections/s cannot exceed ${os.availableParallelism()} s of CPU ÷ cpu/section.`);
  const ex = out.exactlock.perSecond;
  log(`    exactlock sections/s vs proper-lockfile ${ratio(ex, out["proper-lockfile"].perSecond)}, vs lockfile ${ratio(ex, out.lockfile.perSecond)}, vs ${SPIN} ${ratio(ex, out[SPIN].perSecond)}`);
  log(`    fairness, per process: sections done in all and by the time the first process had done all ${sections} of its own`);
  log(`    (while every process was still asking), and the wait from asking for the lock to holding it:`);
  const fairRows = [];
  for (const name of BASELINES) {
    out[name].fairness.forEach((f, i) => {
      fairRows.push([
        i === 0 ? name : "",
        `#${i + 1}`,
        String(f.sections),
        String(f.byFirstFinish),
        fmtMs(f.waitP50Ms),
        fmtMs(f.waitP99Ms),
        fmtMs(f.waitMaxMs),
      ]);
    });
  }
  log(table(fairRows, ["", "process", "sections", "by first finish", "wait p50", "wait p99", "wait max"]));
  log("");
  results.scenarios.contended = out;
}

// ---------- (c) hand-off latency ----------

async function handoff() {
  const { handoffs } = CONFIG;
  log(`(c) hand-off across processes: this process holds, releases at a CLOCK_MONOTONIC stamp; a waiting child`);
  log(`    stamps its acquisition (exactlock: in onAcquired, DEFAULT options, retryDelayMs 100). ${handoffs} hand-offs,`);
  log(`    holder keeps the lock 30-70 ms after the waiter started waiting.`);
  const rows = [];
  const out = {};
  for (const name of BASELINES) {
    const lib = libs[name];
    const dir = freshDir(`handoff-${name}`);
    const file = path.join(dir, "state.json");
    fs.writeFileSync(file, "{}");
    const waiter = spawnWorker(["waiter", name, file, "handoff"]);
    await waiter.next("ready");
    const latencies = [];
    const afterRelease = [];
    let errors = 0;
    for (let i = 0; i < handoffs; i++) {
      const release = await lib.acquire(file, "handoff");
      waiter.send({ type: "go" });
      await waiter.next("waiting");
      await sleep(30 + Math.random() * 40);
      const releasedAt = monoNs();
      await release();
      const releaseDone = monoNs();
      const acquired = await waiter.next("acquired");
      await waiter.next("released");
      if (acquired.error) {
        errors++;
        failures.push(`(c) ${name}: waiter failed: ${JSON.stringify(acquired.error)}`);
        continue;
      }
      latencies.push(nsToMs(BigInt(acquired.t) - releasedAt));
      afterRelease.push(nsToMs(BigInt(acquired.t) - releaseDone));
    }
    waiter.send({ type: "exit" });
    await waiter.exit;
    const s = summary(latencies);
    const r = summary(afterRelease);
    out[name] = { ...s, sinceReleaseResolved: r, errors };
    rows.push([name, fmtMs(s.median), fmtMs(s.p99), fmtMs(s.max), fmtMs(r.median), String(errors)]);
  }
  log(table(rows, ["", "p50", "p99", "max", "p50 from release resolved", "errors"]));
  const ex = out.exactlock.median;
  log(`    exactlock p50 vs proper-lockfile ${ratio(ex, out["proper-lockfile"].median)}, vs lockfile ${ratio(ex, out.lockfile.median)}, vs ${SPIN} ${ratio(ex, out[SPIN].median)}`);
  const floorBin = buildFloor();
  let wake;
  try {
    wake = floorBin && JSON.parse(execFileSync(floorBin, [freshDir("floor-wake"), "60", "5", "wake"], { encoding: "utf8" }));
  } catch (error) {
    log(`    the kernel's part: bench/floor wake failed here (${String(error.message).split("\n")[0]})`);
  }
  if (wake) {
    out.kernelFloor = wake;
    log(`    the kernel's part (bench/floor wake, threads of one process, each asleep 50 ms first): a rename to the inotify waiter woken`);
    log(`    ${wake.rename_to_waiter_us.toFixed(0)} µs, that thread to another sleeping in poll ${wake.waiter_to_thread_us.toFixed(0)} µs (p50); where exactlock's goes: npm run bench:handoff`);
  }
  log("");
  results.scenarios.handoff = out;
}

// ---------- (d) crash recovery ----------

async function crashRun(name, file) {
  const holder = spawnWorker(["hold", name, file, "crash"]);
  await holder.next("held");
  const waiter = spawnWorker(["waiter", name, file, "crash"], { timeoutMs: 60_000 });
  await waiter.next("ready");
  waiter.send({ type: "go" });
  await waiter.next("waiting");
  await sleep(30 + Math.random() * 20);
  // The floor: a pidfd on this same holder, opened now and polled off the
  // JS thread; it turns readable once the kernel has torn the process down.
  const exited = waitPidExitNs(holder.child.pid);
  const killedAt = monoNs();
  await holder.kill("SIGKILL");
  const [acquired, exitedAt] = [await waiter.next("acquired"), await exited];
  await waiter.next("released");
  waiter.send({ type: "exit" });
  await waiter.exit;
  if (acquired.error) return { error: acquired.error };
  return {
    latency: nsToMs(BigInt(acquired.t) - killedAt),
    floor: exitedAt === null ? null : nsToMs(exitedAt - killedAt),
  };
}

async function crash() {
  const { crashes } = CONFIG;
  log(`(d) crash recovery: SIGKILL the holder while a child waits; latency from the kill to the waiter's acquisition, ${crashes} runs`);
  log(`    exactlock DEFAULT options; proper-lockfile stale ${PL_STALE} ms (its floor) + retries ${JSON.stringify(PL_RETRIES)};`);
  log(`    lockfile stale ${LF_STALE} ms, wait 60 s, pollPeriod ${LF_POLL}. proper-lockfile and lockfile runs go 5 at a time`);
  log(`    (separate lock files; their latency is their stale timeout).`);
  const rows = [];
  const out = {};
  for (const name of LIBRARIES) {
    const latencies = [];
    const floors = [];
    const overFloor = [];
    let errors = 0;
    const batch = name === "exactlock" ? 1 : 5;
    for (let i = 0; i < crashes; i += batch) {
      const runs = [];
      for (let j = i; j < Math.min(crashes, i + batch); j++) {
        const dir = freshDir(`crash-${name}`);
        const file = path.join(dir, "state.json");
        fs.writeFileSync(file, "{}");
        runs.push(crashRun(name, file));
      }
      for (const r of await Promise.all(runs)) {
        if (r.error) {
          errors++;
          failures.push(`(d) ${name}: waiter failed: ${JSON.stringify(r.error)}`);
        } else {
          latencies.push(r.latency);
          if (r.floor !== null) {
            floors.push(r.floor);
            overFloor.push(r.latency - r.floor);
          }
        }
      }
    }
    const s = summary(latencies);
    const f = summary(floors);
    const o = summary(overFloor);
    out[name] = { ...s, errors, floor: f, overFloor: o };
    rows.push([
      name,
      fmtMs(s.median),
      fmtMs(s.p99),
      fmtMs(s.min),
      fmtMs(s.max),
      fmtMs(f.median),
      fmtMs(f.p99),
      fmtMs(o.median),
      fmtMs(o.p99),
      String(errors),
    ]);
  }
  log(table(rows, ["", "p50", "p99", "min", "max", "floor p50", "floor p99", "− floor p50", "− floor p99", "errors"]));
  log(`    floor: SIGKILL → the same holder's pidfd readable (polled by this process), per run; − floor: recovery minus`);
  log(`    that run's floor, what the library adds to the kernel's teardown of the killed process.`);
  const ex = out.exactlock.median;
  log(`    exactlock p50 vs proper-lockfile ${ratio(ex, out["proper-lockfile"].median)}, vs lockfile ${ratio(ex, out.lockfile.median)}`);
  log("");
  results.scenarios.crash = out;
}

// ---------- (e) idle waiters ----------

async function idleWaiters() {
  const { idleWaiters: count, idleWindowMs } = CONFIG;
  const probeMs = 50;
  log(`(e) ${count} waiters in one process for ${idleWindowMs / 1000} s while another process holds the lock: CPU of the`);
  log(`    waiting process (% of one core), and fs.promises.readFile latency there (one read every ${probeMs} ms).`);
  log(`    "no waiters" is the same process doing only the reads. exactlock retries 1000 (budget 100 s), retryDelayMs 100;`);
  log(`    proper-lockfile retries ${JSON.stringify(PL_RETRIES)}; lockfile wait 60 s, pollPeriod ${LF_POLL}.`);
  const rows = [];
  const out = {};
  const probeFile = path.join(freshDir("probe"), "probe.txt");
  fs.writeFileSync(probeFile, "x".repeat(4096));
  for (const name of ["none", ...LIBRARIES]) {
    const dir = freshDir(`idle-${name}`);
    const file = path.join(dir, "state.json");
    fs.writeFileSync(file, "{}");
    let holder;
    if (name !== "none") {
      holder = spawnWorker(["hold", name, file, "idle"]);
      await holder.next("held");
    }
    const idle = spawnWorker(["idle", name, file, String(count), String(idleWindowMs), String(probeMs), probeFile], {
      timeoutMs: idleWindowMs + 60_000,
    });
    const r = await idle.next("result");
    await idle.kill("SIGKILL");
    if (holder) await holder.kill("SIGKILL");
    out[name] = r;
    if (r.failures) failures.push(`(e) ${name}: ${r.failures} waiters failed while waiting (${JSON.stringify(r.firstError)})`);
    rows.push([name === "none" ? "no waiters (reads only)" : name, `${r.cpuPercent.toFixed(2)} %`, fmtMs(r.probeP50), fmtMs(r.probeP99), fmtMs(r.probeMax), String(r.probes), String(r.failures)]);
  }
  log(table(rows, ["", "CPU", "readFile p50", "p99", "max", "reads", "failed"]));
  log(`    exactlock's waiters add ${(out.exactlock.cpuPercent - out.none.cpuPercent).toFixed(2)} % of a core over the reads alone`);
  log("");
  results.scenarios.idle = out;
}

// ---------- (g) update cycles ----------

/**
 * One file changed under its lock: lock, read, write the next content, unlock. exactlock's
 * updateJson (a temp file renamed over the file) against proper-lockfile + write-file-atomic
 * (the same temp-and-rename, no directory fsync) and lockfile + writeFile (in place: a crash
 * or a reader can meet the file empty or torn), each durable (fsyncs) and not; then what a
 * fence costs a lock cycle.
 */
async function updateCycles() {
  const { cycles, warmup, rounds } = CONFIG;
  const per = Math.ceil(cycles / rounds / 2);
  log(`(g) update cycle (lock, read a JSON counter, write it + 1, unlock), ${per * rounds} each after ${warmup / 2} warm-up,`);
  log(`    interleaved in ${rounds} rounds; "durable" fsyncs the new file (and exactlock the directory too)`);
  const writeFileAtomic = createRequire(import.meta.url)("write-file-atomic");
  const { updateJson } = await import(path.join(root, "dist", "index.js"));
  const exactlockLib = await import(path.join(root, "dist", "index.js"));
  const next = (text) => JSON.stringify({ n: (text ? JSON.parse(text).n : 0) + 1 });
  const readText = (file) => fs.promises.readFile(file, "utf8").catch(() => undefined);
  const durableWrite = async (file, text) => {
    const handle = await fs.promises.open(file, "w");
    try {
      await handle.writeFile(text);
      await handle.sync();
    } finally {
      await handle.close();
    }
  };
  const withPl = async (file, fn) => {
    const release = await libs["proper-lockfile"].acquire(file, "uncontended");
    try {
      await fn();
    } finally {
      await release();
    }
  };
  const withLf = async (file, fn) => {
    const release = await libs.lockfile.acquire(file, "uncontended");
    try {
      await fn();
    } finally {
      await release();
    }
  };
  const variants = {
    "exactlock updateJson, durable": (f) => updateJson(f, (d) => ({ n: (d?.n ?? 0) + 1 })),
    "exactlock updateJson, not durable": (f) => updateJson(f, (d) => ({ n: (d?.n ?? 0) + 1 }), { durable: false }),
    "proper-lockfile + write-file-atomic, durable": (f) => withPl(f, async () => writeFileAtomic(f, next(await readText(f)), { fsync: true })),
    "proper-lockfile + write-file-atomic, not durable": (f) =>
      withPl(f, async () => writeFileAtomic(f, next(await readText(f)), { fsync: false })),
    "lockfile + writeFile, durable": (f) => withLf(f, async () => durableWrite(f, next(await readText(f)))),
    "lockfile + writeFile, not durable": (f) => withLf(f, async () => fs.promises.writeFile(f, next(await readText(f)))),
    "exactlock lock cycle": (f) => exactlockLib.withFileLock(f, async () => {}),
    "exactlock lock cycle, fence: true": (f) => exactlockLib.withFileLock(f, async () => {}, { fence: true }),
  };
  const dir = freshDir("update");
  const files = Object.fromEntries(Object.keys(variants).map((name, at) => [name, path.join(dir, `counter-${at}.json`)]));
  // proper-lockfile locks only a file that exists.
  for (const file of Object.values(files)) fs.writeFileSync(file, JSON.stringify({ n: 0 }));
  const samples = Object.fromEntries(Object.keys(variants).map((name) => [name, []]));
  for (const [name, run] of Object.entries(variants)) for (let i = 0; i < warmup / 2; i++) await run(files[name]);
  for (let r = 0; r < rounds; r++) {
    for (const [name, run] of Object.entries(variants)) {
      for (let i = 0; i < per; i++) {
        const s = monoNs();
        await run(files[name]);
        samples[name].push(nsToMs(monoNs() - s));
      }
    }
  }
  const stats = Object.fromEntries(Object.keys(variants).map((name) => [name, summary(samples[name])]));
  for (const [name, file] of Object.entries(files)) {
    if (name.includes("lock cycle")) continue;
    const n = JSON.parse(fs.readFileSync(file, "utf8")).n;
    if (n !== per * rounds + warmup / 2) failures.push(`(g) ${name}: counter ${n}, expected ${per * rounds + warmup / 2}`);
  }
  const pairs = [
    ["durable", "exactlock updateJson, durable", "proper-lockfile + write-file-atomic, durable", "lockfile + writeFile, durable"],
    ["not durable", "exactlock updateJson, not durable", "proper-lockfile + write-file-atomic, not durable", "lockfile + writeFile, not durable"],
  ];
  const rows = Object.keys(variants).map((name) => [name, us(stats[name].median), us(stats[name].p99)]);
  log(table(rows, ["", "median", "p99"]));
  for (const [what, ex, pl, lf] of pairs) {
    log(
      `    ${what}: proper-lockfile + write-file-atomic is ${ratio(stats[pl].median, stats[ex].median)} exactlock's median, ` +
        `lockfile + writeFile ${ratio(stats[lf].median, stats[ex].median)}`,
    );
  }
  const fenced = stats["exactlock lock cycle, fence: true"].median - stats["exactlock lock cycle"].median;
  log(`    a fence costs a lock cycle ${us(fenced)} (its rename and fsync: bench/CYCLE.md)`);
  log("");
  results.scenarios.update = { stats };
}

// ---------- main ----------

const started = monoNs();
try {
  if (wants("a")) await uncontended();
  if (wants("b")) await contended();
  if (wants("c")) await handoff();
  if (wants("d")) await crash();
  if (wants("e")) await idleWaiters();
  if (wants("g")) await updateCycles();
} catch (error) {
  failures.push(`bench aborted: ${error?.stack ?? error}`);
} finally {
  fs.rmSync(base, { recursive: true, force: true });
}
log(`total ${(nsToMs(monoNs() - started) / 1000).toFixed(1)} s`);
results.failures = failures;
if (jsonFile) fs.writeFileSync(jsonFile, JSON.stringify(results, null, 2));
if (failures.length) {
  log("FAILED:");
  for (const f of failures) log(`  ${f}`);
  process.exit(1);
}
