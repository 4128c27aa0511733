//! TypeScript → JavaScript for a program body: parse with oxc, refuse modules, strip the types, count loops
//! and calls, then wrap.
//!
//! Stripping happens before wrapping: a body wrapped first could close the wrapper itself
//! (`}); evil(); (() => {`), and `import type` would survive. This runs inside the worker because oxc, like
//! Boa, overflows the native stack on deeply nested input; here that is one worker's crash.
//!
//! Every loop body starts with a call of [`TICK`], which counts the run's loop iterations, and every
//! function body with a call of [`ENTER`], which checks how deep the calls nest. Boa has loop and
//! recursion limits of its own, but when one fires in code that runs after an `await`, Boa drops the
//! error (its await continuation ignores how the resumed code ended) and the program's promise just
//! stays pending; these calls record the limit where the run loop sees it.

use std::path::Path;

use oxc_allocator::{Allocator, Vec as ArenaVec};
use oxc_ast::{
    ast::{
        ArrowFunctionBody, ArrowFunctionExpression, AssignmentPattern, Expression, FormalParameter,
        FunctionBody, Statement,
    },
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
    // The transformer evaluates `enum` members from this scoping (it panics without it).
    let semantic = SemanticBuilder::new().with_enum_eval(true).build(&program);
    if let Some(error) = semantic.diagnostics.errors().next() {
        let offset = error.labels.first().map_or(0, |label| label.offset());
        return Err(syntax_error(body, offset, error.message.to_string()));
    }
    let scoping = semantic.semantic.into_scoping();
    if let Some(name) = scoping.symbol_names().find(|name| RESERVED.contains(name)) {
        let offset = body.find(name).unwrap_or_default();
        return Err(syntax_error(
            body,
            u32::try_from(offset).unwrap_or_default(),
            format!("`{name}` is reserved by toolgate"),
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
    Checks {
        ast: AstBuilder::new(&allocator),
    }
    .visit_program(&mut program);
    let code = Codegen::new().build(&program).code;
    Ok(format!("(async () => {{\n{code}\n}})()"))
}

/// The global each loop body calls first; a program may not declare it.
pub const TICK: &str = "__toolgate_tick";
/// The global each function body calls first; a program may not declare it.
pub const ENTER: &str = "__toolgate_enter";
/// Names a program may not declare: a local of that name would take the place of the global.
const RESERVED: [&str; 2] = [TICK, ENTER];

/// Puts `TICK();` at the start of every loop body and `ENTER();` at the start of every function body.
struct Checks<'a> {
    ast: AstBuilder<'a>,
}

impl<'a> Checks<'a> {
    /// `name()`
    fn call_expression(&self, name: &'static str) -> Expression<'a> {
        let ast = &self.ast;
        let callee = Expression::new_identifier(SPAN, name, ast);
        Expression::new_call_expression(SPAN, callee, None, ArenaVec::new_in(ast), false, ast)
    }

    /// `name();`
    fn call(&self, name: &'static str) -> Statement<'a> {
        Statement::new_expression_statement(SPAN, self.call_expression(name), &self.ast)
    }

    /// `expression` becomes `(ENTER(), expression)`: a default value runs in the function's
    /// frame before its body, so a default that recurses (`function f(a = f()) {}`) is bounded
    /// by the same check as the body.
    fn enter_before(&self, expression: &mut Expression<'a>) {
        let ast = &self.ast;
        let old = std::mem::replace(expression, Expression::new_null_literal(SPAN, ast));
        let items = ArenaVec::from_array_in([self.call_expression(ENTER), old], ast);
        *expression = Expression::new_sequence_expression(SPAN, items, ast);
    }
}

impl<'a> VisitMut<'a> for Checks<'a> {
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
        let tick = self.call(TICK);
        let ast = &self.ast;
        let old = std::mem::replace(body, Statement::new_empty_statement(SPAN, ast));
        *body =
            Statement::new_block_statement(SPAN, ArenaVec::from_array_in([tick, old], ast), ast);
    }

    /// Every block body: of functions (declarations, expressions, methods, accessors, constructors,
    /// async ones, generators) and of arrows. Directives stay apart, so `"use strict"` still applies.
    fn visit_function_body(&mut self, it: &mut FunctionBody<'a>) {
        walk_mut::walk_function_body(self, it);
        let enter = self.call(ENTER);
        it.statements.insert(0, enter);
    }

    /// A parameter's default value: see [`Checks::enter_before`].
    fn visit_formal_parameter(&mut self, it: &mut FormalParameter<'a>) {
        walk_mut::walk_formal_parameter(self, it);
        if let Some(initializer) = it.initializer.as_mut() {
            self.enter_before(initializer);
        }
    }

    /// A default inside a destructuring pattern (`function f({a = f()}) {}`).
    fn visit_assignment_pattern(&mut self, it: &mut AssignmentPattern<'a>) {
        walk_mut::walk_assignment_pattern(self, it);
        self.enter_before(&mut it.right);
    }

    /// An arrow with an expression body gets a block body, `{ ENTER(); return expression; }`, which
    /// behaves the same (an arrow has no `arguments` or `this` of its own either way).
    fn visit_arrow_function_expression(&mut self, it: &mut ArrowFunctionExpression<'a>) {
        walk_mut::walk_arrow_function_expression(self, it);
        if it.body.is_function_body() {
            return;
        }
        let ast = &self.ast;
        let old = std::mem::replace(&mut it.body, ArrowFunctionBody::new_null_literal(SPAN, ast));
        // Not a block body, so an expression: the conversion cannot fail.
        let Ok(expression) = Expression::try_from(old) else {
            return;
        };
        let statements = [
            self.call(ENTER),
            Statement::new_return_statement(SPAN, Some(expression), ast),
        ];
        it.body = ArrowFunctionBody::new_function_body(
            SPAN,
            ArenaVec::new_in(ast),
            ArenaVec::from_array_in(statements, ast),
            ast,
        );
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
    fn enums_are_compiled_not_a_crash() {
        let script = to_script("enum Color { Red, Green = 5, Blue }\nreturn Color.Blue;").unwrap();
        assert!(script.contains("Color"), "{script}");
        assert!(!script.contains("enum "), "{script}");
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
    fn every_function_body_starts_with_the_entry_check() {
        let forms = [
            "function a() { return 1; }",
            "const b = function () {};",
            "const c = async function () { await null; };",
            "function* d() { yield 1; }",
            "async function* e() { yield 1; }",
            "const f = () => { return 1; };",
            "const g = async () => { await null; };",
            "const o = { m() {}, get x() { return 1; }, set x(v) {}, async n() {}, *k() {} };",
            "class C { constructor() {} m() {} static s() {} get y() { return 1; } set y(v) {} }",
        ];
        // One per function in each form.
        let counts = [1, 1, 1, 1, 1, 1, 1, 5, 5];
        for (form, count) in forms.into_iter().zip(counts) {
            let script = to_script(form).unwrap();
            assert_eq!(
                script.matches(&format!("{ENTER}()")).count(),
                count,
                "{script}"
            );
        }
        let script = to_script("function a() {\n\t\"use strict\";\n\treturn 1;\n}").unwrap();
        let directive = script.find("\"use strict\"").unwrap();
        assert!(directive < script.find(ENTER).unwrap(), "{script}");
    }

    #[test]
    fn an_arrow_with_an_expression_body_returns_it_after_the_entry_check() {
        let script = to_script(
            "const f = (n) => n + 1; const g = () => ({ a: 1 }); const h = async () => await null;",
        )
        .unwrap();
        assert_eq!(script.matches(&format!("{ENTER}()")).count(), 3, "{script}");
        for returned in ["return n + 1;", "return { a: 1 };", "return await null;"] {
            assert!(script.contains(returned), "{returned}: {script}");
        }
        // Functions nested in an expression body are checked too.
        let script = to_script("const f = () => () => 1;").unwrap();
        assert_eq!(script.matches(&format!("{ENTER}()")).count(), 2, "{script}");
    }

    #[test]
    fn a_program_may_not_declare_the_entry_check() {
        for body in [
            "let __toolgate_enter = 1;",
            "function f(__toolgate_enter) {}",
            "try {} catch (__toolgate_enter) {}",
            "class __toolgate_enter {}",
        ] {
            let error = to_script(body).unwrap_err();
            assert!(error.message.contains("reserved"), "{body}: {error}");
        }
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
