import { configDefaults, defineConfig } from "vitest/config";

/**
 * The node suites. `__test__/loaded-machine.test.ts` keeps this machine's
 * cores busy on purpose, so it runs alone, after them (`npm run
 * test:load`, vitest.load.config.mts): beside other files it would make
 * their waits slow for no reason of theirs.
 */
export default defineConfig({
  test: {
    include: ["__test__/**/*.test.ts"],
    exclude: [...configDefaults.exclude, "__test__/loaded-machine.test.ts"],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // Does nothing unless EXACTLOCK_TEST_PLATFORM names another platform (see the file).
    setupFiles: ["__test__/premise-guard.ts"],
  },
});
