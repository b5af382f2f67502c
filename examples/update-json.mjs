// updateJson: change a file under its lock, atomically: read, update, write whole, release.
// Run: node examples/update-json.mjs
import { updateJson } from "exactlock";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";

const dir = await mkdtemp(join(tmpdir(), "exactlock-example-"));
const counterFile = join(dir, "counter.json");

// The lock is the directory counter.json.lock; the new content goes to a temp file beside
// counter.json, is flushed and renamed over it: a reader sees the old file or the new one.
const increment = () => updateJson(counterFile, (data) => ({ count: (data?.count ?? 0) + 1 }));

await Promise.all(Array.from({ length: 10 }, increment)); // ten concurrent updates
console.log((await readFile(counterFile, "utf8")).trim().replace(/\s+/g, "")); // {"count":10}

await rm(dir, { recursive: true });
