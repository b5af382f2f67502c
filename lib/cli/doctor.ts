/**
 * `exactlock doctor DIR…`: what the filesystem under each DIR carries for a
 * lock, found by trying it (the native probe), and what follows for the
 * lock's guarantees there. The first line of each DIR's block is a
 * one-line summary (`--line` prints only it), so filesystems can be
 * compared one line each.
 */
import * as path from "node:path";
import { type FilesystemProbe, type FilesystemProbeFailure, probeFilesystem } from "../probe.js";
import { parseFlags, UsageError } from "./args.js";
import { printJson, table } from "./format.js";

export const DOCTOR_HELP = `Usage: exactlock doctor [options] DIR...

Shows what the filesystem under each DIR supports for a lock, by trying it
in a scratch directory (.exactlock-doctor.<pid>.<uuid>) made in DIR and
removed again: renameat2 RENAME_NOREPLACE (publication) and RENAME_EXCHANGE
(reclaim in one step), flock (reclaimers' turns), inotify (prompt wake-up),
the statfs type, and whether other hosts may write there (local, network,
FUSE). Then what follows for the lock's guarantees on it. The first line for
each DIR is a one-line summary.

This process's locks remember the result: where a rename flag was refused,
they go straight to the fallback.

Options:
  --json                 print a JSON array, one object per DIR
  --line                 print only the one-line summary per DIR
  -h, --help             show this help

Exit status: 0 when every DIR was probed, 1 when one could not be (missing,
not a directory, not writable, read-only: the message says what to do), 2
for usage errors.
`;

interface DoctorOptions {
  dirs: string[];
  json: boolean;
  line: boolean;
}

function parseDoctorArgs(argv: string[]): DoctorOptions | "help" {
  const { flags, positionals } = parseFlags("doctor", argv, {
    json: { type: "boolean" },
    line: { type: "boolean" },
  });
  if (flags.help) return "help";
  if (positionals.length === 0) throw new UsageError("doctor needs at least one DIR", "doctor");
  if (flags.json === true && flags.line === true) throw new UsageError("--json and --line do not go together", "doctor");
  return { dirs: positionals.map((dir) => path.resolve(dir)), json: flags.json === true, line: flags.line === true };
}

/** `DIR: TYPE (CLASS) noreplace=… exchange=… flock=… inotify=…` */
export function summaryLine(probe: FilesystemProbe): string {
  return (
    `${probe.dir}: ${probe.fsType} (${probe.class}) noreplace=${probe.renameNoreplace.result} ` +
    `exchange=${probe.renameExchange.result} flock=${probe.flock.result} inotify=${probe.inotify.result}`
  );
}

const CLASS_WORDS: Record<FilesystemProbe["class"], string> = {
  local: "local: every writer is on this host",
  network: "network: other hosts may write here",
  fuse: "FUSE: a user-space daemon serves it, local or remote (treated as network)",
  unknown: "unknown statfs type (treated as network)",
};

const INOTIFY_WORDS: Record<FilesystemProbe["inotify"]["result"], string> = {
  all_changes: "sees every change (every writer is on this host)",
  this_host_only: "sees this host's changes only; other hosts' raise no event here",
  no_events: "a watch is accepted but reports nothing",
  unavailable: "cannot watch here",
};

function callWords(call: FilesystemProbe["renameNoreplace"], works: string): string {
  const errno = call.errno ? ` (${call.errno})` : "";
  switch (call.result) {
    case "yes":
      return `yes: ${works}`;
    case "no":
      return `no${errno}: refused by the filesystem`;
    case "broken":
      return "broken: accepted, but did not do what it says";
    default:
      return `unknown${errno}: the try failed for another reason`;
  }
}

/** The text block for one probed DIR. */
export function formatProbe(probe: FilesystemProbe): string {
  const mounted = probe.mountPoint
    ? `${probe.fsType}${probe.mountSource ? ` from ${probe.mountSource}` : ""}, mounted at ${probe.mountPoint}`
    : probe.fsType;
  const rows: Array<[string, string]> = [
    ["filesystem", `${mounted} (statfs ${probe.statfsType}: ${probe.statfsName})`],
    ["class", CLASS_WORDS[probe.class]],
    ["RENAME_NOREPLACE", callWords(probe.renameNoreplace, "moves to a free name, refuses an occupied one")],
    ["RENAME_EXCHANGE", callWords(probe.renameExchange, "swaps two names in one step")],
    ["flock", callWords(probe.flock, "a second open of the file is refused the lock")],
    [
      "inotify",
      `${INOTIFY_WORDS[probe.inotify.result]}${probe.inotify.errno ? ` (${probe.inotify.errno})` : ""}`,
    ],
  ];
  const lines = [summaryLine(probe), table(rows), "  what follows for a lock here:"];
  for (const note of probe.notes) lines.push(`  - ${note.text} [${note.code}]`);
  if (probe.leftover) lines.push(`  warning: the scratch directory ${probe.leftover} could not be removed; remove it by hand`);
  return lines.join("\n");
}

function failureLine(failure: FilesystemProbeFailure): string {
  return `exactlock doctor: ${failure.message} [${failure.code}]. Next: ${failure.nextStep}.\n`;
}

/** Runs `doctor`; resolves to the exit status. */
export async function doctorCommand(argv: string[]): Promise<number> {
  const options = parseDoctorArgs(argv);
  if (options === "help") {
    process.stdout.write(DOCTOR_HELP);
    return 0;
  }
  const results: Array<FilesystemProbe | FilesystemProbeFailure> = [];
  for (const dir of options.dirs) results.push(await probeFilesystem(dir));
  const failed = results.some((result) => !result.ok);
  if (options.json) {
    printJson(results.map((result) => (result.ok ? { summary: summaryLine(result), ...result } : result)));
    return failed ? 1 : 0;
  }
  const blocks: string[] = [];
  for (const result of results) {
    if (!result.ok) process.stderr.write(failureLine(result));
    else blocks.push(options.line ? summaryLine(result) : formatProbe(result));
  }
  if (blocks.length > 0) process.stdout.write(`${blocks.join(options.line ? "\n" : "\n\n")}\n`);
  return failed ? 1 : 0;
}
