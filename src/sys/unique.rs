//! This process's pid and fresh unique ids, without a syscall each.
//!
//! A cycle names three things (the record's `owner_token`, the staging
//! directory, the quarantine name), each with a UUID and our pid. Read from
//! the kernel each time, that is three `getrandom` and three `getpid` per
//! cycle, on a path whose cost is counted in syscalls (bench/CYCLE.md).
//!
//! - The pid is read once. A Node or Bun process never forks without
//!   `exec` (`child_process` starts a new program, with a fresh module), so
//!   the pid read once stays this process's.
//! - An id is `SHA-256(seed ‖ n)` cut to a version-4 UUID, where `seed` is
//!   16 bytes drawn from the kernel once per process and `n` counts ids.
//!   Unique: distinct `n` give distinct inputs, and two ids of different
//!   processes (or equal ones of one) collide only as two random UUIDs do
//!   (122 bits). Unpredictable: without the seed, seeing one name in a
//!   shared directory tells nothing of the next, so nobody can make our
//!   next staging name before we do.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use sha2::{Digest, Sha256};
use uuid::Uuid;

/// This process's pid, read from the kernel once.
pub fn own_pid() -> u32 {
    static PID: OnceLock<u32> = OnceLock::new();
    *PID.get_or_init(std::process::id)
}

/// [`own_pid`] in decimal, formatted once.
pub fn own_pid_text() -> &'static str {
    static TEXT: OnceLock<String> = OnceLock::new();
    TEXT.get_or_init(|| own_pid().to_string())
}

/// A [`fresh_uuid`] as its 36 lowercase, hyphenated characters, encoded by
/// `uuid`'s encoder rather than through `core::fmt` (its `Display` cost
/// a cycle, which names two ids, more than their hashes).
pub fn fresh_uuid_text() -> String {
    let mut buffer = Uuid::encode_buffer();
    fresh_uuid()
        .hyphenated()
        .encode_lower(&mut buffer)
        .to_owned()
}

/// A fresh version-4 UUID (see the module docs).
pub fn fresh_uuid() -> Uuid {
    static SEED: OnceLock<[u8; 16]> = OnceLock::new();
    static COUNT: AtomicU64 = AtomicU64::new(0);
    let seed = SEED.get_or_init(|| *Uuid::new_v4().as_bytes());
    let n = COUNT.fetch_add(1, Ordering::Relaxed);
    let digest = Sha256::new()
        .chain_update(seed)
        .chain_update(n.to_le_bytes())
        .finalize();
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    uuid::Builder::from_random_bytes(bytes).into_uuid()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn the_pid_is_the_kernels() {
        assert_eq!(own_pid(), std::process::id());
    }

    #[test]
    fn texts_are_what_display_prints() {
        assert_eq!(own_pid_text(), std::process::id().to_string());
        let text = fresh_uuid_text();
        let parsed = Uuid::parse_str(&text).unwrap();
        assert_eq!(text, parsed.hyphenated().to_string());
        assert_eq!(parsed.get_version_num(), 4);
    }

    #[test]
    fn ids_are_version_4_and_never_repeat() {
        let ids: Vec<Uuid> = (0..10_000).map(|_| fresh_uuid()).collect();
        assert!(
            ids.iter()
                .all(|id| id.get_version_num() == 4 && id.get_variant() == uuid::Variant::RFC4122)
        );
        assert_eq!(ids.iter().collect::<HashSet<_>>().len(), ids.len());
    }

    #[test]
    fn ids_of_threads_racing_never_repeat() {
        let threads: Vec<_> = (0..4)
            .map(|_| std::thread::spawn(|| (0..2_000).map(|_| fresh_uuid()).collect::<Vec<_>>()))
            .collect();
        let all: Vec<Uuid> = threads
            .into_iter()
            .flat_map(|t| t.join().unwrap())
            .collect();
        assert_eq!(all.iter().collect::<HashSet<_>>().len(), 8_000);
    }
}
