//! Helpers shared by the unit tests of several modules.

use std::path::{Path, PathBuf};

/// A fresh directory under the temp dir, unique to this process and call.
pub fn tempdir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "exactlock-{tag}-{}-{}",
        std::process::id(),
        uuid::Uuid::new_v4()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Makes a FIFO at `path`, readable and writable by its owner. rustix has
/// no `mknodat` on Apple systems, where `mkfifo(1)` makes it instead.
pub fn make_fifo(path: &Path) {
    #[cfg(target_os = "linux")]
    {
        use crate::sys::os::fs::{CWD, FileType, Mode, mknodat};
        mknodat(CWD, path, FileType::Fifo, Mode::RUSR | Mode::WUSR, 0).unwrap();
    }
    #[cfg(not(target_os = "linux"))]
    {
        let status = std::process::Command::new("mkfifo")
            .args(["-m", "600"])
            .arg(path)
            .status()
            .unwrap();
        assert!(status.success(), "mkfifo {}: {status}", path.display());
    }
}

/// The names in `dir`, sorted.
pub fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Acquires `dir/f` on this thread (the lock is free, and the directory is
/// taken to have earned the inline path); the generation's id.
pub fn acquire_free(dir: &Path) -> u64 {
    acquire_free_named(dir, "f")
}

/// [`acquire_free`] of `dir/file` (its lock directory `dir/file.lock`).
pub fn acquire_free_named(dir: &Path, file: &str) -> u64 {
    use crate::lock::acquire::acquire_first_attempt;
    use crate::lock::fastpath;
    use std::time::Duration;
    // As the off-thread attempt that earned it would have: its filesystem
    // looked at, and its debris scanned.
    use crate::sys::os::fd::AsFd;
    let parent = crate::fs::fsx::open_dir_nofollow(dir).unwrap();
    fastpath::learn(
        dir,
        Some(fastpath::Lesson::of(parent.as_fd())),
        Duration::ZERO,
    );
    let (key, links) =
        crate::lock::table::LockKey::with_parent_links(parent.as_fd(), "f".as_ref()).unwrap();
    let own = crate::lock::table::generations_in(&key.parent)
        + crate::lock::publish::stagings_in((key.parent.dev, key.parent.ino));
    let links = crate::lock::debris::links_beside(links, own);
    crate::lock::debris::reap_when_changed(parent.as_fd(), &key.parent, links, &Default::default());
    let options = acquire_options(&dir.join(file), Duration::ZERO, Duration::from_millis(1));
    // Where nothing proves a directory's path unchanged from the kernel's
    // caches (macOS, Windows), there is no inline path: a blocking one.
    if !crate::sys::platform::can_open_cached() {
        let acquired = crate::lock::acquire::acquire_blocking(options, &|| true);
        return acquired.unwrap().take().id;
    }
    match acquire_first_attempt(options).unwrap() {
        crate::lock::acquire::Inline::Won(claim) => claim.take().id,
        crate::lock::acquire::Inline::NotNow(_) => {
            panic!("a free lock is taken by the first attempt")
        }
    }
}

/// An acquisition of `file_path` with this waiting budget and retry delay,
/// everything else at its default.
pub fn acquire_options(
    file_path: &Path,
    budget: std::time::Duration,
    retry_delay: std::time::Duration,
) -> std::sync::Arc<crate::lock::acquire::AcquireOptions> {
    std::sync::Arc::new(crate::lock::acquire::AcquireOptions {
        file_path: file_path.to_path_buf(),
        budget,
        retry_delay,
        stale_ms: 10_000.0,
        policy: Default::default(),
        cancel: Default::default(),
        after_parent_mkdir: None,
        sequence: crate::lock::table::next_id(),
        held_by_caller: Vec::new(),
        on_contended: None,
        mode: Default::default(),
        on_behalf_of: None,
        fence: false,
    })
}
