/**
 * The documents hold together: every relative link in the README, docs/ and
 * ARCHITECTURE.md reaches a file that exists (and a heading in it, when the
 * link names one); every repository path ARCHITECTURE.md names in backticks
 * exists; the README and ARCHITECTURE.md stay short enough to be read.
 */
import { existsSync, readFileSync, readdirSync } from "node:fs";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { ROOT } from "./cli-helpers.ts";

const DOCUMENTS = [
  "README.md",
  "ARCHITECTURE.md",
  ...readdirSync(path.join(ROOT, "docs")).map((name) => `docs/${name}`),
];

function read(document: string): string {
  return readFileSync(path.join(ROOT, document), "utf8");
}

/** The text outside fenced code blocks: links and paths inside a sample are the sample's. */
function prose(text: string): string {
  return text.replace(/^```\w*\n[\s\S]*?^```$/gm, "");
}

/** The anchors GitHub gives a document's headings: lowercased, punctuation dropped, spaces to hyphens, repeats numbered. */
function anchorsOf(text: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  for (const [, heading] of prose(text).matchAll(/^#{1,6} (.+)$/gm)) {
    const slug = heading!
      .toLowerCase()
      .replace(/[^\p{L}\p{N} _-]/gu, "")
      .replace(/ /g, "-");
    const count = seen.get(slug) ?? 0;
    seen.set(slug, count + 1);
    anchors.add(count === 0 ? slug : `${slug}-${count}`);
  }
  return anchors;
}

describe("documents", () => {
  it.for(DOCUMENTS)("every relative link in %s reaches a file, and a heading of it when it names one", (document) => {
    const broken: string[] = [];
    for (const [, target] of prose(read(document)).matchAll(/\]\(([^)\s]+)\)/g)) {
      if (/^[a-z]+:/.test(target!)) continue;
      const [file, anchor] = target!.split("#") as [string, string | undefined];
      const resolved = file === "" ? document : path.posix.normalize(path.posix.join(path.posix.dirname(document), file));
      if (!existsSync(path.join(ROOT, resolved))) {
        broken.push(`${target}: no ${resolved}`);
      } else if (anchor !== undefined && resolved.endsWith(".md") && !anchorsOf(read(resolved)).has(anchor)) {
        broken.push(`${target}: no heading #${anchor} in ${resolved}`);
      }
    }
    expect(broken).toEqual([]);
  });

  it("every repository path ARCHITECTURE.md names in backticks exists", () => {
    const named = [...prose(read("ARCHITECTURE.md")).matchAll(/`([^`\s]+)`/g)]
      .map((match) => match[1]!.replace(/[:,]$/, ""))
      .filter((text) => /^(src|lib|__test__|test-bun|scripts|bench|bin|docs|examples|\.ci|npm|native)\/|^[\w.-]+\.(md|json|toml|rs|ts|mjs|mts)$/.test(text));
    expect(named.length).toBeGreaterThan(20);
    expect(named.filter((name) => !existsSync(path.join(ROOT, name)))).toEqual([]);
  });

  it("the README is at most 400 lines and ARCHITECTURE.md at most 250: the rest is in docs/", () => {
    expect(read("README.md").split("\n").length).toBeLessThanOrEqual(400);
    expect(read("ARCHITECTURE.md").split("\n").length).toBeLessThanOrEqual(250);
  });
});
