/**
 * Loads the native core: the binary built in this clone (`native/`), or the
 * prebuilt one from the platform package npm installed beside exactlock
 * (`exactlock-<platform>-<arch>[-<libc>]`, an optional dependency). napi's
 * generated loader does the finding; this module only turns its failure into
 * an error a user can act on.
 */
import type * as Binding from "../native/index.js";

/** The platforms a prebuilt binary is published for: `npm/<name>/`, package.json `napi.targets`. */
export const PREBUILT_PLATFORMS = [
  "linux-x64-gnu",
  "linux-arm64-gnu",
  "linux-x64-musl",
  "linux-arm64-musl",
  "darwin-arm64",
  "darwin-x64",
] as const;

/** The `code` of the error thrown when no native binary fits this machine. */
export const NO_BINARY_CODE = "ERR_EXACTLOCK_NO_BINARY";

/** This process's platform as a prebuilt package names it: `linux-x64-gnu`, `darwin-arm64`. */
export function platformName(
  platform: string = process.platform,
  arch: string = process.arch,
  glibc: boolean = runsOnGlibc(),
): string {
  if (platform !== "linux") return `${platform}-${arch}`;
  return `${platform}-${arch}-${glibc ? "gnu" : "musl"}`;
}

function runsOnGlibc(): boolean {
  const report = process.report?.getReport() as { header?: { glibcVersionRuntime?: string } } | undefined;
  return Boolean(report?.header?.glibcVersionRuntime);
}

/** Why the load failed and what to do, naming what was found. */
export function noBinaryError(cause: unknown, found: string = platformName()): Error {
  const supported = (PREBUILT_PLATFORMS as readonly string[]).includes(found);
  const fix = supported
    ? `exactlock ships this platform's binary as the optional dependency exactlock-${found}; ` +
      "it is missing, so reinstall without --omit=optional / --no-optional " +
      "(delete node_modules and the lockfile if a lockfile made on another platform left it out), " +
      "or build from source"
    : `exactlock ships prebuilt binaries for ${PREBUILT_PLATFORMS.join(", ")} only, so build from source`;
  const error = new Error(
    `exactlock: no native binary loads on ${found} (node ${process.version}): ${fix} — ` +
      "with a Rust toolchain (rustup.rs), run `npm install` in a clone of exactlock, then point " +
      "NAPI_RS_NATIVE_LIBRARY_PATH at its native/exactlock.<platform>.node. Windows is not supported (see the README).",
  ) as Error & { code: string };
  error.code = NO_BINARY_CODE;
  error.cause = cause;
  return error;
}

function load(): typeof Binding {
  try {
    // A CommonJS require so the failure can be caught and reshaped here.
    return require("../native/index.js") as typeof Binding;
  } catch (cause) {
    throw noBinaryError(cause);
  }
}

/** The native core. */
export const native: typeof Binding = load();
