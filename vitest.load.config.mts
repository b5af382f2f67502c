import { defineConfig } from "vitest/config";

/**
 * `npm run test:load`: the suite that loads this machine's cores on purpose
 * (busy processes, a niced acquirer pinned to one core), run alone so that
 * no other test file shares the machine with it.
 */
export default defineConfig({
  test: {
    include: ["__test__/loaded-machine.test.ts"],
    testTimeout: 180_000,
    hookTimeout: 30_000,
    setupFiles: ["__test__/premise-guard.ts"],
  },
});
