/**
 * Errors a user can meet, each with a stable `code`, and the words that
 * describe a lock's holder. Shaping only: the native core decides.
 */
import type { HolderInfo, LockFailure } from "../native/index.js";

/** Any failure of exactlock that is not an argument error. */
export class FileLockError extends Error {
  readonly code: string;
  readonly lockPath?: string;
  constructor(code: string, message: string, lockPath?: string) {
    super(message);
    this.name = "FileLockError";
    this.code = code;
    if (lockPath !== undefined) this.lockPath = lockPath;
  }
}

/** The waiting budget ran out while someone else held the lock. A {@link FileLockError} with code `ELOCKED`. */
export class FileLockAcquireError extends FileLockError {
  declare readonly code: "ELOCKED";
  readonly filePath: string;
  declare readonly lockPath: string;
  readonly attempts: number;
  /** Who held the lock at the last look, in words. */
  readonly holder: string;
  /** The same, as data (pid, liveness, host, …). */
  readonly holderInfo?: HolderInfo;
  constructor(filePath: string, lockPath: string, attempts: number, holderInfo?: HolderInfo, hostAware = false) {
    const holder = describeHolder(holderInfo, hostAware);
    super(
      "ELOCKED",
      `Failed to acquire lock for ${filePath} after ${attempts} attempts: ${holder} (${lockPath}); ` +
        "a live owner is never displaced \u2014 wait for it to finish, or stop it, before retrying",
      lockPath,
    );
    this.name = "FileLockAcquireError";
    this.filePath = filePath;
    this.attempts = attempts;
    this.holder = holder;
    if (holderInfo !== undefined) this.holderInfo = holderInfo;
  }
}

/** A TypeError for an argument of the right type with a bad value, thrown before anything touches the disk. */
export function argumentError(message: string): TypeError {
  return codedTypeError("ERR_INVALID_ARG_VALUE", message);
}

/** A TypeError for an argument of the wrong type, thrown before anything touches the disk. */
export function argumentTypeError(message: string): TypeError {
  return codedTypeError("ERR_INVALID_ARG_TYPE", message);
}

function codedTypeError(code: string, message: string): TypeError {
  const error = new TypeError(message) as TypeError & { code: string };
  error.code = code;
  return error;
}

const LIVENESS_WORDS: Record<string, string> = {
  live: "live",
  pid_reused: "pid reused by another process",
  dead_not_reaped: "dead but not reaped",
  dead: "dead",
  unknown: "liveness unknown",
};

/** Words for the verdicts whose liveness alone says too little. */
const REASON_WORDS: Record<string, string> = {
  owner_previous_boot: "dead: its record was written before this machine last booted",
  foreign_pid_namespace: "in another pid namespace: liveness unknown from here",
  foreign_kernel: "recorded by another running kernel (a VM or sandbox sharing this directory): liveness unknown from here",
};

function since(timestamp: number | undefined | null): string {
  if (timestamp == null) return "an unknown time";
  const date = new Date(timestamp);
  return Number.isNaN(date.getTime()) ? `timestamp ${timestamp}` : date.toISOString();
}

/** One sentence naming who holds a lock. */
export function describeHolder(holder: HolderInfo | undefined | null, hostAware = false): string {
  if (holder != null && typeof holder !== "object") {
    throw argumentTypeError(`holder must be an object, null or undefined; received type ${typeof holder}`);
  }
  if (typeof hostAware !== "boolean") {
    throw argumentTypeError(`hostAware must be a boolean; received ${hostAware === null ? "null" : `type ${typeof hostAware}`}`);
  }
  if (!holder) return "held by an unreadable owner";
  switch (holder.state) {
    case "free":
      return "free at the last look, but taken again before this waiter could publish";
    case "record": {
      const pid = `pid ${holder.pid}`;
      if (holder.foreign) {
        const where = holder.ownerHostId ? `on host ${holder.ownerHostId}` : "on an unrecorded host";
        return `held by ${pid} ${where} (liveness unknown from this host) since ${since(holder.timestamp)}`;
      }
      const where = holder.ownerHostId ? ` on host ${holder.ownerHostId}` : hostAware ? " on this host" : "";
      const liveness =
        REASON_WORDS[holder.reason] ?? LIVENESS_WORDS[holder.liveness ?? "unknown"] ?? holder.liveness;
      const unremovable = holder.removalFailure
        ? `; its lock directory could not be removed (${holder.removalFailure}): fix that (permissions, immutable files) or remove it by hand`
        : "";
      return `held by ${pid}${where} (${liveness}) since ${since(holder.timestamp)}${unremovable}`;
    }
    case "malformed":
      return (
        "held by an owner record that is not readable (empty, truncated or non-JSON info); " +
        "records without a liveness proof are never reclaimed \u2014 remove the directory by hand once no writer remains"
      );
    case "no_record":
      return "held by an empty lock directory without an owner record (a legacy holder, or one still publishing)";
    case "not_a_lock":
      return `blocked by something that is not a lock directory (${holder.code ?? "refused"}); it is never followed or removed`;
    case "transient":
      return `held by an owner whose record is being written or removed (${holder.code ?? "transient"})`;
    default:
      return `held by an unrecognized owner (${holder.state})`;
  }
}

/** Turns a native failure into the error a user meets. */
export function errorFromFailure(failure: LockFailure): FileLockError {
  return new FileLockError(failure.code, failure.message, failure.lockPath ?? undefined);
}
