//! One 2026-07-28 request whose work runs in its own task: driven by the client's request and each retry, parked between them.

use std::{collections::BTreeMap, future::Future};

use rmcp::model::{
    ErrorData, GetPromptResult, InputRequests, InputRequiredResult, ReadResourceResult,
};
use tokio::sync::{mpsc, oneshot};
use tokio_util::{sync::CancellationToken, task::TaskTracker};

use super::{AskSink, Asked, Owner, Rounds, RoundsError, What};
use crate::relay::Ask;

/// What the work of an exchange ends with.
pub enum Outcome {
    /// A tool's answer: raw when it came raw from a stdio upstream and no stage read it
    /// (HTTP's modern fast path writes it as it came; rmcp's path decodes it).
    Tool(Result<crate::pipeline::Answer, ErrorData>),
    Prompt(Result<GetPromptResult, ErrorData>),
    Read(Result<ReadResourceResult, ErrorData>),
}

impl From<Result<rmcp::model::CallToolResult, ErrorData>> for Outcome {
    /// A tool's typed result.
    fn from(result: Result<rmcp::model::CallToolResult, ErrorData>) -> Self {
        Outcome::Tool(result.map(crate::pipeline::Answer::Decoded))
    }
}

/// How far one drive got.
pub enum Step {
    /// The work ended: this is the answer.
    Done(Outcome),
    /// The upstream asks the client: answer the request with this.
    Input(InputRequiredResult),
}

/// A request's work and the upstream requests it waits on.
pub struct Exchange {
    pub(super) owner: Owner,
    pub(super) what: What,
    /// Upstream requests shown to the client and not answered yet, by key.
    pub(super) open: BTreeMap<String, Asked>,
    asks: mpsc::Receiver<Asked>,
    /// Every [`AskSink`] is gone: no more requests can come.
    asks_closed: bool,
    done: oneshot::Receiver<Outcome>,
    /// Cancels the work; fired when the exchange is dropped unfinished.
    cancel: CancellationToken,
    next_key: u64,
}

impl Drop for Exchange {
    fn drop(&mut self) {
        // Finished work ignores it; unfinished work is abandoned, and the upstream told.
        self.cancel.cancel();
    }
}

impl Exchange {
    /// Starts `work` in a task of `tasks`. `work` gets the sink its upstream requests go to
    /// and the token that cancels it.
    pub fn start<F, Fut>(
        owner: Owner,
        what: What,
        capabilities: rmcp::model::ClientCapabilities,
        tasks: &TaskTracker,
        work: F,
    ) -> Self
    where
        F: FnOnce(AskSink, CancellationToken) -> Fut,
        Fut: Future<Output = Outcome> + Send + 'static,
    {
        let (sink, asks) = AskSink::new(capabilities);
        let cancel = CancellationToken::new();
        let (finish, done) = oneshot::channel();
        let running = work(sink, cancel.clone());
        // Boxed once, here: a call's work is kilobytes (the pipeline's whole state), and a
        // task holding it in place copies all of it as tokio sets it up and again as it stores
        // the output over it (callgrind: over 100 KB of `memcpy` per call).
        tasks.spawn(crate::pipeline::boxed(move || async move {
            // Nobody may be waiting any more (the exchange expired): then it is dropped.
            let _ = finish.send(running.await);
        }));
        Self {
            owner,
            what,
            open: BTreeMap::new(),
            asks,
            asks_closed: false,
            done,
            cancel,
            next_key: 1,
        }
    }

    fn add(&mut self, asked: Asked) {
        let kind = match asked.ask {
            Ask::Sampling => "sampling",
            Ask::Elicitation => "elicitation",
            Ask::Roots => "roots",
        };
        let key = format!("{kind}-{}", self.next_key);
        self.next_key += 1;
        self.open.insert(key, asked);
    }
}

impl Rounds {
    /// Waits until `exchange`'s work ends or its upstream asks the client something; then
    /// answers with the result, or parks the exchange and answers with its requests. `ct`
    /// (the client's cancel of this request) cancels the whole exchange.
    pub async fn drive(
        &self,
        mut exchange: Exchange,
        ct: &CancellationToken,
    ) -> Result<Step, RoundsError> {
        loop {
            // Requests the upstream withdrew (it cancelled them, or gave up) are not shown.
            exchange.open.retain(|_, asked| !asked.reply.is_closed());
            while let Ok(asked) = exchange.asks.try_recv() {
                exchange.add(asked);
            }
            if !exchange.open.is_empty() {
                let requests: InputRequests = exchange
                    .open
                    .iter()
                    .map(|(key, asked)| (key.clone(), asked.request.clone()))
                    .collect();
                let state = self.park(exchange)?;
                return Ok(Step::Input(InputRequiredResult::new(
                    Some(requests),
                    Some(state),
                )));
            }
            tokio::select! {
                biased;
                // The work ended.
                outcome = &mut exchange.done => {
                    return outcome.map(Step::Done).map_err(|_| RoundsError::Lost);
                }
                // The upstream asks the client something.
                asked = exchange.asks.recv(), if !exchange.asks_closed => match asked {
                    Some(asked) => exchange.add(asked),
                    None => exchange.asks_closed = true,
                },
                // The client cancelled this request: the exchange ends with it.
                () = ct.cancelled() => return Err(RoundsError::Cancelled),
            }
        }
    }
}
