//! The owner record: the JSON object in `<file>.lock/info`.
//!
//! One parser and one writer for the whole crate. The writer's bytes equal
//! `JSON.stringify` of the same object in JavaScript (the original module
//! hashes them), and the parser accepts exactly what the original accepts:
//! `pid` a positive integer, `timestamp` a finite number, and the optional
//! strings either absent or non-empty strings. Anything else is malformed,
//! which the lock treats as "held, no liveness proof".
//!
//! Besides the original's keys, exactlock writes the owner's incarnation
//! (see [`crate::sys::incarnation`]): `process_incarnation` (upstream 0.17's
//! key, `linux:<start ticks>`, in upstream's place before `timestamp`), and
//! after the original's keys `boot_id` and `pid_ns`. The original's readers
//! ignore keys they do not know. The parser also accepts the contract's
//! `start_ticks` (an integer) as the same incarnation.

use serde_json::{Map, Value};

use crate::sys::incarnation::{ThisProcess, incarnation_of_ticks, ticks_of_incarnation};

/// The start-time format marker. Only records that carry it may prove PID
/// reuse: their `start_time` was produced under `LC_ALL=C TZ=UTC`.
pub const CANONICAL_START_TIME_FORMAT: &str = "utc-v1";

pub use crate::sys::incarnation::UNKNOWN_START_TIME;

/// Records larger than this are malformed, not read into memory. A record
/// exactlock writes is under 2 KiB even with the longest host id it
/// accepts; 64 KiB leaves room for other writers' long host ids.
pub const MAX_RECORD_BYTES: usize = 64 * 1024;

/// The longest `ownerHostId` (and previous id) exactlock accepts, in UTF-8
/// bytes, so that every record it writes stays far below
/// [`MAX_RECORD_BYTES`] however the id escapes.
pub const MAX_HOST_ID_BYTES: usize = 256;

/// A validated owner record.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OwnerRecord {
    /// A positive integer. Kept as the JSON number it was (JS numbers are
    /// doubles); [`OwnerRecord::pid_u32`] gives the value a kernel can probe.
    pub pid: f64,
    pub start_time: Option<String>,
    pub start_time_format: Option<String>,
    /// Upstream 0.17's incarnation: `linux:<start ticks>` on Linux.
    pub process_incarnation: Option<String>,
    /// Milliseconds since the epoch; finite, not necessarily an integer when
    /// another writer produced it.
    pub timestamp: f64,
    pub owner_token: Option<String>,
    pub owner_host_id: Option<String>,
    /// The kernel's boot id when the owner wrote the record.
    pub boot_id: Option<String>,
    /// The contract's spelling of the incarnation (never written by
    /// exactlock, which writes `process_incarnation`).
    pub start_ticks: Option<u64>,
    /// The owner's pid namespace, a decimal inode number.
    pub pid_ns: Option<String>,
}

impl OwnerRecord {
    /// The record this process publishes for one acquisition, in the name
    /// of `this` (itself, or a child it holds the lock for).
    pub fn for_this_process(
        this: &ThisProcess,
        timestamp_ms: u64,
        owner_token: String,
        owner_host_id: Option<String>,
    ) -> Self {
        debug_assert!(
            owner_host_id
                .as_ref()
                .is_none_or(|id| id.len() <= MAX_HOST_ID_BYTES)
        );
        OwnerRecord {
            pid: f64::from(this.pid),
            start_time: Some(this.start_time.clone()),
            start_time_format: Some(CANONICAL_START_TIME_FORMAT.to_string()),
            process_incarnation: this.start_ticks.and_then(incarnation_of_ticks),
            timestamp: timestamp_ms as f64,
            owner_token: Some(owner_token),
            owner_host_id,
            boot_id: this.boot_id.clone(),
            // Only where the platform has no upstream incarnation string
            // (macOS): then the start travels as the contract's key.
            start_ticks: this
                .start_ticks
                .filter(|&ticks| incarnation_of_ticks(ticks).is_none()),
            pid_ns: this.pid_ns.map(|ns| ns.to_string()),
        }
    }

    /// Parses and validates record bytes. `None` means malformed.
    pub fn parse(bytes: &[u8]) -> Option<Self> {
        if bytes.len() > MAX_RECORD_BYTES {
            return None;
        }
        let Value::Object(object) = serde_json::from_slice::<Value>(bytes).ok()? else {
            return None;
        };
        let pid = object.get("pid")?.as_f64()?;
        if !(pid.is_finite() && pid > 0.0 && pid.fract() == 0.0) {
            return None;
        }
        let timestamp = object.get("timestamp")?.as_f64()?;
        if !timestamp.is_finite() {
            return None;
        }
        Some(OwnerRecord {
            pid,
            start_time: optional_non_empty(&object, "start_time")?,
            start_time_format: optional_non_empty(&object, "start_time_format")?,
            process_incarnation: optional_non_empty(&object, "process_incarnation")?,
            timestamp,
            owner_token: optional_non_empty(&object, "owner_token")?,
            owner_host_id: optional_non_empty(&object, "owner_host_id")?,
            boot_id: optional_non_empty(&object, "boot_id")?,
            start_ticks: optional_count(&object, "start_ticks")?,
            pid_ns: optional_non_empty(&object, "pid_ns")?,
        })
    }

    /// The exact bytes `JSON.stringify` produces for this record, keys in
    /// the canonical order and absent fields omitted.
    pub fn to_json(&self) -> String {
        let mut out = String::with_capacity(192);
        out.push_str("{\"pid\":");
        out.push_str(&js_number(self.pid));
        push_string_field(&mut out, "start_time", self.start_time.as_deref());
        push_string_field(
            &mut out,
            "start_time_format",
            self.start_time_format.as_deref(),
        );
        push_string_field(
            &mut out,
            "process_incarnation",
            self.process_incarnation.as_deref(),
        );
        out.push_str(",\"timestamp\":");
        out.push_str(&js_number(self.timestamp));
        push_string_field(&mut out, "owner_token", self.owner_token.as_deref());
        push_string_field(&mut out, "owner_host_id", self.owner_host_id.as_deref());
        push_string_field(&mut out, "boot_id", self.boot_id.as_deref());
        if let Some(ticks) = self.start_ticks {
            out.push_str(",\"start_ticks\":");
            out.push_str(&ticks.to_string());
        }
        push_string_field(&mut out, "pid_ns", self.pid_ns.as_deref());
        out.push('}');
        out
    }

    /// The pid as the kernel knows pids, or `None` when it cannot name a
    /// single process (too large; signalling it could reach a group).
    pub fn pid_u32(&self) -> Option<u32> {
        if self.pid <= f64::from(i32::MAX) {
            Some(self.pid as u32)
        } else {
            None
        }
    }

    /// The recorded start time when it can prove PID reuse: the record
    /// declares the canonical format and holds a real value.
    pub fn canonical_start_time(&self) -> Option<&str> {
        if self.start_time_format.as_deref() != Some(CANONICAL_START_TIME_FORMAT) {
            return None;
        }
        match self.start_time.as_deref() {
            Some(value) if value != UNKNOWN_START_TIME => Some(value),
            _ => None,
        }
    }

    /// The owner's start in the platform's unit, when the record carries
    /// it in a form this platform can compare: `process_incarnation`
    /// (`linux:<ticks>`, `windows:<creation FILETIME>`), `start_ticks`, or
    /// a canonical `start_time` that is itself an incarnation (the original
    /// module on Windows writes its `start_time` that way).
    pub fn start_ticks(&self) -> Option<u64> {
        self.process_incarnation
            .as_deref()
            .and_then(ticks_of_incarnation)
            .or(self.start_ticks)
            .or_else(|| self.canonical_start_time().and_then(ticks_of_incarnation))
    }

    /// Whether `self` (found on disk) is the generation `expected` names.
    /// `pid`, `timestamp` and the host id must be equal; every other field
    /// `expected` carries must be equal too (older writers carried fewer).
    pub fn is_generation_of(&self, expected: &OwnerRecord) -> bool {
        fn same_if_expected<T: PartialEq>(seen: &Option<T>, expected: &Option<T>) -> bool {
            expected.is_none() || seen == expected
        }
        self.pid == expected.pid
            && self.timestamp == expected.timestamp
            && self.owner_host_id == expected.owner_host_id
            && same_if_expected(&self.start_time, &expected.start_time)
            && same_if_expected(&self.owner_token, &expected.owner_token)
            && same_if_expected(&self.process_incarnation, &expected.process_incarnation)
            && same_if_expected(&self.boot_id, &expected.boot_id)
            && same_if_expected(&self.start_ticks, &expected.start_ticks)
            && same_if_expected(&self.pid_ns, &expected.pid_ns)
    }
}

/// Reads an optional string field: absent → `Some(None)`; a non-empty string
/// → `Some(Some(s))`; anything else (wrong type, empty) → `None` (malformed).
fn optional_non_empty(object: &Map<String, Value>, key: &str) -> Option<Option<String>> {
    match object.get(key) {
        None => Some(None),
        Some(Value::String(s)) if !s.is_empty() => Some(Some(s.clone())),
        Some(_) => None,
    }
}

/// Reads an optional count: absent → `Some(None)`; a non-negative integer
/// JavaScript can represent exactly → `Some(Some(n))`; anything else →
/// `None` (malformed).
fn optional_count(object: &Map<String, Value>, key: &str) -> Option<Option<u64>> {
    const MAX_SAFE: f64 = 9_007_199_254_740_991.0;
    match object.get(key) {
        None => Some(None),
        Some(value) => {
            let n = value.as_f64()?;
            (n >= 0.0 && n.fract() == 0.0 && n <= MAX_SAFE).then_some(Some(n as u64))
        }
    }
}

fn push_string_field(out: &mut String, key: &str, value: Option<&str>) {
    if let Some(value) = value {
        out.push_str(",\"");
        out.push_str(key);
        out.push_str("\":");
        // serde_json escapes exactly the characters JSON.stringify escapes
        // for well-formed strings: `"`, `\`, and controls below U+0020 (with
        // the short forms \b \f \n \r \t and lowercase \u00XX otherwise).
        out.push_str(&Value::String(value.to_string()).to_string());
    }
}

/// Formats a finite number the way JavaScript's `Number.prototype.toString`
/// does for the values a record holds: integers below 2^53 without a
/// fraction, anything else through serde_json's shortest round-trip form.
fn js_number(value: f64) -> String {
    const MAX_SAFE: f64 = 9_007_199_254_740_991.0;
    if value.fract() == 0.0 && value.abs() <= MAX_SAFE {
        format!("{}", value as i64)
    } else {
        Value::from(value).to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> OwnerRecord {
        OwnerRecord {
            pid: 41233.0,
            start_time: Some("Wed Dec  2 08:39:23 2026".into()),
            start_time_format: Some("utc-v1".into()),
            timestamp: 1_796_200_763_123.0,
            owner_token: Some("0b0e6a8e-2f3c-4c1e-9b5a-6d2f0a7c9e11".into()),
            owner_host_id: Some("h-5f2c".into()),
            ..OwnerRecord::default()
        }
    }

    fn this() -> ThisProcess {
        ThisProcess {
            pid: std::process::id(),
            start_time: "Wed Dec  2 08:39:23 2026".into(),
            start_ticks: Some(123_456),
            boot_id: Some("5b1a7f0e-7a44-4c1b-9e5d-1f2a3b4c5d6e".into()),
            pid_ns: Some(4_026_531_836),
        }
    }

    #[test]
    fn writes_the_incarnation_where_upstream_does_and_the_rest_after() {
        let record = OwnerRecord::for_this_process(&this(), 17, "tok".into(), Some("h".into()));
        let pid = std::process::id();
        // Upstream's incarnation where the platform has one (`linux:`, `windows:`);
        // elsewhere (macOS) the start travels as `start_ticks`, after `boot_id`.
        let (incarnation, ticks) = match crate::sys::platform::native::INCARNATION_PREFIX {
            Some(prefix) => (format!(r#","process_incarnation":"{prefix}123456""#), ""),
            None => (String::new(), r#","start_ticks":123456"#),
        };
        assert_eq!(
            record.to_json(),
            format!(
                r#"{{"pid":{pid},"start_time":"Wed Dec  2 08:39:23 2026","start_time_format":"utc-v1"{incarnation},"timestamp":17,"owner_token":"tok","owner_host_id":"h","boot_id":"5b1a7f0e-7a44-4c1b-9e5d-1f2a3b4c5d6e"{ticks},"pid_ns":"4026531836"}}"#
            )
        );
        assert_eq!(record.start_ticks(), Some(123_456));
        assert_eq!(
            OwnerRecord::parse(record.to_json().as_bytes()),
            Some(record)
        );
        // The contract's spelling reads as the same incarnation.
        let spelled = OwnerRecord::parse(br#"{"pid":3,"timestamp":1,"start_ticks":99}"#).unwrap();
        assert_eq!(spelled.start_ticks(), Some(99));
        assert!(spelled.to_json().contains(r#""start_ticks":99"#));
    }

    #[test]
    fn the_largest_record_exactlock_writes_is_far_below_the_read_limit() {
        // The longest host id accepted, made of the character JSON escapes
        // longest (`\u0001`, six bytes for one), a 20-digit pid namespace
        // and the largest tick count.
        let mut this = this();
        this.start_ticks = Some(u64::MAX);
        this.pid_ns = Some(u64::MAX);
        this.start_time = "unknown".repeat(4);
        let host = "\u{1}".repeat(MAX_HOST_ID_BYTES);
        let record =
            OwnerRecord::for_this_process(&this, u64::MAX >> 11, "t".repeat(36), Some(host));
        let bytes = record.to_json().into_bytes();
        assert!(bytes.len() < 2048, "{} bytes", bytes.len());
        assert!(bytes.len() * 32 < MAX_RECORD_BYTES);
        assert_eq!(OwnerRecord::parse(&bytes), Some(record));
    }

    #[test]
    fn writes_json_stringify_bytes() {
        assert_eq!(
            sample().to_json(),
            r#"{"pid":41233,"start_time":"Wed Dec  2 08:39:23 2026","start_time_format":"utc-v1","timestamp":1796200763123,"owner_token":"0b0e6a8e-2f3c-4c1e-9b5a-6d2f0a7c9e11","owner_host_id":"h-5f2c"}"#
        );
        let mut unqualified = sample();
        unqualified.owner_host_id = None;
        assert!(!unqualified.to_json().contains("owner_host_id"));
    }

    #[test]
    fn escapes_like_javascript() {
        let mut record = sample();
        record.owner_host_id = Some("a\"b\\c\n\u{1}é\u{2028}".into());
        // JSON.stringify('a"b\\c\n\u0001é\u2028') === "\"a\\\"b\\\\c\\n\\u0001é\u2028\""
        assert!(
            record
                .to_json()
                .ends_with("\"owner_host_id\":\"a\\\"b\\\\c\\n\\u0001é\u{2028}\"}")
        );
    }

    #[test]
    fn round_trips() {
        let record = sample();
        assert_eq!(
            OwnerRecord::parse(record.to_json().as_bytes()),
            Some(record)
        );
    }

    #[test]
    fn accepts_older_writers() {
        let record = OwnerRecord::parse(br#"{"pid":12,"timestamp":5}"#).unwrap();
        assert_eq!(record.pid_u32(), Some(12));
        assert_eq!(record.start_time, None);
        assert_eq!(record.canonical_start_time(), None);
        // Extra keys are ignored, integers written as floats are integers.
        assert!(OwnerRecord::parse(br#"{"pid":12.0,"timestamp":5.5,"x":[1]}"#).is_some());
    }

    #[test]
    fn rejects_malformed_records() {
        for bad in [
            &b""[..],
            b"{",
            b"not-json",
            b"null",
            b"[]",
            b"{\"pid\":0,\"timestamp\":1}",
            b"{\"pid\":-3,\"timestamp\":1}",
            b"{\"pid\":1.5,\"timestamp\":1}",
            b"{\"pid\":\"12\",\"timestamp\":1}",
            b"{\"pid\":12,\"timestamp\":\"old\"}",
            b"{\"pid\":12}",
            b"{\"pid\":12,\"timestamp\":1,\"start_time\":\"\"}",
            b"{\"pid\":12,\"timestamp\":1,\"owner_token\":7}",
            b"{\"pid\":12,\"timestamp\":1,\"owner_host_id\":null}",
            b"{\"pid\":12,\"timestamp\":1e999}",
            b"{\"pid\":12,\"timestamp\":1,\"start_ticks\":-1}",
            b"{\"pid\":12,\"timestamp\":1,\"start_ticks\":1.5}",
            b"{\"pid\":12,\"timestamp\":1,\"pid_ns\":4026531836}",
            b"{\"pid\":12,\"timestamp\":1,\"boot_id\":\"\"}",
            b"{\"pid\":12,\"timestamp\":1,\"process_incarnation\":7}",
            b"\xff\xfe",
        ] {
            assert_eq!(
                OwnerRecord::parse(bad),
                None,
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        let huge = vec![b' '; MAX_RECORD_BYTES + 1];
        assert_eq!(OwnerRecord::parse(&huge), None);
    }

    #[test]
    fn only_canonical_records_prove_reuse() {
        let mut record = sample();
        assert!(record.canonical_start_time().is_some());
        record.start_time_format = Some("utc-v1-old".into());
        assert!(record.canonical_start_time().is_none());
        record.start_time_format = Some("utc-v1".into());
        record.start_time = Some("unknown".into());
        assert!(record.canonical_start_time().is_none());
    }

    #[test]
    fn generation_comparison_follows_the_expected_fields() {
        let on_disk = sample();
        let mut expected = sample();
        assert!(on_disk.is_generation_of(&expected));
        expected.owner_token = None;
        expected.start_time = None;
        assert!(on_disk.is_generation_of(&expected));
        expected.timestamp += 1.0;
        assert!(!on_disk.is_generation_of(&expected));
        let mut other_host = sample();
        other_host.owner_host_id = None;
        assert!(!on_disk.is_generation_of(&other_host));
    }
}
