import { execFileSync, spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { NO_BINARY_CODE, PREBUILT_PLATFORMS, platformName } from "../lib/native.ts";

const ROOT = path.join(__dirname, "..");
const scratch = fs.mkdtempSync(path.join(os.tmpdir(), "exactlock-loader-"));
afterAll(() => fs.rmSync(scratch, { recursive: true, force: true }));

/** An installed exactlock without its binary: what npm leaves when the optional platform package was omitted. */
function installWithoutBinary(): string {
  const project = path.join(scratch, "project");
  const pkg = path.join(project, "node_modules", "exactlock");
  fs.mkdirSync(path.join(pkg, "native"), { recursive: true });
  fs.cpSync(path.join(ROOT, "dist"), path.join(pkg, "dist"), { recursive: true });
  fs.copyFileSync(path.join(ROOT, "package.json"), path.join(pkg, "package.json"));
  for (const file of ["index.js", "index.d.ts"]) {
    fs.copyFileSync(path.join(ROOT, "native", file), path.join(pkg, "native", file));
  }
  return project;
}

/** Runs `script` with node in `cwd` and returns what it printed as JSON. */
function runNode(cwd: string, args: string[], script: string): { code?: string; message?: string; cause?: boolean; loaded?: boolean } {
  const env = { ...process.env };
  delete env.NAPI_RS_NATIVE_LIBRARY_PATH;
  const out = execFileSync(process.execPath, [...args, "-e", script], { cwd, env, encoding: "utf8" });
  return JSON.parse(out) as { code?: string; message?: string };
}

const REPORT = (load: string) =>
  `${load}.then(() => console.log(JSON.stringify({ loaded: true })), (e) => console.log(JSON.stringify({ code: e.code, message: e.message, cause: e.cause !== undefined })))`;

describe("loading the native binary", () => {
  it("names this platform the way the platform packages do", () => {
    expect(platformName("linux", "x64", true)).toBe("linux-x64-gnu");
    expect(platformName("linux", "arm64", false)).toBe("linux-arm64-musl");
    expect(platformName("darwin", "arm64", true)).toBe("darwin-arm64");
    expect(platformName("win32", "arm64", false)).toBe("win32-arm64-msvc");
    expect(PREBUILT_PLATFORMS).toContain(platformName());
  });

  it("lists exactly the platform packages in npm/ and the napi targets", () => {
    const dirs = fs.readdirSync(path.join(ROOT, "npm")).sort();
    expect([...PREBUILT_PLATFORMS].sort()).toEqual(dirs);
    const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, "package.json"), "utf8")) as { napi: { targets: string[] } };
    expect(pkg.napi.targets).toHaveLength(dirs.length);
    for (const dir of dirs) {
      const platformPkg = JSON.parse(fs.readFileSync(path.join(ROOT, "npm", dir, "package.json"), "utf8"));
      expect(platformPkg.name).toBe(`exactlock-${dir}`);
      expect(platformPkg.main).toBe(`exactlock.${dir}.node`);
      expect(platformPkg.os).toEqual([dir.split("-")[0]]);
      if (dir.startsWith("linux")) expect(platformPkg.libc).toEqual([dir.endsWith("musl") ? "musl" : "glibc"]);
    }
  });

  it("builds and tests every platform package in the CI workflow's matrix", () => {
    const workflow = fs.readFileSync(path.join(ROOT, ".github", "workflows", "CI.yml"), "utf8");
    const rows = [...workflow.matchAll(/^\s+platform: (\S+)$/gm)].map((m) => m[1]).sort();
    expect(rows).toEqual([...PREBUILT_PLATFORMS].sort());
    const targets = [...workflow.matchAll(/^\s+target: (\S+)$/gm)].map((m) => m[1]).sort();
    const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, "package.json"), "utf8")) as { napi: { targets: string[] } };
    expect(targets).toEqual([...pkg.napi.targets].sort());
  });

  it("fails with a coded error naming the platform and the fix when the platform package is missing", () => {
    const project = installWithoutBinary();
    for (const [args, load] of [
      [[], `Promise.resolve().then(() => require("exactlock"))`],
      [["--input-type=module"], `import("exactlock")`],
    ] as const) {
      const seen = runNode(project, [...args], REPORT(load));
      expect(seen.code, JSON.stringify(seen)).toBe(NO_BINARY_CODE);
      expect(seen.message).toContain(`the binary for ${platformName()}, Node ${process.version} is missing`);
      expect(seen.message).toContain(`its package exactlock-${platformName()} was not installed`);
      expect(seen.message).toContain("Reinstall without --omit=optional");
      // Short: what was found, what is missing, the one fix; the loader's errors are the cause.
      expect(seen.message!.length).toBeLessThan(260);
      expect(seen.cause).toBeTruthy();
    }
  });

  it("fails with the supported list on an architecture nothing is built for", () => {
    const preload = path.join(scratch, "riscv.cjs");
    fs.writeFileSync(preload, `Object.defineProperty(process, "arch", { value: "riscv64" });\n`);
    const seen = runNode(ROOT, ["-r", preload], REPORT(`Promise.resolve().then(() => require("./dist/index.js"))`));
    expect(seen.code, JSON.stringify(seen)).toBe(NO_BINARY_CODE);
    expect(seen.message).toContain(`no prebuilt binary for linux-riscv64-gnu, Node ${process.version}`);
    expect(seen.message).toContain(`(prebuilt: ${PREBUILT_PLATFORMS.join(", ")})`);
    expect(seen.message).toContain("Build one from source");
  });

  it("loads when the binary is there (the control for the two above)", () => {
    const seen = runNode(ROOT, [], REPORT(`Promise.resolve().then(() => require("./dist/index.js"))`));
    expect(seen).toEqual({ loaded: true });
    expect(spawnSync(process.execPath, ["-e", "require('./dist/index.js')"], { cwd: ROOT }).status).toBe(0);
  });

  it.skipIf(process.platform !== "linux")(
    "leaves the program's process.report settings as they were where /usr/bin/ldd is missing",
    () => {
      // Without ldd, napi's loader asks a process report which C library runs,
      // setting process.report.excludeNetwork on the way (a slim image).
      const hideLdd = path.join(scratch, "hide-ldd.cjs");
      fs.writeFileSync(
        hideLdd,
        `const fs = require("node:fs");
const read = fs.readFileSync;
fs.readFileSync = function (file, ...rest) {
  if (file === "/usr/bin/ldd") { globalThis.lddAsked = true; throw Object.assign(new Error("ENOENT"), { code: "ENOENT" }); }
  return read.call(this, file, ...rest);
};`,
      );
      const script = `require(${JSON.stringify(path.join(ROOT, "dist", "index.js"))});
console.log(JSON.stringify({ lddAsked: globalThis.lddAsked === true, excludeNetwork: process.report.excludeNetwork }));`;
      const out = execFileSync(process.execPath, ["--require", hideLdd, "-e", script], { encoding: "utf8" });
      expect(JSON.parse(out)).toEqual({ lddAsked: true, excludeNetwork: false });
      // A runtime whose process.report is not an object is left alone, and loads.
      const nullReport = `Object.defineProperty(process, "report", { value: null, configurable: true });
require(${JSON.stringify(path.join(ROOT, "dist", "index.js"))});
console.log(JSON.stringify({ loaded: true, report: process.report }));`;
      const loaded = execFileSync(process.execPath, ["--require", hideLdd, "-e", nullReport], { encoding: "utf8" });
      expect(JSON.parse(loaded)).toEqual({ loaded: true, report: null });
    },
  );
});

describe("the no-binary message", () => {
  it("says when the platform package is there but its binary did not load, the reason behind cause", async () => {
    const { noBinaryError } = await import("../lib/native.ts");
    const cause = new Error("libc.so.6: version `GLIBC_2.99' not found");
    const error = noBinaryError(cause, "linux-x64-gnu", true) as Error & { code: string };
    expect(error.code).toBe(NO_BINARY_CODE);
    expect(error.message).toContain("exactlock-linux-x64-gnu is installed but its binary did not load");
    expect(error.cause).toBe(cause);
  });
});
