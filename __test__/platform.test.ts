/**
 * The platform seam's switch: `EXACTLOCK_PLATFORM=portable` really swaps the
 * kernel mechanisms. Each case runs a child node with the switch set and
 * one without it, so both directions are proven whichever mode this run
 * itself is in (`npm run test:node` runs it native, `npm run test:portable`
 * forced portable).
 */
import { spawn } from "node:child_process";
import * as path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { nativePlatform } from "../lib/index.ts";
import { cleanup as cleanupChildren, spawnHolder } from "./fixtures/children.ts";
import { canonicalRecord, cleanup, deadPid, makeRoot, PORTABLE, writeLock, zombiePid } from "./helpers.ts";
import { skipUnless } from "./premises.ts";

afterEach(async () => {
  await cleanupChildren();
  await cleanup();
});

const DIST = path.join(__dirname, "..", "dist", "index.js");

/** `process.env` with the switch set to `portable`, or removed. */
function envWith(portable: boolean, extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const env = { ...process.env, ...extra };
  delete env.EXACTLOCK_PLATFORM;
  if (portable) env.EXACTLOCK_PLATFORM = "portable";
  return env;
}

/** Runs an ES module `script` in a child node; its exit status, stdout and stderr. */
function runChild(script: string, env: NodeJS.ProcessEnv): Promise<{ status: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, ["--input-type=module", "-e", script], { env });
  let stdout = "";
  let stderr = "";
  child.stdout.setEncoding("utf8").on("data", (chunk) => (stdout += chunk));
  child.stderr.setEncoding("utf8").on("data", (chunk) => (stderr += chunk));
  return new Promise((resolve) => child.on("close", (status) => resolve({ status, stdout, stderr })));
}

/** A child that acquires `file` (waiting up to `retries` × `retryDelayMs`), releases it, and prints its platform. */
const acquireScript = (file: string, retries: number, retryDelayMs: number) => `
  const { acquireLock, nativePlatform } = await import(${JSON.stringify(DIST)});
  const release = await acquireLock(${JSON.stringify(file)}, { retries: ${retries}, retryDelayMs: ${retryDelayMs} });
  await release();
  process.stdout.write(nativePlatform());
`;

describe("EXACTLOCK_PLATFORM", () => {
  it("nativePlatform() names the mechanisms of this run", () => {
    const native: Record<string, string> = { linux: "linux", darwin: "macos", win32: "windows" };
    expect(nativePlatform()).toBe(PORTABLE ? "portable" : native[process.platform]);
  });

  it("forced portable, a waiter is woken by its timer only; native, by the kernel; NODE_DEBUG says which", async (ctx) => {
    skipUnless(ctx, { linux: true }); // the native story is Linux's (inotify, pidfd)
    const file = path.join(makeRoot(), "state.json");

    // Portable: a 100 ms timer, and nothing else, wakes the waiter.
    let holder = await spawnHolder(file);
    setTimeout(() => holder.send("release"), 400);
    const portable = await runChild(acquireScript(file, 600, 100), envWith(true, { NODE_DEBUG: "exactlock" }));
    expect(portable.status, portable.stderr).toBe(0);
    expect(portable.stdout).toBe("portable");
    expect(portable.stderr).toContain("kernel mechanisms: portable");
    const portableWakes = portable.stderr.split("\n").filter((line) => line.includes("woken on "));
    expect(portableWakes.length, portable.stderr).toBeGreaterThan(0);
    for (const line of portableWakes) expect(line).toMatch(/: the fallback timer$/);
    expect(portable.stderr).not.toMatch(/woken by inotify|the holder's pidfd/);

    // Native: a timer of a minute, so only the kernel can wake it in time.
    holder = await spawnHolder(file);
    setTimeout(() => holder.send("release"), 400);
    const native = await runChild(acquireScript(file, 10, 60_000), envWith(false, { NODE_DEBUG: "exactlock" }));
    expect(native.status, native.stderr).toBe(0);
    expect(native.stdout).toBe("linux");
    expect(native.stderr).toContain("kernel mechanisms: linux");
    expect(native.stderr).toMatch(/woken by inotify, the holder's pidfd, this process/);
    expect(native.stderr).toMatch(/woken on .*: (the lock's name changed|the holder exited)$/m);
  });

  it("forced portable, a zombie owner reads as alive (kill(pid, 0) cannot tell); native, as dead and reclaimable", async () => {
    const file = path.join(makeRoot(), "state.json");
    writeLock(file, canonicalRecord(await zombiePid()));
    const tryOnce = `
      const { acquireLock } = await import(${JSON.stringify(DIST)});
      try {
        const release = await acquireLock(${JSON.stringify(file)}, { retries: 0 });
        await release();
        process.stdout.write("acquired");
      } catch (error) {
        process.stdout.write(error.code + " " + error.holder);
      }
    `;
    const portable = await runChild(tryOnce, envWith(true));
    expect(portable.stdout, portable.stderr).toMatch(/^ELOCKED .*\(live\)/);
    const native = await runChild(tryOnce, envWith(false));
    expect(native.stdout, native.stderr).toBe("acquired");
  });

  it("forced portable, a stale lock is reclaimed in place (no exchange rename) and the record is the same as native", async () => {
    const file = path.join(makeRoot(), "state.json");
    const deadOwner = canonicalRecord(await deadPid());
    writeLock(file, deadOwner);
    const reclaim = `
      const { acquireLock } = await import(${JSON.stringify(DIST)});
      const fs = await import("node:fs");
      const release = await acquireLock(${JSON.stringify(file)}, { retries: 0 });
      process.stdout.write(fs.readFileSync(${JSON.stringify(`${file}.lock/info`)}, "utf8"));
      await release();
    `;
    const portable = await runChild(reclaim, envWith(true, { NODE_DEBUG: "exactlock" }));
    expect(portable.status, portable.stderr).toBe(0);
    expect(portable.stderr).toContain("in place (no exchange here): removed");
    writeLock(file, deadOwner);
    const native = await runChild(reclaim, envWith(false, { NODE_DEBUG: "exactlock" }));
    expect(native.status, native.stderr).toBe(0);
    expect(native.stderr).toContain("exchanging the judged directory for ours");
    expect(native.stderr).not.toContain("in place");
    // The start time stays the OS's own in both: the records have the same keys.
    const keys = (json: string) => Object.keys(JSON.parse(json) as object);
    expect(keys(portable.stdout)).toEqual(keys(native.stdout));
    expect(JSON.parse(portable.stdout).process_incarnation).toMatch(/^linux:\d+$/);
  });
});
