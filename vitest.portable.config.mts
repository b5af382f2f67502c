import { configDefaults, defineConfig, mergeConfig } from "vitest/config";
import base from "./vitest.config.mts";

/**
 * `npm run test:portable`: the node suites again, with the portable kernel
 * mechanisms forced (EXACTLOCK_PLATFORM=portable: timer-only waits,
 * kill(pid, 0) liveness, O_NOFOLLOW walks, the mkdir/link rename fallbacks
 * and in-place reclaim), so the paths a non-Linux system takes run here.
 * Every child process a test starts inherits the switch. Tests of what
 * only Linux's mechanisms do skip themselves (`it.skipIf(PORTABLE)`, each
 * with its reason); node-debug.test.ts is left out whole: it reads the
 * story inotify and the exchange rename tell, and platform.test.ts reads
 * the portable one.
 */
export default mergeConfig(
  base,
  defineConfig({
    test: {
      env: { EXACTLOCK_PLATFORM: "portable" },
      exclude: [...configDefaults.exclude, "__test__/node-debug.test.ts", "__test__/loaded-machine.test.ts"],
    },
  }),
);
