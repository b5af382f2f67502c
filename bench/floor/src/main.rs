//! The floor of an exactlock cycle: the syscalls one uncontended
//! `withFileLock(path, async () => {})` makes (acquire + release), issued
//! back to back from one thread, with no napi, no tokio, no JavaScript.
//!
//! The lists were taken from `strace -f` of a loop of exactlock cycles
//! (see bench/RESULTS.md); `current` is the list of the code in this tree. Thread hand-off syscalls of the
//! runtimes (futex, epoll_wait, the eventfd writes that wake a thread) are
//! deliberately left out: they are the overhead the ratio exposes.
//!
//! Usage: exactlock-floor DIR [ITERATIONS] [WARMUP] [PLAN] [samples]
//!   PLAN: `current` (default; the list of the code in this tree),
//!         `v0` (the list before the hot-path changes of issue 4),
//!         `format` (only what the on-disk format needs: mkdir staging,
//!         create+write+close info, renameat2 NOREPLACE, unlink info, rmdir).
//! Prints one JSON line: {"plan","iterations","median_us","p99_us","syscalls",
//! "noreplace_refused"} (true where the filesystem refused RENAME_NOREPLACE
//! and the cycle published with the mkdirat claim, as exactlock does there),
//! plus "samples" (µs, in run order) when the fifth argument is `samples`.

use std::ffi::CStr;
use std::time::Instant;

use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::fs::inotify::{self, CreateFlags, WatchFlags};
use rustix::fs::{self, AtFlags, Dir, Mode, OFlags, RenameFlags};

const DIR_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::DIRECTORY)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC);
const READ_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::NOFOLLOW)
    .union(OFlags::NONBLOCK)
    .union(OFlags::CLOEXEC)
    .union(OFlags::NOCTTY);
const PIN_FLAGS: OFlags = OFlags::PATH.union(OFlags::NOFOLLOW).union(OFlags::CLOEXEC);
const INFO: &CStr = c"info";

/// A 161-byte record, the size exactlock writes.
const RECORD: &[u8] = b"{\"pid\":12345,\"start_time\":\"Wed Dec  2 08:36:20 2026\",\"start_time_format\":\"utc-v1\",\"timestamp\":1790000000000,\"owner_token\":\"0c9a8a56-8f4b-4f4e-9c6e-3e8f2b0d7a11\"}";

struct Ctx {
    parent_path: String,
    inotify: OwnedFd,
    calls: u32,
    seq: u64,
    /// The filesystem refused `RENAME_NOREPLACE` (sshfs, NFS, many FUSE
    /// mounts): from then on the cycle publishes as exactlock does there,
    /// with the `mkdirat` claim and a plain `renameat` (see
    /// `src/fs/rename.rs`), and never asks again.
    noreplace_refused: bool,
    /// The thread that closes a released lock's descriptors, as exactlock's
    /// does (`src/sys/closer.rs`): the last close of a removed directory,
    /// where the filesystem frees its inode, is not the releaser's to wait.
    closer: std::sync::mpsc::Sender<OwnedFd>,
}

macro_rules! sys {
    ($ctx:expr, $e:expr) => {{
        $ctx.calls += 1;
        $e
    }};
}

impl Ctx {
    fn staging(&mut self) -> String {
        self.seq += 1;
        format!("f.lock.pending.{}.{:036}", std::process::id(), self.seq)
    }

    /// `list_names` as v0 did it: `Dir::read_from` = fcntl(F_GETFL) +
    /// openat(".") + getdents64 until 0 + close.
    fn list_read_from(&mut self, dir: BorrowedFd<'_>) {
        let flags = sys!(self, fs::fcntl_getfl(dir).unwrap());
        let fresh = sys!(
            self,
            fs::openat(dir, c".", flags | OFlags::CLOEXEC, Mode::empty()).unwrap()
        );
        self.drain(fresh);
    }

    /// getdents64 until it returns 0 (two calls for a tiny directory), close.
    fn drain(&mut self, fd: OwnedFd) {
        let mut dir = Dir::new(fd).unwrap();
        let mut n = 0;
        while let Some(entry) = dir.read() {
            entry.unwrap();
            n += 1;
        }
        assert_eq!(n, 3);
        self.calls += 2 + 1; // two getdents64, one close on drop
    }

    /// `observe_file`: newfstatat, openat, fstat, read, read (EOF), fstat, close.
    fn observe_info(&mut self, dir: BorrowedFd<'_>) {
        sys!(
            self,
            fs::statat(dir, INFO, AtFlags::SYMLINK_NOFOLLOW).unwrap()
        );
        let f = sys!(
            self,
            fs::openat(dir, INFO, READ_FLAGS, Mode::empty()).unwrap()
        );
        sys!(self, fs::fstat(&f).unwrap());
        let mut buf = [0u8; 256];
        let n = sys!(
            self,
            rustix::io::read(&f, &mut buf[..RECORD.len() + 1]).unwrap()
        );
        assert_eq!(n, RECORD.len());
        sys!(self, rustix::io::read(&f, &mut buf[n..n + 1]).unwrap());
        sys!(self, fs::fstat(&f).unwrap());
        drop(f);
        self.calls += 1;
    }

    /// `open_root`: newfstatat, openat, fstat.
    fn open_root(&mut self, parent: BorrowedFd<'_>, name: &str) -> OwnedFd {
        sys!(
            self,
            fs::statat(parent, name, AtFlags::SYMLINK_NOFOLLOW).unwrap()
        );
        let root = sys!(
            self,
            fs::openat(parent, name, DIR_FLAGS, Mode::empty()).unwrap()
        );
        sys!(self, fs::fstat(&root).unwrap());
        root
    }

    /// mkdirat, openat, fchmod of a staging directory.
    fn make_staging(&mut self, parent: BorrowedFd<'_>, staging: &str) -> OwnedFd {
        sys!(
            self,
            fs::mkdirat(parent, staging, Mode::from_raw_mode(0o700)).unwrap()
        );
        let dir = sys!(
            self,
            fs::openat(parent, staging, DIR_FLAGS, Mode::empty()).unwrap()
        );
        sys!(self, fs::fchmod(&dir, Mode::from_raw_mode(0o700)).unwrap());
        dir
    }

    /// info: openat(O_CREAT|O_EXCL|O_NOFOLLOW), fchmod.
    fn create_info(&mut self, dir: BorrowedFd<'_>) -> OwnedFd {
        let flags =
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let info = sys!(
            self,
            fs::openat(dir, INFO, flags, Mode::from_raw_mode(0o600)).unwrap()
        );
        sys!(self, fs::fchmod(&info, Mode::from_raw_mode(0o600)).unwrap());
        info
    }

    /// The staging of the v0 code: directory, then the record written and
    /// closed.
    fn write_staging(&mut self, parent: BorrowedFd<'_>, staging: &str) -> OwnedFd {
        let dir = self.make_staging(parent, staging);
        let info = self.create_info(dir.as_fd());
        sys!(self, rustix::io::write(&info, RECORD).unwrap());
        drop(info);
        self.calls += 1;
        dir
    }

    /// The start of every attempt of the v0 code: the owner token
    /// (getrandom), the parent made and opened (create_dir_all's stat, open
    /// O_PATH) and its canonical key (readlink of the descriptor's magic
    /// link).
    fn open_parent_keyed(&mut self, token: &mut [u8; 16]) -> (OwnedFd, String) {
        sys!(
            self,
            rustix::rand::getrandom(token, rustix::rand::GetRandomFlags::empty()).unwrap()
        );
        sys!(self, fs::stat(self.parent_path.as_str()).unwrap());
        let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let parent = sys!(
            self,
            fs::open(self.parent_path.as_str(), flags, Mode::empty()).unwrap()
        );
        let link = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&parent));
        sys!(self, fs::readlink(link.as_str(), Vec::new()).unwrap());
        (parent, link)
    }

    /// The cycle before the issue-4 hot-path changes (85 syscalls, with two
    /// reads of the inotify events the dispatcher task makes).
    fn cycle_v0(&mut self) {
        let mut token = [0u8; 16];
        let (parent, link) = self.open_parent_keyed(&mut token);
        let p = parent.as_fd();
        // join_queue: the inotify subscription.
        let wd = sys!(
            self,
            inotify::add_watch(
                &self.inotify,
                link.as_str(),
                WatchFlags::DELETE | WatchFlags::MOVED_FROM | WatchFlags::ONLYDIR
            )
            .unwrap()
        );
        sys!(self, std::hint::black_box(rustix::process::getpid()));
        sys!(self, std::hint::black_box(rustix::process::getpid()));
        sys!(
            self,
            rustix::rand::getrandom(&mut token, rustix::rand::GetRandomFlags::empty()).unwrap()
        );
        // publish
        let staging = self.staging();
        let dir = self.write_staging(p, &staging);
        sys!(self, fs::fstat(&dir).unwrap());
        self.rename_pinned(p, &staging);
        drop(dir);
        self.calls += 1;
        sys!(self, inotify::remove_watch(&self.inotify, wd).unwrap());
        // The dispatcher reads the MOVED_FROM + IGNORED events.
        self.drain_inotify();

        // release: snapshot_tree_at.
        let root = self.open_root(p, "f.lock");
        sys!(self, fs::fstat(&root).unwrap());
        self.list_read_from(root.as_fd());
        self.observe_info(root.as_fd());
        sys!(self, fs::fstat(&root).unwrap());
        drop(root);
        self.calls += 1;
        // exact_remove_tree_at: open_root + pre-verify fstat.
        let root2 = self.open_root(p, "f.lock");
        sys!(self, fs::fstat(&root2).unwrap());
        // detach: pin_source, renameat2, verify_destination.
        sys!(
            self,
            fs::statat(p, c"f.lock", AtFlags::SYMLINK_NOFOLLOW).unwrap()
        );
        let pin = sys!(
            self,
            fs::openat(p, c"f.lock", PIN_FLAGS, Mode::empty()).unwrap()
        );
        sys!(self, fs::fstat(&pin).unwrap());
        self.exclusive_rename(p, "f.lock", "f.lock.removing");
        sys!(
            self,
            fs::statat(p, c"f.lock.removing", AtFlags::SYMLINK_NOFOLLOW).unwrap()
        );
        drop(pin);
        self.calls += 1;
        // verify_in_place: open_root, fstat, snapshot_open_dir.
        let root3 = self.open_root(p, "f.lock.removing");
        sys!(self, fs::fstat(&root3).unwrap());
        sys!(self, fs::fstat(&root3).unwrap());
        self.list_read_from(root3.as_fd());
        self.observe_info(root3.as_fd());
        sys!(self, fs::fstat(&root3).unwrap());
        // delete_verified.
        self.observe_info(root3.as_fd());
        sys!(self, fs::unlinkat(&root3, INFO, AtFlags::empty()).unwrap());
        drop(root3);
        self.calls += 1;
        sys!(
            self,
            fs::statat(p, c"f.lock.removing", AtFlags::SYMLINK_NOFOLLOW).unwrap()
        );
        self.rmdir_settled(p, c"f.lock.removing");
        drop(root2);
        drop(parent);
        self.calls += 2;
    }

    /// The cycle of the code in this tree (20 syscalls, all on the calling
    /// thread: the first attempt and the first release attempt run inline;
    /// bench/CYCLE.md lists them with why).
    fn cycle_current(&mut self) {
        let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let parent = sys!(
            self,
            fs::open(self.parent_path.as_str(), flags, Mode::empty()).unwrap()
        );
        let p = parent.as_fd();
        let mask = fs::StatxFlags::INO | fs::StatxFlags::BTIME;
        sys!(self, fs::statx(p, "", AtFlags::EMPTY_PATH, mask).unwrap());
        // publish, with no look first: the staging dir under its flock
        // (kept for the lock's life), the record, the two fstats (modes
        // exact: no fchmod), the rename from the held descriptor.
        let staging = self.staging();
        sys!(
            self,
            fs::mkdirat(p, staging.as_str(), Mode::from_raw_mode(0o700)).unwrap()
        );
        let root = sys!(
            self,
            fs::openat(p, staging.as_str(), DIR_FLAGS, Mode::empty()).unwrap()
        );
        sys!(
            self,
            fs::flock(&root, fs::FlockOperation::NonBlockingLockExclusive).unwrap()
        );
        let create =
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let info = sys!(
            self,
            fs::openat(&root, INFO, create, Mode::from_raw_mode(0o600)).unwrap()
        );
        sys!(self, rustix::io::pwrite(&info, RECORD, 0).unwrap());
        sys!(self, fs::fstat(&info).unwrap());
        sys!(self, fs::fstat(&root).unwrap());
        self.exclusive_rename(p, &staging, "f.lock");
        drop(info);
        self.calls += 1;

        // release as published: one read of the listing through the held
        // descriptor, name still ours, detach, re-check name and record,
        // unlink, rmdir.
        self.list_once(root.as_fd());
        sys!(
            self,
            fs::statat(p, c"f.lock", AtFlags::SYMLINK_NOFOLLOW).unwrap()
        );
        self.exclusive_rename(p, "f.lock", "f.lock.removing");
        sys!(
            self,
            fs::statat(p, c"f.lock.removing", AtFlags::SYMLINK_NOFOLLOW).unwrap()
        );
        sys!(
            self,
            fs::statat(&root, INFO, AtFlags::SYMLINK_NOFOLLOW).unwrap()
        );
        sys!(self, fs::unlinkat(&root, INFO, AtFlags::empty()).unwrap());
        self.rmdir_settled(p, c"f.lock.removing");
        self.closer.send(parent).unwrap();
        self.closer.send(root).unwrap();
        self.calls += 2;
    }

    /// The listing through `dir` itself (its offset at the start), read as
    /// exactlock reads it: until `.`, `..` and `info` are in (one
    /// `getdents64` where the first read holds all three), and again from a
    /// rewind if the end came first (btrfs shows a descriptor only what its
    /// directory held when it was opened).
    fn list_once(&mut self, dir: BorrowedFd<'_>) {
        for pass in 0..2 {
            if pass == 1 {
                sys!(self, fs::seek(dir, fs::SeekFrom::Start(0)).unwrap());
            }
            let mut buffer = [std::mem::MaybeUninit::<u8>::uninit(); 1024];
            let mut listing = fs::RawDir::new(dir, &mut buffer);
            let mut n = 0;
            self.calls += 1;
            while let Some(entry) = listing.next() {
                entry.unwrap();
                n += 1;
                if listing.is_buffer_empty() {
                    if n == 3 {
                        return;
                    }
                    self.calls += 1;
                }
            }
            if n == 3 {
                return;
            }
        }
        panic!("the lock directory's listing never showed its record");
    }

    /// `rmdir` as exactlock makes it (`fsx::remove_dir_settled`): on a FUSE
    /// mount the daemon may still count the record open (the kernel sends
    /// the release after `close` returned) and keep it as `.fuse_hidden…`
    /// until then; the directory is tried again after 1, 4, 8… ms.
    fn rmdir_settled(&mut self, p: BorrowedFd<'_>, name: &CStr) {
        for ms in [1, 4, 8, 16, 32, 64, 0] {
            match sys!(self, fs::unlinkat(p, name, AtFlags::REMOVEDIR)) {
                Err(rustix::io::Errno::NOTEMPTY) if ms > 0 => {
                    std::thread::sleep(std::time::Duration::from_millis(ms));
                }
                result => return result.unwrap(),
            }
        }
    }

    /// An exclusive rename of a directory as exactlock makes it: the
    /// kernel's `renameat2(RENAME_NOREPLACE)`, or, where the filesystem
    /// refused it once, the `mkdirat` claim of the destination, its
    /// `fstatat`, and the `renameat` over that empty claim.
    fn exclusive_rename(&mut self, p: BorrowedFd<'_>, src: &str, dst: &str) {
        if !self.noreplace_refused {
            match sys!(
                self,
                fs::renameat_with(p, src, p, dst, RenameFlags::NOREPLACE)
            ) {
                Ok(()) => return,
                Err(rustix::io::Errno::INVAL | rustix::io::Errno::NOTSUP) => {
                    self.noreplace_refused = true;
                }
                Err(errno) => panic!("renameat2({src} -> {dst}, RENAME_NOREPLACE): {errno}"),
            }
        }
        sys!(
            self,
            fs::mkdirat(p, dst, Mode::from_raw_mode(0o700)).unwrap()
        );
        sys!(self, fs::statat(p, dst, AtFlags::SYMLINK_NOFOLLOW).unwrap());
        sys!(self, fs::renameat(p, src, p, dst).unwrap());
    }

    /// `rename_no_replace_at` of the staging dir onto `f.lock`: pin the
    /// source (fstatat, openat O_PATH, fstat), renameat2, verify the
    /// destination (fstatat), close the pin.
    fn rename_pinned(&mut self, p: BorrowedFd<'_>, staging: &str) {
        sys!(
            self,
            fs::statat(p, staging, AtFlags::SYMLINK_NOFOLLOW).unwrap()
        );
        let pin = sys!(
            self,
            fs::openat(p, staging, PIN_FLAGS, Mode::empty()).unwrap()
        );
        sys!(self, fs::fstat(&pin).unwrap());
        self.exclusive_rename(p, staging, "f.lock");
        sys!(
            self,
            fs::statat(p, c"f.lock", AtFlags::SYMLINK_NOFOLLOW).unwrap()
        );
        drop(pin);
        self.calls += 1;
    }

    /// Only what the format needs.
    fn cycle_format(&mut self, parent: BorrowedFd<'_>) {
        let staging = self.staging();
        sys!(
            self,
            fs::mkdirat(parent, staging.as_str(), Mode::from_raw_mode(0o700)).unwrap()
        );
        let info_path = format!("{staging}/info");
        let info = sys!(
            self,
            fs::openat(
                parent,
                info_path.as_str(),
                OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::CLOEXEC,
                Mode::from_raw_mode(0o600)
            )
            .unwrap()
        );
        sys!(self, rustix::io::write(&info, RECORD).unwrap());
        drop(info);
        self.calls += 1;
        self.exclusive_rename(parent, &staging, "f.lock");
        sys!(
            self,
            fs::unlinkat(parent, c"f.lock/info", AtFlags::empty()).unwrap()
        );
        self.rmdir_settled(parent, c"f.lock");
    }

    fn drain_inotify(&mut self) {
        let mut buf = [0u8; 4096];
        loop {
            self.calls += 1;
            match rustix::io::read(&self.inotify, &mut buf) {
                Ok(_) => {}
                Err(_) => break,
            }
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let dir = args
        .get(1)
        .expect("usage: exactlock-floor DIR [ITERATIONS] [WARMUP] [PLAN]");
    let iterations: usize = args.get(2).map_or(3000, |s| s.parse().unwrap());
    let warmup: usize = args.get(3).map_or(300, |s| s.parse().unwrap());
    let plan = args.get(4).map_or("current", String::as_str);
    let mut ctx = Ctx {
        parent_path: dir.clone(),
        inotify: inotify::init(CreateFlags::NONBLOCK | CreateFlags::CLOEXEC).unwrap(),
        calls: 0,
        seq: 0,
        noreplace_refused: false,
        closer: {
            let (sender, receiver) = std::sync::mpsc::channel::<OwnedFd>();
            std::thread::spawn(move || receiver.into_iter().for_each(drop));
            sender
        },
    };
    let parent = fs::open(
        dir.as_str(),
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .unwrap();
    if plan == "wake" {
        wake_floor(dir, iterations, warmup);
        return;
    }
    let run = |ctx: &mut Ctx| match plan {
        "v0" => ctx.cycle_v0(),
        "current" => ctx.cycle_current(),
        "format" => ctx.cycle_format(parent.as_fd()),
        other => panic!("unknown plan {other}"),
    };
    for _ in 0..warmup {
        run(&mut ctx);
    }
    ctx.calls = 0;
    let mut samples = Vec::with_capacity(iterations);
    for _ in 0..iterations {
        let start = Instant::now();
        run(&mut ctx);
        samples.push(start.elapsed().as_secs_f64() * 1e6);
    }
    let per_cycle = ctx.calls as f64 / iterations as f64;
    let listed = if args.get(5).map(String::as_str) == Some("samples") {
        let list: Vec<String> = samples.iter().map(|s| format!("{s:.2}")).collect();
        format!(",\"samples\":[{}]", list.join(","))
    } else {
        String::new()
    };
    samples.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let median = samples[samples.len() / 2];
    let p99 = samples[((samples.len() as f64) * 0.99) as usize];
    println!(
        "{{\"plan\":\"{plan}\",\"iterations\":{iterations},\"median_us\":{median:.2},\"p99_us\":{p99:.2},\"syscalls\":{per_cycle},\"noreplace_refused\":{}{listed}}}",
        ctx.noreplace_refused
    );
}

/// How long the waiter sleeps before each rename: as long as a waiter of a
/// lock held for a while (the bench holds it 30-70 ms), so the CPUs go as
/// idle as they do there.
const WAKE_SLEEP_MS: u64 = 50;

/// The kernel's part of a hand-off, on this machine: one thread renames
/// `f.lock` away (the release's detach) while a second sleeps in `poll` on
/// an inotify watch of the directory (the waiter), and, once woken, wakes a
/// third sleeping in `poll` on an eventfd (the hop to the JavaScript
/// thread: libuv sleeps in `epoll_wait` on one). Prints the medians of
/// both wake-ups, each from just before the syscall that causes it.
fn wake_floor(dir: &str, iterations: usize, warmup: usize) {
    use rustix::event::{EventfdFlags, PollFd, PollFlags, eventfd, poll};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::mpsc;

    let clock = Instant::now();
    let now_ns = move || clock.elapsed().as_nanos() as u64;
    let parent = fs::open(dir, DIR_FLAGS, Mode::empty()).unwrap();
    let inotify = inotify::init(CreateFlags::NONBLOCK | CreateFlags::CLOEXEC).unwrap();
    inotify::add_watch(&inotify, dir, WatchFlags::MOVED_FROM).unwrap();
    let bell = Arc::new(eventfd(0, EventfdFlags::NONBLOCK | EventfdFlags::CLOEXEC).unwrap());
    let renamed_at = Arc::new(AtomicU64::new(0));
    let rung_at = Arc::new(AtomicU64::new(0));
    let (woken_tx, woken_rx) = mpsc::channel::<(u64, u64)>();
    let (ready_tx, ready_rx) = mpsc::channel::<()>();
    let total = warmup + iterations;

    // The "JavaScript thread": sleeps on the eventfd, stamps its wake-up.
    let hop_bell = bell.clone();
    let hop_rung = rung_at.clone();
    let (hop_tx, hop_rx) = mpsc::channel::<u64>();
    let hop = std::thread::spawn(move || {
        for _ in 0..total {
            let mut fds = [PollFd::new(&*hop_bell, PollFlags::IN)];
            poll(&mut fds, None).unwrap();
            let woke = now_ns();
            let mut buf = [0u8; 8];
            rustix::io::read(&*hop_bell, &mut buf).unwrap();
            hop_tx.send(woke - hop_rung.load(Ordering::SeqCst)).unwrap();
        }
    });
    // The "waiter": sleeps on inotify, stamps, rings the bell.
    let waiter_renamed = renamed_at.clone();
    let waiter_bell = bell.clone();
    let waiter = std::thread::spawn(move || {
        let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); 4096];
        for _ in 0..total {
            ready_tx.send(()).unwrap();
            let mut fds = [PollFd::new(&inotify, PollFlags::IN)];
            poll(&mut fds, None).unwrap();
            let woke = now_ns();
            rung_at.store(now_ns(), Ordering::SeqCst);
            rustix::io::write(&*waiter_bell, &1u64.to_ne_bytes()).unwrap();
            let mut reader = inotify::Reader::new(&inotify, &mut buf);
            while reader.next().is_ok() {}
            woken_tx
                .send((woke - waiter_renamed.load(Ordering::SeqCst), 0))
                .unwrap();
        }
    });
    let mut wake = Vec::with_capacity(iterations);
    let mut hops = Vec::with_capacity(iterations);
    for i in 0..total {
        fs::mkdirat(&parent, c"f.lock", Mode::from_raw_mode(0o700)).unwrap();
        ready_rx.recv().unwrap();
        // Let the waiter reach its poll and sleep, as a waiter of a lock
        // held for a while has.
        std::thread::sleep(std::time::Duration::from_millis(WAKE_SLEEP_MS));
        renamed_at.store(now_ns(), Ordering::SeqCst);
        // A plain rename: the wake-up is what is measured, and FUSE
        // mounts (sshfs) refuse RENAME_NOREPLACE.
        fs::renameat(&parent, c"f.lock", &parent, c"f.lock.removing").unwrap();
        let (woke, _) = woken_rx.recv().unwrap();
        let hopped = hop_rx.recv().unwrap();
        fs::unlinkat(&parent, c"f.lock.removing", AtFlags::REMOVEDIR).unwrap();
        if i >= warmup {
            wake.push(woke as f64 / 1000.0);
            hops.push(hopped as f64 / 1000.0);
        }
    }
    waiter.join().unwrap();
    hop.join().unwrap();
    let median = |v: &mut Vec<f64>| {
        v.sort_by(|a, b| a.partial_cmp(b).unwrap());
        v[v.len() / 2]
    };
    println!(
        "{{\"plan\":\"wake\",\"iterations\":{iterations},\"rename_to_waiter_us\":{:.2},\"waiter_to_thread_us\":{:.2}}}",
        median(&mut wake),
        median(&mut hops)
    );
}
