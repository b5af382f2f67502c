#!/usr/bin/env node
// Stages what gets published, one folder and one tarball per package:
//
//   <out>/exactlock/                 the main package: JavaScript, types, napi's loader; no
//                                    binary, no scripts at all (installing it runs nothing),
//                                    its platform packages as optionalDependencies pinned to
//                                    its own version
//   <out>/exactlock-<platform>/      one per binary found in npm/<platform>/ (where CI's
//                                    `napi artifacts` puts them) or native/ (this clone's build)
//   <out>/*.tgz                      `npm pack` of each
//
// The repository's own package.json keeps `prepare` (a clone builds from source); the
// published one never does. Publish the tarballs, never the repository root.
//
//   node scripts/stage-release.mjs [--out DIR]      (default: release/)
import { execFileSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = path.join(path.dirname(fileURLToPath(import.meta.url)), "..");
const outArg = process.argv.indexOf("--out");
const OUT = path.resolve(outArg > 0 ? process.argv[outArg + 1] : path.join(ROOT, "release"));

/** Fields of the repository's manifest that only a clone needs. */
const CLONE_ONLY = ["scripts", "devDependencies", "allowScripts"];
/** Published beside the manifest's `files`. */
const ALWAYS = ["README.md", "LICENSE"];

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

function stageMain(manifest, platforms) {
  const dir = path.join(OUT, manifest.name);
  if (manifest.files.some((file) => file.includes(".node"))) {
    throw new Error("package.json `files` names a .node: binaries belong to the platform packages");
  }
  for (const file of [...manifest.files, ...ALWAYS]) {
    const from = path.join(ROOT, file);
    if (!fs.existsSync(from)) throw new Error(`${file} is missing: run \`npm run build\` first`);
    copy(from, path.join(dir, file));
  }
  const published = { ...manifest };
  for (const field of CLONE_ONLY) delete published[field];
  published.optionalDependencies = Object.fromEntries(
    platforms.map((platform) => [`${manifest.name}-${platform}`, manifest.version]),
  );
  writeJson(path.join(dir, "package.json"), published);
  return dir;
}

function stagePlatform(manifest, platform) {
  const source = path.join(ROOT, "npm", platform);
  const platformManifest = readJson(path.join(source, "package.json"));
  if (platformManifest.version !== manifest.version) {
    throw new Error(`npm/${platform} is ${platformManifest.version}, the package ${manifest.version}: run \`napi version\``);
  }
  const binary = platformManifest.main;
  const found = [path.join(source, binary), path.join(ROOT, "native", binary)].find((file) => fs.existsSync(file));
  if (!found) return null;
  const dir = path.join(OUT, platformManifest.name);
  copy(path.join(source, "package.json"), path.join(dir, "package.json"));
  copy(path.join(source, "README.md"), path.join(dir, "README.md"));
  copy(path.join(ROOT, "LICENSE"), path.join(dir, "LICENSE"));
  copy(found, path.join(dir, binary));
  return dir;
}

function pack(dir) {
  const out = execFileSync("npm", ["pack", "--json", "--pack-destination", OUT], { cwd: dir, encoding: "utf8" });
  const [packed] = JSON.parse(out);
  return { name: packed.name, tarball: path.join(OUT, packed.filename), files: packed.files.map((f) => f.path) };
}

export function stageRelease() {
  const manifest = readJson(path.join(ROOT, "package.json"));
  const platforms = fs.readdirSync(path.join(ROOT, "npm")).sort();
  fs.rmSync(OUT, { recursive: true, force: true });
  fs.mkdirSync(OUT, { recursive: true });
  const dirs = [stageMain(manifest, platforms)];
  for (const platform of platforms) {
    const dir = stagePlatform(manifest, platform);
    if (dir) dirs.push(dir);
  }
  return dirs.map(pack);
}

const packed = stageRelease();
for (const { name, tarball, files } of packed) {
  console.log(`${path.relative(process.cwd(), tarball)}  ${name}  (${files.length} files)`);
}
writeJson(path.join(OUT, "packed.json"), packed);
