import { execFileSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { platformName } from "../lib/native.ts";

const ROOT = path.join(__dirname, "..");
/** The newest glibc a shipped Linux x64 binary may ask for (the bound; the build aims at 2.17). */
const CEILING = "2.28";

function versionKey(version: string): number[] {
  return version.split(".").map(Number);
}

function newer(a: string, b: string): boolean {
  const [x, y] = [versionKey(a), versionKey(b)];
  for (let i = 0; i < Math.max(x.length, y.length); i++) {
    if ((x[i] ?? 0) !== (y[i] ?? 0)) return (x[i] ?? 0) > (y[i] ?? 0);
  }
  return false;
}

/** The GLIBC_x.y versions the binary's dynamic symbols ask for, newest last. */
function glibcVersionsOf(binary: string): string[] {
  const table = execFileSync("objdump", ["-T", binary], { encoding: "utf8" });
  const versions = new Set([...table.matchAll(/GLIBC_([0-9.]+)/g)].map((m) => m[1]!));
  return [...versions].sort((a, b) => (newer(a, b) ? 1 : newer(b, a) ? -1 : 0));
}

const binary = path.join(ROOT, "native", `exactlock.${platformName()}.node`);
const build = JSON.parse(fs.readFileSync(path.join(ROOT, "native", "build.json"), "utf8")) as {
  toolchain: "zig" | "host";
  glibcFloor: string | null;
};
// CI and releases build with zig (`EXACTLOCK_BUILD=zig`); a clone without zig links against its own glibc.
const mustBeOld = process.env.EXACTLOCK_BUILD === "zig" || build.toolchain === "zig";
if (!mustBeOld) {
  console.warn(
    `glibc.test.ts: NOT CHECKED — native/ was linked against this machine's glibc (no zig); ` +
      "`pip install ziglang cargo-zigbuild && npm run build` builds the release binary this test checks",
  );
}

describe.runIf(platformName().endsWith("-gnu"))("the Linux (glibc) binary", () => {
  it("compares glibc versions numerically", () => {
    expect(newer("2.34", "2.4")).toBe(true);
    expect(newer("2.17", "2.28")).toBe(false);
    expect(newer("2.28", "2.28")).toBe(false);
  });

  it.runIf(mustBeOld)(`asks for no glibc newer than ${CEILING} (built for ${build.glibcFloor ?? "?"})`, () => {
    expect(build.toolchain).toBe("zig");
    const versions = glibcVersionsOf(binary);
    expect(versions.length).toBeGreaterThan(0);
    const newest = versions.at(-1)!;
    expect(newer(newest, CEILING), `newest GLIBC_ symbol version: ${newest}`).toBe(false);
    expect(newer(newest, build.glibcFloor!), `built for ${build.glibcFloor}, asks for ${newest}`).toBe(false);
  });
});
