//! One run inside the worker: strip → fresh context → evaluate → drive jobs, blocking on stdin only when nothing
//! else can make progress → a `done` frame.

use std::rc::Rc;

use boa_engine::{
    Context, JsError, JsValue, Source,
    builtins::promise::PromiseState,
    context::ContextBuilder,
    error::{EngineError, RuntimeLimitError},
    module::IdleModuleLoader,
    object::builtins::JsPromise,
};
use serde_json::Value;

use super::{
    Input,
    globals::{self, RunState},
    jobs::{Executor, Hooks},
    typescript,
};
use crate::code_mode::wire::{DoneError, FailureKind, FromWorker, RunLimits, value_bytes};

/// Short backtraces: they are never shown, and long ones cost time on every error.
const BACKTRACE_LIMIT: usize = 8;

/// Runs one program and returns its `done` frame, and the context it ran in: dropping that and collecting its
/// garbage is left to the caller, after the frame is sent, so that it is not on the run's latency path.
/// `next_id` is the worker's request counter; it is carried across runs so that an answer meant for an earlier
/// run can never match a request of this one.
pub(super) fn execute(
    code: &str,
    tools: &[String],
    limits: RunLimits,
    memory_bytes: u64,
    next_id: &mut u64,
    input: &mut Input,
) -> (FromWorker, Option<Context>) {
    let (result, context) = match typescript::to_script(code) {
        Ok(script) => run_script(&script, tools, limits, memory_bytes, next_id, input),
        Err(error) => (
            Err(DoneError {
                kind: FailureKind::Syntax,
                message: error.to_string(),
            }),
            None,
        ),
    };
    let done = match result {
        Ok(value) => FromWorker::Done { value, error: None },
        Err(error) => FromWorker::Done {
            value: None,
            error: Some(error),
        },
    };
    (done, context)
}

/// A fresh context with the sandbox's loader, executor, hooks and limits (shared with the warm-up).
pub(super) fn new_context(limits: RunLimits, hooks: Rc<Hooks>) -> Result<Context, DoneError> {
    let mut context = ContextBuilder::new()
        .module_loader(Rc::new(IdleModuleLoader))
        .job_executor(Rc::new(Executor::default()))
        .host_hooks(hooks)
        .build()
        .map_err(|error| DoneError {
            kind: FailureKind::Crash,
            message: format!("cannot create a JavaScript context: {error}"),
        })?;
    let runtime_limits = context.runtime_limits_mut();
    // The run's own checks (the loop tick and the function entry, see `typescript`) reach their
    // limits first; Boa's limits are the backstop for code they do not see (`eval`, `Function`,
    // recursion inside default parameter values). The margin is there because Boa checks its
    // recursion limit on every native call too: a function entered one call past the run's limit
    // must still be able to call the entry check.
    runtime_limits.set_loop_iteration_limit(limits.loop_iterations.saturating_add(16));
    runtime_limits.set_recursion_limit(limits.recursion_depth.saturating_add(16));
    runtime_limits.set_backtrace_limit(BACKTRACE_LIMIT);
    Ok(context)
}

fn run_script(
    script: &str,
    tools: &[String],
    limits: RunLimits,
    memory_bytes: u64,
    next_id: &mut u64,
    input: &mut Input,
) -> (Result<Option<Value>, DoneError>, Option<Context>) {
    let hooks = Rc::new(Hooks::new(memory_bytes / 2));
    let mut context = match new_context(limits, hooks.clone()) {
        Ok(context) => context,
        Err(error) => return (Err(error), None),
    };
    let state = match globals::install(&mut context, tools, limits, *next_id) {
        Ok(state) => state,
        Err(error) => {
            let error = DoneError {
                kind: FailureKind::Crash,
                message: format!("cannot set up the program's globals: {error}"),
            };
            return (Err(error), Some(context));
        }
    };
    let result = drive(script, &state, &hooks, &mut context, input);
    *next_id = state.next_id();
    (result, Some(context))
}

fn drive(
    script: &str,
    state: &RunState,
    hooks: &Hooks,
    context: &mut Context,
    input: &mut Input,
) -> Result<Option<Value>, DoneError> {
    let promise = match context.eval(Source::from_bytes(script)) {
        Ok(value) => value
            .as_object()
            .and_then(|object| JsPromise::from_object(object).ok())
            .ok_or_else(|| crash("the wrapped program did not return a promise"))?,
        Err(error) => return Err(failure(error, state, context, true)),
    };
    loop {
        if let Err(error) = context.run_jobs() {
            return Err(failure(error, state, context, false));
        }
        if let Some(fatal) = state.take_fatal() {
            return Err(fatal);
        }
        match promise.state() {
            PromiseState::Fulfilled(value) => {
                if let Some(reason) = hooks.first_unhandled() {
                    let message = describe(&reason, state, context)?;
                    return Err(DoneError {
                        kind: FailureKind::Exception,
                        message: format!("unhandled promise rejection: {message}"),
                    });
                }
                return returned(&value, state, context);
            }
            PromiseState::Rejected(reason) => {
                return Err(DoneError {
                    kind: FailureKind::Exception,
                    message: describe(&reason, state, context)?,
                });
            }
            PromiseState::Pending if !state.has_pending() => {
                return Err(DoneError {
                    kind: FailureKind::Exception,
                    message: "the program's promise never settled: it awaits something that no tool call \
                              or catalog lookup will resolve, or code run by `eval` or `Function` hit a limit \
                              after an await"
                        .to_owned(),
                });
            }
            PromiseState::Pending => {
                // Nothing can run until an answer arrives: block on the pipe (0 CPU).
                let Some(frame) = input.next_frame() else {
                    // The gateway is gone; nobody is left to read a result.
                    std::process::exit(0);
                };
                if let Err(error) = state.settle(frame, context) {
                    return Err(failure(error, state, context, false));
                }
            }
        }
    }
}

/// The fulfilled value as the gateway receives it: `undefined` → none; functions and symbols → their string;
/// anything else through `JSON.stringify`.
fn returned(
    value: &JsValue,
    state: &RunState,
    context: &mut Context,
) -> Result<Option<Value>, DoneError> {
    if value.is_undefined() {
        return Ok(None);
    }
    let json = if value.is_callable() || value.is_symbol() || value.is_bigint() {
        Some(Value::String(describe(value, state, context)?))
    } else {
        match state.to_json(value, context) {
            Ok(Some(json)) => Some(json),
            Ok(None) => Some(Value::String(describe(value, state, context)?)),
            Err(error) => {
                if error.as_engine().is_some() {
                    return Err(failure(error, state, context, false));
                }
                let message = describe_error(error, state, context)?;
                return Err(DoneError {
                    kind: FailureKind::Exception,
                    message: format!("the returned value cannot be converted to JSON: {message}"),
                });
            }
        }
    };
    if let Some(json) = &json {
        let max = state.limits.max_output_bytes;
        if state.output_bytes().saturating_add(value_bytes(json)) > max {
            return Err(DoneError {
                kind: FailureKind::Limit,
                message: format!("output over {max} bytes"),
            });
        }
    }
    Ok(json)
}

/// Maps an error that reached the run loop to the run's failure. `at_eval` marks errors from evaluating the
/// script itself, where a `SyntaxError` means the program did not parse.
fn failure(error: JsError, state: &RunState, context: &mut Context, at_eval: bool) -> DoneError {
    if let Some(fatal) = state.take_fatal() {
        return fatal;
    }
    if let Some(engine) = error.as_engine() {
        return match runtime_limit(&error) {
            Some(limit) => DoneError {
                kind: FailureKind::Limit,
                message: match limit {
                    RuntimeLimitError::LoopIteration => format!(
                        "more than {} iterations in one loop",
                        state.limits.loop_iterations
                    ),
                    RuntimeLimitError::Recursion => format!(
                        "recursion deeper than {} calls",
                        state.limits.recursion_depth
                    ),
                    RuntimeLimitError::StackSize => "the JavaScript stack is full".to_owned(),
                },
            },
            None => crash(&engine.to_string()),
        };
    }
    let syntax = at_eval && error.as_native().is_some_and(|native| native.is_syntax());
    match describe_error(error, state, context) {
        Ok(message) => DoneError {
            kind: if syntax {
                FailureKind::Syntax
            } else {
                FailureKind::Exception
            },
            message,
        },
        Err(failure) => failure,
    }
}

/// The runtime limit behind an engine error. Boa sometimes wraps one in an internal "panic" error (a recursion
/// limit hit while an async function creates its promise), so the chain of sources is searched too.
fn runtime_limit(error: &JsError) -> Option<RuntimeLimitError> {
    match error.as_engine()? {
        EngineError::RuntimeLimit(limit) => Some(*limit),
        EngineError::Panic(panic) => {
            let source = std::error::Error::source(panic)?;
            let inner = source
                .downcast_ref::<JsError>()
                .or_else(|| source.downcast_ref::<Box<JsError>>().map(|b| &**b))?;
            runtime_limit(inner)
        }
    }
}

fn describe_error(
    error: JsError,
    state: &RunState,
    context: &mut Context,
) -> Result<String, DoneError> {
    match error.into_opaque(context) {
        Ok(value) => describe(&value, state, context),
        Err(engine) => Err(failure(engine, state, context, false)),
    }
}

fn describe(value: &JsValue, state: &RunState, context: &mut Context) -> Result<String, DoneError> {
    globals::display(value, state, context).map_err(|error| failure(error, state, context, false))
}

fn crash(message: &str) -> DoneError {
    DoneError {
        kind: FailureKind::Crash,
        message: message.to_owned(),
    }
}
