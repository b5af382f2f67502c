/**
 * A holder is told the moment its lock is lost: `release.signal` aborts
 * and `onCompromised` is called when someone else removes or replaces the
 * held lock — watched by inotify only while someone listens, and no watch
 * is left after the release.
 */
import { execFile } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { acquireLock, FileLockError, type LockRelease } from "../lib/index.ts";
import { Child, cleanup as cleanupChildren } from "./fixtures/children.ts";
import { cleanup, makeRoot, PORTABLE, rejectionOf, sleep, waitUntil } from "./helpers.ts";
import { copyForAnyUid } from "./kernel-helpers.ts";
import { skipUnless } from "./premises.ts";

/** Copies of the facade made for uid 65534 (copyForAnyUid), removed after each test. */
const copies: string[] = [];
afterEach(async () => {
  await cleanupChildren();
  await cleanup();
  for (const dir of copies.splice(0)) fs.rmSync(dir, { recursive: true, force: true });
});

/** This process's inotify instances, and the kernel watches they hold (`/proc/self/fdinfo`). */
function inotify(): { instances: number; watches: number } {
  let instances = 0;
  let watches = 0;
  for (const fd of fs.readdirSync("/proc/self/fd")) {
    try {
      if (fs.readlinkSync(`/proc/self/fd/${fd}`) !== "anon_inode:inotify") continue;
      const info = fs.readFileSync(`/proc/self/fdinfo/${fd}`, "utf8");
      instances++;
      watches += info.split("\n").filter((line) => line.startsWith("inotify wd:")).length;
    } catch {
      // Closed meanwhile.
    }
  }
  return { instances, watches };
}

/** Runs a real command; resolves with the time it exited. */
function external(command: string, args: string[]): Promise<number> {
  return new Promise((resolve, reject) => {
    execFile(command, args, (error) => (error ? reject(error) : resolve(performance.now())));
  });
}

/** When `signal` aborts (performance.now()), and with what. */
function abortOf(signal: AbortSignal): Promise<{ at: number; reason: any }> {
  return new Promise((resolve) => {
    signal.addEventListener("abort", () => resolve({ at: performance.now(), reason: signal.reason }), { once: true });
  });
}

describe("release.signal", () => {
  it("aborts within 50 ms of an external rm -rf of the held lock, with EMISSING naming it", async () => {
    const file = path.join(makeRoot(), "state.json");
    const release = await acquireLock(file);
    const aborted = abortOf(release.signal);
    await sleep(50);
    expect(release.signal.aborted).toBe(false);
    const removedAt = await external("rm", ["-rf", `${file}.lock`]);
    const { at, reason } = await aborted;
    expect(at - removedAt).toBeLessThan(50);
    expect(reason).toBeInstanceOf(FileLockError);
    expect(reason).toMatchObject({ code: "EMISSING", lockPath: `${file}.lock` });
    expect(reason.message).toContain(`The lock ${file}.lock was removed while this process held it`);
    expect((await rejectionOf(release())).code).toBe("EMISSING");
  });

  // Skipped under the portable mechanisms: with no inotify, the watch looks every
  // 100 ms, so the 50 ms bound is inotify's (the loss itself is still reported:
  // the replaced-lock tests below run in both modes).
  it.skipIf(PORTABLE)("aborts within 50 ms when another process rewrites the record, with EOWNERCHANGED naming the new pid", async () => {
    const file = path.join(makeRoot(), "state.json");
    const release = await acquireLock(file);
    const aborted = abortOf(release.signal);
    const record = JSON.stringify({ pid: 4242, timestamp: Date.now(), owner_token: "someone-else" });
    const replacedAt = await external("sh", ["-c", `printf '%s' '${record}' > "$0"`, `${file}.lock/info`]);
    const { at, reason } = await aborted;
    expect(at - replacedAt).toBeLessThan(50);
    expect(reason).toMatchObject({ code: "EOWNERCHANGED", lockPath: `${file}.lock` });
    expect(reason.message).toContain("was replaced by pid 4242's lock");
    expect((await rejectionOf(release())).code).toBe("EOWNERCHANGED");
  });

  it("does not abort for the holder's own release, for neighbours' files, or for the same bytes written again", async () => {
    const root = makeRoot();
    const file = path.join(root, "state.json");
    const release = await acquireLock(file);
    const { signal } = release;
    fs.writeFileSync(path.join(root, "state.json"), "{}");
    fs.renameSync(path.join(root, "state.json"), path.join(root, "other.json"));
    const info = path.join(`${file}.lock`, "info");
    fs.writeFileSync(info, fs.readFileSync(info));
    await sleep(100);
    expect(signal.aborted).toBe(false);
    await release();
    await sleep(100);
    expect(signal.aborted).toBe(false);
  });

  // Skipped under the portable mechanisms: they have no inotify instance to count.
  it.skipIf(PORTABLE)("watches only while someone listens: no kernel watch until signal is read, none left after the release", async (ctx) => {
    skipUnless(ctx, { linux: true }); // counts inotify watches in /proc/self/fdinfo
    const file = path.join(makeRoot(), "state.json");
    const before = inotify();
    const release: LockRelease = await acquireLock(file);
    expect(inotify()).toEqual(before);
    void release.signal;
    const watching = inotify();
    // The lock's parent and its directory, through the process's one
    // instance (made now if this is the process's first watch).
    expect(watching.watches).toBe(before.watches + 2);
    expect(watching.instances - before.instances).toBeLessThanOrEqual(1);
    await release();
    await waitUntil(() => inotify().watches === before.watches, 2_000, "the watch's kernel watches removed");
    expect(inotify().instances).toBe(watching.instances);
  });
});

describe("onCompromised", () => {
  it("is called once, at the loss, with the same error; a release without a loss never calls it", async () => {
    const file = path.join(makeRoot(), "state.json");
    const calls: FileLockError[] = [];
    const kept = await acquireLock(file, { onCompromised: (error) => calls.push(error) });
    await kept();
    await sleep(50);
    expect(calls).toEqual([]);
    const release = await acquireLock(file, { onCompromised: (error) => calls.push(error) });
    const removedAt = await external("rm", ["-rf", `${file}.lock`]);
    await waitUntil(() => calls.length > 0, 2_000, "onCompromised");
    expect(performance.now() - removedAt).toBeLessThan(500);
    expect(calls[0]).toMatchObject({ code: "EMISSING" });
    expect(release.signal.aborted).toBe(true);
    expect(release.signal.reason).toBe(calls[0]);
    await sleep(50);
    expect(calls).toHaveLength(1);
    await rejectionOf(release());
  });
});

describe("a loss watch the kernel refuses (the uid's inotify instances used up)", () => {
  /** A process of uid 65534 holding every inotify instance that uid may have. */
  async function exhaustInotify(): Promise<Child> {
    const hog = new Child("setpriv", [
      "--reuid=65534",
      "--regid=65534",
      "--clear-groups",
      // The system's Python: a user-installed one (pyenv's shims) may not be readable by uid 65534.
      "/usr/bin/python3",
      "-c",
      [
        "import ctypes, sys",
        "libc = ctypes.CDLL(None, use_errno=True)",
        "fds = []",
        "while True:",
        "    fd = libc.inotify_init1(0)",
        "    if fd < 0: break",
        "    fds.append(fd)",
        "print('exhausted', len(fds), ctypes.get_errno(), flush=True)",
        "sys.stdin.read()",
      ].join("\n"),
    ]);
    const line = await hog.nextLine("exhausted");
    // EMFILE: the per-uid limit (fs.inotify.max_user_instances), not this process's descriptors.
    expect(line).toMatch(/^exhausted \d+ 24$/);
    return hog;
  }

  for (const how of ["onCompromised", "signal"] as const) {
    it(`acquireLock still hands over a lock whose loss it reports (${how}), and releases it`, async (ctx) => {
      skipUnless(ctx, { linux: true, root: true, tools: ["setpriv", "/usr/bin/python3"] }); // uid 65534's inotify instances used up
      const root = makeRoot();
      fs.chmodSync(root, 0o777);
      const file = path.join(root, "state.json");
      await exhaustInotify();
      // What uid 65534 runs must be readable by it wherever the clone sits.
      const copy = copyForAnyUid();
      copies.push(copy.dir);
      const asNobody = (args: string[]) =>
        new Child("setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", process.execPath, ...args]);
      const holder = asNobody([copy.fixture("watched-holder.mjs"), copy.facade, file, how]);
      expect(await holder.nextLine()).toBe("held");
      fs.rmSync(`${file}.lock`, { recursive: true });
      expect(await holder.nextLine()).toBe("lost EMISSING");
      holder.send("release");
      expect(await holder.nextLine()).toBe("release-error EMISSING");

      // And a lock that is not lost is released whole, leaving nothing.
      const second = asNobody([copy.fixture("watched-holder.mjs"), copy.facade, file, how]);
      expect(await second.nextLine()).toBe("held");
      second.send("release");
      expect(await second.nextLine()).toBe("released");
      expect(fs.readdirSync(root)).toEqual([]);
    });
  }
});
