/**
 * exactlock/testing: seams for tests only — faults and delays injected into
 * the native core's steps, and a hook awaited inside each attempt. Not part
 * of the lock's API: nothing here is needed to use a lock, and production
 * code should never import it.
 */
export {
  FileLockTestHooks,
  injectFaultForTesting,
  injectDelayForTesting,
  clearFaultsForTesting,
} from "./lock.js";
