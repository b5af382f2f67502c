#!/usr/bin/env node
// Runs the shipped binaries this x86_64 glibc machine cannot run natively, under the
// runtime each is for (npm run test:emulated):
//
//   linux-arm64-gnu   arm64 Node 22 under qemu-user: the 3-process × 200-section counter,
//                     then the lock, hostile and multi-process vitest suites (acquire,
//                     hostile, multiprocess: SIGKILLed holders reclaimed among them)
//   linux-x64-musl    Bun's x64 musl build (native speed): the counter, then `bun test`
//   linux-arm64-musl  Bun's arm64 musl build under qemu-user: the counter, then `bun test`
//
//   node scripts/run-emulated.mjs [PLATFORM...]      (default: all three)
//
// Needs the binaries (npm run build:target -- cross) and the runtimes
// (.ci/emulator-setup.sh, which writes $XPLAT_DIR/emulators.sh; this script reads it).
//
// What the emulation changes, and how each run meets it, is listed in one place:
// __test__/emulation.ts. Two of those are set up here:
//   - the musl runs see musl's loader at /usr/bin/ldd, as on Alpine, in a private mount
//     namespace (unshare -m; root): napi's loader picks the C library from that file, and
//     this host's is glibc's;
//   - vitest under arm64 Node needs the arm64 build of rolldown's native binding, which
//     npm installed only for this host: it is unpacked beside the host's, once.
import { execFileSync, spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { checkArtifact } from "./check-artifact.mjs";
import { EMULATED, EmulatorMissing, runtimeFor } from "./emulators.mjs";
import { ROOT, binaryPath, findTarget } from "./targets.mjs";

/** The vitest files run under arm64 Node: the lock, hostile and multi-process scenarios. */
const NODE_SUITES = ["__test__/acquire.test.ts", "__test__/hostile.test.ts", "__test__/multiprocess.test.ts"];

function fail(message) {
  console.error(`run-emulated: ${message}`);
  process.exit(1);
}

function run(title, { command, args }, env) {
  console.log(`\n== ${title}\n   $ ${[command, ...args].join(" ")}`);
  const started = Date.now();
  const result = spawnSync(command, args, { cwd: ROOT, env, stdio: "inherit" });
  const seconds = ((Date.now() - started) / 1000).toFixed(1);
  const ok = result.status === 0;
  console.log(`   ${ok ? "passed" : `FAILED (${result.status ?? result.signal})`} in ${seconds} s`);
  return { title, ok, seconds };
}

/** rolldown's arm64 binding (vitest's bundler), unpacked into node_modules: npm installs the host's only. */
function ensureRolldownArm64() {
  const version = JSON.parse(fs.readFileSync(path.join(ROOT, "node_modules", "rolldown", "package.json"), "utf8")).version;
  const name = "@rolldown/binding-linux-arm64-gnu";
  const dir = path.join(ROOT, "node_modules", name);
  const manifest = path.join(dir, "package.json");
  if (fs.existsSync(manifest) && JSON.parse(fs.readFileSync(manifest, "utf8")).version === version) return;
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "exactlock-rolldown-"));
  try {
    const tarball = execFileSync("npm", ["pack", "--silent", `${name}@${version}`], { cwd: tmp, encoding: "utf8" }).trim();
    fs.rmSync(dir, { recursive: true, force: true });
    fs.mkdirSync(dir, { recursive: true });
    execFileSync("tar", ["xzf", path.join(tmp, tarball), "-C", dir, "--strip-components=1"]);
    console.log(`run-emulated: unpacked ${name}@${version} for vitest under arm64 Node`);
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

function runPlatform(platform) {
  const target = findTarget(platform);
  const binary = binaryPath(target);
  if (!fs.existsSync(binary)) fail(`${path.relative(ROOT, binary)} is missing: npm run build:target -- ${target.triple}`);
  if (!checkArtifact(binary, target).ok) fail(`${path.relative(ROOT, binary)} fails its artifact check: npm run check:artifact -- ${platform}`);
  let runtime;
  try {
    runtime = runtimeFor(platform, { ...process.env, EXACTLOCK_EXPECT_BINARY: path.basename(binary) });
  } catch (error) {
    if (error instanceof EmulatorMissing) fail(error.message);
    throw error;
  }
  const { label, kind, env, wrap } = runtime;
  const results = [];
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), `exactlock-${platform}-`));
  try {
    const counter = path.join(scratch, "counter");
    const counterScript = path.join(ROOT, "__test__", "emulated", "counter.cjs");
    results.push(run(`${label}: 3 processes × 200 sections`, wrap([counterScript, path.join(ROOT, "dist"), counter, "200", "3"]), env));
  } finally {
    fs.rmSync(scratch, { recursive: true, force: true });
  }
  if (kind === "node") {
    ensureRolldownArm64();
    const vitest = path.join(ROOT, "node_modules", "vitest", "vitest.mjs");
    results.push(run(`${label}: vitest ${NODE_SUITES.join(" ")}`, wrap([vitest, "run", ...NODE_SUITES]), env));
  } else {
    results.push(run(`${label}: bun test`, wrap(["test"]), env));
  }
  return results;
}

function main(argv) {
  const platforms = argv.length > 0 ? argv : Object.keys(EMULATED);
  for (const platform of platforms) {
    if (!EMULATED[platform]) fail(`${platform}: not one of ${Object.keys(EMULATED).join(", ")}`);
  }
  const results = platforms.flatMap(runPlatform);
  console.log("\n== emulated runs");
  for (const { ok, title, seconds } of results) console.log(`   ${ok ? "pass" : "FAIL"}  ${title}  (${seconds} s)`);
  if (results.some((result) => !result.ok)) process.exit(1);
}

main(process.argv.slice(2));
