import { describe, expect, it } from "bun:test";
import * as fs from "node:fs";
import { nativeVersion } from "../lib/index.ts";
import { ON_LINUX } from "../__test__/premises.ts";

/** The exactlock .node files mapped into this process. */
function loadedBinaries(): string[] {
  const files = fs.readFileSync("/proc/self/maps", "utf8").split("\n").map((line) => line.split(/\s+/)[5]);
  return [...new Set(files.filter((file): file is string => Boolean(file) && /exactlock[^/]*\.node$/.test(file!)))];
}

describe("package under bun", () => {
  it("loads the native core", () => {
    expect(nativeVersion()).toMatch(/^\d+\.\d+\.\d+$/);
  });

  // scripts/run-emulated.mjs names the binary each run is for: a musl Bun on this glibc
  // host must load the musl build, chosen by napi's own loader. A plain `bun test` on Linux
  // loads this machine's own build for its CPU. Other systems have no /proc/self/maps: there
  // the test is skipped, and its name says why.
  it.skipIf(!ON_LINUX)("loads the binary built for this runtime's platform (Linux only: it reads /proc/self/maps)", () => {
    nativeVersion();
    const loaded = loadedBinaries();
    expect(loaded).toHaveLength(1);
    const expected = process.env.EXACTLOCK_EXPECT_BINARY;
    if (expected) expect(loaded[0]!.endsWith(`/${expected}`)).toBe(true);
    else expect(loaded[0]).toMatch(new RegExp(`/exactlock\\.linux-${process.arch}-(gnu|musl)\\.node$`));
  });
});
