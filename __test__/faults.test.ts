/**
 * Fault injection (`injectFaultForTesting(step, code, times?)`): each release
 * step, publication step and the observation fail with a chosen errno, once,
 * a few times, or always. Every case asserts the outcome AND that no debris
 * is left and no live holder's lock is lost (a listing of the temp dir —
 * kind, inode, bytes — compared before and after).
 *
 * Faults are per process; this file's tests run one after another, and every
 * test disarms them afterwards.
 */
import { type ChildProcessWithoutNullStreams, spawn } from "node:child_process";
import { createHash } from "node:crypto";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import {
  acquireLock,
  FILE_LOCK_RELEASE_RETRY_ATTEMPTS,
  FileLockAcquireError,
  FileLockError,
  type LockRelease,
} from "../lib/index.ts";
import { clearFaultsForTesting, injectFaultForTesting } from "../lib/testing.ts";

// vitest provides __dirname (tests type-check as CommonJS, where import.meta is not allowed).
const fixtures = path.join(__dirname, "fixtures");
const roots: string[] = [];
const children: ChildProcessWithoutNullStreams[] = [];
afterEach(() => {
  clearFaultsForTesting();
  for (const child of children.splice(0)) child.kill("SIGKILL");
  for (const root of roots.splice(0)) fs.rmSync(root, { recursive: true, force: true });
});

function tempRoot(): string {
  const root = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "exactlock-faults-")));
  roots.push(root);
  return root;
}

const SHORT = { retries: 3, retryDelayMs: 10 };
const RELEASE_STEPS = ["release.snapshot", "release.remove"] as const;
const TRANSIENT = ["EBUSY", "EACCES", "EPERM", "ENOTEMPTY"] as const;
const ALWAYS = ["EBUSY", "EACCES", "EPERM", "ENOSPC", "EIO"] as const;

/** name → kind, inode and SHA-256 of each file, for everything below `root`. */
function listing(root: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (dir: string, rel: string) => {
    for (const name of fs.readdirSync(dir).sort()) {
      const full = path.join(dir, name);
      const key = rel ? `${rel}/${name}` : name;
      const stat = fs.lstatSync(full);
      if (stat.isDirectory()) {
        out[key] = `dir ${stat.ino}`;
        walk(full, key);
      } else {
        out[key] = `file ${stat.ino} ${createHash("sha256").update(fs.readFileSync(full)).digest("hex")}`;
      }
    }
  };
  walk(root, "");
  return out;
}

function expectNoDebris(root: string): void {
  expect(Object.keys(listing(root)).filter((name) => /\.pending\.|\.removing/.test(name))).toEqual([]);
}

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error("expected a rejection");
}

function info(lock: string): { pid: number; owner_token: string } {
  return JSON.parse(fs.readFileSync(path.join(lock, "info"), "utf8"));
}

/** A child process holding the lock for `file` until told to release. */
async function holder(file: string): Promise<{ release: () => Promise<unknown>; pid: number }> {
  const child = spawn(process.execPath, [path.join(fixtures, "hold-until-line.mjs"), file]);
  children.push(child);
  let out = "";
  child.stdout.setEncoding("utf8");
  await new Promise<void>((resolve, reject) => {
    child.stdout.on("data", (chunk: string) => {
      out += chunk;
      if (out.startsWith("held\n")) resolve();
    });
    child.on("exit", (code) => reject(new Error(`holder exited ${code} before holding: ${out}`)));
  });
  return {
    pid: child.pid!,
    release: () =>
      new Promise((resolve) => {
        child.on("exit", () => resolve(JSON.parse(out.split("\n")[1] ?? "null")));
        child.stdin.end("release\n");
      }),
  };
}

describe("faults on the release path", () => {
  it.each(RELEASE_STEPS.flatMap((step) => TRANSIENT.map((code) => [step, code] as const)))(
    "%s failing once with %s: the release retries and succeeds, leaving nothing",
    async (step, code) => {
      const root = tempRoot();
      const file = path.join(root, "f");
      const release = await acquireLock(file);
      injectFaultForTesting(step, code, 1);
      await release();
      expect(listing(root)).toEqual({});
    },
  );

  it.each(RELEASE_STEPS)(
    "%s: a fault firing on 4 of the 5 release attempts still lets the release succeed; firing on all 5 fences it",
    async (step) => {
      const root = tempRoot();
      const file = path.join(root, "f");
      const first = await acquireLock(file);
      injectFaultForTesting(step, "EBUSY", FILE_LOCK_RELEASE_RETRY_ATTEMPTS - 1);
      await first();
      expect(listing(root)).toEqual({});

      const second = await acquireLock(file);
      const held = listing(root);
      injectFaultForTesting(step, "EBUSY", FILE_LOCK_RELEASE_RETRY_ATTEMPTS);
      const error = await rejection(second());
      expect(error).toBeInstanceOf(FileLockError);
      expect((error as FileLockError).code).toBe("EBUSY");
      expect(listing(root)).toEqual(held);
      // The fault is spent: the next acquire retries the pending release first.
      const third = await acquireLock(file, SHORT);
      await third();
      expect(listing(root)).toEqual({});
    },
  );

  it.each(RELEASE_STEPS.flatMap((step) => ALWAYS.map((code) => [step, code] as const)))(
    "%s failing always with %s: release rejects with that code, the lock stays fenced and is not stolen; once the fault clears the next acquire finishes the release first",
    async (step, code) => {
      const root = tempRoot();
      const file = path.join(root, "f");
      const lock = `${file}.lock`;
      const release: LockRelease = await acquireLock(file);
      const held = listing(root);
      const token = info(lock).owner_token;
      injectFaultForTesting(step, code);

      const error = await rejection(release());
      expect(error).toBeInstanceOf(FileLockError);
      expect((error as FileLockError).code).toBe(code);
      expect((error as Error).message).toContain(code);
      // The lock is still on disk, the very same object.
      expect(listing(root)).toEqual(held);

      // Another acquire in this process waits and gives up: it never steals
      // a generation whose release is pending (its pid is alive: ours).
      const refused = await rejection(acquireLock(file, SHORT));
      expect(refused).toBeInstanceOf(FileLockAcquireError);
      expect((refused as FileLockAcquireError).holderInfo?.pid).toBe(process.pid);
      expect(listing(root)).toEqual(held);

      // Another process cannot take it either.
      const other = await holderAttempt(file);
      expect(other).toMatchObject({ ok: false, code: "ELOCKED" });
      expect(listing(root)).toEqual(held);

      clearFaultsForTesting();
      const next = await acquireLock(file, SHORT);
      // The pending release ran first: a new generation holds the lock.
      expect(info(lock).pid).toBe(process.pid);
      expect(info(lock).owner_token).not.toBe(token);
      await next();
      expect(listing(root)).toEqual({});
      // The first generation is gone for good: releasing it again says so.
      const again = await rejection(release());
      expect((again as FileLockError).code).toBe("ERELEASED");
    },
  );
});

/** One short acquisition of `file` in a child process: `{ok}` or the error code. */
function holderAttempt(file: string): Promise<{ ok: boolean; code?: string }> {
  const script = `
    import { acquireLock } from ${JSON.stringify(path.join(fixtures, "..", "..", "dist", "index.js"))};
    try {
      const release = await acquireLock(${JSON.stringify(file)}, { retries: 3, retryDelayMs: 10 });
      await release();
      console.log(JSON.stringify({ ok: true }));
    } catch (error) {
      console.log(JSON.stringify({ ok: false, code: error.code }));
    }`;
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["--input-type=module", "-e", script]);
    let out = "";
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => (out += chunk));
    child.on("exit", () => {
      try {
        resolve(JSON.parse(out));
      } catch (error) {
        reject(error);
      }
    });
  });
}

describe("faults on publication", () => {
  it.each(
    (["publish.stage", "publish.rename"] as const).flatMap((step) =>
      (["ENOSPC", "EIO", "EACCES"] as const).map((code) => [step, code] as const),
    ),
  )("%s failing with %s rejects the acquisition with that code and leaves no staging debris", async (step, code) => {
    const root = tempRoot();
    fs.writeFileSync(path.join(root, "f"), "data");
    const before = listing(root);
    injectFaultForTesting(step, code);
    const error = await rejection(acquireLock(path.join(root, "f"), SHORT));
    expect(error).toBeInstanceOf(FileLockError);
    expect(error).not.toBeInstanceOf(FileLockAcquireError);
    expect((error as FileLockError).code).toBe(code);
    expect((error as FileLockError).lockPath).toBe(path.join(root, "f.lock"));
    expect(listing(root)).toEqual(before);
    expectNoDebris(root);
    clearFaultsForTesting();
    const release = await acquireLock(path.join(root, "f"), SHORT);
    await release();
    expect(listing(root)).toEqual(before);
  });
});

describe("faults on observation while a live holder holds", () => {
  it.each(["EBUSY", "EACCES", "EPERM", "EIO", "ENOSPC"] as const)(
    "observe failing with %s never displaces the live holder, whose release then succeeds",
    async (code) => {
      const root = tempRoot();
      const file = path.join(root, "f");
      const live = await holder(file);
      const held = listing(root);
      expect(info(`${file}.lock`).pid).toBe(live.pid);
      injectFaultForTesting("observe", code);
      const error = await rejection(acquireLock(file, SHORT));
      // A transient code is "held, look again" (ELOCKED at the end of the
      // budget); any other is reported as an error. Never a reclaim.
      expect(error).toBeInstanceOf(["EBUSY", "EACCES", "EPERM"].includes(code) ? FileLockAcquireError : FileLockError);
      if (!(error instanceof FileLockAcquireError)) expect((error as FileLockError).code).toBe(code);
      expect(listing(root)).toEqual(held);
      expectNoDebris(root);
      clearFaultsForTesting();
      expect(await live.release()).toEqual({ released: true });
      expect(listing(root)).toEqual({});
    },
  );
});
