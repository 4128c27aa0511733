//! JSON Schema → TypeScript type text. Total: any JSON value renders; whatever is unsupported is `unknown`.

use serde_json::{Map, Value};

use super::{SdkDocs, text};

/// Nested schema levels rendered before the rest becomes `unknown`: keeps recursion (and the
/// stack) bounded on hostile input.
const MAX_DEPTH: usize = 24;
/// Nested `$ref` expansions; a cycle stops at the first repeat.
const MAX_REF_DEPTH: usize = 8;
/// Schema nodes rendered per call. Refs are inlined, so a few definitions that each refer to
/// the next twice would otherwise grow exponentially.
const NODE_BUDGET: usize = 1000;
/// Larger enums render as the union of their value kinds (`string`, ...).
const MAX_ENUM: usize = 64;
/// A `default` longer than this (as JSON) is cut in the JSDoc.
const MAX_DEFAULT_CHARS: usize = 80;
/// A `default` longer than this (as JSON) is left out of brief docs.
const MAX_BRIEF_DEFAULT_CHARS: usize = 24;
/// Longest brief property description.
const MAX_BRIEF_CHARS: usize = 160;
/// An object type without JSDoc is written on one line when it fits in this many characters.
const MAX_ONE_LINE_OBJECT: usize = 60;

/// The TypeScript type for `schema`, its own root for local `$ref`s, at indentation 0.
pub fn schema_to_ts(schema: &Value) -> String {
    schema_to_ts_at(schema, 0)
}

/// [`schema_to_ts`] for text that starts at `indent` levels of two spaces: inner lines of
/// multi-line object types are indented to match.
pub fn schema_to_ts_at(schema: &Value, indent: usize) -> String {
    let mut renderer = Renderer {
        root: Root::Value(schema),
        budget: NODE_BUDGET,
        refs: Vec::new(),
        docs: SdkDocs::Full,
    };
    renderer.render(schema, 0, indent).text
}

/// [`schema_to_ts_at`] for a schema held as an object (a tool's `inputSchema`), without
/// copying it into a [`Value`], its property docs as `docs` says.
pub fn object_schema_to_ts_at(schema: &Map<String, Value>, indent: usize, docs: SdkDocs) -> String {
    let mut renderer = Renderer {
        root: Root::Object(schema),
        budget: NODE_BUDGET,
        refs: Vec::new(),
        docs,
    };
    renderer.render_object(schema, 0, indent).text
}

/// The document local `$ref`s point into.
#[derive(Clone, Copy)]
enum Root<'a> {
    Value(&'a Value),
    Object(&'a Map<String, Value>),
}

impl<'a> Root<'a> {
    /// The schema at a JSON pointer (`""` is the root itself), `None` when nothing is there.
    fn pointer(self, pointer: &str) -> Option<Target<'a>> {
        match self {
            Root::Value(value) if pointer.is_empty() => Some(Target::Value(value)),
            Root::Value(value) => value.pointer(pointer).map(Target::Value),
            Root::Object(map) if pointer.is_empty() => Some(Target::Object(map)),
            Root::Object(map) => {
                let rest = pointer.strip_prefix('/')?;
                let (first, rest) = match rest.find('/') {
                    Some(at) => (&rest[..at], &rest[at..]),
                    None => (rest, ""),
                };
                let first = first.replace("~1", "/").replace("~0", "~");
                map.get(&first)?.pointer(rest).map(Target::Value)
            }
        }
    }
}

enum Target<'a> {
    Value(&'a Value),
    Object(&'a Map<String, Value>),
}

/// How a rendered type binds, to know where parentheses are needed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Prec {
    Atom,
    Union,
    Intersection,
}

#[derive(Debug, Clone)]
struct Ts {
    text: String,
    prec: Prec,
    /// A union's alternatives, so that a union of unions flattens and deduplicates.
    alternatives: Vec<String>,
}

impl Ts {
    fn atom(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            prec: Prec::Atom,
            alternatives: Vec::new(),
        }
    }

    fn unknown() -> Self {
        Self::atom("unknown")
    }

    fn never() -> Self {
        Self::atom("never")
    }

    fn is_unknown(&self) -> bool {
        self.text == "unknown"
    }

    fn is_never(&self) -> bool {
        self.text == "never"
    }

    fn wrapped_unless(self, ok: Prec) -> String {
        if self.prec == Prec::Atom || self.prec == ok {
            self.text
        } else {
            format!("({})", self.text)
        }
    }
}

/// `A | B`: `unknown` absorbs the union, `never` drops out, nested unions flatten and
/// duplicates collapse.
fn union(members: Vec<Ts>) -> Ts {
    let mut kept: Vec<Ts> = Vec::new();
    for member in members {
        if member.is_unknown() {
            return Ts::unknown();
        }
        let flat = if member.prec == Prec::Union {
            member.alternatives.into_iter().map(Ts::atom).collect()
        } else {
            vec![member]
        };
        for alternative in flat {
            if !alternative.is_never() && !kept.iter().any(|k| k.text == alternative.text) {
                kept.push(alternative);
            }
        }
    }
    if kept.len() <= 1 {
        return kept.pop().unwrap_or_else(Ts::never);
    }
    let alternatives: Vec<String> = kept
        .into_iter()
        .map(|m| m.wrapped_unless(Prec::Union))
        .collect();
    Ts {
        text: alternatives.join(" | "),
        prec: Prec::Union,
        alternatives,
    }
}

/// `A & B`: `unknown` drops out, `never` absorbs, duplicates collapse.
fn intersection(members: Vec<Ts>) -> Ts {
    let mut kept: Vec<Ts> = Vec::new();
    for member in members {
        if member.is_never() {
            return Ts::never();
        }
        if !member.is_unknown() && !kept.iter().any(|k| k.text == member.text) {
            kept.push(member);
        }
    }
    if kept.len() <= 1 {
        return kept.pop().unwrap_or_else(Ts::unknown);
    }
    let parts: Vec<String> = kept
        .into_iter()
        .map(|m| m.wrapped_unless(Prec::Intersection))
        .collect();
    Ts {
        text: parts.join(" & "),
        prec: Prec::Intersection,
        alternatives: Vec::new(),
    }
}

/// A JSON scalar as a literal type; arrays and objects are not literals here.
fn literal(value: &Value) -> Ts {
    match value {
        Value::String(s) => Ts::atom(text::quote(s)),
        Value::Number(n) => Ts::atom(n.to_string()),
        Value::Bool(b) => Ts::atom(b.to_string()),
        Value::Null => Ts::atom("null"),
        Value::Array(_) | Value::Object(_) => Ts::unknown(),
    }
}

fn enumeration(values: &Value) -> Ts {
    let Some(values) = values.as_array() else {
        return Ts::unknown();
    };
    if values.len() <= MAX_ENUM {
        return union(values.iter().map(literal).collect());
    }
    union(
        values
            .iter()
            .map(|v| match v {
                Value::String(_) => Ts::atom("string"),
                Value::Number(_) => Ts::atom("number"),
                Value::Bool(_) => Ts::atom("boolean"),
                Value::Null => Ts::atom("null"),
                Value::Array(_) | Value::Object(_) => Ts::unknown(),
            })
            .collect(),
    )
}

/// Doc lines for a property: its description (first sentence only when brief), then
/// `format`, `default`, `deprecated`.
fn property_doc(schema: &Value, docs: SdkDocs) -> Vec<String> {
    let mut lines = Vec::new();
    let Some(obj) = schema.as_object() else {
        return lines;
    };
    if let Some(description) = obj.get("description").and_then(Value::as_str) {
        let description = match docs {
            SdkDocs::Full => text::comment_safe(description),
            SdkDocs::Brief => text::comment_safe(&text::brief(description, MAX_BRIEF_CHARS)),
        };
        if !description.is_empty() {
            lines.push(description);
        }
    }
    if let Some(format) = obj.get("format").and_then(Value::as_str) {
        lines.push(format!(
            "@format {}",
            text::comment_safe(&text::one_line(format))
        ));
    }
    if let Some(default) = obj.get("default") {
        let json = serde_json::to_string(default).unwrap_or_default();
        let json = text::one_line(&json);
        match docs {
            SdkDocs::Full => {
                let json = text::truncate(&json, MAX_DEFAULT_CHARS);
                lines.push(format!("@default {}", text::comment_safe(&json)));
            }
            // A cut default cannot be used as it is, so brief docs leave a long one out; and
            // `false`, `[]`, `{}` are what a program assumes of a flag or list it leaves out.
            SdkDocs::Brief if json.chars().count() > MAX_BRIEF_DEFAULT_CHARS => {}
            SdkDocs::Brief if matches!(json.as_str(), "false" | "[]" | "{}") => {}
            SdkDocs::Brief => lines.push(format!("@default {}", text::comment_safe(&json))),
        }
    }
    if obj.get("deprecated") == Some(&Value::Bool(true)) {
        lines.push("@deprecated".to_owned());
    }
    lines
}

struct Renderer<'a> {
    root: Root<'a>,
    budget: usize,
    /// The `$ref`s being expanded, outermost first.
    refs: Vec<&'a str>,
    docs: SdkDocs,
}

impl<'a> Renderer<'a> {
    fn render(&mut self, schema: &'a Value, depth: usize, indent: usize) -> Ts {
        match schema {
            Value::Object(obj) => self.render_object(obj, depth, indent),
            Value::Bool(false) => Ts::never(),
            _ => Ts::unknown(),
        }
    }

    fn render_object(&mut self, obj: &'a Map<String, Value>, depth: usize, indent: usize) -> Ts {
        if depth > MAX_DEPTH || self.budget == 0 {
            return Ts::unknown();
        }
        self.budget -= 1;
        let base = if let Some(reference) = obj.get("$ref") {
            self.reference(reference, depth, indent)
        } else if let Some(value) = obj.get("const") {
            literal(value)
        } else if let Some(values) = obj.get("enum") {
            enumeration(values)
        } else {
            self.typed(obj, depth, indent)
        };
        let mut parts = vec![base];
        for key in ["anyOf", "oneOf"] {
            if let Some(Value::Array(alternatives)) = obj.get(key)
                && !alternatives.is_empty()
            {
                let members = alternatives
                    .iter()
                    .map(|s| self.render(s, depth + 1, indent))
                    .collect();
                parts.push(union(members));
            }
        }
        if let Some(Value::Array(all)) = obj.get("allOf") {
            let members = all
                .iter()
                .map(|s| self.render(s, depth + 1, indent))
                .collect();
            parts.push(intersection(members));
        }
        let ts = intersection(parts);
        if obj.get("nullable") == Some(&Value::Bool(true)) {
            union(vec![ts, Ts::atom("null")])
        } else {
            ts
        }
    }

    /// A local `$ref` (`#`, `#/$defs/X`, `#/definitions/X`, any JSON pointer) rendered in
    /// place; remote refs, cycles and over-deep chains are `unknown`.
    fn reference(&mut self, reference: &'a Value, depth: usize, indent: usize) -> Ts {
        let Some(reference) = reference.as_str() else {
            return Ts::unknown();
        };
        let Some(pointer) = reference.strip_prefix('#') else {
            return Ts::unknown();
        };
        if self.refs.contains(&reference) || self.refs.len() >= MAX_REF_DEPTH {
            return Ts::unknown();
        }
        let Some(target) = self.root.pointer(pointer) else {
            return Ts::unknown();
        };
        self.refs.push(reference);
        let ts = match target {
            Target::Value(value) => self.render(value, depth + 1, indent),
            Target::Object(map) => self.render_object(map, depth + 1, indent),
        };
        self.refs.pop();
        ts
    }

    /// The `type` keyword, or the type implied by object/array keywords when it is absent.
    fn typed(&mut self, obj: &'a Map<String, Value>, depth: usize, indent: usize) -> Ts {
        match obj.get("type") {
            Some(Value::String(ty)) => self.by_type(ty, obj, depth, indent),
            Some(Value::Array(types)) if !types.is_empty() => {
                let members = types
                    .iter()
                    .map(|ty| match ty.as_str() {
                        Some(ty) => self.by_type(ty, obj, depth, indent),
                        None => Ts::unknown(),
                    })
                    .collect();
                union(members)
            }
            Some(_) => Ts::unknown(),
            None => {
                let has = |key: &str| obj.contains_key(key);
                if has("properties") || has("additionalProperties") || has("patternProperties") {
                    self.object(obj, depth, indent)
                } else if has("items") || has("prefixItems") {
                    self.array(obj, depth, indent)
                } else {
                    Ts::unknown()
                }
            }
        }
    }

    fn by_type(
        &mut self,
        ty: &str,
        obj: &'a Map<String, Value>,
        depth: usize,
        indent: usize,
    ) -> Ts {
        match ty {
            "string" => Ts::atom("string"),
            "number" | "integer" => Ts::atom("number"),
            "boolean" => Ts::atom("boolean"),
            "null" => Ts::atom("null"),
            "array" => self.array(obj, depth, indent),
            "object" => self.object(obj, depth, indent),
            _ => Ts::unknown(),
        }
    }

    fn array(&mut self, obj: &'a Map<String, Value>, depth: usize, indent: usize) -> Ts {
        // 2020-12 tuples are `prefixItems` + `items` (the rest); draft-07 tuples are an
        // `items` array + `additionalItems`.
        let (tuple, rest) = match (obj.get("prefixItems"), obj.get("items")) {
            (Some(Value::Array(prefix)), rest) => (Some(prefix), rest),
            (_, Some(Value::Array(items))) => (Some(items), obj.get("additionalItems")),
            (_, items) => (None, items),
        };
        let Some(tuple) = tuple else {
            let item = match rest {
                Some(schema) => self.render(schema, depth + 1, indent),
                None => Ts::unknown(),
            };
            return Ts::atom(format!("{}[]", item.wrapped_unless(Prec::Atom)));
        };
        let mut elements: Vec<String> = tuple
            .iter()
            .map(|s| self.render(s, depth + 1, indent).text)
            .collect();
        match rest {
            Some(Value::Bool(false)) => {}
            Some(schema) => {
                let item = self.render(schema, depth + 1, indent);
                elements.push(format!("...{}[]", item.wrapped_unless(Prec::Atom)));
            }
            None => elements.push("...unknown[]".to_owned()),
        }
        Ts::atom(format!("[{}]", elements.join(", ")))
    }

    fn object(&mut self, obj: &'a Map<String, Value>, depth: usize, indent: usize) -> Ts {
        let properties = match obj.get("properties") {
            Some(Value::Object(properties)) if !properties.is_empty() => Some(properties),
            _ => None,
        };
        let required: Vec<&str> = match obj.get("required") {
            Some(Value::Array(names)) => names.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        let patterns =
            matches!(obj.get("patternProperties"), Some(Value::Object(p)) if !p.is_empty());
        // Extra keys: `unknown` when only patterns constrain them (not rendered per pattern).
        let mut index = match obj.get("additionalProperties") {
            Some(Value::Bool(false)) => patterns.then(Ts::unknown),
            Some(Value::Bool(true)) => Some(Ts::unknown()),
            Some(schema @ Value::Object(_)) if !patterns => {
                Some(self.render(schema, depth + 1, indent + 1))
            }
            _ if patterns || properties.is_none() => Some(Ts::unknown()),
            _ => None,
        };
        let pad = "  ".repeat(indent + 1);
        let mut members = String::new();
        // `key: type` per member while all are undocumented one-liners, for the short form.
        let mut plain: Option<Vec<String>> = Some(Vec::new());
        for (name, schema) in properties.into_iter().flatten() {
            if self.budget == 0 {
                // Out of budget: the remaining keys are still allowed, just not described.
                index = Some(Ts::unknown());
                break;
            }
            let ts = self.render(schema, depth + 1, indent + 1);
            let doc = property_doc(schema, self.docs);
            let optional = if required.contains(&name.as_str()) {
                ""
            } else {
                "?"
            };
            let member = format!("{}{optional}: {}", text::key(name), ts.text);
            // A one-line doc of a one-line member trails it as a `//` comment, the cheapest
            // form; otherwise JSDoc goes above, where it cannot be lost after a long type.
            match text::one_line_doc(&doc).filter(|_| !member.contains('\n')) {
                Some(line) => members.push_str(&format!("{pad}{member}; // {line}\n")),
                None => {
                    text::jsdoc(&mut members, &doc, indent + 1);
                    members.push_str(&format!("{pad}{member};\n"));
                }
            }
            plain = plain.filter(|_| doc.is_empty() && !member.contains('\n'));
            if let Some(plain) = plain.as_mut() {
                plain.push(member);
            }
        }
        if let (Some(mut plain), false) = (plain, members.is_empty()) {
            match &index {
                None => {}
                Some(t) if t.is_unknown() => plain.push("[key: string]: unknown".to_owned()),
                Some(_) => plain.clear(),
            }
            let short = format!("{{ {} }}", plain.join("; "));
            if !plain.is_empty() && short.len() <= MAX_ONE_LINE_OBJECT {
                return Ts::atom(short);
            }
        }
        let close = format!("{}}}", "  ".repeat(indent));
        match index {
            None if members.is_empty() => Ts::atom("{}"),
            None => Ts::atom(format!("{{\n{members}{close}")),
            Some(t) if members.is_empty() && !t.text.contains('\n') => {
                Ts::atom(format!("{{ [key: string]: {} }}", t.text))
            }
            Some(t) if members.is_empty() || t.is_unknown() => {
                // Every type is assignable to `unknown`, so it can share a literal with the keys.
                members.push_str(&format!("{pad}[key: string]: {};\n", t.text));
                Ts::atom(format!("{{\n{members}{close}"))
            }
            Some(t) => {
                // Named keys need not match the index type, which one literal would demand.
                let keys = Ts::atom(format!("{{\n{members}{close}"));
                let rest = if t.text.contains('\n') {
                    Ts::atom(format!("{{\n{pad}[key: string]: {};\n{close}", t.text))
                } else {
                    Ts::atom(format!("{{ [key: string]: {} }}", t.text))
                };
                intersection(vec![keys, rest])
            }
        }
    }
}

#[cfg(test)]
mod tests;
