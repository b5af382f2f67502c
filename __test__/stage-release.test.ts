/**
 * What a release refuses (scripts/stage-release.mjs, scripts/publish-release.mjs), run on a
 * copy of this repository's release inputs in a temp folder with one thing wrong in each.
 * The whole path done right (every platform package staged, published to a local registry
 * and installed per target) is `npm run test:release`, which .ci/run runs once every target
 * is built.
 */
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { platformName } from "../lib/native.ts";

const ROOT = path.join(__dirname, "..");
const scratch = fs.mkdtempSync(path.join(os.tmpdir(), "exactlock-stage-release-"));
afterAll(() => fs.rmSync(scratch, { recursive: true, force: true }));

const manifest = JSON.parse(fs.readFileSync(path.join(ROOT, "package.json"), "utf8"));
const targets: string[] = manifest.napi.targets;
const host = platformName();
const hostBinary = fs.readFileSync(path.join(ROOT, "native", `exactlock.${host}.node`));

/** A copy of what stage-release reads, with this machine's binary only (or `binary` in its place). */
function skeleton(edit: { binary?: Buffer; manifest?: (m: Record<string, unknown>) => void } = {}): string {
  const dir = fs.mkdtempSync(path.join(scratch, "repo-"));
  for (const entry of ["scripts", "npm", "bin", "dist", "examples", "docs", "README.md", "LICENSE", "Cargo.toml", "native/index.js", "native/index.d.ts"]) {
    fs.cpSync(path.join(ROOT, entry), path.join(dir, entry), { recursive: true });
  }
  const copy = structuredClone(manifest);
  edit.manifest?.(copy);
  fs.writeFileSync(path.join(dir, "package.json"), JSON.stringify(copy, null, 2));
  fs.writeFileSync(path.join(dir, "native", `exactlock.${host}.node`), edit.binary ?? hostBinary);
  return dir;
}

function stage(dir: string, ...args: string[]) {
  const out = path.join(dir, "release");
  const run = spawnSync(process.execPath, [path.join(dir, "scripts", "stage-release.mjs"), "--out", out, ...args], {
    encoding: "utf8",
  });
  return { status: run.status, output: run.stdout + run.stderr, out };
}

describe("package.json names where the package comes from", () => {
  // npm rejects --provenance without `repository`; README "Releasing" says where to set it.
  it("has repository, homepage and bugs, all naming one repository", () => {
    expect(manifest.repository?.url).toMatch(/^git\+https:\/\/github\.com\/[^/]+\/[^/]+\.git$/);
    const web = manifest.repository.url.replace(/^git\+/, "").replace(/\.git$/, "");
    expect(manifest.homepage).toBe(`${web}#readme`);
    expect(manifest.bugs?.url).toBe(`${web}/issues`);
  });
});

describe("stage-release refuses what must not be published, staging nothing", () => {
  it("a shipped platform without its binary: each one named, with the command that builds it", () => {
    const result = stage(skeleton());
    expect(result.status, result.output).toBe(1);
    // Every shipped target but this machine's, which has its binary here.
    const named = targets.filter((triple) => result.output.includes(`npm run build:target -- ${triple}`));
    expect(named).toHaveLength(targets.length - 1);
    expect(named).toHaveLength(targets.length - 1);
    expect(fs.existsSync(result.out)).toBe(false);
  });

  it.runIf(host.endsWith("-gnu"))("a Linux gnu binary that asks for a glibc above 2.17", () => {
    const newer = Buffer.from(hostBinary);
    const at = newer.indexOf("GLIBC_2.17\0", 0, "latin1");
    // A clone linked without zig already asks for its own glibc; a zig build is made to.
    if (at > 0) newer.write("GLIBC_2.34", at, "latin1");
    const result = stage(skeleton({ binary: newer }));
    expect(result.status, result.output).toBe(1);
    expect(result.output).toMatch(new RegExp(`${host}: native/exactlock\\.${host}\\.node fails its artifact check \\(glibc floor: newest GLIBC_ version needed: 2\\.3\\d \\(must be ≤ 2\\.17\\)`));
    expect(fs.existsSync(result.out)).toBe(false);
  });

  it("a package.json without repository, homepage or bugs", () => {
    const result = stage(
      skeleton({
        manifest: (m) => {
          delete m.repository;
          delete m.bugs;
        },
      }),
      "--partial",
    );
    // --partial stages it for a local round trip, but marks it as no release.
    expect(result.status, result.output).toBe(0);
    expect(result.output).toContain("package.json has no repository, bugs");
    const strict = stage(skeleton({ manifest: (m) => delete m.homepage }));
    expect(strict.status).toBe(1);
    expect(strict.output).toContain("package.json has no homepage");
  });

  it("a repository other than the one the release is built from (--expect-repository)", () => {
    const result = stage(skeleton(), "--expect-repository", "https://github.com/someone-else/exactlock");
    expect(result.status).toBe(1);
    expect(result.output).toContain("but this release is built from https://github.com/someone-else/exactlock");
  });
});

describe("stage-release refuses, even --partial, what cannot be staged at all", () => {
  it("a Cargo.toml whose version is not package.json's (a bundle's loader compares the core's with the package's)", () => {
    const dir = skeleton({ manifest: (m) => (m.version = "9.9.9") });
    const result = stage(dir, "--partial");
    expect(result.status).toBe(1);
    expect(result.output).toContain("Cargo.toml is 0.1.0, package.json 9.9.9");
    expect(fs.existsSync(result.out)).toBe(false);
  });

  it("an --out folder holding anything but an earlier staging, which it would replace", () => {
    const dir = skeleton();
    const precious = path.join(dir, "precious");
    fs.mkdirSync(precious);
    fs.writeFileSync(path.join(precious, "notes.txt"), "keep me");
    const run = spawnSync(process.execPath, [path.join(dir, "scripts", "stage-release.mjs"), "--out", precious, "--partial"], {
      encoding: "utf8",
    });
    expect(run.status).toBe(1);
    expect(run.stderr).toContain("holds files that are not a staging");
    expect(fs.readFileSync(path.join(precious, "notes.txt"), "utf8")).toBe("keep me");
    // An earlier staging is replaced.
    expect(stage(dir, "--partial").status).toBe(0);
    expect(stage(dir, "--partial").status).toBe(0);
  });
});

describe("a partial staging is not a release", () => {
  it("--partial stages what this clone has, marked not publishable, and publish-release refuses it", () => {
    const dir = skeleton();
    const result = stage(dir, "--partial");
    expect(result.status, result.output).toBe(0);
    const staged = JSON.parse(fs.readFileSync(path.join(result.out, "packed.json"), "utf8"));
    expect(staged.publishable).toBe(false);
    expect(staged.packages.map((p: { name: string }) => p.name)).toEqual([`exactlock-${host}`, "exactlock"]);
    for (const { tarball } of staged.packages) expect(path.isAbsolute(tarball) && fs.existsSync(tarball)).toBe(true);
    const platformManifest = JSON.parse(fs.readFileSync(path.join(result.out, `exactlock-${host}`, "package.json"), "utf8"));
    expect(platformManifest.repository).toEqual(manifest.repository);
    const publish = spawnSync(process.execPath, [path.join(dir, "scripts", "publish-release.mjs"), "--dir", result.out], {
      encoding: "utf8",
    });
    expect(publish.status).toBe(1);
    expect(publish.stderr).toContain("is a partial staging, not a release");
    expect(publish.stdout).not.toContain("npm publish");
  });
});
