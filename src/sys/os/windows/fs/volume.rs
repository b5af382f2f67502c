//! What a handle's volume says about itself: `GetVolumeInformationByHandleW`.

use std::os::windows::io::AsRawHandle;

use super::super::fd::AsFd;
use super::super::io::Errno;
use super::flags::StatVfsMountFlags;

/// `FILE_READ_ONLY_VOLUME` (`Win32_System_SystemServices`, not among the
/// crate's windows-sys features).
const FILE_READ_ONLY_VOLUME: u32 = 0x0008_0000;

/// A volume as Windows describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VolumeInfo {
    /// The filesystem's name: `"NTFS"`, `"ReFS"`, `"FAT32"`, `"exFAT"`.
    pub filesystem: String,
    /// The longest name a component may have, in UTF-16 units.
    pub max_component_len: u32,
    /// The volume serial number (`Stat::st_dev` of its files).
    pub serial: u32,
    /// `FILE_*` filesystem flags (`FILE_SUPPORTS_HARD_LINKS`, …).
    pub flags: u32,
}

impl VolumeInfo {
    /// Whether the volume is mounted read-only.
    pub fn read_only(&self) -> bool {
        self.flags & FILE_READ_ONLY_VOLUME != 0
    }
}

/// The volume information of the file `fd` is open on.
pub fn volume_info<Fd: AsFd>(fd: Fd) -> Result<VolumeInfo, Errno> {
    // MAX_PATH + 1 units, the size the documentation asks for.
    let mut name = [0u16; 261];
    let (mut serial, mut max_component_len, mut flags) = (0u32, 0u32, 0u32);
    // SAFETY: `name` is valid for writes of the `name.len()` units offered;
    // the volume name buffer is null with size 0 (not asked for); the
    // three out-pointers are locals; the handle is borrowed, so open.
    #[allow(unsafe_code)]
    let ok = unsafe {
        windows_sys::Win32::Storage::FileSystem::GetVolumeInformationByHandleW(
            fd.as_fd().as_raw_handle(),
            std::ptr::null_mut(),
            0,
            &mut serial,
            &mut max_component_len,
            &mut flags,
            name.as_mut_ptr(),
            name.len() as u32,
        )
    };
    if ok == 0 {
        return Err(Errno::last_win32());
    }
    let len = name
        .iter()
        .position(|&unit| unit == 0)
        .unwrap_or(name.len());
    Ok(VolumeInfo {
        filesystem: String::from_utf16_lossy(&name[..len]),
        max_component_len,
        serial,
        flags,
    })
}

/// The part of `statvfs` Windows can answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StatVfs {
    /// The longest name, in UTF-16 units (a UTF-8 name of that many
    /// bytes may hold fewer units, never more).
    pub f_namemax: u64,
    /// `RDONLY` for a read-only volume.
    pub f_flag: StatVfsMountFlags,
    /// The volume serial number.
    pub f_fsid: u64,
}

/// `fstatvfs(fd)` from [`volume_info`].
pub fn fstatvfs<Fd: AsFd>(fd: Fd) -> Result<StatVfs, Errno> {
    let info = volume_info(fd)?;
    let f_flag = if info.read_only() {
        StatVfsMountFlags::RDONLY
    } else {
        StatVfsMountFlags::empty()
    };
    Ok(StatVfs {
        f_namemax: u64::from(info.max_component_len),
        f_flag,
        f_fsid: u64::from(info.serial),
    })
}
