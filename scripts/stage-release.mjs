#!/usr/bin/env node
// Stages what gets published, one folder and one tarball per package:
//
//   <out>/exactlock/                 the main package: JavaScript, types, napi's loader; no
//                                    binary, no scripts at all (installing it runs nothing),
//                                    its platform packages as optionalDependencies pinned to
//                                    its own version
//   <out>/exactlock-<platform>/      one per shipped platform, its binary taken from
//                                    npm/<platform>/ (where the workflow's `napi artifacts`
//                                    puts them) or native/ (`npm run build:target`)
//   <out>/*.tgz                      `npm pack` of each
//   <out>/packed.json                what scripts/publish-release.mjs publishes, in order
//
// A release is refused, before anything is packed, when a shipped platform has no binary,
// when a binary fails its artifact check (scripts/check-artifact.mjs: format, CPU, a Linux
// gnu binary asking for glibc above 2.17, a macOS floor above the target's), or when
// package.json lacks repository/homepage/bugs (npm's provenance check needs the repository;
// --expect-repository URL also refuses a different one).
//
// --partial stages only the binaries this clone has, checked but not refused, and marks the
// result as not publishable (packed.json `publishable: false`): it is what the registry
// round trip of `npm test` installs from, on a machine that built one target.
//
// The repository's own package.json keeps `prepare` (a clone builds from source); the
// published one never does. Publish with scripts/publish-release.mjs, never the repository root.
//
//   node scripts/stage-release.mjs [--out DIR] [--partial] [--expect-repository URL]
//                                                                (default out: release/)
import { execFileSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { pathToFileURL } from "node:url";
import { checkArtifact } from "./check-artifact.mjs";
import { ROOT, shippedTargets } from "./targets.mjs";

/** Fields of the repository's manifest that only a clone needs. */
const CLONE_ONLY = ["scripts", "devDependencies", "allowScripts"];
/** Published beside the manifest's `files`. */
const ALWAYS = ["README.md", "LICENSE"];
/** Where the package comes from: npm's provenance check compares `repository` with the workflow's. */
export const SOURCE_FIELDS = ["repository", "homepage", "bugs"];
/** Copied from the main manifest into every platform package's. */
const SHARED_FIELDS = ["description", "keywords", "license", "engines", ...SOURCE_FIELDS];

export class ReleaseRefused extends Error {}

function readJson(file) {
  return JSON.parse(fs.readFileSync(file, "utf8"));
}

function writeJson(file, value) {
  fs.writeFileSync(file, `${JSON.stringify(value, null, 2)}\n`);
}

function copy(from, to) {
  fs.mkdirSync(path.dirname(to), { recursive: true });
  fs.cpSync(from, to, { recursive: true });
}

/** The repository's URL as GitHub spells it: `https://github.com/owner/name`. */
export function repositoryUrl(manifest) {
  const raw = typeof manifest.repository === "string" ? manifest.repository : manifest.repository?.url;
  if (!raw) return null;
  return raw
    .replace(/^git\+/, "")
    .replace(/^github:/, "https://github.com/")
    .replace(/^git@github\.com:/, "https://github.com/")
    .replace(/^(git|ssh):\/\/(git@)?/, "https://")
    .replace(/\.git$/, "")
    .replace(/\/$/, "");
}

/** Why this manifest cannot be released as it is, or null. */
export function sourceFieldsProblem(manifest, expected) {
  const missing = SOURCE_FIELDS.filter((field) => !manifest[field]);
  if (missing.length > 0) {
    return (
      `package.json has no ${missing.join(", ")}: set them to the canonical repository's URL ` +
      "(README, \"Releasing\"); npm rejects --provenance without `repository`"
    );
  }
  if (expected && repositoryUrl(manifest) !== expected.replace(/\.git$/, "").replace(/\/$/, "")) {
    return `package.json's repository is ${repositoryUrl(manifest)}, but this release is built from ${expected}: npm's provenance check would reject it`;
  }
  return null;
}

/** Each shipped target with the binary this clone has for it (npm/<platform>/ first), checked. */
function findBinaries() {
  return shippedTargets().map((target) => {
    const manifest = readJson(path.join(ROOT, "npm", target.platform, "package.json"));
    const file = [path.join(ROOT, "npm", target.platform, manifest.main), path.join(ROOT, "native", manifest.main)].find(
      (candidate) => fs.existsSync(candidate),
    );
    const report = file ? checkArtifact(file, target) : null;
    return { target, manifest, file, report };
  });
}

function binaryProblem({ target, manifest: platformManifest, file, report }, version) {
  if (platformManifest.version !== version) {
    return `npm/${target.platform} is ${platformManifest.version}, the package ${version}: run \`napi version\``;
  }
  if (!file) return `${target.platform}: no binary (npm/${target.platform}/ or native/): npm run build:target -- ${target.triple}`;
  if (!report.ok) {
    const failed = report.checks.filter((check) => !check.ok).map((check) => `${check.name}: ${check.detail}`).join("; ");
    return `${target.platform}: ${path.relative(ROOT, file)} fails its artifact check (${failed})`;
  }
  return null;
}

/** Why the main package cannot be staged as it is: its files, and the core's version. */
function mainProblems(manifest) {
  const problems = [];
  if (manifest.files.some((file) => file.includes(".node"))) {
    problems.push("package.json `files` names a .node: binaries belong to the platform packages");
  }
  for (const file of [...manifest.files, ...ALWAYS]) {
    if (!fs.existsSync(path.join(ROOT, file))) problems.push(`${file} is missing: run \`npm run build\` first`);
  }
  const cargo = /^version\s*=\s*"([^"]+)"/m.exec(fs.readFileSync(path.join(ROOT, "Cargo.toml"), "utf8"))?.[1];
  if (cargo !== manifest.version) {
    problems.push(`Cargo.toml is ${cargo}, package.json ${manifest.version}: the core reports its version and a bundle's loader compares them`);
  }
  return problems;
}

function stageMain(out, manifest) {
  const dir = path.join(out, manifest.name);
  for (const file of [...manifest.files, ...ALWAYS]) copy(path.join(ROOT, file), path.join(dir, file));
  const published = { ...manifest };
  for (const field of CLONE_ONLY) delete published[field];
  published.optionalDependencies = Object.fromEntries(
    shippedTargets().map((target) => [`${manifest.name}-${target.platform}`, manifest.version]),
  );
  writeJson(path.join(dir, "package.json"), published);
  return dir;
}

function stagePlatform(out, manifest, { target, manifest: platformManifest, file }) {
  const dir = path.join(out, platformManifest.name);
  fs.mkdirSync(dir, { recursive: true });
  const published = { ...platformManifest };
  for (const field of SHARED_FIELDS) if (manifest[field] !== undefined) published[field] = manifest[field];
  writeJson(path.join(dir, "package.json"), published);
  copy(path.join(ROOT, "npm", target.platform, "README.md"), path.join(dir, "README.md"));
  copy(path.join(ROOT, "LICENSE"), path.join(dir, "LICENSE"));
  copy(file, path.join(dir, platformManifest.main));
  return dir;
}

function pack(out, dir) {
  const output = execFileSync("npm", ["pack", "--json", "--pack-destination", out], { cwd: dir, encoding: "utf8" });
  const [packed] = JSON.parse(output);
  return {
    name: packed.name,
    version: packed.version,
    tarball: path.join(out, packed.filename),
    files: packed.files.map((f) => f.path),
  };
}

/** `out` is replaced whole: refuse a folder that holds anything but an earlier staging. */
function refuseForeignFolder(out) {
  if (!fs.existsSync(out)) return;
  const entries = fs.readdirSync(out);
  if (entries.length > 0 && !entries.includes("packed.json")) {
    throw new ReleaseRefused(`${out} holds files that are not a staging (no packed.json): give --out an empty or new folder`);
  }
}

/**
 * Stages the release into `out`; throws ReleaseRefused (before touching `out`) when it
 * may not be published. Returns packed.json's content: `{ publishable, left, packages }`,
 * `packages` in publishing order (platform packages first, the main package last).
 */
export function stageRelease({ out, partial = false, expectRepository = null }) {
  const manifest = readJson(path.join(ROOT, "package.json"));
  const binaries = findBinaries();
  const fatal = mainProblems(manifest);
  const problems = [
    sourceFieldsProblem(manifest, expectRepository),
    ...binaries.map((binary) => binaryProblem(binary, manifest.version)),
  ].filter(Boolean);
  // Without these nothing can be staged, partial or not.
  if (fatal.length > 0) throw new ReleaseRefused(`cannot stage:\n  - ${fatal.join("\n  - ")}`);
  if (problems.length > 0 && !partial) {
    throw new ReleaseRefused(`not a release:\n  - ${problems.join("\n  - ")}`);
  }
  refuseForeignFolder(out);
  fs.rmSync(out, { recursive: true, force: true });
  fs.mkdirSync(out, { recursive: true });
  const mainDir = stageMain(out, manifest);
  const platformDirs = binaries
    .filter((binary) => binary.file && binary.manifest.version === manifest.version)
    .map((binary) => stagePlatform(out, manifest, binary));
  const staged = {
    publishable: problems.length === 0,
    left: problems,
    packages: [...platformDirs, mainDir].map((dir) => pack(out, dir)),
  };
  writeJson(path.join(out, "packed.json"), staged);
  return staged;
}

function main(argv) {
  const valueOf = (flag) => {
    const at = argv.indexOf(flag);
    return at === -1 ? null : argv[at + 1];
  };
  const out = path.resolve(valueOf("--out") ?? path.join(ROOT, "release"));
  try {
    const staged = stageRelease({ out, partial: argv.includes("--partial"), expectRepository: valueOf("--expect-repository") });
    for (const { name, tarball, files } of staged.packages) {
      console.log(`${tarball}  ${name}  (${files.length} files)`);
    }
    if (!staged.publishable) {
      console.log(`stage-release: partial, not publishable:\n  - ${staged.left.join("\n  - ")}`);
    } else {
      console.log(`stage-release: ready; publish with: node scripts/publish-release.mjs --dir ${out}`);
    }
  } catch (error) {
    if (!(error instanceof ReleaseRefused)) throw error;
    console.error(`stage-release: ${error.message}`);
    process.exit(1);
  }
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) main(process.argv.slice(2));
