// inspectLock: who holds a lock, are they alive, would a waiter reclaim it.
// Read-only. Run: node examples/inspect.mjs
import { acquireLock, inspectLock } from "exactlock";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";

const dir = await mkdtemp(join(tmpdir(), "exactlock-example-"));
const file = join(dir, "state.json");
const release = await acquireLock(file);

const inspection = await inspectLock(file);
console.log(inspection.state, inspection.holder.pid === process.pid); // record true
console.log(inspection.holder.liveness, inspection.stale, inspection.reason); // live false owner_alive
console.log(inspection.description.replace(/\d+/g, "N")); // held by pid N (live) since N-N-NTN:N:N.NZ

await release();
console.log((await inspectLock(file)).state); // free

await rm(dir, { recursive: true });
