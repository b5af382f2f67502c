//! Descriptors are handles: rustix's `fd` names over `std`'s handle types.

use std::os::windows::io::{AsHandle, AsRawHandle};

/// An owned handle, closed on drop (`CloseHandle`).
pub type OwnedFd = std::os::windows::io::OwnedHandle;

/// A borrowed handle, valid for `'a`.
pub type BorrowedFd<'a> = std::os::windows::io::BorrowedHandle<'a>;

/// A handle's numeric value. Only good for messages and comparisons:
/// nothing here turns one back into a handle.
pub type RawFd = usize;

/// rustix's `AsFd`: borrows the handle of whatever holds one. A trait of
/// our own (not `std`'s `AsHandle`) so the crate's `use ...::fd::AsFd`
/// and `.as_fd()` read the same on every system.
pub trait AsFd {
    /// The handle, borrowed for as long as `self` is.
    fn as_fd(&self) -> BorrowedFd<'_>;
}

impl AsFd for OwnedFd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.as_handle()
    }
}

impl AsFd for BorrowedFd<'_> {
    fn as_fd(&self) -> BorrowedFd<'_> {
        *self
    }
}

impl AsFd for std::fs::File {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.as_handle()
    }
}

impl<T: AsFd + ?Sized> AsFd for &T {
    fn as_fd(&self) -> BorrowedFd<'_> {
        (**self).as_fd()
    }
}

impl<T: AsFd + ?Sized> AsFd for &mut T {
    fn as_fd(&self) -> BorrowedFd<'_> {
        (**self).as_fd()
    }
}

/// rustix's `AsRawFd`: the handle's value as a number ([`RawFd`]).
pub trait AsRawFd {
    fn as_raw_fd(&self) -> RawFd;
}

impl<T: AsFd + ?Sized> AsRawFd for T {
    fn as_raw_fd(&self) -> RawFd {
        // A pointer-sized handle value; its address is not dereferenced.
        self.as_fd().as_raw_handle().addr()
    }
}
