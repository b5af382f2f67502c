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
 * makes non-blocking once `process.stderr` is touched) this process leaves unread at first:
 * for `unreadMs`, or until the child has made `unreadForCycles` cycles (it says how many on its
 * stdout, every 500). The child stops after `cycles` cycles, or, with `stopOn`, once its stderr
 * as read shows `stopOn`. Each acquisition has a 300 ms budget, every other one off the calling
 * thread; the child's last stdout line is `done <pid>` or the error that ended it.
 */
function cyclesBehindAFullPipe(
  file: string,
  options: { cycles?: number; unreadMs?: number; unreadForCycles?: number; stopOn?: RegExp },
): Promise<{ status: number | null; signal: NodeJS.Signals | null; stderr: string; last: string; pid: number }> {
  const script = `
    const { acquireLock } = await import(${JSON.stringify(DIST)});
    process.stderr; // the pipe turns non-blocking here, as in any program that logs
    let stop = false;
    process.stdin.on("data", () => (stop = true));
    try {
      for (let i = 0; ${options.cycles ?? "Infinity"} > i && !stop; i++) {
        await (await acquireLock(${JSON.stringify(file)}, { timeout: 300, inlineFastPath: i % 2 === 0 }))();
        if (i % 500 === 499) process.stdout.write("at " + (i + 1) + "\\n");
      }
      process.stdout.write("done " + process.pid + "\\n");
    } catch (error) {
      process.stdout.write(String(error) + "\\n");
      process.exitCode = 1;
    }
    process.stdin.destroy();
  `;
  const child = spawn(process.execPath, ["--input-type=module", "-e", script], {
    env: { ...process.env, NODE_DEBUG: "exactlock" },
  });
  let stdout = "";
  let stderr = "";
  let reading = false;
  const read = () => {
    if (reading) return;
    reading = true;
    child.stderr.on("data", (chunk) => {
      stderr += chunk;
      if (options.stopOn?.test(stderr) && child.stdin.writable) child.stdin.end("stop\n");
    });
  };
  child.stderr.setEncoding("utf8");
  child.stdout.setEncoding("utf8").on("data", (chunk) => {
    stdout += chunk;
    const at = [...stdout.matchAll(/^at (\d+)$/gm)].pop();
    if (options.unreadForCycles !== undefined && at && Number(at[1]) >= options.unreadForCycles) read();
  });
  if (options.unreadMs !== undefined) setTimeout(read, options.unreadMs);
  return new Promise((resolve) => {
    child.on("close", (status, signal) => {
      const last = stdout.trimEnd().split("\n").pop() ?? "";
      resolve({ status, signal, stderr, last, pid: Number(/^done (\d+)$/.exec(last)?.[1]) });
    });
  });
}

describe("NODE_DEBUG=exactlock with a stderr that fills", () => {
  // eprintln! panicked on the pipe's EAGAIN, and the panic aborted the process (seen under
  // vitest, whose workers' stderr is such a pipe); waiting for the reader on the lock's own
  // threads instead made free locks time out ("the filesystem did not answer").
  it("waits for a slow reader: the process lives, and every line arrives whole", async () => {
    const file = path.join(makeRoot(), "state.json");
    const { status, signal, stderr, last, pid } = await cyclesBehindAFullPipe(file, { cycles: 1500, unreadMs: 300 });
    expect({ status, signal, last }).toEqual({ status: 0, signal: null, last: `done ${pid}` });
    const lines = stderr.trimEnd().split("\n");
    expect(lines.filter((line) => !line.startsWith(`EXACTLOCK ${pid}: `))).toEqual([]);
    expect(lines.filter((line) => line === `EXACTLOCK ${pid}: release of ${file}.lock: released`)).toHaveLength(1500);
    expect(stderr).not.toContain("dropped");
  });

  // 20 000 cycles write several MiB of lines while nobody reads: past the queue's 1 MiB.
  it("never holds a lock up while nobody reads: free locks are taken at once, and lines past the queue are dropped and counted", { timeout: 180_000 }, async () => {
    const file = path.join(makeRoot(), "state.json");
    const { status, signal, stderr, last, pid } = await cyclesBehindAFullPipe(file, {
      unreadForCycles: 20_000,
      stopOn: /earlier line\(s\) dropped/,
    });
    // Each acquisition had 300 ms: a line that waited for the reader would have spent it.
    expect({ status, signal, last }).toEqual({ status: 0, signal: null, last: `done ${pid}` });
    const note = new RegExp(`^EXACTLOCK ${pid}: (\\d+) earlier line\\(s\\) dropped: stderr was not read \\(more than 1024 KiB waiting\\)$`, "m");
    const dropped = stderr.match(note);
    expect(dropped, stderr.slice(-2000)).not.toBeNull();
    expect(Number(dropped![1])).toBeGreaterThan(0);
    const lines = stderr.trimEnd().split("\n");
    expect(lines.filter((line) => !line.startsWith(`EXACTLOCK ${pid}: `))).toEqual([]);
  });
});
