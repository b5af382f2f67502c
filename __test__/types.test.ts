/**
 * The exported types, pinned: __test__/types/consumer.mts (ESM) and
 * consumer.cts (CommonJS) use every exported type the way a user would,
 * with compile-time assertions, and the TypeScript examples shown in the
 * README (examples/*.mts) compile too — all under strict,
 * exactOptionalPropertyTypes and module nodenext, against the built
 * declarations (dist/*.d.ts) that a user's compiler would read.
 */
import { spawnSync } from "node:child_process";
import * as path from "node:path";
import { expect, it } from "vitest";

const ROOT = path.join(__dirname, "..");

it("a strict nodenext consumer (ESM and CJS) and the README's TypeScript examples type-check against dist", () => {
  const tsc = spawnSync(
    process.execPath,
    [path.join(ROOT, "node_modules", "typescript", "bin", "tsc"), "-p", path.join(__dirname, "types", "tsconfig.json")],
    { cwd: ROOT, encoding: "utf8", timeout: 120_000 },
  );
  expect(`${tsc.stdout}${tsc.stderr}`).toBe("");
  expect(tsc.status).toBe(0);
});
