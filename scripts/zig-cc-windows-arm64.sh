#!/usr/bin/env bash
# The linker of aarch64-pc-windows-gnullvm on a Linux machine: zig's clang and lld with its
# LLVM MinGW libraries (scripts/build-native.mjs sets it as cargo's linker for that target).
# Three of rustc's arguments are translated for zig:
#   -Wl,FILE.def  the DLL's export list: zig takes a module-definition file as an input;
#   -lnode        node.exe's import library (napi-build asks for it; $LIBNODE_PATH holds
#                 .ci/windows-setup.sh's arm64 one): zig looks only for node.dll, so it is
#                 given by path. napi finds its functions at run time; nothing is imported;
#   -lmsvcrt      zig's MinGW has no msvcrt for arm64: the Universal CRT (ucrtbase.dll,
#                 part of Windows 10 and later) it links by default instead.
set -euo pipefail
args=()
for arg in "$@"; do
  case "$arg" in
    -Wl,*.def) args+=("${arg#-Wl,}") ;;
    -lnode) args+=("${LIBNODE_PATH:?LIBNODE_PATH: run .ci/windows-setup.sh and source windows.sh}/libnode.dll.a") ;;
    -lmsvcrt) args+=("-lucrtbase") ;;
    *) args+=("$arg") ;;
  esac
done
exec zig cc -target aarch64-windows-gnu "${args[@]}"
