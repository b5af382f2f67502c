//! Names as the `*at` calls take them: rustix's `path::Arg`, and the check
//! that makes one a single component NT cannot resolve further.

use std::borrow::Cow;
use std::ffi::{CStr, CString, OsStr, OsString};
use std::os::windows::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::super::io::Errno;

/// rustix's `path::Arg`: what a name or path may be given as.
pub trait Arg {
    /// The name as an `OsStr`; `EINVAL` for bytes that are no Windows name
    /// (a `CStr` that is not UTF-8).
    fn as_os_str_arg(&self) -> Result<Cow<'_, OsStr>, Errno>;
}

impl Arg for OsStr {
    fn as_os_str_arg(&self) -> Result<Cow<'_, OsStr>, Errno> {
        Ok(Cow::Borrowed(self))
    }
}

impl Arg for str {
    fn as_os_str_arg(&self) -> Result<Cow<'_, OsStr>, Errno> {
        Ok(Cow::Borrowed(OsStr::new(self)))
    }
}

impl Arg for Path {
    fn as_os_str_arg(&self) -> Result<Cow<'_, OsStr>, Errno> {
        Ok(Cow::Borrowed(self.as_os_str()))
    }
}

impl Arg for CStr {
    fn as_os_str_arg(&self) -> Result<Cow<'_, OsStr>, Errno> {
        let name = self.to_str().map_err(|_| Errno::INVAL)?;
        Ok(Cow::Borrowed(OsStr::new(name)))
    }
}

macro_rules! arg_by_deref {
    ($($owned:ty),*) => {$(
        impl Arg for $owned {
            fn as_os_str_arg(&self) -> Result<Cow<'_, OsStr>, Errno> {
                (**self).as_os_str_arg()
            }
        }
    )*};
}
arg_by_deref!(OsString, String, PathBuf, CString);

impl<T: Arg + ?Sized> Arg for &T {
    fn as_os_str_arg(&self) -> Result<Cow<'_, OsStr>, Errno> {
        (**self).as_os_str_arg()
    }
}

/// The longest name, in UTF-16 units, of every Windows filesystem (NTFS,
/// ReFS, exFAT, FAT's long names). Checked here because NTFS answers a
/// longer one "invalid name", where POSIX says `ENAMETOOLONG`.
pub const NAME_MAX_UNITS: usize = 255;

/// `name` as the UTF-16 of one component for a relative `NtCreateFile`:
/// `.` is the directory itself (an empty NT name); `..` cannot be
/// expressed relative to a handle and is `EINVAL`, as is a name with a
/// separator (`\` or `/`), a NUL, or a `:` (NT would open an alternate
/// data stream of another name); an empty name is `ENOENT` (as POSIX).
pub fn component(name: &OsStr) -> Result<Vec<u16>, Errno> {
    match name.as_encoded_bytes() {
        b"" => return Err(Errno::NOENT),
        b"." => return Ok(Vec::new()),
        b".." => return Err(Errno::INVAL),
        _ => {}
    }
    let wide: Vec<u16> = name.encode_wide().collect();
    if wide
        .iter()
        .any(|&unit| matches!(unit, 0 | 0x2F | 0x3A | 0x5C))
    {
        return Err(Errno::INVAL);
    }
    if wide.len() > NAME_MAX_UNITS {
        return Err(Errno::NAMETOOLONG);
    }
    Ok(wide)
}

/// [`component`] of any [`Arg`].
pub fn component_of<P: Arg>(name: P) -> Result<Vec<u16>, Errno> {
    component(&name.as_os_str_arg()?)
}
