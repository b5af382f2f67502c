// Bounding the wait: an AbortSignal (e.g. a timeout), or the waiting budget.
// Run: node examples/abort-timeout.mjs
import { acquireLock, FileLockAcquireError } from "exactlock";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";

const dir = await mkdtemp(join(tmpdir(), "exactlock-example-"));
const file = join(dir, "state.json");
const release = await acquireLock(file); // someone holds the lock (here: this process)

// Give up when a signal aborts: the promise rejects with the signal's reason.
try {
  await acquireLock(file, { signal: AbortSignal.timeout(200) });
} catch (error) {
  console.log(error.name); // TimeoutError
}

// Or give up when the waiting budget (retries × retryDelayMs = 300 ms) is spent.
try {
  await acquireLock(file, { retries: 3, retryDelayMs: 100 });
} catch (error) {
  if (!(error instanceof FileLockAcquireError)) throw error;
  console.log(error.code, error.holderInfo?.pid === process.pid); // ELOCKED true
}

await release();
await rm(dir, { recursive: true });
