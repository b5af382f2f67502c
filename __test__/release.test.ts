/**
 * Release scenarios of the original (research/upstream.md §5.2, §5.4),
 * ported to exactlock: the release function, withFileLock's error
 * combination, double release, owner_changed / missing, transient retries
 * and the fence a failed release leaves (via `injectFaultForTesting`).
 *
 * Not applicable here (no test is written for them):
 * - #37, #38, #39, #40, #52, #82 (exact-removal probe, detach-only
 *   quarantine, filter-host fallback, `quarantine_collision` budget of
 *   20×25 ms): v0.17 only / Windows minifilters.
 * - #54, #59 (verified detach whose follow-up cleanup fails or is not
 *   durable): they fake the native receipt (`detached_failure`,
 *   `cleanup_pending`) or a failing `fs.rm` of the detached path; exactlock
 *   deletes the detached tree inside the same native call and has no fault
 *   step between detach and delete.
 * - #61, #62, #65: see acquire.test.ts (no canonicalization step to fail).
 *
 * Where exactlock deliberately differs: there is no quarantine fallback
 * (#53) — a transient error that outlasts FILE_LOCK_RELEASE_RETRY_ATTEMPTS
 * rejects with its code and keeps the generation fenced; #67's EACCES is
 * retried like every transient code.
 */
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import {
  acquireLock,
  FILE_LOCK_RELEASE_RETRY_ATTEMPTS,
  FILE_LOCK_RELEASE_RETRY_DELAY_MS,
  FileLockAcquireError,
  FileLockError,
  withFileLock,
} from "../lib/index.ts";
import { clearFaultsForTesting, injectDelayForTesting, injectFaultForTesting } from "../lib/testing.ts";
import {
  canonicalRecord,
  cleanup,
  exists,
  infoPathOf,
  inode,
  liveForeignPid,
  lockPathOf,
  makeRoot,
  patient,
  quick,
  recordJson,
  rejectionOf,
  startFixture,
} from "./helpers.ts";

afterEach(cleanup);

const readInfo = (file: string) => fs.readFileSync(infoPathOf(file), "utf8");

function expectReleaseError(error: unknown, code: string, message?: string): void {
  expect(error).toBeInstanceOf(FileLockError);
  expect((error as FileLockError).name).toBe("FileLockError");
  expect((error as FileLockError).code).toBe(code);
  if (message !== undefined) expect((error as FileLockError).message.startsWith(`${message} `), (error as Error).message).toBe(true);
  // Where, and what to do: the lock's path is named.
  const lockPath = (error as FileLockError).lockPath;
  expect(lockPath).toMatch(/\.lock$/);
  expect((error as FileLockError).message).toContain(lockPath!);
}

describe("release", () => {
  it("removes exactly the lock directory and nothing else", async () => {
    const root = makeRoot();
    const file = path.join(root, "state.json");
    fs.writeFileSync(file, "payload");
    const release = await acquireLock(file);
    expect(exists(lockPathOf(file))).toBe(true);
    await expect(release()).resolves.toBeUndefined();
    expect(fs.readdirSync(root)).toEqual(["state.json"]);
  });

  it("exports the release retry constants of 0.15.6", () => {
    expect(FILE_LOCK_RELEASE_RETRY_ATTEMPTS).toBe(5);
    expect(FILE_LOCK_RELEASE_RETRY_DELAY_MS).toBe(10);
  });

  it("rejects a second release with ERELEASED and leaves a successor alone", async () => {
    const file = path.join(makeRoot(), "state.json");
    const release = await acquireLock(file);
    await release();
    const successor = await acquireLock(file);
    const successorBytes = readInfo(file);
    const error = await rejectionOf(release());
    expectReleaseError(error, "ERELEASED");
    expect(error.message).toContain("Failed to release file lock: already released. This release function already released");
    expect(readInfo(file)).toBe(successorBytes);
    await successor();
  });

  it("two concurrent calls of one release share one removal; a third rejects", async () => {
    const file = path.join(makeRoot(), "state.json");
    const release = await acquireLock(file);
    const results = await Promise.allSettled([release(), release()]);
    expect(results.map((r) => r.status)).toEqual(["fulfilled", "fulfilled"]);
    expect(exists(lockPathOf(file))).toBe(false);
    expectReleaseError(await rejectionOf(release()), "ERELEASED");
  });

  it("Symbol.asyncDispose releases, and after a release call that is done (early, inside `await using`) adds nothing: no ERELEASED at the block's end", async () => {
    const file = path.join(makeRoot(), "state.json");
    const release = await acquireLock(file);
    await release[Symbol.asyncDispose]();
    expect(exists(lockPathOf(file))).toBe(false);
    await release[Symbol.asyncDispose]();
    expectReleaseError(await rejectionOf(release()), "ERELEASED");
    // Released early: the disposal waits for that release and adds nothing.
    const early = await acquireLock(file);
    const releasing = early();
    await early[Symbol.asyncDispose]();
    expect(exists(lockPathOf(file))).toBe(false);
    await releasing;
    // A release that failed for good told its caller; the disposal stays quiet.
    const lost = await acquireLock(file);
    fs.rmSync(lockPathOf(file), { recursive: true });
    expectReleaseError(await rejectionOf(lost()), "EMISSING");
    await lost[Symbol.asyncDispose]();
  });

  it("a disposal after a release that failed transiently (the lock fenced) releases again, as a second call would", async () => {
    const file = path.join(makeRoot(), "state.json");
    const release = await acquireLock(file);
    injectFaultForTesting("release.remove", "EBUSY");
    try {
      expectReleaseError(await rejectionOf(release()), "EBUSY");
      expect(exists(lockPathOf(file))).toBe(true);
      // Still failing: the disposal says so (the block's end throws), the lock stays fenced.
      expectReleaseError(await rejectionOf(Promise.resolve(release[Symbol.asyncDispose]())), "EBUSY");
    } finally {
      clearFaultsForTesting();
    }
    await release[Symbol.asyncDispose]();
    expect(exists(lockPathOf(file))).toBe(false);
    await release[Symbol.asyncDispose]();
  });

  it("a release that fails unawaited and uncaught is still an unhandled rejection (the process hears EMISSING)", () => {
    const file = path.join(makeRoot(), "state.json");
    const script = [
      `import { acquireLock } from ${JSON.stringify(path.resolve("dist/index.js"))};`,
      'import * as fs from "node:fs";',
      "const file = process.argv[1];",
      "const release = await acquireLock(file);",
      'fs.rmSync(`${file}.lock`, { recursive: true });',
      "release();",
    ].join("\n");
    const run = spawnSync(process.execPath, ["--input-type=module", "-e", script, file], { encoding: "utf8" });
    expect(run.status).not.toBe(0);
    expect(run.stderr).toContain("EMISSING");
  });

  it("its signal is read from the release itself: through a proxy or a bound copy it throws ERR_INVALID_THIS, and what releases share cannot be changed", async () => {
    const root = makeRoot();
    const [first, second] = [await acquireLock(path.join(root, "a.json")), await acquireLock(path.join(root, "b.json"))];
    expect(first.signal.aborted).toBe(false);
    const invalidThis = expect.objectContaining({ name: "TypeError", code: "ERR_INVALID_THIS" });
    expect(() => new Proxy(first, {}).signal).toThrow(invalidThis);
    expect(() => (first.bind(null) as typeof first).signal).toThrow(invalidThis);
    expect(() => (first.bind(null) as typeof first)[Symbol.asyncDispose]).toThrow(invalidThis);
    expect(() => {
      (Object.getPrototypeOf(first) as Record<string, unknown>).shared = 1;
    }).toThrow(TypeError);
    expect((second as unknown as Record<string, unknown>).shared).toBeUndefined();
    await first();
    await second();
  });

  it("a symlink swapped onto the lock name right before the release frees it stays at that name (EOWNERCHANGED); nothing is left under a quarantine name", async () => {
    // Natively the exclusive rename moves it and moves it back; where that
    // rename is refused (npm run test:portable, sshfs, NFS) the detach must
    // move nothing but a directory, since its move back (a mkdir claim)
    // could not put a symlink back.
    const root = makeRoot();
    const file = path.join(root, "state.json");
    const lock = lockPathOf(file);
    const release = await acquireLock(file, { inlineFastPath: false });
    try {
      // The release (off this thread) stalls between its look at the name and the detach.
      injectDelayForTesting("release.detach", 2_000, "state.json.lock", 1);
      const releasing = rejectionOf(release());
      await new Promise((resolve) => setTimeout(resolve, 300));
      fs.renameSync(lock, path.join(root, "ours-moved-away"));
      fs.symlinkSync("ours-moved-away", lock);
      expectReleaseError(await releasing, "EOWNERCHANGED");
      expect(fs.lstatSync(lock).isSymbolicLink()).toBe(true);
      expect(fs.readdirSync(root).sort()).toEqual(["ours-moved-away", "state.json.lock"]);
    } finally {
      clearFaultsForTesting();
    }
  });

  it("#32 rejects after successful protected work when the record was overwritten (owner_changed), keeping it", async () => {
    const file = path.join(makeRoot(), "state.json");
    const live = recordJson(canonicalRecord(liveForeignPid(), { timestamp: 2000 }));
    let worked = false;
    const error = await rejectionOf(
      withFileLock(file, async () => {
        fs.writeFileSync(infoPathOf(file), live);
        worked = true;
      }),
    );
    expect(worked).toBe(true);
    expectReleaseError(error, "EOWNERCHANGED", "Failed to release file lock: owner_changed.");
    expect(readInfo(file)).toBe(live);
  });

  it("#81 (release) never removes a byte-identical clone of its own lock with new inode numbers: owner_changed", async () => {
    const file = path.join(makeRoot(), "state.json");
    const lockPath = lockPathOf(file);
    let cloneInode = 0n;
    const error = await rejectionOf(
      withFileLock(file, async () => {
        const original = inode(lockPath);
        const staged = `${lockPath}.clone`;
        fs.mkdirSync(staged, { mode: 0o700 });
        fs.writeFileSync(path.join(staged, "info"), readInfo(file), { mode: 0o600 });
        fs.rmSync(lockPath, { recursive: true });
        fs.renameSync(staged, lockPath);
        cloneInode = inode(lockPath);
        expect(cloneInode).not.toBe(original);
      }),
    );
    expectReleaseError(error, "EOWNERCHANGED");
    expect(inode(lockPath)).toBe(cloneInode);
  });

  it("#81 (release) never removes a byte-identical clone that recycled its lock's inode numbers (SPEC §1.4)", async () => {
    // On ext4 (the test machine) a directory and file removed and re-created
    // at once get the same inode numbers back; only mtime/ctime tell the
    // clone from the published lock.
    const file = path.join(makeRoot(), "state.json");
    const lockPath = lockPathOf(file);
    let cloneCtime = 0n;
    const error = await rejectionOf(
      withFileLock(file, async () => {
        const bytes = readInfo(file);
        await new Promise((resolve) => setTimeout(resolve, 5));
        fs.rmSync(lockPath, { recursive: true });
        fs.mkdirSync(lockPath, { mode: 0o700 });
        fs.writeFileSync(path.join(lockPath, "info"), bytes, { mode: 0o600 });
        cloneCtime = fs.statSync(infoPathOf(file), { bigint: true }).ctimeNs;
      }),
    );
    expectReleaseError(error, "EOWNERCHANGED");
    expect(fs.statSync(infoPathOf(file), { bigint: true }).ctimeNs).toBe(cloneCtime);
  });

  it("#33 rejects after successful protected work when the lock disappeared (missing)", async () => {
    const file = path.join(makeRoot(), "state.json");
    const error = await rejectionOf(
      withFileLock(file, async () => {
        fs.rmSync(lockPathOf(file), { recursive: true });
      }),
    );
    expectReleaseError(error, "EMISSING", "Failed to release file lock: missing.");
    expect(exists(lockPathOf(file))).toBe(false);
  });

  it("owner_changed when another process took the lock after ours vanished; its lock is kept", async () => {
    const file = path.join(makeRoot(), "state.json");
    const release = await acquireLock(file);
    fs.rmSync(lockPathOf(file), { recursive: true });
    const other = startFixture("hold.mjs", [file]);
    const held = await other.nextLine();
    expect(held).toMatch(/^held \d+$/);
    const theirs = readInfo(file);
    expectReleaseError(await rejectionOf(release()), "EOWNERCHANGED");
    expect(readInfo(file)).toBe(theirs);
    other.send("release");
    expect(await other.nextLine()).toBe("released");
  });
});

describe("withFileLock", () => {
  it("resolves with fn's value and releases", async () => {
    const file = path.join(makeRoot(), "state.json");
    expect(await withFileLock(file, async () => 42)).toBe(42);
    expect(exists(lockPathOf(file))).toBe(false);
  });

  it("rethrows fn's error after a successful release", async () => {
    const file = path.join(makeRoot(), "state.json");
    const thrown = new Error("work failed");
    expect(
      await rejectionOf(
        withFileLock(file, async () => {
          throw thrown;
        }),
      ),
    ).toBe(thrown);
    expect(exists(lockPathOf(file))).toBe(false);
  });

  it("#66 preserves both the operation error and the ownership-loss release error", async () => {
    const file = path.join(makeRoot(), "state.json");
    const replacement = recordJson(canonicalRecord(liveForeignPid()));
    const operationError = new Error("operation failed");
    const error = await rejectionOf(
      withFileLock(file, async () => {
        fs.writeFileSync(infoPathOf(file), replacement);
        throw operationError;
      }),
    );
    expect(error).toBeInstanceOf(AggregateError);
    expect(error.message).toBe("File lock operation and release both failed.");
    expect(error.errors).toHaveLength(2);
    expect(error.errors[0]).toBe(operationError);
    expectReleaseError(error.errors[1], "EOWNERCHANGED", "Failed to release file lock: owner_changed.");
    expect(readInfo(file)).toBe(replacement);
  });

  it("#67 exactlock: rejects with the release error when release fails after successful work, and keeps the lock fenced", async () => {
    const file = path.join(makeRoot(), "state.json");
    let worked = false;
    const error = await rejectionOf(
      withFileLock(file, async () => {
        injectFaultForTesting("release.remove", "EIO");
        worked = true;
      }),
    );
    expect(worked).toBe(true);
    expectReleaseError(error, "EIO");
    expect(JSON.parse(readInfo(file)).pid).toBe(process.pid);
    clearFaultsForTesting();
    await withFileLock(file, async () => {}, quick);
    expect(exists(lockPathOf(file))).toBe(false);
  });
});

describe("transient release failures and the fence", () => {
  it("#41 retries a transient denial (EPERM once) and then removes the lock", async () => {
    const file = path.join(makeRoot(), "state.json");
    const release = await acquireLock(file);
    injectFaultForTesting("release.remove", "EPERM", 1);
    await release();
    expect(exists(lockPathOf(file))).toBe(false);
  });

  it("retries a transient error FILE_LOCK_RELEASE_RETRY_ATTEMPTS times in all", async () => {
    const root = makeRoot();
    const succeeds = path.join(root, "a.json");
    const releaseA = await acquireLock(succeeds);
    injectFaultForTesting("release.remove", "EBUSY", FILE_LOCK_RELEASE_RETRY_ATTEMPTS - 1);
    await releaseA();
    expect(exists(lockPathOf(succeeds))).toBe(false);

    const fails = path.join(root, "b.json");
    const releaseB = await acquireLock(fails);
    injectFaultForTesting("release.remove", "EBUSY", FILE_LOCK_RELEASE_RETRY_ATTEMPTS);
    expectReleaseError(await rejectionOf(releaseB()), "EBUSY");
    expect(exists(lockPathOf(fails))).toBe(true);
    // The fault is used up: calling the release again finishes it.
    await releaseB();
    expect(exists(lockPathOf(fails))).toBe(false);
  });

  it("#36 treats a persistent transient snapshot failure as release contention and keeps the lock", async () => {
    const file = path.join(makeRoot(), "state.json");
    injectFaultForTesting("release.snapshot", "EBUSY");
    const error = await rejectionOf(withFileLock(file, async () => "done"));
    expectReleaseError(error, "EBUSY");
    expect(error.message).toContain("EBUSY");
    expect(JSON.parse(readInfo(file)).pid).toBe(process.pid);
  });

  it("#53 exactlock: a persistent transient denial rejects with its code (no quarantine fallback) and keeps the lock", async () => {
    const file = path.join(makeRoot(), "state.json");
    const release = await acquireLock(file);
    const bytes = readInfo(file);
    injectFaultForTesting("release.remove", "EBUSY");
    expectReleaseError(await rejectionOf(release()), "EBUSY");
    expect(readInfo(file)).toBe(bytes);
  });

  it("#55 a fenced generation is never stolen, and the next same-process acquisition finishes it first", async () => {
    const file = path.join(makeRoot(), "state.json");
    const release = await acquireLock(file);
    const fenced = readInfo(file);
    injectFaultForTesting("release.remove", "EPERM");
    expectReleaseError(await rejectionOf(release()), "EPERM");
    // While removal keeps failing, another acquisition in this process
    // retries the pending release, fails, and does not steal the lock.
    const error = await rejectionOf(acquireLock(file, quick));
    expect(error).toBeInstanceOf(FileLockAcquireError);
    expect(readInfo(file)).toBe(fenced);
    // Nor does another process (the owner pid is alive).
    const other = startFixture("hold.mjs", [file, JSON.stringify(quick)]);
    expect(await other.nextLine()).toMatch(/^error ELOCKED /);
    expect(readInfo(file)).toBe(fenced);
    clearFaultsForTesting();
    const next = await withFileLock(file, async () => readInfo(file), quick);
    expect(JSON.parse(next).owner_token).not.toBe(JSON.parse(fenced).owner_token);
    expect(exists(lockPathOf(file))).toBe(false);
    // The failed generation is finished: releasing it again is an error.
    expectReleaseError(await rejectionOf(release()), "ERELEASED");
  });

  it("#56 preserves a successor generation that acquires while the old release is still retrying", async () => {
    const file = path.join(makeRoot(), "state.json");
    const release = await acquireLock(file);
    const old = JSON.parse(readInfo(file)).owner_token;
    injectFaultForTesting("release.remove", "EBUSY", 2);
    const releasing = release();
    const successor = acquireLock(file, patient);
    await releasing;
    const releaseSuccessor = await successor;
    const current = JSON.parse(readInfo(file)).owner_token;
    expect(current).not.toBe(old);
    await releaseSuccessor();
    expect(exists(lockPathOf(file))).toBe(false);
  });

  it("#57 reclaims a pending generation through a symlinked parent alias", async () => {
    const root = makeRoot();
    fs.mkdirSync(path.join(root, "real"));
    fs.symlinkSync(path.join(root, "real"), path.join(root, "alias"));
    const realFile = path.join(root, "real", "state.json");
    const release = await acquireLock(realFile);
    const leaked = JSON.parse(readInfo(realFile)).owner_token;
    injectFaultForTesting("release.snapshot", "EBUSY");
    expectReleaseError(await rejectionOf(release()), "EBUSY");
    clearFaultsForTesting();
    const seen = await withFileLock(path.join(root, "alias", "state.json"), async () => readInfo(realFile), quick);
    expect(JSON.parse(seen).owner_token).not.toBe(leaked);
    expect(fs.readdirSync(path.join(root, "real"))).toEqual([]);
  });

  it("#60 releases through the descriptor taken at acquisition even after the parent path was renamed", async () => {
    const root = makeRoot();
    const file = path.join(root, "a", "state.json");
    const release = await acquireLock(file);
    fs.renameSync(path.join(root, "a"), path.join(root, "b"));
    await release();
    expect(fs.readdirSync(path.join(root, "b"))).toEqual([]);
  });
});
