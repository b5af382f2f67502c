/**
 * A vitest setup file: under EXACTLOCK_TEST_PLATFORM=darwin (or win32) on Linux, the
 * Linux-only things a test could use without its gate fail in the test process — /proc and
 * /sys read, listed or written, and Linux-only commands started (setpriv, unshare, mount,
 * strace, chattr, taskset, findmnt, …, also inside `sh -c` and `python3 -c` scripts, and
 * renameat2 or inotify through Python's ctypes) — so that
 *
 *   EXACTLOCK_TEST_PLATFORM=darwin EXACTLOCK_PLATFORM=portable npx vitest run
 *
 * shows on a Linux machine that every test with a Linux premise is gated by it
 * (./premises.ts): the gated ones are skipped, an ungated one fails naming what it used.
 * EXACTLOCK_PLATFORM=portable makes the native core use the mechanisms that are not
 * Linux's, as the nearest to a Mac this machine has. What child processes do is not
 * watched (a fixture reading /proc runs in a test that is gated, or fails on a Mac).
 * Without EXACTLOCK_TEST_PLATFORM, or set to this platform, this file does nothing.
 */
import { createRequire, syncBuiltinESMExports } from "node:module";
import * as path from "node:path";

const simulated = process.env.EXACTLOCK_TEST_PLATFORM;

/** Commands that exist on Linux only (util-linux, e2fsprogs, strace, mkfs.*, FUSE's). */
const LINUX_COMMANDS = new Set([
  "setpriv", "unshare", "nsenter", "mount", "umount", "findmnt", "losetup", "strace", "chattr", "lsattr",
  "taskset", "prlimit", "mkfs.xfs", "mkfs.btrfs", "mkfs.ext4", "sshfs", "fusermount", "fusermount3",
]);
const LINUX_WORDS = new RegExp(`(^|[\\s;&|(])(${[...LINUX_COMMANDS].join("|").replace(/\./g, "\\.")})(\\s|$)|/proc/|/sys/|renameat2|inotify_`);

function isLinuxPath(file: unknown): boolean {
  const text = typeof file === "string" ? file : Buffer.isBuffer(file) ? file.toString() : file instanceof URL ? file.pathname : "";
  return /^\/(proc|sys)(\/|$)/.test(text);
}

function refuse(what: string): never {
  throw new Error(`Linux premise used ungated under EXACTLOCK_TEST_PLATFORM=${simulated}: ${what} (gate the test with __test__/premises.ts)`);
}

/** The Linux-only command or script that `file args…` would run, if any. */
function linuxCommand(file: unknown, args: unknown): string | undefined {
  if (typeof file !== "string") return undefined;
  const argv = Array.isArray(args) ? args.map(String) : [];
  if (LINUX_COMMANDS.has(path.basename(file))) return `${file} ${argv.join(" ")}`;
  // sh -c SCRIPT, python3 -c SCRIPT, or a shell command line (exec, execSync).
  const script = argv.includes("-c") ? argv[argv.indexOf("-c") + 1] ?? "" : argv.length === 0 ? file : "";
  return LINUX_WORDS.test(script) ? `${path.basename(file)} -c ${JSON.stringify(script.slice(0, 120))}` : undefined;
}

if (simulated && simulated !== process.platform) {
  const require = createRequire(__filename);
  const childProcess = require("node:child_process");
  for (const name of ["spawn", "spawnSync", "execFile", "execFileSync", "exec", "execSync"]) {
    const original = childProcess[name];
    childProcess[name] = function guarded(this: unknown, file: unknown, args: unknown, ...rest: unknown[]) {
      const command = linuxCommand(file, args);
      if (command !== undefined) refuse(`${name}(${command})`);
      return original.call(this, file, args, ...rest);
    };
  }
  const fs = require("node:fs");
  for (const name of ["readFileSync", "readdirSync", "readlinkSync", "writeFileSync", "openSync", "statSync", "lstatSync"]) {
    const original = fs[name];
    fs[name] = function guarded(this: unknown, file: unknown, ...rest: unknown[]) {
      if (isLinuxPath(file)) refuse(`fs.${name}(${String(file)})`);
      return original.call(this, file, ...rest);
    };
  }
  // ES module imports of node:fs and node:child_process see the patched functions too.
  syncBuiltinESMExports();
}
