// Child-process roles of the benchmark; driven by bench/run.mjs over IPC.
//   counter LIB FILE SECTIONS      contended counter sections
//   waiter LIB FILE SCENARIO       waits for the lock on each "go", stamps the acquisition
//   hold LIB FILE SCENARIO         acquires and holds until "release" (or SIGKILL)
//   idle LIB FILE COUNT WINDOW_MS PROBE_MS PROBE_FILE
//                                  COUNT waiters in this process; CPU and readFile latency
import { readFileSync } from "node:fs";
import { readFile, writeFile } from "node:fs/promises";
import { adapter, monoNs, percentile, sleep } from "./lib.mjs";

const [role, libName, file, ...rest] = process.argv.slice(2);
const send = (m) => process.send(m);
/** Sends the last message, then exits once it is written. */
const finish = (m) => process.send(m, () => process.exit(0));
const messages = [];
const waiters = [];
process.on("message", (m) => {
  const w = waiters.shift();
  if (w) w(m);
  else messages.push(m);
});
const nextMessage = () => new Promise((resolve) => (messages.length ? resolve(messages.shift()) : waiters.push(resolve)));

function describe(error) {
  return { code: error?.code, message: String(error?.message ?? error) };
}

async function counter() {
  const lib = await adapter(libName);
  const sections = Number(rest[0]);
  send({ type: "ready" });
  await nextMessage();
  let errors = 0;
  let firstError;
  // Per section: held at, section done at, released at, asked at
  // (CLOCK_MONOTONIC), so the parent can tell section time from hand-over
  // time, and what each process paid waiting (asked → held).
  const stamps = [];
  const start = monoNs();
  const cpuAtStart = cpuNow();
  for (let i = 0; i < sections; i++) {
    try {
      const askedAt = monoNs();
      const release = await lib.acquire(file, "contended");
      const heldAt = monoNs();
      let doneAt = heldAt;
      try {
        const value = Number(await readFile(file, "utf8"));
        await writeFile(file, String(value + 1));
        doneAt = monoNs();
      } finally {
        await release();
      }
      stamps.push([String(heldAt), String(doneAt), String(monoNs()), String(askedAt)]);
    } catch (error) {
      errors++;
      firstError ??= describe(error);
    }
  }
  const cpu = cpuNow();
  finish({
    type: "done",
    errors,
    firstError,
    stamps,
    elapsedNs: String(monoNs() - start),
    cpuUs: cpu.processUs - cpuAtStart.processUs,
    mainThreadUs: cpu.mainThreadUs === null || cpuAtStart.mainThreadUs === null ? null : cpu.mainThreadUs - cpuAtStart.mainThreadUs,
  });
}

/**
 * CPU time used so far, in µs: by the whole process (every thread, those
 * that exited too: getrusage), and by its main thread alone (the
 * scheduler's own count, /proc/self/task/<pid>/schedstat; null where
 * there is none). The rest is the other threads': libuv's pool, V8's, the
 * lock library's own.
 */
function cpuNow() {
  const { user, system } = process.cpuUsage();
  let mainThreadUs = null;
  try {
    mainThreadUs = Number(readFileSync(`/proc/self/task/${process.pid}/schedstat`, "utf8").split(" ")[0]) / 1000;
  } catch {}
  return { processUs: user + system, mainThreadUs };
}

async function waiter() {
  const lib = await adapter(libName);
  const scenario = rest[0];
  send({ type: "ready" });
  for (;;) {
    const m = await nextMessage();
    if (m.type !== "go") break;
    let acquiredAt;
    try {
      send({ type: "waiting" });
      const release = await lib.acquire(file, scenario, () => {
        acquiredAt = monoNs();
      });
      acquiredAt ??= monoNs();
      send({ type: "acquired", t: String(acquiredAt) });
      await release();
      send({ type: "released" });
    } catch (error) {
      send({ type: "acquired", error: describe(error) });
      send({ type: "released" });
    }
  }
  process.exit(0);
}

async function hold() {
  const lib = await adapter(libName);
  const scenario = rest[0];
  const release = await lib.acquire(file, scenario);
  send({ type: "held", pid: process.pid });
  const keepAlive = setInterval(() => {}, 1 << 30);
  const m = await nextMessage();
  if (m.type === "release") {
    await release();
    send({ type: "released" });
  }
  clearInterval(keepAlive);
  process.exit(0);
}

async function idle() {
  const [count, windowMs, probeMs, probeFile] = [Number(rest[0]), Number(rest[1]), Number(rest[2]), rest[3]];
  let failures = 0;
  let firstError;
  if (libName !== "none") {
    const lib = await adapter(libName);
    for (let i = 0; i < count; i++) {
      lib.acquire(file, "idle").then(
        () => {}, // never expected while the holder lives
        (error) => {
          failures++;
          firstError ??= describe(error);
        },
      );
    }
  }
  await sleep(500); // let every waiter reach its waiting state
  const latencies = [];
  const cpu0 = process.cpuUsage();
  const t0 = monoNs();
  const end = t0 + BigInt(windowMs) * 1_000_000n;
  while (monoNs() < end) {
    const s = monoNs();
    await readFile(probeFile);
    latencies.push(Number(monoNs() - s) / 1e6);
    await sleep(probeMs);
  }
  const cpu = process.cpuUsage(cpu0);
  const wallUs = Number(monoNs() - t0) / 1e3;
  latencies.sort((a, b) => a - b);
  send({
    type: "result",
    cpuPercent: ((cpu.user + cpu.system) / wallUs) * 100,
    probes: latencies.length,
    probeP50: percentile(latencies, 50),
    probeP99: percentile(latencies, 99),
    probeMax: latencies[latencies.length - 1],
    failures,
    firstError,
  });
  await nextMessage(); // killed by the parent
}

const roles = { counter, waiter, hold, idle };
roles[role]().catch((error) => {
  console.error(`worker ${role} ${libName}:`, error);
  process.exit(3);
});
