/** What the demo's workers and the demo itself share: the state file's shape, the messages, the clock. */

/** The contents of the demo's shared file. */
export interface DemoState {
  counter: number;
  /** The pid of the process that wrote `counter`. */
  writtenBy: number | null;
}

/** Messages a worker sends to the demo. */
export type WorkerMessage =
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
      /** Whether our marker was still ours at the end of the section. */
      markerIntact: boolean;
    }
  | { type: "error"; pid: number; message: string };

/** CLOCK_MONOTONIC in microseconds: comparable across processes of one machine. */
export function nowUs(): number {
  return Number(process.hrtime.bigint() / 1000n);
}
