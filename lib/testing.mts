/**
 * exactlock/testing's entry for `import`: the CommonJS build (./testing.js)
 * loaded with `require`, as ./index.mts does for the main entry and for the
 * same reason (no lexing of CommonJS sources at the import).
 */
import { createRequire } from "node:module";
import type * as Testing from "./testing.js";

const testing: typeof Testing = createRequire(import.meta.url)("./testing.js");

export default testing;

export const { FileLockTestHooks, injectFaultForTesting, injectDelayForTesting, clearFaultsForTesting, waitPidExitNs } =
  testing;
