/**
 * The `exactlock` command: see, run under, and clean up locks.
 *
 *   exactlock status FILE...          who holds it, alive?, how old, verdict
 *   exactlock run FILE CMD ...        hold the lock while CMD runs
 *   exactlock gc DIR                  remove provably stale locks below DIR
 *   exactlock demo                    processes contending, with crashes
 *   exactlock doctor DIR...           what the filesystem under DIR supports
 *
 * Lock logic lives in the library; this file only parses, dispatches and
 * maps failures to exit statuses (0 ok, 1 failure, 2 usage, 75 lock busy).
 */
import { UsageError } from "./cli/args.js";
import { demoCommand } from "./cli/demo.js";
import { doctorCommand } from "./cli/doctor.js";
import { gcCommand } from "./cli/gc.js";
import { runCommand } from "./cli/run.js";
import { STATUS_EXIT, statusCommand } from "./cli/status.js";

export const EXIT_USAGE = 2;

export const GLOBAL_HELP = `Usage: exactlock <command> [options]

A cross-process lock for a file path: the lock of FILE is the directory
FILE.lock with an owner record (pid, start time, timestamp, token).

Commands:
  status FILE...             who holds each lock, is it alive, how old, would
                             a waiter reclaim it (--json)
  run [-w SECONDS | -n] [-E N] FILE CMD [ARGS...]
                             hold the lock while CMD runs (flock-shaped);
                             exit with CMD's status, 75 (or -E's N) if the
                             lock could not be had in time
  gc DIR [--dry-run]         remove provably stale locks below DIR, printing
                             each decision (--json)
  demo [--seconds N] [--procs N]
                             processes contending on one file, holders
                             SIGKILLed mid-section; prints a summary (--json)
  doctor [--line] DIR...     what the filesystem under DIR supports (exclusive
                             renames, flock, inotify, local or network) and
                             what follows for the lock there (--json)

Run 'exactlock <command> --help' for a command's options.

Options:
  -h, --help                 show this help
  -v, --version              print the version
`;

const COMMANDS: Record<string, (argv: string[]) => Promise<number>> = {
  status: statusCommand,
  run: runCommand,
  gc: gcCommand,
  demo: demoCommand,
  doctor: doctorCommand,
};

function version(): string {
  return (require("../package.json") as { version: string }).version;
}

function usageFailure(error: UsageError): number {
  const hint = error.command ? `exactlock ${error.command} --help` : "exactlock --help";
  process.stderr.write(`exactlock: ${error.message}\nRun '${hint}' for usage.\n`);
  return EXIT_USAGE;
}

/** Runs the command line `argv` (without node and the script); resolves to the exit status. */
export async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  try {
    if (name === undefined) throw new UsageError("missing command");
    if (name === "help" && rest.length > 0) {
      // `exactlock help run` is `exactlock run --help`.
      const command = COMMANDS[rest[0]!];
      if (!command) throw new UsageError(`no help for unknown command ${JSON.stringify(rest[0])}`);
      return await command(["--help"]);
    }
    if (name === "-h" || name === "--help" || name === "help") {
      process.stdout.write(GLOBAL_HELP);
      return 0;
    }
    if (name === "-v" || name === "--version") {
      process.stdout.write(`${version()}\n`);
      return 0;
    }
    const command = COMMANDS[name];
    if (!command) throw new UsageError(`unknown command ${JSON.stringify(name)}`);
    return await command(rest);
  } catch (error) {
    if (error instanceof UsageError) return usageFailure(error);
    process.stderr.write(`exactlock: ${(error as Error).message ?? String(error)}\n`);
    // status's 1 means "held": a failure there is its "could not be read".
    return name === "status" ? STATUS_EXIT.unreadable : 1;
  }
}

/**
 * Once stdout's reader has gone (`exactlock status … | head -1`), ends the
 * process quietly with status 0, as `yes | head -1` ends: the rest of the
 * output has no one to read it.
 */
function exitQuietlyOnBrokenStdout(): void {
  process.stdout.on("error", (error: NodeJS.ErrnoException) => {
    if (error.code === "EPIPE") process.exit(0);
    throw error;
  });
}

/** Runs the command line of this process and sets its exit status (bin/exactlock.js). */
export function runProcess(argv: string[] = process.argv.slice(2)): void {
  exitQuietlyOnBrokenStdout();
  void main(argv).then((status) => {
    process.exitCode = status;
  });
}

if (require.main === module) runProcess();
