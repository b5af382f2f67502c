#!/usr/bin/env bash
# cross-setup.sh: what `npm run build:target -- TRIPLE` needs on a Debian 12 (bookworm)
# x86_64 machine to build every platform package.json ships, without rustup
# downloading anything:
#   - Debian's rustc-web/cargo-web/rust-web-src (and its clippy): a second Rust
#     toolchain in /usr/bin that carries the standard library's source, so
#     `-Zbuild-std` builds std for any target (rustup's own toolchain stays as it is);
#   - zig and cargo-zigbuild (PyPI, in a private venv): the linker for glibc 2.17,
#     musl and Mach-O.
# Then it writes $XPLAT_DIR/env.sh, to source in the shell that cross-builds:
#   . "$XPLAT_DIR/env.sh" && npm run build:target -- aarch64-apple-darwin
#
# Idempotent: a second run only checks. Run as root (apt-get); without root it
# only checks and says what is missing.
#   XPLAT_DIR  where the venv, the shims and env.sh go (default: $HOME/.cache/exactlock-cross)
set -euo pipefail

XPLAT_DIR=${XPLAT_DIR:-$HOME/.cache/exactlock-cross}

say() { printf '== cross-setup: %s\n' "$*"; }
die() { printf 'cross-setup: %s\n' "$*" >&2; exit 1; }

[ "$(uname -m)" = x86_64 ] || die "an x86_64 host is assumed"
mkdir -p "$XPLAT_DIR"
XPLAT_DIR=$(cd "$XPLAT_DIR" && pwd)

# --- 1. Debian packages ------------------------------------------------------------
PKGS=(rustc-web cargo-web rust-web-src rust-web-clippy python3-venv)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  [ "$(id -u)" = 0 ] || die "missing Debian packages (run as root to install): ${missing[*]}"
  say "apt-get install ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  say "Debian packages present ($(/usr/bin/rustc --version))"
fi
[ -e /usr/lib/rustlib/src/rust/library/Cargo.lock ] || die "rust-web-src installed, but /usr/lib/rustlib/src/rust/library is missing"

# --- 2. zig and cargo-zigbuild in a private venv (pinned there) ------------------------
bash "$(dirname "$0")/python-tools.sh" "$XPLAT_DIR/venv" zig
ZIG_DIR=$("$XPLAT_DIR/venv/bin/python" -c 'import ziglang, os; print(os.path.dirname(ziglang.__file__))')

# --- 3. Shims: `cargo`, `rustc` and clippy mean Debian's toolchain ---------------------
# rustup's proxies come first on PATH otherwise, and the napi CLI runs a bare `cargo`.
mkdir -p "$XPLAT_DIR/bin"
for tool in cargo rustc cargo-clippy clippy-driver; do
  ln -sfn "/usr/bin/$tool" "$XPLAT_DIR/bin/$tool"
done
# rustc strips Apple binaries (`strip = "symbols"`) with `rust-objcopy`, which Debian's
# rustc-web does not ship; it looks for it on PATH. rustup's copy (the same tool), run with
# its toolchain's libLLVM (a symlink would look for it beside the link), else LLVM's objcopy.
objcopy=$(ls -d "$HOME"/.rustup/toolchains/*-x86_64-unknown-linux-gnu/lib/rustlib/x86_64-unknown-linux-gnu/bin/rust-objcopy 2>/dev/null | head -n 1 || true)
rm -f "$XPLAT_DIR/bin/rust-objcopy"
if [ -n "$objcopy" ]; then
  toolchain_lib=$(cd "$(dirname "$objcopy")/../../.." && pwd)
  printf '#!/bin/sh\nLD_LIBRARY_PATH="%s${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "%s" "$@"\n' "$toolchain_lib" "$objcopy" > "$XPLAT_DIR/bin/rust-objcopy"
  chmod +x "$XPLAT_DIR/bin/rust-objcopy"
elif command -v llvm-objcopy >/dev/null 2>&1; then
  ln -sfn "$(command -v llvm-objcopy)" "$XPLAT_DIR/bin/rust-objcopy"
else
  die "no rust-objcopy (rustup) nor llvm-objcopy to strip the macOS binaries with"
fi
"$XPLAT_DIR/bin/rust-objcopy" --version >/dev/null || die "rust-objcopy does not run"

# --- 4. env.sh --------------------------------------------------------------------------
cat > "$XPLAT_DIR/env.sh.new" <<EOF
# Source in the shell that cross-builds (not in an everyday shell: cargo and rustc
# become Debian's, and RUSTC_BOOTSTRAP=1 lets them take -Zbuild-std).
export XPLAT_DIR="$XPLAT_DIR"
export PATH="\$XPLAT_DIR/bin:\$XPLAT_DIR/venv/bin:$ZIG_DIR:\$PATH"
export RUSTC=/usr/bin/rustc RUSTC_BOOTSTRAP=1
EOF
mv "$XPLAT_DIR/env.sh.new" "$XPLAT_DIR/env.sh"

. "$XPLAT_DIR/env.sh"
say "ready: cargo $(cargo --version | cut -d' ' -f2), zig $(zig version), $(cargo-zigbuild --version)"
say "use:   . $XPLAT_DIR/env.sh && npm run build:target -- TRIPLE"
