/**
 * `probeFilesystem(dir)`: what the filesystem under a directory carries for
 * a lock (the exclusive renames, `flock`, inotify, its `statfs` type and
 * whether other hosts may write there), found by the native core trying
 * each call in a scratch directory it makes under `dir` and removes again.
 * What it finds is also remembered by the core for that filesystem, so the
 * lock goes straight to its fallback where a call was refused. Shaping
 * only: the words for a failure and its next step.
 */
import type * as Binding from "../native/index.js";
import { native } from "./native.js";
import { validateFilePath } from "./validate.js";

/** `yes`; `no` (refused); `broken` (claimed success, did not do it); `unknown` (the try failed otherwise). */
export type ProbeCallResult = "yes" | "no" | "broken" | "unknown";

/** One call as the probe found it. */
export interface ProbeCall {
  result: ProbeCallResult;
  /** The errno behind `no` or `unknown` (`EINVAL`, `ENOLCK`, …). */
  errno?: string;
}

/** What inotify sees: every change (a local filesystem), this host's only (network, FUSE), none, or no inotify. */
export interface ProbeInotify {
  result: "all_changes" | "this_host_only" | "no_events" | "unavailable";
  errno?: string;
}

/** Who else can write there: `local` (only this host), `network`, `fuse` (a FUSE daemon of unknown reach), `unknown`. */
export type FilesystemClass = "local" | "network" | "fuse" | "unknown";

/** A filesystem that could be probed. */
export interface FilesystemProbe {
  ok: true;
  /** The directory as given. */
  dir: string;
  /** `st_dev` of the directory (decimal): the key under which the core remembers what it found. */
  dev: string;
  /** `statfs` `f_type`, hexadecimal (`0xef53`). */
  statfsType: string;
  /** The name `statfs` alone gives (`ext2/ext3/ext4`, `tmpfs`, `fuse`, …). */
  statfsName: string;
  /** The type as mounted (`ext4`, `tmpfs`, `fuse.sshfs`, `nfs4`, …). */
  fsType: string;
  mountPoint?: string;
  mountSource?: string;
  class: FilesystemClass;
  renameNoreplace: ProbeCall;
  renameExchange: ProbeCall;
  flock: ProbeCall;
  inotify: ProbeInotify;
  /** What follows for a lock on this filesystem, each with a stable code (`wake_by_timer`, `host_id_required`, …). */
  notes: Array<{ code: string; text: string }>;
  /** The scratch directory, if it could not be removed again (remove it by hand). */
  leftover?: string;
}

/** Why a directory could not be probed. */
export type ProbeFailureCode =
  | "not_found"
  | "not_a_directory"
  | "not_writable"
  | "read_only"
  | "no_space"
  | "no_new_entries"
  | "io_error";

/** A directory that could not be probed: what, and what to do. */
export interface FilesystemProbeFailure {
  ok: false;
  dir: string;
  code: ProbeFailureCode;
  /** The errno the core met (`ENOENT`, `EACCES`, `EROFS`, …). */
  errno: string;
  message: string;
  nextStep: string;
}

const FAILURES: Record<ProbeFailureCode, { what: string; next: string }> = {
  not_found: {
    what: "does not exist",
    next: "create it (mkdir -p), or name the directory that holds your lock files",
  },
  not_a_directory: {
    what: "is not a directory (or a component of the path is not)",
    next: "name the directory that holds the lock files, not a file in it",
  },
  not_writable: {
    what: "cannot be written by this user (a probe, like a lock, creates an entry there)",
    next: "run as the user that takes the locks, or give it write permission on the directory",
  },
  read_only: {
    what: "is on a read-only filesystem: no lock can be made there",
    next: "put the lock files on a writable mount, or remount it read-write",
  },
  no_space: {
    what: "is on a filesystem with no space or inodes left",
    next: "free space or inodes on that filesystem (df -h, df -i), then run again",
  },
  no_new_entries: {
    what: "takes no new entries (a virtual filesystem such as /proc or /sys)",
    next: "put the lock files on a regular filesystem",
  },
  io_error: {
    what: "could not be probed: the filesystem failed",
    next: "check the mount (dmesg; for a network filesystem, its server) and run again",
  },
};

/**
 * Probes the filesystem under the absolute path `dir`: tries
 * `renameat2(RENAME_NOREPLACE)`, `renameat2(RENAME_EXCHANGE)`, `flock` and
 * inotify in a scratch directory `.exactlock-doctor.<pid>.<uuid>` made there
 * and removed again, and reads the `statfs` type and the mount. Never
 * rejects for the directory itself: a missing, non-directory, unwritable or
 * read-only `dir` resolves to `{ ok: false, code, errno, message, nextStep }`.
 */
export async function probeFilesystem(dir: string): Promise<FilesystemProbe | FilesystemProbeFailure> {
  const result = await native.probeFilesystem(validateFilePath(dir, "dir"));
  if (!result.ok) {
    const code = (result.code ?? "io_error") as ProbeFailureCode;
    const errno = result.errno ?? "EIO";
    const { what, next } = FAILURES[code] ?? FAILURES.io_error;
    return { ok: false, dir, code, errno, message: `${dir} ${what} (${errno})`, nextStep: next };
  }
  const probe: FilesystemProbe = {
    ok: true,
    dir,
    dev: result.dev!,
    statfsType: result.statfsType!,
    statfsName: result.statfsName!,
    fsType: result.fsType!,
    class: result.class as FilesystemClass,
    renameNoreplace: call(result.renameNoreplace!) as ProbeCall,
    renameExchange: call(result.renameExchange!) as ProbeCall,
    flock: call(result.flock!) as ProbeCall,
    inotify: call(result.inotify!) as ProbeInotify,
    notes: result.notes,
  };
  if (result.mountPoint != null) probe.mountPoint = result.mountPoint;
  if (result.mountSource != null) probe.mountSource = result.mountSource;
  if (result.leftover != null) probe.leftover = result.leftover;
  return probe;
}

function call(raw: Binding.NativeProbeCall): { result: string; errno?: string } {
  return raw.errno == null ? { result: raw.result } : { result: raw.result, errno: raw.errno };
}
