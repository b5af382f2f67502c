//! Tests of the Windows platform against the kernel (Windows, or Wine:
//! `npm run test:windows` runs them there): processes, their times, waits.

use std::fs::{File, OpenOptions};
use std::os::windows::fs::OpenOptionsExt;
use std::os::windows::io::AsHandle;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::sys::platform::native::{self, HeldEvents, NameWatch};
use crate::sys::process::Probe;
use crate::sys::wait::{HolderExit, Wake, Woken};

const FILE_FLAG_BACKUP_SEMANTICS: u32 = 0x0200_0000;

/// Run as a child process (`--ignored --exact sys::platform::windows::kernel_tests::child_sleeper`):
/// sleeps `CHILD_SLEEP_MS`.
#[test]
#[ignore = "a child process for the other tests"]
fn child_sleeper() {
    let millis = std::env::var("CHILD_SLEEP_MS").map_or(0, |v| v.parse().unwrap());
    thread::sleep(Duration::from_millis(millis));
    if let Ok(code) = std::env::var("CHILD_EXIT_CODE") {
        std::process::exit(code.parse().unwrap());
    }
}

fn spawn_sleeper(millis: u64) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "sys::platform::windows::kernel_tests::child_sleeper",
            "--test-threads=1",
            "-q",
        ])
        .env("CHILD_SLEEP_MS", millis.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// Runs `change` on another thread after `millis`, while the caller sleeps.
fn later(millis: u64, change: impl FnOnce() + Send + 'static) -> thread::JoinHandle<()> {
    thread::spawn(move || {
        thread::sleep(Duration::from_millis(millis));
        change();
    })
}

/// Sleeps on `watch` while `change` is made to `root` from another thread
/// 100 ms in: what woke the sleeper.
fn woken_by_a_change(
    watch: &NameWatch,
    wake: &Wake,
    root: &Path,
    change: impl FnOnce(&Path) + Send + 'static,
) -> Woken {
    let root = root.to_path_buf();
    let changer = later(100, move || change(&root));
    let woken = native::sleep(Some(watch), None, wake, Duration::from_secs(20));
    changer.join().unwrap();
    woken
}

fn armed_wake() -> Arc<Wake> {
    let wake = Wake::new();
    wake.arm();
    assert!(wake.pollable().is_some(), "an event is made");
    wake
}

fn scratch_dir(tag: &str) -> PathBuf {
    let unique = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let dir = std::env::temp_dir().join(format!("win-plat-{tag}-{}-{unique}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A synchronous directory handle, as the crate's facade holds them.
fn open_dir(path: &Path) -> File {
    OpenOptions::new()
        .read(true)
        .custom_flags(FILE_FLAG_BACKUP_SEMANTICS)
        .open(path)
        .unwrap()
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

#[test]
fn own_process_is_running_with_its_start() {
    let me = std::process::id();
    let own = native::own_start().unwrap();
    let ticks = own.start_ticks.expect("own start readable");
    assert_eq!(
        native::probe(me),
        Probe::Running {
            start_ticks: Some(ticks)
        }
    );
    assert_eq!(native::start_ticks(me), Some(ticks));
    let secs = own.start_secs.unwrap();
    assert_eq!(
        native::start_secs(native::start_ticks(me).unwrap()),
        Some(secs)
    );
    assert!(
        secs <= now_secs() && secs + 3600 > now_secs(),
        "started within the hour: {secs}"
    );
    assert_eq!(
        native::upstream_start_time(me),
        Some(format!("windows:{ticks}"))
    );
    let boot = native::boot_secs().expect("boot time");
    assert!(boot <= secs + 2, "booted {boot} before we started {secs}");
    eprintln!("own start {ticks} ({secs}), boot {boot}");
}

#[test]
fn pids_without_a_process() {
    assert_eq!(native::probe(0), Probe::Unknown);
    assert_eq!(native::probe(0xFFFF_FFFC), Probe::Gone);
    assert_eq!(native::start_ticks(0xFFFF_FFFC), None);
    // The kernel ignores a pid's two low bits; no process has our pid + 1.
    let me = std::process::id();
    assert_eq!(me % 4, 0, "pids are multiples of 4");
    assert_eq!(native::probe(me + 1), Probe::Gone);
    assert!(matches!(
        native::holder_exit(0xFFFF_FFFC),
        HolderExit::AlreadyGone
    ));
}

#[test]
fn a_child_runs_then_exits_then_is_gone() {
    let mut child = spawn_sleeper(60_000);
    let pid = child.id();
    let Probe::Running {
        start_ticks: Some(ticks),
    } = native::probe(pid)
    else {
        panic!("child {pid} not running: {:?}", native::probe(pid));
    };
    assert!(ticks >= native::own_start().unwrap().start_ticks.unwrap());
    child.kill().unwrap();
    child.wait().unwrap();
    // `child` still holds its handle: the object lingers, exited.
    assert_eq!(native::probe(pid), Probe::Exited);
    assert_eq!(
        native::start_ticks(pid),
        Some(ticks),
        "start readable after exit"
    );
    assert!(matches!(native::holder_exit(pid), HolderExit::AlreadyGone));
    drop(child);
    let deadline = Instant::now() + Duration::from_secs(5);
    while native::probe(pid) != Probe::Gone && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(native::probe(pid), Probe::Gone);
}

#[test]
fn an_exit_code_of_still_active_is_still_an_exit() {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "sys::platform::windows::kernel_tests::child_sleeper",
            "--test-threads=1",
            "-q",
        ])
        .env("CHILD_SLEEP_MS", "0")
        .env("CHILD_EXIT_CODE", "259")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(259), "STILL_ACTIVE as an exit code");
    assert_eq!(native::probe(child.id()), Probe::Exited);
}

#[test]
fn two_children_have_different_starts() {
    let mut first = spawn_sleeper(10_000);
    thread::sleep(Duration::from_millis(50));
    let mut second = spawn_sleeper(10_000);
    let a = native::start_ticks(first.id()).unwrap();
    let b = native::start_ticks(second.id()).unwrap();
    assert_ne!(a, b);
    assert!(a < b, "{a} then {b}");
    for child in [&mut first, &mut second] {
        child.kill().unwrap();
        child.wait().unwrap();
    }
}

#[test]
fn a_holders_exit_wakes_the_sleeper() {
    let mut child = spawn_sleeper(300);
    let HolderExit::Watch(holder) = native::holder_exit(child.id()) else {
        panic!("child not watchable");
    };
    let wake = armed_wake();
    let started = Instant::now();
    assert_eq!(
        native::sleep(None, Some(&holder), &wake, Duration::from_secs(30)),
        Woken::HolderExited
    );
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    child.wait().unwrap();
}

#[test]
fn a_signal_wakes_the_sleeper_and_the_timeout_is_the_fallback() {
    let wake = armed_wake();
    let signaller = wake.clone();
    let thread = later(50, move || signaller.signal());
    assert_eq!(
        native::sleep(None, None, &wake, Duration::from_secs(30)),
        Woken::Signalled
    );
    thread.join().unwrap();
    assert!(!wake.is_signalled(), "drained by the sleep");
    // A signal sent before the sleep is not missed.
    wake.signal();
    assert_eq!(
        native::sleep(None, None, &wake, Duration::from_secs(30)),
        Woken::Signalled
    );
    let started = Instant::now();
    assert_eq!(
        native::sleep(None, None, &wake, Duration::from_millis(100)),
        Woken::Timeout
    );
    let slept = started.elapsed();
    assert!(
        slept >= Duration::from_millis(95) && slept < Duration::from_secs(3),
        "{slept:?}"
    );
}

#[test]
fn a_name_watch_wakes_for_its_name_only() {
    let root = scratch_dir("name");
    std::fs::create_dir(root.join("target.lock")).unwrap();
    std::fs::create_dir(root.join("other.lock")).unwrap();
    let dir = open_dir(&root);
    let watch = NameWatch::new(dir.as_handle(), "target.lock".as_ref()).expect("a watch");
    assert!(!watch.relevant_events(), "nothing yet");
    let wake = armed_wake();
    let changer = {
        let root = root.clone();
        thread::spawn(move || {
            thread::sleep(Duration::from_millis(100));
            std::fs::remove_dir(root.join("other.lock")).unwrap();
            thread::sleep(Duration::from_millis(400));
            std::fs::rename(root.join("target.lock"), root.join("moved.lock")).unwrap();
        })
    };
    let started = Instant::now();
    let woken = native::sleep(Some(&watch), None, &wake, Duration::from_secs(20));
    let slept = started.elapsed();
    changer.join().unwrap();
    assert_eq!(woken, Woken::NameChanged, "after {slept:?}");
    assert!(
        slept >= Duration::from_millis(400),
        "woken by another name after {slept:?}"
    );
    assert!(slept < Duration::from_secs(10), "{slept:?}");

    // Removal wakes too, and the read was re-issued after the last wake.
    let create = |root: &Path| std::fs::create_dir(root.join("target.lock")).unwrap();
    assert_eq!(
        woken_by_a_change(&watch, &wake, &root, create),
        Woken::NameChanged
    );
    let started = Instant::now();
    let remove = |root: &Path| std::fs::remove_dir(root.join("target.lock")).unwrap();
    assert_eq!(
        woken_by_a_change(&watch, &wake, &root, remove),
        Woken::NameChanged
    );
    assert!(started.elapsed() < Duration::from_secs(10));

    // Queued between sleeps: seen by relevant_events without waiting.
    std::fs::create_dir(root.join("target.lock")).unwrap();
    thread::sleep(Duration::from_millis(200));
    assert!(watch.relevant_events());
    assert!(!watch.relevant_events(), "consumed");
    drop(watch);
    drop(dir);
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn a_watch_never_blocks_renaming_or_removing_the_directory() {
    let parent = scratch_dir("share");
    let root = parent.join("dir");
    std::fs::create_dir(&root).unwrap();
    let dir = open_dir(&root);
    let watch = NameWatch::new(dir.as_handle(), "x".as_ref()).expect("a watch");
    drop(dir);
    std::fs::rename(&root, parent.join("renamed")).unwrap();
    std::fs::remove_dir(parent.join("renamed")).unwrap();
    let wake = armed_wake();
    // The directory is gone: the pending read ends (relevant) or stays
    // pending; either way the sleep ends.
    let woken = native::sleep(Some(&watch), None, &wake, Duration::from_millis(500));
    eprintln!("watch on a removed directory: {woken:?}");
    drop(watch);
    std::fs::remove_dir_all(&parent).unwrap();
}

#[test]
fn held_events_wake_on_changes_and_on_stop() {
    let parent = scratch_dir("held");
    let root = parent.join("lock");
    std::fs::create_dir(&root).unwrap();
    std::fs::write(root.join("info"), b"{}").unwrap();
    let parent_dir = open_dir(&parent);
    let root_dir = open_dir(&root);
    let events = HeldEvents::new(parent_dir.as_handle(), root_dir.as_handle()).expect("events");
    let stop = armed_wake();
    let stop_event = stop.pollable().unwrap();

    // One change may come in several batches (Windows buffers what
    // arrives between reads): wait until a wait takes the full second.
    let drain = || loop {
        let started = Instant::now();
        events.wait(stop_event).unwrap();
        if started.elapsed() >= Duration::from_millis(900) {
            break;
        }
    };
    let within_event = |what: &str, change: Box<dyn FnOnce() + Send>| {
        drain();
        let changer = later(150, change);
        let started = Instant::now();
        events.wait(stop_event).unwrap();
        let waited = started.elapsed();
        changer.join().unwrap();
        eprintln!("{what}: {waited:?}");
        assert!(
            waited >= Duration::from_millis(100) && waited < Duration::from_millis(900),
            "{what}: {waited:?} (the 1 s timer is not an event)"
        );
    };
    let info = root.join("info");
    within_event(
        "record rewritten in place",
        Box::new(move || {
            std::fs::OpenOptions::new().write(true).open(&info).unwrap();
            std::fs::write(&info, b"{\"pid\":1}").unwrap();
        }),
    );
    let extra = root.join("extra");
    within_event(
        "file added to the root",
        Box::new(move || std::fs::write(&extra, b"").unwrap()),
    );
    let (from, to) = (parent.join("sibling"), parent.join("sibling2"));
    std::fs::create_dir(&from).unwrap();
    within_event(
        "name renamed in the parent",
        Box::new(move || std::fs::rename(&from, &to).unwrap()),
    );

    // Nothing happening: the 1 s look.
    drain();
    let started = Instant::now();
    events.wait(stop_event).unwrap();
    let idle = started.elapsed();
    assert!(
        idle >= Duration::from_millis(900) && idle < Duration::from_secs(5),
        "{idle:?}"
    );

    stop.signal();
    let started = Instant::now();
    events.wait(stop_event).unwrap();
    assert!(
        started.elapsed() < Duration::from_millis(200),
        "stop: {:?}",
        started.elapsed()
    );
    assert!(
        stop.is_signalled(),
        "stop is left set for the caller to see"
    );
    native::held_wait(stop_event, Duration::from_secs(10)).unwrap();
    drop(events);
    drop(root_dir);
    drop(parent_dir);
    std::fs::remove_dir_all(&parent).unwrap();
}

#[test]
fn hrtime_follows_the_monotonic_clock() {
    let (a, instant) = (native::hrtime_ns(), Instant::now());
    thread::sleep(Duration::from_millis(100));
    let (b, elapsed) = (native::hrtime_ns(), instant.elapsed());
    let measured = i128::try_from(elapsed.as_nanos()).unwrap();
    assert!(a > 0 && b > a);
    assert!(
        (b - a - measured).abs() < 20_000_000,
        "hrtime {} vs Instant {measured}",
        b - a
    );
}

#[test]
fn no_thread_accounting_and_no_namespaces() {
    assert_eq!(native::this_thread(), 0);
    assert_eq!(native::cpu_wait(0), None);
    assert_eq!(native::pid_ns(), None);
    assert_eq!(native::boot_id(), None);
    assert_eq!(native::dev_number(0xFFFF_FFFF), 0xFFFF_FFFF);
    assert!(
        native::open_nofollow(Path::new("C:\\"), crate::sys::os::fs::OFlags::empty()).is_none()
    );
    assert!(native::PATH_ONLY.is_none());
}

#[test]
fn a_watch_works_from_a_handle_that_may_not_list() {
    // The crate's facade opens synchronous handles, sometimes with no more
    // than SYNCHRONIZE | FILE_READ_ATTRIBUTES: the watch reopens its own.
    const SYNCHRONIZE: u32 = 0x0010_0000;
    const FILE_READ_ATTRIBUTES: u32 = 0x80;
    let root = scratch_dir("minimal");
    let dir = OpenOptions::new()
        .access_mode(SYNCHRONIZE | FILE_READ_ATTRIBUTES)
        .custom_flags(FILE_FLAG_BACKUP_SEMANTICS)
        .open(&root)
        .unwrap();
    let watch = NameWatch::new(dir.as_handle(), "n".as_ref()).expect("a watch");
    let wake = armed_wake();
    let make = |root: &Path| std::fs::create_dir(root.join("n")).unwrap();
    assert_eq!(
        woken_by_a_change(&watch, &wake, &root, make),
        Woken::NameChanged
    );
    drop(watch);
    drop(dir);
    std::fs::remove_dir_all(&root).unwrap();
}
