//! `Dir`: a directory's entries, read from its handle in batches
//! (`GetFileInformationByHandleEx(FileIdBothDirectoryInfo)`).

use std::collections::VecDeque;
use std::ffi::{CStr, CString, OsString};
use std::mem::offset_of;
use std::os::windows::ffi::OsStringExt;
use std::os::windows::io::AsRawHandle;

use windows_sys::Win32::Foundation::ERROR_NO_MORE_FILES;
use windows_sys::Win32::Storage::FileSystem::{
    FILE_ID_BOTH_DIR_INFO, FileIdBothDirectoryInfo, FileIdBothDirectoryRestartInfo,
    GetFileInformationByHandleEx,
};

use super::super::fd::{AsFd, OwnedFd};
use super::super::io::Errno;
use super::stat::FileType;

/// One entry: its name (WTF-8 bytes, which are UTF-8 for every name that
/// is valid Unicode), kind and file index.
#[derive(Clone, Debug)]
pub struct DirEntry {
    name: CString,
    file_type: FileType,
    ino: u64,
}

impl DirEntry {
    /// The name, as the bytes `OsStr::as_encoded_bytes` gives.
    pub fn file_name(&self) -> &CStr {
        &self.name
    }

    /// The kind: a symlink or junction is `Symlink` (see
    /// `FileType::from_attributes`).
    pub fn file_type(&self) -> FileType {
        self.file_type
    }

    /// The file index, `Stat::st_ino` of the same file.
    pub fn ino(&self) -> u64 {
        self.ino
    }
}

/// A directory being listed, rustix's `Dir`: an iterator of entries
/// (including `.` and `..` where the filesystem lists them, as unix does).
pub struct Dir {
    handle: OwnedFd,
    pending: VecDeque<DirEntry>,
    /// Whether the next batch is the first, which restarts the listing.
    first: bool,
    done: bool,
}

/// The batch buffer: 64 KiB of `u64`s, so every entry (8-byte aligned
/// within it) can be read at an aligned offset.
const BATCH_WORDS: usize = 8 * 1024;

impl Dir {
    /// Lists the directory `handle` is open on, taking the handle over.
    pub fn new<Fd: Into<OwnedFd>>(handle: Fd) -> Result<Dir, Errno> {
        Ok(Dir {
            handle: handle.into(),
            pending: VecDeque::new(),
            first: true,
            done: false,
        })
    }

    /// Lists the directory `fd` is open on through a new open of it (its
    /// own listing position, as rustix reopens `.`).
    pub fn read_from<Fd: AsFd>(fd: Fd) -> Result<Dir, Errno> {
        use super::flags::{Mode, OFlags};
        let own = super::at::open_component(
            fd.as_fd(),
            &[],
            OFlags::RDONLY | OFlags::DIRECTORY,
            Mode::empty(),
        )?;
        Dir::new(own)
    }

    /// Starts the listing over at its first entry.
    pub fn rewind(&mut self) {
        self.pending.clear();
        self.first = true;
        self.done = false;
    }

    /// Reads the next batch of entries into `pending`; `false` at the end.
    fn fill(&mut self) -> Result<bool, Errno> {
        let mut buffer = vec![0u64; BATCH_WORDS];
        let class = if self.first {
            FileIdBothDirectoryRestartInfo
        } else {
            FileIdBothDirectoryInfo
        };
        // SAFETY: `buffer` is valid for writes of its whole byte size, which
        // is what is offered, and 8-byte aligned as FILE_ID_BOTH_DIR_INFO
        // needs; the handle is owned by `self`, so open.
        #[allow(unsafe_code)]
        let ok = unsafe {
            GetFileInformationByHandleEx(
                self.handle.as_raw_handle(),
                class,
                buffer.as_mut_ptr().cast(),
                std::mem::size_of_val(buffer.as_slice()) as u32,
            )
        };
        self.first = false;
        if ok == 0 {
            // SAFETY: reads the calling thread's last-error value.
            #[allow(unsafe_code)]
            let code = unsafe { windows_sys::Win32::Foundation::GetLastError() };
            return if code == ERROR_NO_MORE_FILES {
                Ok(false)
            } else {
                Err(Errno::from_win32(code))
            };
        }
        let bytes: Vec<u8> = buffer.iter().flat_map(|word| word.to_ne_bytes()).collect();
        parse_batch(&bytes, &mut self.pending)?;
        Ok(true)
    }
}

impl Iterator for Dir {
    type Item = Result<DirEntry, Errno>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(entry) = self.pending.pop_front() {
                return Some(Ok(entry));
            }
            if self.done {
                return None;
            }
            match self.fill() {
                Ok(true) => {}
                Ok(false) => self.done = true,
                Err(errno) => {
                    self.done = true;
                    return Some(Err(errno));
                }
            }
        }
    }
}

/// Reads a `u32` at `at` of `bytes`; `EIO` past the end (a malformed
/// batch is the filesystem's fault, never a panic).
fn u32_at(bytes: &[u8], at: usize) -> Result<u32, Errno> {
    let field = bytes.get(at..at + 4).ok_or(Errno::IO)?;
    Ok(u32::from_ne_bytes(field.try_into().map_err(|_| Errno::IO)?))
}

fn u64_at(bytes: &[u8], at: usize) -> Result<u64, Errno> {
    let field = bytes.get(at..at + 8).ok_or(Errno::IO)?;
    Ok(u64::from_ne_bytes(field.try_into().map_err(|_| Errno::IO)?))
}

/// The entries of one batch of FILE_ID_BOTH_DIR_INFO records, each at the
/// previous one's `NextEntryOffset` (0 ends the batch). Read field by
/// field from bytes, so no pointer into the buffer is needed.
fn parse_batch(bytes: &[u8], into: &mut VecDeque<DirEntry>) -> Result<(), Errno> {
    let mut at = 0usize;
    loop {
        let record = bytes.get(at..).ok_or(Errno::IO)?;
        into.push_back(parse_entry(record)?);
        let next = u32_at(record, offset_of!(FILE_ID_BOTH_DIR_INFO, NextEntryOffset))? as usize;
        if next == 0 {
            return Ok(());
        }
        at = at.checked_add(next).ok_or(Errno::IO)?;
    }
}

fn parse_entry(record: &[u8]) -> Result<DirEntry, Errno> {
    let attributes = u32_at(record, offset_of!(FILE_ID_BOTH_DIR_INFO, FileAttributes))?;
    // For a reparse point, EaSize holds the reparse tag instead.
    let tag = u32_at(record, offset_of!(FILE_ID_BOTH_DIR_INFO, EaSize))?;
    let ino = u64_at(record, offset_of!(FILE_ID_BOTH_DIR_INFO, FileId))?;
    let name_len = u32_at(record, offset_of!(FILE_ID_BOTH_DIR_INFO, FileNameLength))? as usize;
    let start = offset_of!(FILE_ID_BOTH_DIR_INFO, FileName);
    let name_bytes = record.get(start..start + name_len).ok_or(Errno::IO)?;
    let units: Vec<u16> = name_bytes
        .chunks_exact(2)
        .map(|pair| u16::from_ne_bytes([pair[0], pair[1]]))
        .collect();
    let name = OsString::from_wide(&units).into_encoded_bytes();
    Ok(DirEntry {
        // A Windows name has no NUL; one would be the filesystem's error.
        name: CString::new(name).map_err(|_| Errno::IO)?,
        file_type: FileType::from_attributes(attributes, tag),
        ino,
    })
}
