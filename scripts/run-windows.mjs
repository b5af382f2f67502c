#!/usr/bin/env node
// Builds the Windows binary here and runs the Windows suite with the official Windows
// node.exe under Wine (npm run test:windows):
//
//   1. `npm run build:target -- x86_64-pc-windows-msvc`: on Linux, an x86_64-pc-windows-gnu
//      build with Debian's Rust and -Zbuild-std, linked by mingw-w64, written as
//      native/exactlock.win32-x64-msvc.node, the name napi's loader looks for under an official
//      (MSVC-built) node.exe. A napi addon's boundary is C's ABI, so the MinGW DLL loads there
//      (the published package is the workflow's MSVC build; scripts/targets.mjs).
//      .ci/windows-setup.sh makes the Wine prefix and node.exe's import library,
//      .ci/cross-setup.sh the toolchain. --no-build tests the binary native/ already has;
//   2. the crate's unit tests built for x86_64-pc-windows-gnu (`cargo test --no-run`) and run
//      under Wine: the Windows facade and platform layer against Wine's kernel, and every
//      platform-neutral test (records, verdicts, names). The POSIX-fixture modules are
//      compiled for unix only, each saying why;
//   3. `node.exe --test __test__/windows/` under Wine. node.exe cannot write to a pipe under
//      Wine (EBADF), so the reporter writes a file, printed here (the unit tests' output too).
//
//   node scripts/run-windows.mjs [--no-build]
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { ROOT } from "./targets.mjs";

const XPLAT_DIR = process.env.XPLAT_DIR ?? path.join(os.homedir(), ".cache", "exactlock-cross");

function fail(message) {
  console.error(`run-windows: ${message}`);
  process.exit(1);
}

/** The variables env.sh and windows.sh export, read by a shell that sources them. */
function crossEnv() {
  const scripts = ["env.sh", "windows.sh"].map((name) => path.join(XPLAT_DIR, name));
  const missing = scripts.filter((file) => !fs.existsSync(file));
  if (missing.length) fail(`${missing.join(", ")} missing: run .ci/cross-setup.sh and .ci/windows-setup.sh (as root)`);
  const shell = spawnSync("bash", ["-c", `${scripts.map((file) => `. '${file}'`).join(" && ")} && env -0`], {
    encoding: "utf8",
  });
  if (shell.status !== 0) fail(`sourcing ${scripts.join(", ")} failed: ${shell.stderr}`);
  return Object.fromEntries(
    shell.stdout
      .split("\0")
      .filter(Boolean)
      .map((line) => [line.slice(0, line.indexOf("=")), line.slice(line.indexOf("=") + 1)]),
  );
}

/** `/home/me/x` as Wine's node.exe names it: `Z:\home\me\x` (Wine maps `/` to drive Z:). */
function winePath(unixPath) {
  return `Z:${path.resolve(unixPath).replaceAll("/", "\\")}`;
}

function build(env) {
  const result = spawnSync(process.execPath, [path.join(ROOT, "scripts", "build-native.mjs"), "--target", "x86_64-pc-windows-msvc"], {
    cwd: ROOT,
    env,
    stdio: "inherit",
  });
  if (result.status !== 0) fail(`build-native exited with ${result.status ?? result.signal}`);
}

/** Builds the crate's unit tests for Windows and runs them under Wine. */
function runUnitTests(env) {
  console.log("== cargo test --target x86_64-pc-windows-gnu (-Zbuild-std), run under Wine");
  const started = Date.now();
  const built = spawnSync(
    "cargo",
    ["test", "-Zbuild-std", "--target", "x86_64-pc-windows-gnu", "--lib", "--no-run", "--message-format=json-render-diagnostics"],
    { cwd: ROOT, env, encoding: "utf8", stdio: ["ignore", "pipe", "inherit"], maxBuffer: 256 * 1024 * 1024 },
  );
  if (built.status !== 0) fail(`cargo test --no-run exited with ${built.status ?? built.signal}`);
  const exe = built.stdout
    .split("\n")
    .filter((line) => line.startsWith("{"))
    .map((line) => JSON.parse(line))
    .find((message) => message.reason === "compiler-artifact" && message.profile?.test && message.executable)?.executable;
  if (!exe) fail("cargo test --no-run named no test executable");
  const output = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "exactlock-windows-unit-")), "output.txt");
  const out = fs.openSync(output, "w");
  const result = spawnSync(env.WINE, [exe, "--test-threads=2"], { cwd: ROOT, env, stdio: ["ignore", out, out], timeout: 10 * 60_000 });
  fs.closeSync(out);
  const text = fs.readFileSync(output, "utf8");
  console.log(text.split("\n").filter((line) => !/ \.\.\. ok$/.test(line)).join("\n"));
  const seconds = ((Date.now() - started) / 1000).toFixed(1);
  if (result.status !== 0 || !/test result: ok\. \d+ passed; 0 failed/.test(text)) {
    fail(`the unit tests under Wine exited with ${result.status ?? result.signal} after ${seconds} s (output: ${output})`);
  }
  console.log(`run-windows: unit tests passed in ${seconds} s`);
}

function runSuite(env) {
  const report = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "exactlock-windows-")), "report.txt");
  const suite = path.join(ROOT, "__test__", "windows", "lock.test.mjs");
  const args = [
    env.NODE_WIN,
    "--test",
    "--test-reporter=spec",
    `--test-reporter-destination=${winePath(report)}`,
    winePath(suite),
  ];
  console.log(`== Windows node.exe under Wine: node.exe --test ${path.relative(ROOT, suite)}`);
  const started = Date.now();
  const result = spawnSync(env.WINE, args, {
    cwd: ROOT,
    env: { ...env, EXACTLOCK_DIST: winePath(path.join(ROOT, "dist")) },
    stdio: ["ignore", "ignore", "inherit"],
    timeout: 10 * 60_000,
  });
  console.log(fs.existsSync(report) ? fs.readFileSync(report, "utf8") : "(no report written)");
  const seconds = ((Date.now() - started) / 1000).toFixed(1);
  if (result.status !== 0) fail(`node.exe --test exited with ${result.status ?? result.signal} after ${seconds} s`);
  console.log(`run-windows: passed in ${seconds} s`);
}

const env = crossEnv();
if (!process.argv.includes("--no-build")) build(env);
else if (!fs.existsSync(path.join(ROOT, "native", "exactlock.win32-x64-msvc.node"))) fail("--no-build, and native/ has no exactlock.win32-x64-msvc.node");
runUnitTests(env);
runSuite(env);
