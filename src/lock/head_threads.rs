//! The threads waiting acquisitions sleep on: a pool of their own.
//!
//! The head of a lock's queue in this process (the acquisition first in line
//! for it) sleeps on a thread for as long as it waits: on the kernel's notice
//! of the lock's name and of its holder's exit. On the runtime's blocking
//! pool, which tokio caps at 512 threads, 512 locks waited for at once took
//! every thread of it, and every other blocking step of the process queued
//! behind the waits: a release made off the calling thread (on network
//! mounts, and with `inlineFastPath: false`), `inspectLock`, a first attempt
//! off the thread. Among them the very releases those waits were waiting
//! for: measured, 520 waits whose 520 locks this process released after 1 s,
//! releases 7 s late and 195 waits failing `ELOCKED` with their locks free.
//! So the heads have a pool of their own, which no short step shares, capped
//! far higher ([`MAX_HEADS`]); each head still runs in the lock runtime's
//! context (its test hook and its drops use that runtime), only the thread
//! is this pool's.

use std::sync::OnceLock;
use std::time::Duration;

use tokio::runtime::{Builder, Handle, Runtime};
use tokio::task::JoinHandle;

/// Heads sleeping at once before a further one waits for a thread (which
/// [`crate::lock::acquire`] notices, and answers for it at its deadline).
/// Each sleeping head costs a thread: its stack is reserved, not used.
pub const MAX_HEADS: usize = 4096;

/// How long an idle head thread is kept for the next wait.
const KEEP_ALIVE: Duration = Duration::from_secs(10);

/// The pool's runtime: only its blocking threads are used (nothing runs on
/// it as a task, so it is never driven). `None` where it could not be made:
/// heads then run on the calling runtime's blocking pool, as before.
fn pool() -> Option<&'static Runtime> {
    static POOL: OnceLock<Option<Runtime>> = OnceLock::new();
    POOL.get_or_init(|| {
        Builder::new_current_thread()
            .thread_name("exactlock-wait")
            .max_blocking_threads(MAX_HEADS)
            .thread_keep_alive(KEEP_ALIVE)
            .build()
            .ok()
    })
    .as_ref()
}

/// Runs `work` (a head's whole wait) on a thread of the pool, in the context
/// of the runtime this is called from. Must be called from a runtime.
pub fn spawn<F, R>(work: F) -> JoinHandle<R>
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    let runtime = Handle::current();
    let context = runtime.clone();
    let run = move || {
        let _context = context.enter();
        work()
    };
    match pool() {
        Some(pool) => pool.spawn_blocking(run),
        None => runtime.spawn_blocking(run),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::time::Instant;

    /// More heads than the runtime's cap of blocking threads sleep at once,
    /// and a short blocking step of the runtime still runs beside them.
    #[test]
    fn heads_beyond_the_runtime_cap_neither_queue_nor_hold_up_short_steps() {
        let runtime = Builder::new_multi_thread()
            .worker_threads(1)
            .max_blocking_threads(4)
            .enable_all()
            .build()
            .expect("a runtime");
        runtime.block_on(async {
            let heads = 64;
            let asleep = Arc::new(AtomicUsize::new(0));
            let go = Arc::new(AtomicBool::new(false));
            let sleeping: Vec<_> = (0..heads)
                .map(|_| {
                    let (asleep, go) = (asleep.clone(), go.clone());
                    spawn(move || {
                        // In the calling runtime's context, on a thread of the pool.
                        let in_context = Handle::try_current().is_ok();
                        let name = std::thread::current().name().map(str::to_owned);
                        asleep.fetch_add(1, Ordering::SeqCst);
                        let until = Instant::now() + Duration::from_secs(10);
                        while !go.load(Ordering::SeqCst) && Instant::now() < until {
                            std::thread::sleep(Duration::from_millis(5));
                        }
                        (in_context, name)
                    })
                })
                .collect();
            let until = Instant::now() + Duration::from_secs(5);
            while asleep.load(Ordering::SeqCst) < heads && Instant::now() < until {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            let all_asleep = asleep.load(Ordering::SeqCst);
            // A short step of the runtime's own pool, while they sleep.
            let short = tokio::time::timeout(
                Duration::from_secs(2),
                tokio::task::spawn_blocking(|| "ran"),
            )
            .await;
            go.store(true, Ordering::SeqCst);
            assert_eq!(all_asleep, heads, "heads asleep at once");
            assert_eq!(
                short
                    .expect("the short step ran while every head slept")
                    .expect("joined"),
                "ran"
            );
            for head in sleeping {
                let (in_context, name) = head.await.expect("joined");
                assert!(in_context);
                assert_eq!(name.as_deref(), Some("exactlock-wait"));
            }
        });
    }
}
