/**
 * One contender of `exactlock demo` (forked by demo.ts, talks over IPC).
 *
 * Loop: update the counter file with updateJson (under its lock: read,
 * write whole, release); inside the update, claim the occupancy marker (a
 * file that only the holder may have: finding the marker of a holder the
 * demo has not killed is a violation), work a few milliseconds, drop the
 * marker, checking it still names us, and return counter + 1 with the
 * writer's pid; then report. The verdicts come from the marker and the
 * kill records alone; the timestamps (CLOCK_MONOTONIC microseconds,
 * comparable across processes) only measure latencies. The counter is a
 * throwaway file: its writes skip the fsyncs (`durable: false`), so the
 * hand-off the demo measures (from a section's end to the next one's
 * start) is the lock's and a rename's, not the disk's.
 */
import { closeSync, existsSync, openSync, readFileSync, unlinkSync, writeFileSync, writeSync } from "node:fs";
import { updateJson } from "../index.js";
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
    let section: WorkerMessage | undefined;
    try {
      await updateJson<DemoState>(
        file,
        async (before = { counter: 0, writtenBy: 0 }) => {
          const acquiredUs = nowUs();
          const markerOwner = claimMarker(marker);
          const markerOwnerKilled = markerOwner !== null && existsSync(killRecordPath(marker, markerOwner));
          send({ type: "enter", pid: process.pid });
          await sleep(sectionMin + Math.random() * sectionSpan);
          const wrote = before.counter + 1;
          const markerIntact = dropMarker(marker);
          section = {
            type: "section",
            pid: process.pid,
            acquiredUs,
            releaseUs: nowUs(),
            read: before.counter,
            readWriter: before.writtenBy,
            wrote,
            markerOwner,
            markerOwnerKilled,
            markerIntact,
          };
          return { counter: wrote, writtenBy: process.pid };
        },
        { retries: 1e7, retryDelayMs: 100, signal: stop.signal, durable: false },
      );
    } catch (error) {
      if (stop.signal.aborted) break;
      throw error;
    }
    if (section) send(section);
  }
  process.disconnect?.();
}

main().catch((error: Error) => {
  send({ type: "error", pid: process.pid, message: error.message });
  process.exitCode = 1;
  process.disconnect?.();
});
