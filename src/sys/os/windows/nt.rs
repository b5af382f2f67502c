//! The NT calls under the `*at` functions, each wrapped once with its
//! proof: `NtCreateFile` relative to a directory handle and
//! `NtSetInformationFile` with a buffer.

use std::os::windows::io::{AsRawHandle, FromRawHandle};

use windows_sys::Wdk::Foundation::OBJECT_ATTRIBUTES;
use windows_sys::Wdk::Storage::FileSystem::{
    FILE_INFORMATION_CLASS, FILE_SYNCHRONOUS_IO_NONALERT, NtCreateFile, NtSetInformationFile,
};
use windows_sys::Win32::Foundation::{
    HANDLE, NTSTATUS, OBJ_CASE_INSENSITIVE, STATUS_SUCCESS, UNICODE_STRING,
};
use windows_sys::Win32::Storage::FileSystem::{
    FILE_SHARE_DELETE, FILE_SHARE_READ, FILE_SHARE_WRITE,
};
use windows_sys::Win32::System::IO::IO_STATUS_BLOCK;

use super::fd::{BorrowedFd, OwnedFd};
use super::io::Errno;

/// What to ask `NtCreateFile` for (besides the name).
#[derive(Clone, Copy, Debug)]
pub struct Create {
    /// `DesiredAccess`.
    pub access: u32,
    /// `FileAttributes` of a file this creates.
    pub attributes: u32,
    /// `CreateDisposition`: `FILE_OPEN`, `FILE_CREATE`, …
    pub disposition: u32,
    /// `CreateOptions`, to which `FILE_SYNCHRONOUS_IO_NONALERT` is always
    /// added (every handle here is used synchronously).
    pub options: u32,
}

/// POSIX sharing: others may read, write, rename and delete what we hold,
/// as they may on unix.
pub const SHARE_ALL: u32 = FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE;

/// `IO_STATUS_BLOCK.Information` of an `NtCreateFile` that made the file.
pub const FILE_CREATED: usize = 2;

/// `NtCreateFile` of `name` relative to `dir`, and what it did
/// (`Information`: [`FILE_CREATED`], opened, overwritten); an empty `name`
/// opens `dir` itself again (a new open of the same file, with its own
/// position and listing state). `name` must already be a checked
/// component (see `fs::at`): NT resolves `\` in it.
pub fn create_at(
    dir: BorrowedFd<'_>,
    name: &[u16],
    create: Create,
) -> Result<(OwnedFd, usize), NTSTATUS> {
    let byte_len = u16::try_from(std::mem::size_of_val(name))
        .map_err(|_| windows_sys::Win32::Foundation::STATUS_NAME_TOO_LONG)?;
    let object_name = UNICODE_STRING {
        // Lengths of a UNICODE_STRING are in bytes, not characters.
        Length: byte_len,
        MaximumLength: byte_len,
        // NtCreateFile only reads the name; the cast is for the C type.
        Buffer: name.as_ptr().cast_mut(),
    };
    let attributes = OBJECT_ATTRIBUTES {
        Length: std::mem::size_of::<OBJECT_ATTRIBUTES>() as u32,
        RootDirectory: dir.as_raw_handle(),
        ObjectName: &object_name,
        // As Win32's CreateFileW: names match regardless of case where the
        // filesystem does.
        Attributes: OBJ_CASE_INSENSITIVE,
        SecurityDescriptor: std::ptr::null(),
        SecurityQualityOfService: std::ptr::null(),
    };
    let mut io_status = IO_STATUS_BLOCK::default();
    let mut handle: HANDLE = std::ptr::null_mut();
    // SAFETY: every pointer is to a local that outlives the call:
    // `attributes` (whose `ObjectName` points at `object_name`, whose
    // `Buffer` points at `name`, `Length` bytes long — `byte_len` is
    // exactly `name`'s size), `io_status` and `handle`. `RootDirectory` is
    // a borrowed, therefore open, handle. No allocation size and no EA
    // buffer (null, length 0).
    #[allow(unsafe_code)]
    let status = unsafe {
        NtCreateFile(
            &mut handle,
            create.access,
            &attributes,
            &mut io_status,
            std::ptr::null(),
            create.attributes,
            SHARE_ALL,
            create.disposition,
            create.options | FILE_SYNCHRONOUS_IO_NONALERT,
            std::ptr::null(),
            0,
        )
    };
    if status < 0 {
        return Err(status);
    }
    // SAFETY: NtCreateFile succeeded, so `handle` is a new handle that
    // nothing else owns; OwnedHandle takes sole ownership and closes it.
    #[allow(unsafe_code)]
    let owned = unsafe { OwnedFd::from_raw_handle(handle) };
    Ok((owned, io_status.Information))
}

/// [`create_at`] with the failure as an errno.
pub fn open_at(dir: BorrowedFd<'_>, name: &[u16], create: Create) -> Result<OwnedFd, Errno> {
    create_at(dir, name, create)
        .map(|(handle, _)| handle)
        .map_err(Errno::from_ntstatus)
}

/// `NtSetInformationFile(handle, info, class)`: the raw status, so callers
/// can tell "this class is not supported" from a refusal.
pub fn set_information(
    handle: BorrowedFd<'_>,
    info: &[u64],
    len: usize,
    class: FILE_INFORMATION_CLASS,
) -> NTSTATUS {
    // A length past the buffer would let the kernel read beyond it.
    let Some(len) = u32::try_from(len)
        .ok()
        .filter(|&len| len as usize <= std::mem::size_of_val(info))
    else {
        return windows_sys::Win32::Foundation::STATUS_INVALID_PARAMETER;
    };
    let mut io_status = IO_STATUS_BLOCK::default();
    // SAFETY: `info` is valid for reads of `len` bytes (checked just above)
    // and 8-byte aligned (a `u64` slice), which covers the alignment of
    // every FILE_*_INFORMATION struct; `io_status` is a local out-pointer;
    // the handle is borrowed, so open. The call is synchronous.
    #[allow(unsafe_code)]
    unsafe {
        NtSetInformationFile(
            handle.as_raw_handle(),
            &mut io_status,
            info.as_ptr().cast(),
            len,
            class,
        )
    }
}

/// Whether `status` is a success (`NT_SUCCESS`).
pub fn succeeded(status: NTSTATUS) -> bool {
    status >= STATUS_SUCCESS
}

/// Copies `bytes` into 8-byte words (zero padded), the aligned buffer
/// [`set_information`] takes.
pub fn aligned(bytes: &[u8]) -> Vec<u64> {
    bytes
        .chunks(8)
        .map(|chunk| {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            u64::from_ne_bytes(word)
        })
        .collect()
}

/// `NtQueryInformationFile(handle, class)` into `buffer`: the raw status
/// (`STATUS_BUFFER_OVERFLOW` when only the fixed part fit).
pub fn query_information(
    handle: BorrowedFd<'_>,
    buffer: &mut [u64],
    class: FILE_INFORMATION_CLASS,
) -> NTSTATUS {
    let mut io_status = IO_STATUS_BLOCK::default();
    let len = u32::try_from(std::mem::size_of_val(buffer)).unwrap_or(u32::MAX);
    // SAFETY: `buffer` is valid for writes of its whole byte size, of
    // which at most `len` (no more than that size) is offered, and 8-byte
    // aligned as every FILE_*_INFORMATION struct needs; `io_status` is a
    // local; the handle is borrowed, so open; the call is synchronous.
    #[allow(unsafe_code)]
    unsafe {
        windows_sys::Wdk::Storage::FileSystem::NtQueryInformationFile(
            handle.as_raw_handle(),
            &mut io_status,
            buffer.as_mut_ptr().cast(),
            len,
            class,
        )
    }
}

/// `NtQueryVolumeInformationFile(handle, class)` into `buffer`, as
/// [`query_information`].
pub fn query_volume_information(
    handle: BorrowedFd<'_>,
    buffer: &mut [u64],
    class: i32,
) -> NTSTATUS {
    let mut io_status = IO_STATUS_BLOCK::default();
    let len = u32::try_from(std::mem::size_of_val(buffer)).unwrap_or(u32::MAX);
    // SAFETY: as in `query_information`.
    #[allow(unsafe_code)]
    unsafe {
        windows_sys::Wdk::Storage::FileSystem::NtQueryVolumeInformationFile(
            handle.as_raw_handle(),
            &mut io_status,
            buffer.as_mut_ptr().cast(),
            len,
            class,
        )
    }
}

/// Whether a query's status means its fixed-size part was filled: a
/// success, or `STATUS_BUFFER_OVERFLOW` (a variable-length name or label
/// did not fit, which the callers do not read).
pub fn filled(status: NTSTATUS) -> bool {
    succeeded(status) || status == windows_sys::Win32::Foundation::STATUS_BUFFER_OVERFLOW
}

/// The bytes of `words`, for reading fields at their offsets.
pub fn bytes_of(words: &[u64]) -> Vec<u8> {
    words.iter().flat_map(|word| word.to_ne_bytes()).collect()
}

/// The `N` bytes at `at` of `bytes`; `None` past the end.
pub fn field<const N: usize>(bytes: &[u8], at: usize) -> Option<[u8; N]> {
    bytes.get(at..at.checked_add(N)?)?.try_into().ok()
}
