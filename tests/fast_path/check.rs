//! Running the corpus through a gateway, and checking and comparing the transcripts.

use std::{
    ops::Range,
    path::Path,
    time::{Duration, Instant},
};

use serde_json::{Value, json};

use crate::client::{LineClient, is_answer_to, parse, shown};
use crate::common::{Workdir, server_toml};
use crate::corpus::{Case, Era, Expect, Shape, Step};
use crate::{MAX_RESULT_BYTES, SLOW_TIMEOUT_MS, STEP_LIMIT};

/// Everything one gateway wrote after its handshake, line by line, with the case it belongs
/// to; the lines of each awaited answer; and what it wrote after its stdin closed.
pub(crate) struct Transcript {
    pub(crate) lines: Vec<(usize, Vec<u8>)>,
    /// (case, step, the lines read for that step).
    pub(crate) awaited: Vec<(usize, usize, Range<usize>)>,
    pub(crate) tail: Vec<Vec<u8>>,
}

/// The `[gateway]` table and servers of the corpus gateways, logging into `dir`.
fn corpus_config(dir: &Path, fast_path: bool) -> String {
    let calls = dir.join("calls.log").display().to_string();
    let cancels = dir.join("cancel.log").display().to_string();
    format!(
        "[gateway]\nfast_path = {fast_path}\nmax_result_bytes = {MAX_RESULT_BYTES}\n{}{}timeout_ms = {SLOW_TIMEOUT_MS}\n{}",
        server_toml(
            "echo",
            "echo_server",
            &[("ECHO_CALL_LOG", &calls), ("ECHO_CANCEL_LOG", &cancels)]
        ),
        server_toml("slow", "echo_server", &[]),
        server_toml("notes", "notes_server", &[]),
    )
}

pub(crate) fn corpus_workdir(fast_path: bool) -> Workdir {
    let dir = tempfile::tempdir().expect("temp dir");
    let toml = corpus_config(dir.path(), fast_path);
    std::fs::write(dir.path().join("servers.toml"), toml).expect("write config");
    Workdir { dir }
}

/// Waits until `path` holds `needle` at least `count` times.
pub(crate) async fn wait_log(label: &str, path: &Path, needle: &str, count: usize) {
    let deadline = Instant::now() + STEP_LIMIT;
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if text.matches(needle).count() >= count {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{label}: {} never held {needle:?} {count} times; it has {text:?}",
            path.display()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Starts a gateway (`fast_path` as given), opens a session as `era` says and replays
/// `cases`; returns whether results carry `resultType`, and the transcript.
pub(crate) async fn replay(
    label: &'static str,
    fast_path: bool,
    era: Era,
    cases: &[Case],
) -> (bool, Transcript) {
    let work = corpus_workdir(fast_path);
    let mut client = LineClient::spawn(label, &work.config(), &[]);
    let modern = client.handshake(era).await;
    let mut transcript = Transcript {
        lines: Vec::new(),
        awaited: Vec::new(),
        tail: Vec::new(),
    };
    for (case_index, case) in cases.iter().enumerate() {
        for (step_index, step) in case.steps.iter().enumerate() {
            match step {
                Step::Send(line) => client.send(line).await,
                Step::Await { id, .. } => {
                    let mut lines = Vec::new();
                    client.until_answer(id.as_ref(), &mut lines).await;
                    let start = transcript.lines.len();
                    transcript
                        .lines
                        .extend(lines.into_iter().map(|line| (case_index, line)));
                    transcript.awaited.push((
                        case_index,
                        step_index,
                        start..transcript.lines.len(),
                    ));
                }
                Step::WaitLog {
                    file,
                    needle,
                    count,
                } => wait_log(label, &work.path(file), needle, *count).await,
            }
        }
    }
    transcript.tail = client.finish().await;
    (modern, transcript)
}

/// Checks one transcript against what the corpus expects.
pub(crate) fn check(label: &str, era: Era, modern: bool, cases: &[Case], transcript: &Transcript) {
    for (case_index, step_index, range) in &transcript.awaited {
        let case = &cases[*case_index];
        let Step::Await {
            id,
            expect,
            progress,
            shape,
        } = &case.steps[*step_index]
        else {
            unreachable!("only awaits are recorded")
        };
        let lines: Vec<Value> = transcript.lines[range.clone()]
            .iter()
            .map(|(_, line)| parse(label, line))
            .collect();
        let whole = || {
            lines
                .iter()
                .map(|l| shown(l.to_string().as_bytes()))
                .collect::<Vec<_>>()
                .join("\n")
        };
        let context = format!("{label}, {era:?}, case {:?}", case.name);
        let (answer, before) = lines.split_last().expect("an awaited answer");
        // Only progress may come before an answer, and only when asked for.
        let (token, steps) = progress.clone().unwrap_or((Value::Null, 0));
        assert_eq!(
            before.len() as u64,
            steps,
            "{context}: expected {steps} progress notifications before the answer, got:\n{}",
            whole()
        );
        for (step, notice) in before.iter().enumerate() {
            assert_eq!(
                notice["method"], "notifications/progress",
                "{context}: {notice}"
            );
            assert_eq!(
                notice["params"]["progressToken"], token,
                "{context}: {notice}"
            );
            assert_eq!(
                notice["params"]["progress"].as_f64(),
                Some((step + 1) as f64),
                "{context}: {notice}"
            );
            assert_eq!(
                notice["params"]["total"].as_f64(),
                Some(steps as f64),
                "{context}: {notice}"
            );
        }
        match id {
            Some(id) => assert_eq!(&answer["id"], id, "{context}: {answer}"),
            None => assert!(
                answer.get("id").is_none_or(Value::is_null),
                "{context}: {answer}"
            ),
        }
        let result = &answer["result"];
        let is_result = !matches!(expect, Expect::Rpc(_) | Expect::Empty);
        if is_result {
            assert!(result.is_object(), "{context}: expected a result: {answer}");
            let wants_type = match shape {
                Shape::Session => modern,
                Shape::Legacy => false,
                Shape::Modern => true,
            };
            if wants_type {
                assert_eq!(result["resultType"], "complete", "{context}: {answer}");
            } else {
                assert!(result.get("resultType").is_none(), "{context}: {answer}");
            }
        }
        let first_text = result["content"][0]["text"].as_str();
        let toolgate_code = result["_meta"]["toolgate/error"]["code"].as_str();
        match expect {
            Expect::Text(expected) => {
                assert_eq!(result["isError"], false, "{context}: {}", whole());
                assert!(
                    first_text == Some(expected.as_str()),
                    "{context}: expected the text {}, got {}",
                    shown(expected.as_bytes()),
                    whole()
                );
            }
            Expect::ToolError(expected) => {
                assert_eq!(result["isError"], true, "{context}: {answer}");
                assert_eq!(first_text, Some(expected.as_str()), "{context}: {answer}");
                assert_eq!(toolgate_code, None, "{context}: {answer}");
            }
            Expect::Code(code) => {
                assert_eq!(result["isError"], true, "{context}: {answer}");
                assert_eq!(toolgate_code, Some(*code), "{context}: {answer}");
            }
            Expect::Rpc(code) => {
                assert_eq!(answer["error"]["code"], *code, "{context}: {answer}");
                assert!(answer.get("result").is_none(), "{context}: {answer}");
            }
            Expect::Empty => assert_eq!(answer["result"], json!({}), "{context}: {answer}"),
            Expect::Tools(name) => {
                let tools = result["tools"].as_array().expect("a tools array");
                assert!(
                    tools.iter().any(|tool| tool["name"] == *name),
                    "{context}: {name} is listed: {answer}"
                );
            }
        }
    }
    for case in cases {
        for id in &case.silent {
            let answered = transcript
                .lines
                .iter()
                .map(|(_, line)| line)
                .chain(&transcript.tail)
                .find(|line| is_answer_to(&parse(label, line), Some(id)));
            assert!(
                answered.is_none(),
                "{label}, {era:?}, case {:?}: the cancelled request {id} was answered: {}",
                case.name,
                shown(answered.unwrap())
            );
        }
    }
    assert!(
        transcript.tail.is_empty(),
        "{label}, {era:?}: lines after stdin closed: {:?}",
        transcript.tail.iter().map(|l| shown(l)).collect::<Vec<_>>()
    );
}

/// Asserts that the two transcripts are the same bytes; shows the first difference.
pub(crate) fn assert_same_bytes(era: Era, cases: &[Case], typed: &Transcript, fast: &Transcript) {
    let all = |t: &Transcript| -> Vec<(String, Vec<u8>)> {
        t.lines
            .iter()
            .map(|(case, line)| (cases[*case].name.to_owned(), line.clone()))
            .chain(
                t.tail
                    .iter()
                    .map(|line| ("(after stdin closed)".to_owned(), line.clone())),
            )
            .collect()
    };
    let (typed, fast) = (all(typed), all(fast));
    for (index, ((case, want), (_, got))) in typed.iter().zip(&fast).enumerate() {
        if want == got {
            continue;
        }
        let at = want.iter().zip(got).take_while(|(a, b)| a == b).count();
        let from = at.saturating_sub(120);
        panic!(
            "{era:?}: line {index} (case {case:?}) differs from byte {at} on \
             ({} and {} bytes long)\n typed path: …{}\n fast path:  …{}",
            want.len(),
            got.len(),
            shown(&want[from..(at + 240).min(want.len())]),
            shown(&got[from.min(got.len())..(at + 240).min(got.len())]),
        );
    }
    let extra = |lines: &[(String, Vec<u8>)]| {
        lines
            .iter()
            .map(|(case, line)| format!("  [{case}] {}", shown(line)))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert!(
        typed.len() == fast.len(),
        "{era:?}: the typed path wrote {} lines, the fast path {}; the extra ones:\n{}",
        typed.len(),
        fast.len(),
        if typed.len() > fast.len() {
            extra(&typed[fast.len()..])
        } else {
            extra(&fast[typed.len()..])
        }
    );
}
