#!/usr/bin/env node
// The import circles among the Rust modules of src/ (production code: test modules and
// test-only files left out), as strongly connected components of "module A names
// something in module B":
//
//   node scripts/import-circles.mjs        one line per circle; exit 1 if there is any
//   node scripts/import-circles.mjs --json
//
// A module names another by a `crate::…` or `super::…` path (braces expanded), or a child
// of its own by the child's name (or the alias a `pub use child as alias;` gives it).
// Naming an ancestor (an item of a parent's mod.rs) is not an edge: that is where shared
// ground lives. A reading of text, not of the compiler's resolution: a path in a string
// or a doc comment is skipped with the comments; a `cfg` is not evaluated, so every
// platform's code counts.
import * as fs from "node:fs";
import * as path from "node:path";
import { fileURLToPath } from "node:url";

const SRC = path.join(path.dirname(fileURLToPath(import.meta.url)), "..", "src");
const TEST_FILES = /(^|\/)(tests|proptests|kernel_tests|testutil)\.rs$/;

/** Every module of src/, by its path (`lock::acquire`), with its file. */
function modules() {
  const found = new Map();
  const walk = (dir) => {
    for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) walk(full);
      else if (entry.name.endsWith(".rs")) {
        const parts = path.relative(SRC, full).slice(0, -3).split(path.sep);
        if (parts.at(-1) === "mod" || parts.at(-1) === "lib") parts.pop();
        found.set(parts.join("::"), path.relative(SRC, full));
      }
    }
  };
  walk(SRC);
  return found;
}

/** A file's production text: comments gone, and everything from its `#[cfg(test)] mod tests` on. */
function productionText(file) {
  let text = fs.readFileSync(path.join(SRC, file), "utf8");
  const tests = text.search(/#\[cfg\(test\)\]\s*mod tests\b/);
  if (tests >= 0) text = text.slice(0, tests);
  return text.replace(/\/\/[^\n]*/g, "");
}

/** `a::b::{c, d::e}` → a::b::c, a::b::d::e (one level of braces; enough for a reading). */
function expandPaths(text, prefix) {
  const found = [];
  const pattern = new RegExp(`\\b${prefix}::((?:[a-z_][a-z0-9_]*::)*)(?:\\{([^}]*)\\}|([a-z_][a-z0-9_]*))`, "g");
  for (const [, head, braced, single] of text.matchAll(pattern)) {
    const base = head.replace(/::$/, "");
    const tails = braced === undefined ? [single] : braced.split(",").map((item) => item.trim().split(/::|\s/)[0]);
    for (const tail of tails) if (tail && /^[a-z_]/.test(tail)) found.push([base, tail].filter(Boolean).join("::"));
    if (braced !== undefined && base) found.push(base);
  }
  return found;
}

export function importGraph() {
  const all = modules();
  const edges = new Map([...all.keys()].map((name) => [name, new Set()]));
  for (const [name, file] of all) {
    if (TEST_FILES.test(file)) continue;
    const text = productionText(file);
    const parts = name.split("::");
    const parent = parts.slice(0, -1);
    const refs = [
      ...expandPaths(text, "crate").map((ref) => ref.split("::")),
      ...expandPaths(text, "super").map((ref) => [...parent, ...ref.split("::")]),
    ];
    const children = [...all.keys()].filter((other) => other.startsWith(`${name}::`) && !other.slice(name.length + 2).includes("::"));
    for (const child of children) {
      const own = child.slice(name.length + 2);
      const aliases = [own, ...[...text.matchAll(new RegExp(`\\buse ${own} as ([a-z_][a-z0-9_]*)`, "g"))].map((m) => m[1])];
      if (aliases.some((alias) => new RegExp(`(?<!::)\\b${alias}::`).test(text))) refs.push(child.split("::"));
    }
    for (const ref of refs) {
      for (let k = ref.length; k > 0; k--) {
        const target = ref.slice(0, k).join("::");
        if (!all.has(target)) continue;
        if (target !== name && !`${name}::`.startsWith(`${target}::`)) edges.get(name).add(target);
        break;
      }
    }
  }
  return edges;
}

/** Tarjan's strongly connected components with more than one module. */
export function circles(edges = importGraph()) {
  const index = new Map();
  const low = new Map();
  const stack = [];
  const onStack = new Set();
  const found = [];
  let next = 0;
  const visit = (v) => {
    index.set(v, next);
    low.set(v, next++);
    stack.push(v);
    onStack.add(v);
    for (const w of edges.get(v)) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v), low.get(w)));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v), index.get(w)));
    }
    if (low.get(v) === index.get(v)) {
      const component = [];
      let w;
      do {
        w = stack.pop();
        onStack.delete(w);
        component.push(w);
      } while (w !== v);
      if (component.length > 1) found.push(component.sort());
    }
  };
  for (const v of [...edges.keys()].sort()) if (!index.has(v)) visit(v);
  return found.sort((a, b) => a[0].localeCompare(b[0]));
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const found = circles();
  if (process.argv.includes("--json")) console.log(JSON.stringify(found));
  else for (const circle of found) console.log(circle.join(" ↔ "));
  if (!process.argv.includes("--json")) console.log(`${found.length} import circle(s) in src/`);
  process.exitCode = found.length > 0 ? 1 : 0;
}
