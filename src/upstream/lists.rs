//! Importing a server's lists (tools, prompts, resources, templates) with what rmcp's types drop: each page is read as JSON (over a stdio server's raw path, or posted beside rmcp's HTTP client on its session) and each item's extra kept ([`crate::registry::extra`]).

use std::{collections::HashSet, future::Future, io::Write as _, sync::Arc};

use rmcp::{model::ErrorData, service::ServiceError};
use serde::{Serialize, de::DeserializeOwned};
use serde_json::{Map, Value};

use super::raw::RawLink;
use crate::registry::extra::{Extras, extra_of};

/// Pages read from one list at most: a server whose cursors never end is cut off here.
const MAX_PAGES: usize = 1_000;

/// Where a server's list pages can be read as JSON.
#[derive(Clone)]
pub(super) enum JsonLists {
    Stdio(Arc<RawLink>),
    Http(Arc<super::http_lists::HttpLists>),
    /// Neither: only rmcp's typed lists, without extras.
    None,
}

/// One imported list: the typed items and the extras of those that have any.
pub(super) struct Listed<T> {
    pub items: Vec<T>,
    pub extras: Extras,
}

/// One kind of list: its method, the result's array and the key each item is known by.
pub(super) struct Kind<T> {
    pub method: &'static str,
    pub field: &'static str,
    pub key: fn(&T) -> &str,
}

pub(super) const TOOLS: Kind<rmcp::model::Tool> = Kind {
    method: "tools/list",
    field: "tools",
    key: |t| &t.name,
};
pub(super) const PROMPTS: Kind<rmcp::model::Prompt> = Kind {
    method: "prompts/list",
    field: "prompts",
    key: |p| &p.name,
};
pub(super) const RESOURCES: Kind<rmcp::model::Resource> = Kind {
    method: "resources/list",
    field: "resources",
    key: |r| &r.uri,
};
pub(super) const TEMPLATES: Kind<rmcp::model::ResourceTemplate> = Kind {
    method: "resources/templates/list",
    field: "resourceTemplates",
    key: |t| &t.uri_template,
};

/// The whole list, read as JSON from `source`; with no JSON source, `typed` (rmcp's
/// `list_all_*`, without extras).
pub(super) async fn list<T, F>(
    server: &crate::config::ServerId,
    kind: &Kind<T>,
    source: &JsonLists,
    typed: F,
) -> Result<Listed<T>, String>
where
    T: DeserializeOwned + Serialize,
    F: Future<Output = Result<Vec<T>, ServiceError>>,
{
    match source {
        JsonLists::None => typed
            .await
            .map(|items| Listed {
                items,
                extras: Extras::new(),
            })
            .map_err(|error| error.to_string()),
        source => match list_json(kind, source).await {
            Ok(listed) => Ok(listed),
            // What rmcp can read is still served, without the fields it drops.
            Err(reason) => {
                tracing::warn!(
                    %server,
                    "{reason}; listing through the MCP client instead, without the fields it does not know"
                );
                typed
                    .await
                    .map(|items| Listed {
                        items,
                        extras: Extras::new(),
                    })
                    .map_err(|error| error.to_string())
            }
        },
    }
}

async fn list_json<T>(kind: &Kind<T>, source: &JsonLists) -> Result<Listed<T>, String>
where
    T: DeserializeOwned + Serialize,
{
    let mut listed = Listed {
        items: Vec::new(),
        extras: Extras::new(),
    };
    let mut cursor: Option<String> = None;
    let mut seen = HashSet::new();
    for _ in 0..MAX_PAGES {
        let mut page = match source {
            JsonLists::Stdio(link) => page(kind.method, cursor.as_deref(), link).await?,
            JsonLists::Http(http) => http.page(kind.method, cursor.as_deref()).await?,
            JsonLists::None => return Err(format!("{}: no JSON source", kind.method)),
        };
        let items = match page.remove(kind.field) {
            Some(Value::Array(items)) => items,
            Some(_) => return Err(format!("{}: `{}` is not an array", kind.method, kind.field)),
            None => {
                return Err(format!(
                    "{}: the result has no `{}`",
                    kind.method, kind.field
                ));
            }
        };
        for (at, item) in items.into_iter().enumerate() {
            let Value::Object(raw) = item else {
                return Err(format!("{}: item {at} is not an object", kind.method));
            };
            let typed: T = serde_json::from_value(Value::Object(raw.clone()))
                .map_err(|error| format!("{}: item {at}: {error}", kind.method))?;
            if let Some(extra) = extra_of(&raw, &typed) {
                listed.extras.insert((kind.key)(&typed).to_owned(), extra);
            }
            listed.items.push(typed);
        }
        match page.remove("nextCursor") {
            Some(Value::String(next)) if !next.is_empty() => {
                if !seen.insert(next.clone()) {
                    return Err(format!("{}: the cursor {next:?} came twice", kind.method));
                }
                cursor = Some(next);
            }
            _ => return Ok(listed),
        }
    }
    Err(format!(
        "{}: more than {MAX_PAGES} pages; the list was not imported",
        kind.method
    ))
}

/// One page's result object, read over the raw path.
async fn page(
    method: &str,
    cursor: Option<&str>,
    link: &RawLink,
) -> Result<Map<String, Value>, String> {
    let closed = || format!("{method}: the connection closed");
    let mut waiting = link.expect(false).ok_or_else(closed)?;
    let id = waiting.id;
    let mut line = Vec::with_capacity(96);
    let _ = write!(
        line,
        r#"{{"jsonrpc":"2.0","id":"tg-{id}","method":"{method}","params":{{"#
    );
    if let Some(cursor) = cursor {
        line.extend_from_slice(br#""cursor":"#);
        serde_json::to_writer(&mut line, cursor).map_err(|e| e.to_string())?;
    }
    line.extend_from_slice(b"}}\n");
    link.send(line, Some(id)).await.map_err(|()| closed())?;
    let answer = waiting.events.answer().await.map_err(|()| closed())?;
    let span = |(start, end): (usize, usize)| answer.line.get(start..end).unwrap_or_default();
    match (answer.result, answer.error) {
        (Some(result), None) => match serde_json::from_slice::<Value>(span(result)) {
            Ok(Value::Object(result)) => Ok(result),
            Ok(_) => Err(format!("{method}: the result is not an object")),
            Err(error) => Err(format!("{method}: unreadable result: {error}")),
        },
        (None, Some(error)) => match serde_json::from_slice::<ErrorData>(span(error)) {
            Ok(error) => Err(format!("{method}: {error}")),
            Err(error) => Err(format!("{method}: unreadable error answer: {error}")),
        },
        _ => Err(format!(
            "{method}: an answer with neither a result nor an error, or both"
        )),
    }
}
