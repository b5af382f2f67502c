/**
 * `exactlock run [options] FILE CMD ARGS…` (or `… FILE [options] -- CMD
 * ARGS…`): holds the lock of FILE while CMD runs, forwards
 * SIGINT/SIGTERM/SIGHUP to it, and exits with its status (128 + signal
 * number when it died of a signal); 75 (or `-E`'s code) when the lock could
 * not be had within the waiting budget. Options are shaped like flock(1)'s.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { constants } from "node:os";
import * as path from "node:path";
import { acquireLock, FileLockAcquireError, FileLockError, type LockRelease } from "../index.js";
import { acquireLockFor } from "../lock.js";
import { hostIdFlag, integerFlag, parseFlags, UsageError } from "./args.js";

export const EXIT_LOCK_UNAVAILABLE = 75;
const FORWARDED_SIGNALS = ["SIGINT", "SIGTERM", "SIGHUP"] as const;
type ForwardedSignal = (typeof FORWARDED_SIGNALS)[number];

export const RUN_HELP = `Usage: exactlock run [options] FILE CMD [ARGS...]
       exactlock run [options] FILE [options] -- CMD [ARGS...]

Takes the lock of FILE (the directory FILE.lock), runs CMD while holding it,
and releases it when CMD exits. A holder that died is reclaimed at once; a
live holder is waited for, never displaced. Without --, everything after
FILE is the command (as with flock); with --, options may follow FILE.

Options (flock(1)'s in brackets):
  -w, --wait SECONDS     how long to wait for the lock; fractions allowed
                         (0.2 = 200 ms), a value in ms with an "ms" suffix
                         (300ms), or inf (until it is free, as flock without
                         -w). Default 5; 0 = one attempt      [flock -w]
  -n, --nonblock         fail at once if the lock is held (= --wait 0)
                                                              [flock -n]
  -E, --conflict-exit-code N
                         exit status when the lock could not be had
                         (default 75)                         [flock -E]
  --retry-delay MS       longest sleep between looks when no event wakes the
                         waiter (default 100; must be > 0)
  --stale-ms MS          age after which an ownerless (empty) lock dir is
                         reclaimed (default 10000)
  --owner-host-id ID     this host's identity, for volumes shared between hosts
  -h, --help             show this help

Unlike flock, the lock has an owner record (pid, start time) that
'exactlock status FILE' shows, and a lock whose owner died is taken at once.

SIGINT, SIGTERM and SIGHUP received while CMD runs are forwarded to CMD; one
received while waiting gives up the wait. The lock's owner is CMD itself (its
record names CMD's pid; on Windows, this exactlock process): as with flock,
the lock lives as long as CMD runs, even if this exactlock process is
SIGKILLed, and is reclaimable at once when CMD exits. (Only CMD's own
process: a daemon it forks and leaves behind does not hold the lock.)

Unlike flock, the default wait is 5 s, not forever (-w inf waits forever), and
a lock that cannot be had exits 75 with a message on stderr, where flock -n
exits 1 quietly: -E 1 gives flock's status. Locks are exclusive only (flock's
-x; there is no -s), and CMD is run directly, not by a shell (for flock -c,
run: exactlock run FILE sh -c 'CMD').

Exit status: CMD's status, or 128 + N if CMD died of signal N (or a signal
ended the wait); 75 (or -E's N) if the lock could not be had in time; 127 if
CMD was not found, 126 if it could not be executed; 1 for other failures (and
when CMD succeeded but releasing the lock failed); 2 for usage errors.
`;

interface RunOptions {
  file: string;
  waitMs: number;
  retryDelayMs: number;
  conflictExitCode: number;
  staleMs?: number;
  ownerHostId?: string;
  command: string;
  args: string[];
}

/** run's flags; those of type string take a value. */
const RUN_FLAGS = {
  wait: { type: "string", short: "w" },
  nonblock: { type: "boolean", short: "n" },
  "conflict-exit-code": { type: "string", short: "E" },
  "retry-delay": { type: "string" },
  "stale-ms": { type: "string" },
  "owner-host-id": { type: "string" },
} as const;

/** flock(1)'s flags that `run` has no flag for, and what to do instead. */
const FLOCK_HINTS: Readonly<Record<string, string>> = {
  "-s": "exactlock's locks are exclusive only (there is no shared mode yet): drop -s",
  "--shared": "exactlock's locks are exclusive only (there is no shared mode yet): drop --shared",
  "-x": "exactlock's locks are always exclusive: drop -x",
  "-e": "exactlock's locks are always exclusive: drop -e",
  "--exclusive": "exactlock's locks are always exclusive: drop --exclusive",
  "-c": "run takes CMD and its arguments directly, not a shell string: exactlock run FILE sh -c 'CMD'",
  "--command": "run takes CMD and its arguments directly, not a shell string: exactlock run FILE sh -c 'CMD'",
  "--timeout": "flock's --timeout is -w/--wait here (seconds, or inf)",
  "--verbose": "run has no --verbose: NODE_DEBUG=exactlock prints each step of the lock on stderr",
  "-u": "there is nothing to unlock by hand: the lock is released when CMD exits",
  "--unlock": "there is nothing to unlock by hand: the lock is released when CMD exits",
  "-o": "not needed: CMD inherits no lock descriptor (the lock is held in CMD's name)",
  "--close": "not needed: CMD inherits no lock descriptor (the lock is held in CMD's name)",
};

/** Whether the flag token `token` (`-w`, `--wait`, `-w2`, `--wait=2`) takes the next token as its value. */
function takesNextValue(token: string): boolean {
  if (token.includes("=")) return false;
  for (const [name, spec] of Object.entries(RUN_FLAGS)) {
    if (spec.type !== "string") continue;
    if (token === `--${name}` || ("short" in spec && token === `-${spec.short}`)) return true;
  }
  return false;
}

/**
 * Splits run's arguments into exactlock's own and CMD's: at the first `--`
 * when there is one; otherwise, as flock does, after FILE (the first
 * argument that is neither an option nor an option's value).
 */
function splitCommand(argv: string[]): { own: string[]; command: string[] | null; dashes: boolean } {
  const dashes = argv.indexOf("--");
  if (dashes >= 0) return { own: argv.slice(0, dashes), command: argv.slice(dashes + 1), dashes: true };
  for (let i = 0; i < argv.length; i++) {
    const token = argv[i]!;
    if (token.startsWith("-") && token !== "-") {
      if (takesNextValue(token)) i++;
      continue;
    }
    return { own: argv.slice(0, i + 1), command: argv.slice(i + 1), dashes: false };
  }
  return { own: argv, command: null, dashes: false };
}

/** `--wait`: seconds (fractions allowed), milliseconds with an `ms` suffix, or `inf`; in ms. */
function waitFlag(raw: string | boolean | undefined, fallbackMs: number): number {
  if (raw === undefined) return fallbackMs;
  const text = String(raw);
  if (/^(inf|infinity)$/i.test(text)) return Number.POSITIVE_INFINITY;
  const match = /^(\d+(?:\.\d+)?|\.\d+)(ms|s)?$/.exec(text);
  if (!match) {
    throw new UsageError(
      `--wait must be seconds (e.g. 2 or 0.25), milliseconds with ms (e.g. 300ms) or inf, got ${JSON.stringify(text)}`,
      "run",
    );
  }
  const ms = match[2] === "ms" ? Number(match[1]) : Number(match[1]) * 1000;
  if (!Number.isFinite(ms) || ms > Number.MAX_SAFE_INTEGER) throw new UsageError(`--wait is too large, got ${text}`, "run");
  return ms;
}

function parseRunArgs(argv: string[]): RunOptions | "help" {
  const { own, command, dashes } = splitCommand(argv);
  const { flags, positionals } = parseFlags("run", own, RUN_FLAGS, FLOCK_HINTS);
  if (flags.help) return "help";
  if (!dashes && command?.[0]?.startsWith("-")) {
    throw new UsageError(
      `${JSON.stringify(command[0])} after FILE would be the command: put options before FILE, or -- before CMD`,
      "run",
    );
  }
  if (positionals.length !== 1) throw new UsageError("run needs exactly one FILE, then CMD", "run");
  if (!command || command.length === 0) throw new UsageError("run needs a command after FILE (or after --)", "run");
  if (flags.nonblock && flags.wait !== undefined) throw new UsageError("--nonblock and --wait exclude each other", "run");
  const staleMs = flags["stale-ms"] === undefined ? undefined : integerFlag("run", flags, "stale-ms", 0);
  const ownerHostId = hostIdFlag("run", flags);
  return {
    file: path.resolve(positionals[0]!),
    waitMs: flags.nonblock ? 0 : waitFlag(flags.wait, 5_000),
    retryDelayMs: integerFlag("run", flags, "retry-delay", 100, { min: 1 }),
    conflictExitCode: integerFlag("run", flags, "conflict-exit-code", EXIT_LOCK_UNAVAILABLE, { max: 255 }),
    ...(staleMs === undefined ? {} : { staleMs }),
    ...(ownerHostId === undefined ? {} : { ownerHostId }),
    command: command[0]!,
    args: command.slice(1),
  };
}

function signalNumber(signal: NodeJS.Signals): number {
  return constants.signals[signal] ?? 0;
}

/**
 * Signal handling for the whole run: while waiting, a signal aborts the
 * wait; once CMD runs, signals are forwarded to it.
 */
class SignalRelay {
  readonly abort = new AbortController();
  received: ForwardedSignal | undefined;
  private child: ChildProcess | undefined;
  private readonly handlers = new Map<ForwardedSignal, () => void>();

  install(): void {
    for (const signal of FORWARDED_SIGNALS) {
      const handler = () => this.onSignal(signal);
      this.handlers.set(signal, handler);
      process.on(signal, handler);
    }
  }

  forwardTo(child: ChildProcess): void {
    this.child = child;
  }

  uninstall(): void {
    for (const [signal, handler] of this.handlers) process.off(signal, handler);
    this.handlers.clear();
  }

  private onSignal(signal: ForwardedSignal): void {
    if (this.child && this.child.exitCode === null && this.child.signalCode === null) {
      this.child.kill(signal);
      return;
    }
    this.received ??= signal;
    this.abort.abort(new Error(`interrupted by ${signal}`));
  }
}

/**
 * CMD, started before the lock is taken and held at a gate until it is
 * (POSIX): `sh` waits for a line on descriptor 3, then becomes CMD (`exec`
 * keeps its pid and start), so the lock's record names CMD itself and the
 * lock lives as long as CMD does, whatever happens to this process (as
 * flock(1)'s lock lives with the descriptor CMD inherits). The gate closed
 * without a line (the lock not had, or this process gone) ends the child
 * before CMD runs. Windows has no `exec`: there CMD starts once the lock is
 * held, and this process is its owner.
 */
const GATE = [
  'IFS= read -r go <&3 || exit 0; exec 3<&-',
  'command -v -- "$1" >/dev/null 2>&1 || { printf "exactlock run: cannot run %s: not found\\n" "$1" >&2; exit 127; }',
  'exec "$@"',
].join("; ");
const GATED = process.platform !== "win32";

/** CMD, and how it ended; started at once, gated where it can be (see {@link GATE}). */
interface Command {
  child?: ChildProcess;
  ended: Promise<number>;
  /** Lets CMD run (its gate opens, or it starts now). */
  go(): void;
  /** Ends it before it ran (its gate closes). */
  cancel(): void;
}

function startCommand(options: RunOptions, relay: SignalRelay): Command {
  if (!GATED) {
    let go!: () => void;
    const started = new Promise<ChildProcess>((resolve) => {
      go = () => resolve(spawn(options.command, options.args, { stdio: "inherit" }));
    });
    return { ended: started.then((child) => exitOf(child, options, relay)), go, cancel: () => {} };
  }
  const child = spawn("/bin/sh", ["-c", GATE, "sh", options.command, ...options.args], {
    stdio: ["inherit", "inherit", "inherit", "pipe"],
  });
  const gate = child.stdio[3] as NodeJS.WritableStream;
  // A child gone before its gate opens is seen at its exit, not here.
  gate.on("error", () => {});
  const ended = exitOf(child, options, relay);
  return {
    child,
    ended,
    go: () => {
      relay.forwardTo(child);
      gate.end("go\n");
    },
    cancel: () => gate.end(),
  };
}

/** CMD's exit status (128 + N for signal N; 127 not found, 126 not executable). */
function exitOf(child: ChildProcess, options: RunOptions, relay: SignalRelay): Promise<number> {
  if (!GATED) relay.forwardTo(child);
  return new Promise((resolve) => {
    child.once("error", (error: NodeJS.ErrnoException) => {
      process.stderr.write(`exactlock run: cannot run ${options.command}: ${error.message}\n`);
      resolve(error.code === "ENOENT" ? 127 : 126);
    });
    child.once("exit", (code, signal) => {
      resolve(signal ? 128 + signalNumber(signal) : (code ?? 1));
    });
  });
}

/** Takes the lock (in CMD's name where CMD waits at its gate), or explains why not and names the exit status. */
async function takeLock(options: RunOptions, relay: SignalRelay, command: Command): Promise<LockRelease | number> {
  const lockOptions = {
    timeout: options.waitMs,
    retryDelayMs: options.retryDelayMs,
    signal: relay.abort.signal,
    ...(options.staleMs === undefined ? {} : { staleMs: options.staleMs }),
    ...(options.ownerHostId === undefined ? {} : { ownerHostId: options.ownerHostId }),
  };
  try {
    const pid = command.child?.pid;
    return pid === undefined ? await acquireLock(options.file, lockOptions) : await acquireLockFor(pid, options.file, lockOptions);
  } catch (error) {
    if (relay.received) return 128 + signalNumber(relay.received);
    if (error instanceof FileLockAcquireError) {
      process.stderr.write(`exactlock run: gave up after ${options.waitMs / 1000} s: ${error.message}\n`);
      return options.conflictExitCode;
    }
    process.stderr.write(`exactlock run: ${(error as Error).message}\n`);
    return 1;
  }
}

/**
 * Releases the lock; a failure is reported and turns a success into 1. A
 * lock held in CMD's name that is gone, or someone else's, once CMD has
 * exited was reclaimed from its dead owner meanwhile: it ended with CMD,
 * as it should (`inCmdsName`).
 */
async function releaseLock(release: LockRelease, status: number, inCmdsName: boolean): Promise<number> {
  try {
    await release();
    return status;
  } catch (error) {
    if (inCmdsName && error instanceof FileLockError && (error.code === "EMISSING" || error.code === "EOWNERCHANGED")) {
      return status;
    }
    process.stderr.write(`exactlock run: releasing the lock failed: ${(error as Error).message}\n`);
    return status === 0 ? 1 : status;
  }
}

/** Runs `run`; resolves to the exit status. */
export async function runCommand(argv: string[]): Promise<number> {
  const options = parseRunArgs(argv);
  if (options === "help") {
    process.stdout.write(RUN_HELP);
    return 0;
  }
  const relay = new SignalRelay();
  relay.install();
  const command = startCommand(options, relay);
  const inCmdsName = command.child !== undefined;
  try {
    const release = await takeLock(options, relay, command);
    if (typeof release === "number" || relay.received) {
      command.cancel();
      await (GATED ? command.ended : undefined);
      if (typeof release === "number") return release;
      return await releaseLock(release, 128 + signalNumber(relay.received!), inCmdsName);
    }
    command.go();
    return await releaseLock(release, await command.ended, inCmdsName);
  } finally {
    relay.uninstall();
  }
}
