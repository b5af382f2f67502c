// ownerHostId: locks on a volume that several machines share.
// Run: node examples/shared-volume.mjs
import { inspectLock, withFileLock } from "exactlock";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";

const dir = await mkdtemp(join(tmpdir(), "exactlock-example-"));
const sharedFile = join(dir, "jobs.json"); // imagine /mnt/shared/jobs.json

// One id per machine: unique among the machines sharing the volume, the same
// in every process of this machine, and stable across reboots.
const ownerHostId = "build-box-7";

await withFileLock(
  sharedFile,
  async () => {
    const here = await inspectLock(sharedFile, { ownerHostId });
    const elsewhere = await inspectLock(sharedFile, { ownerHostId: "build-box-8" });
    console.log(here.holder.ownerHostId, here.holder.liveness); // build-box-7 live
    // Another machine cannot probe our pid: it never reclaims this lock.
    console.log(elsewhere.holder.liveness, elsewhere.reason, elsewhere.stale); // unknown foreign_host false
  },
  { ownerHostId },
);

await rm(dir, { recursive: true });
