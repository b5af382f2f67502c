/**
 * Every example under examples/ runs and prints what it says it prints, and
 * every code sample in the README is one of them, verbatim.
 */
import { spawnSync } from "node:child_process";
import { readFileSync, readdirSync } from "node:fs";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { ROOT } from "./cli-helpers.ts";

const EXAMPLES = path.join(ROOT, "examples");
const BUN = path.join(ROOT, "node_modules", ".bin", "bun");

const EXPECTED: Record<string, string[]> = {
  "quick-start.mts": ["true"],
  "with-file-lock.mjs": ['{"count":10}'],
  "acquire-release.mjs": ["locked: true", "locked: false"],
  "await-using.mts": [
    "locked: true",
    "locked: false",
    "locked: true",
    "failed: refusing to save an empty config",
    "locked: false",
  ],
  "abort-timeout.mjs": ["ELOCKED true", "undefined", "ELOCKED TimeoutError"],
  "shared-volume.mjs": ["build-box-7 live", "unknown foreign_host false"],
  "gc.mjs": ["number true", "removed", "kept"],
  "inspect.mjs": [
    "record true",
    "live false owner_alive",
    "held by pid N (live) since N-N-NTN:N:N.NZ",
    "free",
  ],
};

function run(runtime: string, file: string): { status: number | null; stdout: string; stderr: string } {
  const result = spawnSync(runtime, [path.join(EXAMPLES, file)], { cwd: ROOT, encoding: "utf8", timeout: 30_000 });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

/** The `// comment` after each console.log(...) line: what the example claims it prints. */
function claimedOutputs(source: string): string[] {
  return source
    .split("\n")
    .filter((line) => line.includes("console.log(") && line.includes("); // "))
    .map((line) => line.slice(line.lastIndexOf("); // ") + "); // ".length).trim());
}

describe("examples", () => {
  it("covers every file under examples/", () => {
    expect(readdirSync(EXAMPLES).sort()).toEqual(Object.keys(EXPECTED).sort());
  });

  for (const [file, expected] of Object.entries(EXPECTED)) {
    const runtimes = file.endsWith(".mts") ? [["bun", BUN]] : [["node", process.execPath], ["bun", BUN]];
    for (const [name, runtime] of runtimes) {
      it(`${file} under ${name} prints what it claims`, () => {
        const result = run(runtime!, file);
        expect(result.stderr).toBe("");
        expect(result.status).toBe(0);
        const lines = result.stdout.trimEnd().split("\n");
        expect(lines).toEqual(expected);
        for (const claim of claimedOutputs(readFileSync(path.join(EXAMPLES, file), "utf8"))) {
          expect(lines).toContain(claim);
        }
      });
    }
  }

  it("Node parses `await using` only from version 24 (so Node 20 needs try/finally)", () => {
    const result = spawnSync(
      process.execPath,
      ["--input-type=module", "-e", "async function f(r) { await using x = r; }"],
      { encoding: "utf8" },
    );
    const major = Number(process.versions.node.split(".")[0]);
    expect(result.status === 0).toBe(major >= 24);
  });
});

describe("README", () => {
  const readme = readFileSync(path.join(ROOT, "README.md"), "utf8");
  const samples = [...readme.matchAll(/```(js|ts|javascript|typescript)\n([\s\S]*?)```/g)].map((m) => m[2]!.trimEnd());
  const sources = Object.keys(EXPECTED).map((file) => readFileSync(path.join(EXAMPLES, file), "utf8"));

  it("has code samples", () => {
    expect(samples.length).toBeGreaterThanOrEqual(Object.keys(EXPECTED).length);
  });

  /** A sample's leading import lines, and the code after them. */
  const split = (sample: string) => {
    const lines = sample.split("\n");
    const imports = lines.filter((line, i) => line.startsWith("import ") && lines.slice(0, i).every((l) => l.startsWith("import ")));
    return { imports, body: lines.slice(imports.length).join("\n").trim() };
  };

  it("every js/ts code sample starts with its imports", () => {
    const bare = samples.filter((sample) => split(sample).imports.length === 0);
    expect(bare).toEqual([]);
  });

  it("every js/ts code sample is, verbatim, part of a file under examples/ that a test runs: its imports lines of it, its code a run of it", () => {
    const orphans = samples.filter((sample) => {
      const { imports, body } = split(sample);
      return !sources.some((source) => source.includes(body) && imports.every((line) => source.split("\n").includes(line)));
    });
    expect(orphans).toEqual([]);
  });

  it("starts with the install, a complete TypeScript example, then a clone's two commands: npm install && npx exactlock demo, then npm test", () => {
    const shBlocks = [...readme.matchAll(/```sh\n([\s\S]*?)```/g)];
    const install = shBlocks[0]!;
    expect(install[1]).toContain("npm install exactlock");
    expect(install[1]).toContain("bun add exactlock");
    const firstTs = /```ts\n([\s\S]*?)```/.exec(readme)!;
    expect(firstTs.index).toBeGreaterThan(install.index!);
    expect(firstTs[1]).toMatch(/^import \{ withFileLock \} from "exactlock";\n/);
    const clone = shBlocks[1]!;
    expect(clone.index).toBeGreaterThan(firstTs.index);
    expect(clone[1]).toContain("npm install && npx exactlock demo");
    expect(clone[1]!.indexOf("npm test")).toBeGreaterThan(clone[1]!.indexOf("npx exactlock demo"));
    // All of it on the first screen: before the first js sample and the API.
    expect(clone.index).toBeLessThan(readme.indexOf("```js"));
    expect(readme.slice(0, clone.index).split("\n").length).toBeLessThan(60);
  });
});
