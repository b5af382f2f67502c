/**
 * Helpers of the acceptance suites for real-world holes (clock steps, pid
 * namespaces, debris names, worker threads, overlayfs, a missing /proc):
 * what the kernel says about a process (start ticks, boot id, pid
 * namespace), `ps -o lstart=` strings, owner records in the original and in
 * the new format, and a content listing of a tree. A test that needs root,
 * Linux or a tool says so with ./premises.ts, and is skipped without it.
 */
import { createHash, randomUUID } from "node:crypto";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { Child } from "./fixtures/children.ts";

export const REPO = path.resolve(__dirname, "..");
export const FACADE = path.join(REPO, "dist", "index.js");
export const CLI = path.join(REPO, "bin", "exactlock.js");
export const FIXTURE_DIR = path.join(__dirname, "fixtures");
export const fixture = (name: string): string => path.join(FIXTURE_DIR, name);

/**
 * The facade, its binary and the fixtures, copied where any uid can read them (a clone
 * may sit under a 0700 folder, as `mktemp -d` makes): what a child run as uid 65534
 * loads. The caller removes `dir` when done.
 */
export function copyForAnyUid(): { dir: string; facade: string; fixture: (name: string) => string } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "exactlock-any-uid-"));
  fs.chmodSync(dir, 0o755);
  for (const part of ["dist", "native", path.join("__test__", "fixtures")]) {
    fs.cpSync(path.join(REPO, part), path.join(dir, part), { recursive: true });
  }
  fs.writeFileSync(path.join(dir, "package.json"), JSON.stringify({ type: "commonjs" }));
  return {
    dir,
    facade: path.join(dir, "dist", "index.js"),
    fixture: (name) => path.join(dir, "__test__", "fixtures", name),
  };
}

/** `exactlock gc DIR` (bin/exactlock.js → dist/cli.js) in a child process: its exit status and output. */
export async function runGc(dir: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = new Child(process.execPath, [CLI, "gc", dir]);
  let stdout = "";
  child.proc.stdout!.on("data", (chunk: string) => (stdout += chunk));
  const { code } = await child.exited;
  return { code, stdout, stderr: child.stderr };
}

// ---------------------------------------------------------------------------
// What the kernel says about a process.

/** Field 22 of /proc/<pid>/stat: the start time in clock ticks after boot. */
export function startTicks(pid: number): string {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).trim().split(" ");
  // fields[0] is field 3 (state); field 22 is fields[19].
  return fields[19]!;
}

/** The kernel's boot id (/proc/sys/kernel/random/boot_id). */
export function bootId(): string {
  return fs.readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim();
}

/** The inode of /proc/<pid>/ns/pid as a decimal string (`pid:[4026531836]` → `4026531836`). */
export function pidNsOf(pid: number | "self" = "self"): string {
  const link = fs.readlinkSync(`/proc/${pid}/ns/pid`);
  const match = /^pid:\[(\d+)\]$/.exec(link);
  if (!match) throw new Error(`unexpected ${link}`);
  return match[1]!;
}

/** `btime` of /proc/stat: the boot time in whole seconds since the epoch. */
export function btime(): number {
  const line = fs
    .readFileSync("/proc/stat", "utf8")
    .split("\n")
    .find((l) => l.startsWith("btime "));
  if (!line) throw new Error("no btime in /proc/stat");
  return Number(line.split(/\s+/)[1]);
}

/** The pids of the direct children of `pid`. */
export function childPidsOf(pid: number): number[] {
  try {
    return fs
      .readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8")
      .trim()
      .split(/\s+/)
      .filter(Boolean)
      .map(Number);
  } catch {
    return [];
  }
}

// ---------------------------------------------------------------------------
// `ps -o lstart=` strings (LC_ALL=C TZ=UTC), e.g. `Wed Dec  2 08:36:20 2026`.

const DAYS = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
const pad2 = (n: number) => String(n).padStart(2, "0");

/** Formats a time as `ps -o lstart=` prints it under TZ=UTC (`%a %b %e %H:%M:%S %Y`). */
export function lstart(date: Date): string {
  return (
    `${DAYS[date.getUTCDay()]} ${MONTHS[date.getUTCMonth()]} ${String(date.getUTCDate()).padStart(2, " ")} ` +
    `${pad2(date.getUTCHours())}:${pad2(date.getUTCMinutes())}:${pad2(date.getUTCSeconds())} ${date.getUTCFullYear()}`
  );
}

/** Parses an lstart string (UTC) back to a Date. */
export function parseLstart(text: string): Date {
  const match = /^([A-Z][a-z]{2}) ([A-Z][a-z]{2}) ([ \d]\d) (\d\d):(\d\d):(\d\d) (\d{4})$/.exec(text);
  if (!match) throw new Error(`not an lstart string: ${JSON.stringify(text)}`);
  const [, , month, day, h, m, s, year] = match;
  return new Date(Date.UTC(Number(year), MONTHS.indexOf(month!), Number(day), Number(h), Number(m), Number(s)));
}

/** `start` moved by `ms` (lstart in, lstart out). */
export function shiftLstart(start: string, ms: number): string {
  return lstart(new Date(parseLstart(start).getTime() + ms));
}

// ---------------------------------------------------------------------------
// Owner records.

export interface LegacyRecord {
  pid: number;
  start_time: string;
  start_time_format?: string;
  timestamp?: number;
  owner_token?: string;
  owner_host_id?: string;
}

/** A record in the ORIGINAL format: only pid,start_time,start_time_format,timestamp,owner_token(,owner_host_id). */
export function legacyRecordBytes(fields: LegacyRecord): string {
  const record: Record<string, unknown> = {
    pid: fields.pid,
    start_time: fields.start_time,
    start_time_format: fields.start_time_format ?? "utc-v1",
    timestamp: fields.timestamp ?? Date.now(),
    owner_token: fields.owner_token ?? randomUUID(),
  };
  if (fields.owner_host_id !== undefined) record.owner_host_id = fields.owner_host_id;
  return JSON.stringify(record);
}

export interface NewRecord extends LegacyRecord {
  /** Field 22 of /proc/<pid>/stat. */
  ticks: string;
  boot_id: string;
  pid_ns: string;
}

/**
 * A record in the NEW format:
 * `{"pid","start_time","start_time_format","process_incarnation":"linux:<ticks>","timestamp","owner_token",
 *   "owner_host_id"?,"boot_id","pid_ns"}`.
 *
 * SPEC §2 names the ticks key `start_ticks` (an integer) where the brief
 * names upstream's `process_incarnation`; the record carries both, always
 * with the same value, so the verdict is the same whichever key a reader
 * takes (readers ignore unknown keys).
 */
export function newRecordBytes(fields: NewRecord): string {
  const record: Record<string, unknown> = {
    pid: fields.pid,
    start_time: fields.start_time,
    start_time_format: fields.start_time_format ?? "utc-v1",
    process_incarnation: `linux:${fields.ticks}`,
    timestamp: fields.timestamp ?? Date.now(),
    owner_token: fields.owner_token ?? randomUUID(),
  };
  if (fields.owner_host_id !== undefined) record.owner_host_id = fields.owner_host_id;
  record.boot_id = fields.boot_id;
  record.start_ticks = Number(fields.ticks);
  record.pid_ns = fields.pid_ns;
  return JSON.stringify(record);
}

/** Writes `<dir>/info` (0600) in a fresh 0700 directory `dir`. */
export function dirWithInfo(dir: string, bytes: string): string {
  fs.mkdirSync(dir, { mode: 0o700 });
  fs.writeFileSync(path.join(dir, "info"), bytes, { mode: 0o600 });
  return dir;
}

// ---------------------------------------------------------------------------
// Listings.

/** Names in `dir` that belong to the lock of `fileName`: `fileName.lock` and `fileName.lock.*`. */
export function lockNames(dir: string, fileName: string): string[] {
  const lock = `${fileName}.lock`;
  return fs
    .readdirSync(dir)
    .filter((name) => name === lock || name.startsWith(`${lock}.`))
    .sort();
}

/**
 * The content of a tree, without following links: per entry its kind,
 * inode, mode, and for files the size and SHA-256 of the bytes, for links
 * the target. Equal listings mean nothing was deleted, replaced or
 * rewritten. A missing `target` lists as `{".": "MISSING"}`.
 */
export function contentOf(target: string): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  if (!fs.existsSync(target) && !isSymlink(target)) return { ".": "MISSING" };
  const visit = (absolute: string, relative: string) => {
    const st = fs.lstatSync(absolute);
    const entry: Record<string, unknown> = {
      kind: st.isSymbolicLink() ? "symlink" : st.isDirectory() ? "dir" : st.isFile() ? "file" : "other",
      ino: st.ino,
      mode: (st.mode & 0o7777).toString(8),
    };
    if (st.isFile()) {
      entry.size = st.size;
      entry.sha256 = createHash("sha256").update(fs.readFileSync(absolute)).digest("hex");
    }
    if (st.isSymbolicLink()) entry.target = fs.readlinkSync(absolute);
    out[relative] = entry;
    if (st.isDirectory()) {
      for (const name of fs.readdirSync(absolute).sort()) visit(path.join(absolute, name), `${relative}/${name}`);
    }
  };
  visit(target, ".");
  return out;
}

function isSymlink(p: string): boolean {
  try {
    return fs.lstatSync(p).isSymbolicLink();
  } catch {
    return false;
  }
}

/** A directory of a user's files (not made by exactlock): `notes.txt` and `sub/deeper.txt`. */
export function plantUserDir(dir: string): string {
  fs.mkdirSync(path.join(dir, "sub"), { recursive: true });
  fs.writeFileSync(path.join(dir, "notes.txt"), `my notes, not a lock (${path.basename(dir)})\n`);
  fs.writeFileSync(path.join(dir, "sub", "deeper.txt"), "keep me\n");
  return dir;
}
