//! `Stat`, `FileType` and `fstat` from a handle's file information.

use std::os::windows::io::AsRawHandle;

use windows_sys::Wdk::Storage::FileSystem::{FILE_OPEN, FILE_OPEN_REPARSE_POINT};
use windows_sys::Win32::Storage::FileSystem::{
    FILE_ATTRIBUTE_DIRECTORY, FILE_ATTRIBUTE_NORMAL, FILE_ATTRIBUTE_READONLY,
    FILE_ATTRIBUTE_REPARSE_POINT, FILE_ATTRIBUTE_TAG_INFO, FILE_BASIC_INFO,
    FILE_INFO_BY_HANDLE_CLASS, FILE_READ_ATTRIBUTES, FileAttributeTagInfo, FileBasicInfo,
    GetFileInformationByHandleEx, SYNCHRONIZE,
};

use super::super::fd::{AsFd, BorrowedFd, OwnedFd};
use super::super::io::Errno;
use super::super::nt::{self, Create};
use super::flags::AtFlags;

/// A device number: the volume's serial number, as Node's `stat().dev`
/// reports it on Windows.
pub type Dev = u64;

/// `S_IFMT` and its kinds, as on Linux.
pub const S_IFMT: u32 = 0o170000;
pub const S_IFDIR: u32 = 0o040000;
pub const S_IFREG: u32 = 0o100000;
pub const S_IFLNK: u32 = 0o120000;

/// `IO_REPARSE_TAG_SYMLINK` and `IO_REPARSE_TAG_MOUNT_POINT` (a junction
/// or a volume mount point); `Win32_System_SystemServices`, where
/// windows-sys declares them, is not among the crate's features.
pub const IO_REPARSE_TAG_SYMLINK: u32 = 0xA000_000C;
pub const IO_REPARSE_TAG_MOUNT_POINT: u32 = 0xA000_0003;

/// `stat` as the crate reads it, with libc's field names.
///
/// `st_dev` is the volume serial number and `st_ino` the 64-bit file index
/// (Node's `dev` and `ino` on Windows); `st_ctime` is the NTFS change time
/// (`ChangeTime`: metadata or content changed), not the creation time.
/// `st_mode` is made up from the attributes: `S_IFDIR | 0o700`,
/// `S_IFREG | 0o600` (`0o400` when read-only), `S_IFLNK | 0o777` for a
/// symlink or junction. There are no uids: `st_uid` and `st_gid` are 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stat {
    pub st_dev: Dev,
    pub st_ino: u64,
    pub st_nlink: u64,
    pub st_mode: u32,
    pub st_uid: u32,
    pub st_gid: u32,
    pub st_size: i64,
    pub st_atime: i64,
    pub st_atime_nsec: i64,
    pub st_mtime: i64,
    pub st_mtime_nsec: i64,
    pub st_ctime: i64,
    pub st_ctime_nsec: i64,
    pub st_birthtime: i64,
    pub st_birthtime_nsec: i64,
    /// The raw Windows attributes (`FILE_ATTRIBUTE_*`).
    pub st_attributes: u32,
}

/// A file's kind, rustix's `FileType`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FileType {
    RegularFile,
    Directory,
    Symlink,
    Fifo,
    Socket,
    CharacterDevice,
    BlockDevice,
    Unknown,
}

impl FileType {
    /// The kind of a raw `st_mode`.
    pub const fn from_raw_mode(mode: u32) -> FileType {
        match mode & S_IFMT {
            S_IFREG => FileType::RegularFile,
            S_IFDIR => FileType::Directory,
            S_IFLNK => FileType::Symlink,
            0o010000 => FileType::Fifo,
            0o140000 => FileType::Socket,
            0o020000 => FileType::CharacterDevice,
            0o060000 => FileType::BlockDevice,
            _ => FileType::Unknown,
        }
    }

    /// The `S_IF*` bits of this kind.
    pub const fn as_raw_mode(self) -> u32 {
        match self {
            FileType::RegularFile => S_IFREG,
            FileType::Directory => S_IFDIR,
            FileType::Symlink => S_IFLNK,
            FileType::Fifo => 0o010000,
            FileType::Socket => 0o140000,
            FileType::CharacterDevice => 0o020000,
            FileType::BlockDevice => 0o060000,
            FileType::Unknown => 0,
        }
    }

    /// The kind Windows attributes (and, for a reparse point, its tag)
    /// describe: a symlink or junction is a `Symlink`; any other reparse
    /// point (a dedup or cloud placeholder) is what its attributes say.
    pub fn from_attributes(attributes: u32, reparse_tag: u32) -> FileType {
        if attributes & FILE_ATTRIBUTE_REPARSE_POINT != 0 && is_link_tag(reparse_tag) {
            FileType::Symlink
        } else if attributes & FILE_ATTRIBUTE_DIRECTORY != 0 {
            FileType::Directory
        } else {
            FileType::RegularFile
        }
    }
}

/// Whether a reparse tag makes a link a path walk would follow elsewhere:
/// a symlink, a junction or mount point, or any other name surrogate
/// (bit 29 of the tag, `IsReparseTagNameSurrogate`).
pub fn is_link_tag(tag: u32) -> bool {
    const NAME_SURROGATE: u32 = 0x2000_0000;
    tag == IO_REPARSE_TAG_SYMLINK || tag == IO_REPARSE_TAG_MOUNT_POINT || tag & NAME_SURROGATE != 0
}

/// `GetFileInformationByHandleEx(class)` into a `T` (one of the fixed-size
/// FILE_*_INFO structs).
fn handle_info<T: Default>(
    fd: BorrowedFd<'_>,
    class: FILE_INFO_BY_HANDLE_CLASS,
) -> Result<T, Errno> {
    let mut info = T::default();
    // SAFETY: `info` is a properly aligned, initialized `T` on this frame,
    // and exactly `size_of::<T>()` bytes are offered; `T` is the struct
    // `class` fills (callers pair them: FILE_BASIC_INFO with FileBasicInfo,
    // FILE_ATTRIBUTE_TAG_INFO with FileAttributeTagInfo), all plain data
    // with no invalid bit patterns. The handle is borrowed, so open.
    #[allow(unsafe_code)]
    let ok = unsafe {
        GetFileInformationByHandleEx(
            fd.as_raw_handle(),
            class,
            std::ptr::from_mut(&mut info).cast(),
            std::mem::size_of::<T>() as u32,
        )
    };
    if ok == 0 {
        return Err(Errno::last_win32());
    }
    Ok(info)
}

/// The attributes and reparse tag of an open file.
pub fn attribute_tag(fd: BorrowedFd<'_>) -> Result<FILE_ATTRIBUTE_TAG_INFO, Errno> {
    handle_info(fd, FileAttributeTagInfo)
}

/// Whether the open file is a link (see [`is_link_tag`]).
pub fn is_link(fd: BorrowedFd<'_>) -> Result<bool, Errno> {
    let tag = attribute_tag(fd)?;
    Ok(tag.FileAttributes & FILE_ATTRIBUTE_REPARSE_POINT != 0 && is_link_tag(tag.ReparseTag))
}

/// The basic information (times, attributes) of an open file.
pub fn basic_info(fd: BorrowedFd<'_>) -> Result<FILE_BASIC_INFO, Errno> {
    handle_info(fd, FileBasicInfo)
}

/// The fields of `FILE_ALL_INFORMATION` a `Stat` is made of.
struct AllInformation {
    creation: i64,
    access: i64,
    write: i64,
    change: i64,
    attributes: u32,
    size: i64,
    links: u32,
    index: u64,
}

/// `NtQueryInformationFile(FileAllInformation)`: times, attributes, size,
/// links and file index in one call (as libuv's `fstat` reads them, so
/// these agree with Node's). The name at its end may not fit the buffer;
/// it is not read.
fn all_information(fd: BorrowedFd<'_>) -> Result<AllInformation, Errno> {
    use std::mem::offset_of;
    use windows_sys::Wdk::Storage::FileSystem::{
        FILE_ALL_INFORMATION as All, FILE_BASIC_INFORMATION as Basic,
        FILE_STANDARD_INFORMATION as Standard, FileAllInformation,
    };
    const BASIC: usize = offset_of!(All, BasicInformation);
    const STANDARD: usize = offset_of!(All, StandardInformation);
    const INTERNAL: usize = offset_of!(All, InternalInformation);
    let mut buffer = [0u64; 128];
    let status = nt::query_information(fd, &mut buffer, FileAllInformation);
    if !nt::filled(status) {
        return information_by_parts(fd).ok_or_else(|| Errno::from_ntstatus(status));
    }
    let bytes = nt::bytes_of(&buffer);
    let i64_at = |at| {
        nt::field::<8>(&bytes, at)
            .map(i64::from_ne_bytes)
            .ok_or(Errno::IO)
    };
    let u32_at = |at| {
        nt::field::<4>(&bytes, at)
            .map(u32::from_ne_bytes)
            .ok_or(Errno::IO)
    };
    Ok(AllInformation {
        creation: i64_at(BASIC + offset_of!(Basic, CreationTime))?,
        access: i64_at(BASIC + offset_of!(Basic, LastAccessTime))?,
        write: i64_at(BASIC + offset_of!(Basic, LastWriteTime))?,
        change: i64_at(BASIC + offset_of!(Basic, ChangeTime))?,
        attributes: u32_at(BASIC + offset_of!(Basic, FileAttributes))?,
        size: i64_at(STANDARD + offset_of!(Standard, EndOfFile))?,
        links: u32_at(STANDARD + offset_of!(Standard, NumberOfLinks))?,
        // The index is a 64-bit unsigned number (NTFS: MFT record and
        // sequence number).
        index: i64_at(INTERNAL)?.cast_unsigned(),
    })
}

/// [`all_information`] in three queries (basic, standard, internal), for a
/// handle whose `FileAllInformation` fails: Wine reads the name part of it
/// by the path a reopened handle was opened with, which a rename since
/// left stale.
fn information_by_parts(fd: BorrowedFd<'_>) -> Option<AllInformation> {
    use std::mem::offset_of;
    use windows_sys::Wdk::Storage::FileSystem::{
        FILE_BASIC_INFORMATION as Basic, FILE_STANDARD_INFORMATION as Standard,
        FileBasicInformation, FileInternalInformation, FileStandardInformation,
    };
    let query = |class| {
        let mut buffer = [0u64; 8];
        nt::succeeded(nt::query_information(fd, &mut buffer, class)).then(|| nt::bytes_of(&buffer))
    };
    let (basic, standard, internal) = (
        query(FileBasicInformation)?,
        query(FileStandardInformation)?,
        query(FileInternalInformation)?,
    );
    let i64_at = |bytes: &[u8], at| nt::field::<8>(bytes, at).map(i64::from_ne_bytes);
    let u32_at = |bytes: &[u8], at| nt::field::<4>(bytes, at).map(u32::from_ne_bytes);
    Some(AllInformation {
        creation: i64_at(&basic, offset_of!(Basic, CreationTime))?,
        access: i64_at(&basic, offset_of!(Basic, LastAccessTime))?,
        write: i64_at(&basic, offset_of!(Basic, LastWriteTime))?,
        change: i64_at(&basic, offset_of!(Basic, ChangeTime))?,
        attributes: u32_at(&basic, offset_of!(Basic, FileAttributes))?,
        size: i64_at(&standard, offset_of!(Standard, EndOfFile))?,
        links: u32_at(&standard, offset_of!(Standard, NumberOfLinks))?,
        index: i64_at(&internal, 0)?.cast_unsigned(),
    })
}

/// The serial number of the volume `fd`'s file is on
/// (`FileFsVolumeInformation`, as libuv reads `st_dev`).
///
/// Wine answers this by the path the handle was opened with, so for a
/// file renamed since, it fails. Windows never does for an open handle;
/// where it fails, the serial is the one every other `fstat` of this
/// process has seen, if they have all seen one and the same (Wine's one
/// drive), and 0 otherwise.
fn volume_serial(fd: BorrowedFd<'_>) -> u32 {
    use std::mem::offset_of;
    use std::sync::atomic::{AtomicU64, Ordering};
    use windows_sys::Wdk::Storage::FileSystem::FileFsVolumeInformation;
    use windows_sys::Wdk::System::SystemServices::FILE_FS_VOLUME_INFORMATION as Volume;
    /// No serial seen yet.
    const NONE: u64 = u64::MAX;
    /// More than one serial seen.
    const MANY: u64 = u64::MAX - 1;
    static SEEN: AtomicU64 = AtomicU64::new(NONE);
    let mut buffer = [0u64; 16];
    let status = nt::query_volume_information(fd, &mut buffer, FileFsVolumeInformation);
    let serial = nt::filled(status)
        .then(|| {
            nt::field::<4>(
                &nt::bytes_of(&buffer),
                offset_of!(Volume, VolumeSerialNumber),
            )
        })
        .flatten()
        .map(u32::from_ne_bytes);
    match serial {
        Some(serial) => {
            let seen = SEEN.load(Ordering::Relaxed);
            if seen != u64::from(serial) && seen != MANY {
                let next = if seen == NONE {
                    u64::from(serial)
                } else {
                    MANY
                };
                let _ = SEEN.compare_exchange(seen, next, Ordering::Relaxed, Ordering::Relaxed);
            }
            serial
        }
        None => u32::try_from(SEEN.load(Ordering::Relaxed)).unwrap_or(0),
    }
}

/// `fstat(fd)`: the file's identity (volume serial, file index), size,
/// links and times, its kind from the attributes (see [`Stat`]).
pub fn fstat<Fd: AsFd>(fd: Fd) -> Result<Stat, Errno> {
    let fd = fd.as_fd();
    let all = all_information(fd)?;
    let reparse_tag = if all.attributes & FILE_ATTRIBUTE_REPARSE_POINT != 0 {
        attribute_tag(fd)?.ReparseTag
    } else {
        0
    };
    let (st_atime, st_atime_nsec) = unix_time(all.access);
    let (st_mtime, st_mtime_nsec) = unix_time(all.write);
    let (st_ctime, st_ctime_nsec) = unix_time(all.change);
    let (st_birthtime, st_birthtime_nsec) = unix_time(all.creation);
    Ok(Stat {
        st_dev: Dev::from(volume_serial(fd)),
        st_ino: all.index,
        st_nlink: u64::from(all.links),
        st_mode: mode_of(all.attributes, reparse_tag),
        st_uid: 0,
        st_gid: 0,
        st_size: all.size,
        st_atime,
        st_atime_nsec,
        st_mtime,
        st_mtime_nsec,
        st_ctime,
        st_ctime_nsec,
        st_birthtime,
        st_birthtime_nsec,
        st_attributes: all.attributes,
    })
}

/// The `st_mode` the attributes stand for (see [`Stat`]).
pub fn mode_of(attributes: u32, reparse_tag: u32) -> u32 {
    match FileType::from_attributes(attributes, reparse_tag) {
        FileType::Symlink => S_IFLNK | 0o777,
        FileType::Directory => S_IFDIR | 0o700,
        _ if attributes & FILE_ATTRIBUTE_READONLY != 0 => S_IFREG | 0o400,
        _ => S_IFREG | 0o600,
    }
}

/// 100 ns ticks from 1601-01-01 (a FILETIME) as seconds and nanoseconds
/// from 1970-01-01, the nanoseconds in `0..1e9` as `timespec` has them.
pub fn unix_time(filetime: i64) -> (i64, i64) {
    /// Seconds from 1601-01-01 to 1970-01-01.
    const EPOCH_DIFFERENCE_SECS: i64 = 11_644_473_600;
    const TICKS_PER_SEC: i64 = 10_000_000;
    let secs = filetime.div_euclid(TICKS_PER_SEC) - EPOCH_DIFFERENCE_SECS;
    let nanos = filetime.rem_euclid(TICKS_PER_SEC) * 100;
    (secs, nanos)
}

/// Opens `name` in `dir` to read (or, through a second handle, change) its
/// attributes only; with `SYMLINK_NOFOLLOW` a link itself.
pub(super) fn open_for_attributes(
    dir: BorrowedFd<'_>,
    name: &[u16],
    flags: AtFlags,
) -> Result<OwnedFd, Errno> {
    let options = if flags.contains(AtFlags::SYMLINK_NOFOLLOW) {
        FILE_OPEN_REPARSE_POINT
    } else {
        0
    };
    let create = Create {
        access: SYNCHRONIZE | FILE_READ_ATTRIBUTES,
        attributes: FILE_ATTRIBUTE_NORMAL,
        disposition: FILE_OPEN,
        options,
    };
    nt::open_at(dir, name, create)
}
