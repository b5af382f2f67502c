//! Tests for `process` on Linux (the native mechanism: run without
//! `EXACTLOCK_PLATFORM`). The comparisons with `ps` spawn it (only here: the
//! library itself never spawns anything).

use super::*;
use crate::sys::incarnation::this_process;
use crate::sys::lstart::start_time;
use crate::sys::platform::linux::procfs::{
    Stat, parse_boottime_offset_ns, parse_stat, root_ticks, self_stat, stat_of,
};

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// `ps -o lstart= -p PID` under `LC_ALL=C` and the given `TZ`; `None` when ps
/// found no such process.
fn ps_lstart(pid: u32, tz: &str) -> Option<String> {
    let out = Command::new("ps")
        .args(["-o", "lstart=", "-p", &pid.to_string()])
        .env("LC_ALL", "C")
        .env("LANG", "C")
        .env("TZ", tz)
        .stderr(Stdio::null())
        .output()
        .expect("ps must be installed to run these tests");
    let text = String::from_utf8(out.stdout).expect("ps prints ASCII under LC_ALL=C");
    let text = text.trim();
    (out.status.success() && !text.is_empty()).then(|| text.to_string())
}

/// Polls `cond` every millisecond for up to 10 s.
fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn sleep_binary() -> PathBuf {
    ["/bin/sleep", "/usr/bin/sleep"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .expect("a sleep binary")
}

/// Kills and reaps a child we spawned, whatever state it is in.
fn finish(mut child: Child) {
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn start_time_matches_ps_for_every_process() {
    let mut compared = 0;
    let mut skipped = 0;
    for entry in std::fs::read_dir("/proc").unwrap() {
        let Ok(pid) = entry.unwrap().file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        // Read before and after ps: if the two disagree the pid vanished or
        // was reused during the comparison, and there is nothing to compare.
        let before = start_time(pid);
        let ps = ps_lstart(pid, "UTC");
        let after = start_time(pid);
        if before != after || ps.is_none() {
            skipped += 1;
            continue;
        }
        assert_eq!(
            before, ps,
            "pid {pid}: /proc-derived start time differs from ps"
        );
        compared += 1;
    }
    eprintln!("start_time == ps for {compared} pids ({skipped} vanished)");
    // At least ourselves, our parent chain and pid 1.
    assert!(compared >= 3, "only {compared} processes compared");
}

#[test]
fn start_time_matches_ps_for_a_fresh_child() {
    let child = Command::new(sleep_binary()).arg("5").spawn().unwrap();
    let pid = child.id();
    let ours = start_time(pid);
    let ps = ps_lstart(pid, "UTC");
    finish(child);
    assert!(ours.is_some());
    assert_eq!(ours, ps);
}

/// Run by [`start_time_does_not_depend_on_the_callers_tz`] in a child process
/// whose `TZ` and locale differ from the parent's; a no-op otherwise.
///
/// The TZ has to differ for the *process* computing the value, and changing
/// our own environment is `unsafe` (and racy with other test threads), hence
/// the re-executed test binary.
#[test]
fn helper_print_start_time() {
    if let Ok(pid) = std::env::var("EXACTLOCK_TEST_START_TIME_OF") {
        let value = start_time(pid.parse().unwrap()).unwrap_or_default();
        println!("\nSTART_TIME={value}\n");
    }
}

/// `start_time` formats by hand in UTC and never calls `localtime`, so the
/// caller's `TZ` cannot leak into a record: a Node process started with
/// `TZ=Asia/Tokyo` must write the same string as one started in UTC, or they
/// would judge each other's locks as PID reuse. `ps` does depend on `TZ` (the
/// first assertion shows that this test can tell), which is why the format
/// pins `TZ=UTC`.
#[test]
fn start_time_does_not_depend_on_the_callers_tz() {
    let me = std::process::id();
    // A POSIX TZ rule: needs no tz database, so it works on minimal images.
    let tokyo = "JST-9";
    let utc = ps_lstart(me, "UTC").unwrap();
    assert_ne!(ps_lstart(me, tokyo).unwrap(), utc, "ps should honour TZ");

    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "sys::process::tests::helper_print_start_time",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("EXACTLOCK_TEST_START_TIME_OF", me.to_string())
        .env("TZ", tokyo)
        .env("LC_ALL", "de_DE.UTF-8")
        .env("LANG", "de_DE.UTF-8")
        .output()
        .unwrap();
    assert!(out.status.success());
    let stdout = String::from_utf8(out.stdout).unwrap();
    let value = stdout
        .lines()
        .find_map(|line| line.strip_prefix("START_TIME="))
        .expect("helper printed a start time");
    assert_eq!(value, utc);
    assert_eq!(Some(value), start_time(me).as_deref());
}

#[test]
fn an_unreaped_child_is_exited_then_gone_once_reaped() {
    let mut child = Command::new("true").spawn().unwrap();
    let pid = child.id();
    // std does not reap until wait(), so the child stays a zombie.
    wait_for("the child to become a zombie", || {
        stat_of(pid).is_some_and(|s| s.state == b'Z')
    });
    assert_eq!(probe(pid), Probe::Exited);
    assert_eq!(probe(pid), Probe::Exited);
    // ps still knows a zombie's start time, and so do we.
    assert_eq!(start_time(pid), ps_lstart(pid, "UTC"));
    child.wait().unwrap();
    assert_eq!(probe(pid), Probe::Gone);
    assert_eq!(start_time(pid), None);
}

/// A leader thread that called pthread_exit() shows state Z while the other
/// threads keep the process alive; calling that "exited" would let a waiter
/// displace a live holder. Python is the only way here to make a process do
/// that without `unsafe`; the test is skipped (loudly) where it is missing.
#[test]
fn a_zombie_leader_with_live_threads_is_running() {
    let script = "import ctypes, threading, time\n\
                  threading.Thread(target=time.sleep, args=(30,)).start()\n\
                  ctypes.CDLL(None).pthread_exit(None)\n";
    let child = match Command::new("python3").args(["-c", script]).spawn() {
        Ok(child) => child,
        Err(error) => {
            eprintln!("SKIPPED: python3 not runnable ({error})");
            return;
        }
    };
    let pid = child.id();
    wait_for("the leader to exit", || {
        stat_of(pid).is_some_and(|s| s.state == b'Z')
    });
    // Independent evidence that a thread is still running, so that the
    // assertion below tests our verdict and not Python.
    let live_threads = std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|dir| dir.count())
        .unwrap_or(0);
    let verdict = probe(pid);
    let ps = ps_lstart(pid, "UTC");
    finish(child);
    if live_threads < 2 {
        eprintln!("SKIPPED: python3 did not keep a thread alive after pthread_exit");
        return;
    }
    assert!(ps.is_some());
    assert!(matches!(
        verdict,
        Probe::Running {
            start_ticks: Some(_)
        }
    ));
}

#[test]
fn invalid_pids_are_unknown() {
    for pid in [0, i32::MAX as u32 + 1, u32::MAX] {
        assert_eq!(probe(pid), Probe::Unknown, "pid {pid}");
        assert_eq!(start_time(pid), None, "pid {pid}");
    }
}

#[test]
fn a_pid_that_does_not_exist_is_gone() {
    let pid_max: u32 = std::fs::read_to_string("/proc/sys/kernel/pid_max")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let pid = (1..pid_max)
        .rev()
        .find(|pid| !Path::new(&format!("/proc/{pid}")).exists())
        .unwrap();
    assert_eq!(probe(pid), Probe::Gone, "pid {pid}");
    assert_eq!(probe(pid), Probe::Gone);
    assert_eq!(start_time(pid), None);
}

#[test]
fn our_own_pid_is_running_with_our_start_time() {
    let me = std::process::id();
    let this = this_process().unwrap();
    assert_ne!(this.start_time, "unknown");
    assert_eq!(Some(this.start_time.clone()), ps_lstart(me, "UTC"));
    assert_eq!(
        probe(me),
        Probe::Running {
            start_ticks: this.start_ticks
        }
    );
    assert_eq!(self_stat().ok().map(|s| s.start_ticks), this.start_ticks);
}

#[test]
fn a_comm_with_spaces_and_parentheses_parses() {
    // Looks like the end of comm followed by a zombie state: a parser that
    // stopped at the first ')' would call this sleeping process Exited.
    let name = "a) Z 1 (c";
    let dir = std::env::temp_dir().join(format!("exactlock-process-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir(&dir).unwrap();
    std::os::unix::fs::symlink(sleep_binary(), dir.join(name)).unwrap();
    let child = Command::new(dir.join(name)).arg("5").spawn().unwrap();
    let pid = child.id();
    wait_for("exec of the renamed sleep", || {
        std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c == format!("{name}\n"))
    });
    let raw = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let verdict = probe(pid);
    let ticks = stat_of(pid).map(|s| s.start_ticks);
    let ps = ps_lstart(pid, "UTC");
    finish(child);
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(raw.contains(&format!("({name})")), "{raw}");
    assert!(ps.is_some());
    assert_eq!(verdict, Probe::Running { start_ticks: ticks });
}

#[test]
fn a_time_namespace_offset_is_read_from_its_boottime_line() {
    let text = "monotonic           0         0\nboottime       100000  500000000\n";
    assert_eq!(parse_boottime_offset_ns(text), Some(100_000_500_000_000));
    assert_eq!(
        parse_boottime_offset_ns("boottime -5 0\n"),
        Some(-5_000_000_000)
    );
    assert_eq!(parse_boottime_offset_ns("monotonic 1 2\n"), None);
    // Outside a time namespace (here) the offset is 0.
    assert_eq!(root_ticks(12_345), Some(12_345));
}

#[test]
fn parse_stat_uses_the_last_parenthesis() {
    // Fields 4..=19 are filler, 20 is num_threads, 21 filler, 22 starttime.
    let filler: Vec<String> = (4..=19).map(|n| n.to_string()).collect();
    let line = format!("42 (x) Z 9 (y) S {} 3 0 777 99 100\n", filler.join(" "));
    let line = line.as_bytes();
    assert_eq!(
        parse_stat(Some(42), line),
        Some(Stat {
            state: b'S',
            num_threads: 3,
            start_ticks: 777
        })
    );
    // The leading pid must be the one asked for.
    assert_eq!(parse_stat(Some(43), line), None);
    // Truncated, or a non-numeric field where a number belongs.
    assert_eq!(parse_stat(Some(42), b"42 (x) S 1 2 3"), None);
    assert_eq!(
        parse_stat(
            Some(42),
            b"42 (x) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 3 0 z"
        ),
        None
    );
    assert_eq!(parse_stat(Some(42), b"42 x S 1"), None);
    assert_eq!(parse_stat(Some(42), b""), None);
}
