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

/** The runtime, as a user would name it: `Node v20.19.0`, `Bun 1.4.5`. */
function runtimeName(): string {
  const bun = (process.versions as { bun?: string }).bun;
  return bun ? `Bun ${bun}` : `Node ${process.version}`;
}

/** Whether the platform package `name` can be found from here (installed, but its binary did not load). */
function installed(name: string): boolean {
  try {
    require.resolve(`${name}/package.json`);
    return true;
  } catch {
    return false;
  }
}

/**
 * Why the load failed and the one thing to do, in one short message naming
 * what was found; the loader's own errors are the `cause`.
 */
export function noBinaryError(cause: unknown, found: string = platformName(), present = installed(`exactlock-${found}`)): Error {
  const supported = (PREBUILT_PLATFORMS as readonly string[]).includes(found);
  const where = `${found}, ${runtimeName()}`;
  let message: string;
  if (!supported) {
    message =
      `exactlock: no prebuilt binary for ${where} (prebuilt: ${PREBUILT_PLATFORMS.join(", ")}` +
      `${found.startsWith("win32") ? "; Windows is not supported" : ""}). ` +
      "Build one from source: README, \"No binary for this machine\".";
  } else if (present) {
    message =
      `exactlock: exactlock-${found} is installed but its binary did not load on ${where}; ` +
      "the reason is this error's cause (a bundle that left the platform package out of reach is one).";
  } else {
    message =
      `exactlock: the binary for ${where} is missing: its package exactlock-${found} was not installed. ` +
      "Reinstall without --omit=optional (delete the lockfile first if it was made on another platform).";
  }
  const error = new Error(message, { cause }) as Error & { code: string };
  error.code = NO_BINARY_CODE;
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
