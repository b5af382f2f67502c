/**
 * exactlock/testing: seams for tests only — faults and delays injected into
 * the native core's steps, a hook awaited inside each attempt, and the
 * bench's crash-recovery floor. Not part of the lock's API: nothing here is
 * needed to use a lock, and production code should never import it.
 */
import { native } from "./native.js";
import { argumentError } from "./errors.js";
import { validateCount, validateOptionalCount } from "./validate.js";

export {
  FileLockTestHooks,
  injectFaultForTesting,
  injectDelayForTesting,
  clearFaultsForTesting,
} from "./lock.js";

/**
 * Whether a free lock can be taken on the calling thread on this machine
 * (`inlineFastPath`): the kernel must open a directory from its caches alone
 * (Linux 5.12+ `openat2(RESOLVE_CACHED)`). `false` on older kernels, under
 * qemu-user, on macOS and Windows: there every attempt runs off the thread.
 */
export const inlineFastPathPossible: () => boolean = native.inlineFastPathPossible;

/**
 * Opens a pidfd on `pid` now (call it before the process is killed) and
 * resolves with the CLOCK_MONOTONIC time, in nanoseconds as
 * `process.hrtime.bigint()` counts them, at which that pidfd became readable
 * — the process has exited, as far as a waiter watching its pidfd can tell.
 * The wait runs off the JS thread. `null` when no pidfd could be opened (the
 * process is already gone, or the platform has none) or the process did not
 * exit within `timeoutMs` (default 60000). The bench's floor for crash
 * recovery: SIGKILL → this, on the same holder whose lock is then reclaimed.
 */
export async function waitPidExitNs(pid: number, timeoutMs?: number): Promise<bigint | null> {
  if (typeof pid !== "number") validateCount(pid, "pid");
  if (!Number.isInteger(pid) || pid < 1 || pid > 0x7fff_ffff) {
    throw argumentError(`pid must be an integer from 1 to 2147483647; received ${pid}`);
  }
  const at = await native.waitPidExitNs(pid, validateOptionalCount(timeoutMs, "timeoutMs"));
  return at === null ? null : BigInt(at);
}
