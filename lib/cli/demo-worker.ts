/**
 * One contender of `exactlock demo` (forked by demo.ts, talks over IPC).
 *
 * Loop: take the lock; claim the occupancy marker (a file that only the
 * holder may have: finding the marker of a holder the demo has not killed
 * is a violation); read the counter; work a few milliseconds; write
 * counter + 1 (atomically, with the writer's pid); drop the marker, checking
 * it still names us; stamp; release; report. The verdicts come from the
 * marker and the kill records alone; the timestamps (CLOCK_MONOTONIC
 * microseconds, comparable across processes) only measure latencies.
 */
import { closeSync, existsSync, openSync, readFileSync, renameSync, unlinkSync, writeFileSync, writeSync } from "node:fs";
import { acquireLock } from "../index.js";
import { killRecordPath, nowUs, type DemoState, type WorkerMessage } from "./demo-protocol.js";

function send(message: WorkerMessage): void {
  process.send?.(message);
}

const isMissing = (error: unknown) => (error as NodeJS.ErrnoException).code === "ENOENT";

/**
 * Creates the marker with our pid; if one exists, returns its owner and takes
 * it over. The owner is -1 when the marker cannot be read (empty: its creator
 * is writing it; gone: its holder is removing it): a holder inside its
 * section, which no kill record names.
 */
function claimMarker(marker: string): number | null {
  try {
    const fd = openSync(marker, "wx");
    writeSync(fd, String(process.pid));
    closeSync(fd);
    return null;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
  }
  let owner = -1;
  try {
    owner = Number(readFileSync(marker, "utf8")) || -1;
  } catch (error) {
    if (!isMissing(error)) throw error;
  }
  writeFileSync(marker, String(process.pid));
  return owner;
}

/**
 * Whether the marker still names us; then removes it. Gone before we could
 * remove it, it did not stay ours: another holder removed it. (Only an
 * overlap makes these races; they are its evidence, not the worker's failure.)
 */
function dropMarker(marker: string): boolean {
  try {
    if (readFileSync(marker, "utf8") !== String(process.pid)) return false;
    unlinkSync(marker);
    return true;
  } catch (error) {
    if (isMissing(error)) return false;
    throw error;
  }
}

function readState(file: string): DemoState {
  return JSON.parse(readFileSync(file, "utf8")) as DemoState;
}

function writeState(file: string, state: DemoState): void {
  const temp = `${file}.tmp.${process.pid}`;
  writeFileSync(temp, JSON.stringify(state));
  renameSync(temp, file);
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function main(): Promise<void> {
  const [file, marker, minMs, maxMs] = process.argv.slice(2);
  if (!file || !marker) throw new Error("usage: demo-worker FILE MARKER MIN_MS MAX_MS");
  const sectionMin = Number(minMs ?? 1);
  const sectionSpan = Math.max(0, Number(maxMs ?? 4) - sectionMin);
  const stop = new AbortController();
  const stopNow = () => stop.abort(new Error("stopped"));
  process.on("message", (message) => {
    if (message === "stop") stopNow();
  });
  process.on("disconnect", stopNow);
  send({ type: "ready", pid: process.pid });
  while (!stop.signal.aborted) {
    let release;
    try {
      release = await acquireLock(file, { retries: 1e7, retryDelayMs: 100, signal: stop.signal });
    } catch (error) {
      if (stop.signal.aborted) break;
      throw error;
    }
    const acquiredUs = nowUs();
    const markerOwner = claimMarker(marker);
    const markerOwnerKilled = markerOwner !== null && existsSync(killRecordPath(marker, markerOwner));
    send({ type: "enter", pid: process.pid });
    const before = readState(file);
    await sleep(sectionMin + Math.random() * sectionSpan);
    const wrote = before.counter + 1;
    writeState(file, { counter: wrote, writtenBy: process.pid });
    const markerIntact = dropMarker(marker);
    const releaseUs = nowUs();
    await release();
    send({
      type: "section",
      pid: process.pid,
      acquiredUs,
      releaseUs,
      read: before.counter,
      readWriter: before.writtenBy,
      wrote,
      markerOwner,
      markerOwnerKilled,
      markerIntact,
    });
  }
  process.disconnect?.();
}

main().catch((error: Error) => {
  send({ type: "error", pid: process.pid, message: error.message });
  process.exitCode = 1;
  process.disconnect?.();
});
