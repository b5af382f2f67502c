import { execFileSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
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
