#!/usr/bin/env bash
# Builds every platform package.json ships, on this Debian 12 x86_64 machine, and
# checks each binary as a file (scripts/check-artifact.mjs); `cargo clippy` for both
# macOS CPUs. Called by .ci/run after `npm test`; runs alone too (root the first time,
# for apt-get in cross-setup.sh).
#
# This machine's own binary (linux-x64-gnu) is the one `npm install` built and
# `npm test` tested: it is checked, not rebuilt. The five others are built by
# `npm run build:target -- cross` with Debian's toolchain (-Zbuild-std) and zig;
# none of them is run here.
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

echo "== every target built and checked: builds ${built} s, macOS clippy ${linted} s, total $((SECONDS - started)) s"
