/**
 * updateFile / updateJson: change a file under its lock, safely. Under
 * `filePath`'s lock: read the file, call the updater, commit what it
 * returns — a temp file in the same directory, flushed, given the old
 * file's mode and owner, renamed over the file, the directory flushed —
 * then release. The native core does every step on disk
 * (src/lock/update.rs); this validates, converts and shapes errors.
 *
 * Why not `writeFile` under `withFileLock`: the lock keeps writers apart,
 * not readers from a file that `writeFile` truncates and then fills. A
 * crash in between leaves it empty or half written, under any lock.
 */
import { Buffer } from "node:buffer";
import type * as Binding from "../native/index.js";
import { native } from "./native.js";
import { argumentError, argumentTypeError, FileLockError } from "./errors.js";
import { type HeldFileLock, holding, holdingSync } from "./lock.js";
import { FILE_LOCK_OPTION_KEYS, type FileLockOptions } from "./options.js";
import {
  validateFunction,
  validateLockFilePath,
  validateNonNegative,
  validateOptionalBoolean,
  validateOptionsObject,
  validateString,
} from "./validate.js";

export interface UpdateFileOptions extends FileLockOptions {
  /**
   * The current content is handed to the updater as a string in this
   * encoding (a `Buffer` without it); a string the updater returns is
   * written in it (UTF-8 without it).
   */
  encoding?: BufferEncoding;
  /** `fsync` the new file before its rename and the directory after. Default true. */
  durable?: boolean;
  /** The mode of a file made new (an existing file keeps its own). Default 0o666 less the umask. */
  fileMode?: number;
  /** Give the new file the old one's owner and group where this process may (root, or its own file). Default true. */
  keepOwner?: boolean;
  /** The most bytes read; a larger file fails with `EFBIG`. Default 256 MiB. */
  maxBytes?: number;
}

/** What an updater may return: new content, `null` to delete the file, `undefined` to leave it as it is. */
export type UpdateContent = string | Uint8Array | null | undefined;

/** What an update did. */
export interface UpdateResult {
  filePath: string;
  /** New content was renamed over the file. */
  written: boolean;
  /** The file was deleted (the updater returned `null` and there was a file). */
  deleted: boolean;
  /** Bytes written. */
  bytes: number;
  /** Whether the new file has the old one's owner (false where this process may not give it: not root). */
  ownerKept: boolean;
  /** The lock's fencing token, with `fence: true`. */
  fence?: bigint;
}

/** The steps of an update, for {@link FileUpdateError}. */
export type UpdateStep = "read" | "write" | "fsync" | "rename" | "dirsync" | "release";

/**
 * An update that failed at `step`. `committed`: the new content was renamed
 * over the file before the failure (a directory flush or the release
 * failed after it) — it is what readers see now: reload, do not retry.
 */
export class FileUpdateError extends FileLockError {
  readonly step: UpdateStep;
  readonly committed: boolean;
  constructor(code: string, message: string, filePath: string, step: UpdateStep, committed: boolean, cause?: unknown) {
    super(code, message, `${filePath}.lock`);
    this.name = "FileUpdateError";
    this.step = step;
    this.committed = committed;
    if (cause !== undefined) this.cause = cause;
  }
}

const UPDATE_KEYS = ["encoding", "durable", "fileMode", "keepOwner", "maxBytes"] as const;
const JSON_KEYS = ["durable", "fileMode", "keepOwner", "maxBytes", "space", "fenceKey"] as const;
const DEFAULT_MAX_BYTES = 256 * 1024 * 1024;

interface Resolved {
  lockOptions: FileLockOptions;
  encoding?: BufferEncoding;
  durable: boolean;
  fileMode?: number;
  keepOwner: boolean;
  maxBytes: number;
}

/** Splits `options` into the lock's and the update's, each validated. */
function resolve(options: object | undefined, keys: readonly string[]): Resolved & Record<string, unknown> {
  const given = validateOptionsObject(options, "options", [...FILE_LOCK_OPTION_KEYS, ...keys]) as Record<string, unknown>;
  const lockOptions: Record<string, unknown> = {};
  for (const key of FILE_LOCK_OPTION_KEYS) if (given[key] !== undefined) lockOptions[key] = given[key];
  const encoding = given.encoding === undefined ? undefined : validateString(given.encoding, "encoding");
  if (encoding !== undefined && !Buffer.isEncoding(encoding)) {
    throw argumentError(`encoding must be a Buffer encoding (utf8, latin1, base64…); received ${JSON.stringify(encoding)}`);
  }
  const fileMode = given.fileMode === undefined ? undefined : validateNonNegative(given.fileMode, "fileMode", 0);
  if (fileMode !== undefined && (!Number.isInteger(fileMode) || fileMode > 0o7777)) {
    throw argumentError(`fileMode must be permission bits from 0 to 0o7777; received ${fileMode}`);
  }
  return {
    ...given,
    lockOptions: lockOptions as FileLockOptions,
    encoding: encoding as BufferEncoding | undefined,
    durable: validateOptionalBoolean(given.durable, "durable") ?? true,
    fileMode,
    keepOwner: validateOptionalBoolean(given.keepOwner, "keepOwner") ?? true,
    maxBytes: validateNonNegative(given.maxBytes, "maxBytes", DEFAULT_MAX_BYTES),
  };
}

/** An update step's failure as the user meets it. */
function updateError(failure: Binding.UpdateFailure, filePath: string): FileUpdateError {
  const step = failure.step as UpdateStep;
  const what: Record<string, string> = {
    EFBIG: `${filePath} is larger than maxBytes`,
    EINVAL: `${filePath} is not a regular file (a directory, FIFO, socket or device): updateFile replaces files only`,
    EMISSING: `the lock ${filePath}.lock was removed while this update held it: nothing was renamed`,
    EOWNERCHANGED: `the lock ${filePath}.lock was replaced while this update held it: nothing was renamed`,
    ERELEASED: `the lock of ${filePath} was released before the update could ${step === "read" ? "read" : "commit"}`,
  };
  const detail = what[failure.code] ?? `the ${step} step failed (${failure.code})`;
  const outcome = failure.committed
    ? "The new content IS committed (renamed over the file): reload it rather than retry."
    : "Nothing was changed: the file is as it was.";
  return new FileUpdateError(failure.code, `Failed to update ${filePath}: ${detail}. ${outcome}`, filePath, step, failure.committed);
}

/** The updater's result as bytes for the core (`null`: delete), or a TypeError. */
function contentOf(value: UpdateContent, encoding: BufferEncoding | undefined): Buffer | null {
  if (value === null) return null;
  if (typeof value === "string") return Buffer.from(value, encoding ?? "utf8");
  if (value instanceof Uint8Array) return Buffer.isBuffer(value) ? value : Buffer.from(value.buffer, value.byteOffset, value.byteLength);
  throw argumentError(
    `the updater must return a string, a Uint8Array, null (delete the file) or undefined (leave it); received ${typeof value}`,
  );
}

/** What the core read, as the updater is handed it. */
function currentOf(content: Buffer | null | undefined, encoding: BufferEncoding | undefined): string | Buffer | undefined {
  if (content == null) return undefined;
  return encoding === undefined ? content : content.toString(encoding);
}

/** The result of an update that wrote nothing. */
function unchanged(filePath: string, lock: HeldFileLock): UpdateResult {
  return { filePath, written: false, deleted: false, bytes: 0, ownerKept: true, ...(lock.fence === undefined ? {} : { fence: lock.fence }) };
}

function committedResult(
  filePath: string,
  lock: HeldFileLock,
  content: Buffer | null,
  done: Binding.UpdateCommit,
): UpdateResult {
  return {
    filePath,
    written: content !== null,
    deleted: done.deleted,
    bytes: content?.byteLength ?? 0,
    ownerKept: done.ownerKept,
    ...(lock.fence === undefined ? {} : { fence: lock.fence }),
  };
}

/**
 * A failure of the release after a commit: the content is committed, and
 * the error says so. Anything else is rethrown as it is.
 */
function afterCommit(error: unknown, filePath: string, committed: boolean): unknown {
  // A lock lost before the rename: its release fails too, for the same reason.
  const [first] = error instanceof AggregateError ? error.errors : [];
  if (first instanceof FileUpdateError && (first.code === "EMISSING" || first.code === "EOWNERCHANGED")) return first;
  if (!committed || error instanceof FileUpdateError) return error;
  const code = error instanceof FileLockError ? error.code : "ERELEASE";
  return new FileUpdateError(
    code,
    `Updated ${filePath}, then releasing its lock failed: ${(error as Error)?.message ?? String(error)} ` +
      "The new content IS committed (renamed over the file): reload it rather than retry.",
    filePath,
    "release",
    true,
    error,
  );
}

/**
 * Changes `filePath` under its lock: reads it (`undefined` when there is no
 * file), calls `updater(current, lock)` and commits what it returns —
 * atomically (readers that do not lock see the old file or the new one,
 * never a torn or empty one) and, by default, durably — then releases.
 * `undefined` leaves the file as it is; `null` deletes it. The file's mode
 * and (where permitted) owner are kept; a symlink is followed and kept.
 */
export async function updateFile<C extends string | Buffer = Buffer>(
  filePath: string | URL,
  updater: (current: C | undefined, lock: HeldFileLock) => UpdateContent | PromiseLike<UpdateContent>,
  options?: UpdateFileOptions,
): Promise<UpdateResult> {
  validateFunction(updater, "updater");
  const path = validateLockFilePath(filePath);
  const resolved = resolve(options, UPDATE_KEYS);
  let committed = false;
  try {
    return await holding(path, resolved.lockOptions, async (lock, generation) => {
      const read =
        native.readForUpdateInlineNative(generation, resolved.maxBytes) ??
        (await native.readForUpdateNative(generation, resolved.maxBytes));
      if (read.failure) throw updateError(read.failure, path);
      const handle = read.handle!;
      let content: Buffer | null;
      try {
        const next = await updater(currentOf(read.content, resolved.encoding) as C | undefined, lock);
        if (next === undefined) {
          native.dropUpdateNative(handle);
          return unchanged(path, lock);
        }
        content = contentOf(next, resolved.encoding);
      } catch (error) {
        native.dropUpdateNative(handle);
        throw error;
      }
      // Without fsync the commit is a handful of calls: on this thread where the lock's are.
      const done =
        (resolved.durable ? undefined : native.commitUpdateInlineNative(handle, content, resolved.fileMode, resolved.keepOwner)) ??
        (await native.commitUpdateNative(handle, content, resolved.durable, resolved.fileMode, resolved.keepOwner));
      if (done.failure) throw updateError(done.failure, path);
      committed = true;
      return committedResult(path, lock, content, done);
    });
  } catch (error) {
    throw afterCommit(error, path, committed);
  }
}

/**
 * {@link updateFile} on the calling thread, which it blocks while it waits
 * for the lock (as `acquireLockSync` does); the updater must be synchronous.
 */
export function updateFileSync<C extends string | Buffer = Buffer>(
  filePath: string | URL,
  updater: (current: C | undefined, lock: HeldFileLock) => UpdateContent,
  options?: UpdateFileOptions,
): UpdateResult {
  validateFunction(updater, "updater");
  const path = validateLockFilePath(filePath);
  const resolved = resolve(options, UPDATE_KEYS);
  let committed = false;
  try {
    return holdingSync(path, resolved.lockOptions, (lock, generation) => {
      const read = native.readForUpdateSyncNative(generation, resolved.maxBytes);
      if (read.failure) throw updateError(read.failure, path);
      const handle = read.handle!;
      let content: Buffer | null;
      try {
        const next = updater(currentOf(read.content, resolved.encoding) as C | undefined, lock);
        if (next !== null && typeof (next as { then?: unknown } | undefined)?.then === "function") {
          throw argumentError("the updater returned a promise: updateFileSync needs a synchronous updater; use updateFile");
        }
        if (next === undefined) {
          native.dropUpdateNative(handle);
          return unchanged(path, lock);
        }
        content = contentOf(next, resolved.encoding);
      } catch (error) {
        native.dropUpdateNative(handle);
        throw error;
      }
      const done = native.commitUpdateSyncNative(handle, content, resolved.durable, resolved.fileMode, resolved.keepOwner);
      if (done.failure) throw updateError(done.failure, path);
      committed = true;
      return committedResult(path, lock, content, done);
    });
  } catch (error) {
    throw afterCommit(error, path, committed);
  }
}

export interface UpdateJsonOptions extends Omit<UpdateFileOptions, "encoding"> {
  /** `JSON.stringify`'s indentation. Default 2; the file ends with a newline. */
  space?: number | string;
  /** With `fence: true`: the key the lock's fencing token is written under (as a decimal string), in the same atomic write. */
  fenceKey?: string;
}

/** The JSON an updater gets and returns: `updateJson`'s value of the file. */
export type JsonUpdater<T> = (data: T | undefined, lock: HeldFileLock) => T | null | undefined | PromiseLike<T | null | undefined>;

/**
 * {@link updateFile} for a JSON file: the updater gets the parsed value
 * (`undefined` when there is no file) and returns the next one (`undefined`
 * leaves the file, `null` deletes it). A file that is not valid JSON fails
 * with `EJSON`, before the updater runs.
 */
export async function updateJson<T = unknown>(
  filePath: string | URL,
  updater: JsonUpdater<T>,
  options?: UpdateJsonOptions,
): Promise<UpdateResult> {
  validateFunction(updater, "updater");
  const json = jsonOptions(options);
  return updateFile<string>(filePath, async (text, lock) => json.serialize(await updater(json.parse(text, lock), lock), lock), {
    ...json.fileOptions,
    encoding: "utf8",
  });
}

/** {@link updateJson} on the calling thread, with a synchronous updater. */
export function updateJsonSync<T = unknown>(
  filePath: string | URL,
  updater: (data: T | undefined, lock: HeldFileLock) => T | null | undefined,
  options?: UpdateJsonOptions,
): UpdateResult {
  validateFunction(updater, "updater");
  const json = jsonOptions(options);
  return updateFileSync<string>(filePath, (text, lock) => json.serialize(updater(json.parse(text, lock), lock), lock), {
    ...json.fileOptions,
    encoding: "utf8",
  });
}

/** updateJson's options split, and its parse and serialize steps. */
function jsonOptions(options: UpdateJsonOptions | undefined) {
  const given = validateOptionsObject(options, "options", [...FILE_LOCK_OPTION_KEYS, ...JSON_KEYS]) as Record<string, unknown>;
  const { space = 2, fenceKey, ...fileOptions } = given;
  if (typeof space !== "number" && typeof space !== "string") {
    throw argumentTypeError(`space must be a number or a string; received ${typeof space}`);
  }
  if (fenceKey !== undefined) validateString(fenceKey, "fenceKey");
  return {
    fileOptions: fileOptions as UpdateFileOptions,
    parse<T>(text: string | undefined, lock: HeldFileLock): T | undefined {
      if (text === undefined) return undefined;
      try {
        return JSON.parse(text) as T;
      } catch (error) {
        const file = lock.lockPath.slice(0, -".lock".length);
        throw new FileUpdateError(
          "EJSON",
          `Failed to update ${file}: it is not valid JSON (${(error as Error).message}). Nothing was changed; fix or remove the file.`,
          file,
          "read",
          false,
          error,
        );
      }
    },
    serialize<T>(value: T | null | undefined, lock: HeldFileLock): string | null | undefined {
      if (value === null) return null;
      if (value === undefined) return undefined;
      let data: unknown = value;
      if (fenceKey !== undefined && lock.fence !== undefined) {
        if (typeof value !== "object" || Array.isArray(value)) {
          throw argumentError("fenceKey needs the updater to return a plain object, which the token is written into");
        }
        data = { ...(value as object), [fenceKey as string]: String(lock.fence) };
      }
      return `${JSON.stringify(data, null, space as number | string)}\n`;
    },
  };
}
