// The runtimes the shipped binaries this x86_64 glibc machine cannot run natively are run
// under, and how to start a command in each (scripts/run-emulated.mjs, the release dry run
// in __test__/registry/roundtrip.mjs). The runtimes are installed by .ci/emulator-setup.sh,
// which writes $XPLAT_DIR/emulators.sh. What the emulation changes for the tests is listed
// in __test__/emulation.ts.
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";

const XPLAT_DIR = process.env.XPLAT_DIR ?? path.join(os.homedir(), ".cache", "exactlock-cross");

/**
 * runtime: the emulators.sh variable naming it; kind: node or bun; emulator: what runs
 * it (null: natively); muslLoader: for musl runtimes, musl's loader, which stands at
 * /usr/bin/ldd for them, as on Alpine (napi's loader picks the C library from that file,
 * and this host's is glibc's).
 */
export const EMULATED = {
  "linux-arm64-gnu": { runtime: "NODE_ARM64", kind: "node", emulator: "qemu-aarch64" },
  "linux-x64-musl": { runtime: "BUN_X64_MUSL", kind: "bun", emulator: null, muslLoader: "/lib/ld-musl-x86_64.so.1" },
  "linux-arm64-musl": { runtime: "BUN_ARM64_MUSL", kind: "bun", emulator: "qemu-aarch64", muslLoader: "/lib/ld-musl-aarch64.so.1" },
};

export class EmulatorMissing extends Error {}

/** The variables .ci/emulator-setup.sh wrote (`export NAME="value"` lines). */
function emulatorVars() {
  const file = path.join(XPLAT_DIR, "emulators.sh");
  if (!fs.existsSync(file)) throw new EmulatorMissing(`${file} is missing: run .ci/emulator-setup.sh (as root) first`);
  const vars = {};
  for (const match of fs.readFileSync(file, "utf8").matchAll(/^export (\w+)="?([^"\n]*)"?$/gm)) vars[match[1]] = match[2];
  return vars;
}

/**
 * How to run `args` under `platform`'s runtime: `{ label, kind, runtime, command, args, env }`
 * for spawn. musl runtimes run in a private mount namespace (unshare -m, so root) whose
 * /usr/bin/ldd is musl's loader; arm64 glibc programs get the cross glibc through
 * LD_LIBRARY_PATH (never QEMU_LD_PREFIX, which also redirects "/"), with the arm64 node first
 * on PATH for anything that runs a bare `node`.
 */
export function runtimeFor(platform, baseEnv = process.env) {
  const spec = EMULATED[platform];
  if (!spec) throw new EmulatorMissing(`${platform}: not one of ${Object.keys(EMULATED).join(", ")}`);
  const vars = emulatorVars();
  const runtime = vars[spec.runtime];
  if (!runtime || !fs.existsSync(runtime)) throw new EmulatorMissing(`${spec.runtime} (${runtime}) is missing: run .ci/emulator-setup.sh`);
  const env = { ...baseEnv };
  delete env.NAPI_RS_NATIVE_LIBRARY_PATH;
  if (spec.kind === "node") {
    env.LD_LIBRARY_PATH = vars.ARM64_GLIBC_LIBS;
    env.PATH = `${path.dirname(runtime)}${path.delimiter}${env.PATH}`;
  }
  if (spec.muslLoader && process.getuid?.() !== 0) {
    throw new EmulatorMissing("the musl runs bind-mount musl's loader over /usr/bin/ldd in a private mount namespace: run as root");
  }
  const label = `${platform} (${spec.kind === "node" ? "Node" : "Bun"}, ${spec.emulator ?? "native"})`;
  const wrap = (args) =>
    spec.muslLoader
      ? {
          command: "/usr/bin/unshare",
          args: ["--mount", "--propagation", "private", "--", "/bin/sh", "-c", '/bin/mount --bind "$0" /usr/bin/ldd && exec "$@"', spec.muslLoader, runtime, ...args],
        }
      : { command: runtime, args };
  return { label, kind: spec.kind, runtime, env, wrap };
}
