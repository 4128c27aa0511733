//! What a program sees besides the language: `tools`, `catalog`, `console`, `ToolCallError`; and the run's
//! bookkeeping behind them (pending requests, counters, the reason a run was stopped).

use std::{
    cell::{Cell, RefCell},
    collections::HashMap,
    rc::Rc,
};

use boa_engine::{
    Context, JsError, JsNativeError, JsObject, JsResult, JsString, JsValue, NativeFunction, Source,
    builtins::promise::ResolvingFunctions,
    error::{EngineError, PanicError, RuntimeLimitError},
    js_string,
    object::{FunctionObjectBuilder, ObjectInitializer, builtins::JsPromise},
    property::Attribute,
};
use serde_json::Value;

use super::{
    send,
    typescript::{ENTER, TICK},
};
use crate::code_mode::wire::{
    DoneError, FailureKind, FromWorker, LogLevel, RunLimits, ToWorker, ToolFailure, max_args_bytes,
};

/// `ToolCallError`, defined in JavaScript so that it is an ordinary subclass of `Error`.
const PRELUDE: &str = r#"(() => {
  class ToolCallError extends Error {
    constructor(toolName, code, message) {
      super(message);
      this.toolName = toolName;
      this.code = code;
    }
  }
  Object.defineProperty(ToolCallError.prototype, "name", { value: "ToolCallError", writable: true, configurable: true });
  Object.defineProperty(globalThis, "ToolCallError", { value: ToolCallError, writable: true, configurable: true });
  return ToolCallError;
})()"#;

/// One run's state, shared by the native functions (through the context's host data) and the run loop.
pub(super) struct RunState {
    pub(super) limits: RunLimits,
    next_n: Cell<u64>,
    pending: RefCell<HashMap<u64, Pending>>,
    tool_calls: Cell<u32>,
    catalog_calls: Cell<u32>,
    output_bytes: Cell<usize>,
    /// Loop iterations so far, counted by the tick every loop body starts with.
    loop_iterations: Cell<u64>,
    /// Why the run was stopped from the inside (a limit); wins over whatever the engine reports after it.
    fatal: RefCell<Option<DoneError>>,
    /// The intrinsic `JSON.stringify` and `ToolCallError`, taken before the program could replace them.
    stringify: JsObject,
    tool_call_error: JsObject,
    /// A native function that does nothing: calling it makes Boa check its recursion limit (see [`deeper_than`]).
    probe: JsObject,
}

struct Pending {
    resolvers: ResolvingFunctions,
    /// The tool's name for a tool call; `None` for catalog requests.
    tool: Option<String>,
}

impl RunState {
    /// The id the next request will use; ids never repeat within a worker's life.
    pub(super) fn next_id(&self) -> u64 {
        self.next_n.get()
    }

    pub(super) fn has_pending(&self) -> bool {
        !self.pending.borrow().is_empty()
    }

    pub(super) fn output_bytes(&self) -> usize {
        self.output_bytes.get()
    }

    pub(super) fn take_fatal(&self) -> Option<DoneError> {
        self.fatal.borrow_mut().take()
    }

    /// Records why the run must end and returns the uncatchable error that unwinds the program to the run loop.
    pub(super) fn stop(&self, kind: FailureKind, message: String) -> JsError {
        let mut fatal = self.fatal.borrow_mut();
        if fatal.is_none() {
            *fatal = Some(DoneError {
                kind,
                message: message.clone(),
            });
        }
        EngineError::from(PanicError::new(message)).into()
    }

    fn take_id(&self) -> u64 {
        let n = self.next_n.get();
        self.next_n.set(n + 1);
        n
    }

    /// Settles the promise an answer frame is for. Answers to unknown ids (a finished run's) are ignored.
    pub(super) fn settle(&self, frame: ToWorker, context: &mut Context) -> JsResult<()> {
        let (n, outcome) = match frame {
            ToWorker::Result { n, ok, error } => match error {
                Some(failure) => (n, Err(failure)),
                None => (n, Ok(ok.unwrap_or(Value::Null))),
            },
            ToWorker::SearchResult { n, value } => (n, Ok(value)),
            ToWorker::DescribeResult { n, text } => {
                (n, Ok(text.map_or(Value::Null, Value::String)))
            }
            ToWorker::Run { .. } => return Ok(()),
        };
        let Some(pending) = self.pending.borrow_mut().remove(&n) else {
            return Ok(());
        };
        match outcome {
            Ok(value) => {
                let value = JsValue::from_json(&value, context)?;
                pending
                    .resolvers
                    .resolve
                    .call(&JsValue::undefined(), &[value], context)?;
            }
            Err(failure) => {
                let tool = pending.tool.unwrap_or_default();
                let error = self.tool_call_error(&tool, &failure, context)?;
                pending
                    .resolvers
                    .reject
                    .call(&JsValue::undefined(), &[error], context)?;
            }
        }
        Ok(())
    }

    fn tool_call_error(
        &self,
        tool: &str,
        failure: &ToolFailure,
        context: &mut Context,
    ) -> JsResult<JsValue> {
        let args = [
            JsValue::from(JsString::from(tool)),
            JsValue::from(JsString::from(failure.code.as_str())),
            JsValue::from(JsString::from(failure.message.as_str())),
        ];
        Ok(self.tool_call_error.construct(&args, None, context)?.into())
    }

    fn rejected(
        &self,
        tool: &str,
        code: &str,
        message: String,
        context: &mut Context,
    ) -> JsResult<JsValue> {
        let failure = ToolFailure {
            code: code.to_owned(),
            message,
        };
        let error = self.tool_call_error(tool, &failure, context)?;
        Ok(JsPromise::reject(JsError::from_opaque(error), context)?.into())
    }

    /// Sends a request and returns the promise its answer will settle.
    fn request(
        &self,
        frame: FromWorker,
        n: u64,
        tool: Option<String>,
        context: &mut Context,
    ) -> JsValue {
        let (promise, resolvers) = JsPromise::new_pending(context);
        self.pending
            .borrow_mut()
            .insert(n, Pending { resolvers, tool });
        send(&frame);
        promise.into()
    }

    /// `JSON.stringify` semantics (`toJSON`, enumerable own properties, functions dropped); `None` when the
    /// value has no JSON form (`undefined`, a function).
    pub(super) fn to_json(
        &self,
        value: &JsValue,
        context: &mut Context,
    ) -> JsResult<Option<Value>> {
        let text =
            self.stringify
                .call(&JsValue::undefined(), std::slice::from_ref(value), context)?;
        let Some(text) = text.as_string() else {
            return Ok(None);
        };
        serde_json::from_str(&text.to_std_string_escaped())
            .map(Some)
            .map_err(|error| {
                JsNativeError::typ()
                    .with_message(format!("the value cannot be sent as JSON: {error}"))
                    .into()
            })
    }
}

/// The shared state of the run a native function is called in.
fn state(context: &Context) -> JsResult<Rc<RunState>> {
    context
        .get_data::<Rc<RunState>>()
        .cloned()
        .ok_or_else(|| JsNativeError::typ().with_message("no run is active").into())
}

/// Defines the globals of a fresh context and returns the run's state (also stored in the context).
pub(super) fn install(
    context: &mut Context,
    tools: &[String],
    limits: RunLimits,
    first_id: u64,
) -> JsResult<Rc<RunState>> {
    let tool_call_error = context
        .eval(Source::from_bytes(PRELUDE))?
        .as_object()
        .ok_or_else(|| JsNativeError::typ().with_message("ToolCallError is not a class"))?;
    let stringify = context
        .intrinsics()
        .objects()
        .json()
        .get(js_string!("stringify"), context)?
        .as_object()
        .ok_or_else(|| JsNativeError::typ().with_message("JSON.stringify is missing"))?;
    let state = Rc::new(RunState {
        limits,
        next_n: Cell::new(first_id),
        pending: RefCell::default(),
        tool_calls: Cell::new(0),
        catalog_calls: Cell::new(0),
        output_bytes: Cell::new(0),
        loop_iterations: Cell::new(0),
        fatal: RefCell::new(None),
        stringify,
        tool_call_error,
        probe: FunctionObjectBuilder::new(
            context.realm(),
            NativeFunction::from_fn_ptr(|_, _, _| Ok(JsValue::undefined())),
        )
        .build()
        .into(),
    });
    context.insert_data(state.clone());

    let mut tools_object = ObjectInitializer::new(context);
    for name in tools {
        let name = JsString::from(name.as_str());
        tools_object.function(
            NativeFunction::from_copy_closure_with_captures(tool_call, name.clone()),
            name,
            1,
        );
    }
    let tools_object = tools_object.build();
    let catalog = ObjectInitializer::new(context)
        .function(
            NativeFunction::from_fn_ptr(catalog_search),
            js_string!("search"),
            2,
        )
        .function(
            NativeFunction::from_fn_ptr(catalog_describe),
            js_string!("describe"),
            1,
        )
        .build();
    let console = ObjectInitializer::new(context)
        .function(
            NativeFunction::from_fn_ptr(console::<0>),
            js_string!("log"),
            0,
        )
        .function(
            NativeFunction::from_fn_ptr(console::<1>),
            js_string!("info"),
            0,
        )
        .function(
            NativeFunction::from_fn_ptr(console::<2>),
            js_string!("warn"),
            0,
        )
        .function(
            NativeFunction::from_fn_ptr(console::<3>),
            js_string!("error"),
            0,
        )
        .function(
            NativeFunction::from_fn_ptr(console::<4>),
            js_string!("debug"),
            0,
        )
        .build();
    let attributes = Attribute::WRITABLE | Attribute::CONFIGURABLE;
    context.register_global_property(js_string!("tools"), tools_object, attributes)?;
    context.register_global_property(js_string!("catalog"), catalog, attributes)?;
    context.register_global_property(js_string!("console"), console, attributes)?;
    // Fixed, so that a program cannot replace it to escape the count (declaring it is refused
    // when the program is compiled).
    let tick = FunctionObjectBuilder::new(context.realm(), NativeFunction::from_fn_ptr(loop_tick))
        .name(js_string!(TICK))
        .build();
    context.register_global_property(JsString::from(TICK), tick, Attribute::empty())?;
    let enter = FunctionObjectBuilder::new(
        context.realm(),
        NativeFunction::from_copy_closure_with_captures(enter, limits.recursion_depth),
    )
    .name(js_string!(ENTER))
    .build();
    context.register_global_property(JsString::from(ENTER), enter, Attribute::empty())?;
    Ok(state)
}

/// Counts one loop iteration; past the run's limit, stops the run (see `typescript`'s module doc).
fn loop_tick(_this: &JsValue, _args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let state = state(context)?;
    let count = state.loop_iterations.get().saturating_add(1);
    state.loop_iterations.set(count);
    let max = state.limits.loop_iterations;
    if count > max {
        return Err(state.stop(
            FailureKind::Limit,
            format!("more than {max} loop iterations in this run"),
        ));
    }
    Ok(JsValue::undefined())
}

/// Starts every function body; deeper than the run's recursion limit, stops the run (see `typescript`'s
/// module doc). The depth is Boa's own: its frames, plus one for each call into JavaScript from native
/// code (`map` callbacks, getters), which Boa counts but does not expose.
fn enter(
    _this: &JsValue,
    _args: &[JsValue],
    max: &usize,
    context: &mut Context,
) -> JsResult<JsValue> {
    let frames = {
        let frames = context.stack_trace();
        match frames.size_hint() {
            (low, Some(high)) if low == high => low,
            _ => frames.count(),
        }
    };
    // Each native re-entry has a frame of its own, so the depth is at most twice the frames: the
    // common shallow call costs no more than this.
    if frames.saturating_mul(2) <= *max {
        return Ok(JsValue::undefined());
    }
    let state = state(context)?;
    if deeper_than(*max, &state.probe, context) {
        return Err(state.stop(
            FailureKind::Limit,
            format!("recursion deeper than {max} calls"),
        ));
    }
    Ok(JsValue::undefined())
}

/// Whether Boa counts more than `max` calls here: every native call first checks the recursion limit,
/// so `probe` is called under a limit of `max + 1`, then the backstop limit is put back.
fn deeper_than(max: usize, probe: &JsObject, context: &mut Context) -> bool {
    let limits = context.runtime_limits_mut();
    let backstop = limits.recursion_limit();
    limits.set_recursion_limit(max.saturating_add(1));
    let probed = probe.call(&JsValue::undefined(), &[], context);
    context.runtime_limits_mut().set_recursion_limit(backstop);
    probed.is_err_and(|error| {
        matches!(
            error.as_engine(),
            Some(EngineError::RuntimeLimit(RuntimeLimitError::Recursion))
        )
    })
}

/// `tools.<name>(args)`: sends a call frame and returns the promise its result settles.
fn tool_call(
    _this: &JsValue,
    args: &[JsValue],
    name: &JsString,
    context: &mut Context,
) -> JsResult<JsValue> {
    let state = state(context)?;
    let tool = name.to_std_string_escaped();
    let argument = args.first().cloned().unwrap_or_default();
    let json = if argument.is_undefined() {
        Ok(Some(Value::Object(serde_json::Map::new())))
    } else {
        state.to_json(&argument, context)
    };
    let json = match json {
        Ok(Some(json)) => json,
        Ok(None) => {
            let message = format!("the arguments of tools.{tool} must be a JSON object");
            return state.rejected(&tool, "INVALID_ARGS", message, context);
        }
        Err(error) if error.as_engine().is_some() => return Err(error),
        Err(error) => {
            let message = format!("the arguments of tools.{tool} are not JSON: {error}");
            return state.rejected(&tool, "INVALID_ARGS", message, context);
        }
    };
    let size = json.to_string().len();
    let max_size = max_args_bytes(state.limits.max_output_bytes);
    if size > max_size {
        let message =
            format!("the arguments of tools.{tool} are {size} bytes, over the limit of {max_size}");
        return state.rejected(&tool, "INVALID_ARGS", message, context);
    }
    let count = state.tool_calls.get().saturating_add(1);
    if count > state.limits.max_tool_calls {
        let max = state.limits.max_tool_calls;
        return Err(state.stop(FailureKind::Limit, format!("more than {max} tool calls")));
    }
    state.tool_calls.set(count);
    let n = state.take_id();
    let frame = FromWorker::Call {
        n,
        tool: tool.clone(),
        args: json,
    };
    Ok(state.request(frame, n, Some(tool), context))
}

/// Catalog lookups are cheap but still bounded, by the same number as tool calls.
fn count_catalog_call(state: &RunState) -> JsResult<()> {
    let count = state.catalog_calls.get().saturating_add(1);
    let max = state.limits.max_tool_calls;
    if count > max {
        return Err(state.stop(
            FailureKind::Limit,
            format!("more than {max} catalog lookups"),
        ));
    }
    state.catalog_calls.set(count);
    Ok(())
}

/// `catalog.search(query, limit?)`.
fn catalog_search(_this: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let state = state(context)?;
    count_catalog_call(&state)?;
    let query = args
        .first()
        .cloned()
        .unwrap_or_default()
        .to_string(context)?
        .to_std_string_escaped();
    let limit = match args.get(1) {
        Some(value) if !value.is_undefined() && !value.is_null() => {
            let number = value.to_number(context)?;
            (number.is_finite() && number >= 0.0).then_some(number as usize)
        }
        _ => None,
    };
    let n = state.take_id();
    Ok(state.request(FromWorker::Search { n, query, limit }, n, None, context))
}

/// `catalog.describe(name)`: the tool's declaration text, or `null`.
fn catalog_describe(_this: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let state = state(context)?;
    count_catalog_call(&state)?;
    let name = args
        .first()
        .cloned()
        .unwrap_or_default()
        .to_string(context)?
        .to_std_string_escaped();
    let n = state.take_id();
    Ok(state.request(FromWorker::Describe { n, name }, n, None, context))
}

/// `console.log/info/warn/error/debug`: one captured line per call, streamed to the gateway.
fn console<const LEVEL: u8>(
    _this: &JsValue,
    args: &[JsValue],
    context: &mut Context,
) -> JsResult<JsValue> {
    let state = state(context)?;
    let mut text = String::new();
    for (i, value) in args.iter().enumerate() {
        if i > 0 {
            text.push(' ');
        }
        text.push_str(&display(value, &state, context)?);
    }
    let total = state.output_bytes.get().saturating_add(text.len());
    let max = state.limits.max_output_bytes;
    if total > max {
        return Err(state.stop(FailureKind::Limit, format!("output over {max} bytes")));
    }
    state.output_bytes.set(total);
    let level = match LEVEL {
        0 => LogLevel::Log,
        1 => LogLevel::Info,
        2 => LogLevel::Warn,
        3 => LogLevel::Error,
        _ => LogLevel::Debug,
    };
    send(&FromWorker::Log { level, text });
    Ok(JsValue::undefined())
}

/// A value as a console shows it: strings raw, errors as `Name: message`, other objects as JSON, the rest as
/// `String(value)`. Only an uncatchable engine error propagates; any other failure falls back to a placeholder.
pub(super) fn display(
    value: &JsValue,
    state: &RunState,
    context: &mut Context,
) -> JsResult<String> {
    if let Some(text) = value.as_string() {
        return Ok(text.to_std_string_escaped());
    }
    if let Some(symbol) = value.as_symbol() {
        return Ok(symbol.descriptive_string().to_std_string_escaped());
    }
    let Some(object) = value.as_object() else {
        return plain_string(value, context);
    };
    if object.is_callable() {
        return plain_string(value, context);
    }
    if object.is::<boa_engine::builtins::error::Error>() {
        let name = object.get(js_string!("name"), context)?;
        let message = object.get(js_string!("message"), context)?;
        let name = plain_string(&name, context)?;
        let message = plain_string(&message, context)?;
        return Ok(if message.is_empty() {
            name
        } else {
            format!("{name}: {message}")
        });
    }
    match state.to_json(value, context) {
        Ok(Some(json)) => Ok(json.to_string()),
        Err(error) if error.as_engine().is_some() => Err(error),
        Ok(None) | Err(_) => plain_string(value, context),
    }
}

/// `String(value)`, or a placeholder when even that throws.
fn plain_string(value: &JsValue, context: &mut Context) -> JsResult<String> {
    match value.to_string(context) {
        Ok(text) => Ok(text.to_std_string_escaped()),
        Err(error) if error.as_engine().is_some() => Err(error),
        Err(_) => Ok("[object]".to_owned()),
    }
}
