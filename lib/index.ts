/**
 * exactlock — a cross-process lock for a file path.
 *
 * This facade validates arguments, applies defaults, wires AbortSignal and
 * shapes errors; the native core (Rust, ../native) does the locking.
 */
import * as native from "../native/index.js";

export const nativeVersion: () => string = native.nativeVersion;
export * from "./primitives.js";
