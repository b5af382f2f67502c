import { execFileSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import * as url from "node:url";
import { describe, expect, it } from "vitest";
import * as main from "../lib/index.ts";
import { nativeVersion } from "../lib/index.ts";

const ROOT = path.join(__dirname, "..");
const SEAMS = ["FileLockTestHooks", "injectFaultForTesting", "injectDelayForTesting", "clearFaultsForTesting"];

/** The files `npm pack` would publish (scripts not run: dist is built by pretest). */
function packedFiles(): string[] {
  const out = execFileSync("npm", ["pack", "--dry-run", "--json", "--ignore-scripts"], { cwd: ROOT, encoding: "utf8" });
  return (JSON.parse(out) as { files: { path: string }[] }[])[0]!.files.map((file) => file.path);
}

describe("package", () => {
  it("loads the native core", () => {
    expect(nativeVersion()).toMatch(/^\d+\.\d+\.\d+$/);
  });

  it("publishes no binary and no install script: the platform packages carry the .node", () => {
    const files = packedFiles();
    expect(files.filter((file) => file.endsWith(".node"))).toEqual([]);
    expect(files).toContain("native/index.js");
    const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, "package.json"), "utf8"));
    // The repository's manifest keeps `prepare` for clones; publishing it directly is refused,
    // and scripts/stage-release.mjs publishes a manifest without any scripts (test:registry checks).
    expect(pkg.scripts.prepublishOnly).toMatch(/process\.exit\(1\)/);
  });

  it("publishes the LICENSE, and source maps that carry the sources they name", () => {
    const files = packedFiles();
    expect(files).toContain("LICENSE");
    expect(fs.readFileSync(path.join(ROOT, "LICENSE"), "utf8")).toMatch(/^MIT License/);
    const maps = files.filter((file) => file.endsWith(".js.map"));
    expect(maps.length).toBeGreaterThan(5);
    for (const file of maps) {
      const map = JSON.parse(fs.readFileSync(path.join(ROOT, file), "utf8")) as {
        sources: string[];
        sourcesContent?: (string | null)[];
      };
      const named = map.sources.map((source) => path.join(path.dirname(file), source));
      // A source is either published itself or carried inside the map.
      map.sources.forEach((_, i) => {
        const carried = typeof map.sourcesContent?.[i] === "string";
        expect(carried || files.includes(named[i]!), `${file} → ${map.sources[i]}`).toBe(true);
      });
    }
  });

  it("keeps the test seams out of the main entry: they are exactlock/testing's", async () => {
    for (const seam of SEAMS) expect(Object.keys(main), seam).not.toContain(seam);
    const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, "package.json"), "utf8"));
    const testingEntry = pkg.exports["./testing"].default as string;
    expect(packedFiles()).toContain(path.normalize(testingEntry));
    const testing = (await import(path.join(ROOT, testingEntry))) as Record<string, unknown>;
    for (const seam of SEAMS) expect(testing[seam], seam).toBeDefined();
    const built = (await import(path.join(ROOT, pkg.exports["."].default))) as Record<string, unknown>;
    for (const seam of SEAMS) expect(Object.keys(built), seam).not.toContain(seam);
  });
});

/**
 * What `import` of each entry gives under Node's own loader (a child process: vitest's
 * runner would resolve it by other rules), beside what `require` gives in the same process.
 */
function importedAndRequired(entry: string): { resolved: string; imported: string[]; required: string[]; same: string[] } {
  const script = `
    import { createRequire } from "node:module";
    const imported = await import(${JSON.stringify(entry)});
    const required = createRequire(import.meta.url)(${JSON.stringify(entry)});
    const names = Object.keys(imported).filter((name) => name !== "default");
    console.log(JSON.stringify({
      resolved: import.meta.resolve(${JSON.stringify(entry)}),
      imported: Object.keys(imported).sort(),
      required: Object.keys(required).sort(),
      same: [...names.filter((name) => imported[name] === required[name]), ...(imported.default === required ? ["default"] : [])].sort(),
    }));`;
  const out = execFileSync(process.execPath, ["--input-type=module", "-e", script], { cwd: ROOT, encoding: "utf8" });
  return JSON.parse(out) as { resolved: string; imported: string[]; required: string[]; same: string[] };
}

describe("the ES module entries", () => {
  // Node lexes a CommonJS file imported from an ES module (and each file it re-exports) for
  // its names: about 6 ms an import. Each entry has an .mjs that requires the CommonJS build
  // instead, so both ways give one instance: the same functions, one lock table.
  it.each([
    ["exactlock", "dist/index.mjs"],
    ["exactlock/testing", "dist/testing.mjs"],
  ])("import %s loads %s, with every name of the CommonJS build and the same values", (entry, file) => {
    const got = importedAndRequired(entry);
    expect(got.resolved).toBe(url.pathToFileURL(path.join(ROOT, file)).href);
    expect(packedFiles()).toContain(file);
    const names = got.required.filter((name) => name !== "__esModule");
    expect(names.length).toBeGreaterThan(4);
    // What Node's import of the CommonJS build gave: its names, and the whole API as default.
    expect(got.imported).toEqual([...names, "default"].sort());
    expect(got.same).toEqual(got.imported);
  });
});
