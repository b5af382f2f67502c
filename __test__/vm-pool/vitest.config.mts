import { defineConfig } from "vitest/config";

/** The vmThreads pool, for __test__/vm-pool.test.ts only. */
export default defineConfig({
  test: {
    root: import.meta.dirname,
    include: ["*.vmtest.ts"],
    pool: "vmThreads",
    testTimeout: 30_000,
  },
});
