// An ESM consumer of exactlock's types, compiled by __test__/types.test.ts
// under strict, exactOptionalPropertyTypes and module nodenext. Each line
// pins a type: a wrong one fails the compile (@ts-expect-error lines fail
// it when they stop being errors).
import {
  acquireLock,
  acquireLockSync,
  type LockReleaseSync,
  withFileLockSync,
  type ContendedHolder,
  type ErrnoCode,
  FileLockAcquireError,
  FileLockError,
  type FileLockErrorCode,
  type FileLockOptions,
  type HolderInfo,
  inspectLock,
  isLocked,
  type LockInspection,
  type LockLiveness,
  type LockReason,
  type LockRelease,
  type LockState,
  withFileLock,
} from "exactlock";
import { injectFaultForTesting } from "exactlock/testing";

type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
function assertType<T extends true>(): T | undefined {
  return undefined;
}

// withFileLock takes a sync or an async fn and resolves to its value.
const fromSync = withFileLock("/tmp/f", () => 42);
const fromAsync = withFileLock("/tmp/f", async () => "s");
assertType<Equal<typeof fromSync, Promise<number>>>();
assertType<Equal<typeof fromAsync, Promise<string>>>();

// The release function is callable and async-disposable.
async function held(): Promise<void> {
  const release: LockRelease = await acquireLock("/tmp/f", { retries: Number.POSITIVE_INFINITY });
  await release();
  await using again = await acquireLock("/tmp/f");
  void again;
}
void held;

// One error hierarchy, with typed codes.
function onError(error: unknown): FileLockErrorCode | undefined {
  if (error instanceof FileLockAcquireError) {
    assertType<Equal<typeof error.code, "ELOCKED">>();
    const base: FileLockError = error;
    const info: HolderInfo | undefined = error.holderInfo;
    const state: LockState | undefined = info?.state;
    const liveness: LockLiveness | undefined = info?.liveness;
    const reason: LockReason | undefined = info?.reason;
    void [base, state, liveness, reason];
  }
  if (error instanceof FileLockError) return error.code;
  return undefined;
}
void onError;
const own: FileLockErrorCode = "EDEADLK";
const errno: ErrnoCode = "EACCES";
// @ts-expect-error -- a code is an E-name, not any string
const notACode: FileLockErrorCode = "locked";
void [own, errno, notACode];

// Options: exact optional properties, typed callbacks; unknown keys are errors.
const options: FileLockOptions = {
  retries: 3,
  retryDelayMs: 100,
  onContended: (holder: ContendedHolder) => {
    const pid: number | undefined = holder.pid;
    const words: string = holder.description;
    void [pid, words];
  },
};
// @ts-expect-error -- proper-lockfile's name is not an option here
const stale: FileLockOptions = { stale: 10_000 };
void [options, stale];

// The synchronous API: a plain value, a disposable release.
const synced: number = withFileLockSync("/tmp/f", () => 7);
const releaseSync: LockReleaseSync = acquireLockSync("/tmp/f", { retries: 0 });
releaseSync[Symbol.dispose]();
void synced;

const inspection: Promise<LockInspection> = inspectLock("/tmp/f");
const locked: Promise<boolean> = isLocked("/tmp/f");
void [inspection, locked];
injectFaultForTesting("observe", "EIO", 1);
