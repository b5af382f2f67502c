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
