/**
 * `exactlock gc DIR`: finds `*.lock` directories below DIR and removes only
 * the provably stale ones, through the identity-bound path: the verdict's
 * identity is the removal authority, so a lock that changed after the
 * verdict (a successor, a swap) is kept. Then the debris beside locks
 * (staging and quarantine directories of killed processes), judged by the
 * native core the same way. Prints every decision.
 */
import type { Dirent } from "node:fs";
import { lstat, readdir } from "node:fs/promises";
import * as path from "node:path";
import {
  genericFileLockDirStaleVerdict,
  inspectLock,
  readFileLockObservationForGc,
  removeFileLockDirForGc,
  type LockInspection,
} from "../index.js";
import { collectDebrisIn, type DebrisDecision } from "../debris.js";
import { hostIdFlag, integerFlag, parseFlags, UsageError } from "./args.js";
import { printJson } from "./format.js";
import { explainReason } from "./reasons.js";

export const GC_HELP = `Usage: exactlock gc [options] DIR

Walks DIR (never following symlinks), finds lock directories (*.lock), and
removes those a waiter would reclaim and that carry an owner record: the
owner is proven dead (or its pid reused). Each removal is bound to the exact
object judged: if the lock changed since the verdict, it is kept. Never
removes a live, foreign-host, malformed, ownerless or symlinked lock.

It also judges what killed processes leave beside a lock: staging
directories (F.lock.pending.<pid>.<uuid>) and quarantine directories
(F.lock.removing.<pid>.<uuid>, and the old fixed F.lock.removing, with the
F.lock.removing.owner record upstream 0.18 writes beside it). One is
removed only when its content is a lock's (one owner record, or nothing)
and its owner is proven dead (for 0.18's, the remover its record names);
anything else there is kept and reported. So are the temp files of
updates (.F.upd.<pid>.<uuid>) that killed writers left: removed once the
writer is proven dead and no process holds the file's flock.

Options:
  --dry-run              decide and print, remove nothing
  --json                 print a JSON object with every decision
  --stale-ms MS          age after which an ownerless lock dir counts as stale
                         (default 10000; gc still keeps it: it has no record)
  --owner-host-id ID     judge as a process with this ownerHostId would
  -h, --help             show this help

Exit status: 0 when every decision was carried out, 1 when DIR could not be
read or a removal failed, 2 for usage errors.
`;

export type GcAction = "removed" | "would_remove" | "kept" | "gone";

/** One decision about one `*.lock` entry. */
export interface GcDecision {
  lockPath: string;
  action: GcAction;
  /** A stable reason code: a verdict reason, or `symlink`, `owner_changed`, `cleanup_failed`, … */
  reason: string;
  /** Who held it, in one sentence. */
  description: string;
  /** The holder's pid, when the lock had a valid owner record. */
  pid?: number;
  /** `pid N (liveness) since T`, when the lock had a valid owner record. */
  holder?: string;
}

export interface GcReport {
  dir: string;
  dryRun: boolean;
  decisions: GcDecision[];
  errors: Array<{ path: string; message: string }>;
  counts: Record<GcAction, number>;
}

interface GcOptions {
  dir: string;
  dryRun: boolean;
  json: boolean;
  staleMs: number;
  ownerHostId?: string;
}

function parseGcArgs(argv: string[]): GcOptions | "help" {
  const { flags, positionals } = parseFlags("gc", argv, {
    "dry-run": { type: "boolean" },
    json: { type: "boolean" },
    "stale-ms": { type: "string" },
    "owner-host-id": { type: "string" },
  });
  if (flags.help) return "help";
  if (positionals.length !== 1) throw new UsageError("gc needs exactly one DIR", "gc");
  const ownerHostId = hostIdFlag("gc", flags);
  return {
    dir: path.resolve(positionals[0]!),
    dryRun: flags["dry-run"] === true,
    json: flags.json === true,
    staleMs: integerFlag("gc", flags, "stale-ms", 10_000),
    ...(ownerHostId === undefined ? {} : { ownerHostId }),
  };
}

/** A `*.lock` entry found by the walk. */
interface Candidate {
  lockPath: string;
  symlink: boolean;
}

/** What the walk found: lock entries, and the directories that hold debris names. */
interface Found {
  locks: Candidate[];
  debrisDirs: string[];
}

function isLockName(name: string): boolean {
  return name.endsWith(".lock") && name.length > ".lock".length;
}

/** A name the native core may judge as debris (it decides; this only finds). */
function isDebrisName(name: string): boolean {
  return (
    /\.lock\.(pending|removing)\./.test(name) ||
    /.\.lock\.removing(\.owner)?$/.test(name) ||
    /^\..+\.upd\.[1-9]\d*\.[0-9a-f-]{36}$/.test(name)
  );
}

/** What to do with one directory entry: a candidate, a directory to descend, or nothing. */
function classify(dir: string, entry: Dirent): { candidate?: Candidate; descend?: string; debris?: boolean } {
  const full = path.join(dir, entry.name);
  if (isDebrisName(entry.name)) return { debris: true };
  if (isLockName(entry.name) && entry.isSymbolicLink()) return { candidate: { lockPath: full, symlink: true } };
  if (!entry.isDirectory()) return {};
  if (isLockName(entry.name)) return { candidate: { lockPath: full, symlink: false } };
  return { descend: full };
}

/** Walks `root` depth-first without following symlinks; lock dirs and debris are not descended. */
async function findLocks(root: string, errors: GcReport["errors"]): Promise<Found> {
  const found: Found = { locks: [], debrisDirs: [] };
  const pending = [root];
  while (pending.length > 0) {
    const dir = pending.pop()!;
    let entries: Dirent[];
    try {
      entries = await readdir(dir, { withFileTypes: true });
    } catch (error) {
      errors.push({ path: dir, message: (error as Error).message });
      continue;
    }
    entries.sort((a, b) => (a.name < b.name ? 1 : a.name > b.name ? -1 : 0));
    let debris = false;
    for (const entry of entries) {
      const { candidate, descend, debris: isDebris } = classify(dir, entry);
      if (candidate) found.locks.push(candidate);
      if (descend) pending.push(descend);
      debris ||= isDebris === true;
    }
    if (debris) found.debrisDirs.push(dir);
  }
  found.locks.sort((a, b) => (a.lockPath < b.lockPath ? -1 : a.lockPath > b.lockPath ? 1 : 0));
  found.debrisDirs.sort();
  return found;
}

/** A debris decision as a gc decision. */
function debrisDecision(debris: DebrisDecision, dryRun: boolean): GcDecision {
  const action: GcAction = debris.removed
    ? "removed"
    : dryRun && debris.status === "dead" && debris.reason === "file_lock_staging_owner_dead"
      ? "would_remove"
      : debris.reason === "enoent_already_gone"
        ? "gone"
        : "kept";
  const owner = debris.pid === undefined ? "" : `pid ${debris.pid} (${debris.status})`;
  return {
    lockPath: debris.path,
    action,
    reason: debris.reason,
    description: `${debris.kind.replace("_", " ")} directory${owner ? ` of ${owner}` : ""}`,
    ...(debris.pid === undefined ? {} : { pid: debris.pid }),
    ...(owner ? { holder: `${debris.kind.replace("_", " ")} directory of ${owner}` } : {}),
  };
}

function describe(inspection: LockInspection): { description: string; pid?: number; holder?: string } {
  const holder = inspection.holder;
  if (!holder) return { description: inspection.description };
  const host = holder.ownerHostId ? ` on host ${holder.ownerHostId}` : "";
  const liveness = holder.liveness.replace(/_/g, " ");
  return { description: inspection.description, pid: holder.pid, holder: `pid ${holder.pid}${host} (${liveness}) since ${holder.since}` };
}

/** Maps a removal outcome to a decision. */
function afterRemoval(outcome: string, base: Omit<GcDecision, "action" | "reason">, reason: string): GcDecision {
  switch (outcome) {
    case "removed":
      return { ...base, action: "removed", reason };
    case "missing":
      return { ...base, action: "gone", reason: "missing" };
    default:
      return { ...base, action: "kept", reason: outcome };
  }
}

/** Judges one lock dir and, when provably stale and allowed, removes exactly what was judged. */
async function decide(candidate: Candidate, options: GcOptions): Promise<GcDecision> {
  const { lockPath } = candidate;
  if (candidate.symlink) {
    return { lockPath, action: "kept", reason: "symlink", description: "a symlink; never followed or removed" };
  }
  const filePath = lockPath.slice(0, -".lock".length);
  const hostOptions = options.ownerHostId === undefined ? {} : { ownerHostId: options.ownerHostId };
  const inspection = await inspectLock(filePath, { staleMs: options.staleMs, ...hostOptions });
  const base = { lockPath, ...describe(inspection) };
  const verdict = await genericFileLockDirStaleVerdict(lockPath, options.staleMs, options.ownerHostId);
  if (!verdict.stale) {
    const reason = inspection.stale ? "changed_while_judging" : inspection.reason;
    return { ...base, action: "kept", reason };
  }
  const observation = await readFileLockObservationForGc(lockPath);
  if (!observation) return { ...base, action: "kept", reason: "no_owner_record" };
  if (options.dryRun) return { ...base, action: "would_remove", reason: inspection.reason };
  const outcome = await removeFileLockDirForGc(lockPath, observation.info, verdict.identity);
  return afterRemoval(outcome, base, inspection.reason);
}

const WORDS: Record<string, string> = {
  unverified_staging_directory:
    "named like lock debris, but its content is not a lock's (a user's directory, a file, a symlink, a malformed record); never removed",
  in_process_staging_owner: "belongs to this very process",
  host_qualified_staging_owner: "another host's (or a host-qualified) owner; its pid is not ours to probe",
  file_lock_staging_owner_alive: "its owner is running",
  file_lock_staging_owner_unknown: "its owner's liveness cannot be proven; kept",
  busy: "another process is removing or reclaiming it right now",
  enoent_already_gone: "already gone",
  symlink: "a symlink named like a lock; never followed or removed",
  no_owner_record: "stale but without an owner record (an empty legacy dir); gc removes only recorded owners",
  owner_changed: "the lock changed after the verdict (a new owner or a swapped object); left alone",
  cleanup_failed: "removal failed part-way; nothing outside the judged object was touched",
  missing: "already gone (someone else removed or reclaimed it)",
  changed_while_judging: "the lock changed while it was being judged; left alone",
};

/** The two lines printed for one decision: what was done where, and why. */
export function formatDecision(decision: GcDecision): string {
  const why = WORDS[decision.reason] ?? decision.holder ?? explainReason(decision.reason);
  const label = decision.action.replace("_", " ").padEnd(12);
  return `${label} ${decision.lockPath}\n${" ".repeat(13)}${decision.reason}: ${why}`;
}

function count(decisions: GcDecision[]): Record<GcAction, number> {
  const counts: Record<GcAction, number> = { removed: 0, would_remove: 0, kept: 0, gone: 0 };
  for (const decision of decisions) counts[decision.action] += 1;
  return counts;
}

async function ensureDirectory(dir: string): Promise<void> {
  const stats = await lstat(dir).catch((error: Error) => {
    throw new Error(`cannot read ${dir}: ${error.message}`);
  });
  if (!stats.isDirectory()) throw new Error(`${dir} is not a directory`);
}

/** Runs `gc`; resolves to the exit status. */
export async function gcCommand(argv: string[]): Promise<number> {
  const options = parseGcArgs(argv);
  if (options === "help") {
    process.stdout.write(GC_HELP);
    return 0;
  }
  await ensureDirectory(options.dir);
  const report: GcReport = { dir: options.dir, dryRun: options.dryRun, decisions: [], errors: [], counts: count([]) };
  const record = (decision: GcDecision) => {
    report.decisions.push(decision);
    if (!options.json) process.stdout.write(`${formatDecision(decision)}\n`);
  };
  const found = await findLocks(options.dir, report.errors);
  for (const candidate of found.locks) {
    try {
      record(await decide(candidate, options));
    } catch (error) {
      report.errors.push({ path: candidate.lockPath, message: (error as Error).message });
    }
  }
  for (const dir of found.debrisDirs) {
    try {
      for (const debris of await collectDebrisIn(dir, options.dryRun, options.ownerHostId)) {
        record(debrisDecision(debris, options.dryRun));
      }
    } catch (error) {
      report.errors.push({ path: dir, message: (error as Error).message });
    }
  }
  report.counts = count(report.decisions);
  printSummary(report, options.json);
  const failed = report.errors.length > 0 || report.decisions.some((d) => d.reason === "cleanup_failed");
  return failed ? 1 : 0;
}

function printSummary(report: GcReport, json: boolean): void {
  if (json) {
    printJson(report);
    return;
  }
  for (const error of report.errors) process.stderr.write(`exactlock gc: ${error.path}: ${error.message}\n`);
  const { removed, would_remove, kept, gone } = report.counts;
  const done = report.dryRun ? `${would_remove} would be removed` : `${removed} removed`;
  process.stdout.write(
    `${report.decisions.length} lock(s) and debris under ${report.dir}: ${done}, ${kept} kept, ${gone} already gone` +
      `${report.dryRun ? " (dry run: nothing removed)" : ""}\n`,
  );
}
