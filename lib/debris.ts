/**
 * The debris reaper, in upstream 0.17's vocabulary: staging directories
 * (`F.lock.pending.<pid>.<uuid>`) and quarantine directories
 * (`F.lock.removing.<pid>.<uuid>`) that killed processes left beside a lock.
 * The native core decides and removes; a name only nominates a candidate,
 * and only content that proves it is a lock's, with an owner proven dead,
 * is removed — bound to the directory that was judged.
 */
import * as path from "node:path";
import type * as Binding from "../native/index.js";
import { native } from "./native.js";
import { FileLockError } from "./errors.js";
import { validateFilePath, validateOptionalBoolean, validateOptionalFunction, validateString } from "./validate.js";

/** What a staging directory's owner is, as a probe answers. */
export type FileLockStagingStatus = "alive" | "dead" | "unknown";

/** What was decided about one staging directory (upstream 0.17's shape). */
export interface FileLockStagingResult {
  path: string;
  pid?: number;
  status: FileLockStagingStatus;
  removed: boolean;
  /**
   * `unverified_staging_directory`, `enoent_already_gone`,
   * `host_qualified_staging_owner`, `in_process_staging_owner`,
   * `file_lock_staging_owner_alive|dead|unknown`, `busy` (someone is working
   * on it: a remover, a reclaimer, a publisher still writing its record),
   * `recently_created` (no record yet and its name's pid is dead, but on a
   * filesystem without `flock`, where that proves nothing until it is a
   * second old), or the removal's outcome (`removed`, `owner_changed`,
   * `cleanup_failed`).
   */
  reason: string;
}

/** A caller's answer for a pid: the default asks the kernel (start time, zombie, pid namespace). */
export type FileLockStagingProbe = (pid: number) => FileLockStagingStatus | Promise<FileLockStagingStatus>;

/** The most candidates one reap examines (upstream's bound). */
const MAX_CANDIDATES = 64;

/** The pid in a staging name `<file>.lock.pending.<pid>.<uuid>`, or `null`. */
export function fileLockStagingOwnerPid(name: string): number | null {
  return native.stagingOwnerPid(validateString(name, "name")) ?? null;
}

function resultOf(decision: Binding.StagingResultJs): FileLockStagingResult {
  const result: FileLockStagingResult = {
    path: decision.path,
    status: decision.status,
    removed: decision.removed,
    reason: decision.reason,
  };
  if (decision.pid != null) result.pid = decision.pid;
  return result;
}

/**
 * Inspects one staging (or quarantine) directory and, with `remove`,
 * removes it when its owner is dead. A `probe` answers for the owner
 * instead of the kernel; its answer binds to the directory it was asked
 * about (a directory recreated meanwhile under the name is not removed).
 */
export async function inspectFileLockStagingDir(
  stagingPath: string,
  probe?: FileLockStagingProbe,
  remove = false,
): Promise<FileLockStagingResult> {
  const checked = validateFilePath(stagingPath, "stagingPath");
  const ask = validateOptionalFunction<FileLockStagingProbe>(probe, "probe");
  const removing = validateOptionalBoolean(remove, "remove") ?? false;
  if (!ask) return resultOf(await native.inspectStagingDirNative(checked, removing));
  const first = await native.inspectStagingDirNative(checked, false);
  // The probe answers for the owner whenever the kernel's answer is what
  // decides: also for a young directory without a record whose owner's
  // death cannot be proven here (no flock), so its alive/unknown is reported.
  const judged = first.reason.startsWith("file_lock_staging_owner_") || first.reason === "recently_created";
  if (first.pid == null || !first.root || !judged) return resultOf(first);
  const status = await ask(first.pid);
  if (status !== "dead") return { ...resultOf(first), status, reason: `file_lock_staging_owner_${status}` };
  // Dead by the probe: the core decides again with that answer, bound to
  // the directory the probe was asked about (and keeps a young one without
  // a record where that death is not proven).
  return resultOf(await native.inspectStagingDirNative(checked, removing, status, first.root));
}

/**
 * Removes the staging directories of `lockPath` whose owners are dead (at
 * most 64 per call; the next call picks up the rest). Directories named
 * otherwise are not looked at; the others are listed with why they stay.
 */
export async function reapOrphanedLockStagingDirs(
  lockPath: string,
): Promise<{ removed: string[]; retained: FileLockStagingResult[] }> {
  const checked = validateFilePath(lockPath, "lockPath");
  const listing = await native.reapLockDebrisNative(
    path.dirname(checked),
    path.basename(checked),
    ["staging"],
    true,
    MAX_CANDIDATES,
  );
  if (listing.code) throw new FileLockError(listing.code, `Failed to reap staging directories of ${checked}: ${listing.message}.`, checked);
  const removed: string[] = [];
  const retained: FileLockStagingResult[] = [];
  for (const decision of listing.decisions) {
    if (decision.removed) removed.push(decision.path);
    else retained.push(resultOf(decision));
  }
  return { removed, retained };
}

/** One decision about debris beside a lock, as `exactlock gc` prints it. */
export interface DebrisDecision extends FileLockStagingResult {
  kind: "staging" | "quarantine" | "legacy_quarantine" | "removal_record" | "update_temp";
}

/**
 * Every staging and quarantine directory of every lock in `dir`, judged
 * (as a process with `ownerHostId` would, when given) and, unless
 * `dryRun`, removed when provably abandoned. For `exactlock gc`.
 */
export async function collectDebrisIn(dir: string, dryRun: boolean, ownerHostId?: string): Promise<DebrisDecision[]> {
  const listing = await native.reapLockDebrisNative(
    dir,
    undefined,
    ["staging", "quarantine", "legacy_quarantine", "removal_record", "update_temp"],
    !dryRun,
    4096,
    ownerHostId,
  );
  if (listing.code) throw new FileLockError(listing.code, `${listing.message}.`, dir);
  return listing.decisions.map((decision) => ({ ...resultOf(decision), kind: decision.kind }));
}
