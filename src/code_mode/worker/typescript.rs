//! TypeScript → JavaScript for a program body: parse with oxc, refuse modules, strip the types, count loops, then wrap.
//!
//! Stripping happens before wrapping: a body wrapped first could close the wrapper itself
//! (`}); evil(); (() => {`), and `import type` would survive. This runs inside the worker because oxc, like
//! Boa, overflows the native stack on deeply nested input; here that is one worker's crash.
//!
//! Every loop body starts with a call of [`TICK`], which counts the run's loop iterations. Boa has a
//! loop limit of its own, but when it fires in code that runs after an `await`, Boa drops the error
//! (its await continuation ignores how the resumed code ended) and the program's promise just stays
//! pending; the tick records the limit where the run loop sees it.

use std::path::Path;

use oxc_allocator::{Allocator, Vec as ArenaVec};
use oxc_ast::{
    ast::{Expression, Statement},
    builder::AstBuilder,
};
use oxc_ast_visit::{VisitMut, walk_mut};
use oxc_codegen::Codegen;
use oxc_parser::{ParseOptions, Parser};
use oxc_semantic::SemanticBuilder;
use oxc_span::{GetSpan, SPAN, SourceType};
use oxc_transformer::{TransformOptions, Transformer};

/// A program the worker refuses before running it; reported as kind `syntax`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{line}:{column}: {message}")]
pub struct SyntaxError {
    /// 1-based line in the program as written.
    pub line: usize,
    /// 1-based column, in characters.
    pub column: usize,
    pub message: String,
}

/// Turns a program body (TypeScript or JavaScript) into the script the worker evaluates: an async arrow
/// function called at once, whose promise is the run's result.
pub fn to_script(body: &str) -> Result<String, SyntaxError> {
    let allocator = Allocator::default();
    let source_type = SourceType::ts().with_module(true);
    let options = ParseOptions {
        allow_return_outside_function: true,
        ..ParseOptions::default()
    };
    let parsed = Parser::new(&allocator, body, source_type)
        .with_options(options)
        .parse();
    if let Some(error) = parsed.diagnostics.errors().next() {
        let offset = error.labels.first().map_or(0, |label| label.offset());
        return Err(syntax_error(body, offset, error.message.to_string()));
    }
    let mut program = parsed.program;
    if let Some(statement) = program.body.iter().find(|s| is_module_syntax(s)) {
        return Err(syntax_error(
            body,
            statement.span().start,
            "import and export are not available: the program is the body of an async function; use `tools`"
                .to_owned(),
        ));
    }
    let semantic = SemanticBuilder::new().build(&program);
    if let Some(error) = semantic.diagnostics.errors().next() {
        let offset = error.labels.first().map_or(0, |label| label.offset());
        return Err(syntax_error(body, offset, error.message.to_string()));
    }
    let scoping = semantic.semantic.into_scoping();
    if scoping.symbol_names().any(|name| name == TICK) {
        let offset = body.find(TICK).unwrap_or_default();
        return Err(syntax_error(
            body,
            u32::try_from(offset).unwrap_or_default(),
            format!("`{TICK}` is reserved by toolgate"),
        ));
    }
    let transformed = Transformer::new(
        &allocator,
        Path::new("program.ts"),
        &TransformOptions::default(),
    )
    .build_with_scoping(scoping, &mut program);
    if let Some(error) = transformed.diagnostics.errors().next() {
        let offset = error.labels.first().map_or(0, |label| label.offset());
        return Err(syntax_error(body, offset, error.message.to_string()));
    }
    LoopTicks {
        ast: AstBuilder::new(&allocator),
    }
    .visit_program(&mut program);
    let code = Codegen::new().build(&program).code;
    Ok(format!("(async () => {{\n{code}\n}})()"))
}

/// The global each loop body calls first; a program may not declare it.
pub const TICK: &str = "__toolgate_tick";

/// Puts `TICK();` at the start of every loop body.
struct LoopTicks<'a> {
    ast: AstBuilder<'a>,
}

impl<'a> VisitMut<'a> for LoopTicks<'a> {
    fn visit_statement(&mut self, it: &mut Statement<'a>) {
        walk_mut::walk_statement(self, it);
        let body = match it {
            Statement::WhileStatement(s) => &mut s.body,
            Statement::DoWhileStatement(s) => &mut s.body,
            Statement::ForStatement(s) => &mut s.body,
            Statement::ForInStatement(s) => &mut s.body,
            Statement::ForOfStatement(s) => &mut s.body,
            _ => return,
        };
        let ast = &self.ast;
        let callee = Expression::new_identifier(SPAN, TICK, ast);
        let call =
            Expression::new_call_expression(SPAN, callee, None, ArenaVec::new_in(ast), false, ast);
        let tick = Statement::new_expression_statement(SPAN, call, ast);
        let old = std::mem::replace(body, Statement::new_empty_statement(SPAN, ast));
        *body =
            Statement::new_block_statement(SPAN, ArenaVec::from_array_in([tick, old], ast), ast);
    }
}

fn is_module_syntax(statement: &Statement<'_>) -> bool {
    statement.is_module_declaration()
        || matches!(statement, Statement::TSImportEqualsDeclaration(_))
}

fn syntax_error(source: &str, offset: u32, message: String) -> SyntaxError {
    let (line, column) = line_column(source, offset as usize);
    SyntaxError {
        line,
        column,
        message,
    }
}

/// 1-based line and column (in characters) of a byte offset; offsets past the end or inside a character
/// clamp to the nearest earlier boundary.
fn line_column(source: &str, offset: usize) -> (usize, usize) {
    let mut end = offset.min(source.len());
    while !source.is_char_boundary(end) {
        end -= 1;
    }
    let before = &source[..end];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before[line_start..].chars().count() + 1;
    (line, column)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_are_stripped_and_the_body_is_wrapped() {
        let script = to_script(
            "interface A { x: number }\nconst a: A = { x: 1 } as A;\nlet n = <number>2;\nreturn a.x + n;",
        )
        .unwrap();
        assert!(script.starts_with("(async () => {\n"), "{script}");
        assert!(script.ends_with("\n})()"), "{script}");
        assert!(!script.contains("interface"), "{script}");
        assert!(!script.contains(" as A"), "{script}");
        assert!(script.contains("return a.x + n"), "{script}");
    }

    #[test]
    fn every_loop_body_starts_with_the_tick() {
        let script = to_script(
            "for (;;) break; for (const x of []) {} for (const k in {}) {} while (false); do {} while (false);",
        )
        .unwrap();
        assert_eq!(script.matches(&format!("{TICK}()")).count(), 5, "{script}");
    }

    #[test]
    fn a_program_may_not_declare_the_tick() {
        let error = to_script("let x = 1;\nfunction __toolgate_tick() {}").unwrap_err();
        assert_eq!((error.line, error.column), (2, 10));
        assert!(error.message.contains("reserved"), "{error}");
    }

    #[test]
    fn syntax_errors_carry_line_and_column() {
        let error = to_script("const a = 1;\nconst b = ;").unwrap_err();
        assert_eq!((error.line, error.column), (2, 11), "{error}");
        assert!(error.to_string().starts_with("2:11: "), "{error}");
    }

    #[test]
    fn modules_are_refused_even_type_only_ones() {
        for body in [
            "import fs from 'fs';",
            "import type { X } from './x';\nreturn 1;",
            "export const a = 1;",
            "import fs = require('fs');",
        ] {
            let error = to_script(body).unwrap_err();
            assert!(
                error.message.contains("import and export"),
                "{body}: {error}"
            );
        }
    }

    #[test]
    fn a_body_cannot_close_the_wrapper() {
        assert!(to_script("}); globalThis.escaped = 1; (() => {").is_err());
    }

    #[test]
    fn top_level_await_and_return_are_allowed() {
        let script = to_script("const x = await Promise.resolve(1);\nreturn x;").unwrap();
        assert!(script.contains("await Promise.resolve(1)"), "{script}");
    }

    #[test]
    fn columns_count_characters() {
        assert_eq!(line_column("é = ;", 5), (1, 5));
        assert_eq!(line_column("a\nb", 99), (2, 2));
    }
}
