#!/usr/bin/env node
// The registry round trip: what `npm install exactlock` and `bun add exactlock` do for a user.
//
// Stages the packages (scripts/stage-release.mjs: the main package and the platform package
// built here), starts a throwaway verdaccio on 127.0.0.1 with its storage in a temp dir
// (exactlock's packages local only, everything else proxied to the npm registry), publishes
// them, then in fresh projects: `npm install exactlock` with no cargo or rustc on PATH and
// `bun add exactlock`; checks nothing ran at install; type-checks a strict nodenext consumer
// (ESM and CommonJS) with tsc and runs its vitest and bun suites, a two-process counter among
// them. Stops the registry and removes the temp dir on every path.
//
// With --release it is the dry run of the whole publish path (npm run test:release, in
// .ci/run once every target is built): stage-release without --partial (one platform
// package per shipped target, each binary checked, package.json's source fields present), published by
// scripts/publish-release.mjs (platform packages first, main last), then for each other
// shipped target a consumer installs exactlock through that target's own package
// (`npm install --os --cpu --libc`), and where this machine can run the target
// (scripts/emulators.mjs) runs its own tests under that target's runtime: vitest under arm64
// Node for linux-arm64-gnu, `bun test` under musl Bun for the musl ones. The macOS and
// Windows packages are installed and their binaries checked as files.
//
//   node __test__/registry/roundtrip.mjs            (npm run test:registry)
//   node __test__/registry/roundtrip.mjs --release  (npm run test:release)
import { execFileSync, spawn, spawnSync } from "node:child_process";
import * as fs from "node:fs";
import { createServer } from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import { fileURLToPath } from "node:url";
import { checkArtifact } from "../../scripts/check-artifact.mjs";
import { EMULATED, runtimeFor } from "../../scripts/emulators.mjs";
import { SOURCE_FIELDS } from "../../scripts/stage-release.mjs";
import { shippedTargets } from "../../scripts/targets.mjs";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.join(HERE, "..", "..");
const VERDACCIO = "6.0.5"; // 6.10 needs Node 22; 6.0.5 runs on Node 20
const TOOLS = path.join(ROOT, "node_modules", ".cache", `exactlock-verdaccio-${VERDACCIO}`);
const BIN = path.join(ROOT, "node_modules", ".bin");
const repoManifest = JSON.parse(fs.readFileSync(path.join(ROOT, "package.json"), "utf8"));
const versionOf = (name) => JSON.parse(fs.readFileSync(path.join(ROOT, "node_modules", name, "package.json"), "utf8")).version;

const RELEASE = process.argv.includes("--release");
/** This machine's platform as the packages name it (the round trip runs on every CI runner). */
const HOST = (() => {
  if (process.platform !== "linux") return `${process.platform}-${process.arch}`;
  const glibc = Boolean(process.report?.getReport()?.header?.glibcVersionRuntime);
  return `linux-${process.arch}-${glibc ? "gnu" : "musl"}`;
})();
const work = fs.mkdtempSync(path.join(os.tmpdir(), "exactlock-registry-"));
let registry = null;

function step(title) {
  console.log(`\n== registry round trip: ${title}`);
}

function check(condition, message) {
  if (!condition) throw new Error(`registry round trip: ${message}`);
  console.log(`   ok: ${message}`);
}

/** Runs a command, echoing it; returns stdout+stderr; throws on a non-zero exit. */
function run(command, args, options = {}) {
  const started = performance.now();
  const result = spawnSync(command, args, { encoding: "utf8", ...options, env: options.env ?? process.env });
  const seconds = ((performance.now() - started) / 1000).toFixed(1);
  const output = `${result.stdout ?? ""}${result.stderr ?? ""}`;
  console.log(`   $ ${path.basename(command)} ${args.join(" ")}  (${seconds} s, ${options.cwd ? path.relative(work, options.cwd) || "." : "repo"})`);
  if (result.status !== 0) {
    console.log(output);
    throw new Error(`registry round trip: \`${path.basename(command)} ${args.join(" ")}\` exited with ${result.status ?? result.signal}`);
  }
  return { output, seconds: Number(seconds) };
}

function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

function installVerdaccio() {
  if (fs.existsSync(path.join(TOOLS, "node_modules", "verdaccio", "package.json"))) return;
  step(`installing verdaccio ${VERDACCIO} into ${path.relative(ROOT, TOOLS)} (once)`);
  run("npm", ["install", "--no-audit", "--no-fund", "--no-save", "--prefix", TOOLS, `verdaccio@${VERDACCIO}`]);
}

async function startRegistry() {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}/`;
  const config = path.join(work, "verdaccio.yaml");
  fs.writeFileSync(
    config,
    [
      `storage: ${path.join(work, "storage")}`,
      `auth:\n  htpasswd:\n    file: ${path.join(work, "htpasswd")}\n    max_users: 10`,
      "uplinks:\n  npmjs:\n    url: https://registry.npmjs.org/",
      "packages:",
      // exactlock's own names are never fetched from the public registry: only what we publish here.
      "  'exactlock':\n    access: $all\n    publish: $authenticated",
      "  'exactlock-*':\n    access: $all\n    publish: $authenticated",
      "  '**':\n    access: $all\n    proxy: npmjs",
      "log: { type: stdout, format: pretty, level: warn }",
      "",
    ].join("\n"),
  );
  const log = fs.openSync(path.join(work, "verdaccio.log"), "w");
  const child = spawn(
    process.execPath,
    [path.join(TOOLS, "node_modules", "verdaccio", "bin", "verdaccio"), "--config", config, "--listen", `127.0.0.1:${port}`],
    { stdio: ["ignore", log, log] },
  );
  registry = child;
  for (let i = 0; i < 300; i++) {
    if (child.exitCode !== null) break;
    const ok = await fetch(`${url}-/ping`).then((r) => r.ok, () => false);
    if (ok) return url;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`verdaccio did not answer on ${url}: ${fs.readFileSync(path.join(work, "verdaccio.log"), "utf8")}`);
}

/** A user on the throwaway registry, and an npmrc that logs in as it (only for this run). */
async function login(url) {
  const response = await fetch(`${url}-/user/org.couchdb.user:roundtrip`, {
    method: "PUT",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ name: "roundtrip", password: "roundtrip-password", type: "user" }),
  });
  const { token } = await response.json();
  if (!token) throw new Error(`verdaccio refused the user (${response.status})`);
  const npmrc = path.join(work, "npmrc");
  const host = url.replace(/^http:/, "");
  fs.writeFileSync(npmrc, `registry=${url}\n${host}:_authToken=${token}\n`);
  return npmrc;
}

/**
 * The environment without npm's settings: under `npm test` npm exports its whole config as
 * npm_config_* (the caller's userconfig, cache, omit_lockfile_registry_resolved…), which
 * would reach the consumer's npm ahead of the throwaway registry's .npmrc.
 */
function withoutNpmConfig(env) {
  return Object.fromEntries(
    Object.entries(env).filter(([key]) => !/^npm_(config|package|lifecycle)_/i.test(key) && key !== "npm_execpath"),
  );
}

/** The first executable file named `name` in this process's PATH, as the shell would find it. */
function onPath(name) {
  for (const dir of (process.env.PATH ?? "").split(path.delimiter)) {
    const candidate = path.join(dir || ".", name);
    try {
      fs.accessSync(candidate, fs.constants.X_OK);
      if (fs.statSync(candidate).isFile()) return candidate;
    } catch {
      // Not here: the next folder.
    }
  }
  throw new Error(`registry round trip: no ${name} on PATH`);
}

/**
 * npm's own entry script (`npm-cli.js`, run by node through its shebang), not whatever
 * `npm` is first on PATH: under asdf or nodenv that is a shell shim needing bash, which the
 * consumer's PATH does not have. npm names it in `npm_execpath` when it runs this script;
 * otherwise the `npm` on PATH, resolved through its links.
 */
function npmCli() {
  const named = process.env.npm_execpath;
  if (named && /npm-cli\.js$/.test(named) && fs.existsSync(named)) return named;
  return fs.realpathSync(onPath("npm"));
}

/**
 * The consumer's PATH, built up from what it looks up by name rather than filtered down: a
 * distro's or Homebrew's cargo shares /usr/bin or /opt/homebrew/bin with node and npm, so no
 * folder can be left out to hide it. One folder of links: node (the `#!/usr/bin/env node` of
 * npm, tsc and vitest) and npm. That is all a traced run looked up (`strace -f -e
 * trace=execve`): everything else it runs is started by absolute path — /usr/bin/env by the
 * kernel, tsc's native binary, node through process.execPath (vitest's workers, the
 * consumer's children), bun through BIN and its children through its execPath. npm ran no
 * lifecycle script, so no sh. A tool added to the run later fails here as "not found",
 * naming it.
 */
function consumerPath() {
  const bin = path.join(work, "consumer-bin");
  fs.mkdirSync(bin);
  for (const [name, target] of [["node", process.execPath], ["npm", npmCli()]]) {
    fs.symlinkSync(target, path.join(bin, name));
  }
  return bin;
}

function consumerProject(name, npmrc, extra = {}) {
  const dir = path.join(work, name);
  fs.cpSync(path.join(HERE, "consumer"), dir, { recursive: true });
  fs.copyFileSync(npmrc, path.join(dir, ".npmrc"));
  const manifest = { name: `exactlock-${name}`, private: true, version: "0.0.0", ...extra };
  fs.writeFileSync(path.join(dir, "package.json"), `${JSON.stringify(manifest, null, 2)}\n`);
  return dir;
}

function checkStaged(staged) {
  step("what is published");
  const packed = staged.packages;
  const main = packed.at(-1);
  const platforms = packed.slice(0, -1);
  check(main.name === "exactlock", "the last tarball is the main package");
  if (RELEASE) {
    check(staged.publishable, "the staging is a release (every target's binary present and checked)");
    check(platforms.length === shippedTargets().length, `${platforms.length} platform packages, one per shipped target`);
  } else {
    // This clone may have built one target or all of them: publishable exactly when nothing is left out.
    check(staged.publishable === (staged.left.length === 0), `a --partial staging, publishable: ${staged.publishable} (${staged.left.length} left out)`);
  }
  check(!main.files.some((file) => file.endsWith(".node")), "the main package holds no .node");
  const published = JSON.parse(fs.readFileSync(path.join(work, "release", "exactlock", "package.json"), "utf8"));
  check(published.scripts === undefined, "the main package.json has no scripts (no prepare, no install hook)");
  for (const [dep, version] of Object.entries(published.optionalDependencies)) {
    check(version === repoManifest.version, `optional dependency ${dep} pinned to ${version}`);
  }
  const here = platforms.find((p) => p.name === `exactlock-${HOST}`);
  check(here !== undefined && here.files.some((file) => file.endsWith(".node")), `the ${HOST} package holds the .node`);
  for (const platform of platforms) {
    const manifest = JSON.parse(fs.readFileSync(path.join(work, "release", platform.name, "package.json"), "utf8"));
    check(manifest.scripts === undefined, `${platform.name} has no scripts`);
    check(platform.files.some((file) => file.endsWith(".node")), `${platform.name} holds its .node`);
    if (RELEASE) {
      const missing = SOURCE_FIELDS.filter((field) => manifest[field] === undefined);
      check(missing.length === 0, `${platform.name} names its source (${SOURCE_FIELDS.join(", ")}) for provenance`);
    }
  }
}

async function main() {
  step("staging the packages");
  run(process.execPath, [
    path.join(ROOT, "scripts", "stage-release.mjs"),
    "--out",
    path.join(work, "release"),
    ...(RELEASE ? [] : ["--partial"]),
  ]);
  const staged = JSON.parse(fs.readFileSync(path.join(work, "release", "packed.json"), "utf8"));
  checkStaged(staged);

  installVerdaccio();
  step("starting verdaccio on 127.0.0.1");
  const url = await startRegistry();
  const npmrc = await login(url);
  // A cache of its own: the user's cache may hold exactlock's tarballs from an earlier run's
  // registry (another port), and npm would install those instead of asking this one.
  const userEnv = {
    ...withoutNpmConfig(process.env),
    NPM_CONFIG_USERCONFIG: npmrc,
    npm_config_registry: url,
    npm_config_cache: path.join(work, "npm-cache"),
  };
  if (RELEASE) {
    // The release's own command; the workflow adds --provenance --access public.
    const published = run(process.execPath, [path.join(ROOT, "scripts", "publish-release.mjs"), "--dir", path.join(work, "release"), "--registry", url], { env: userEnv });
    const order = [...published.output.matchAll(/^publish-release: npm publish (\S+)/gm)].map((m) => path.basename(m[1]));
    check(order.length === staged.packages.length && order.at(-1).startsWith("exactlock-0"), `published in order, the main package last: ${order.join(", ")}`);
  } else {
    for (const { tarball } of staged.packages) {
      run("npm", ["publish", tarball, "--registry", url], { env: userEnv });
    }
  }

  step("npm install exactlock, without cargo or rustc");
  const noRust = consumerPath();
  for (const tool of ["cargo", "rustc"]) {
    // Looked up as the consumer's npm would look it up; only "not found" counts.
    const found = spawnSync(tool, ["--version"], { env: { PATH: noRust } });
    check(found.error?.code === "ENOENT", `no ${tool} on the consumer's PATH (${noRust})`);
  }
  const npmProject = consumerProject("npm-consumer", npmrc, {
    devDependencies: {
      "@types/node": versionOf("@types/node"),
      typescript: versionOf("typescript"),
      vitest: versionOf("vitest"),
    },
  });
  const consumerEnv = { ...userEnv, PATH: noRust };
  run("npm", ["install", "--no-audit", "--no-fund"], { cwd: npmProject, env: consumerEnv });
  const installed = run("npm", ["install", "--no-audit", "--no-fund", "exactlock"], { cwd: npmProject, env: consumerEnv });
  check(!/exactlock/.test(installed.output.split("\n").filter((l) => /script/i.test(l)).join("\n")),
    "npm reports no install script of exactlock's");
  check(installed.seconds < 60, `npm install exactlock took ${installed.seconds} s`);
  const lock = JSON.parse(fs.readFileSync(path.join(npmProject, "package-lock.json"), "utf8"));
  for (const name of ["exactlock", `exactlock-${HOST}`]) {
    const entry = lock.packages[`node_modules/${name}`];
    check(entry?.resolved?.startsWith(url) === true, `${name} came from the local registry (${entry?.resolved})`);
  }
  check(!fs.existsSync(path.join(npmProject, "node_modules", "exactlock", "native", `exactlock.${HOST}.node`)),
    "the binary is the platform package's, not the main package's");

  step("the TypeScript consumer (strict, nodenext; ESM and CommonJS)");
  const tsc = path.join(npmProject, "node_modules", ".bin", "tsc");
  run(tsc, ["--noEmit", "-p", "tsconfig.test.json"], { cwd: npmProject, env: consumerEnv });
  run(tsc, ["-p", "tsconfig.json"], { cwd: npmProject, env: consumerEnv });
  const vitest = run(path.join(npmProject, "node_modules", ".bin", "vitest"), ["run"], { cwd: npmProject, env: consumerEnv });
  check(/Tests\s+3 passed \(3\)/.test(vitest.output.replace(/\x1b\[[0-9;]*m/g, "")), "the consumer's vitest suite: 3 of 3 passed");
  run(process.execPath, [path.join(npmProject, "node_modules", "exactlock", "bin", "exactlock.js"), "--version"],
    { cwd: npmProject, env: consumerEnv });

  bundled(npmProject, consumerEnv);

  step("bun add exactlock");
  const bun = path.join(BIN, "bun");
  const bunProject = consumerProject("bun-consumer", npmrc);
  fs.appendFileSync(path.join(bunProject, "bunfig.toml"), `\n[install]\nregistry = "${url}"\n`);
  const added = run(bun, ["add", "exactlock"], {
    cwd: bunProject,
    // Bun's cache too is this run's own: an earlier run's exactlock-0.1.0 is not this build.
    env: { ...consumerEnv, BUN_CONFIG_REGISTRY: url, BUN_INSTALL_CACHE_DIR: path.join(work, "bun-cache") },
  });
  check(added.seconds < 60, `bun add exactlock took ${added.seconds} s`);
  check(fs.existsSync(path.join(bunProject, "node_modules", `exactlock-${HOST}`, `exactlock.${HOST}.node`)),
    "bun installed the platform package");
  const bunTest = run(bun, ["test"], { cwd: bunProject, env: consumerEnv });
  check(/\b3 pass\b/.test(bunTest.output) && /\b0 fail\b/.test(bunTest.output), "the consumer's bun suite: 3 pass, 0 fail");

  if (RELEASE) {
    for (const target of shippedTargets()) {
      if (target.platform !== HOST) targetConsumer(target, npmrc, consumerEnv, path.join(npmProject, "build"));
    }
  }
}

/**
 * A consumer on another target: `npm install --os --cpu --libc` resolves exactlock's
 * optional dependencies for that target, so exactly its platform package is installed, from
 * this registry; its binary passes the artifact check; and where this machine can run the
 * target, the consumer's own suite runs under the target's runtime.
 */
function targetConsumer(target, npmrc, consumerEnv, compiled) {
  const { platform } = target;
  step(`${platform}: npm install exactlock as that target`);
  const emulated = EMULATED[platform];
  const cpu = { x86_64: "x64", aarch64: "arm64" }[target.arch];
  const flags = [`--os=${target.os}`, `--cpu=${cpu}`, ...(target.libc ? [`--libc=${target.libc === "gnu" ? "glibc" : "musl"}`] : [])];
  // vitest (and through it rolldown's native binding) for the target too, when Node runs there.
  const devDependencies = emulated?.kind === "node" ? { vitest: versionOf("vitest") } : {};
  const project = consumerProject(`consumer-${platform}`, npmrc, { devDependencies });
  // The consumer's compiled JavaScript is the same for every target: tsc ran above.
  fs.cpSync(compiled, path.join(project, "build"), { recursive: true });
  if (emulated?.kind === "node") run("npm", ["install", "--no-audit", "--no-fund", ...flags], { cwd: project, env: consumerEnv });
  run("npm", ["install", "--no-audit", "--no-fund", ...flags, "exactlock"], { cwd: project, env: consumerEnv });
  const lock = JSON.parse(fs.readFileSync(path.join(project, "package-lock.json"), "utf8"));
  const present = fs.readdirSync(path.join(project, "node_modules")).filter((name) => name.startsWith("exactlock-"));
  check(present.length === 1 && present[0] === `exactlock-${platform}`, `only exactlock-${platform} is installed (${present.join(", ")})`);
  const entry = lock.packages[`node_modules/exactlock-${platform}`];
  check(entry?.resolved?.startsWith(consumerEnv.npm_config_registry) === true, `exactlock-${platform} came from the local registry (${entry?.resolved})`);
  const binary = path.join(project, "node_modules", `exactlock-${platform}`, `exactlock.${platform}.node`);
  const report = checkArtifact(binary, target);
  check(report.ok, `its binary passes the artifact check (${report.checks.map((c) => c.name).join(", ")})`);
  if (!emulated) {
    const wine = platform === "win32-x64-msvc" ? "; npm run test:windows runs the same binary's suite under Wine" : "";
    console.log(`   (${platform} is not run by this round trip: its binary is checked as a file${wine})`);
    return;
  }
  const { label, kind, env, wrap } = runtimeFor(platform, consumerEnv);
  step(`${label}: the consumer's own suite`);
  const { command, args } = kind === "node"
    ? wrap([path.join(project, "node_modules", "vitest", "vitest.mjs"), "run"])
    : wrap(["test"]);
  const result = run(command, args, { cwd: project, env });
  const output = result.output.replace(/\x1b\[[0-9;]*m/g, "");
  if (kind === "node") check(/Tests\s+3 passed \(3\)/.test(output), `${label}: the consumer's vitest suite, 3 of 3 passed`);
  else check(/\b3 pass\b/.test(output) && /\b0 fail\b/.test(output), `${label}: the consumer's bun suite, 3 pass, 0 fail`);
}

/** The consumer's counter, bundled each way README "Bundling" gives. */
const ESBUILD = "0.28.2";
const CREATE_REQUIRE_BANNER = "import { createRequire } from 'node:module'; const require = createRequire(import.meta.url);";

/**
 * The consumer's counter (src/count.mts) bundled whole by esbuild, Vite (ssr.noExternal:
 * true) and `bun build --compile`, the README's settings; each bundle is moved to a folder
 * of its own with no node_modules near it, and two processes of it count to 200 on one file.
 */
function bundled(project, consumerEnv) {
  step("bundled: esbuild, Vite (noExternal: true), bun build --compile");
  // The bundlers are build tools with install scripts of their own (esbuild's runs sh): the
  // whole PATH here; exactlock is installed already, by the run without cargo above.
  consumerEnv = { ...consumerEnv, PATH: process.env.PATH };
  run("npm", ["install", "--no-audit", "--no-fund", `esbuild@${ESBUILD}`, `vite@${versionOf("vite")}`], { cwd: project, env: consumerEnv });
  const built = path.join(project, "bundles");
  const entry = path.join(project, "src", "count.mts");
  const bin = (name) => path.join(project, "node_modules", ".bin", name);
  run(bin("esbuild"), [entry, "--bundle", "--platform=node", "--format=esm", "--loader:.node=copy",
    `--banner:js=${CREATE_REQUIRE_BANNER}`, `--outfile=${path.join(built, "esbuild", "count.mjs")}`], { cwd: project, env: consumerEnv });
  fs.writeFileSync(path.join(project, "vite.config.mjs"), [
    "export default {",
    `  build: { ssr: ${JSON.stringify(entry)}, outDir: ${JSON.stringify(path.join(built, "vite"))}, rollupOptions: { external: [/^exactlock-(linux|darwin|win32)-/] } },`,
    "  ssr: { noExternal: true },",
    "};",
    "",
  ].join("\n"));
  run(bin("vite"), ["build", "--config", path.join(project, "vite.config.mjs")], { cwd: project, env: consumerEnv });
  const binary = path.join(project, "node_modules", `exactlock-${HOST}`, `exactlock.${HOST}.node`);
  fs.copyFileSync(binary, path.join(built, "vite", path.basename(binary)));
  run(path.join(BIN, "bun"), ["build", "--compile", entry, "--outfile", path.join(built, "bun", "count")], { cwd: project, env: consumerEnv });

  for (const [name, command, script] of [
    ["esbuild", process.execPath, "count.mjs"],
    ["Vite", process.execPath, "count.mjs"],
    ["bun build --compile", null, "count"],
  ]) {
    const folder = fs.mkdtempSync(path.join(os.tmpdir(), "exactlock-bundle-"));
    try {
      const from = path.join(built, name === "Vite" ? "vite" : name === "esbuild" ? "esbuild" : "bun");
      fs.cpSync(from, folder, { recursive: true });
      check(!fs.existsSync(path.join(folder, "node_modules")), `${name}: the bundle runs from ${folder}, no node_modules near it (${fs.readdirSync(folder).join(", ")})`);
      const counter = path.join(folder, "counter");
      fs.writeFileSync(counter, "0");
      const argv = (times) => (command ? [command, [path.join(folder, script), counter, String(times)]] : [path.join(folder, script), [counter, String(times)]]);
      const pair = runPair(argv(100), consumerEnv);
      const failed = pair.filter((child) => child.status !== 0);
      check(failed.length === 0, `${name}: both processes exited 0${failed.length ? `: ${failed.map((c) => c.stderr).join(" | ")}` : ""}`);
      const final = fs.readFileSync(counter, "utf8");
      check(final === "200", `${name}: two processes at once × 100 sections: counter ${final} (0 lost)`);
      if (name === "Vite") {
        // Without the binary beside it, the error says it is a bundle and what to copy.
        fs.rmSync(path.join(folder, `exactlock.${HOST}.node`));
        const [cmd, args] = argv(1);
        const alone = spawnSync(cmd, args, { cwd: os.tmpdir(), encoding: "utf8", env: consumerEnv });
        check(alone.status !== 0 && /ERR_EXACTLOCK_NO_BINARY/.test(alone.stderr) && new RegExp(`bundled, and no binary for ${HOST}.*README, "Bundling"`).test(alone.stderr),
          `${name}: without the .node beside it, ERR_EXACTLOCK_NO_BINARY says it is a bundle and what to copy`);
      }
    } finally {
      fs.rmSync(folder, { recursive: true, force: true });
    }
  }
}

/** Two processes of `[command, args]` at once; their results. */
function runPair([command, args], env) {
  const script = [
    "const { spawn } = require('node:child_process');",
    "const [command, args] = JSON.parse(process.argv[1]);",
    "let left = 2; const results = [];",
    "for (let i = 0; i < 2; i++) {",
    "  const child = spawn(command, args, { stdio: ['ignore', 'ignore', 'pipe'] }); let stderr = '';",
    "  child.stderr.on('data', (d) => { stderr += d; });",
    "  child.on('exit', (status) => { results.push({ status, stderr }); if (--left === 0) console.log(JSON.stringify(results)); });",
    "}",
  ].join("\n");
  const result = spawnSync(process.execPath, ["-e", script, JSON.stringify([command, args])], { cwd: os.tmpdir(), encoding: "utf8", env, timeout: 120_000 });
  if (result.status !== 0) throw new Error(`registry round trip: the pair did not run: ${result.stderr}`);
  return JSON.parse(result.stdout);
}

function stopRegistry() {
  if (registry && registry.exitCode === null) registry.kill("SIGTERM");
}

process.on("exit", () => {
  stopRegistry();
  fs.rmSync(work, { recursive: true, force: true });
});
for (const signal of ["SIGINT", "SIGTERM"]) process.on(signal, () => process.exit(130));

main().then(
  () => {
    stopRegistry();
    console.log("\nregistry round trip: passed");
  },
  (error) => {
    console.error(`\n${error.stack ?? error}`);
    const log = path.join(work, "verdaccio.log");
    if (fs.existsSync(log)) console.error(`verdaccio's log:\n${fs.readFileSync(log, "utf8").slice(-4000)}`);
    stopRegistry();
    process.exitCode = 1;
  },
);
