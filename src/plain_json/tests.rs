//! Unit tests of the walk: each reading against serde's over plain values and every one-edit mutation of them.

use super::*;

#[test]
fn integers_are_read_within_i64_and_the_rest_refused() {
    let read = |text: &str| Walk::new(text.as_bytes()).integer();
    assert_eq!(read("0"), Some(0));
    assert_eq!(read(" -17"), Some(-17));
    assert_eq!(read("9223372036854775807"), Some(i64::MAX));
    assert_eq!(read("-9223372036854775808"), Some(i64::MIN));
    for refused in [
        "9223372036854775808",
        "-9223372036854775809",
        "99999999999999999999",
        "-0",
        "01",
        "1.0",
        "1e2",
        "-",
        "x",
    ] {
        assert_eq!(read(refused), None, "{refused}");
    }
}

/// The word-at-a-time scan stops where a byte-by-byte one does: every byte value at
/// every place of a word, behind plain text and behind another stop.
#[test]
fn the_word_scan_stops_at_the_first_special_byte() {
    let naive = |text: &[u8]| {
        text.iter()
            .position(|&b| matches!(b, b'"' | b'\\' | 0..=0x1f | 0x80..))
    };
    for len in 0..20 {
        for at in 0..len {
            for byte in 0..=255u8 {
                let mut text = vec![b'a'; len];
                text[at] = byte;
                assert_eq!(special(&text), naive(&text), "{byte:#x} at {at} of {len}");
                if at + 1 < len {
                    text[at + 1] = b'"';
                    assert_eq!(special(&text), naive(&text), "{byte:#x} at {at} of {len}");
                }
            }
        }
    }
}

/// The walk checks values up to [`DEPTH`] containers deep and leaves deeper ones to
/// serde; a container closed by the other kind's byte is refused either way.
#[test]
fn values_are_walked_to_the_depth_limit_and_no_deeper() {
    for n in [1, 63, 64, 65] {
        let arrays = format!("{}1{}", "[".repeat(n), "]".repeat(n));
        let objects = format!("{}1{}", r#"{"a":"#.repeat(n), "}".repeat(n));
        let mixed = format!("{}[]{}", r#"[{"a":"#.repeat(n / 2), "}]".repeat(n / 2));
        for (text, depth) in [(arrays, n), (objects, n), (mixed, n / 2 * 2 + 1)] {
            let found = Walk::new(text.as_bytes()).raw_value_keyed(None);
            let walked = depth <= DEPTH as usize;
            assert_eq!(found, Some(((0, text.len()), walked)), "{depth}: {text}");
        }
    }
    for refused in [
        "[{]}",
        r#"{"a":[}]"#,
        r#"{"a":1,}"#,
        "[1,]",
        r#"{"a" 1}"#,
        "[[1]",
    ] {
        assert_eq!(Walk::new(refused.as_bytes()).raw_value(), None, "{refused}");
    }
}

/// Whatever the flat walk builds, serde builds the same; what it leaves, serde reads.
#[test]
fn a_flat_object_is_built_as_serde_builds_it() {
    const FLAT: &[&str] = &[
        r#"{"text":"hello world!"}"#,
        r#"{ "a" : 1 , "b" : -2 , "c" : true , "d" : false , "e" : null , "a" : "é" }"#,
        r#"{}"#,
        r#"{"n":9223372036854775807,"m":-9223372036854775808}"#,
    ];
    const BYTES: &[u8] = b"\"\\{}[],: 01-.enul\x01\xc3\xff";
    let serde = |text: &[u8]| {
        let mut stream = serde_json::Deserializer::from_slice(text)
            .into_iter::<serde_json::Map<String, serde_json::Value>>();
        let map = stream.next()?.ok()?;
        Some((map, stream.byte_offset()))
    };
    let (mut cases, mut flat) = (0, 0);
    for text in FLAT {
        let mut walk = Walk::new(text.as_bytes());
        assert!(walk.flat_object().is_some(), "{text}");
        for edit in one_edit_away(text.as_bytes(), BYTES) {
            cases += 1;
            let mut walk = Walk::new(&edit);
            if let Some(map) = walk.flat_object() {
                flat += 1;
                let shown = String::from_utf8_lossy(&edit);
                assert_eq!(Some((map, walk.at)), serde(&edit), "{shown}");
            }
            let mut walk = Walk::new(&edit);
            let read = walk.json_object().map(|map| (map, walk.at));
            assert_eq!(read, serde(&edit), "{}", String::from_utf8_lossy(&edit));
        }
    }
    assert!(flat > cases / 20, "{flat} of {cases} walked");
    // Nested values and numbers that are not integers go to serde.
    for text in [
        r#"{"a":[1]}"#,
        r#"{"a":{"b":1}}"#,
        r#"{"a":1.5}"#,
        r#"{"a":"\n"}"#,
    ] {
        assert!(Walk::new(text.as_bytes()).flat_object().is_none(), "{text}");
        let mut walk = Walk::new(text.as_bytes());
        assert!(walk.json_object().is_some(), "{text}");
    }
}

#[test]
fn a_raw_value_is_found_where_serde_finds_it() {
    for text in [
        r#" {"a":[1,-2.5e+3,"\u00e9\n",true,null]} "#,
        r#""é""#,
        "[]",
        "0",
    ] {
        let mut walk = Walk::new(text.as_bytes());
        let (start, end) = walk.raw_value().unwrap();
        let serde: &RawValue = serde_json::from_str(text).unwrap();
        assert_eq!(&text[start..end], serde.get());
    }
    for refused in [
        r#"{"a":01}"#,
        r#"["\x"]"#,
        "[1,]",
        r#"{"a" 1}"#,
        "tru",
        "\"\u{1}\"",
    ] {
        assert_eq!(Walk::new(refused.as_bytes()).raw_value(), None, "{refused}");
    }
}
