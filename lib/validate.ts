/**
 * Argument validation, one helper per kind of argument. Each runs before
 * anything touches the disk and throws a TypeError whose `code` says what
 * was wrong: `ERR_INVALID_ARG_TYPE` for a value of the wrong type,
 * `ERR_INVALID_ARG_VALUE` for the right type with a bad value. The message
 * names the argument, what it must be, and what was received.
 */
import * as path from "node:path";
import { fileURLToPath } from "node:url";
import { argumentError, argumentTypeError } from "./errors.js";

/** The longest `ownerHostId` (and entry of `previousOwnerHostIds`), in UTF-8 bytes. */
export const MAX_HOST_ID_BYTES = 256;

/** Numbers that pass: 0 … 2^53 − 1 (larger ones would overflow the core's timers). */
const MAX_NUMBER = Number.MAX_SAFE_INTEGER;

/** A string as a message shows it: JSON-quoted, cut after 40 characters. */
function quote(text: string): string {
  return text.length > 40 ? `${JSON.stringify(text.slice(0, 40)).slice(0, -1)}…"` : JSON.stringify(text);
}

/** A received value of the wrong type, as a message shows it. */
function describeType(value: unknown): string {
  if (value === null || value === undefined) return String(value);
  if (typeof value === "function") return "a function";
  if (Array.isArray(value)) return "an array";
  if (typeof value === "object") {
    const name = (value as object).constructor?.name;
    return name && name !== "Object" ? `an instance of ${name}` : "an object";
  }
  const shown = typeof value === "string" ? quote(value) : String(value);
  return `type ${typeof value} (${shown})`;
}

/** A received value of the right type, as a message shows it. */
function describeValue(value: unknown): string {
  return typeof value === "string" ? quote(value) : String(value);
}

function wrongType(name: string, expected: string, value: unknown): TypeError {
  return argumentTypeError(`${name} must be ${expected}; received ${describeType(value)}`);
}

function badValue(name: string, requirement: string, shown: string): TypeError {
  return argumentError(`${name} ${requirement}; received ${shown}`);
}

/** A string; anything else is a type error. */
export function validateString(value: unknown, name: string): string {
  if (typeof value !== "string") throw wrongType(name, "a string", value);
  return value;
}

/** A string that is not empty. */
function validateNonEmpty(value: unknown, name: string): string {
  const text = validateString(value, name);
  if (text.length === 0) throw badValue(name, "must be non-empty", '""');
  return text;
}

/** A non-empty absolute path without NUL bytes. */
export function validateFilePath(value: unknown, name = "filePath", relativeHint = ""): string {
  const filePath = validateString(value, name);
  if (filePath.length === 0) throw badValue(name, "must be a non-empty absolute path", '""');
  if (filePath.includes("\0")) throw badValue(name, "must not contain NUL bytes", quote(filePath));
  if (!path.isAbsolute(filePath)) throw badValue(name, `must be an absolute path${relativeHint}`, quote(filePath));
  if (process.platform === "win32" && endsInDotOrSpace(filePath)) {
    throw badValue(
      name,
      "must not have a component ending in a dot or a space on Windows (Windows drops them, so the path names the file without them, which the lock would not); name it without",
      quote(filePath),
    );
  }
  return filePath;
}

/**
 * Whether a component of a Windows path (not `.` or `..`) ends in a dot or
 * a space: Win32 strips those, the native calls exactlock makes do not, so
 * `C:\proj.\state.json` and `C:\proj\state.json` would be two locks of one file.
 */
function endsInDotOrSpace(filePath: string): boolean {
  return filePath.split(/[\\/]/).some((part) => part !== "." && part !== ".." && /[. ]$/.test(part));
}

/**
 * The file a lock is for: an absolute path ({@link validateFilePath}) or a
 * `file:` URL (read as `fs` reads one). A relative path is refused, not
 * resolved: two processes in different working directories would lock
 * different files under one name.
 */
export function validateLockFilePath(value: unknown, name = "filePath"): string {
  if (value instanceof URL) return validateFinalName(validateFilePath(fileUrlPath(value, name), name), name);
  if (typeof value !== "string") throw wrongType(name, "a string or a file: URL", value);
  if (/^file:/i.test(value)) {
    throw badValue(name, "is a file: URL written as a string, which is not a path: pass new URL(text), or the path itself", quote(value));
  }
  const filePath = validateFilePath(value, name, " (or a URL object with the file: scheme): resolve it first, e.g. path.resolve(p), so every process names the same lock");
  return validateFinalName(filePath, name);
}

/**
 * A lock path must end in a file's name: the lock is that string with
 * `.lock` appended, so `/a/dir/` would lock `/a/dir/.lock` (inside the
 * directory) where `/a/dir` locks `/a/dir.lock` — two locks for one path —
 * and `/a/dir/.` or `/a/..` name a directory by another spelling. Refused
 * rather than normalised: the original module, given `/a/dir/`, locks
 * `/a/dir/.lock`, and normalising would stop excluding it.
 */
function validateFinalName(filePath: string, name: string): string {
  const separators = process.platform === "win32" ? /[\\/]/ : /\//;
  const last = filePath.split(separators).at(-1);
  if (last === "" || last === "." || last === "..") {
    throw badValue(
      name,
      "must end in a file's name, not in a path separator, \".\" or \"..\" (the lock is the path with \".lock\" appended, so \"/a/dir/\" and \"/a/dir\" would be two locks of one directory); write the path without them",
      quote(filePath),
    );
  }
  return filePath;
}

function fileUrlPath(url: URL, name: string): string {
  if (url.protocol !== "file:") throw badValue(name, "must be a file: URL when it is a URL", quote(url.href));
  try {
    return fileURLToPath(url);
  } catch (error) {
    throw badValue(name, `is a file: URL that names no local path (${(error as Error).message})`, quote(url.href));
  }
}

/** A finite number from 0 to 2^53 − 1, or `fallback` when undefined. */
export function validateNonNegative(value: unknown, name: string, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== "number") throw wrongType(name, "a number", value);
  if (!Number.isFinite(value) || value < 0 || value > MAX_NUMBER) {
    throw badValue(name, "must be a finite number from 0 to Number.MAX_SAFE_INTEGER", describeValue(value));
  }
  return value;
}

/** `undefined`, or an integer from 0 to 2^32 − 1 (a count). */
export function validateOptionalCount(value: unknown, name: string): number | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== "number") throw wrongType(name, "a number", value);
  if (!Number.isInteger(value) || value < 0 || value > 0xffff_ffff) {
    throw badValue(name, "must be an integer from 0 to 4294967295", describeValue(value));
  }
  return value;
}

/** `undefined`, or a lock directory's permission bits: an integer from 0o700 to 0o777 (the owner keeps `rwx`). */
export function validateLockMode(value: unknown): number | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== "number") throw wrongType("mode", "a number", value);
  if (!Number.isInteger(value) || value < 0o700 || value > 0o777) {
    const shown = Number.isInteger(value) && value >= 0 ? `0o${value.toString(8)}` : describeValue(value);
    throw badValue(
      "mode",
      "must be permission bits from 0o700 to 0o777: the owner keeps rwx, the group and others get what is shared (e.g. 0o770)",
      shown,
    );
  }
  return value;
}

/** An integer from 0 to 2^32 − 1 (required). */
export function validateCount(value: unknown, name: string): number {
  if (value === undefined) throw wrongType(name, "a number", value);
  return validateOptionalCount(value, name)!;
}

/** `undefined`, or a value of `typeof expected`. */
function optionalOfType<T>(value: unknown, name: string, type: "boolean" | "function", expected: string): T | undefined {
  if (value !== undefined && typeof value !== type) throw wrongType(name, expected, value);
  return value as T | undefined;
}

export function validateOptionalBoolean(value: unknown, name: string): boolean | undefined {
  return optionalOfType<boolean>(value, name, "boolean", "a boolean");
}

export function validateOptionalFunction<F>(value: unknown, name: string): F | undefined {
  return optionalOfType<F>(value, name, "function", "a function");
}

export function validateFunction<F>(value: unknown, name: string): F {
  if (typeof value !== "function") throw wrongType(name, "a function", value);
  return value as F;
}

/** `undefined`, or an AbortSignal (anything with `aborted` and `addEventListener`). */
export function validateOptionalSignal(value: unknown, name: string): AbortSignal | undefined {
  if (value === undefined) return undefined;
  const signal = value as AbortSignal | null;
  if (
    signal === null ||
    typeof signal !== "object" ||
    typeof signal.aborted !== "boolean" ||
    typeof signal.addEventListener !== "function"
  ) {
    throw wrongType(name, "an AbortSignal", value);
  }
  return signal;
}

/** An object (not null, not an array). */
function validateObject(value: unknown, name: string): Record<string, unknown> {
  if (value === null || typeof value !== "object" || Array.isArray(value)) throw wrongType(name, "an object", value);
  return value as Record<string, unknown>;
}

/**
 * What other lock libraries call an option exactlock has under another name,
 * or not at all: the hint an unknown option's error gives.
 */
const OPTION_HINTS: Readonly<Record<string, string>> = {
  stale:
    "did you mean staleMs? (exactlock reclaims a dead owner's lock at once; staleMs only ages ownerless legacy lock directories)",
  update: "exactlock keeps no heartbeat: a live holder is never displaced, whatever the time",
  realpath: "paths need no resolving: a lock is keyed by its parent directory's identity, so aliases name the same lock",
  lockfilePath: "the lock is always the directory `${filePath}.lock`",
  wait: "did you mean timeout? (the wait's budget in ms; without it, retries × retryDelayMs)",
};

/**
 * An options bag: an object, or `{}` when undefined. With `known`, an own
 * key outside it (a typo, another library's option) is an
 * `ERR_INVALID_ARG_VALUE` naming it, not silently ignored.
 */
export function validateOptionsObject(
  value: unknown,
  name = "options",
  known?: readonly string[],
): Record<string, unknown> {
  if (value === undefined) return {};
  const options = validateObject(value, name);
  if (known) {
    for (const key of Object.keys(options)) {
      if (known.includes(key)) continue;
      const hint = OPTION_HINTS[key] ?? `the options are ${known.join(", ")}`;
      throw argumentError(`${name}.${key} is not an option of exactlock: ${hint}`);
    }
  }
  return options;
}

/** `timeout`: undefined, a number of ms from 0 to 2^53 − 1, or Infinity. */
export function validateTimeout(value: unknown): number | undefined {
  if (value === undefined || value === Number.POSITIVE_INFINITY) return value;
  if (typeof value === "number" && (Number.isNaN(value) || value < 0 || value > MAX_NUMBER)) {
    throw badValue("timeout", "must be a number of ms from 0 to Number.MAX_SAFE_INTEGER, or Infinity", describeValue(value));
  }
  return validateNonNegative(value, "timeout", 0);
}

/**
 * The retry count: like {@link validateNonNegative}, and also `Infinity`
 * (wait until the lock is won or the signal aborts).
 */

export function validateRetries(value: unknown, fallback: number): number {
  if (value === Number.POSITIVE_INFINITY) return value;
  if (value !== null && typeof value === "object" && !Array.isArray(value)) {
    throw wrongType(
      "retries",
      "a number (the budget is retries × retryDelayMs; a proper-lockfile retries object maps to retries and retryDelayMs)",
      value,
    );
  }
  if (typeof value === "number" && (Number.isNaN(value) || value < 0 || value > MAX_NUMBER)) {
    throw badValue("retries", "must be a number from 0 to Number.MAX_SAFE_INTEGER, or Infinity", describeValue(value));
  }
  return validateNonNegative(value, "retries", fallback);
}

/** A host identity: a non-empty string of at most 256 UTF-8 bytes. */
export function validateHostId(value: unknown, name: string): string {
  const id = validateNonEmpty(value, name);
  const bytes = Buffer.byteLength(id, "utf8");
  if (bytes > MAX_HOST_ID_BYTES) {
    throw badValue(name, `must be at most ${MAX_HOST_ID_BYTES} bytes in UTF-8`, `${bytes} bytes (${quote(id)})`);
  }
  return id;
}

/** `ownerHostId` (optional) and `previousOwnerHostIds` (optional array), each a host identity. */
export function validateHostIds(
  ownerHostId: unknown,
  previousOwnerHostIds: unknown,
): { ownerHostId?: string; previousOwnerHostIds: string[] } {
  const owner = ownerHostId === undefined ? undefined : validateHostId(ownerHostId, "ownerHostId");
  let previous: string[] = [];
  if (previousOwnerHostIds !== undefined) {
    if (!Array.isArray(previousOwnerHostIds)) {
      throw wrongType("previousOwnerHostIds", "an array of strings", previousOwnerHostIds);
    }
    previous = previousOwnerHostIds.map((id, index) => validateHostId(id, `previousOwnerHostIds[${index}]`));
  }
  return owner === undefined ? { previousOwnerHostIds: previous } : { ownerHostId: owner, previousOwnerHostIds: previous };
}

const OWNER_TOKEN_STRINGS = [
  "start_time",
  "start_time_format",
  "process_incarnation",
  "owner_token",
  "owner_host_id",
  "boot_id",
  "pid_ns",
] as const;

/**
 * An owner record as the GC helpers return it: `pid` a positive integer,
 * `timestamp` a finite number, the optional strings absent or non-empty
 * (what a valid `info` can hold; anything else could never match one).
 */
export function validateOwnerToken(value: unknown, name = "expected"): void {
  const token = validateObject(value, name);
  if (typeof token.pid !== "number") throw wrongType(`${name}.pid`, "a number", token.pid);
  if (!Number.isInteger(token.pid) || token.pid <= 0) {
    throw badValue(`${name}.pid`, "must be a positive integer", describeValue(token.pid));
  }
  if (typeof token.timestamp !== "number") throw wrongType(`${name}.timestamp`, "a number", token.timestamp);
  if (!Number.isFinite(token.timestamp)) {
    throw badValue(`${name}.timestamp`, "must be a finite number", describeValue(token.timestamp));
  }
  for (const field of OWNER_TOKEN_STRINGS) {
    if (token[field] !== undefined) validateNonEmpty(token[field], `${name}.${field}`);
  }
  if (token.start_ticks !== undefined) {
    if (typeof token.start_ticks !== "number") throw wrongType(`${name}.start_ticks`, "a number", token.start_ticks);
    if (!Number.isSafeInteger(token.start_ticks) || token.start_ticks < 0) {
      throw badValue(`${name}.start_ticks`, "must be a non-negative integer", describeValue(token.start_ticks));
    }
  }
}

const U64_MAX = 2n ** 64n - 1n;
const UNSIGNED_FIELDS = ["rootDev", "rootIno", "infoDev", "infoIno", "infoNlink", "infoSize"] as const;
const SIGNED_FIELDS = ["infoMtimeNs", "infoCtimeNs"] as const;

function isUnsigned64(text: string): boolean {
  return /^\d{1,20}$/.test(text) && BigInt(text) <= U64_MAX;
}

/**
 * A `GenericFileLockDirIdentity`: six unsigned 64-bit decimal strings,
 * two signed decimal strings (the times in ns) and `infoSha256`, 64 hex
 * digits.
 */
export function validateDirIdentity(value: unknown, name = "preVerdictIdentity"): void {
  const identity = validateObject(value, name);
  for (const field of UNSIGNED_FIELDS) {
    const text = validateString(identity[field], `${name}.${field}`);
    if (!isUnsigned64(text)) throw badValue(`${name}.${field}`, "must be an unsigned 64-bit decimal string", quote(text));
  }
  for (const field of SIGNED_FIELDS) {
    const text = validateString(identity[field], `${name}.${field}`);
    if (!/^-?\d{1,38}$/.test(text)) throw badValue(`${name}.${field}`, "must be a decimal integer string", quote(text));
  }
  const sha = validateString(identity.infoSha256, `${name}.infoSha256`);
  if (!/^[0-9a-fA-F]{64}$/.test(sha)) throw badValue(`${name}.infoSha256`, "must be 64 hex digits", quote(sha));
}

const SNAPSHOT_ENTRY_STRINGS = ["relativePath", "kind", "dev", "ino", "nlink", "size", "mtimeNs", "ctimeNs"] as const;

/**
 * The shape of a `NativeDirectorySnapshot`: `rootDev` and `rootIno`
 * strings, `entries` an array of objects with string fields (`sha256`
 * optional). Only the shape: whether the strings parse is the native
 * side's call, answered as a refusal (`invalid_request`).
 */
export function validateSnapshotShape(value: unknown, name = "snapshot"): void {
  const snapshot = validateObject(value, name);
  validateString(snapshot.rootDev, `${name}.rootDev`);
  validateString(snapshot.rootIno, `${name}.rootIno`);
  if (!Array.isArray(snapshot.entries)) throw wrongType(`${name}.entries`, "an array", snapshot.entries);
  snapshot.entries.forEach((item: unknown, index: number) => {
    const entryName = `${name}.entries[${index}]`;
    const entry = validateObject(item, entryName);
    for (const field of SNAPSHOT_ENTRY_STRINGS) validateString(entry[field], `${entryName}.${field}`);
    if (entry.sha256 !== undefined) validateString(entry.sha256, `${entryName}.sha256`);
  });
}
