// withFileLock: hold the lock of a file while a read-modify-write runs.
// Run: node examples/with-file-lock.mjs
import { withFileLock } from "exactlock";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";

const dir = await mkdtemp(join(tmpdir(), "exactlock-example-"));
const counterFile = join(dir, "counter.json");
await writeFile(counterFile, JSON.stringify({ count: 0 }));

async function increment() {
  // The lock is the directory counter.json.lock; it is released when fn settles.
  await withFileLock(counterFile, async () => {
    const { count } = JSON.parse(await readFile(counterFile, "utf8"));
    await writeFile(counterFile, JSON.stringify({ count: count + 1 }));
  });
}

await Promise.all(Array.from({ length: 10 }, increment)); // ten concurrent updates
console.log(await readFile(counterFile, "utf8")); // {"count":10}

await rm(dir, { recursive: true });
