//! rustix's flag types: the same names, the same bit-set operations. The
//! values are Linux's; they never reach the OS (each call translates them).

macro_rules! bit_set {
    ($(#[$doc:meta])* $name:ident { $($(#[$flag_doc:meta])* $flag:ident = $value:expr,)* }) => {
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
        pub struct $name(u32);

        impl $name {
            $($(#[$flag_doc])* pub const $flag: $name = $name($value);)*

            /// No flag set.
            pub const fn empty() -> Self {
                Self(0)
            }
            /// The flags of both.
            #[must_use]
            pub const fn union(self, other: Self) -> Self {
                Self(self.0 | other.0)
            }
            /// Whether every flag of `other` is set.
            pub const fn contains(self, other: Self) -> bool {
                self.0 & other.0 == other.0
            }
            /// Whether any flag of `other` is set.
            pub const fn intersects(self, other: Self) -> bool {
                self.0 & other.0 != 0
            }
            /// Whether no flag is set.
            pub const fn is_empty(self) -> bool {
                self.0 == 0
            }
            pub const fn bits(self) -> u32 {
                self.0
            }
            pub const fn from_bits_retain(bits: u32) -> Self {
                Self(bits)
            }
        }

        impl std::ops::BitOr for $name {
            type Output = Self;
            fn bitor(self, other: Self) -> Self {
                self.union(other)
            }
        }

        impl std::ops::BitOrAssign for $name {
            fn bitor_assign(&mut self, other: Self) {
                *self = self.union(other);
            }
        }

        impl std::ops::BitAnd for $name {
            type Output = Self;
            fn bitand(self, other: Self) -> Self {
                Self(self.0 & other.0)
            }
        }

        impl std::ops::Not for $name {
            type Output = Self;
            fn not(self) -> Self {
                Self(!self.0)
            }
        }

        impl std::fmt::Debug for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, concat!(stringify!($name), "({:#o})"), self.0)
            }
        }
    };
}

bit_set! {
    /// `open` flags. The access mode is `RDONLY` (no bit), `WRONLY` or
    /// `RDWR`; `CLOEXEC`, `NONBLOCK` and `NOCTTY` are accepted and change
    /// nothing (handles are never inherited here, and a FIFO or terminal
    /// cannot be named by a file path on Windows).
    OFlags {
        RDONLY = 0,
        WRONLY = 0o1,
        RDWR = 0o2,
        CREATE = 0o100,
        EXCL = 0o200,
        NOCTTY = 0o400,
        TRUNC = 0o1000,
        APPEND = 0o2000,
        NONBLOCK = 0o4000,
        DIRECTORY = 0o200000,
        NOFOLLOW = 0o400000,
        CLOEXEC = 0o2000000,
        /// Attributes only: no read or write access is asked for (the
        /// counterpart of Linux's `O_PATH`).
        PATH = 0o10000000,
    }
}

bit_set! {
    /// `*at` flags.
    AtFlags {
        SYMLINK_NOFOLLOW = 0x100,
        REMOVEDIR = 0x200,
        SYMLINK_FOLLOW = 0x400,
        EMPTY_PATH = 0x1000,
    }
}

bit_set! {
    /// `renameat2` flags. `EXCHANGE` has no Windows counterpart
    /// (`renameat_with` answers it `ENOSYS`).
    RenameFlags {
        NOREPLACE = 1,
        EXCHANGE = 2,
    }
}

bit_set! {
    /// `statvfs` mount flags.
    StatVfsMountFlags {
        RDONLY = 1,
        NOSUID = 2,
    }
}

bit_set! {
    /// Permission bits. Windows has none: what is given is accepted and,
    /// but for the owner's write bit (the read-only attribute of a file),
    /// ignored (see `fchmod`).
    Mode {
        RWXU = 0o700,
        RUSR = 0o400,
        WUSR = 0o200,
        XUSR = 0o100,
        RWXG = 0o070,
        RGRP = 0o040,
        WGRP = 0o020,
        XGRP = 0o010,
        RWXO = 0o007,
        ROTH = 0o004,
        WOTH = 0o002,
        XOTH = 0o001,
        SUID = 0o4000,
        SGID = 0o2000,
        SVTX = 0o1000,
    }
}

impl Mode {
    /// The permission bits of a raw `st_mode` (the file type is dropped).
    pub const fn from_raw_mode(raw: u32) -> Mode {
        Mode(raw & 0o7777)
    }

    pub const fn as_raw_mode(self) -> u32 {
        self.0
    }
}

/// `flock` operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FlockOperation {
    LockShared,
    LockExclusive,
    Unlock,
    NonBlockingLockShared,
    NonBlockingLockExclusive,
    NonBlockingUnlock,
}
