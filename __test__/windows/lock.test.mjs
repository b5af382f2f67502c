// The lock on Windows, run by Windows node.exe (under Wine on the Linux CI machine:
// scripts/run-windows.mjs). Each test is one of the promises for Windows, with real
// child processes and a real TerminateProcess (`child.kill()`).
//
//   node.exe --test lock.test.mjs     (EXACTLOCK_DIST: the facade's dist folder)
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { test } from "node:test";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const dist = process.env.EXACTLOCK_DIST ?? path.join(here, "..", "..", "dist");
const lib = createRequire(import.meta.url)(path.join(dist, "index.js"));
const holderScript = path.join(here, "holder.cjs");
const counterScript = path.join(here, "..", "emulated", "counter.cjs");

function scratch(name) {
  return fs.mkdtempSync(path.join(os.tmpdir(), `exactlock-win-${name}-`));
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** Starts holder.cjs and resolves once it wrote READY (with the child and what it wrote). */
async function startHolder(file, holdMs, mode) {
  const ready = `${file}.ready-${Math.random().toString(16).slice(2)}`;
  const child = spawn(process.execPath, [holderScript, dist, file, ready, String(holdMs), ...(mode ? [mode] : [])], {
    stdio: "ignore",
  });
  const exited = new Promise((resolve) => child.on("exit", (code, signal) => resolve({ code, signal })));
  for (let waited = 0; !fs.existsSync(ready) || fs.readFileSync(ready, "utf8") === ""; waited += 10) {
    if (waited > 30_000) throw new Error("the holder did not start in 30 s");
    await sleep(10);
  }
  const said = fs.readFileSync(ready, "utf8");
  assert.match(said, /^(held|open) \d+$/, `the holder said: ${said}`);
  return { child, exited, said };
}

test("the native core is Windows'", () => {
  assert.equal(process.platform, "win32");
  assert.equal(lib.nativePlatform(), "windows");
});

test("3 processes × 200 sections: the counter ends exact", async () => {
  const dir = scratch("counter");
  const child = spawn(process.execPath, [counterScript, dist, path.join(dir, "counter"), "200", "3"], { stdio: "ignore" });
  const code = await new Promise((resolve) => child.on("exit", resolve));
  assert.equal(code, 0, "counter.cjs exits 0 only when the counter is 600 and every child exited 0");
  assert.equal(fs.readFileSync(path.join(dir, "counter"), "utf8"), "600");
});

test("a killed holder is reclaimed by a waiter already waiting, within 50 ms of its exit", async () => {
  const file = path.join(scratch("killed"), "state.json");
  const { child, exited } = await startHolder(file, 60_000);
  const waiter = lib.acquireLock(file, { timeout: 20_000 });
  let acquiredAt;
  waiter.then(() => (acquiredAt = performance.now()));
  await sleep(500); // the waiter is asleep on its events by now
  assert.equal(acquiredAt, undefined, "the waiter must wait while the holder lives");
  child.kill(); // TerminateProcess
  await exited;
  const exitSeenAt = performance.now();
  const release = await waiter;
  const after = acquiredAt - exitSeenAt;
  console.log(`reclaimed ${after.toFixed(1)} ms after the holder's exit was seen`);
  assert.ok(after <= 50, `reclaimed ${after.toFixed(1)} ms after the exit`);
  await release();
  assert.equal(fs.existsSync(`${file}.lock`), false);
});

test("a live holder is never displaced, not even with staleMs: 1", async () => {
  const file = path.join(scratch("live"), "state.json");
  const { child, exited } = await startHolder(file, 60_000);
  await sleep(50);
  await assert.rejects(lib.acquireLock(file, { staleMs: 1, timeout: 500 }), (error) => error.code === "ELOCKED");
  const inspection = await lib.inspectLock(file, { staleMs: 1 });
  assert.equal(inspection.holder?.liveness, "live", JSON.stringify(inspection));
  assert.equal(inspection.stale, false);
  assert.equal(await lib.isLocked(file, { staleMs: 1 }), true);
  child.kill();
  await exited;
});

test("a record whose pid now belongs to a new process (another creation time) is reclaimed", async () => {
  const file = path.join(scratch("reused"), "state.json");
  // A real record, written by a holder that is then killed...
  const first = await startHolder(file, 60_000);
  const record = JSON.parse(fs.readFileSync(`${file}.lock/info`, "utf8"));
  first.child.kill();
  await first.exited;
  // ...and a live process that now has "its" pid: the record, pid swapped, start kept.
  const other = spawn(process.execPath, ["-e", "setTimeout(() => {}, 60000)"], { stdio: "ignore" });
  const otherExited = new Promise((resolve) => other.on("exit", resolve));
  await sleep(200);
  const info = fs.readFileSync(`${file}.lock/info`, "utf8");
  fs.writeFileSync(`${file}.lock/info`, info.replace(new RegExp(`("pid":\\s*)${record.pid}\\b`), `$1${other.pid}`));
  assert.equal(JSON.parse(fs.readFileSync(`${file}.lock/info`, "utf8")).pid, other.pid);
  const inspection = await lib.inspectLock(file);
  assert.equal(inspection.holder?.pid, other.pid);
  assert.equal(inspection.holder?.liveness, "pid_reused", JSON.stringify(inspection));
  assert.equal(inspection.stale, true);
  const release = await lib.acquireLock(file, { timeout: 5000 });
  await release();
  other.kill();
  await otherExited;
});

test("the record is the original module's on Windows, byte for byte: start_time is the owner's incarnation, windows:<creation FILETIME>", async () => {
  const file = path.join(scratch("record"), "state.json");
  const spawnedAt = Date.now();
  const { child, exited, said } = await startHolder(file, 60_000);
  const readyAt = Date.now();
  const pid = Number(said.split(" ")[1]);
  const bytes = fs.readFileSync(`${file}.lock/info`, "utf8");
  const record = JSON.parse(bytes);
  const incarnation = record.process_incarnation;
  assert.match(incarnation, /^windows:[1-9]\d*$/);
  // The original's keys, in its order (file-lock 0.17 on win32: processStartTime() is the
  // natives' Process.fromPid(pid).incarnation, and process_incarnation the same value).
  const original = JSON.stringify({
    pid,
    start_time: incarnation,
    start_time_format: "utc-v1",
    process_incarnation: incarnation,
    timestamp: record.timestamp,
    owner_token: record.owner_token,
  });
  assert.equal(bytes, original);
  assert.equal(lib.processStartTime(pid), incarnation);
  // A FILETIME counts 100 ns since 1601: the holder's creation, on this clock.
  const createdAt = Number(BigInt(incarnation.slice("windows:".length)) / 10_000n) - 11_644_473_600_000;
  assert.ok(createdAt >= spawnedAt - 2000 && createdAt <= readyAt + 2000, `created ${createdAt}, spawned ${spawnedAt}..${readyAt}`);
  child.kill();
  await exited;
});

test("a garbage collector removes a dead holder's lock exactly, and never the successor that took its name", async () => {
  const file = path.join(scratch("gc"), "state.json");
  const lockDir = `${file}.lock`;
  // Judged dead, removed: the exact removal runs in place on Windows.
  const first = await startHolder(file, 60_000);
  first.child.kill();
  await first.exited;
  const dead = await lib.readFileLockInfoForGc(lockDir);
  assert.ok(dead, "the dead holder's record is read");
  assert.equal(await lib.removeFileLockDirForGc(lockDir, dead), "removed");
  assert.equal(fs.existsSync(lockDir), false);
  // Judged dead, but a waiter reclaimed and published its own lock before the collector acts.
  const second = await startHolder(file, 60_000);
  second.child.kill();
  await second.exited;
  const judged = await lib.readFileLockInfoForGc(lockDir);
  assert.ok(judged);
  const release = await lib.acquireLock(file, { retries: 0 });
  const successor = fs.readFileSync(`${lockDir}/info`, "utf8");
  assert.equal(await lib.removeFileLockDirForGc(lockDir, judged), "owner_changed");
  assert.equal(fs.readFileSync(`${lockDir}/info`, "utf8"), successor, "the successor's lock is untouched");
  await release();
  assert.equal(fs.existsSync(lockDir), false);
});

/**
 * Releases `file`'s lock, held by this process, while another process does
 * `mode` to it (holder.cjs) for `holdMs`: "released" (and nothing left), or
 * "failed <code>" with a code, never EOWNERCHANGED, and nothing removed.
 */
async function releaseBeside(file, mode, holdMs) {
  const release = await lib.acquireLock(file, { retries: 0 });
  const other = await startHolder(file, holdMs, mode);
  let outcome;
  try {
    await release();
    outcome = "released";
    assert.equal(fs.existsSync(`${file}.lock`), false);
  } catch (error) {
    outcome = `failed ${error.code}`;
    assert.ok(typeof error.code === "string" && error.code.length > 0, "the failure carries a code");
    assert.notEqual(error.code, "EOWNERCHANGED", error.message);
    assert.equal(fs.existsSync(`${file}.lock/info`), true, "a failed release removes nothing");
  }
  await other.exited;
  return outcome;
}

test("a release while another process holds the record open succeeds after its retries, or fails coded and removes nothing", async () => {
  const outcome = await releaseBeside(path.join(scratch("open"), "state.json"), "open-info", 300);
  console.log(`release while the record was open: ${outcome}`);
});

test("a path with a component ending in a dot or a space is refused before anything is made: Windows drops them, so it would lock apart from the file it names", async () => {
  const root = scratch("dots");
  for (const file of [path.join(root, "proj.", "state.json"), path.join(root, "proj ", "state.json"), path.join(root, "state.json.")]) {
    await assert.rejects(lib.acquireLock(file), (error) => error instanceof TypeError && /ending in a dot or a space/.test(error.message));
    assert.throws(() => lib.acquireLockSync(file), TypeError);
  }
  assert.deepEqual(fs.readdirSync(root), [], "nothing was made");
  const release = await lib.acquireLock(path.join(root, "proj", "state.json"));
  await release();
});

test("a release while another process's current directory is the lock directory removes nothing until it can remove everything: never an empty lock directory left", async () => {
  // Windows will not delete a directory that a handle without shared
  // deletion holds open (a shell cd'd into it). Before, the record went
  // first and the directory could not follow: an empty lock directory,
  // a holder to everyone, and a false EOWNERCHANGED.
  const file = path.join(scratch("cwd"), "state.json");
  const outcome = await releaseBeside(file, "cwd-lock", 600);
  console.log(`release while the lock directory was a process's current directory: ${outcome}`);
  // Whatever happened, the lock is to be had again at once (a pending
  // release is finished first by this process's next acquisition).
  const again = await lib.acquireLock(file, { retries: 20, retryDelayMs: 50 });
  await again();
  assert.equal(fs.existsSync(`${file}.lock`), false);
});

test("fenced acquisitions by 3 processes get strictly increasing tokens, and updateJson changes the file whole under the lock", async () => {
  // Issue 43 on Windows: the fence's head moved by a no-replace rename
  // (MoveFileEx without REPLACE_EXISTING), and updateJson's temp-then-rename
  // commit; updater.cjs does one updateJson with fence: true
  // per section and appends the token it got.
  const dir = scratch("fence");
  const file = path.join(dir, "state.json");
  const log = path.join(dir, "tokens.log");
  const runs = [0, 1, 2].map(
    () =>
      new Promise((resolve, reject) => {
        const child = spawn(process.execPath, [path.join(here, "updater.cjs"), dist, file, log, "40"], { stdio: "inherit" });
        child.on("exit", (code) => (code === 0 ? resolve() : reject(new Error(`updater exited ${code}`))));
      }),
  );
  await Promise.all(runs);
  const state = JSON.parse(fs.readFileSync(file, "utf8"));
  assert.equal(state.count, 120, "no update lost");
  const tokens = fs.readFileSync(log, "utf8").trim().split("\n").map(BigInt);
  assert.equal(tokens.length, 120);
  for (let i = 1; i < tokens.length; i += 1) assert.ok(tokens[i] > tokens[i - 1], `token ${i} grew: ${tokens[i - 1]} -> ${tokens[i]}`);
  assert.equal((await lib.inspectLock(file)).fence, tokens.at(-1));
  // Under Wine a release's quarantine directory stays (its record's deletion waits for a
  // handle: README, "What Wine does not show"); on Windows nothing is left but these.
  const underWine = Boolean(process.env.WINEPREFIX);
  const left = fs.readdirSync(dir).filter((name) => !(underWine && name.startsWith("state.json.lock.removing.")));
  assert.deepEqual(left.sort(), ["state.json", "state.json.lock.fence", "tokens.log"], "no temp left");
});
