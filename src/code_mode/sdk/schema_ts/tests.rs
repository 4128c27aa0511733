//! Unit tests for JSON Schema → TypeScript: each construct, refs, bounds and garbage input.

use serde_json::{Value, json};

use super::schema_to_ts;

fn ts(schema: Value) -> String {
    schema_to_ts(&schema)
}

#[test]
fn primitive_types() {
    assert_eq!(ts(json!({"type": "string"})), "string");
    assert_eq!(ts(json!({"type": "number"})), "number");
    assert_eq!(ts(json!({"type": "integer"})), "number");
    assert_eq!(ts(json!({"type": "boolean"})), "boolean");
    assert_eq!(ts(json!({"type": "null"})), "null");
    assert_eq!(ts(json!({"type": "bogus"})), "unknown");
}

#[test]
fn type_arrays_are_unions_and_collapse_duplicates() {
    assert_eq!(ts(json!({"type": ["string", "null"]})), "string | null");
    assert_eq!(ts(json!({"type": ["integer", "number"]})), "number");
    assert_eq!(ts(json!({"type": ["string", 5]})), "unknown");
    assert_eq!(ts(json!({"type": []})), "unknown");
}

#[test]
fn openapi_nullable() {
    assert_eq!(
        ts(json!({"type": "string", "nullable": true})),
        "string | null"
    );
    assert_eq!(ts(json!({"nullable": true})), "unknown");
    assert_eq!(ts(json!({"type": "string", "nullable": false})), "string");
    assert_eq!(
        ts(json!({"type": ["string", "null"], "nullable": true})),
        "string | null"
    );
    assert_eq!(
        ts(
            json!({"anyOf": [{"type": ["string", "null"]}, {"anyOf": [{"type": "null"}, {"const": 1}]}]})
        ),
        "string | null | 1"
    );
}

#[test]
fn enum_and_const_are_literals() {
    assert_eq!(
        ts(json!({"type": "string", "enum": ["a", "b\"c", 1, 2.5, true, null]})),
        r#""a" | "b\"c" | 1 | 2.5 | true | null"#
    );
    assert_eq!(ts(json!({"const": "fixed"})), r#""fixed""#);
    assert_eq!(ts(json!({"const": -3})), "-3");
    assert_eq!(ts(json!({"enum": []})), "never");
    assert_eq!(ts(json!({"enum": [{"a": 1}]})), "unknown");
    assert_eq!(ts(json!({"enum": "a"})), "unknown");
    let many: Vec<Value> = (0..100).map(|i| json!(format!("v{i}"))).collect();
    assert_eq!(ts(json!({"enum": many})), "string");
}

#[test]
fn any_of_and_one_of_are_unions() {
    assert_eq!(
        ts(json!({"anyOf": [{"type": "string"}, {"type": "number"}]})),
        "string | number"
    );
    assert_eq!(
        ts(json!({"oneOf": [{"type": "string"}, {"type": "null"}]})),
        "string | null"
    );
    // Pydantic's optional field: a ref or null.
    assert_eq!(
        ts(json!({
            "anyOf": [{"$ref": "#/$defs/N"}, {"type": "null"}],
            "$defs": {"N": {"type": "integer"}}
        })),
        "number | null"
    );
    // Alternatives that only add `required` do not change the type.
    assert_eq!(
        ts(json!({
            "type": "object",
            "properties": {"a": {"type": "string"}},
            "anyOf": [{"required": ["a"]}, {"required": ["b"]}]
        })),
        "{ a?: string }"
    );
}

#[test]
fn all_of_is_an_intersection() {
    assert_eq!(
        ts(json!({"allOf": [
            {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
            {"type": "object", "properties": {"b": {"type": "number"}}}
        ]})),
        "{ a: string } & { b?: number }"
    );
    assert_eq!(ts(json!({"allOf": [{}, {"type": "string"}]})), "string");
    assert_eq!(ts(json!({"allOf": [{}, true]})), "unknown");
    assert_eq!(ts(json!({"allOf": [{"type": "string"}, false]})), "never");
    assert_eq!(
        ts(
            json!({"allOf": [{"anyOf": [{"type": "string"}, {"type": "number"}]}, {"description": "x"}]})
        ),
        "string | number"
    );
    assert_eq!(
        ts(json!({"allOf": [
            {"anyOf": [{"type": "string"}, {"type": "number"}]},
            {"anyOf": [{"type": "number"}, {"type": "boolean"}]}
        ]})),
        "(string | number) & (number | boolean)"
    );
}

#[test]
fn arrays_and_tuples() {
    assert_eq!(
        ts(json!({"type": "array", "items": {"type": "string"}})),
        "string[]"
    );
    assert_eq!(ts(json!({"type": "array"})), "unknown[]");
    assert_eq!(
        ts(json!({"type": "array", "items": {"type": ["string", "number"]}})),
        "(string | number)[]"
    );
    assert_eq!(
        ts(
            json!({"type": "array", "prefixItems": [{"type": "string"}, {"type": "number"}], "items": false})
        ),
        "[string, number]"
    );
    assert_eq!(
        ts(
            json!({"type": "array", "prefixItems": [{"type": "string"}], "items": {"type": "boolean"}})
        ),
        "[string, ...boolean[]]"
    );
    assert_eq!(
        ts(json!({"type": "array", "prefixItems": [{"type": "string"}]})),
        "[string, ...unknown[]]"
    );
    // Draft-07 tuples.
    assert_eq!(
        ts(json!({"type": "array", "items": [{"type": "string"}], "additionalItems": false})),
        "[string]"
    );
    assert_eq!(ts(json!({"items": {"type": "number"}})), "number[]");
}

#[test]
fn objects_required_optional_quoted_and_documented() {
    let schema = json!({
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "Where to write. Ends in */ evil();"},
            "my-key": {"type": "integer", "default": 3, "format": "int32"},
            "nested": {
                "type": "object",
                "description": "A type on many lines keeps its doc above it.",
                "properties": {"deep": {"type": "boolean", "description": "line one\nline two"}},
                "required": ["deep"]
            }
        },
        "required": ["path", "missing"]
    });
    assert_eq!(
        ts(schema),
        r#"{
  "my-key"?: number; // @format int32 @default 3
  /** A type on many lines keeps its doc above it. */
  nested?: {
    /**
     * line one
     * line two
     */
    deep: boolean;
  };
  path: string; // Where to write. Ends in *\/ evil();
}"#
    );
}

#[test]
fn additional_properties() {
    assert_eq!(ts(json!({"type": "object"})), "{ [key: string]: unknown }");
    assert_eq!(
        ts(json!({"type": "object", "additionalProperties": {"type": "string"}})),
        "{ [key: string]: string }"
    );
    assert_eq!(
        ts(json!({"type": "object", "additionalProperties": false})),
        "{}"
    );
    assert_eq!(
        ts(
            json!({"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": false})
        ),
        "{ a?: string }"
    );
    assert_eq!(
        ts(
            json!({"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": true})
        ),
        "{ a?: string; [key: string]: unknown }"
    );
    assert_eq!(
        ts(
            json!({"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": {"type": "number"}})
        ),
        "{\n  a?: string;\n} & { [key: string]: number }"
    );
    assert_eq!(
        ts(
            json!({"type": "object", "patternProperties": {"^x": {"type": "number"}}, "additionalProperties": false})
        ),
        "{ [key: string]: unknown }"
    );
    assert_eq!(
        ts(
            json!({"type": "object", "additionalProperties": {"type": "object", "properties": {"x": {"type": "number"}}}})
        ),
        "{ [key: string]: { x?: number } }"
    );
    assert_eq!(
        ts(
            json!({"type": "object", "additionalProperties": {"type": "object", "properties": {"x": {"type": "number", "description": "d"}}}})
        ),
        "{\n  [key: string]: {\n    x?: number; // d\n  };\n}"
    );
    assert_eq!(
        ts(
            json!({"type": "object", "properties": {"a": {"type": "string", "description": "d"}}, "additionalProperties": true})
        ),
        "{\n  a?: string; // d\n  [key: string]: unknown;\n}"
    );
}

#[test]
fn local_refs_resolve_against_the_root() {
    let schema = json!({
        "type": "object",
        "properties": {
            "a": {"$ref": "#/$defs/A"},
            "b": {"$ref": "#/definitions/B"},
            "c": {"$ref": "#/properties/a"},
            "d": {"$ref": "#/$defs/odd~1name"}
        },
        "$defs": {"A": {"type": "string"}, "odd/name": {"type": "boolean"}},
        "definitions": {"B": {"type": "array", "items": {"$ref": "#/$defs/A"}}}
    });
    assert_eq!(
        ts(schema),
        "{ a?: string; b?: string[]; c?: string; d?: boolean }"
    );
}

#[test]
fn bad_refs_are_unknown() {
    for reference in [
        json!("https://example.com/schema.json"),
        json!("other.json#/a"),
        json!("#/$defs/Missing"),
        json!("#nope"),
        json!(5),
    ] {
        assert_eq!(ts(json!({"$ref": reference})), "unknown", "{reference}");
    }
}

#[test]
fn cyclic_refs_stop_at_the_first_repeat() {
    let schema = json!({
        "$ref": "#/$defs/Node",
        "$defs": {"Node": {
            "type": "object",
            "properties": {"next": {"$ref": "#/$defs/Node"}, "v": {"type": "number"}},
            "required": ["v"]
        }}
    });
    assert_eq!(ts(schema), "{ next?: unknown; v: number }");
    // `#` is the root itself: a self-reference.
    assert_eq!(
        ts(json!({"type": "array", "items": {"$ref": "#"}})),
        "unknown[][]"
    );
    assert_eq!(ts(json!({"$ref": "#"})), "unknown");
}

#[test]
fn ref_fan_out_is_bounded() {
    // Each definition refers to the next twice: inlining naively is 2^30 nodes.
    let mut defs = serde_json::Map::new();
    for i in 0..30 {
        let next = format!("#/$defs/D{}", i + 1);
        defs.insert(
            format!("D{i}"),
            json!({"type": "object", "properties": {"l": {"$ref": next}, "r": {"$ref": next}}}),
        );
    }
    defs.insert("D30".to_owned(), json!({"type": "string"}));
    let out = ts(json!({"$ref": "#/$defs/D0", "$defs": defs}));
    assert!(out.len() < 200_000, "{} bytes", out.len());
    assert!(out.contains("unknown"));
}

/// Renders on a thread with a small stack, which an unbounded recursive renderer would
/// overflow on these inputs, then drops the input on one with a large stack (serde_json's
/// own drop is recursive).
fn render_deep(schema: Value) -> String {
    let out = std::thread::scope(|scope| {
        std::thread::Builder::new()
            .stack_size(256 << 10)
            .spawn_scoped(scope, || schema_to_ts(&schema))
            .expect("spawn renderer")
            .join()
            .expect("renderer did not panic")
    });
    std::thread::Builder::new()
        .stack_size(512 << 20)
        .spawn(move || drop(schema))
        .expect("spawn dropper")
        .join()
        .expect("drop did not panic");
    out
}

/// `{..fields, key: inner}` without `json!`, whose interpolation re-serializes `inner`
/// recursively.
fn wrap(fields: Value, key: &str, inner: Value) -> Value {
    let mut obj = match fields {
        Value::Object(obj) => obj,
        _ => serde_json::Map::new(),
    };
    obj.insert(key.to_owned(), inner);
    Value::Object(obj)
}

#[test]
fn deep_nesting_is_cut_off_without_overflowing() {
    let mut arrays = json!({"type": "string"});
    for _ in 0..20_000 {
        arrays = wrap(json!({"type": "array"}), "items", arrays);
    }
    let out = render_deep(arrays);
    assert!(out.starts_with("unknown[]"), "{out}");
    assert!(out.len() < 200, "{}", out.len());
    let mut objects = json!({"type": "string"});
    for _ in 0..20_000 {
        let properties = wrap(json!({}), "x", objects);
        objects = wrap(
            json!({"type": "object", "required": ["x"]}),
            "properties",
            properties,
        );
    }
    let out = render_deep(objects);
    assert!(out.contains("{ x: unknown }"), "{out}");
    assert!(out.lines().count() < 60, "{}", out.lines().count());
    let mut unions = json!({"type": "string"});
    for _ in 0..20_000 {
        let all = wrap(json!({}), "allOf", Value::Array(vec![unions]));
        unions = wrap(
            json!({}),
            "anyOf",
            Value::Array(vec![all, json!({"$ref": "#/nope"})]),
        );
    }
    assert_eq!(render_deep(unions), "unknown");
}

#[test]
fn short_undocumented_objects_fit_on_one_line() {
    let long: serde_json::Map<String, Value> = (0..8)
        .map(|i| (format!("property{i}"), json!({"type": "string"})))
        .collect();
    let out = ts(json!({"type": "object", "properties": long}));
    assert!(out.starts_with("{\n  property0?: string;\n"), "{out}");
    assert_eq!(
        ts(json!({"type": "object", "properties": {"a": {"type": "string", "format": "uri"}}})),
        "{\n  a?: string; // @format uri\n}"
    );
}

#[test]
fn wide_objects_are_bounded() {
    let properties: serde_json::Map<String, Value> = (0..5000)
        .map(|i| (format!("p{i:05}"), json!({"type": "string"})))
        .collect();
    let out = ts(json!({"type": "object", "properties": properties}));
    assert!(out.lines().count() < 1100, "{}", out.lines().count());
    assert!(
        out.ends_with("  [key: string]: unknown;\n}"),
        "{}",
        &out[out.len() - 60..]
    );
}

#[test]
fn garbage_schemas_render_unknown() {
    for schema in [
        json!({"type": 5}),
        json!([]),
        json!(true),
        json!(null),
        json!(42),
        json!("string"),
        json!({}),
        json!({"anyOf": 5}),
        json!({"allOf": []}),
        json!({"type": "object", "properties": 5, "required": "x"}),
    ] {
        let out = ts(schema.clone());
        assert!(
            out == "unknown" || out == "{ [key: string]: unknown }",
            "{schema} → {out}"
        );
    }
    assert_eq!(ts(json!(false)), "never");
    assert_eq!(ts(json!({"anyOf": []})), "unknown");
    assert_eq!(
        ts(json!({"type": "object", "properties": {"a": 5}, "required": [1, "a"]})),
        "{ a: unknown }"
    );
}

#[test]
fn nested_types_indent_with_their_position() {
    let schema =
        json!({"type": "object", "properties": {"a": {"type": "string", "description": "d"}}});
    assert_eq!(
        super::schema_to_ts_at(&schema, 2),
        "{\n      a?: string; // d\n    }"
    );
}
