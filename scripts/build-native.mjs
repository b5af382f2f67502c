#!/usr/bin/env node
// Builds the native addon into native/ (the .node, and napi's generated
// loader and types), then records how it was linked: native/build.json for
// this machine's platform, native/build.<platform>.json for every build.
//
//   node scripts/build-native.mjs                   this machine's platform (npm run build, prepare)
//   node scripts/build-native.mjs --debug           a debug build (always the host toolchain)
//   node scripts/build-native.mjs --target TRIPLE…  any platform package.json ships, `all`, or
//                                                    `cross` (all but this machine's)
//                                                    (npm run build:target -- TRIPLE), each
//                                                    then checked by scripts/check-artifact.mjs
//
// On Linux (glibc) the binary we ship must load on old distributions, so when zig
// and cargo-zigbuild are at hand the addon is linked against glibc 2.17
// (`pip install ziglang cargo-zigbuild`). Without them it is linked against
// this machine's glibc: fine for a clone, not for a release.
//
//   EXACTLOCK_BUILD=auto  (default) zig when available, else this machine's glibc
//   EXACTLOCK_BUILD=zig   zig or fail (CI and releases)
//   EXACTLOCK_BUILD=host  this machine's toolchain only
//
// Another platform's binary (--target) is linked by zig through cargo-zigbuild
// (glibc 2.17, musl, or Mach-O; a Mac links either darwin binary itself; Windows,
// on a machine that is not Windows, is built as MinGW: see buildWindowsHere), with
// MACOSX_DEPLOYMENT_TARGET set to the macOS floor of scripts/targets.mjs. Its
// standard library comes prebuilt with the toolchain (`rustup target add TRIPLE`)
// or, where the toolchain has none but carries the library's source (Debian's
// rustc-web + rust-web-src, which .ci/cross-setup.sh installs), is built with
// `-Zbuild-std`.
// Every target shares cargo's one target folder (target/, or $CARGO_TARGET_DIR):
// a target's second build only rebuilds what changed.
//
// This machine's build is skipped when nothing it is made from changed since the
// last one (native/build.json records a SHA-256 of the Rust sources, the manifests,
// the toolchain and the build mode): `npx exactlock` in a clone installs the clone as
// a package and runs its `prepare` again, which would otherwise rebuild the addon
// for half a minute. EXACTLOCK_FORCE_BUILD=1 builds anyway.
import { execFileSync, spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import * as fs from "node:fs";
import * as path from "node:path";
import { checkArtifact, printReport } from "./check-artifact.mjs";
import { BINARY_NAME, GLIBC_FLOOR, ROOT, binaryPath, findTarget, shippedTargets } from "./targets.mjs";

const OUT = path.join(ROOT, "native");

function fail(message) {
  console.error(`build-native: ${message}`);
  process.exit(1);
}

function onPath(command) {
  return spawnSync("sh", ["-c", `command -v ${command}`], { stdio: "ignore" }).status === 0;
}

/** The folder holding a `zig` executable: PATH's (null), PyPI's `ziglang` package's, or undefined if none. */
function zigFolder() {
  if (onPath("zig")) return null;
  const found = spawnSync("python3", ["-c", "import ziglang, os; print(os.path.dirname(ziglang.__file__))"], {
    encoding: "utf8",
  });
  const folder = found.status === 0 ? found.stdout.trim() : "";
  return folder && fs.existsSync(path.join(folder, "zig")) ? folder : undefined;
}

/** The environment in which zig and cargo-zigbuild are found; null when they are not. */
function zigEnv(env) {
  const folder = zigFolder();
  if (folder === undefined || !onPath("cargo-zigbuild")) return null;
  return folder ? { ...env, PATH: `${folder}${path.delimiter}${env.PATH}` } : env;
}

/** This machine's shipped target, if it is one: same OS, CPU and (on Linux) C library. */
function hostTarget() {
  const glibc = Boolean(process.report?.getReport()?.header?.glibcVersionRuntime);
  const arch = { x64: "x86_64", arm64: "aarch64" }[process.arch];
  return shippedTargets().find(
    (target) =>
      target.os === process.platform &&
      target.arch === arch &&
      (target.os !== "linux" || target.libc === (glibc ? "gnu" : "musl")),
  );
}

function rustc(...args) {
  return execFileSync(process.env.RUSTC ?? "rustc", args, { encoding: "utf8" }).trim();
}

/**
 * Where the target's standard library comes from: `prebuilt` (the toolchain ships it),
 * `source` (built with -Zbuild-std from the toolchain's rust-src), or null (neither).
 */
function standardLibrary(triple) {
  const libdir = rustc("--print", "target-libdir", "--target", triple);
  if (fs.existsSync(libdir) && fs.readdirSync(libdir).some((file) => /^libstd-.*\.rlib$/.test(file))) {
    return "prebuilt";
  }
  const source = path.join(rustc("--print", "sysroot"), "lib", "rustlib", "src", "rust", "library", "Cargo.lock");
  return fs.existsSync(source) ? "source" : null;
}

function napi(args, env = process.env) {
  const result = spawnSync("npx", ["napi", "build", "--platform", "--output-dir", "native", ...args], {
    cwd: ROOT,
    env,
    stdio: "inherit",
    // npx is npx.cmd on Windows, which only a shell runs.
    shell: process.platform === "win32",
  });
  if (result.status !== 0) fail(`napi build ${args.join(" ")} exited with ${result.status ?? result.signal}`);
}

/**
 * This machine's platform: zig for a glibc Linux release binary when it can, else the
 * host's toolchain for its own host triple (no --target: Alpine's rustc, for one, has
 * std only for `x86_64-alpine-linux-musl`, which napi names linux-x64-musl all the same).
 */
function buildHost(target, { debug, mode }) {
  const env = target?.macosMin ? { ...process.env, MACOSX_DEPLOYMENT_TARGET: target.macosMin } : process.env;
  if (debug || mode === "host" || target?.libc !== "gnu") {
    // Windows names its target: rustc's host triple and Node's process.arch could disagree
    // (an x64 toolchain on an arm64 runner), and the file must be the package's.
    const named = target?.os === "win32" && process.platform === "win32" ? ["--target", target.triple] : [];
    napi([...(debug ? [] : ["--release"]), ...named], env);
    return { toolchain: "host", glibcFloor: null };
  }
  const withZig = zigEnv(env);
  if (!withZig) {
    if (mode === "zig") {
      fail("EXACTLOCK_BUILD=zig needs zig and cargo-zigbuild: `pip install ziglang cargo-zigbuild`");
    }
    console.error(
      "build-native: zig or cargo-zigbuild not found; linking against this machine's glibc " +
        "(fine here; a release binary needs `pip install ziglang cargo-zigbuild`)",
    );
    napi(["--release"], env);
    return { toolchain: "host", glibcFloor: null };
  }
  napi(["--release", "--cross-compile", "--target", `${target.triple}.${GLIBC_FLOOR}`], withZig);
  return { toolchain: "zig", glibcFloor: GLIBC_FLOOR };
}

/**
 * A Windows binary on a machine that is not Windows: the MinGW ABI of the target's CPU
 * (scripts/targets.mjs `crossTriple`) with -Zbuild-std, linked by mingw-w64 (x64) or zig
 * (arm64, scripts/zig-cc-windows-arm64.sh), named as the MSVC package's binary.
 * .ci/windows-setup.sh provides the linkers and node.exe's import library for each CPU,
 * which napi-build insists on ($XPLAT_DIR/windows.sh exports where they are).
 */
function buildWindowsHere(target) {
  const triple = target.crossTriple;
  const libnode = process.env[`EXACTLOCK_LIBNODE_${target.arch.toUpperCase()}`];
  if (!libnode) {
    fail(`${target.triple} is built here as ${triple}: run .ci/windows-setup.sh (as root), then \`. ~/.cache/exactlock-cross/windows.sh\``);
  }
  const std = standardLibrary(triple);
  if (!std) fail(`no standard library for ${triple} in ${rustc("--version")}: .ci/cross-setup.sh installs one, then \`. ~/.cache/exactlock-cross/env.sh\``);
  let env = { ...process.env, LIBNODE_PATH: libnode };
  if (std === "source") env.RUSTC_BOOTSTRAP = "1";
  if (target.arch === "x86_64") {
    env.CARGO_TARGET_X86_64_PC_WINDOWS_GNU_LINKER ??= "x86_64-w64-mingw32-gcc";
  } else {
    env = zigEnv(env) ?? fail(`${triple} is linked by zig: \`pip install ziglang cargo-zigbuild\``);
    env.CARGO_TARGET_AARCH64_PC_WINDOWS_GNULLVM_LINKER = path.join(ROOT, "scripts", "zig-cc-windows-arm64.sh");
  }
  napi(["--release", "--target", triple, ...(std === "source" ? ["--", "-Zbuild-std=std,panic_abort"] : [])], env);
  // napi names the file for the triple it built (…win32-x64-gnu.node); the package's is -msvc.
  const built = path.join(OUT, `${BINARY_NAME}.${target.platform.replace(/-msvc$/, "")}-${triple.split("-").at(-1)}.node`);
  fs.renameSync(built, binaryPath(target));
  return { toolchain: target.arch === "x86_64" ? "mingw-w64" : "zig", builtAs: triple, glibcFloor: null, std };
}

/** Another platform's release binary. */
function buildOther(target) {
  if (target.os === "win32" && process.platform !== "win32") return buildWindowsHere(target);
  const std = standardLibrary(target.triple);
  if (!std) {
    fail(
      `no standard library for ${target.triple} in ${rustc("--version")}: ` +
        `\`rustup target add ${target.triple}\`, or a toolchain with the library's source ` +
        "(.ci/cross-setup.sh installs Debian's; then `. ~/.cache/exactlock-cross/env.sh`)",
    );
  }
  const env = { ...process.env };
  if (target.macosMin) env.MACOSX_DEPLOYMENT_TARGET = target.macosMin;
  // -Zbuild-std is unstable; RUSTC_BOOTSTRAP lets the stable compiler and cargo accept it.
  if (std === "source") env.RUSTC_BOOTSTRAP = "1";
  const buildStd = std === "source" ? ["--", "-Zbuild-std=std,panic_abort"] : [];
  // A Mac links both darwin binaries with Apple's own linker.
  if (target.os === "darwin" && process.platform === "darwin") {
    napi(["--release", "--target", target.triple, ...buildStd], env);
    return { toolchain: "host", glibcFloor: null, std };
  }
  const withZig = zigEnv(env);
  if (!withZig) fail(`${target.triple} is linked by zig: \`pip install ziglang cargo-zigbuild\``);
  const zigTriple = target.libc === "gnu" ? `${target.triple}.${GLIBC_FLOOR}` : target.triple;
  napi(["--release", "--cross-compile", "--target", zigTriple, ...buildStd], withZig);
  return { toolchain: "zig", glibcFloor: target.libc === "gnu" ? GLIBC_FLOOR : null, std };
}

/** The files the addon is built from, relative to ROOT, sorted. */
function buildInputs() {
  const inputs = ["Cargo.toml", "Cargo.lock", "build.rs", "rust-toolchain.toml", ".cargo/config.toml", ".cargo/config"].filter(
    (file) => fs.existsSync(path.join(ROOT, file)),
  );
  const walk = (dir) => {
    for (const entry of fs.readdirSync(path.join(ROOT, dir), { withFileTypes: true })) {
      const relative = path.join(dir, entry.name);
      if (entry.isDirectory()) walk(relative);
      else if (entry.isFile()) inputs.push(relative);
    }
  };
  walk("src");
  return inputs.sort();
}

/** A SHA-256 of everything this machine's build depends on: sources, toolchain, mode. */
function buildFingerprint(mode, debug) {
  const hash = createHash("sha256");
  // In auto mode, whether zig is at hand decides the glibc floor: part of what is built.
  const zig = mode === "auto" ? zigEnv(process.env) !== null : null;
  const manifest = JSON.parse(fs.readFileSync(path.join(ROOT, "package.json"), "utf8"));
  const napiCli = JSON.parse(fs.readFileSync(path.join(ROOT, "node_modules", "@napi-rs", "cli", "package.json"), "utf8")).version;
  // What else reaches cargo or the napi CLI from the environment.
  const env = Object.fromEntries(
    Object.entries(process.env).filter(([key]) => /^(RUSTFLAGS|RUSTC|RUSTC_WRAPPER|CARGO_(?!TERM|HOME|REGISTRIES)\w*|NAPI_\w*|MACOSX_DEPLOYMENT_TARGET)$/.test(key)),
  );
  hash.update(
    JSON.stringify({ mode, zig, debug, rustc: rustc("--version"), arch: process.arch, platform: process.platform, napi: manifest.napi, napiCli, env }),
  );
  for (const file of buildInputs()) {
    hash.update(`\0${file}\0`);
    hash.update(fs.readFileSync(path.join(ROOT, file)));
  }
  return hash.digest("hex");
}

function sha256Of(file) {
  return fs.existsSync(file) ? createHash("sha256").update(fs.readFileSync(file)).digest("hex") : null;
}

/** Whether native/ already holds this machine's build of exactly these inputs. */
function upToDate(fingerprint) {
  if (process.env.EXACTLOCK_FORCE_BUILD === "1") return false;
  const host = hostTarget();
  try {
    const built = JSON.parse(fs.readFileSync(path.join(OUT, "build.json"), "utf8"));
    // The binary itself too: one copied in from elsewhere is not this build.
    return (
      host !== undefined &&
      built.fingerprint === fingerprint &&
      built.binarySha256 === sha256Of(binaryPath(host)) &&
      fs.existsSync(path.join(OUT, "index.js")) &&
      fs.existsSync(path.join(OUT, "index.d.ts"))
    );
  } catch {
    return false;
  }
}

function record(file, linked) {
  fs.writeFileSync(path.join(OUT, file), `${JSON.stringify(linked, null, 2)}\n`);
}

function buildFor(name, mode) {
  const target = findTarget(name);
  if (!target) {
    fail(`${name} is not a target package.json ships; one of: ${shippedTargets().map((t) => t.triple).join(", ")}`);
  }
  const started = Date.now();
  const host = hostTarget();
  const linked = host?.triple === target.triple ? buildHost(target, { debug: false, mode }) : buildOther(target);
  const seconds = Math.round((Date.now() - started) / 100) / 10;
  const info = {
    target: target.triple,
    platform: target.platform,
    ...linked,
    std: linked.std ?? "prebuilt",
    macosMin: target.macosMin ?? null,
    debug: false,
    rustc: rustc("--version"),
    seconds,
  };
  record(`build.${target.platform}.json`, info);
  if (host?.triple === target.triple) record("build.json", info);
  console.log(`build-native: ${target.triple} built in ${seconds} s`);
  const report = checkArtifact(binaryPath(target), target);
  printReport(report);
  return report.ok;
}

function main(argv) {
  const mode = process.env.EXACTLOCK_BUILD ?? "auto";
  if (!["auto", "zig", "host"].includes(mode)) fail(`EXACTLOCK_BUILD=${mode}: expected auto, zig or host`);
  const at = argv.indexOf("--target");
  if (at === -1) {
    const debug = argv.includes("--debug");
    const fingerprint = buildFingerprint(mode, debug);
    if (upToDate(fingerprint)) {
      console.log("build-native: native/ is this machine's build of the current sources; skipped (EXACTLOCK_FORCE_BUILD=1 rebuilds)");
      return;
    }
    // An interrupted build must not leave the old record vouching for a new binary.
    fs.rmSync(path.join(OUT, "build.json"), { force: true });
    const linked = buildHost(hostTarget(), { debug, mode });
    const host = hostTarget();
    const binarySha256 = host ? sha256Of(binaryPath(host)) : null;
    record("build.json", { ...linked, debug, rustc: rustc("--version"), fingerprint, binarySha256 });
    return;
  }
  const names = argv.slice(at + 1).filter((arg) => !arg.startsWith("--"));
  if (names.length === 0) fail("--target needs a triple (or `all`, or `cross`)");
  const every = shippedTargets().map((target) => target.triple);
  const targets = names.includes("all")
    ? every
    : names.includes("cross")
      ? every.filter((triple) => triple !== hostTarget()?.triple)
      : names;
  const bad = targets.filter((name) => !buildFor(name, mode));
  if (bad.length > 0) fail(`artefact check failed: ${bad.join(", ")}`);
}

main(process.argv.slice(2));
