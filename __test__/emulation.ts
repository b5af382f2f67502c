/**
 * What running under an emulator changes, named in one place.
 *
 * Three shipped binaries run here only emulated (scripts/run-emulated.mjs): linux-arm64-gnu
 * under arm64 Node in qemu-user, linux-x64-musl under Bun's musl build, linux-arm64-musl
 * under Bun's arm64 musl build in qemu-user. Each artefact below is recognised by looking
 * at the artefact itself, never by being told "this is an emulator", so no assertion is
 * loosened on a real machine, where none of them can be true.
 *
 * 1. qemu-user answers /proc/self/stat (and /proc/<own pid>/stat) itself: state `0` where
 *    the kernel writes a letter, zeros in most fields. exactlock's parser rightly refuses
 *    that, so the process's *own* start time is unknown: it publishes `start_time:
 *    "unknown"` and no incarnation, `processStartTime(process.pid)` is null, and it judges
 *    itself "liveness unknown". Another process's stat is the kernel's, so judging other
 *    processes (every cross-process verdict) is untouched. Tests that read a record's own
 *    start time check the unknown form instead (`OWN_START_UNKNOWN`), and say what covers
 *    the known form: the same test natively on linux-x64-gnu and x64 musl.
 * 2. qemu-user starts an arm64 Node slowly (a child takes a second or more): tests that
 *    time a child against the parent allow for it through their existing patience, never
 *    through a smaller bound.
 * 3. qemu 7.2 has no openat2: the addon takes its O_NOFOLLOW walk, the one macOS and old
 *    kernels take, and no directory earns the inline fast path (it needs
 *    `openat2(RESOLVE_CACHED)`). Tests of that path ask `inlineFastPathPossible()`
 *    (exactlock/testing) and assert the off-thread form where it is false.
 * 4. This host's /usr/bin/ldd is glibc's, and napi's loader picks the C library from it:
 *    the musl runs see musl's loader there, in a private mount namespace
 *    (scripts/run-emulated.mjs), as on Alpine.
 * 5. npm installed rolldown's native binding (vitest's bundler) for this host only: the
 *    arm64 one is unpacked beside it for vitest under arm64 Node (scripts/run-emulated.mjs).
 */
import * as fs from "node:fs";

/** The state field of /proc/self/stat: a letter from the kernel; `0` from qemu-user. */
function ownStatState(): string | null {
  if (process.platform !== "linux") return null;
  try {
    const stat = fs.readFileSync("/proc/self/stat", "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[0] ?? null;
  } catch {
    return null;
  }
}

/**
 * Artefact 1: this process's /proc/self/stat is not the kernel's (qemu-user), so its own
 * start time is unknown to exactlock. Never true on a real Linux kernel.
 */
export const OWN_START_UNKNOWN: boolean = (() => {
  const state = ownStatState();
  return state !== null && !/^[A-Za-z]$/.test(state);
})();

/**
 * How a holder line names this process's own liveness: "(live)" on a real kernel;
 * "(liveness unknown)" under artefact 1, where it cannot prove its own incarnation (it is
 * still never displaced: the lock is kept all the same).
 */
export const OWN_LIVENESS = OWN_START_UNKNOWN ? "(liveness unknown)" : "(live)";

/** The `start_time` this process publishes, given the one `ps` shows: "unknown" under artefact 1. */
export function ownRecordStart(ps: string | null): string | null {
  return OWN_START_UNKNOWN ? "unknown" : ps;
}

/** What `processStartTime(process.pid)` answers, given the one `ps` shows: null under artefact 1. */
export function ownProcessStart(ps: string | null): string | null {
  return OWN_START_UNKNOWN ? null : ps;
}
