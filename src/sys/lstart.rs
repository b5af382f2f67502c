//! The wall-clock form of a process start time, exactly as
//! `ps -o lstart= -p PID` prints it under `LC_ALL=C TZ=UTC`
//! (`Wed Dec  2 08:36:20 2026`), and its inverse. One formatter for every
//! platform: Linux's procps and macOS's ps both print `strftime("%c")` of
//! the start's whole seconds, which in the C locale is
//! `%a %b %e %H:%M:%S %Y`.
//!
//! This is the identity the original module writes (`start_time`,
//! `start_time_format: "utc-v1"`). It is *not* clock-independent: procps-ng
//! 4.0.x computes it (ps/output.c, `pr_lstart`) as
//! `btime + TICS_BEGAN / Hertz`, where `btime` is the `btime` line of
//! `/proc/stat` — the boot time in whole seconds, `realtime − boottime`
//! truncated — `TICS_BEGAN` is field 22 of `/proc/<pid>/stat` and `Hertz`
//! is `sysconf(_SC_CLK_TCK)`, both integers, so the division truncates.
//! When the wall clock is stepped, `btime` moves with it, and the same
//! process renders differently before and after the step. So:
//!
//! - `btime` is read afresh for every answer, never cached for the life of
//!   the process (a verdict computed with a stale `btime` could differ from
//!   the record by the size of a step);
//! - a verdict compares two renderings as times, not strings, and treats
//!   two within [`CLOCK_SLACK_SECS`] as the same start (see
//!   `crate::lock::verdict`). exactlock's own records carry a
//!   clock-independent incarnation as well ([`crate::sys::incarnation`]).

use std::fmt::Write as _;

use crate::sys::platform::native;

/// Two `lstart` renderings this close (in seconds) name the same start:
/// the difference is `btime` truncation or a clock step between the two
/// renderings, not another process.
pub const CLOCK_SLACK_SECS: u64 = 2;

/// The start time of `pid` as `ps -o lstart=` prints it with
/// `LC_ALL=C TZ=UTC`, or `None` if it cannot be had (no such pid, `/proc`
/// hidden or absent). Like `ps`, this also answers for a zombie. Always the
/// OS's own reading, also under `EXACTLOCK_PLATFORM=portable`: the record
/// needs it, and there is no portable way to have it.
///
/// On Windows, which has no `ps`, the original module writes the process's
/// incarnation instead (`windows:<creation FILETIME>`), and so does this.
pub fn start_time(pid: u32) -> Option<String> {
    #[cfg(windows)]
    return native::upstream_start_time(pid);
    #[cfg(unix)]
    return format_lstart(native::start_secs_of(pid)?);
}

/// The wall-clock start, in seconds since the epoch, of a process whose
/// start reads `start_ticks` in the platform's unit (Linux: clock ticks
/// after boot, with `btime` as it is now; macOS: microseconds since the
/// epoch).
pub fn start_secs(start_ticks: u64) -> Option<u64> {
    native::start_secs(start_ticks)
}

/// This boot's start on the wall clock, in seconds since the epoch, as the
/// kernel states it now.
pub fn boot_secs() -> Option<u64> {
    native::boot_secs()
}

const WEEKDAYS: [&str; 7] = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// Formats seconds since the epoch as C-locale `%a %b %e %H:%M:%S %Y` in UTC.
///
/// By hand rather than `localtime`/`strftime`, so the result cannot depend on
/// this process's `TZ`, `LC_*` or tz database; that is what makes it equal to
/// `ps` run with `LC_ALL=C TZ=UTC` whatever environment Node was started in.
pub fn format_lstart(secs: u64) -> Option<String> {
    let days = i64::try_from(secs / 86_400).ok()?;
    let of_day = secs % 86_400;
    let (year, month, day) = civil_from_days(days);
    // 1970-01-01 was a Thursday.
    let weekday = WEEKDAYS[usize::try_from((days + 4) % 7).ok()?];
    let mut out = String::with_capacity(24);
    write!(
        out,
        "{weekday} {} {day:>2} {:02}:{:02}:{:02} {year}",
        MONTHS[month as usize - 1],
        of_day / 3600,
        of_day / 60 % 60,
        of_day % 60,
    )
    .ok()?;
    Some(out)
}

/// The inverse of [`format_lstart`]: seconds since the epoch, or `None` for
/// anything that is not exactly such a rendering. The fields are read
/// loosely and the result must format back to `text`, which rejects a
/// wrong weekday, a day that does not exist and any other spacing.
pub fn parse_lstart(text: &str) -> Option<u64> {
    let fields: Vec<&str> = text.split_ascii_whitespace().collect();
    let [_weekday, month, day, clock, year] = fields.as_slice() else {
        return None;
    };
    let month = MONTHS.iter().position(|m| m == month)? as u32 + 1;
    let day: u32 = day.parse().ok()?;
    let year: i64 = year.parse().ok()?;
    let clock: Vec<u64> = clock
        .split(':')
        .map(|part| part.parse().ok())
        .collect::<Option<_>>()?;
    let [hour, minute, second] = clock.as_slice() else {
        return None;
    };
    if *hour > 23 || *minute > 59 || *second > 59 {
        return None;
    }
    let days = u64::try_from(days_from_civil(year, month, day)?).ok()?;
    let secs = days * 86_400 + hour * 3600 + minute * 60 + second;
    (format_lstart(secs)? == text).then_some(secs)
}

/// Proleptic Gregorian (year, month 1..=12, day 1..=31) of a day count since
/// 1970-01-01: Howard Hinnant's `civil_from_days`, which works in 400-year
/// eras starting on March 1 so that the leap day is the last day of a year.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097); // day of era, [0, 146096]
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365; // [0, 399]
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // day of year from Mar 1, [0, 365]
    let mp = (5 * doy + 2) / 153; // month from March, [0, 11]
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// The day count since 1970-01-01 of a civil date (Hinnant's
/// `days_from_civil`, the inverse of [`civil_from_days`]).
fn days_from_civil(year: i64, month: u32, day: u32) -> Option<i64> {
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) {
        return None;
    }
    let year = year - i64::from(month <= 2);
    let era = year.div_euclid(400);
    let yoe = year.rem_euclid(400); // [0, 399]
    let mp = i64::from(if month > 2 { month - 3 } else { month + 9 }); // [0, 11]
    let doy = (153 * mp + 2) / 5 + i64::from(day) - 1; // [0, 365]
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy; // [0, 146096]
    Some(era * 146_097 + doe - 719_468)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_lstart_matches_known_dates_and_parses_back() {
        // Values checked with `LC_ALL=C TZ=UTC date -d @N '+%a %b %e %H:%M:%S %Y'`.
        for (secs, text) in [
            (0, "Thu Jan  1 00:00:00 1970"),
            (951_782_400, "Tue Feb 29 00:00:00 2000"),
            (1_796_207_732, "Wed Dec  2 10:35:32 2026"),
            (4_107_542_400, "Mon Mar  1 00:00:00 2100"),
            (253_402_300_799, "Fri Dec 31 23:59:59 9999"),
        ] {
            assert_eq!(format_lstart(secs).as_deref(), Some(text), "{secs}");
            assert_eq!(parse_lstart(text), Some(secs), "{text}");
        }
    }

    #[test]
    fn parse_lstart_refuses_anything_else() {
        for bad in [
            "",
            "unknown",
            "different-incarnation",
            "Thu Jan 1 00:00:00 1970",  // day not padded
            "Fri Jan  1 00:00:00 1970", // wrong weekday
            "Thu Feb 30 00:00:00 1970", // no such day
            "Thu Jan  1 24:00:00 1970", // no such hour
            "Thu Jan  1 00:00:00 1970 x",
            "Thu Jan  1 00:00 1970",
        ] {
            assert_eq!(parse_lstart(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn civil_from_days_agrees_with_counting_days() {
        let (mut year, mut month, mut day) = (1970i64, 1u32, 1u32);
        for days in 0..(600 * 366) {
            assert_eq!(civil_from_days(days), (year, month, day), "day {days}");
            assert_eq!(days_from_civil(year, month, day), Some(days));
            let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
            let len = match month {
                2 if leap => 29,
                2 => 28,
                4 | 6 | 9 | 11 => 30,
                _ => 31,
            };
            day += 1;
            if day > len {
                day = 1;
                month += 1;
                if month > 12 {
                    month = 1;
                    year += 1;
                }
            }
        }
    }
}
