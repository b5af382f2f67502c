/**
 * NODE_DEBUG=exactlock: each decision of the core on stderr, in Node's
 * util.debuglog format (`EXACTLOCK <pid>: …`) — here the verdict of a stale
 * reclaim, a wait and what woke it, and the release; nothing without it.
 */
import { spawn } from "node:child_process";
import * as path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { cleanup as cleanupChildren, spawnHolder } from "./fixtures/children.ts";
import { canonicalRecord, cleanup, deadPid, makeRoot, writeLock } from "./helpers.ts";

afterEach(async () => {
  await cleanupChildren();
  await cleanup();
});

const DIST = path.join(__dirname, "..", "dist", "index.js");

/** Acquires and releases `file` in a child node with `env`; its stderr. */
function acquireInChild(file: string, env: NodeJS.ProcessEnv): Promise<{ status: number | null; stderr: string; pid: number }> {
  const script = `
    const { acquireLock } = await import(${JSON.stringify(DIST)});
    const release = await acquireLock(${JSON.stringify(file)}, { retries: 100, retryDelayMs: 100 });
    await release();
    process.stdout.write(String(process.pid));
  `;
  const child = spawn(process.execPath, ["--input-type=module", "-e", script], { env });
  let stdout = "";
  let stderr = "";
  child.stdout.setEncoding("utf8").on("data", (chunk) => (stdout += chunk));
  child.stderr.setEncoding("utf8").on("data", (chunk) => (stderr += chunk));
  return new Promise((resolve) => {
    child.on("close", (status) => resolve({ status, stderr, pid: Number(stdout) }));
  });
}

describe("NODE_DEBUG=exactlock", () => {
  it("prints the verdict of a stale reclaim, the reclaim and the release", async () => {
    const file = path.join(makeRoot(), "state.json");
    const dead = await deadPid();
    writeLock(file, canonicalRecord(dead));
    const { status, stderr, pid } = await acquireInChild(file, { ...process.env, NODE_DEBUG: "net,exactlock" });
    expect(status).toBe(0);
    const lines = stderr.trim().split("\n");
    expect(lines.every((line) => line.startsWith(`EXACTLOCK ${pid}: `)), stderr).toBe(true);
    expect(stderr).toContain(`verdict on ${file}.lock (pid ${dead}): stale (owner_dead, dead)`);
    expect(stderr).toContain(`reclaimed ${file}.lock`);
    expect(stderr).toContain(`release of ${file}.lock: released`);
  });

  it("prints a wait and what woke it; prints nothing when NODE_DEBUG does not name exactlock", async () => {
    const file = path.join(makeRoot(), "state.json");
    const holder = await spawnHolder(file);
    setTimeout(() => holder.send("release"), 300);
    const waited = await acquireInChild(file, { ...process.env, NODE_DEBUG: "EXACT*" });
    expect(waited.status).toBe(0);
    expect(waited.stderr).toContain(`verdict on ${file}.lock (pid ${holder.pid}): not stale (owner_alive, live)`);
    expect(waited.stderr).toMatch(new RegExp(`waiting for ${file.replace(/[.]/g, "\\.")}\\.lock: up to \\d+ ms`));
    expect(waited.stderr).toMatch(/woken on .*: (the lock's name changed|the holder exited)/);
    const quiet = await acquireInChild(file, { ...process.env, NODE_DEBUG: "net" });
    expect(quiet.status).toBe(0);
    expect(quiet.stderr).toBe("");
  });
});

/**
 * Runs lock cycles in a child node with NODE_DEBUG=exactlock whose stderr (a pipe, which Node
 * makes non-blocking once `process.stderr` is touched) this process leaves unread for
 * `unreadMs`; the child cycles for `cycles` cycles, then for as long as `forMs` asks, each
 * acquisition with a 300 ms budget, every other one off the calling thread (its error, if one
 * fails, is its stdout).
 */
function cyclesBehindAFullPipe(
  file: string,
  { cycles, forMs, unreadMs }: { cycles: number; forMs: number; unreadMs: number },
): Promise<{ status: number | null; signal: NodeJS.Signals | null; stderr: string; stdout: string; pid: number }> {
  const script = `
    const { acquireLock } = await import(${JSON.stringify(DIST)});
    process.stderr; // the pipe turns non-blocking here, as in any program that logs
    const started = Date.now();
    try {
      for (let i = 0; i < ${cycles} || Date.now() - started < ${forMs}; i++) {
        await (await acquireLock(${JSON.stringify(file)}, { timeout: 300, inlineFastPath: i % 2 === 0 }))();
      }
      process.stdout.write(String(process.pid));
    } catch (error) {
      process.stdout.write(String(error));
      process.exitCode = 1;
    }
  `;
  const child = spawn(process.execPath, ["--input-type=module", "-e", script], {
    env: { ...process.env, NODE_DEBUG: "exactlock" },
  });
  let stdout = "";
  let stderr = "";
  child.stdout.setEncoding("utf8").on("data", (chunk) => (stdout += chunk));
  child.stderr.setEncoding("utf8");
  setTimeout(() => child.stderr.on("data", (chunk) => (stderr += chunk)), unreadMs);
  return new Promise((resolve) => {
    child.on("close", (status, signal) => resolve({ status, signal, stderr, stdout, pid: Number(stdout) }));
  });
}

describe("NODE_DEBUG=exactlock with a stderr that fills", () => {
  // eprintln! panicked on the pipe's EAGAIN, and the panic aborted the process (seen under
  // vitest, whose workers' stderr is such a pipe); waiting for the reader on the lock's own
  // threads instead made free locks time out ("the filesystem did not answer").
  it("waits for a slow reader: the process lives, and every line arrives whole", async () => {
    const file = path.join(makeRoot(), "state.json");
    const { status, signal, stderr, pid } = await cyclesBehindAFullPipe(file, { cycles: 1500, forMs: 0, unreadMs: 300 });
    expect({ status, signal }).toEqual({ status: 0, signal: null });
    const lines = stderr.trimEnd().split("\n");
    expect(lines.filter((line) => !line.startsWith(`EXACTLOCK ${pid}: `))).toEqual([]);
    expect(lines.filter((line) => line === `EXACTLOCK ${pid}: release of ${file}.lock: released`)).toHaveLength(1500);
    expect(stderr).not.toContain("dropped");
  });

  it("never holds a lock up while nobody reads: free locks are taken at once, and lines past the queue are dropped and counted", async () => {
    const file = path.join(makeRoot(), "state.json");
    const { status, signal, stderr, pid, stdout } = await cyclesBehindAFullPipe(file, { cycles: 0, forMs: 4000, unreadMs: 2000 });
    // Each acquisition had 300 ms: a line that waited for the reader would have spent it.
    expect({ status, signal, stdout }).toEqual({ status: 0, signal: null, stdout: String(pid) });
    const note = new RegExp(`^EXACTLOCK ${pid}: (\\d+) earlier line\\(s\\) dropped: stderr was not read \\(more than 1024 KiB waiting\\)$`, "m");
    const dropped = stderr.match(note);
    expect(dropped, stderr.slice(-2000)).not.toBeNull();
    expect(Number(dropped![1])).toBeGreaterThan(0);
    const lines = stderr.trimEnd().split("\n");
    expect(lines.filter((line) => !line.startsWith(`EXACTLOCK ${pid}: `))).toEqual([]);
  });
});
