//! Unit tests for the SDK text: members, types in place, JSDoc, determinism and the two description forms.

use rmcp::model::Tool;
use serde_json::{Value, json};

use super::*;

/// The full declarations of one tool exposed as `x` from server `s`.
fn declare_x(tool: &Tool) -> String {
    declarations(
        &[SdkTool {
            name: "x",
            server: "s",
            tool,
        }],
        SdkDocs::Full,
    )
}

fn tool(spec: Value) -> Tool {
    let mut spec = spec;
    if spec.get("inputSchema").is_none() {
        spec["inputSchema"] = json!({"type": "object"});
    }
    serde_json::from_value(spec).expect("test tool spec")
}

fn named(name: &str) -> Tool {
    tool(json!({"name": name}))
}

fn sdk<'a>(tools: &'a [(String, String, Tool)]) -> Vec<SdkTool<'a>> {
    tools
        .iter()
        .map(|(name, server, tool)| SdkTool { name, server, tool })
        .collect()
}

fn owned(tools: Vec<(&str, &str, Tool)>) -> Vec<(String, String, Tool)> {
    tools
        .into_iter()
        .map(|(n, s, t)| (n.to_owned(), s.to_owned(), t))
        .collect()
}

#[test]
fn a_tool_with_schemas_gets_its_types_in_place_and_a_documented_member() {
    let t = tool(json!({
        "name": "add",
        "description": "Adds two numbers.",
        "inputSchema": {
            "type": "object",
            "properties": {"a": {"type": "number", "description": "first"}, "b": {"type": "number"}},
            "required": ["a", "b"]
        },
        "outputSchema": {"type": "object", "properties": {"sum": {"type": "number", "description": "a + b"}}, "required": ["sum"]},
        "annotations": {"readOnlyHint": true, "idempotentHint": true, "openWorldHint": false}
    }));
    let text = declarations(
        &[SdkTool {
            name: "echo__add",
            server: "echo",
            tool: &t,
        }],
        SdkDocs::Full,
    );
    assert_eq!(
        text,
        r#"declare const tools: {
  /** Adds two numbers. @readOnly @closedWorld */
  echo__add(args: {
    a: number; // first
    b: number;
  }): Promise<{
    sum: number; // a + b
  }>;
};
"#
    );
}

#[test]
fn names_that_are_not_identifiers_are_quoted() {
    let t = named("x");
    let text = declarations(
        &[
            SdkTool {
                name: "my-tool",
                server: "s",
                tool: &t,
            },
            SdkTool {
                name: "dotted.name/with spaces",
                server: "s",
                tool: &t,
            },
            SdkTool {
                name: "ok_name",
                server: "s",
                tool: &t,
            },
        ],
        SdkDocs::Full,
    );
    assert!(
        text.contains("\n  \"my-tool\"(): Promise<unknown>;\n"),
        "{text}"
    );
    assert!(
        text.contains("\n  \"dotted.name/with spaces\"():"),
        "{text}"
    );
    assert!(text.contains("\n  ok_name():"), "{text}");
    assert!(usage(SdkForm::Inline, SdkDocs::Full).contains(r#"tools["my-tool"](args)"#));
}

#[test]
fn names_alike_but_for_punctuation_each_get_their_member() {
    let object = tool(json!({
        "name": "x",
        "inputSchema": {"type": "object", "properties": {"q": {"type": "string", "description": "query"}}}
    }));
    let names = [
        "echo__add",
        "echo_add",
        "echo-add",
        "EchoAdd",
        "3d",
        "日本",
        "iterator",
    ];
    let tools: Vec<SdkTool> = names
        .iter()
        .map(|name| SdkTool {
            name,
            server: "s",
            tool: &object,
        })
        .collect();
    let text = declarations(&tools, SdkDocs::Full);
    let members: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("  "))
        .filter_map(|l| l.strip_suffix("(args?: {"))
        .collect();
    // Sorted by name in byte order, each exactly once, quoted where not an identifier.
    assert_eq!(
        members,
        [
            "\"3d\"",
            "EchoAdd",
            "\"echo-add\"",
            "echo__add",
            "echo_add",
            "iterator",
            "\"日本\""
        ],
        "{text}"
    );
    assert_eq!(
        text.matches("    q?: string; // query\n").count(),
        names.len()
    );
}

#[test]
fn descriptions_cannot_escape_their_comment_or_the_fence() {
    let t = tool(json!({
        "name": "evil",
        "title": "T */ x",
        "description": "Nice. */ }; globalThis.pwned = 1; /*\r\n```\nmore\u{0}\u{202E}",
        "inputSchema": {"type": "object", "properties": {"p": {"type": "string", "description": "*/ oops", "default": "*/"}}, "required": ["p"]}
    }));
    let tools = [SdkTool {
        name: "evil",
        server: "s",
        tool: &t,
    }];
    let text = declarations(&tools, SdkDocs::Full);
    for (at, _) in text.match_indices("*/") {
        // Every comment close is at the end of a JSDoc line.
        let rest = &text[at + 2..];
        assert!(rest.starts_with('\n'), "stray close at {at}: {text}");
    }
    assert!(!text.contains('\r') && !text.contains('\u{0}') && !text.contains('\u{202E}'));
    let (description, form) = run_code_description(&tools, SdkForm::Inline, SdkDocs::Full, 0);
    assert_eq!(form, SdkForm::Inline);
    assert!(description.contains("\n````ts\n"), "{description}");
    assert!(description.ends_with("};\n````"), "{description}");
}

#[test]
fn line_comments_cannot_be_ended_by_line_terminators() {
    let t = tool(json!({
        "name": "x",
        "inputSchema": {"type": "object", "properties": {
            "a": {"type": "string", "description": "one\u{2028}}; globalThis.pwned = 1; //"},
            "b": {"type": "string", "description": "two\u{85}three"},
            "c": {"type": "string", "description": "four\rfive"}
        }}
    }));
    let text = declare_x(&t);
    // Text that spans lines goes in a JSDoc block, where a new line stays inside the comment.
    assert_eq!(
        text,
        r#"declare const tools: {
  x(args?: {
    /**
     * one
     * }; globalThis.pwned = 1; //
     */
    a?: string;
    /**
     * two
     * three
     */
    b?: string;
    /**
     * four
     * five
     */
    c?: string;
  }): Promise<unknown>;
};
"#
    );
}

#[test]
fn annotation_hints_are_compact_and_ordered() {
    let doc = |annotations: Value| {
        tool_doc(
            &tool(json!({"name": "x", "annotations": annotations})),
            SdkDocs::Full,
        )
    };
    assert_eq!(
        doc(json!({"readOnlyHint": true, "destructiveHint": true, "idempotentHint": true})),
        ["@readOnly"]
    );
    assert_eq!(
        doc(
            json!({"readOnlyHint": false, "destructiveHint": true, "idempotentHint": true, "openWorldHint": true})
        ),
        ["@destructive @idempotent @openWorld"]
    );
    assert_eq!(doc(json!({"destructiveHint": false})), ["@nonDestructive"]);
    assert_eq!(doc(json!({"title": "Nice Title"})), ["@title Nice Title"]);
    assert!(doc(json!({"title": "X tool"})).is_empty());
    assert!(doc(json!({})).is_empty());
    let both = tool(json!({"name": "x", "title": "Top", "annotations": {"title": "Inner"}}));
    assert_eq!(tool_doc(&both, SdkDocs::Full), ["@title Top"]);
}

#[test]
fn brief_docs_keep_a_sentence_and_the_hints_a_program_needs() {
    let t = tool(json!({
        "name": "x",
        "title": "A Title",
        "description": "Writes a file. Overwrites what is there.\nMore text.",
        "annotations": {"destructiveHint": true, "idempotentHint": true, "openWorldHint": false},
        "inputSchema": {"type": "object", "properties": {
            "path": {"type": "string", "description": "Where. Relative to the root.", "default": "a/very/long/default/path/that/goes/on/and/on/and/on"}
        }}
    }));
    assert_eq!(
        tool_doc(&t, SdkDocs::Brief),
        ["Writes a file.", "@destructive"]
    );
    let ro =
        tool(json!({"name": "r", "annotations": {"readOnlyHint": true, "openWorldHint": true}}));
    assert_eq!(tool_doc(&ro, SdkDocs::Brief), ["@readOnly"]);
    let nd = tool(json!({"name": "n", "annotations": {"destructiveHint": false}}));
    assert!(tool_doc(&nd, SdkDocs::Brief).is_empty());
    let brief = declarations(
        &[SdkTool {
            name: "x",
            server: "s",
            tool: &t,
        }],
        SdkDocs::Brief,
    );
    assert!(
        brief.contains("/** Writes a file. @destructive */\nx(args?: {\n  path?: string; // Where.\n}): Promise<unknown>;\n"),
        "{brief}"
    );
    // describe() is always full, whatever the inline form shows.
    let full = describe(&SdkTool {
        name: "x",
        server: "s",
        tool: &t,
    });
    assert!(full.contains("Overwrites what is there."), "{full}");
    assert!(full.contains("@title A Title"), "{full}");
    assert!(full.contains("Relative to the root."), "{full}");
}

#[test]
fn args_are_optional_only_without_required_keys() {
    let required = tool(
        json!({"name": "r", "inputSchema": {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}}),
    );
    let optional = tool(
        json!({"name": "o", "inputSchema": {"type": "object", "properties": {"a": {"type": "string"}}}}),
    );
    let text = declarations(
        &[
            SdkTool {
                name: "r",
                server: "s",
                tool: &required,
            },
            SdkTool {
                name: "o",
                server: "s",
                tool: &optional,
            },
        ],
        SdkDocs::Full,
    );
    assert!(text.contains("  r(args: { a: string }): "), "{text}");
    assert!(text.contains("  o(args?: { a?: string }): "), "{text}");
}

#[test]
fn tools_without_arguments_take_none() {
    for schema in [
        json!({"type": "object"}),
        json!({"type": "object", "properties": {}}),
        json!({"type": "object", "properties": {}, "additionalProperties": false}),
    ] {
        let t = tool(json!({"name": "x", "inputSchema": schema}));
        let text = declare_x(&t);
        assert!(
            text.contains("  x(): Promise<unknown>;"),
            "{schema}: {text}"
        );
    }
    for schema in [
        json!({"type": "object", "additionalProperties": true}),
        json!({"type": "object", "additionalProperties": {"type": "string"}}),
    ] {
        let t = tool(json!({"name": "x", "inputSchema": schema}));
        let text = declare_x(&t);
        assert!(
            text.contains("  x(args?: { [key: string]: "),
            "{schema}: {text}"
        );
    }
}

#[test]
fn titles_that_restate_the_name_are_dropped() {
    let doc = |name: &str, title: &str| {
        tool_doc(&tool(json!({"name": name, "title": title})), SdkDocs::Full)
    };
    assert!(doc("get-sum", "Get Sum Tool").is_empty());
    assert!(doc("echo", "Echo").is_empty());
    assert_eq!(
        doc("get-env", "Print Environment Tool"),
        ["@title Print Environment Tool"]
    );
    assert_eq!(
        doc("read_file", "Read File (Deprecated)"),
        ["@title Read File (Deprecated)"]
    );
}

#[test]
fn output_is_independent_of_input_order() {
    let base: Vec<(String, String, Tool)> = (0..40)
        .map(|i| {
            let name = format!("{}{}", ["a", "b-", "c_"][i % 3], (i * 7919) % 101);
            let t = tool(json!({
                "name": name,
                "description": format!("Tool number {i}."),
                "inputSchema": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
            }));
            (name, format!("srv{}", i % 5), t)
        })
        .collect();
    let expected_decl = declarations(&sdk(&base), SdkDocs::Full);
    let expected_desc = run_code_description(&sdk(&base), SdkForm::Catalog, SdkDocs::Full, 0);
    let expected_search = Catalog::new(&sdk(&base)).search("tool number", Some(50));
    let mut state: u64 = 0x2545_F491_4F6C_DD1D;
    for _ in 0..10 {
        let mut shuffled = base.clone();
        for i in (1..shuffled.len()).rev() {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let j = (state % (i as u64 + 1)) as usize;
            shuffled.swap(i, j);
        }
        assert_eq!(declarations(&sdk(&shuffled), SdkDocs::Full), expected_decl);
        assert_eq!(
            run_code_description(&sdk(&shuffled), SdkForm::Catalog, SdkDocs::Full, 0),
            expected_desc
        );
        assert_eq!(
            Catalog::new(&sdk(&shuffled)).search("tool number", Some(50)),
            expected_search
        );
    }
}

#[test]
fn duplicate_names_keep_the_first_server() {
    let a = tool(json!({"name": "x", "description": "from a"}));
    let b = tool(json!({"name": "x", "description": "from b"}));
    let one = declarations(
        &[
            SdkTool {
                name: "x",
                server: "b",
                tool: &b,
            },
            SdkTool {
                name: "x",
                server: "a",
                tool: &a,
            },
        ],
        SdkDocs::Full,
    );
    assert!(one.contains("from a") && !one.contains("from b"), "{one}");
    assert_eq!(one.matches("  x(").count(), 1);
}

#[test]
fn describe_is_standalone_typescript_for_one_tool() {
    let t = tool(json!({
        "name": "get",
        "description": "Gets.",
        "inputSchema": {"type": "object", "properties": {"id": {"type": "string", "description": "Which."}}, "required": ["id"]}
    }));
    assert_eq!(
        describe(&SdkTool {
            name: "api__get",
            server: "api",
            tool: &t
        }),
        "declare const tools: {\n  /** Gets. */\n  api__get(args: {\n    id: string; // Which.\n  }): Promise<unknown>;\n};\n"
    );
}

#[test]
fn auto_switches_to_the_catalog_above_the_budget() {
    let tools = owned(vec![
        (
            "a__one",
            "a",
            tool(json!({"name": "one", "description": "One."})),
        ),
        (
            "b__two",
            "b",
            tool(json!({"name": "two", "description": "Two."})),
        ),
    ]);
    let tools = sdk(&tools);
    let (inline, form) = run_code_description(&tools, SdkForm::Auto, SdkDocs::Full, 100_000);
    assert_eq!(form, SdkForm::Inline);
    assert!(inline.starts_with(usage(SdkForm::Inline, SdkDocs::Full)));
    assert!(
        inline.contains("declare const tools: {\n  /** One. */\n  a__one(): Promise<unknown>;\n")
    );
    let budget = estimate_tokens(&inline);
    assert_eq!(
        run_code_description(&tools, SdkForm::Auto, SdkDocs::Full, budget).1,
        SdkForm::Inline
    );
    let (catalog, form) = run_code_description(&tools, SdkForm::Auto, SdkDocs::Full, budget - 1);
    assert_eq!(form, SdkForm::Catalog);
    assert!(catalog.starts_with(usage(SdkForm::Catalog, SdkDocs::Full)));
    assert!(
        catalog.ends_with("Servers (2 tools):\n- a: 1 tool\n- b: 1 tool"),
        "{catalog}"
    );
    assert!(!catalog.contains("a__one"));
    assert_eq!(
        run_code_description(&tools, SdkForm::Inline, SdkDocs::Full, 0).1,
        SdkForm::Inline
    );
    assert_eq!(
        run_code_description(&tools, SdkForm::Catalog, SdkDocs::Full, usize::MAX).1,
        SdkForm::Catalog
    );
}

#[test]
fn catalog_form_stays_small_for_huge_tool_sets() {
    let big: Vec<(String, String, Tool)> = (0..5000)
        .map(|i| {
            let t = tool(json!({"name": "t", "description": "x".repeat(200)}));
            (
                format!("server{:03}__t{i}", i % 300),
                format!("server{:03}", i % 300),
                t,
            )
        })
        .collect();
    let (text, form) = run_code_description(&sdk(&big), SdkForm::Auto, SdkDocs::Full, 8000);
    assert_eq!(form, SdkForm::Catalog);
    assert!(
        estimate_tokens(&text) < 1000,
        "{} tokens",
        estimate_tokens(&text)
    );
    assert!(text.contains("- server000: 17 tools\n"), "{text}");
    assert!(
        text.ends_with("- and 270 more servers (4490 tools)"),
        "{text}"
    );
    assert!(text.contains("Servers (5000 tools):"));
}

#[test]
fn usage_states_the_calling_contract() {
    let text = usage(SdkForm::Inline, SdkDocs::Full);
    for needle in [
        "body of an async function",
        "`return`",
        "TypeScript type annotations are accepted",
        "Promise.all",
        "one at a time",
        "structured content",
        "JSON-parsed",
        "content array",
        "ToolCallError",
        "toolName, code, message",
        "console.log",
        "@readOnly",
    ] {
        assert!(text.contains(needle), "usage lacks {needle:?}");
    }
    assert!(usage(SdkForm::Catalog, SdkDocs::Full).contains("catalog.search"));
    assert!(usage(SdkForm::Catalog, SdkDocs::Full).contains("catalog.describe"));
    assert_eq!(
        usage(SdkForm::Auto, SdkDocs::Full),
        usage(SdkForm::Inline, SdkDocs::Full)
    );
}

#[test]
fn forms_deserialize_lowercase() {
    let forms: Vec<SdkForm> =
        serde_json::from_value(json!(["inline", "catalog", "auto"])).expect("forms");
    assert_eq!(forms, [SdkForm::Inline, SdkForm::Catalog, SdkForm::Auto]);
    assert_eq!(SdkForm::default(), SdkForm::Auto);
    assert!(serde_json::from_value::<SdkForm>(json!("Inline")).is_err());
}

#[test]
fn token_estimate_is_monotone_and_rough() {
    assert_eq!(estimate_tokens(""), 0);
    assert_eq!(estimate_tokens("hello"), 1);
    assert_eq!(estimate_tokens("hello world"), 2);
    assert_eq!(estimate_tokens("a: number;"), 4);
    assert_eq!(estimate_tokens("/** x */"), 3);
    assert_eq!(estimate_tokens("12345678"), 3);
    assert_eq!(estimate_tokens("日本語"), 2);
    assert_eq!(estimate_tokens("  \n\t "), 0);
    let a = "type EchoAddArgs = {\n  a: number;\n};\n";
    assert!(estimate_tokens(&a.repeat(2)) >= estimate_tokens(a) * 2 - 1);
}
