#!/usr/bin/env node
// Builds the native addon into native/ (the .node, and napi's generated
// loader and types), then records how it was linked in native/build.json.
//
// On Linux (glibc) the binary we ship must load on old distributions, so when zig
// and cargo-zigbuild are at hand the addon is linked against glibc 2.17
// (`pip install ziglang cargo-zigbuild`). Without them it is linked against
// this machine's glibc: fine for a clone, not for a release.
//
//   EXACTLOCK_BUILD=auto  (default) zig when available, else this machine's glibc
//   EXACTLOCK_BUILD=zig   zig or fail (CI and releases)
//   EXACTLOCK_BUILD=host  this machine's toolchain only
//   --debug               a debug build (always the host toolchain)
import { execFileSync, spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = path.join(path.dirname(fileURLToPath(import.meta.url)), "..");
const OUT = path.join(ROOT, "native");
const GLIBC_FLOOR = "2.17";
const debug = process.argv.includes("--debug");
const mode = process.env.EXACTLOCK_BUILD ?? "auto";
if (!["auto", "zig", "host"].includes(mode)) fail(`EXACTLOCK_BUILD=${mode}: expected auto, zig or host`);

function fail(message) {
  console.error(`build-native: ${message}`);
  process.exit(1);
}

function onPath(command) {
  return spawnSync("sh", ["-c", `command -v ${command}`], { stdio: "ignore" }).status === 0;
}

/** The folder holding a `zig` executable: PATH's, or PyPI's `ziglang` package's. */
function zigFolder() {
  if (onPath("zig")) return null;
  const found = spawnSync("python3", ["-c", "import ziglang, os; print(os.path.dirname(ziglang.__file__))"], {
    encoding: "utf8",
  });
  const folder = found.status === 0 ? found.stdout.trim() : "";
  return folder && fs.existsSync(path.join(folder, "zig")) ? folder : undefined;
}

/** Rust's name for this CPU on Linux with glibc, when zig can link for it; otherwise null. */
function linuxGnuArch() {
  if (process.platform !== "linux" || !process.report?.getReport()?.header?.glibcVersionRuntime) return null;
  return { x64: "x86_64", arm64: "aarch64" }[process.arch] ?? null;
}

function napi(args, env = process.env) {
  const result = spawnSync("npx", ["napi", "build", "--platform", "--output-dir", "native", ...args], {
    cwd: ROOT,
    env,
    stdio: "inherit",
  });
  if (result.status !== 0) fail(`napi build ${args.join(" ")} exited with ${result.status ?? result.signal}`);
}

function build() {
  const arch = linuxGnuArch();
  if (debug || mode === "host" || arch === null) {
    napi(debug ? [] : ["--release"]);
    return { toolchain: "host", glibcFloor: null };
  }
  const folder = zigFolder();
  const zigReady = folder !== undefined && onPath("cargo-zigbuild");
  if (!zigReady) {
    if (mode === "zig") {
      fail("EXACTLOCK_BUILD=zig needs zig and cargo-zigbuild: `pip install ziglang cargo-zigbuild`");
    }
    console.error(
      "build-native: zig or cargo-zigbuild not found; linking against this machine's glibc " +
        "(fine here; a release binary needs `pip install ziglang cargo-zigbuild`)",
    );
    napi(["--release"]);
    return { toolchain: "host", glibcFloor: null };
  }
  const env = folder ? { ...process.env, PATH: `${folder}${path.delimiter}${process.env.PATH}` } : process.env;
  napi(["--release", "--cross-compile", "--target", `${arch}-unknown-linux-gnu.${GLIBC_FLOOR}`], env);
  return { toolchain: "zig", glibcFloor: GLIBC_FLOOR };
}

const linked = build();
const rustc = execFileSync("rustc", ["--version"], { encoding: "utf8" }).trim();
fs.writeFileSync(path.join(OUT, "build.json"), `${JSON.stringify({ ...linked, debug, rustc }, null, 2)}\n`);
