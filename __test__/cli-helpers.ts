/**
 * Helpers for tests that drive real processes: temp dirs, the exactlock
 * command, and a lock holder in a child process.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, realpathSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";

export const ROOT = path.resolve(__dirname, "..");
export const CLI = path.join(ROOT, "bin", "exactlock.js");
export const HOLDER = path.join(ROOT, "__test__", "fixtures", "cli-holder.mjs");

/** A fresh temp dir (realpath'd); remember to `removeDir` it. */
export function makeTempDir(tag: string): string {
  return realpathSync(mkdtempSync(path.join(tmpdir(), `exactlock-${tag}-`)));
}

export function removeDir(dir: string): void {
  rmSync(dir, { recursive: true, force: true });
}

export interface Finished {
  status: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** A child process whose stdout and stderr are collected. */
export class Proc {
  stdout = "";
  stderr = "";
  readonly exited: Promise<Finished>;
  private readonly watchers: Array<() => void> = [];

  constructor(readonly child: ChildProcess) {
    child.stdout?.setEncoding("utf8").on("data", (chunk: string) => {
      this.stdout += chunk;
      for (const watcher of [...this.watchers]) watcher();
    });
    child.stderr?.setEncoding("utf8").on("data", (chunk: string) => {
      this.stderr += chunk;
    });
    this.exited = new Promise((resolve) => {
      child.once("close", (status, signal) => {
        for (const watcher of [...this.watchers]) watcher();
        resolve({ status, signal, stdout: this.stdout, stderr: this.stderr });
      });
    });
  }

  get pid(): number {
    return this.child.pid!;
  }

  /** Resolves with the first stdout line (parsed as JSON) that satisfies `test`. */
  waitForLine<T = Record<string, unknown>>(test: (value: T) => boolean, timeoutMs = 20_000): Promise<T> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        done();
        reject(new Error(`timed out waiting for a line; stdout: ${this.stdout}; stderr: ${this.stderr}`));
      }, timeoutMs);
      const check = () => {
        for (const line of this.stdout.split("\n")) {
          if (!line.startsWith("{")) continue;
          const value = JSON.parse(line) as T;
          if (test(value)) {
            done();
            resolve(value);
            return;
          }
        }
        if (this.child.exitCode !== null || this.child.signalCode !== null) {
          done();
          reject(new Error(`process exited before the line; stdout: ${this.stdout}; stderr: ${this.stderr}`));
        }
      };
      const done = () => {
        clearTimeout(timer);
        const index = this.watchers.indexOf(check);
        if (index >= 0) this.watchers.splice(index, 1);
      };
      this.watchers.push(check);
      check();
    });
  }

  kill(signal: NodeJS.Signals = "SIGKILL"): void {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill(signal);
  }
}

/** Starts `exactlock ARGS…` under node. */
export function startCli(args: string[], options: { cwd?: string; env?: NodeJS.ProcessEnv } = {}): Proc {
  return new Proc(
    spawn(process.execPath, [CLI, ...args], { cwd: options.cwd ?? ROOT, env: options.env, stdio: ["ignore", "pipe", "pipe"] }),
  );
}

/** Runs `exactlock ARGS…` to the end (killed after `timeoutMs` so a hang fails the test). */
export async function runCli(args: string[], timeoutMs = 30_000, env?: NodeJS.ProcessEnv): Promise<Finished> {
  const proc = startCli(args, { env });
  const timer = setTimeout(() => proc.kill("SIGKILL"), timeoutMs);
  try {
    return await proc.exited;
  } finally {
    clearTimeout(timer);
  }
}

/** A process holding the lock of `file` (see fixtures/cli-holder.mjs), once it holds it. */
export async function startHolder(file: string, mode: "hold" | "exit" = "hold"): Promise<Proc> {
  const proc = new Proc(spawn(process.execPath, [HOLDER, file, mode], { stdio: ["ignore", "pipe", "pipe"] }));
  await proc.waitForLine<{ held?: boolean }>((line) => line.held === true);
  return proc;
}

/** A lock whose owner has exited (and been reaped). */
export async function deadOwnerLock(file: string): Promise<number> {
  const proc = await startHolder(file, "exit");
  await proc.exited;
  return proc.pid;
}
