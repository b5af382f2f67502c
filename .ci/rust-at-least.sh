#!/bin/sh
# rust-at-least.sh: fails unless this machine's rustc is at least the crate's rust-version
# (Cargo.toml). Where rustc is a distribution's (Alpine's `apk add rust`), the image's
# version decides it: this says so before a build fails on an edition or an API.
set -eu
cd "$(dirname "$0")/.."
need=$(sed -n 's/^rust-version = "\(.*\)"$/\1/p' Cargo.toml)
have=$(rustc --version | cut -d' ' -f2)
[ -n "$need" ] || { echo "rust-at-least: no rust-version in Cargo.toml" >&2; exit 1; }
lowest=$(printf '%s\n%s\n' "$need" "$have" | sort -t. -k1,1n -k2,2n -k3,3n | head -n 1)
if [ "$lowest" != "$need" ]; then
  echo "rust-at-least: rustc $have is older than the crate's rust-version $need" >&2
  exit 1
fi
echo "rustc $have, the crate needs $need or later"
