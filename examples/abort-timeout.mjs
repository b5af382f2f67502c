// Bounding the wait: a timeout, a try-lock, or an AbortSignal.
// Run: node examples/abort-timeout.mjs
import { acquireLock, FileLockAcquireError, tryAcquireLock } from "exactlock";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";

const dir = await mkdtemp(join(tmpdir(), "exactlock-example-"));
const file = join(dir, "state.json");
const release = await acquireLock(file); // someone holds the lock (here: this process)

// Wait at most 300 ms, however often the waiter looks (retryDelayMs).
try {
  await acquireLock(file, { timeout: 300, retryDelayMs: 10 });
} catch (error) {
  if (!(error instanceof FileLockAcquireError)) throw error;
  console.log(error.code, error.holderInfo?.pid === process.pid); // ELOCKED true
}

// Do not wait at all: undefined while someone else holds it.
console.log(await tryAcquireLock(file)); // undefined

// A signal from AbortSignal.timeout() ends the same way, its TimeoutError the cause;
// any other abort rejects with the signal's reason itself.
try {
  await acquireLock(file, { signal: AbortSignal.timeout(200) });
} catch (error) {
  console.log(error.code, error.cause.name); // ELOCKED TimeoutError
}

await release();
await rm(dir, { recursive: true });
