//! exactlock's native core. This file is only the napi surface: every
//! function here converts arguments and results and calls into a module that
//! does the work.

#![deny(unsafe_code)]

mod fsx;
mod napi_primitives;
mod rename;
mod tree;

use napi_derive::napi;

/// The version of the native core, for diagnostics.
#[napi]
pub fn native_version() -> String {
    env!("CARGO_PKG_VERSION").to_string()
}
