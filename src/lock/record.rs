//! The owner record: the JSON object in `<file>.lock/info`.
//!
//! One parser and one writer for the whole crate. The writer's bytes equal
//! `JSON.stringify` of the same object in JavaScript (the original module
//! hashes them), and the parser accepts exactly what the original accepts:
//! `pid` a positive integer, `timestamp` a finite number, and the optional
//! strings either absent or non-empty strings. Anything else is malformed,
//! which the lock treats as "held, no liveness proof".

use serde_json::{Map, Value};

/// The start-time format marker. Only records that carry it may prove PID
/// reuse: their `start_time` was produced under `LC_ALL=C TZ=UTC`.
pub const CANONICAL_START_TIME_FORMAT: &str = "utc-v1";

/// The value written when a start time cannot be had.
pub const UNKNOWN_START_TIME: &str = "unknown";

/// Records larger than this are malformed, not read into memory. A real
/// record is under 300 bytes; 64 KiB leaves room for long host ids.
pub const MAX_RECORD_BYTES: usize = 64 * 1024;

/// A validated owner record.
#[derive(Clone, Debug, PartialEq)]
pub struct OwnerRecord {
    /// A positive integer. Kept as the JSON number it was (JS numbers are
    /// doubles); [`OwnerRecord::pid_u32`] gives the value a kernel can probe.
    pub pid: f64,
    pub start_time: Option<String>,
    pub start_time_format: Option<String>,
    /// Milliseconds since the epoch; finite, not necessarily an integer when
    /// another writer produced it.
    pub timestamp: f64,
    pub owner_token: Option<String>,
    pub owner_host_id: Option<String>,
}

impl OwnerRecord {
    /// The record this process publishes for one acquisition.
    pub fn for_this_process(
        start_time: &str,
        timestamp_ms: u64,
        owner_token: String,
        owner_host_id: Option<String>,
    ) -> Self {
        OwnerRecord {
            pid: f64::from(std::process::id()),
            start_time: Some(start_time.to_string()),
            start_time_format: Some(CANONICAL_START_TIME_FORMAT.to_string()),
            timestamp: timestamp_ms as f64,
            owner_token: Some(owner_token),
            owner_host_id,
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
            timestamp,
            owner_token: optional_non_empty(&object, "owner_token")?,
            owner_host_id: optional_non_empty(&object, "owner_host_id")?,
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
        out.push_str(",\"timestamp\":");
        out.push_str(&js_number(self.timestamp));
        push_string_field(&mut out, "owner_token", self.owner_token.as_deref());
        push_string_field(&mut out, "owner_host_id", self.owner_host_id.as_deref());
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

    /// Whether `self` (found on disk) is the generation `expected` names.
    /// `pid`, `timestamp` and the host id must be equal; `start_time` and
    /// `owner_token` must be equal when `expected` carries them (older
    /// writers did not).
    pub fn is_generation_of(&self, expected: &OwnerRecord) -> bool {
        self.pid == expected.pid
            && self.timestamp == expected.timestamp
            && self.owner_host_id == expected.owner_host_id
            && (expected.start_time.is_none() || self.start_time == expected.start_time)
            && (expected.owner_token.is_none() || self.owner_token == expected.owner_token)
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
        }
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
