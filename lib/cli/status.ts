/**
 * `exactlock status FILE…`: who holds each lock, whether they are alive,
 * how old the lock is, and whether a waiter would reclaim it. Read-only.
 */
import { lstat } from "node:fs/promises";
import * as path from "node:path";
import { inspectLock, type LockInspection } from "../index.js";
import { hostIdFlag, integerFlag, parseFlags, UsageError } from "./args.js";
import { formatDuration, printJson, table } from "./format.js";
import { explainReason } from "./reasons.js";

export const STATUS_HELP = `Usage: exactlock status [options] FILE...

Shows who holds the lock of each FILE (the directory FILE.lock): the holder's
pid, whether it is alive, the lock's age, and whether a waiter would reclaim
it. Read-only: never changes anything on disk.

Options:
  --json                 print a JSON array, one object per FILE
  --stale-ms MS          age after which an ownerless (empty) lock dir counts
                         as stale (default 10000, as the library)
  --owner-host-id ID     judge as a process with this ownerHostId would
                         (locks on volumes shared between hosts)
  -h, --help             show this help

Exit status, for scripts (with several FILEs, the first that applies):
  4  a lock could not be read
  1  held: a waiter would wait (flock -n would fail)
  3  stale: a waiter would reclaim it at once
  0  free
  2  usage error
`;

/** The exit status of each verdict, and of a lock that could not be read. */
export const STATUS_EXIT = { free: 0, held: 1, usage: 2, stale: 3, unreadable: 4 } as const;

/** The exit status for what was found: the first of unreadable, held, stale, free that applies. */
export function statusExit(verdicts: readonly StatusEntry["verdict"][], unreadable: boolean): number {
  if (unreadable) return STATUS_EXIT.unreadable;
  if (verdicts.includes("held")) return STATUS_EXIT.held;
  if (verdicts.includes("stale")) return STATUS_EXIT.stale;
  return STATUS_EXIT.free;
}

/** One FILE's status: the inspection plus its age and a one-word verdict. */
export interface StatusEntry extends LockInspection {
  /** `free`, `held` (a waiter would wait) or `stale` (a waiter would reclaim it). */
  verdict: "free" | "held" | "stale";
  /** Milliseconds since the record's timestamp (or the lock dir's mtime when it has no record). */
  ageMs: number | null;
  explanation: string;
}

interface StatusOptions {
  files: string[];
  json: boolean;
  staleMs?: number;
  ownerHostId?: string;
}

function parseStatusArgs(argv: string[]): StatusOptions | "help" {
  const { flags, positionals } = parseFlags("status", argv, {
    json: { type: "boolean" },
    "stale-ms": { type: "string" },
    "owner-host-id": { type: "string" },
  });
  if (flags.help) return "help";
  if (positionals.length === 0) throw new UsageError("status needs at least one FILE", "status");
  const staleMs = flags["stale-ms"] === undefined ? undefined : integerFlag("status", flags, "stale-ms", 0);
  const ownerHostId = hostIdFlag("status", flags);
  return {
    files: positionals.map((file) => path.resolve(file)),
    json: flags.json === true,
    ...(staleMs === undefined ? {} : { staleMs }),
    ...(ownerHostId === undefined ? {} : { ownerHostId }),
  };
}

/** The lock dir's mtime age, without following a symlink; `null` if there is nothing. */
async function mtimeAge(lockPath: string): Promise<number | null> {
  try {
    return Date.now() - (await lstat(lockPath)).mtimeMs;
  } catch {
    return null;
  }
}

async function statusOf(file: string, options: StatusOptions): Promise<StatusEntry> {
  const inspection = await inspectLock(file, {
    ...(options.staleMs === undefined ? {} : { staleMs: options.staleMs }),
    ...(options.ownerHostId === undefined ? {} : { ownerHostId: options.ownerHostId }),
  });
  const verdict = inspection.state === "free" ? "free" : inspection.stale ? "stale" : "held";
  let ageMs: number | null = null;
  if (inspection.holder) ageMs = Date.now() - Date.parse(inspection.holder.since);
  else if (inspection.state !== "free") ageMs = await mtimeAge(inspection.lockPath);
  return { ...inspection, verdict, ageMs, explanation: explainReason(inspection.reason) };
}

function holderLine(entry: StatusEntry): string {
  const holder = entry.holder;
  if (!holder) return entry.description;
  const host = holder.ownerHostId ? ` on host ${holder.ownerHostId}` : "";
  return `pid ${holder.pid}${host}, ${holder.liveness.replace(/_/g, " ")}`;
}

function ageLine(entry: StatusEntry): string {
  if (entry.ageMs === null) return "unknown";
  const since = entry.holder ? ` (since ${entry.holder.since})` : " (lock directory mtime)";
  return `${formatDuration(entry.ageMs)}${since}`;
}

/** The text block for one FILE. */
export function formatStatus(entry: StatusEntry): string {
  const fence: Array<[string, string]> = entry.fence === undefined ? [] : [["fence", `${entry.fence} (the last token handed out)`]];
  if (entry.verdict === "free") {
    return `${entry.filePath}: free\n${table([["lock", `${entry.lockPath} (absent)`], ...fence])}`;
  }
  const rows: Array<[string, string]> = [
    ["lock", entry.lockPath],
    ["holder", holderLine(entry)],
    ["age", ageLine(entry)],
    ["verdict", `${entry.stale ? "stale" : "not stale"} (${entry.reason}): ${entry.explanation}`],
    ...fence,
  ];
  return `${entry.filePath}: ${entry.verdict}\n${table(rows)}`;
}

/** Runs `status`; resolves to the exit status. */
export async function statusCommand(argv: string[]): Promise<number> {
  const options = parseStatusArgs(argv);
  if (options === "help") {
    process.stdout.write(STATUS_HELP);
    return 0;
  }
  const entries: StatusEntry[] = [];
  let failed = false;
  for (const file of options.files) {
    try {
      entries.push(await statusOf(file, options));
    } catch (error) {
      failed = true;
      process.stderr.write(`exactlock status: ${file}: ${(error as Error).message}\n`);
    }
  }
  if (options.json) printJson(entries);
  else process.stdout.write(entries.map(formatStatus).join("\n\n") + (entries.length > 0 ? "\n" : ""));
  return statusExit(
    entries.map((entry) => entry.verdict),
    failed,
  );
}
