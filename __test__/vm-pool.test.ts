/**
 * `await using` in vitest's vmThreads pool: there a test's realm may lack
 * `Symbol.asyncDispose` (Node 20), and a release keyed by it alone threw
 * "Object is not disposable". Runs the real pool on vm-pool/*.vmtest.ts.
 */
import { spawnSync } from "node:child_process";
import * as path from "node:path";
import { expect, it } from "vitest";
import { skipUnless } from "./premises.ts";

const here = __dirname;

it("await using releases the lock in vitest's vmThreads pool", (ctx) => {
  // The nested vitest bundles its config into node_modules/.vite-temp.
  skipUnless(ctx, { writable: [path.join(here, "..", "node_modules")] });
  const run = spawnSync(
    process.execPath,
    [
      path.join(here, "..", "node_modules", "vitest", "vitest.mjs"),
      "run",
      "--config",
      path.join(here, "vm-pool", "vitest.config.mts"),
      "--reporter",
      "verbose",
    ],
    { encoding: "utf8", env: { ...process.env, NO_COLOR: "1", FORCE_COLOR: "0" }, timeout: 120_000 },
  );
  const output = `${run.stdout}\n${run.stderr}`;
  expect(output).toContain("await using releases the lock at the end of the block in a vm realm");
  expect(output).toMatch(/Tests\s+1 passed \(1\)/);
  expect(run.status, output).toBe(0);
});
