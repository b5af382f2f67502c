/**
 * Argument parsing for the `exactlock` command: flags through
 * `node:util` parseArgs, numbers checked here, and one error type for every
 * usage mistake (exit status 2).
 */
import { parseArgs } from "node:util";
import { MAX_HOST_ID_BYTES } from "../validate.js";

/** A mistake in how the command was called. */
export class UsageError extends Error {
  constructor(
    message: string,
    readonly command?: string,
  ) {
    super(message);
    this.name = "UsageError";
  }
}

type FlagSpec = Record<string, { type: "boolean" | "string"; short?: string }>;

export interface Parsed {
  flags: Record<string, string | boolean | undefined>;
  positionals: string[];
}

/**
 * Parses `argv` against `spec`; unknown flags and missing values are usage
 * errors. An unknown flag is named, with `hints[flag]` when another tool's
 * flag of that name has an equivalent here (flock's, for `run`).
 */
export function parseFlags(
  command: string,
  argv: string[],
  spec: FlagSpec,
  hints: Readonly<Record<string, string>> = {},
): Parsed {
  try {
    const { values, positionals } = parseArgs({
      args: argv,
      options: { help: { type: "boolean", short: "h" }, ...spec },
      allowPositionals: true,
      strict: true,
    });
    return { flags: values as Parsed["flags"], positionals };
  } catch (error) {
    const { code, message } = error as NodeJS.ErrnoException;
    const unknown = code === "ERR_PARSE_ARGS_UNKNOWN_OPTION" ? /'([^']+)'/.exec(message)?.[1] : undefined;
    if (unknown !== undefined) {
      const flag = unknown.split("=")[0]!;
      throw new UsageError(`unknown option ${flag}${hints[flag] ? `: ${hints[flag]}` : ""}`, command);
    }
    throw new UsageError(message.split("\n")[0] ?? String(error), command);
  }
}

/** A non-negative integer flag (milliseconds, counts), or `fallback` when absent. */
export function integerFlag(
  command: string,
  flags: Parsed["flags"],
  name: string,
  fallback: number,
  { min = 0, max = Number.MAX_SAFE_INTEGER }: { min?: number; max?: number } = {},
): number {
  const raw = flags[name];
  if (raw === undefined) return fallback;
  if (typeof raw !== "string" || !/^\d+$/.test(raw)) {
    throw new UsageError(`--${name} must be a whole number, got ${JSON.stringify(raw)}`, command);
  }
  const value = Number(raw);
  if (value < min || value > max) {
    throw new UsageError(`--${name} must be between ${min} and ${max}, got ${raw}`, command);
  }
  return value;
}

/** A non-empty string flag, or `undefined` when absent. */
export function stringFlag(command: string, flags: Parsed["flags"], name: string): string | undefined {
  const raw = flags[name];
  if (raw === undefined) return undefined;
  if (typeof raw !== "string" || raw.length === 0) throw new UsageError(`--${name} must not be empty`, command);
  return raw;
}

/** `--owner-host-id`: a non-empty identity of at most 256 UTF-8 bytes, or `undefined` when absent. */
export function hostIdFlag(command: string, flags: Parsed["flags"]): string | undefined {
  const id = stringFlag(command, flags, "owner-host-id");
  const bytes = id === undefined ? 0 : Buffer.byteLength(id, "utf8");
  if (bytes > MAX_HOST_ID_BYTES) {
    throw new UsageError(`--owner-host-id must be at most ${MAX_HOST_ID_BYTES} bytes in UTF-8, got ${bytes}`, command);
  }
  return id;
}
