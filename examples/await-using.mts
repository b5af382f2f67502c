// `await using`: the release function is also async-disposable (Symbol.asyncDispose).
// Needs a runtime that parses explicit resource management (Bun, or
// TypeScript 5.2+ compiled with lib "esnext.disposable"); Node 20 cannot.
// Run: npx bun examples/await-using.mts
import { acquireLock } from "exactlock";
import { existsSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";

const dir = await mkdtemp(join(tmpdir(), "exactlock-example-"));
const configFile = join(dir, "config.toml");

async function save(text: string): Promise<void> {
  await using release = await acquireLock(configFile);
  console.log("locked:", existsSync(`${configFile}.lock`)); // locked: true
  if (text === "") throw new Error("refusing to save an empty config");
  await writeFile(configFile, text);
} // released here, whether the body returned or threw

await save('theme = "dark"\n');
console.log("locked:", existsSync(`${configFile}.lock`)); // locked: false
await save("").catch((error: Error) => console.log("failed:", error.message)); // failed: refusing to save an empty config
console.log("locked:", existsSync(`${configFile}.lock`)); // locked: false

await rm(dir, { recursive: true });
