// Shared pieces of the benchmark: the three libraries behind one interface,
// statistics, clocks, and child-process plumbing.
import { createRequire } from "node:module";
import { fork } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import path from "node:path";

const require = createRequire(import.meta.url);
const here = path.dirname(fileURLToPath(import.meta.url));
export const root = path.resolve(here, "..");

/** CLOCK_MONOTONIC in nanoseconds (libuv's uv_hrtime), comparable across
 * processes of one machine. */
export const monoNs = () => process.hrtime.bigint();
export const nsToMs = (ns) => Number(ns) / 1e6;

/** The retry policy given to proper-lockfile wherever it must wait: its
 * default (`retries: 0`) fails contention at once. */
export const PL_RETRIES = { retries: 1000, minTimeout: 10, maxTimeout: 100 };
/** proper-lockfile's smallest `stale` (its code clamps lower values to 2 s). */
export const PL_STALE = 2000;
/** lockfile's polling when it waits. */
export const LF_POLL = 10;
export const LF_STALE = 2000;

/**
 * One library behind one interface. `acquire(file, scenario, extra)`
 * resolves to an async release function; `stamp` (if given) is called right
 * after the lock is held (exactlock: in `onAcquired`).
 * Scenarios: "uncontended", "contended", "handoff", "crash", "idle".
 */
export async function adapter(name) {
  if (name === "exactlock") {
    const lib = await import(path.join(root, "dist", "index.js"));
    return {
      name,
      lockPathOf: (file) => `${file}.lock`,
      async acquire(file, scenario, stamp) {
        // Defaults everywhere (retryDelayMs 100, retries 50 = 5 s budget),
        // except idle waiters, which must outlast the 5 s window.
        const options = scenario === "idle" ? { retries: 1000 } : {};
        if (stamp) options.onAcquired = stamp;
        return lib.acquireLock(file, options);
      },
      withLock: (file, fn) => lib.withFileLock(file, fn),
    };
  }
  if (name === "proper-lockfile") {
    const lib = require("proper-lockfile");
    const optionsFor = (scenario) => {
      switch (scenario) {
        case "uncontended":
          return {};
        case "crash":
          return { retries: PL_RETRIES, stale: PL_STALE };
        default:
          return { retries: PL_RETRIES };
      }
    };
    return {
      name,
      lockPathOf: (file) => `${file}.lock`,
      async acquire(file, scenario, stamp) {
        const release = await lib.lock(file, optionsFor(scenario));
        if (stamp) stamp();
        return release;
      },
      async withLock(file, fn) {
        const release = await lib.lock(file);
        try {
          return await fn();
        } finally {
          await release();
        }
      },
    };
  }
  if (name === "lockfile") {
    const lib = require("lockfile");
    const lock = promisify(lib.lock);
    const unlock = promisify(lib.unlock);
    // lockfile mutates its options object: a fresh one per call.
    const optionsFor = (scenario) => {
      switch (scenario) {
        case "uncontended":
          return {};
        case "crash":
          return { wait: 60_000, pollPeriod: LF_POLL, stale: LF_STALE };
        default:
          return { wait: 60_000, pollPeriod: LF_POLL };
      }
    };
    return {
      name,
      lockPathOf: (file) => `${file}.lock`,
      async acquire(file, scenario, stamp) {
        const lockPath = `${file}.lock`;
        await lock(lockPath, optionsFor(scenario));
        if (stamp) stamp();
        return () => unlock(lockPath);
      },
      async withLock(file, fn) {
        const lockPath = `${file}.lock`;
        await lock(lockPath, {});
        try {
          return await fn();
        } finally {
          await unlock(lockPath);
        }
      },
    };
  }
  if (name === SPIN) {
    // The naive lock many programs write by hand: mkdir until it succeeds,
    // trying again on the next turn of the event loop (it spins, burning a
    // CPU while it waits); rmdir to release. No owner record, so no
    // recovery from a crashed holder: it is not run in (d) or (e).
    const fsp = await import("node:fs/promises");
    const lockDir = async (lockPath) => {
      for (;;) {
        try {
          return await fsp.mkdir(lockPath);
        } catch (error) {
          if (error.code !== "EEXIST") throw error;
          await new Promise((resolve) => setImmediate(resolve));
        }
      }
    };
    return {
      name,
      lockPathOf: (file) => `${file}.lock`,
      async acquire(file, scenario, stamp) {
        const lockPath = `${file}.lock`;
        await lockDir(lockPath);
        if (stamp) stamp();
        return () => fsp.rmdir(lockPath);
      },
      async withLock(file, fn) {
        const lockPath = `${file}.lock`;
        await lockDir(lockPath);
        try {
          return await fn();
        } finally {
          await fsp.rmdir(lockPath);
        }
      },
    };
  }
  throw new Error(`unknown library ${name}`);
}

export const LIBRARIES = ["exactlock", "proper-lockfile", "lockfile"];
/** The naive baseline: mkdir/rmdir, spinning while it waits. */
export const SPIN = "mkdir spin";
/** What (a), (b) and (c) compare: the libraries and the naive baseline. */
export const BASELINES = [...LIBRARIES, SPIN];

/** Nearest-rank percentile of an ascending array. */
export function percentile(sorted, p) {
  if (sorted.length === 0) return NaN;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length, Math.max(1, rank)) - 1];
}

export function summary(samples) {
  const sorted = [...samples].sort((a, b) => a - b);
  return {
    n: sorted.length,
    median: percentile(sorted, 50),
    p99: percentile(sorted, 99),
    min: sorted[0],
    max: sorted[sorted.length - 1],
  };
}

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * A child running bench/worker.mjs with `args`, with a message queue:
 * `next(type)` resolves with the next message of that type.
 */
export function spawnWorker(args, { timeoutMs = 180_000 } = {}) {
  const child = fork(path.join(here, "worker.mjs"), args, {
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  const inbox = [];
  const waiting = [];
  let exited = null;
  const deliver = () => {
    for (let i = 0; i < waiting.length; i++) {
      const w = waiting[i];
      const at = inbox.findIndex((m) => m.type === w.type);
      if (at >= 0) {
        const [m] = inbox.splice(at, 1);
        waiting.splice(i--, 1);
        clearTimeout(w.timer);
        w.resolve(m);
      } else if (exited) {
        waiting.splice(i--, 1);
        clearTimeout(w.timer);
        w.reject(new Error(`worker ${args.join(" ")} exited (${exited}) before sending ${w.type}`));
      }
    }
  };
  child.on("message", (m) => {
    inbox.push(m);
    deliver();
  });
  const exit = new Promise((resolve) => {
    child.on("exit", (code, signal) => {
      exited = signal ?? `code ${code}`;
      deliver();
      resolve({ code, signal });
    });
  });
  return {
    child,
    exit,
    send: (m) => child.send(m),
    next(type) {
      return new Promise((resolve, reject) => {
        const timer = setTimeout(
          () => reject(new Error(`timeout waiting for ${type} from worker ${args.join(" ")}`)),
          timeoutMs,
        );
        waiting.push({ type, resolve, reject, timer });
        deliver();
      });
    },
    kill(signal = "SIGKILL") {
      if (exited === null) child.kill(signal);
      return exit;
    },
  };
}

// ---------- formatting ----------

export const us = (ms) => `${(ms * 1000).toFixed(1)} µs`;
export function fmtMs(ms) {
  if (!Number.isFinite(ms)) return "n/a";
  if (ms < 1) return `${(ms * 1000).toFixed(0)} µs`;
  if (ms < 100) return `${ms.toFixed(2)} ms`;
  return `${ms.toFixed(0)} ms`;
}
export const ratio = (a, b) => (Number.isFinite(a) && Number.isFinite(b) && b > 0 ? `${(a / b).toFixed(2)}×` : "n/a");

export function table(rows, header) {
  const all = [header, ...rows].map((r) => r.map(String));
  const widths = header.map((_, i) => Math.max(...all.map((r) => r[i].length)));
  const line = (r) => `  ${r.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join("   ")}`;
  return [line(all[0]), line(widths.map((w) => "-".repeat(w))), ...all.slice(1).map(line)].join("\n");
}
