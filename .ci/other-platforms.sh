#!/usr/bin/env bash
# Every platform package.json ships but this machine's own, on this Debian 12 x86_64 machine
# (called by .ci/run after `npm test`; runs alone too, as root):
#   1. builds the five other binaries (`npm run build:target -- cross`: Debian's toolchain
#      with -Zbuild-std, linked by zig) and `cargo clippy` for both macOS CPUs;
#   2. checks all six binaries as files (scripts/check-artifact.mjs);
#   3. runs three of them under the runtime each is for (npm run test:emulated): arm64 Node
#      under qemu-user, Bun's x64 musl build, Bun's arm64 musl build under qemu-user;
#   4. dry-runs the whole publish path against a local registry (npm run test:release): all
#      six platform packages staged and published, then installed per Linux target and the
#      consumer's tests run under that target's runtime; the macOS ones installed and checked.
#
# This machine's own binary (linux-x64-gnu) is the one `npm install` built and `npm test`
# tested: it is checked, not rebuilt. The two macOS binaries are linked and checked, never run.
set -euo pipefail
cd "$(dirname "$0")/.."

started=$SECONDS
echo "== cross toolchain (.ci/cross-setup.sh)"
bash .ci/cross-setup.sh
. "${XPLAT_DIR:-$HOME/.cache/exactlock-cross}/env.sh"

echo "== the other five targets: npm run build:target -- cross"
build_started=$SECONDS
npm run --silent build:target -- cross
built=$((SECONDS - build_started))

echo "== cargo clippy for both macOS CPUs (-Zbuild-std)"
clippy_started=$SECONDS
for triple in aarch64-apple-darwin x86_64-apple-darwin; do
  cargo clippy --quiet -Zbuild-std=std,panic_abort --target "$triple" --all-targets -- -D warnings
  echo "clippy $triple: clean"
done
linted=$((SECONDS - clippy_started))

echo "== all six binaries: npm run check:artifact -- --all"
npm run --silent check:artifact -- --all

echo "== runtimes for the emulated runs (.ci/emulator-setup.sh)"
bash .ci/emulator-setup.sh

echo "== arm64 gnu (qemu), x64 musl and arm64 musl (qemu): npm run test:emulated"
emulated_started=$SECONDS
npm run --silent test:emulated
emulated=$((SECONDS - emulated_started))

echo "== Windows: mingw, Wine and node.exe (.ci/windows-setup.sh)"
windows_started=$SECONDS
bash .ci/windows-setup.sh
echo "== cargo clippy for x86_64-pc-windows-gnu (-Zbuild-std)"
( . "${XPLAT_DIR:-$HOME/.cache/exactlock-cross}/windows.sh"
  cargo clippy --quiet -Zbuild-std=std,panic_abort --target x86_64-pc-windows-gnu -- -D warnings )
echo "clippy x86_64-pc-windows-gnu: clean"
echo "== the Windows binary built (mingw) and its suite run by Windows node.exe under Wine: npm run test:windows"
npm run --silent test:windows
windowed=$((SECONDS - windows_started))

echo "== the publish path, dry run against a local registry: npm run test:release"
release_started=$SECONDS
npm run --silent test:release
released=$((SECONDS - release_started))

echo "== other platforms: builds ${built} s, macOS clippy ${linted} s, emulated runs ${emulated} s, Windows ${windowed} s, release dry run ${released} s, total $((SECONDS - started)) s"
