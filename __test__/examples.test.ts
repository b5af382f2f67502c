/**
 * Every example under examples/ runs and prints what it says it prints, and
 * every js/ts block of the README and docs/ is a whole program: extracted, type-checked
 * (TypeScript), run as pasted, and one of the examples, verbatim.
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import * as path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { ROOT } from "./cli-helpers.ts";
import { skipFor, unmet } from "./premises.ts";

const EXAMPLES = path.join(ROOT, "examples");
const BUN = path.join(ROOT, "node_modules", ".bin", "bun");

const EXPECTED: Record<string, string[]> = {
  "quick-start.mts": ["true"],
  "update-json.mjs": ['{"count":10}'],
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
  "wait-sync-loss.mjs": ["sync: function", "waited: yes", "lost: EMISSING", "release: EMISSING"],
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

describe("README and docs/", () => {
  const readme = readFileSync(path.join(ROOT, "README.md"), "utf8");
  const documents = ["README.md", ...readdirSync(path.join(ROOT, "docs")).map((name) => `docs/${name}`)];
  const blocks = documents.flatMap((document) => {
    const text = readFileSync(path.join(ROOT, document), "utf8");
    return [...text.matchAll(/^```(\w*)\n([\s\S]*?)^```$/gm)].map((m) => ({
      lang: m[1]!,
      code: m[2]!,
      where: `${document}:${text.slice(0, m.index).split("\n").length}`,
    }));
  });
  const programs = blocks.filter((block) => block.lang === "js" || block.lang === "ts");
  const sources = Object.keys(EXPECTED).map((file) => readFileSync(path.join(EXAMPLES, file), "utf8"));
  // Under the repository, so `import "exactlock"` resolves to this package (its own name):
  // where this uid may not write the checkout, the tests that run the blocks are skipped.
  const scratchUnwritable = unmet({ writable: [ROOT] });
  const scratch = scratchUnwritable ? "" : mkdtempSync(path.join(ROOT, ".readme-blocks-"));
  // The quick start updates /tmp/counter.json, as a reader's paste would: removed after, unless it was there before.
  const quickStartFile = "/tmp/counter.json";
  const quickStartFileWasThere = existsSync(quickStartFile);
  afterAll(() => {
    if (scratch) rmSync(scratch, { recursive: true, force: true });
    if (!quickStartFileWasThere) rmSync(quickStartFile, { force: true });
  });
  const fileOf = (index: number) => path.join(scratch, `block-${index}.${programs[index]!.lang === "ts" ? "mts" : "mjs"}`);
  if (scratch) programs.forEach((block, index) => writeFileSync(fileOf(index), block.code));

  it("has a language on every code block: js and ts are programs, sh commands, text output", () => {
    expect(blocks.map((block) => block.lang).filter((lang) => !["js", "ts", "sh", "text"].includes(lang))).toEqual([]);
    expect(programs.length).toBeGreaterThanOrEqual(Object.keys(EXPECTED).length);
  });

  it("every js/ts block is a whole file under examples/ (shipped in the package), verbatim", () => {
    const orphans = programs.filter((block) => !sources.includes(block.code)).map((block) => block.where);
    expect(orphans).toEqual([]);
  });

  it("every ts block type-checks as pasted (strict, nodenext)", (ctx) => {
    skipFor(ctx, scratchUnwritable);
    const typescript = programs.map((block, index) => ({ block, index })).filter(({ block }) => block.lang === "ts");
    expect(typescript.length).toBeGreaterThan(0);
    writeFileSync(
      path.join(scratch, "tsconfig.json"),
      JSON.stringify({
        compilerOptions: {
          target: "es2022",
          lib: ["es2022", "esnext.disposable"],
          module: "nodenext",
          moduleResolution: "nodenext",
          strict: true,
          noEmit: true,
          skipLibCheck: true,
          types: ["node"],
          typeRoots: [path.join(ROOT, "node_modules", "@types")],
        },
        files: typescript.map(({ index }) => fileOf(index)),
      }),
    );
    const checked = spawnSync(path.join(ROOT, "node_modules", ".bin", "tsc"), ["-p", path.join(scratch, "tsconfig.json")], {
      cwd: ROOT,
      encoding: "utf8",
    });
    expect(checked.stdout + checked.stderr).toBe("");
    expect(checked.status).toBe(0);
  });

  it.for(programs.map((block, index) => ({ where: block.where, index, lang: block.lang })))(
    "the block at $where runs as pasted and prints what its comments claim",
    ({ index, lang }, ctx) => {
      skipFor(ctx, scratchUnwritable);
      const file = fileOf(index);
      const claims = claimedOutputs(programs[index]!.code);
      expect(claims.length).toBeGreaterThan(0);
      // TypeScript runs under Bun (Node 20 runs no TypeScript); JavaScript under both.
      const runtimes = lang === "ts" ? [BUN] : [process.execPath, BUN];
      for (const runtime of runtimes) {
        const result = spawnSync(runtime, [file], { cwd: ROOT, encoding: "utf8", timeout: 30_000 });
        expect(result.stderr, `${path.basename(runtime)} ${file}`).toBe("");
        expect(result.status).toBe(0);
        const lines = result.stdout.trimEnd().split("\n");
        for (const claim of claims) expect(lines, `${path.basename(runtime)}: ${claim}`).toContain(claim);
      }
    },
  );

  it("names every export of exactlock and exactlock/testing in the API section, in its group", async () => {
    const api = /## API\n\n```text\n([\s\S]*?)```/.exec(readme)![1]!;
    const exported = [
      ...Object.keys(await import("../lib/index.ts")),
      ...Object.keys(await import("../lib/testing.ts")),
    ];
    const unnamed = [...new Set(exported)].filter((name) => !new RegExp(`\\b${name}\\b`).test(api));
    expect(unnamed).toEqual([]);
  });

  it("starts with the install, a complete TypeScript example, then a clone's two commands: npm install && npx exactlock demo, then npm test", () => {
    const shBlocks = [...readme.matchAll(/```sh\n([\s\S]*?)```/g)];
    const install = shBlocks[0]!;
    expect(install[1]).toContain("npm install exactlock");
    expect(install[1]).toContain("bun add exactlock");
    const firstTs = /```ts\n([\s\S]*?)```/.exec(readme)!;
    expect(firstTs.index).toBeGreaterThan(install.index!);
    expect(firstTs[1]).toMatch(/^import \{ updateJson \} from "exactlock";\n/);
    const clone = shBlocks[1]!;
    expect(clone.index).toBeGreaterThan(firstTs.index);
    expect(clone[1]).toContain("npm install && npx exactlock demo");
    expect(clone[1]!.indexOf("npm test")).toBeGreaterThan(clone[1]!.indexOf("npx exactlock demo"));
    // All of it on the first screen: before the API (and any js sample, now in docs/).
    expect(clone.index).toBeLessThan(readme.indexOf("\n## API\n"));
    if (readme.includes("```js")) expect(clone.index).toBeLessThan(readme.indexOf("```js"));
    expect(readme.slice(0, clone.index).split("\n").length).toBeLessThan(60);
  });
});
