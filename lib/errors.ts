/**
 * Errors a user can meet, each with a stable `code`, and the words that
 * describe a lock's holder. Shaping only: the native core decides.
 */
import type * as native from "../native/index.js";
import type { LockFailure } from "../native/index.js";

/** What stands at a lock path: nothing, an owner record, or something else. */
export type LockState = "free" | "record" | "malformed" | "no_record" | "not_a_lock" | "transient";

/** Whether a recorded owner still runs, as far as this host can tell. */
export type LockLiveness = "live" | "dead" | "dead_not_reaped" | "pid_reused" | "unknown";

/** Why a lock is (or is not) reclaimable now. */
export type LockReason =
  | "free"
  | "transient"
  | "not_a_lock"
  | "no_record_host_aware"
  | "malformed_record"
  | "legacy_empty_fresh"
  | "legacy_empty_aged"
  | "foreign_host"
  | "pid_reused"
  | "owner_alive"
  | "owner_dead"
  | "owner_dead_not_reaped"
  | "owner_previous_boot"
  | "foreign_pid_namespace"
  | "foreign_kernel"
  | "liveness_unknown";

/** Who holds a lock, as the core saw it (`FileLockAcquireError.holderInfo`, `onContended`). */
export interface HolderInfo extends Omit<native.HolderInfo, "state" | "liveness" | "reason"> {
  state: LockState;
  liveness?: LockLiveness;
  reason: LockReason;
}

/** The codes of exactlock's own failures (see the README's troubleshooting table). */
export type FileLockOwnCode =
  | "ELOCKED"
  | "ETIMEDOUT"
  | "ENOPROC"
  | "EDEADLK"
  | "ERELEASED"
  | "ERELEASING"
  | "EMISSING"
  | "EOWNERCHANGED"
  | "EFOREIGN"
  | "EPUBLISH";

/** An OS error name as the failing syscall gave it: EACCES, EPERM, EROFS, ENOSPC, EIO, ELOOP, EBUSY, EXDEV… */
export type ErrnoCode = `E${Uppercase<string>}`;

/** The `code` of a {@link FileLockError}. */
export type FileLockErrorCode = FileLockOwnCode | ErrnoCode;

/** The core's description of a holder, with its words typed (they come from a fixed set). */
export function holderInfoOf(holder: native.HolderInfo): HolderInfo {
  return holder as HolderInfo;
}

/** Any failure of exactlock that is not an argument error. */
export class FileLockError extends Error {
  readonly code: FileLockErrorCode;
  readonly lockPath?: string;
  constructor(code: string, message: string, lockPath?: string) {
    super(message);
    this.name = "FileLockError";
    this.code = code as FileLockErrorCode;
    if (lockPath !== undefined) this.lockPath = lockPath;
  }
}

/**
 * The wait ran out of time while someone else held the lock: its budget
 * (`timeout`, or `retries × retryDelayMs`) was spent, or its signal came from
 * `AbortSignal.timeout()` (that signal's reason is the `cause`). A
 * {@link FileLockError} with code `ELOCKED`.
 */
export class FileLockAcquireError extends FileLockError {
  declare readonly code: "ELOCKED";
  readonly filePath: string;
  declare readonly lockPath: string;
  readonly attempts: number;
  /** Who held the lock at the last look, in words. */
  readonly holder: string;
  /** The same, as data (pid, liveness, host, …). */
  readonly holderInfo?: HolderInfo;
  constructor(
    filePath: string,
    lockPath: string,
    attempts: number,
    holderInfo?: HolderInfo | native.HolderInfo,
    hostAware = false,
    signalTimeout?: unknown,
  ) {
    const timedOut = signalTimeout !== undefined;
    const holder =
      timedOut && holderInfo === undefined ? "its holder not seen yet" : describeHolder(holderInfo, hostAware);
    super(
      "ELOCKED",
      `Failed to acquire lock for ${filePath} after ${attempts} attempt${attempts === 1 ? "" : "s"}` +
        `${timedOut ? ", when its signal timed out" : ""}: ` +
        `${holder} (${lockPath}); ${acquireAdvice(holderInfo, hostAware)}`,
      lockPath,
    );
    if (timedOut) this.cause = signalTimeout;
    this.name = "FileLockAcquireError";
    this.filePath = filePath;
    this.attempts = attempts;
    this.holder = holder;
    if (holderInfo !== undefined) this.holderInfo = holderInfoOf(holderInfo);
  }
}

/** What to do about a lock that could not be had, by who holds it. */
function acquireAdvice(holder: HolderInfo | native.HolderInfo | undefined, hostAware: boolean): string {
  if (holder?.state === "record" && holder.foreign) {
    if (!holder.ownerHostId && hostAware) {
      return (
        "processes with and without ownerHostId are sharing this lock \u2014 pass the same ownerHostId to every " +
        `process that uses it (or to none); remove the lock by hand only once pid ${holder.pid} is known to be gone`
      );
    }
    return (
      "an owner on another host is never judged from here \u2014 wait for it, or remove the lock by hand once " +
      "that host is known to be done with it (exactlock status shows the record)"
    );
  }
  return "a live owner is never displaced \u2014 wait for it to finish, or stop it, before retrying";
}

/** A TypeError for an argument of the right type with a bad value, thrown before anything touches the disk. */
export function argumentError(message: string): TypeError {
  return codedTypeError("ERR_INVALID_ARG_VALUE", message);
}

/** A TypeError for an argument of the wrong type, thrown before anything touches the disk. */
export function argumentTypeError(message: string): TypeError {
  return codedTypeError("ERR_INVALID_ARG_TYPE", message);
}

/** A TypeError for a getter read through something it does not belong to (as Node's own `ERR_INVALID_THIS`). */
export function invalidThisError(message: string): TypeError {
  return codedTypeError("ERR_INVALID_THIS", message);
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

/** The codes of a lock directory refused for an entry inside it (not for what stands at its name). */
const ENTRY_REFUSALS = new Set(["reparse_point", "unsupported_entry", "not_utf8", "hard_link_unsupported", "limit_exceeded"]);

/** One sentence naming who holds a lock. */
export function describeHolder(holder: HolderInfo | native.HolderInfo | undefined | null, hostAware = false): string {
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
      if (holder.foreign && !holder.ownerHostId && hostAware) {
        return (
          `held by ${pid} on an unrecorded host (its record names no owner_host_id while this process passes ` +
          `ownerHostId, so which host it runs on is unknown; liveness unknown from this host) since ${since(holder.timestamp)}`
        );
      }
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
      if (holder.code && ENTRY_REFUSALS.has(holder.code)) {
        return (
          `blocked by a lock directory holding an entry exactlock never follows or removes (${holder.code}: a symlink, ` +
          "FIFO, socket or device, a hard-linked file, a name that is not UTF-8, or more than a snapshot reads); " +
          "it is never reclaimed while that entry is there \u2014 look at it and remove it by hand"
        );
      }
      return `blocked by something that is not a lock directory (${holder.code ?? "refused"}); it is never followed or removed`;
    case "transient":
      if (holder.code === "EACCES" || holder.code === "EPERM") {
        return (
          `held by an owner whose record this process may not read (${holder.code}): the lock belongs to another user, ` +
          "and lock directories are 0700 by default, so its holder can never be judged from here; to share a lock " +
          "between users, every process passes the same mode option (mode: 0o770) and the users share a group"
        );
      }
      return `held by an owner whose record is being written or removed (${holder.code ?? "transient"})`;
    default:
      return `held by an unrecognized owner (${holder.state})`;
  }
}

/**
 * What a failed release means and what to do, by code, after the core's
 * first sentence (kept as the original module words it, so its prefix
 * still matches). `lockPath` names the lock.
 */
const RELEASE_ADVICE: Readonly<Record<string, (lockPath: string) => string>> = {
  ERELEASED: (lockPath) =>
    `This release function already released ${lockPath} (or its Worker's teardown gave it back); ` +
    "call it once \u2014 withFileLock and await using release for you.",
  ERELEASING: (lockPath) =>
    `A release of ${lockPath} by this release function is still running; await that call instead of calling again.`,
  EMISSING: (lockPath) =>
    `${lockPath} was removed by someone else while this process held it, so what it guarded may have been ` +
    "changed meanwhile; find what removes it (a cleanup script, rm -rf, a gc run by another host).",
  EOWNERCHANGED: (lockPath) =>
    `${lockPath} now holds another owner's record (it was replaced while this process held it) and was left ` +
    "to them; what it guarded may have been changed meanwhile \u2014 find who replaced it.",
  EFOREIGN: () =>
    "Nothing is left to retry: the lock is free. Look at what was left and remove it by hand; whatever put it " +
    "into a lock directory should put its files elsewhere.",
};

/** A failed release as the user meets it: the core's words, then where and what to do. */
export function releaseErrorFromFailure(failure: LockFailure, lockPath: string): FileLockError {
  const path = failure.lockPath ?? lockPath;
  const advice =
    RELEASE_ADVICE[failure.code]?.(path) ??
    `The lock ${path} stays fenced to this generation: nobody else may take it while it stands, and the next ` +
      "acquisition of it in this process retries the release first; if it persists, check the directory's permissions and flags.";
  return new FileLockError(failure.code, `${failure.message} ${advice}`, path);
}

/** Turns a native failure into the error a user meets. */
export function errorFromFailure(failure: LockFailure): FileLockError {
  return new FileLockError(failure.code, failure.message, failure.lockPath ?? undefined);
}
