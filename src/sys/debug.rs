//! `NODE_DEBUG=exactlock`: each decision of the core on stderr, in the
//! format of Node's `util.debuglog` (`EXACTLOCK <pid>: <message>`), so one
//! switch shows a stuck lock's story next to Node's own sections.
//!
//! The environment is read once, when the module loads: `NODE_DEBUG` is a
//! comma-separated list of section names (nothing trimmed), case-insensitive,
//! where `*` matches any run of characters (`exact*`, `*`), as Node reads it.
//!
//! A line never waits for stderr and never panics: see [`super::stderr`]
//! (a stderr whose reader falls behind gets lines queued, then dropped and
//! counted).

use std::sync::OnceLock;

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

/// Writes one decision (only when [`enabled`]; use [`debug!`](crate::debug)).
pub fn write(message: std::fmt::Arguments<'_>) {
    use super::stderr::{Lines, QUEUE_BYTES, Stderr};
    use std::sync::Arc;
    static LINES: OnceLock<Arc<Lines<Stderr>>> = OnceLock::new();
    let line = format!("EXACTLOCK {}: {message}\n", std::process::id());
    LINES
        .get_or_init(|| Lines::new(Stderr, QUEUE_BYTES, dropped_note))
        .write(line.as_bytes());
}

/// The line that says how many were dropped while stderr was not read.
fn dropped_note(dropped: u64) -> String {
    format!(
        "EXACTLOCK {}: {dropped} earlier line(s) dropped: stderr was not read (more than {} KiB waiting)\n",
        std::process::id(),
        super::stderr::QUEUE_BYTES / 1024
    )
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
