// acquireLock returns the release function; release in finally (Node, plain JS).
// Run: node examples/acquire-release.mjs
import { acquireLock } from "exactlock";
import { existsSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";

const dir = await mkdtemp(join(tmpdir(), "exactlock-example-"));
const configFile = join(dir, "config.toml");

const release = await acquireLock(configFile);
try {
  console.log("locked:", existsSync(`${configFile}.lock`)); // locked: true
  await writeFile(configFile, 'theme = "dark"\n');
} finally {
  await release();
}
console.log("locked:", existsSync(`${configFile}.lock`)); // locked: false

await rm(dir, { recursive: true });
