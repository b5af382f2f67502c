// Garbage collection of lock dirs by another tool: judge, then remove exactly
// what was judged. Run: node examples/gc.mjs
import {
  acquireLock,
  genericFileLockDirIsStale,
  genericFileLockDirStaleVerdict,
  readFileLockInfoForGc,
  readFileLockObservationForGc,
  removeFileLockDirForGc,
} from "exactlock";
import { spawnSync } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

if (process.argv[2] === "--crash-while-holding") {
  await acquireLock(process.argv[3]);
  process.exit(0); // exits without releasing: the owner is dead, its lock stays
}

const dir = await mkdtemp(join(tmpdir(), "exactlock-example-"));
const crashedFile = join(dir, "crashed.json");
spawnSync(process.execPath, [fileURLToPath(import.meta.url), "--crash-while-holding", crashedFile]);
const liveFile = join(dir, "live.json");
const release = await acquireLock(liveFile);

async function collect(lockDir) {
  const verdict = await genericFileLockDirStaleVerdict(lockDir);
  if (!verdict.stale) return "kept";
  const observation = await readFileLockObservationForGc(lockDir);
  if (!observation) return "kept"; // no owner record: GC never removes it
  // Removed only if the dir is still exactly what the verdict judged.
  return removeFileLockDirForGc(lockDir, observation.info, verdict.identity);
}

const crashedOwner = await readFileLockInfoForGc(`${crashedFile}.lock`);
console.log(typeof crashedOwner.pid, await genericFileLockDirIsStale(`${crashedFile}.lock`)); // number true
console.log(await collect(`${crashedFile}.lock`)); // removed
console.log(await collect(`${liveFile}.lock`)); // kept

await release();
await rm(dir, { recursive: true });
