/**
 * What a test needs of the machine it runs on — Linux (it reads /proc, runs setpriv,
 * unshare, mount, strace or chattr, counts inotify instances, …), root, a tool on PATH —
 * and the skip, with its reason, where that is missing.
 *
 * A test that cannot run here is skipped through the runner, so that the summary counts
 * it as skipped: `skipUnless(ctx, needs)` first thing in its body (or in a `beforeEach`),
 * which calls vitest's `ctx.skip(reason)`. The reason says which premise is missing:
 * `needs Linux (this is darwin)`, `needs root (running as uid 65534)`, `missing tool:
 * chattr`. A body that returns early would pass without having run, and count as green.
 *
 * EXACTLOCK_TEST_PLATFORM=darwin (or win32) makes these gates answer as they would on that
 * system, so that a Linux machine shows which tests a Mac runs (scripts/test.mjs --list
 * prints the steps; ./premise-guard.ts, a vitest setup file, then fails every ungated
 * use of a Linux-only tool or of /proc in the test process).
 */
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";

/** The system the gates answer for: this one, or the one EXACTLOCK_TEST_PLATFORM names. */
export const TEST_PLATFORM: string = process.env.EXACTLOCK_TEST_PLATFORM || process.platform;
/** Whether the tests run as on Linux: the kernel's /proc, inotify, pidfd, namespaces, util-linux. */
export const ON_LINUX = TEST_PLATFORM === "linux";
/** Whether this process is root (on Windows: never). */
export const IS_ROOT = process.getuid?.() === 0;

export interface Needs {
  /** Reads /proc, or runs what only Linux has (setpriv, unshare, mount, strace, chattr, inotify, …). */
  linux?: boolean;
  /** Runs as root: mounts, namespaces, another uid, chattr +i. */
  root?: boolean;
  /** Commands on PATH, or absolute paths of executables. */
  tools?: string[];
  /** Folders this process must be able to write (a checkout another uid owns is read-only to it). */
  writable?: string[];
}

/** Whether `tool` (a command name or an absolute path) can be run here. */
export function onPath(tool: string): boolean {
  if (path.isAbsolute(tool)) {
    try {
      fs.accessSync(tool, fs.constants.X_OK);
      return true;
    } catch {
      return false;
    }
  }
  return spawnSync("sh", ["-c", 'command -v "$1" >/dev/null 2>&1', "sh", tool]).status === 0;
}

function canWrite(folder: string): boolean {
  try {
    fs.accessSync(folder, fs.constants.W_OK);
    return true;
  } catch {
    return false;
  }
}

/** Why a test with these needs cannot run here (every missing premise, named), or undefined when it can. */
export function unmet(needs: Needs): string | undefined {
  const why: string[] = [];
  if (needs.linux && !ON_LINUX) why.push(`needs Linux (this is ${TEST_PLATFORM})`);
  if (needs.root && !IS_ROOT) why.push(`needs root (running as uid ${process.getuid?.() ?? "none"})`);
  // Off Linux the tools a Linux test names (setpriv, unshare) are not looked for: the first reason says it all.
  const missing = needs.linux && !ON_LINUX ? [] : (needs.tools ?? []).filter((tool) => !onPath(tool));
  if (missing.length > 0) why.push(`missing tool: ${missing.join(", ")}`);
  const readOnly = (needs.writable ?? []).filter((folder) => !canWrite(folder));
  if (readOnly.length > 0) why.push(`needs write access to ${readOnly.join(", ")} (running as uid ${process.getuid?.() ?? "none"})`);
  return why.length > 0 ? why.join("; ") : undefined;
}

/**
 * EXACTLOCK_TEST_REQUIRE_ALL=1: this machine is meant to meet every premise (.ci/run sets
 * it: root on Linux, after installing every tool the tests name), so a test that would be
 * skipped here fails instead, naming what is missing. A broken install step then shows as
 * a failure, not as a quiet row of skips.
 */
export const REQUIRE_ALL = process.env.EXACTLOCK_TEST_REQUIRE_ALL === "1";

/** Skips the running test through the runner, with `why` as the reason, when `why` is set (under REQUIRE_ALL: fails it). */
export function skipFor(ctx: { skip: (note?: string) => void }, why: string | undefined): void {
  if (why === undefined) return;
  if (REQUIRE_ALL) throw new Error(`this test cannot run here: ${why} (and EXACTLOCK_TEST_REQUIRE_ALL=1 says every test must)`);
  ctx.skip(why);
}

/** Skips the running test, through the runner and with the reason, when `needs` are not met here. */
export function skipUnless(ctx: { skip: (note?: string) => void }, needs: Needs): void {
  skipFor(ctx, unmet(needs));
}
