/**
 * Loads the native core: the binary built in this clone (`native/`), or the
 * prebuilt one from the platform package npm installed beside exactlock
 * (`exactlock-<platform>-<arch>[-<libc>]`, an optional dependency). napi's
 * generated loader does the finding; this module only turns its failure into
 * an error a user can act on.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import type * as Binding from "../native/index.js";

/** The platforms a prebuilt binary is published for: `npm/<name>/`, package.json `napi.targets`. */
export const PREBUILT_PLATFORMS = [
  "linux-x64-gnu",
  "linux-arm64-gnu",
  "linux-x64-musl",
  "linux-arm64-musl",
  "darwin-arm64",
  "darwin-x64",
  "win32-x64-msvc",
  "win32-arm64-msvc",
] as const;

/** The `code` of the error thrown when no native binary fits this machine. */
export const NO_BINARY_CODE = "ERR_EXACTLOCK_NO_BINARY";

/** This process's platform as a prebuilt package names it: `linux-x64-gnu`, `darwin-arm64`, `win32-x64-msvc`. */
export function platformName(
  platform: string = process.platform,
  arch: string = process.arch,
  glibc?: boolean,
): string {
  // Windows packages are named for the MSVC ABI the official node.exe is built with.
  if (platform === "win32") return `${platform}-${arch}-msvc`;
  if (platform !== "linux") return `${platform}-${arch}`;
  // Only Linux asks which C library runs (a process report: not free).
  return `${platform}-${arch}-${(glibc ?? runsOnGlibc()) ? "gnu" : "musl"}`;
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
export function noBinaryError(
  cause: unknown,
  found: string = platformName(),
  present = installed(`exactlock-${found}`),
  inBundle = false,
): Error {
  const supported = (PREBUILT_PLATFORMS as readonly string[]).includes(found);
  const where = `${found}, ${runtimeName()}`;
  let message: string;
  const override = process.env.NAPI_RS_NATIVE_LIBRARY_PATH;
  if (override) {
    message = `exactlock: NAPI_RS_NATIVE_LIBRARY_PATH names ${override}, which did not load on ${where}; the reason is this error's cause.`;
  } else if (inBundle && supported) {
    message =
      `exactlock: bundled, and no binary for ${where} loads beside the bundle: copy ` +
      `node_modules/exactlock-${found}/exactlock.${found}.node next to it (README, "Bundling").`;
  } else if (!supported) {
    message =
      `exactlock: no prebuilt binary for ${where} (prebuilt: ${PREBUILT_PLATFORMS.join(", ")}). ` +
      "Build one from source: README, \"No binary for this machine\".";
  } else if (present) {
    message =
      `exactlock: exactlock-${found} is installed but its binary did not load on ${where}; ` +
      "the reason is this error's cause.";
  } else {
    message =
      `exactlock: the binary for ${where} is missing: its package exactlock-${found} was not installed. ` +
      "Reinstall without --omit=optional (delete the lockfile first if it was made on another platform).";
  }
  const error = new Error(message, { cause }) as Error & { code: string };
  error.code = NO_BINARY_CODE;
  return error;
}

/**
 * Whether this module runs from a bundle rather than from the installed
 * package: installed, it is `dist/native.js` with napi's loader at
 * `../native/index.js`; a bundler inlines both into one file.
 */
function bundled(): boolean {
  return typeof __filename !== "string" || !/[\\/](dist[\\/]native\.[cm]?js|lib[\\/]native\.ts)$/.test(__filename);
}

/** Whether this process is a runtime itself (node, bun), not an application compiled into one. */
function plainRuntime(): boolean {
  return /^(node|nodejs|bun)(\.exe)?$/i.test(path.basename(process.execPath));
}

/**
 * The folders a bundle may have put the binary beside: this module's own
 * (a CommonJS bundle), the entry script's, and, for an application compiled
 * into one executable (`bun build --compile`, Node's single-executable
 * apps), the executable's; never a plain runtime's own folder (/usr/bin).
 */
function bundleFolders(): string[] {
  const folders = [
    typeof __dirname === "string" ? __dirname : undefined,
    require.main?.filename ? path.dirname(require.main.filename) : undefined,
    process.argv[1] ? path.dirname(path.resolve(process.argv[1])) : undefined,
    plainRuntime() ? undefined : path.dirname(process.execPath),
  ];
  return [...new Set(folders.filter((folder): folder is string => folder !== undefined))];
}

/**
 * This platform's binary beside the bundle: `exactlock.<platform>.node`, or the
 * copy a bundler named with a hash (`exactlock.<platform>-ABCD1234.node`, esbuild's
 * `copy` and `file` loaders).
 */
export function binaryBesideBundle(folders: readonly string[] = bundleFolders(), found: string = platformName()): string | undefined {
  const name = new RegExp(`^exactlock\\.${found.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}(-[A-Za-z0-9]+)?\\.node$`);
  for (const folder of folders) {
    let entries: string[];
    try {
      entries = fs.readdirSync(folder);
    } catch {
      continue;
    }
    // The exact name first (what the error tells a user to copy), then a bundler's hashed copy.
    const exact = `exactlock.${found}.node`;
    const match = entries.includes(exact) ? exact : entries.sort().find((entry) => name.test(entry));
    if (match) return path.join(folder, match);
  }
  return undefined;
}

/** This package's version (bundlers inline the JSON), or undefined when it cannot be read. */
function packageVersion(): string | undefined {
  try {
    return (require("../package.json") as { version?: string }).version;
  } catch {
    return undefined;
  }
}

/** Whether napi's loader gave a binding (a bundler's `file` loader makes it a path string instead). */
function isBinding(value: unknown): value is typeof Binding {
  return typeof value === "object" && value !== null && typeof (value as { nativeVersion?: unknown }).nativeVersion === "function";
}

/**
 * napi's generated loader. Where it cannot tell musl from glibc by
 * `/usr/bin/ldd` (a distroless or slim image), it asks for a process report
 * and first sets `process.report.excludeNetwork = true`, for good: the
 * program's own diagnostic reports would lose their network section because
 * it imported a lock. What the setting was is put back.
 */
function requireNapiLoader(): unknown {
  // As napi's loader does (`process.report && …`): only an object is touched.
  const candidate: unknown = process.report;
  const report = typeof candidate === "object" && candidate !== null ? (candidate as { excludeNetwork?: boolean }) : undefined;
  const had = report !== undefined && "excludeNetwork" in report;
  const excludeNetwork = report?.excludeNetwork;
  try {
    return require("../native/index.js");
  } finally {
    if (report && !had) delete report.excludeNetwork;
    else if (report && report.excludeNetwork !== excludeNetwork) report.excludeNetwork = excludeNetwork;
  }
}

function load(): typeof Binding {
  let cause: unknown;
  try {
    // A CommonJS require so the failure can be caught and reshaped here.
    const loaded: unknown = requireNapiLoader();
    if (isBinding(loaded)) return loaded;
    cause = new Error("napi's loader returned no binding (a bundler that turned the .node into a file path?)");
  } catch (error) {
    cause = error;
  }
  if (bundled()) {
    const beside = binaryBesideBundle();
    if (beside) {
      let loaded: unknown;
      try {
        loaded = require(beside);
      } catch (error) {
        throw noBinaryError(error, platformName(), false, true);
      }
      if (isBinding(loaded)) {
        // A binary left beside an older or newer bundle would run the wrong core.
        const expected = packageVersion();
        if (expected === undefined || loaded.nativeVersion() === expected) return loaded;
        throw noBinaryError(
          new Error(`${beside} is exactlock ${loaded.nativeVersion()}, this bundle is exactlock ${expected}`),
          platformName(),
          false,
          true,
        );
      }
    }
    throw noBinaryError(cause, platformName(), false, true);
  }
  throw noBinaryError(cause);
}

/** The native core. */
export const native: typeof Binding = load();
