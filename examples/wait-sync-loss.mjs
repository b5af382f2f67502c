// Waiting as long as it takes, synchronous use, and noticing a lost lock.
// Run: node examples/wait-sync-loss.mjs
import { acquireLock, acquireLockSync, withFileLock } from "exactlock";
import { rmSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";

const dir = await mkdtemp(join(tmpdir(), "exactlock-example-"));
const file = join(dir, "state.json");

// Synchronous (scripts, exit paths): blocks this thread while another process holds it.
const releaseSync = acquireLockSync(file);
console.log("sync:", typeof releaseSync); // sync: function
releaseSync();

// Wait as long as it takes: timeout Infinity (a signal can still end it).
const holder = await acquireLock(file);
setTimeout(() => holder(), 100); // the holder finishes a little later
const release = await acquireLock(file, { timeout: Infinity });
console.log("waited: yes"); // waited: yes
await release();

// A lost lock: fn is handed the lock; its signal aborts if someone else removes it.
const outcome = await withFileLock(file, async ({ lockPath, signal }) => {
  const working = setTimeout(() => {}, 5_000); // stands for fn's work (the watch keeps no process alive)
  rmSync(lockPath, { recursive: true }); // someone else's rm -rf, say
  await new Promise((resolve) => signal.addEventListener("abort", resolve, { once: true }));
  clearTimeout(working);
  console.log("lost:", signal.reason.code); // lost: EMISSING
}).catch((error) => `release: ${error.code}`);
console.log(outcome); // release: EMISSING

await rm(dir, { recursive: true });
