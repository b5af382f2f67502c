//! The napi surface: JavaScript values in, calls into [`crate::lock`] and
//! [`crate::fs`], JavaScript values out. Conversions only.

mod debris;
mod env;
mod lock;
mod lost;
mod primitives;
mod probe;
mod update;

use napi_derive::napi;

/// The version of the native core, for diagnostics.
#[napi]
pub fn native_version() -> String {
    env!("CARGO_PKG_VERSION").to_string()
}

/// The kernel mechanisms in use: `"linux"`, `"macos"`, `"windows"`, or
/// `"portable"` when `EXACTLOCK_PLATFORM=portable` forced the portable ones.
#[napi(ts_return_type = "\"linux\" | \"macos\" | \"windows\" | \"portable\"")]
pub fn native_platform() -> String {
    crate::sys::platform::name().to_string()
}

/// Whether a free lock can be taken on the caller's thread here: the kernel
/// opens a directory from its caches alone (Linux 5.12+ `openat2`
/// `RESOLVE_CACHED`). Where not (older kernels, qemu-user, macOS, Windows)
/// every attempt runs off the thread. For tests (`exactlock/testing`).
#[napi]
pub fn inline_fast_path_possible() -> bool {
    crate::sys::platform::can_open_cached()
}
