//! Lines to stderr that never block the thread that writes them, and never
//! panic.
//!
//! Node makes a piped stderr non-blocking once JavaScript touches
//! `process.stderr` (any `console.error`, any test runner's worker), and the
//! descriptor is the whole process's: when its reader falls behind and the
//! pipe fills, a write fails with `EAGAIN`. `eprintln!` panics on that, and a
//! panic on one of the core's threads aborted the host process. Waiting for
//! the pipe on the writing thread is no better: that thread may be a waiter
//! or the JavaScript thread, and a stalled reader would then hold up the
//! lock itself (a free lock answering "the filesystem did not answer").
//!
//! So a line goes straight to stderr while stderr takes it at once. When it
//! does not, what is left of the line, and every line after it (so that
//! they stay in order and whole), is queued for a thread of its own that
//! waits for the pipe to drain. The queue holds at most [`QUEUE_BYTES`];
//! lines past that are dropped, and the next line let in is preceded by one
//! that says how many were. Lines still queued when the process exits are
//! lost with it. A stderr that blocks (one JavaScript never made
//! non-blocking) still blocks the thread that writes to it, as any write to
//! it does: only its owner can change the descriptor's mode.

use std::collections::VecDeque;
use std::io::{self, ErrorKind, Write};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

/// The most bytes the queue holds while stderr does not take them.
pub const QUEUE_BYTES: usize = 1 << 20;

/// Where lines go: stderr, or a test's pipe.
pub trait Sink: Send + Sync + 'static {
    /// Writes what it takes of `bytes` now, without waiting (`WouldBlock`
    /// when it takes nothing).
    fn write_now(&self, bytes: &[u8]) -> io::Result<usize>;
    /// Waits (a while, not forever) for room to write.
    fn wait_writable(&self);
}

/// A stream of lines to one sink.
pub struct Lines<S: Sink> {
    sink: S,
    cap: usize,
    queue: Mutex<Queue>,
    queued: Condvar,
    /// The text of the note on dropped lines, given how many.
    note: fn(u64) -> String,
}

#[derive(Default)]
struct Queue {
    lines: VecDeque<Vec<u8>>,
    bytes: usize,
    /// The writer thread holds a line taken from the queue.
    writing: bool,
    writer_started: bool,
    /// Lines dropped since the last one let in.
    dropped: u64,
}

/// How a write that may not wait ended.
enum Wrote {
    All,
    /// Stderr took the bytes before this offset, and no more for now.
    Blocked(usize),
    /// Stderr failed otherwise (a closed pipe): the line is dropped.
    Failed,
}

impl<S: Sink> Lines<S> {
    pub fn new(sink: S, cap: usize, note: fn(u64) -> String) -> Arc<Self> {
        Arc::new(Self {
            sink,
            cap,
            queue: Mutex::new(Queue::default()),
            queued: Condvar::new(),
            note,
        })
    }

    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Writes `line` now if stderr takes it, else queues it; never waits
    /// for stderr.
    pub fn write(self: &Arc<Self>, line: &[u8]) {
        let mut queue = self.lock();
        let mut text = Vec::with_capacity(line.len());
        if queue.dropped > 0 {
            let note = (self.note)(queue.dropped);
            if queue.bytes + note.len() + line.len() > self.cap {
                queue.dropped += 1;
                return;
            }
            text.extend_from_slice(note.as_bytes());
            queue.dropped = 0;
        }
        text.extend_from_slice(line);
        if !queue.lines.is_empty() || queue.writing {
            // Behind lines not yet written: after them, or not at all.
            if queue.bytes + text.len() > self.cap {
                queue.dropped += 1;
            } else {
                self.enqueue(&mut queue, text);
            }
            return;
        }
        // Nothing is waiting: straight to stderr, under the queue's lock so
        // that two threads' lines do not interleave (a write that may not
        // wait holds it for a syscall's time).
        match self.write_without_waiting(&text) {
            Wrote::All | Wrote::Failed => {}
            Wrote::Blocked(written) => {
                let rest = text[written..].to_vec();
                self.enqueue(&mut queue, rest);
            }
        }
    }

    fn write_without_waiting(&self, bytes: &[u8]) -> Wrote {
        let mut done = 0;
        while done < bytes.len() {
            match self.sink.write_now(&bytes[done..]) {
                Ok(0) => return Wrote::Blocked(done),
                Ok(n) => done += n,
                Err(error) if error.kind() == ErrorKind::Interrupted => {}
                Err(error) if error.kind() == ErrorKind::WouldBlock => return Wrote::Blocked(done),
                Err(_) => return Wrote::Failed,
            }
        }
        Wrote::All
    }

    fn enqueue(self: &Arc<Self>, queue: &mut Queue, text: Vec<u8>) {
        queue.bytes += text.len();
        queue.lines.push_back(text);
        if !queue.writer_started {
            let lines = Arc::clone(self);
            let spawned = std::thread::Builder::new()
                .name("exactlock-stderr".into())
                .spawn(move || lines.drain_forever());
            match spawned {
                Ok(_) => queue.writer_started = true,
                Err(_) => {
                    // No thread to wait for stderr: what was queued is lost,
                    // and said so with the next line let in.
                    queue.dropped += queue.lines.len() as u64;
                    queue.lines.clear();
                    queue.bytes = 0;
                    return;
                }
            }
        }
        self.queued.notify_one();
    }

    /// The writer thread: takes the queue's lines in order and writes each
    /// whole, waiting for stderr as long as it takes.
    fn drain_forever(&self) {
        let mut queue = self.lock();
        loop {
            let Some(text) = queue.lines.pop_front() else {
                queue = self.queued.wait(queue).unwrap_or_else(|p| p.into_inner());
                continue;
            };
            queue.bytes -= text.len();
            queue.writing = true;
            drop(queue);
            let mut done = 0;
            while done < text.len() {
                match self.write_without_waiting(&text[done..]) {
                    Wrote::All => break,
                    Wrote::Failed => break,
                    Wrote::Blocked(written) => {
                        done += written;
                        self.sink.wait_writable();
                    }
                }
            }
            queue = self.lock();
            queue.writing = false;
        }
    }

    /// Whether every line let in has been written (tests).
    #[cfg(test)]
    fn drained(&self) -> bool {
        let queue = self.lock();
        queue.lines.is_empty() && !queue.writing
    }
}

/// The process's stderr.
pub struct Stderr;

impl Sink for Stderr {
    fn write_now(&self, bytes: &[u8]) -> io::Result<usize> {
        io::stderr().lock().write(bytes)
    }

    #[cfg(unix)]
    fn wait_writable(&self) {
        poll_writable(io::stderr(), Duration::from_secs(1));
    }

    /// Windows has no readiness wait for a pipe handle: a short sleep, then
    /// the write is tried again.
    #[cfg(windows)]
    fn wait_writable(&self) {
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Waits up to `wait` for `fd` to take more bytes.
#[cfg(unix)]
fn poll_writable(fd: impl rustix::fd::AsFd, wait: Duration) {
    use rustix::event::{PollFd, PollFlags};
    let mut fds = [PollFd::new(&fd, PollFlags::OUT)];
    let _ = rustix::event::poll(&mut fds, Some(&crate::sys::wait::timespec(wait)));
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use rustix::fd::OwnedFd;
    use std::io::Read;
    use std::time::Instant;

    /// The write end of a pipe, non-blocking, as Node leaves a piped stderr.
    struct Pipe(OwnedFd);

    impl Sink for Pipe {
        fn write_now(&self, bytes: &[u8]) -> io::Result<usize> {
            rustix::io::write(&self.0, bytes).map_err(io::Error::from)
        }
        fn wait_writable(&self) {
            poll_writable(&self.0, Duration::from_millis(100));
        }
    }

    /// A pipe whose non-blocking write end is full; how many bytes fill it.
    fn full_pipe() -> (std::fs::File, OwnedFd, usize) {
        let (read, write) = rustix::pipe::pipe().unwrap();
        rustix::io::ioctl_fionbio(&write, true).unwrap();
        let mut filled = 0;
        loop {
            match rustix::io::write(&write, &[b'x'; 4096]) {
                Ok(n) => filled += n,
                Err(errno) => {
                    assert_eq!(errno, rustix::io::Errno::AGAIN);
                    break;
                }
            }
        }
        (std::fs::File::from(read), write, filled)
    }

    fn note(dropped: u64) -> String {
        format!("{dropped} dropped\n")
    }

    fn wait_drained<S: Sink>(lines: &Lines<S>) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while !lines.drained() {
            assert!(
                Instant::now() < deadline,
                "the writer thread never drained the queue"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn lines_written_while_nobody_reads_return_at_once_and_arrive_whole_and_in_order() {
        let (mut read, write, filled) = full_pipe();
        let lines = Lines::new(Pipe(write), QUEUE_BYTES, note);
        // Nobody reads yet: each call must return without waiting.
        let expected: Vec<String> = (0..2000).map(|i| format!("line {i:04}\n")).collect();
        for line in &expected {
            lines.write(line.as_bytes());
        }
        let mut got = vec![0; filled + expected.concat().len()];
        read.read_exact(&mut got).unwrap();
        assert_eq!(String::from_utf8_lossy(&got[filled..]), expected.concat());
        wait_drained(&lines);
        // Stderr takes lines again: straight through, in order after the rest.
        lines.write(b"after\n");
        let mut after = [0; 6];
        read.read_exact(&mut after).unwrap();
        assert_eq!(&after, b"after\n");
    }

    #[test]
    fn lines_past_the_queue_are_dropped_and_the_next_line_let_in_says_how_many() {
        let (mut read, write, filled) = full_pipe();
        // Room for 5 lines of 10 bytes.
        let lines = Lines::new(Pipe(write), 50, note);
        for i in 0..50 {
            lines.write(format!("line {i:04}\n").as_bytes());
        }
        let mut got = vec![0; filled + 50];
        read.read_exact(&mut got).unwrap();
        assert_eq!(
            &got[filled..],
            b"line 0000\nline 0001\nline 0002\nline 0003\nline 0004\n"
        );
        wait_drained(&lines);
        lines.write(b"next\n");
        let mut next = vec![0; "45 dropped\nnext\n".len()];
        read.read_exact(&mut next).unwrap();
        assert_eq!(String::from_utf8_lossy(&next), "45 dropped\nnext\n");
    }

    #[test]
    fn a_line_stderr_takes_only_in_part_is_finished_before_any_other() {
        let (mut read, write, filled) = full_pipe();
        let lines = Lines::new(Pipe(write), QUEUE_BYTES, note);
        // Make room for 10 bytes only: the first line goes in part.
        let mut room = vec![0; 10];
        read.read_exact(&mut room).unwrap();
        let long = format!("{}\n", "y".repeat(100));
        lines.write(long.as_bytes());
        lines.write(b"short\n");
        let mut got = vec![0; filled - 10 + long.len() + 6];
        read.read_exact(&mut got).unwrap();
        let tail = String::from_utf8_lossy(&got[filled - 10..]).into_owned();
        assert_eq!(tail, format!("{long}short\n"));
    }
}
