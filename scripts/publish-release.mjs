#!/usr/bin/env node
// Publishes what scripts/stage-release.mjs staged: every platform package first, the main
// package last, so a failure on the way leaves no main package on the registry pointing at
// binaries that are not there. Builds nothing and reads nothing but <dir>/packed.json and
// the tarballs it names, each passed to npm by absolute path (a relative `release/x.tgz`
// is read by npm as a GitHub shorthand).
//
//   node scripts/publish-release.mjs [--dir DIR] [npm publish flags…]
//     e.g. --provenance --access public          (the workflow, on a v* tag)
//          --registry http://127.0.0.1:4873/     (the dry run against a local registry)
//
// Refuses a staging marked not publishable (stage-release --partial). A package whose
// exact version the registry already has is skipped, so a run that failed half-way can be
// run again.
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { ROOT } from "./targets.mjs";

function fail(message) {
  console.error(`publish-release: ${message}`);
  process.exit(1);
}

/** npm, run in the staging folder: never in the repository, whose package.json npm would read. */
function npm(args, dir, options = { encoding: "utf8" }) {
  return spawnSync("npm", args, { cwd: dir, env: process.env, ...options });
}

function main(argv) {
  const at = argv.findIndex((arg) => arg === "--dir" || arg.startsWith("--dir="));
  let dir = path.join(ROOT, "release");
  let flags = argv;
  if (at !== -1) {
    const value = argv[at].startsWith("--dir=") ? argv[at].slice("--dir=".length) : argv[at + 1];
    if (!value || value.startsWith("--")) fail("--dir needs a folder (what stage-release wrote)");
    dir = path.resolve(value);
    flags = [...argv.slice(0, at), ...argv.slice(at + (argv[at].includes("=") ? 1 : 2))];
  }
  // `npm view` must ask the registry `npm publish` will publish to: --registry URL or --registry=URL.
  const registryAt = flags.findIndex((arg) => arg === "--registry" || arg.startsWith("--registry="));
  const registryUrl = registryAt === -1 ? null : flags[registryAt].includes("=") ? flags[registryAt].split("=").slice(1).join("=") : flags[registryAt + 1];
  if (registryAt !== -1 && !registryUrl) fail("--registry needs a URL");
  const registry = registryUrl ? ["--registry", registryUrl] : [];
  const file = path.join(dir, "packed.json");
  if (!fs.existsSync(file)) fail(`${file} is missing: run \`npm run stage-release\` first`);
  const staged = JSON.parse(fs.readFileSync(file, "utf8"));
  if (!staged.publishable) fail(`${dir} is a partial staging, not a release:\n  - ${staged.left.join("\n  - ")}`);
  const main = staged.packages.at(-1);
  if (main.files.some((f) => f.endsWith(".node"))) fail(`the last package, ${main.name}, holds a binary: it must be the main package`);

  for (const { name, version, tarball } of staged.packages) {
    if (!path.isAbsolute(tarball) || !fs.existsSync(tarball)) fail(`${tarball} is not an absolute path to a staged tarball`);
    const seen = npm(["view", `${name}@${version}`, "version", ...registry], dir);
    if (seen.status === 0 && seen.stdout.trim() === version) {
      console.log(`publish-release: ${name}@${version} is already published; skipped`);
      continue;
    }
    console.log(`publish-release: npm publish ${tarball} ${flags.join(" ")}`);
    const published = npm(["publish", tarball, ...flags], dir, { stdio: "inherit" });
    if (published.status !== 0) {
      fail(`${name}@${version} was not published (npm exited ${published.status ?? published.signal}); ` +
        `${name === main.name ? "the platform packages are" : "nothing after it is"} on the registry. Fix, then run this again.`);
    }
  }
  console.log(`publish-release: ${staged.packages.length} packages published, ${main.name} last`);
}

main(process.argv.slice(2));
