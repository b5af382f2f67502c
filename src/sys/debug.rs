//! `NODE_DEBUG=exactlock`: each decision of the core on stderr, in the
//! format of Node's `util.debuglog` (`EXACTLOCK <pid>: <message>`), so one
//! switch shows a stuck lock's story next to Node's own sections.
//!
//! The environment is read once, when the module loads: `NODE_DEBUG` is a
//! comma-separated list of section names (nothing trimmed), case-insensitive,
//! where `*` matches any run of characters (`exact*`, `*`), as Node reads it.
//!
//! A line never panics and never blocks for long. Node makes a piped stderr
//! non-blocking once JavaScript touches `process.stderr` (any
//! `console.error`, any test runner's worker), and the descriptor is the
//! process's: when the reader falls behind and the pipe fills, a write
//! fails with `EAGAIN`. `eprintln!` panics on that, and a panic on one of
//! the core's threads aborted the host process. A line waits up to
//! [`DRAIN_WAIT`] for the pipe to drain, as Node's own synchronous stderr
//! waits, and is dropped after that; the next line that gets through says
//! how many were lost.

use std::fmt::Write as _;
use std::io::{ErrorKind, Write};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Whether decisions are logged.
pub fn enabled() -> bool {
    static ENABLED: OnceLock<bool> = OnceLock::new();
    *ENABLED.get_or_init(|| {
        std::env::var("NODE_DEBUG").is_ok_and(|value| names_section(&value, "exactlock"))
    })
}

/// Whether the `NODE_DEBUG` value `list` names `section`.
fn names_section(list: &str, section: &str) -> bool {
    list.split(',')
        .any(|name| glob_matches(&name.to_ascii_lowercase(), section))
}

/// `pattern` (with `*` for any run of characters) against the whole of `text`.
fn glob_matches(pattern: &str, text: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == text,
        Some((head, rest)) => {
            let Some(tail) = text.strip_prefix(head) else {
                return false;
            };
            (0..=tail.len())
                .any(|skip| tail.is_char_boundary(skip) && glob_matches(rest, &tail[skip..]))
        }
    }
}

/// How long one line waits for a full stderr to drain before it is dropped.
const DRAIN_WAIT: Duration = Duration::from_secs(1);

/// Lines dropped since one last got through.
static DROPPED: AtomicU64 = AtomicU64::new(0);
/// The last line was cut short: the next one starts on a line of its own.
static CUT_SHORT: AtomicBool = AtomicBool::new(false);

/// Writes one decision (only when [`enabled`]; use [`debug!`](crate::debug)).
pub fn write(message: std::fmt::Arguments<'_>) {
    let pid = std::process::id();
    let dropped = DROPPED.swap(0, Ordering::Relaxed);
    let mut text = String::new();
    if CUT_SHORT.swap(false, Ordering::Relaxed) {
        text.push('\n');
    }
    if dropped > 0 {
        let _ = writeln!(
            text,
            "EXACTLOCK {pid}: {dropped} earlier line(s) dropped: stderr stayed full for {} ms",
            DRAIN_WAIT.as_millis()
        );
    }
    let _ = writeln!(text, "EXACTLOCK {pid}: {message}");
    // One thread at a time, so that lines stay whole.
    let mut stderr = std::io::stderr().lock();
    if let Err(written) = write_waiting(&mut stderr, text.as_bytes(), DRAIN_WAIT) {
        DROPPED.fetch_add(dropped + 1, Ordering::Relaxed);
        CUT_SHORT.store(written > 0, Ordering::Relaxed);
    }
}

/// Writes all of `bytes` to `out`, waiting up to `wait` in all while it
/// would block; `Err` with how much was written when it gives up (the wait
/// spent, or any other error).
fn write_waiting<W: Write + Writable>(
    out: &mut W,
    bytes: &[u8],
    wait: Duration,
) -> Result<(), usize> {
    let deadline = Instant::now() + wait;
    let mut done = 0;
    while done < bytes.len() {
        match out.write(&bytes[done..]) {
            Ok(0) => return Err(done),
            Ok(n) => done += n,
            Err(error) if error.kind() == ErrorKind::Interrupted => {}
            Err(error) if error.kind() == ErrorKind::WouldBlock => {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() || !out.writable_within(left) {
                    return Err(done);
                }
            }
            Err(_) => return Err(done),
        }
    }
    Ok(())
}

/// A stream that can say when it will take more bytes.
trait Writable {
    /// Waits up to `wait` for room; `false` when none came.
    fn writable_within(&self, wait: Duration) -> bool;
}

#[cfg(unix)]
impl<T: rustix::fd::AsFd> Writable for T {
    fn writable_within(&self, wait: Duration) -> bool {
        use rustix::event::{PollFd, PollFlags};
        let deadline = Instant::now() + wait;
        loop {
            let left =
                crate::sys::wait::timespec(deadline.saturating_duration_since(Instant::now()));
            let mut fds = [PollFd::new(self, PollFlags::OUT)];
            match rustix::event::poll(&mut fds, Some(&left)) {
                Err(rustix::io::Errno::INTR) => continue,
                Ok(ready) => return ready > 0,
                Err(_) => return false,
            }
        }
    }
}

/// Windows has no readiness wait for a pipe handle: a short sleep, then the
/// write is tried again (a console or a blocking pipe never gets here).
#[cfg(windows)]
impl<T> Writable for T {
    fn writable_within(&self, wait: Duration) -> bool {
        std::thread::sleep(wait.min(Duration::from_millis(10)));
        true
    }
}

/// Logs a decision under `NODE_DEBUG=exactlock`; the arguments are not even
/// formatted otherwise.
#[macro_export]
macro_rules! debug {
    ($($arg:tt)*) => {
        if $crate::sys::debug::enabled() {
            $crate::sys::debug::write(format_args!($($arg)*));
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pipe whose write end is non-blocking and full, as Node leaves a
    /// piped stderr whose reader has fallen behind.
    #[cfg(unix)]
    fn full_pipe() -> (std::fs::File, std::fs::File, usize) {
        let (read, write) = rustix::pipe::pipe().unwrap();
        rustix::io::ioctl_fionbio(&write, true).unwrap();
        let mut write = std::fs::File::from(write);
        let mut filled = 0;
        loop {
            match write.write(&[b'x'; 4096]) {
                Ok(n) => filled += n,
                Err(error) => {
                    assert_eq!(error.kind(), ErrorKind::WouldBlock);
                    break;
                }
            }
        }
        (std::fs::File::from(read), write, filled)
    }

    #[cfg(unix)]
    #[test]
    fn a_full_non_blocking_stderr_waits_for_its_reader_then_gets_the_whole_line() {
        use std::io::Read;
        let (mut read, mut write, filled) = full_pipe();
        let reader = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            let mut all = Vec::new();
            read.read_to_end(&mut all).unwrap();
            all
        });
        let line = b"EXACTLOCK 1: a line\n";
        assert_eq!(
            write_waiting(&mut write, line, Duration::from_secs(30)),
            Ok(())
        );
        drop(write);
        let all = reader.join().unwrap();
        assert_eq!(all.len(), filled + line.len());
        assert!(all.ends_with(line));
    }

    #[cfg(unix)]
    #[test]
    fn a_full_non_blocking_stderr_nobody_reads_drops_the_line_after_the_wait() {
        let (_read, mut write, _) = full_pipe();
        let outcome = write_waiting(
            &mut write,
            b"EXACTLOCK 1: lost\n",
            Duration::from_millis(50),
        );
        assert_eq!(outcome, Err(0));
    }

    #[test]
    fn node_debug_lists_are_read_as_node_reads_them() {
        for list in [
            "exactlock",
            "EXACTLOCK",
            "net,exactlock",
            "exact*",
            "*",
            "*lock",
        ] {
            assert!(names_section(list, "exactlock"), "{list}");
        }
        // Node splits on commas only and trims nothing.
        for list in [
            "",
            "net",
            "exactlocks",
            "exact",
            "lock*",
            "net,http",
            "http exactlock",
            "net, exactlock",
            " exactlock",
            "exactlock ",
        ] {
            assert!(!names_section(list, "exactlock"), "{list}");
        }
    }
}
