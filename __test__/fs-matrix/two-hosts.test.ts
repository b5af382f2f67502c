/**
 * Two hosts on one volume (issue 13), on a real network filesystem: an
 * sshd on 127.0.0.1 serves a directory of the temp dir over SFTP, and
 * sshfs mounts it (default caching: what users get).
 *
 * - "Host A" uses the exported directory directly, with ownerHostId "host-a".
 * - "Host B" uses it through sshfs, with ownerHostId "host-b", each of its
 *   processes in a pid namespace of its own (`unshare --pid --fork
 *   --mount-proc`): its pids mean nothing on host A, as on a real second host.
 * - A second sshfs mount of the same export is a third view (two clients,
 *   two caches).
 *
 * No inotify event crosses hosts: a waiter on one host learns of a release
 * on the other only by its timer (`retryDelayMs`), and its first wake must
 * see the volume's truth, not the client's cache (sshfs caches attributes
 * and listings for 20 s by default).
 *
 * Needs root (mounts, sshd, namespaces); without it every test prints the
 * loud `SKIPPED (needs root): …` line and returns.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { Child, cleanup, median, metric, now } from "../fixtures/children.ts";
import { lockNames } from "../kernel-helpers.ts";
import { type Mount, mountFs, mountSshfs, unmountAll, whyNotMountable } from "./mounts.mjs";

const WORKER = path.join(__dirname, "host-worker.mjs");
const UNSHARE_PID = ["--pid", "--fork", "--mount-proc", "--kill-child=SIGKILL"];
const RETRY_DELAY_MS = 100;
const HOST_A = { ownerHostId: "host-a" } as const;
const HOST_B = { ownerHostId: "host-b" } as const;

/** A process of host A: the export dir, directly. */
function hostA(args: string[]): Child {
  return new Child(process.execPath, [WORKER, ...args]);
}

/** A process of host B: through sshfs, in a pid namespace of its own. */
function hostB(args: string[]): Child {
  return new Child("unshare", [...UNSHARE_PID, process.execPath, WORKER, ...args]);
}

let sshfs: Mount | undefined;
let secondView: string | undefined;
let why: string | undefined;

function ready(what: string): { exportDir: string; view: string; second: string } | undefined {
  if (why !== undefined || !sshfs) {
    console.warn(`SKIPPED (needs root): two hosts on one volume: ${what} (${why ?? "sshfs not mounted"})`);
    return undefined;
  }
  return { exportDir: sshfs.exportDir!, view: sshfs.dir, second: secondView! };
}

beforeAll(async () => {
  why = whyNotMountable("sshfs");
  if (why === undefined && !fs.existsSync("/usr/bin/unshare") && !fs.existsSync("/bin/unshare")) why = "missing tool: unshare";
  if (why !== undefined) return;
  sshfs = await mountFs("sshfs");
  secondView = (await mountSshfs(sshfs.exportDir!, sshfs.sshd)).dir;
}, 60_000);

afterAll(async () => {
  await cleanup();
  await unmountAll();
}, 60_000);

afterEach(cleanup);

/** A fresh directory on the volume: its path on host A and in each sshfs view. */
function fresh(where: { exportDir: string; view: string; second: string }, name: string) {
  fs.mkdirSync(path.join(where.exportDir, name));
  return {
    a: path.join(where.exportDir, name),
    b: path.join(where.view, name),
    c: path.join(where.second, name),
  };
}

const json = async (child: Child, timeoutMs = 30_000) => JSON.parse(await child.nextLine("{", timeoutMs));

describe("two hosts on one volume (sshfs over 127.0.0.1)", () => {
  it("issue 13: 4 waiters on the sshfs view all get a lock the holder on the export released after 300 ms (default options), leaving nothing", async () => {
    const where = ready("4 waiters behind a holder on the export");
    if (!where) return;
    const dirs = fresh(where, "four");
    const holder = hostA(["hold", path.join(dirs.a, "state.json"), "{}"]);
    await holder.nextLine("held ");
    const started = now();
    const waiters = Array.from({ length: 4 }, () =>
      new Child(process.execPath, [WORKER, "acquire", path.join(dirs.b, "state.json"), "{}"]),
    );
    // Each waiter stages its record while it waits: four staging dirs prove
    // that all four have seen the lock held (their client caches it now).
    for (let i = 0; i < 400 && lockNames(dirs.a, "state.json").length < 5; i += 1) await sleep(10);
    const sawHeld = Math.max(300 - (now() - started), 0);
    await sleep(sawHeld);
    holder.send("release");
    await holder.nextLine("released ");
    const outcomes = await Promise.all(waiters.map((waiter) => json(waiter)));
    expect(outcomes.map((o) => o.ok), JSON.stringify(outcomes)).toEqual([true, true, true, true]);
    holder.send("exit");
    await holder.exited;
    expect(lockNames(dirs.a, "state.json")).toEqual([]);
    expect(fs.readdirSync(dirs.a)).toEqual([]);
  }, 60_000);
});
