// One chaos worker: loops `withFileLock` on the shared file until the stop
// file appears. Spawned (and SIGKILLed, and respawned) by chaos/run.mjs.
//
// argv[2] is a JSON config: { slot, file, counter, marker, log, state, stop,
// holdMinMs, holdMaxMs, options }.
//
// Each critical section:
//   1. creates `section.marker` with O_EXCL ('wx') and writes its owner
//      (pid, start time, slot) into it. EEXIST means someone else's marker is
//      there: if that owner is still alive, two processes are inside at once
//      — a VIOLATION. If the owner is dead (killed inside its section), the
//      marker is a leftover; it is replaced and counted.
//   2. reads the 20-digit counter, holds for a few ms, writes counter + 1
//      with one 20-byte pwrite (no truncation window), then appends the value
//      it wrote to this incarnation's own append-only log.
//   3. checks the marker still holds its own bytes (else VIOLATION), and
//      unlinks it.
// The worker announces its state in a 1-byte state file (pwrite at offset 0)
// that the killer reads right before it picks a victim:
//   I idle/ready, W waiting in acquire, H holding (inside the section),
//   R releasing (section done, lock still on disk), X exiting.
import * as fs from "node:fs";
import { FileLockAcquireError, processStartTime, withFileLock } from "../dist/index.js";

const config = JSON.parse(process.argv[2]);
const stateFd = fs.openSync(config.state, "r+");
const counterFd = fs.openSync(config.counter, "r+");
const logFd = fs.openSync(config.log, "a");
const myStart = processStartTime(process.pid);
const myMarker = JSON.stringify({ pid: process.pid, start: myStart, slot: config.slot });

function setState(letter) {
  fs.writeSync(stateFd, letter, 0, "latin1");
}

function log(line) {
  fs.writeSync(logFd, `${line}\n`);
}

function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Whether the process that wrote a marker is still running (not a zombie, same start). */
function markerOwnerAlive(owner) {
  if (!owner || !Number.isInteger(owner.pid) || owner.pid <= 0) return false;
  let stat;
  try {
    stat = fs.readFileSync(`/proc/${owner.pid}/stat`, "latin1");
  } catch {
    return false;
  }
  const state = stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3);
  if (state === "Z" || state === "X" || state === "x") return false;
  return processStartTime(owner.pid) === owner.start;
}

function readMarker() {
  try {
    return fs.readFileSync(config.marker, "utf8");
  } catch (error) {
    if (error.code === "ENOENT") return null;
    throw error;
  }
}

/** Creates the marker exclusively; returns whether this section owns it. */
async function enterMarker() {
  for (let tries = 0; tries < 3; tries++) {
    let fd;
    try {
      fd = fs.openSync(config.marker, "wx", 0o600);
    } catch (error) {
      if (error.code !== "EEXIST") throw error;
      let text = readMarker();
      if (text === null) {
        // It vanished between our EEXIST and the read: its owner was inside
        // with us and just left.
        log(`V marker-vanished-after-EEXIST`);
        return false;
      }
      if (text === "") {
        // Its creator died between open and write, or is alive and about to
        // write. A live creator writes within microseconds: look again.
        await sleep(50);
        text = readMarker();
        if (text === null) {
          log(`V empty-marker-vanished`);
          return false;
        }
      }
      let owner = null;
      try {
        owner = text === "" ? null : JSON.parse(text);
      } catch {
        owner = null;
      }
      if (markerOwnerAlive(owner)) {
        log(`V marker-EEXIST-owner-alive ${text}`);
        return false;
      }
      // A holder killed inside its section left it. Remove and retry.
      log(`M ${text === "" ? "empty" : owner?.pid}`);
      fs.unlinkSync(config.marker);
      continue;
    }
    fs.writeSync(fd, myMarker);
    fs.closeSync(fd);
    return true;
  }
  log(`V marker-could-not-be-taken`);
  return false;
}

function leaveMarker(owned) {
  if (!owned) return;
  const text = readMarker();
  if (text !== myMarker) {
    log(`V marker-replaced ${JSON.stringify(text)}`);
    return;
  }
  fs.unlinkSync(config.marker);
}

const counterBuf = Buffer.alloc(20);

async function section() {
  setState("H");
  const owned = await enterMarker();
  fs.readSync(counterFd, counterBuf, 0, 20, 0);
  const value = Number(counterBuf.toString("latin1"));
  const hold = config.holdMinMs + Math.random() * (config.holdMaxMs - config.holdMinMs);
  await sleep(hold);
  const next = value + 1;
  fs.writeSync(counterFd, String(next).padStart(20, "0"), 0, "latin1");
  log(String(next));
  leaveMarker(owned);
  setState("R");
}

/** What the lock's directory shows right now, for the log of an unexpected error. */
function evidence() {
  const dir = config.file.slice(0, config.file.lastIndexOf("/"));
  const seen = {};
  try {
    for (const name of fs.readdirSync(dir)) {
      let info = null;
      try {
        info = fs.readFileSync(`${dir}/${name}/info`, "utf8");
      } catch (error) {
        info = error.code;
      }
      seen[name] = info;
    }
  } catch (error) {
    seen.error = String(error);
  }
  return { pid: process.pid, at: Date.now(), seen };
}

setState("I");
while (!fs.existsSync(config.stop)) {
  setState("W");
  try {
    await withFileLock(config.file, section, config.options);
  } catch (error) {
    if (error instanceof FileLockAcquireError) {
      log(`T ${error.holder}`);
    } else {
      log(`E ${error?.code ?? ""} ${String(error?.message ?? error).replaceAll("\n", " ")}`);
      log(`D ${JSON.stringify(evidence())}`);
      setState("X");
      process.exit(3);
    }
  }
  setState("I");
}
setState("X");
process.exit(0);
