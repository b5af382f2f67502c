/**
 * A lock shared between users (issue 41, item 8). Lock directories are
 * 0700 and records 0600 by default, so another user's waiter cannot read
 * the holder's record: it used to be told the record "is being written or
 * removed (EACCES)… transient", and could never reclaim a dead holder.
 *
 * With `mode: 0o770` in every process (and a group the users share), a
 * second user's waiter reads the record, waits for a live holder and
 * reclaims a dead one; without it, its error says it is a permission
 * problem and names the fix. Real users: children run through
 * `setpriv --reuid/--regid` (root only), two uids in one group.
 */
import { spawn, spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { copyForAnyUid } from "./kernel-helpers.ts";
import { unmet } from "./premises.ts";

const GROUP = 60_000;
const [ALICE, BOB] = [60_001, 60_002];
const canSwitchUsers = unmet({ linux: true, root: true, tools: ["setpriv"] }) === undefined;

let copy: ReturnType<typeof copyForAnyUid> | undefined;
const facade = () => (copy ??= copyForAnyUid()).facade;
afterAll(() => {
  if (copy) fs.rmSync(copy.dir, { recursive: true, force: true });
});

const children: ReturnType<typeof spawn>[] = [];
const roots: string[] = [];
afterEach(() => {
  for (const child of children.splice(0)) child.kill("SIGKILL");
  for (const root of roots.splice(0)) fs.rmSync(root, { recursive: true, force: true });
});

/** A directory both users may make locks in: root's, group GROUP, 2770. */
function sharedDir(): string {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "exactlock-users-"));
  roots.push(root);
  fs.chmodSync(root, 0o755);
  const shared = path.join(root, "shared");
  fs.mkdirSync(shared);
  fs.chownSync(shared, 0, GROUP);
  fs.chmodSync(shared, 0o2770);
  return shared;
}

/** Runs an ES module snippet as `uid` (primary group `uid`, also in GROUP); its stdout lines, one at a time. */
function asUser(uid: number, script: string) {
  const child = spawn(
    "setpriv",
    // Each user's own primary group, the shared one beside it: what users of a team have.
    [`--reuid=${uid}`, `--regid=${uid}`, `--groups=${GROUP}`, process.execPath, "--input-type=module", "-e", script],
    { stdio: ["pipe", "pipe", "pipe"], cwd: "/" },
  );
  children.push(child);
  let buffered = "";
  let stderr = "";
  const lines: string[] = [];
  const waiting: ((line: string) => void)[] = [];
  child.stderr!.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
  child.stdout!.setEncoding("utf8").on("data", (chunk: string) => {
    buffered += chunk;
    for (let at = buffered.indexOf("\n"); at >= 0; at = buffered.indexOf("\n")) {
      const line = buffered.slice(0, at);
      buffered = buffered.slice(at + 1);
      const next = waiting.shift();
      if (next) next(line);
      else lines.push(line);
    }
  });
  const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));
  return {
    child,
    send: (line: string) => child.stdin!.write(`${line}\n`),
    nextLine: (): Promise<string> => {
      const line = lines.shift();
      if (line !== undefined) return Promise.resolve(line);
      return new Promise((resolve, reject) => {
        waiting.push(resolve);
        void exited.then((code) => reject(new Error(`child exited (${code}) before printing: ${stderr}`)));
      });
    },
  };
}

/** Holds `file`'s lock with `options`, prints `held <pid>`, releases on `release`, exits on `exit`. */
function holder(file: string, options: object) {
  return `
    import { createInterface } from "node:readline";
    import { acquireLock } from ${JSON.stringify(facade())};
    const release = await acquireLock(${JSON.stringify(file)}, ${JSON.stringify(options)});
    console.log("held " + process.pid);
    for await (const line of createInterface({ input: process.stdin })) {
      if (line === "release") { await release(); console.log("released"); }
      if (line === "exit") process.exit(0);
    }`;
}

/** Inspects `file`, then waits for its lock with `options`; prints what it saw and how it ended. */
function waiter(file: string, options: object) {
  return `
    import * as fs from "node:fs";
    import { acquireLock, inspectLock } from ${JSON.stringify(facade())};
    const seen = await inspectLock(${JSON.stringify(file)});
    console.log(JSON.stringify({ pid: seen.holder?.pid, liveness: seen.holder?.liveness }));
    const started = Date.now();
    try {
      const release = await acquireLock(${JSON.stringify(file)}, ${JSON.stringify(options)});
      const owner = JSON.parse(fs.readFileSync(${JSON.stringify(`${file}.lock/info`)}, "utf8")).pid;
      await release();
      console.log(JSON.stringify({ ok: true, owner, waited: Date.now() - started }));
    } catch (error) {
      console.log(JSON.stringify({ ok: false, code: error.code, message: error.message }));
    }`;
}

describe.skipIf(!canSwitchUsers)("a lock shared between two users of one group (root: setpriv)", () => {
  it("with mode 0o770: the other user's waiter reads the record, waits for the live holder, then reclaims a SIGKILLed one", async () => {
    const file = path.join(sharedDir(), "a", "state.json");
    const shared = { mode: 0o770, timeout: 20_000 };
    // A missing parent is made with the mode asked, so the other user can make locks in it.
    const alice = asUser(ALICE, holder(file, shared));
    const alicePid = Number((await alice.nextLine()).split(" ")[1]);
    // Made with the mode asked, keeping the setgid bit they inherit (and with it the shared
    // group, which an exact chmod would take away: then the record got its writer's own group).
    for (const made of [path.dirname(file), `${file}.lock`]) {
      const stat = fs.statSync(made);
      expect([(stat.mode & 0o7777).toString(8), stat.gid], made).toEqual(["2770", GROUP]);
    }
    const record = fs.statSync(`${file}.lock/info`);
    expect([(record.mode & 0o777).toString(8), record.gid]).toEqual(["640", GROUP]);
    // Bob waits for the live holder, and takes the lock once it is released.
    const bob = asUser(BOB, waiter(file, shared));
    expect(JSON.parse(await bob.nextLine())).toEqual({ pid: alicePid, liveness: "live" });
    await new Promise((resolve) => setTimeout(resolve, 200));
    alice.send("release");
    expect(await alice.nextLine()).toBe("released");
    const handed = JSON.parse(await bob.nextLine());
    expect(handed).toMatchObject({ ok: true });
    expect(handed.owner).not.toBe(alicePid);
    // Alice holds again and is SIGKILLed: Bob's waiter reclaims her lock at once.
    alice.send("exit");
    const again = asUser(ALICE, holder(file, shared));
    const againPid = Number((await again.nextLine()).split(" ")[1]);
    const reclaimer = asUser(BOB, waiter(file, shared));
    expect(JSON.parse(await reclaimer.nextLine())).toEqual({ pid: againPid, liveness: "live" });
    await new Promise((resolve) => setTimeout(resolve, 200));
    const killedAt = Date.now();
    again.child.kill("SIGKILL");
    const reclaimed = JSON.parse(await reclaimer.nextLine());
    expect(reclaimed).toMatchObject({ ok: true });
    expect(Date.now() - killedAt).toBeLessThan(2_000);
    expect(fs.readdirSync(path.dirname(file))).toEqual([]);
  });

  it("without it: the other user's waiter is told it is a permission problem, and which option fixes it", async () => {
    const file = path.join(sharedDir(), "state.json");
    const alice = asUser(ALICE, holder(file, {}));
    await alice.nextLine();
    const bob = asUser(BOB, waiter(file, { timeout: 300 }));
    await bob.nextLine();
    const refused = JSON.parse(await bob.nextLine());
    expect(refused.ok).toBe(false);
    expect(refused.code).toBe("ELOCKED");
    expect(refused.message).toContain("may not read (EACCES)");
    expect(refused.message).toContain("mode: 0o770");
    alice.send("exit");
  });
});
