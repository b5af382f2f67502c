// The platforms exactlock ships a binary for: one row per Rust target triple in
// package.json's `napi.targets`, with what building and checking it needs. Read by
// scripts/build-native.mjs (how to build) and scripts/check-artifact.mjs (what the
// result must be); a triple added to package.json without a row here fails both.
import * as fs from "node:fs";
import * as path from "node:path";
import { fileURLToPath } from "node:url";

export const ROOT = path.join(path.dirname(fileURLToPath(import.meta.url)), "..");

/** The oldest glibc the Linux gnu binaries may ask for (SPEC §6: 2.17+). */
export const GLIBC_FLOOR = "2.17";

/**
 * platform: napi's name (`exactlock.<platform>.node`, `npm/<platform>/`).
 * os, arch, libc: what the binary must be. macosMin: the oldest macOS it must load on,
 * given to the linker as MACOSX_DEPLOYMENT_TARGET (without it zig stamps its own
 * newest, 15.0); 11.0 is the first arm64 macOS, 10.13 the floor for x64.
 * crossTriple: what this triple is built as on a machine that is not its OS. The Windows
 * packages are MSVC builds, made by the workflow's Windows runners; a Linux machine has no
 * MSVC, so it builds the MinGW ABI of the same CPU (mingw-w64 for x64, zig's LLVM MinGW for
 * arm64) under the MSVC name. A napi addon's boundary is C's ABI, which both share, and napi's
 * loader under an official (MSVC) node.exe looks only for the `-msvc` name.
 */
const ROWS = {
  "x86_64-unknown-linux-gnu": { platform: "linux-x64-gnu", os: "linux", arch: "x86_64", libc: "gnu" },
  "aarch64-unknown-linux-gnu": { platform: "linux-arm64-gnu", os: "linux", arch: "aarch64", libc: "gnu" },
  "x86_64-unknown-linux-musl": { platform: "linux-x64-musl", os: "linux", arch: "x86_64", libc: "musl" },
  "aarch64-unknown-linux-musl": { platform: "linux-arm64-musl", os: "linux", arch: "aarch64", libc: "musl" },
  "aarch64-apple-darwin": { platform: "darwin-arm64", os: "darwin", arch: "aarch64", macosMin: "11.0" },
  "x86_64-apple-darwin": { platform: "darwin-x64", os: "darwin", arch: "x86_64", macosMin: "10.13" },
  "x86_64-pc-windows-msvc": { platform: "win32-x64-msvc", os: "win32", arch: "x86_64", crossTriple: "x86_64-pc-windows-gnu" },
  "aarch64-pc-windows-msvc": { platform: "win32-arm64-msvc", os: "win32", arch: "aarch64", crossTriple: "aarch64-pc-windows-gnullvm" },
};

function packageJson() {
  return JSON.parse(fs.readFileSync(path.join(ROOT, "package.json"), "utf8"));
}

/** The binary's base name (`exactlock`), as napi names its files. */
export const BINARY_NAME = packageJson().napi.binaryName;

/** Every shipped target, in package.json's order: `{ triple, platform, os, arch, libc?, macosMin?, crossTriple? }`. */
export function shippedTargets() {
  return packageJson().napi.targets.map((triple) => {
    const row = ROWS[triple];
    if (!row) throw new Error(`package.json napi.targets names ${triple}, which scripts/targets.mjs does not describe`);
    return { triple, ...row };
  });
}

/** The shipped target `name` denotes: a triple (`aarch64-apple-darwin`) or a platform (`darwin-arm64`). */
export function findTarget(name) {
  return shippedTargets().find((target) => target.triple === name || target.platform === name);
}

/** Where a target's binary is written: `native/exactlock.<platform>.node` (what `napi artifacts -o native` reads). */
export function binaryPath(target) {
  return path.join(ROOT, "native", `${BINARY_NAME}.${target.platform}.node`);
}
