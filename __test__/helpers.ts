/**
 * Shared fixtures for the scenario suites: temp roots, hand-written owner
 * records in `<file>.lock/info`, real dead / live / zombie pids, child
 * processes that hold a lock. Everything a test creates is registered here
 * and torn down by `cleanup()` (call it from `afterEach`).
 */
import { type ChildProcess, execFileSync, spawn, spawnSync } from "node:child_process";
import { once } from "node:events";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { createInterface } from "node:readline";
import { processStartTime } from "../lib/index.ts";
import { clearFaultsForTesting, FileLockTestHooks } from "../lib/testing.ts";
import { ON_LINUX } from "./premises.ts";

// vitest provides __dirname (the package compiles tests as CommonJS, where import.meta is not allowed).
export const FIXTURES = path.join(__dirname, "fixtures");

const roots: string[] = [];
const children: ChildProcess[] = [];

/** A fresh, realpath'd temp directory, removed after the test. */
export function makeRoot(prefix = "exactlock-scenario-"): string {
  const root = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), prefix)));
  roots.push(root);
  return root;
}

/** Tears down everything the helpers created, and resets the test seams. */
export async function cleanup(): Promise<void> {
  FileLockTestHooks.afterParentMkdir = undefined;
  clearFaultsForTesting();
  const exiting = children.splice(0).map(async (child) => {
    if (child.exitCode === null && child.signalCode === null) {
      const exited = once(child, "exit");
      child.kill("SIGKILL");
      await exited;
    }
  });
  await Promise.all(exiting);
  for (const root of roots.splice(0)) fs.rmSync(root, { recursive: true, force: true });
}

export const lockPathOf = (filePath: string): string => `${filePath}.lock`;
export const infoPathOf = (filePath: string): string => path.join(lockPathOf(filePath), "info");

export interface RecordFields {
  pid: number;
  start_time?: string;
  start_time_format?: string;
  timestamp?: number;
  owner_token?: string;
  owner_host_id?: string;
}

/** The record bytes as the original writes them (key order of SPEC §2). */
export function recordJson(fields: RecordFields): string {
  const record: Record<string, unknown> = { pid: fields.pid };
  if (fields.start_time !== undefined) record.start_time = fields.start_time;
  if (fields.start_time_format !== undefined) record.start_time_format = fields.start_time_format;
  record.timestamp = fields.timestamp ?? Date.now();
  if (fields.owner_token !== undefined) record.owner_token = fields.owner_token;
  if (fields.owner_host_id !== undefined) record.owner_host_id = fields.owner_host_id;
  return JSON.stringify(record);
}

/** A canonical (`utc-v1`) record for `pid`, with its real start time. */
export function canonicalRecord(pid: number, extra: Partial<RecordFields> = {}): RecordFields & { timestamp: number } {
  return {
    pid,
    start_time: processStartTime(pid) ?? "unknown",
    start_time_format: "utc-v1",
    owner_token: crypto.randomUUID(),
    ...extra,
    timestamp: extra.timestamp ?? Date.now(),
  };
}

/**
 * Creates `<file>.lock` (0700) holding `info` with `content` (a record or
 * raw bytes). `ageMs` back-dates both the directory and `info`.
 */
export function writeLock(filePath: string, content: RecordFields | string | Buffer, ageMs?: number): string {
  const lockPath = lockPathOf(filePath);
  fs.mkdirSync(lockPath, { recursive: true, mode: 0o700 });
  const bytes = typeof content === "string" || Buffer.isBuffer(content) ? content : recordJson(content);
  fs.writeFileSync(path.join(lockPath, "info"), bytes, { mode: 0o600 });
  if (ageMs !== undefined) age(lockPath, ageMs, path.join(lockPath, "info"));
  return lockPath;
}

/** An empty (legacy, ownerless) lock directory, optionally back-dated. */
export function writeEmptyLock(filePath: string, ageMs?: number): string {
  const lockPath = lockPathOf(filePath);
  fs.mkdirSync(lockPath, { recursive: true, mode: 0o700 });
  if (ageMs !== undefined) age(lockPath, ageMs);
  return lockPath;
}

/** Back-dates atime/mtime of `paths` (files first, then the directory). */
export function age(dir: string, ageMs: number, ...files: string[]): void {
  const when = new Date(Date.now() - ageMs);
  for (const file of files) fs.utimesSync(file, when, when);
  fs.utimesSync(dir, when, when);
}

/**
 * Replaces `info` of the lock at `filePath` atomically (a new inode
 * renamed over the old one) without touching the lock directory's inode.
 */
export function replaceInfo(filePath: string, content: RecordFields | string): void {
  const lockPath = lockPathOf(filePath);
  const temp = path.join(path.dirname(lockPath), `.replace-${process.pid}-${Date.now()}-${Math.random()}`);
  fs.writeFileSync(temp, typeof content === "string" ? content : recordJson(content), { mode: 0o600 });
  fs.renameSync(temp, path.join(lockPath, "info"));
}

export function exists(p: string): boolean {
  try {
    fs.lstatSync(p);
    return true;
  } catch {
    return false;
  }
}

export function inode(p: string): bigint {
  return fs.lstatSync(p, { bigint: true }).ino;
}

/** Whether the kernel knows `pid` (kill 0 succeeds or EPERM). */
export function pidExists(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** The pid of a process that ran and exited (reaped): not assumed, made. */
export async function deadPid(): Promise<number> {
  for (let tries = 0; tries < 5; tries++) {
    const child = spawn(process.execPath, ["-e", ""], { stdio: "ignore" });
    const pid = child.pid!;
    await once(child, "exit");
    if (!pidExists(pid)) return pid;
  }
  throw new Error("could not obtain a dead pid");
}

/** A live process that is not us: a `sleep` child, killed by `cleanup()`. */
export function liveForeignPid(): number {
  const child = spawn("sleep", ["1000"], { stdio: "ignore" });
  children.push(child);
  return child.pid!;
}

/**
 * The state letter of process `pid` (`R`, `S`, `Z`, …), or null when there is none: field 3
 * of /proc/<pid>/stat on Linux, `ps -o stat=` elsewhere (macOS has no /proc).
 */
export function processState(pid: number): string | null {
  if (!ON_LINUX) {
    const ps = spawnSync("ps", ["-o", "stat=", "-p", String(pid)], { encoding: "utf8" });
    return ps.status === 0 ? ps.stdout.trim().charAt(0) || null : null;
  }
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[0] ?? null;
  } catch {
    return null;
  }
}

/**
 * A zombie: a process that has exited but whose parent never reaps it.
 * `sh` backgrounds a short `sleep` and execs a long one, which never calls
 * wait(); the short one exits after the exec and stays a zombie.
 */
export async function zombiePid(): Promise<number> {
  const child = spawn("sh", ["-c", "sleep 0.2 & echo $!; exec sleep 1000"], { stdio: ["ignore", "pipe", "ignore"] });
  children.push(child);
  const [line] = (await once(createInterface({ input: child.stdout! }), "line")) as [string];
  const pid = Number(line.trim());
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline) {
    if (processState(pid) === "Z") return pid;
    await sleep(10);
  }
  throw new Error(`pid ${pid} did not become a zombie`);
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * Whether this run forces the portable kernel mechanisms
 * (`EXACTLOCK_PLATFORM=portable`, see `npm run test:portable`): timer-only
 * waits and `kill(pid, 0)` liveness, which cannot tell a zombie from the
 * living. Tests of what only Linux's mechanisms can do skip themselves
 * with `it.skipIf(PORTABLE)`; what the portable ones do instead is
 * tested in platform.test.ts.
 */
export const PORTABLE = process.env.EXACTLOCK_PLATFORM === "portable";

/** Polls `predicate` until true; fails after `timeoutMs` (bounds a wait, asserts no timing). */
export async function waitUntil(predicate: () => boolean, timeoutMs = 20_000, what = "condition"): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(5);
  }
}

/** A child process running `fixtures/<name>` that talks in lines. */
export interface FixtureChild {
  child: ChildProcess;
  /** Resolves with the next line the child prints. */
  nextLine(): Promise<string>;
  send(line: string): void;
  exited: Promise<[number | null, NodeJS.Signals | null]>;
}

export function startFixture(name: string, args: string[], env: NodeJS.ProcessEnv = process.env): FixtureChild {
  const child = spawn(process.execPath, [path.join(FIXTURES, name), ...args], {
    stdio: ["pipe", "pipe", "inherit"],
    env,
  });
  children.push(child);
  const exited = once(child, "exit") as Promise<[number | null, NodeJS.Signals | null]>;
  const lines: string[] = [];
  const waiting: ((line: string) => void)[] = [];
  createInterface({ input: child.stdout! }).on("line", (line) => {
    const next = waiting.shift();
    if (next) next(line);
    else lines.push(line);
  });
  return {
    child,
    exited,
    nextLine: () => {
      const line = lines.shift();
      if (line !== undefined) return Promise.resolve(line);
      return new Promise<string>((resolve, reject) => {
        waiting.push(resolve);
        exited.then(([code, signal]) => reject(new Error(`${name} exited (${code ?? signal}) before printing`)));
      });
    },
    send: (line: string) => child.stdin!.write(`${line}\n`),
  };
}

/** Runs `fixtures/<name>` to completion and returns its stdout. */
export function runFixture(name: string, args: string[], env: NodeJS.ProcessEnv = process.env): string {
  return execFileSync(process.execPath, [path.join(FIXTURES, name), ...args], { env, encoding: "utf8" });
}

/** Catches a rejection so it can be inspected. */
export async function rejectionOf(promise: Promise<unknown>): Promise<any> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error("expected a rejection, but the promise resolved");
}

/** Options that give up quickly when the lock is held (only the budget is short). */
export const quick = { retries: 3, retryDelayMs: 5 } as const;
/** Options with a budget generous enough for any hand-over on a loaded machine. */
export const patient = { retries: 2000, retryDelayMs: 10 } as const;
