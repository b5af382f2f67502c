/**
 * A representative subset of the lock scenarios under Bun (the full port is
 * in __test__/*.test.ts, run by vitest under Node). Scenario numbers refer
 * to research/upstream.md §5.
 */
import { afterEach, describe, expect, it } from "bun:test";
import { spawn } from "node:child_process";
import { once } from "node:events";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import {
  acquireLock,
  FileLockAcquireError,
  FileLockError,
  genericFileLockDirStaleVerdict,
  processStartTime,
  readFileLockObservationForGc,
  removeFileLockDirForGc,
  withFileLock,
} from "../lib/index.ts";
import { injectDelayForTesting, inlineFastPathPossible } from "../lib/testing.ts";
import { OWN_LIVENESS, ownProcessStart } from "../__test__/emulation.ts";

const roots: string[] = [];
afterEach(() => {
  for (const root of roots.splice(0)) fs.rmSync(root, { recursive: true, force: true });
});

function tempFile(name = "state.json"): string {
  const root = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "exactlock-lock-bun-")));
  roots.push(root);
  return path.join(root, name);
}

/** A pid that ran and exited: made, not assumed. */
async function deadPid(): Promise<number> {
  const child = spawn(process.execPath, ["-e", ""], { stdio: "ignore" });
  const pid = child.pid!;
  await once(child, "exit");
  return pid;
}

function writeLock(file: string, content: string): string {
  const lockDir = `${file}.lock`;
  fs.mkdirSync(lockDir, { mode: 0o700 });
  fs.writeFileSync(path.join(lockDir, "info"), content, { mode: 0o600 });
  return lockDir;
}

async function rejectionOf(promise: Promise<unknown>): Promise<any> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error("expected a rejection");
}

const quick = { retries: 3, retryDelayMs: 5 };

describe("exactlock under bun", () => {
  it("#13 acquires with a canonical record and releases", async () => {
    const file = tempFile();
    const release = await acquireLock(file);
    const record = JSON.parse(fs.readFileSync(`${file}.lock/info`, "utf8"));
    expect(record.pid).toBe(process.pid);
    expect(record.start_time_format).toBe("utc-v1");
    expect(typeof record.owner_token).toBe("string");
    await release();
    expect(fs.existsSync(`${file}.lock`)).toBe(false);
  });

  it("withFileLock resolves with fn's value and releases", async () => {
    const file = tempFile();
    expect(await withFileLock(file, async () => fs.existsSync(`${file}.lock/info`))).toBe(true);
    expect(fs.existsSync(`${file}.lock`)).toBe(false);
  });

  it("#15 reclaims a stale lock owned by a dead process", async () => {
    const file = tempFile();
    writeLock(file, JSON.stringify({ pid: await deadPid(), timestamp: Date.now() - 10_000 }));
    const pid = await withFileLock(file, async () => JSON.parse(fs.readFileSync(`${file}.lock/info`, "utf8")).pid, quick);
    expect(pid).toBe(process.pid);
  });

  it("#1 does not displace a live holder: FileLockAcquireError", async () => {
    const file = tempFile();
    const release = await acquireLock(file);
    const error = await rejectionOf(acquireLock(file, quick));
    expect(error).toBeInstanceOf(FileLockAcquireError);
    expect(error.code).toBe("ELOCKED");
    expect(error.lockPath).toBe(`${file}.lock`);
    expect(error.holder).toContain(`pid ${process.pid} ${OWN_LIVENESS}`);
    expect(fs.existsSync(`${file}.lock/info`)).toBe(true);
    await release();
  });

  it("#21 keeps a malformed record", async () => {
    const file = tempFile();
    writeLock(file, "not-json");
    const error = await rejectionOf(acquireLock(file, { ...quick, staleMs: 1 }));
    expect(error).toBeInstanceOf(FileLockAcquireError);
    expect(fs.readFileSync(`${file}.lock/info`, "utf8")).toBe("not-json");
  });

  it("rejects with signal.reason when aborted while waiting", async () => {
    const file = tempFile();
    const release = await acquireLock(file);
    const controller = new AbortController();
    const waiter = acquireLock(file, { signal: controller.signal, retries: 10_000, retryDelayMs: 100 });
    await new Promise((resolve) => setTimeout(resolve, 20));
    const reason = new Error("stop waiting");
    controller.abort(reason);
    expect(await rejectionOf(waiter)).toBe(reason);
    await release();
  });

  it("rejects a second release with ERELEASED", async () => {
    const file = tempFile();
    const release = await acquireLock(file);
    await release();
    const error = await rejectionOf(release());
    expect(error).toBeInstanceOf(FileLockError);
    expect(error.code).toBe("ERELEASED");
  });

  it("#78 GC: observation, stale verdict and identity-bound removal of a dead owner's lock", async () => {
    const file = tempFile();
    const lockDir = writeLock(file, JSON.stringify({ pid: await deadPid(), timestamp: 1000 }));
    const observation = await readFileLockObservationForGc(lockDir);
    expect(observation?.info.timestamp).toBe(1000);
    const verdict = await genericFileLockDirStaleVerdict(lockDir, 10_000);
    expect(verdict).toEqual({ stale: true, identity: observation!.identity });
    expect(await removeFileLockDirForGc(lockDir, { ...observation!.info })).toBe("owner_changed");
    expect(await removeFileLockDirForGc(lockDir, observation!.info, observation!.identity)).toBe("removed");
    expect(fs.existsSync(lockDir)).toBe(false);
  });

  it("await using releases the lock at the end of the block (Symbol.asyncDispose); released early inside it, the block's end adds nothing", async () => {
    const file = tempFile();
    {
      await using release = await acquireLock(file);
      expect(typeof release[Symbol.asyncDispose]).toBe("function");
      expect(fs.existsSync(`${file}.lock/info`)).toBe(true);
    }
    expect(fs.existsSync(`${file}.lock`)).toBe(false);
    {
      await using release = await acquireLock(file);
      await release();
      expect(fs.existsSync(`${file}.lock`)).toBe(false);
    } // no ERELEASED here
    expect(fs.existsSync(`${file}.lock`)).toBe(false);
  });

  it("bad arguments reject with coded TypeErrors before the disk (ERR_INVALID_ARG_TYPE / _VALUE)", async () => {
    const file = path.join(path.dirname(tempFile()), "sub", "state.json");
    await expect(acquireLock(42 as never)).rejects.toMatchObject({ name: "TypeError", code: "ERR_INVALID_ARG_TYPE" });
    await expect(acquireLock("rel/x")).rejects.toMatchObject({ code: "ERR_INVALID_ARG_VALUE" });
    await expect(withFileLock(file, "nope" as never)).rejects.toMatchObject({ code: "ERR_INVALID_ARG_TYPE" });
    await expect(acquireLock(file, { ownerHostId: "h".repeat(257) })).rejects.toMatchObject({
      code: "ERR_INVALID_ARG_VALUE",
      message: expect.stringContaining("ownerHostId must be at most 256 bytes in UTF-8"),
    });
    await expect(genericFileLockDirStaleVerdict(`${file}.lock`, "5" as never)).rejects.toMatchObject({
      code: "ERR_INVALID_ARG_TYPE",
    });
    expect(fs.existsSync(path.dirname(file))).toBe(false);
  });

  it("#12 processStartTime equals ps -o lstart= under LC_ALL=C TZ=UTC; null for a dead pid", async () => {
    const ps = Bun.spawnSync(["ps", "-o", "lstart=", "-p", String(process.pid)], {
      env: { ...process.env, LC_ALL: "C", TZ: "UTC" },
    });
    // Under qemu-user this process reads qemu's stat, not the kernel's (__test__/emulation.ts, artefact 1).
    expect(processStartTime(process.pid)).toBe(ownProcessStart(ps.stdout.toString().trim()));
    expect(processStartTime(await deadPid())).toBeNull();
  });
});

describe("hot path under Bun", () => {
  it("a free lock is taken and given back on the calling thread once its directory earned it; inlineFastPath: false works off it", async () => {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), "exactlock-bun-inline-"));
    roots.push(root);
    const file = path.join(root, "state.json");
    // The first acquisition in a directory runs off the thread and learns
    // that its filesystem is local and quick. Held back 10 ms (the off-thread
    // attempt would otherwise race the check below from the other core, a
    // few microseconds apart); 10 ms stays under the 20 ms that would mark
    // the directory slow.
    // Where the kernel cannot open a directory from its caches alone (before
    // Linux 5.12; qemu-user has no openat2: __test__/emulation.ts, artefact 3)
    // no directory earns it: the second attempt is held back too, and must
    // not have published either.
    const inline = inlineFastPathPossible();
    injectDelayForTesting("attempt", 10, "state.json.lock", inline ? 1 : 2);
    const first = acquireLock(file);
    expect(fs.existsSync(`${file}.lock`)).toBe(false);
    await (await first)();
    const second = acquireLock(file);
    expect(fs.existsSync(`${file}.lock`)).toBe(inline);
    const releasing = (await second)();
    if (inline) expect(fs.existsSync(`${file}.lock`)).toBe(false);
    await releasing;
    // Off the thread, the work races this one: only the outcome is certain.
    const release = await acquireLock(file, { inlineFastPath: false });
    expect(fs.existsSync(`${file}.lock`)).toBe(true);
    await release();
    expect(fs.readdirSync(root)).toEqual([]);
  });

  it("a waiter stages its record while waiting and publishes it when the lock frees", async () => {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), "exactlock-bun-staged-"));
    roots.push(root);
    const file = path.join(root, "state.json");
    const holder = await acquireLock(file);
    const waiting = acquireLock(file, { retries: 1000, retryDelayMs: 10 });
    const staged = () => fs.readdirSync(root).filter((name) => name.includes(".pending."));
    for (let i = 0; i < 500 && staged().length === 0; i++) await new Promise((r) => setTimeout(r, 2));
    expect(staged()).toHaveLength(1);
    await holder();
    await (await waiting)();
    expect(fs.readdirSync(root)).toEqual([]);
  });
});

describe("under Bun: the habits of other libraries", () => {
  it("release.signal aborts with EMISSING when the held lock is removed by someone else", async () => {
    const file = tempFile();
    const release = await acquireLock(file);
    const aborted = new Promise<unknown>((resolve) =>
      release.signal.addEventListener("abort", () => resolve(release.signal.reason), { once: true }),
    );
    fs.rmSync(`${file}.lock`, { recursive: true });
    const reason = await aborted;
    expect(reason).toBeInstanceOf(FileLockError);
    expect((reason as FileLockError).code).toBe("EMISSING");
    await release().catch(() => {});
  });

  it("a nested withFileLock of the same lock is EDEADLK at once; onContended names the holder", async () => {
    const file = tempFile();
    const error = await withFileLock(file, () => withFileLock(file, async () => 0).catch((e: unknown) => e));
    expect((error as FileLockError).code).toBe("EDEADLK");
    const first = await acquireLock(file);
    const seen: number[] = [];
    const waiting = acquireLock(file, { onContended: (holder) => void seen.push(holder.pid!) });
    await new Promise((resolve) => setTimeout(resolve, 100));
    await first();
    await (await waiting)();
    expect(seen).toEqual([process.pid]);
  });
});
