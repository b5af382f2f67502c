#!/usr/bin/env bash
# Every platform package.json ships but this machine's own, on this Debian 12 x86_64 machine
# (called by .ci/run after `npm test`; runs alone too, as root):
#   1. builds the seven other binaries (`npm run build:target -- cross`: Debian's toolchain
#      with -Zbuild-std, linked by zig, or for Windows x64 by mingw-w64: the Windows ones are
#      MinGW builds under the MSVC packages' names, scripts/targets.mjs) and `cargo clippy`
#      for both macOS CPUs and for Windows;
#   2. checks all eight binaries as files (scripts/check-artifact.mjs);
#   3. runs three of them under the runtime each is for (npm run test:emulated): arm64 Node
#      under qemu-user, Bun's x64 musl build, Bun's arm64 musl build under qemu-user; and
#      the Windows x64 one under Windows node.exe in Wine (npm run test:windows);
#   4. dry-runs the whole publish path against a local registry (npm run test:release): all
#      eight platform packages staged and published, then installed per Linux target and the
#      consumer's tests run under that target's runtime; the macOS and Windows ones
#      installed and checked as files.
#
# This machine's own binary (linux-x64-gnu) is the one `npm install` built and `npm test`
# tested: it is checked, not rebuilt. The two macOS binaries are linked and checked, never run.
set -euo pipefail
cd "$(dirname "$0")/.."

started=$SECONDS
echo "== cross toolchain (.ci/cross-setup.sh)"
bash .ci/cross-setup.sh
. "${XPLAT_DIR:-$HOME/.cache/exactlock-cross}/env.sh"
echo "== Windows: mingw, Wine, node.exe and node.exe's import libraries (.ci/windows-setup.sh)"
windows_setup_started=$SECONDS
bash .ci/windows-setup.sh
. "${XPLAT_DIR:-$HOME/.cache/exactlock-cross}/windows.sh"
windows_setup=$((SECONDS - windows_setup_started))

echo "== the other seven targets: npm run build:target -- cross"
build_started=$SECONDS
npm run --silent build:target -- cross
built=$((SECONDS - build_started))

echo "== cargo clippy for both macOS CPUs (-Zbuild-std)"
clippy_started=$SECONDS
for triple in aarch64-apple-darwin x86_64-apple-darwin; do
  cargo clippy --quiet -Zbuild-std=std,panic_abort --target "$triple" --all-targets -- -D warnings
  echo "clippy $triple: clean"
done

echo "== cargo clippy for x86_64-pc-windows-gnu (-Zbuild-std)"
cargo clippy --quiet -Zbuild-std=std,panic_abort --target x86_64-pc-windows-gnu --all-targets -- -D warnings
echo "clippy x86_64-pc-windows-gnu: clean"
linted=$((SECONDS - clippy_started))

echo "== all eight binaries: npm run check:artifact -- --all"
npm run --silent check:artifact -- --all

echo "== runtimes for the emulated runs (.ci/emulator-setup.sh)"
bash .ci/emulator-setup.sh

echo "== arm64 gnu (qemu), x64 musl and arm64 musl (qemu): npm run test:emulated"
emulated_started=$SECONDS
npm run --silent test:emulated
emulated=$((SECONDS - emulated_started))

echo "== the Windows x64 binary's suite, run by Windows node.exe under Wine: npm run test:windows -- --no-build"
windows_started=$SECONDS
npm run --silent test:windows -- --no-build
windowed=$((SECONDS - windows_started + windows_setup))

echo "== the publish path, dry run against a local registry: npm run test:release"
release_started=$SECONDS
npm run --silent test:release
released=$((SECONDS - release_started))

echo "== other platforms: builds ${built} s, macOS and Windows clippy ${linted} s, emulated runs ${emulated} s, Windows ${windowed} s, release dry run ${released} s, total $((SECONDS - started)) s"
