/**
 * The README's troubleshooting table, one test per error code: each code is
 * produced the way the README says, with the class and message it names.
 * `ENOPROC` needs a mount namespace without /proc (root): it is produced in
 * `proc-missing.test.ts`.
 */
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import * as path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  acquireLock,
  acquireLockSync,
  FileLockAcquireError,
  FileLockError,
  withFileLock,
} from "../lib/index.ts";
import { clearFaultsForTesting, injectDelayForTesting, injectFaultForTesting } from "../lib/testing.ts";
import { makeTempDir, removeDir } from "./cli-helpers.ts";

let dir: string;
beforeEach(() => {
  dir = makeTempDir("trouble");
});
afterEach(() => {
  clearFaultsForTesting();
  removeDir(dir);
});

describe("troubleshooting by error code", () => {
  it("ELOCKED: FileLockAcquireError naming the lock path and the live holder when the budget runs out", async () => {
    const file = path.join(dir, "state.json");
    const release = await acquireLock(file);
    const error = await acquireLock(file, { retries: 2, retryDelayMs: 50 }).catch((e: unknown) => e);
    await release();
    expect(error).toBeInstanceOf(FileLockAcquireError);
    expect(error).toMatchObject({ code: "ELOCKED", lockPath: `${file}.lock`, filePath: file });
    expect((error as FileLockAcquireError).holder).toContain(`pid ${process.pid} (live)`);
    expect((error as Error).message).toContain("a live owner is never displaced");
  });

  it("ELOCKED after one attempt says so in the singular, and names the path", async () => {
    const file = path.join(dir, "state.json");
    const release = await acquireLock(file);
    const error = (await acquireLock(file, { retries: 0 }).catch((e: unknown) => e)) as FileLockAcquireError;
    await release();
    expect(error).toBeInstanceOf(FileLockError);
    expect(error.message).toContain(`Failed to acquire lock for ${file} after 1 attempt: `);
    expect(error.message).toContain(`(${file}.lock)`);
  });

  it("ETIMEDOUT: the budget ran out before a stuck attempt came back (injected stall), naming the lock path", async () => {
    const file = path.join(dir, "stuck.json");
    injectDelayForTesting("attempt", 800, "stuck.json", 1);
    const error = await acquireLock(file, { inlineFastPath: false, retries: 1, retryDelayMs: 50 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(FileLockError);
    expect(error).toMatchObject({ code: "ETIMEDOUT", lockPath: `${file}.lock` });
    expect((error as Error).message).toContain("the filesystem did not answer");
    // The stuck attempt comes back, wins the free lock for nobody and gives it back.
    await new Promise((resolve) => setTimeout(resolve, 1_200));
    expect(existsSync(`${file}.lock`)).toBe(false);
  });

  it("EDEADLK: a nested acquisition of a lock the call chain holds, naming the lock path", async () => {
    const file = path.join(dir, "state.json");
    const error = await withFileLock(file, () => withFileLock(file, async () => 0).catch((e: unknown) => e));
    expect(error).toBeInstanceOf(FileLockError);
    expect(error).toMatchObject({ code: "EDEADLK", lockPath: `${file}.lock` });
    expect((error as Error).message).toContain("acquire it outside the function");
  });

  it("ERELEASED: releasing twice", async () => {
    const release = await acquireLock(path.join(dir, "state.json"));
    await release();
    const error = await release().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(FileLockError);
    expect(error).toMatchObject({ code: "ERELEASED", lockPath: path.join(dir, "state.json.lock") });
    expect((error as Error).message).toBe(
      `Failed to release file lock: already released. This release function already released ${path.join(dir, "state.json.lock")} ` +
        "(or its Worker's teardown gave it back); call it once \u2014 withFileLock and await using release for you.",
    );
  });

  it("EMISSING: the lock dir was removed by someone else before the release", async () => {
    const file = path.join(dir, "state.json");
    const release = await acquireLock(file);
    rmSync(`${file}.lock`, { recursive: true });
    const error = (await release().catch((e: unknown) => e)) as FileLockError;
    expect(error).toMatchObject({ code: "EMISSING", lockPath: `${file}.lock` });
    expect(error.message).toMatch(/^Failed to release file lock: missing\. /);
    expect(error.message).toContain(`${file}.lock was removed by someone else while this process held it`);
    expect(error.message).toContain("find what removes it");
  });

  it("EOWNERCHANGED: another owner's record stands at the lock path at release; it is left alone", async () => {
    const file = path.join(dir, "state.json");
    const release = await acquireLock(file);
    rmSync(`${file}.lock`, { recursive: true });
    mkdirSync(`${file}.lock`);
    writeFileSync(path.join(`${file}.lock`, "info"), JSON.stringify({ pid: process.pid, timestamp: 1 }));
    const error = (await release().catch((e: unknown) => e)) as FileLockError;
    expect(error).toMatchObject({ code: "EOWNERCHANGED", lockPath: `${file}.lock` });
    expect(error.message).toMatch(/^Failed to release file lock: owner_changed\. /);
    expect(error.message).toContain(`${file}.lock now holds another owner's record`);
    expect(JSON.parse(readFileSync(path.join(`${file}.lock`, "info"), "utf8"))).toEqual({
      pid: process.pid,
      timestamp: 1,
    });
  });

  it("ENOTDIR: a component of the lock's parent path is a file", async () => {
    writeFileSync(path.join(dir, "file"), "");
    await expect(acquireLock(path.join(dir, "file", "state.json"))).rejects.toMatchObject({
      name: "FileLockError",
      code: "ENOTDIR",
    });
  });

  it("ENAMETOOLONG: the lock's name is longer than the filesystem allows", async () => {
    await expect(acquireLock(path.join(dir, "x".repeat(300)))).rejects.toMatchObject({
      name: "FileLockError",
      code: "ENAMETOOLONG",
    });
  });

  it("EACCES: the lock record cannot be written (injected: this suite may run as root)", async () => {
    injectFaultForTesting("publish.stage", "EACCES");
    const error = await acquireLock(path.join(dir, "state.json")).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(FileLockError);
    expect(error).toMatchObject({ code: "EACCES", lockPath: path.join(dir, "state.json.lock") });
  });

  it("ERR_INVALID_ARG_VALUE: TypeError for a relative path, a negative option or a long ownerHostId, before touching the disk", async () => {
    await expect(acquireLock("state.json")).rejects.toMatchObject({ name: "TypeError", code: "ERR_INVALID_ARG_VALUE" });
    const file = path.join(dir, "sub", "state.json");
    await expect(acquireLock(file, { retries: -1 })).rejects.toMatchObject({
      name: "TypeError",
      code: "ERR_INVALID_ARG_VALUE",
    });
    await expect(acquireLock(file, { ownerHostId: "h".repeat(257) })).rejects.toMatchObject({
      name: "TypeError",
      code: "ERR_INVALID_ARG_VALUE",
    });
    expect(existsSync(path.join(dir, "sub"))).toBe(false);
  });

  it("ERR_INVALID_ARG_TYPE: TypeError for a path that is not a string or a non-function fn, before touching the disk", async () => {
    await expect(acquireLock(42 as never)).rejects.toMatchObject({ name: "TypeError", code: "ERR_INVALID_ARG_TYPE" });
    const file = path.join(dir, "sub", "state.json");
    await expect(withFileLock(file, "nope" as never)).rejects.toMatchObject({
      name: "TypeError",
      code: "ERR_INVALID_ARG_TYPE",
      message: 'fn must be a function; received type string ("nope")',
    });
    expect(existsSync(path.join(dir, "sub"))).toBe(false);
  });

  it("abort: rejects with the signal's reason (AbortError, a fired TimeoutError), already aborted or while waiting; AbortSignal.timeout() while waiting is ELOCKED", async () => {
    const file = path.join(dir, "state.json");
    const aborted = new AbortController();
    aborted.abort();
    await expect(acquireLock(file, { signal: aborted.signal })).rejects.toMatchObject({ name: "AbortError" });
    const fired = AbortSignal.timeout(1);
    await new Promise((resolve) => setTimeout(resolve, 20));
    await expect(acquireLock(file, { signal: fired })).rejects.toMatchObject({ name: "TimeoutError" });
    const release = await acquireLock(file);
    await expect(acquireLock(file, { signal: AbortSignal.timeout(100) })).rejects.toMatchObject({
      name: "FileLockAcquireError",
      code: "ELOCKED",
      cause: { name: "TimeoutError" },
    });
    const custom = new AbortController();
    const reason = new Error("shutting down");
    setTimeout(() => custom.abort(reason), 50);
    await expect(acquireLock(file, { signal: custom.signal })).rejects.toBe(reason);
    await release();
  });

  it("AggregateError: withFileLock's fn and the release both failed", async () => {
    const file = path.join(dir, "state.json");
    const error = await withFileLock(file, async () => {
      rmSync(`${file}.lock`, { recursive: true });
      throw new Error("body failed");
    }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(AggregateError);
    expect((error as AggregateError).message).toBe("File lock operation and release both failed.");
    const [body, releaseError] = (error as AggregateError).errors as Error[];
    expect(body!.message).toBe("body failed");
    expect(releaseError!.message).toMatch(/^Failed to release file lock: missing\. .*state\.json\.lock was removed/);
  });

  it("every error a user can meet says what, where (the lock's path) and what to do", async () => {
    const file = path.join(dir, "state.json");
    const lockPath = `${file}.lock`;
    const errors: [string, unknown][] = [];
    const failure = async (what: string, run: () => unknown) => {
      try {
        await run();
      } catch (error) {
        errors.push([what, error]);
        return;
      }
      throw new Error(`${what} did not fail`);
    };
    const held = await acquireLock(file);
    await failure("ELOCKED", () => acquireLock(file, { retries: 0 }));
    await failure("EDEADLK (sync, own process)", () => acquireLockSync(file));
    await held();
    await failure("ERELEASED", () => held());
    await failure("EDEADLK (nested)", () => withFileLock(file, () => withFileLock(file, () => 0)));
    const missing = await acquireLock(file);
    rmSync(lockPath, { recursive: true });
    await failure("EMISSING", () => missing());
    const replaced = await acquireLock(file);
    writeFileSync(path.join(lockPath, "info"), JSON.stringify({ pid: 1, timestamp: 1 }));
    await failure("EOWNERCHANGED", () => replaced());
    rmSync(lockPath, { recursive: true });
    const fenced = await acquireLock(file);
    injectFaultForTesting("release.remove", "EBUSY", 5);
    await failure("EBUSY (fenced)", () => fenced());
    clearFaultsForTesting();
    await (await acquireLock(file))();
    injectFaultForTesting("publish.stage", "EACCES");
    await failure("EACCES", () => acquireLock(file));
    clearFaultsForTesting();
    writeFileSync(path.join(dir, "plain"), "");
    await failure("ENOTDIR", () => acquireLock(path.join(dir, "plain", "state.json")));
    injectDelayForTesting("attempt", 600, "slow.json", 1);
    await failure("ETIMEDOUT", () =>
      acquireLock(path.join(dir, "slow.json"), { inlineFastPath: false, retries: 1, retryDelayMs: 50 }),
    );
    await new Promise((resolve) => setTimeout(resolve, 800));

    const nextStep = /\b(wait|stop|release|use|acquire|find|check|call|await|fix|free|shorten|lock a file|remove|pass)\b/i;
    for (const [what, error] of errors) {
      expect(error, what).toBeInstanceOf(FileLockError);
      const { message, lockPath: named } = error as FileLockError;
      expect(named, what).toMatch(/\.lock$/);
      expect(message, what).toContain(named!);
      const afterWhere = message.slice(message.indexOf(named!) + named!.length);
      expect(`${what}: ${message}`).toMatch(nextStep);
      expect(afterWhere.length, `${what}: ${message}`).toBeGreaterThan(10);
    }
    expect(errors.map(([, error]) => (error as FileLockError).code)).toEqual([
      "ELOCKED",
      "EDEADLK",
      "ERELEASED",
      "EDEADLK",
      "EMISSING",
      "EOWNERCHANGED",
      "EBUSY",
      "EACCES",
      "ENOTDIR",
      "ETIMEDOUT",
    ]);
  });
});
