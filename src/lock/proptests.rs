//! Property tests (proptest) for the owner record and the lock-dir identity.
//! Case counts are kept at 256 or fewer so `cargo test` stays fast.

use proptest::prelude::*;
use serde_json::Value;

use crate::lock::identity::LockDirIdentity;
use crate::lock::record::{MAX_RECORD_BYTES, OwnerRecord};

/// `JSON.stringify` of a (well-formed) string, per ECMA-262 QuoteJSONString:
/// `"` and `\` escaped, the five short control escapes, other code units
/// below U+0020 as lowercase `\u00xx`, everything else (U+007F, U+2028,
/// astral characters …) literal.
fn js_quote(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Non-empty strings mixing ASCII, controls, quotes, backslashes, U+2028,
/// non-BMP characters and anything else.
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-zA-Z0-9 :.-]{1,40}",
        "[\\x00-\\x1f\"\\\\\u{7f}\u{2028}\u{2029}é😀]{1,20}",
        any::<String>().prop_filter("non-empty", |s| !s.is_empty()),
    ]
}

/// Safe integers: every value a record written by JavaScript or by us holds
/// for `pid` and `timestamp` (`Date.now()`).
const MAX_SAFE: u64 = (1 << 53) - 1;

fn record() -> impl Strategy<Value = OwnerRecord> {
    let original = (
        1..=MAX_SAFE,
        proptest::option::of(text()),
        proptest::option::of(text()),
        0..=MAX_SAFE,
        proptest::option::of(text()),
        proptest::option::of(text()),
    );
    let incarnation = (
        proptest::option::of(text()),
        proptest::option::of(text()),
        proptest::option::of(0..=MAX_SAFE),
        proptest::option::of(text()),
    );
    (original, incarnation).prop_map(
        |(
            (pid, start_time, start_time_format, timestamp, owner_token, owner_host_id),
            (process_incarnation, boot_id, start_ticks, pid_ns),
        )| OwnerRecord {
            pid: pid as f64,
            start_time,
            start_time_format,
            process_incarnation,
            timestamp: timestamp as f64,
            owner_token,
            owner_host_id,
            boot_id,
            start_ticks,
            pid_ns,
        },
    )
}

/// JSON-shaped bytes around the record's keys, to reach the validation
/// paths that random bytes rarely get past the JSON parser to.
fn json_like() -> impl Strategy<Value = Vec<u8>> {
    let key = prop_oneof![
        Just("pid".to_string()),
        Just("timestamp".to_string()),
        Just("start_time".to_string()),
        Just("start_time_format".to_string()),
        Just("owner_token".to_string()),
        Just("owner_host_id".to_string()),
        Just("process_incarnation".to_string()),
        Just("boot_id".to_string()),
        Just("start_ticks".to_string()),
        Just("pid_ns".to_string()),
        "[a-z_]{1,8}",
    ];
    let value = prop_oneof![
        any::<i64>().prop_map(|n| n.to_string()),
        any::<f64>().prop_map(|n| Value::from(n).to_string()),
        Just("null".to_string()),
        Just("true".to_string()),
        Just("[]".to_string()),
        Just("{}".to_string()),
        Just("1e999".to_string()),
        Just("-0".to_string()),
        text().prop_map(|s| Value::String(s).to_string()),
    ];
    proptest::collection::vec((key, value), 0..8).prop_map(|pairs| {
        let body: Vec<String> = pairs
            .into_iter()
            .map(|(k, v)| format!("{}:{v}", Value::String(k)))
            .collect();
        format!("{{{}}}", body.join(",")).into_bytes()
    })
}

fn identity() -> impl Strategy<Value = LockDirIdentity> {
    (
        (
            any::<u64>(),
            any::<u64>(),
            any::<u64>(),
            any::<u64>(),
            any::<u64>(),
        ),
        (any::<u64>(), any::<i128>(), any::<i128>(), "[0-9a-f]{64}"),
    )
        .prop_map(
            |(
                (root_dev, root_ino, info_dev, info_ino, info_nlink),
                (info_size, mtime, ctime, sha),
            )| {
                LockDirIdentity {
                    root_dev,
                    root_ino,
                    info_dev,
                    info_ino,
                    info_nlink,
                    info_size,
                    info_mtime_ns: mtime,
                    info_ctime_ns: ctime,
                    info_sha256: sha,
                }
            },
        )
}

/// `identity` with field `which` (0..9) changed to a different value.
fn with_field_changed(identity: &LockDirIdentity, which: usize, delta: u64) -> LockDirIdentity {
    let mut changed = identity.clone();
    let delta = delta.max(1);
    match which {
        0 => changed.root_dev = changed.root_dev.wrapping_add(delta),
        1 => changed.root_ino = changed.root_ino.wrapping_add(delta),
        2 => changed.info_dev = changed.info_dev.wrapping_add(delta),
        3 => changed.info_ino = changed.info_ino.wrapping_add(delta),
        4 => changed.info_nlink = changed.info_nlink.wrapping_add(delta),
        5 => changed.info_size = changed.info_size.wrapping_add(delta),
        6 => changed.info_mtime_ns = changed.info_mtime_ns.wrapping_add(i128::from(delta)),
        7 => changed.info_ctime_ns = changed.info_ctime_ns.wrapping_add(i128::from(delta)),
        _ => {
            // Flip one hex digit of the digest.
            let mut digits: Vec<char> = changed.info_sha256.chars().collect();
            let at = (delta as usize) % digits.len();
            digits[at] = if digits[at] == '0' { '1' } else { '0' };
            changed.info_sha256 = digits.into_iter().collect();
        }
    }
    changed
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn parse_never_panics_on_arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = OwnerRecord::parse(&bytes);
    }

    #[test]
    fn parse_never_panics_on_json_shaped_bytes(bytes in json_like()) {
        if let Some(record) = OwnerRecord::parse(&bytes) {
            // Whatever it accepts satisfies the validation rules.
            prop_assert!(record.pid.is_finite() && record.pid > 0.0 && record.pid.fract() == 0.0);
            prop_assert!(record.timestamp.is_finite());
            for field in [&record.start_time, &record.start_time_format, &record.owner_token, &record.owner_host_id] {
                prop_assert!(field.as_deref() != Some(""));
            }
        }
    }

    #[test]
    fn parse_refuses_oversized_input_whatever_it_holds(pad in 1usize..64, record in record()) {
        let mut bytes = record.to_json().into_bytes();
        bytes.resize(MAX_RECORD_BYTES + pad, b' ');
        prop_assert_eq!(OwnerRecord::parse(&bytes), None);
    }

    #[test]
    fn parse_of_to_json_is_the_record(record in record()) {
        prop_assert_eq!(OwnerRecord::parse(record.to_json().as_bytes()), Some(record));
    }

    #[test]
    fn parse_of_to_json_keeps_fractional_and_negative_timestamps(
        record in record(),
        timestamp in any::<f64>().prop_filter("finite", |t| t.is_finite()),
    ) {
        let record = OwnerRecord { timestamp, ..record };
        let parsed = OwnerRecord::parse(record.to_json().as_bytes());
        // Numeric equality: -0 is written "0", as JSON.stringify writes it.
        prop_assert_eq!(parsed.map(|r| r.timestamp), Some(timestamp));
    }

    #[test]
    fn to_json_is_json_stringify_of_the_record(record in record()) {
        // The key order of the original, the incarnation where upstream 0.17
        // puts it, the rest after.
        let push = |expected: &mut String, key: &str, value: &Option<String>| {
            if let Some(value) = value {
                expected.push_str(&format!(",\"{key}\":{}", js_quote(value)));
            }
        };
        let mut expected = format!("{{\"pid\":{}", record.pid as u64);
        push(&mut expected, "start_time", &record.start_time);
        push(&mut expected, "start_time_format", &record.start_time_format);
        push(&mut expected, "process_incarnation", &record.process_incarnation);
        expected.push_str(&format!(",\"timestamp\":{}", record.timestamp as u64));
        push(&mut expected, "owner_token", &record.owner_token);
        push(&mut expected, "owner_host_id", &record.owner_host_id);
        push(&mut expected, "boot_id", &record.boot_id);
        if let Some(ticks) = record.start_ticks {
            expected.push_str(&format!(",\"start_ticks\":{ticks}"));
        }
        push(&mut expected, "pid_ns", &record.pid_ns);
        expected.push('}');
        let json = record.to_json();
        prop_assert_eq!(&json, &expected);
        // And serde_json reads back the same strings (the escaping is valid JSON).
        let value: Value = serde_json::from_str(&json).expect("valid JSON");
        prop_assert_eq!(value.get("owner_host_id").and_then(Value::as_str), record.owner_host_id.as_deref());
        prop_assert_eq!(value.get("start_time").and_then(Value::as_str), record.start_time.as_deref());
    }

    #[test]
    fn identity_equality_is_reflexive_and_survives_its_string_form(identity in identity()) {
        prop_assert_eq!(&identity, &identity.clone());
        let strings = identity.to_strings();
        let fields: [&str; 9] = std::array::from_fn(|i| strings[i].as_str());
        prop_assert_eq!(LockDirIdentity::from_strings(fields), Some(identity));
    }

    #[test]
    fn identity_equality_is_sensitive_to_each_field(identity in identity(), which in 0usize..9, delta in any::<u64>()) {
        let changed = with_field_changed(&identity, which, delta);
        prop_assert_ne!(&identity, &changed);
        prop_assert_ne!(&changed, &identity);
    }

    #[test]
    fn identity_from_strings_never_panics(fields in proptest::array::uniform9(".{0,70}")) {
        let refs: [&str; 9] = std::array::from_fn(|i| fields[i].as_str());
        if let Some(identity) = LockDirIdentity::from_strings(refs) {
            prop_assert_eq!(identity.info_sha256.len(), 64);
        }
    }
}
