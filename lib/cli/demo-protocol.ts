/**
 * What the demo's workers and the demo itself share: the state file's shape,
 * the messages, the kill records, the clock.
 */
import { native } from "../native.js";

/** The contents of the demo's shared file. */
export interface DemoState {
  counter: number;
  /** The pid of the process that wrote `counter`. */
  writtenBy: number | null;
}

/** Messages a worker sends to the demo. */
export type WorkerMessage =
  /** Its runtime has started and it is about to ask for the lock (waiting, it would reclaim a killed holder's). */
  | { type: "ready"; pid: number }
  | { type: "enter"; pid: number }
  | {
      type: "section";
      pid: number;
      /** Stamped right after acquireLock resolved. */
      acquiredUs: number;
      /** Stamped right before release() was called. */
      releaseUs: number;
      read: number;
      readWriter: number | null;
      wrote: number;
      /** The pid in an occupancy marker found on entry, or null if there was none. */
      markerOwner: number | null;
      /**
       * Whether the demo had recorded the SIGKILL of `markerOwner` (see
       * {@link killRecordPath}) when this section found its marker. False
       * when there was no marker.
       */
      markerOwnerKilled: boolean;
      /** Whether our marker was still ours at the end of the section. */
      markerIntact: boolean;
    }
  | { type: "error"; pid: number; message: string };

/**
 * The file the demo creates before it SIGKILLs `pid`. A section that finds
 * `pid`'s occupancy marker tells by it, without comparing clocks, whether it
 * entered after the kill (a reclaim) or while `pid` could still run (a
 * violation): the record is written before the signal is sent.
 */
export function killRecordPath(marker: string, pid: number): string {
  return `${marker}.killed.${pid}`;
}

/**
 * CLOCK_MONOTONIC in microseconds, read natively: comparable across
 * processes of one machine. (`process.hrtime` is not under Bun: it counts
 * from the process's start.) For the latencies only; no verdict compares stamps.
 */
export function nowUs(): number {
  return Number(BigInt(native.monotonicNs()) / 1000n);
}
