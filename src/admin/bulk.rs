//! Bulk actions on the dead letters a filter selects (`POST /v1/dead-letters/replay`, `/skip`)
//! and the export of every letter a filter selects, as JSON Lines (`GET
//! /v1/dead-letters/export`).
//!
//! A bulk action acts on open letters only, at most `limit` of them (default and maximum
//! 10,000), each audited; a filter that selects everything needs `"all": true`, so that no
//! one replays everything by accident.

use super::AdminState;
use super::action::{ActionBody, Actor};
use super::auth::Writer;
use super::body::JsonBody;
use super::dead_letters::{FilterQuery, ListQuery, blocking, desk, number, page_size};
use super::error::ApiError;
use crate::json::letter_fields;
use axum::Json;
use axum::body::Body;
use axum::extract::{Query, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use rebound_runtime::store::{
    DeadLetterFilter, DeadLetterId, DeadLetterStatus, MAX_PAGE, MessageId, Store, StoreError,
};
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Arc;

/// The most letters one bulk action takes.
pub const MAX_BULK: usize = 10_000;

/// The body of a bulk replay or skip.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BulkBody {
    /// Which letters (the filters of `GET /v1/dead-letters`); only open ones are acted on.
    #[serde(default)]
    pub filter: FilterQuery,
    /// Who acts.
    pub operator: Option<String>,
    /// Why.
    pub reason: Option<String>,
    /// At most this many (default and maximum [`MAX_BULK`]).
    pub limit: Option<usize>,
    /// Required (`true`) when the filter is empty.
    #[serde(default)]
    pub all: bool,
}

/// What a bulk action does to one letter.
#[derive(Clone, Copy)]
enum Bulk {
    Replay,
    Skip,
}

/// `POST /v1/dead-letters/replay`: `{"replayed": N, "ids": [..]}`.
pub async fn replay(
    w: Writer,
    State(state): State<AdminState>,
    JsonBody(body): JsonBody<BulkBody>,
) -> Result<Json<Value>, ApiError> {
    bulk(w, state, body, Bulk::Replay).await
}

/// `POST /v1/dead-letters/skip`: `{"skipped": N, "ids": [..]}`.
pub async fn skip(
    w: Writer,
    State(state): State<AdminState>,
    JsonBody(body): JsonBody<BulkBody>,
) -> Result<Json<Value>, ApiError> {
    bulk(w, state, body, Bulk::Skip).await
}

async fn bulk(
    _: Writer,
    state: AdminState,
    body: BulkBody,
    what: Bulk,
) -> Result<Json<Value>, ApiError> {
    let by = Actor::of(ActionBody {
        operator: body.operator,
        reason: body.reason,
    })?;
    if body.filter.is_empty() && !body.all {
        return Err(ApiError::bad_request(
            "the filter is empty, so this would act on every open dead letter: \
             give a filter, or say \"all\": true",
        ));
    }
    let limit = body.limit.unwrap_or(MAX_BULK);
    if !(1..=MAX_BULK).contains(&limit) {
        return Err(ApiError::bad_request(format!(
            "limit must be between 1 and {MAX_BULK}"
        )));
    }
    if body
        .filter
        .status
        .as_deref()
        .is_some_and(|s| s != DeadLetterStatus::Dead.as_str())
    {
        return Err(ApiError::bad_request(
            "a bulk action takes open letters only: leave out status, or say status=dead",
        ));
    }
    let desk = desk(&state)?;
    let mut filter = body.filter.to_filter(&state, desk.as_ref())?;
    filter.status = Some(DeadLetterStatus::Dead);
    desk.settle().await;
    let (key, ids) = blocking(move || {
        let ids = open_ids(desk.store().as_ref(), filter, limit)?;
        let done: Vec<MessageId> = match what {
            Bulk::Replay => acted(&ids, desk.replay(&ids, &by)?),
            Bulk::Skip => acted(&ids, desk.skip(&ids, &by)?),
        };
        let key = match what {
            Bulk::Replay => "replayed",
            Bulk::Skip => "skipped",
        };
        Ok((key, done))
    })
    .await?;
    let ids: Vec<&str> = ids.iter().map(MessageId::as_str).collect();
    Ok(Json(json!({ key: ids.len(), "ids": ids })))
}

/// The message ids of up to `limit` letters `filter` selects, newest first.
fn open_ids(
    store: &dyn Store,
    mut filter: DeadLetterFilter,
    limit: usize,
) -> Result<Vec<MessageId>, StoreError> {
    let mut ids = Vec::new();
    while ids.len() < limit {
        filter.limit = (limit - ids.len()).min(MAX_PAGE);
        let page = store.dead_letters(&filter)?;
        ids.extend(page.items.iter().map(|d| d.letter.message.id.clone()));
        match page.next {
            Some(next) => filter.before = Some(next),
            None => break,
        }
    }
    Ok(ids)
}

/// The ids whose action went through (a letter handled meanwhile by someone else is left out).
fn acted<T>(ids: &[MessageId], each: Vec<Result<T, StoreError>>) -> Vec<MessageId> {
    ids.iter()
        .zip(each)
        .filter_map(|(id, r)| match r {
            Ok(_) => Some(id.clone()),
            Err(e) => {
                tracing::info!(id = %id, error = %e, "bulk action: letter left as it is");
                None
            }
        })
        .collect()
}

/// `GET /v1/dead-letters/export?…filters…`: every matching letter, payload included (base64),
/// one JSON document per line, streamed a page at a time.
pub async fn export(
    State(state): State<AdminState>,
    query: Result<Query<ListQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, ApiError> {
    let Query(q) = query.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let desk = desk(&state)?;
    let mut filter = q.filter.to_filter(&state, desk.as_ref())?;
    filter.limit = page_size(q.limit.as_deref(), MAX_PAGE)?;
    filter.before = number::<i64>("before", q.before.as_deref())?.map(DeadLetterId);
    desk.settle().await;
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Vec<u8>, std::io::Error>>(4);
    let store = desk.store();
    tokio::task::spawn_blocking(move || stream_letters(store, filter, tx));
    let body = Body::from_stream(tokio_stream_of(rx));
    Ok(([(header::CONTENT_TYPE, "application/x-ndjson")], body).into_response())
}

/// Pages through the letters `filter` selects, each page as JSON Lines into `tx`, until the
/// last page or the client goes away.
fn stream_letters(
    store: Arc<dyn Store>,
    mut filter: DeadLetterFilter,
    tx: tokio::sync::mpsc::Sender<Result<Vec<u8>, std::io::Error>>,
) {
    loop {
        let page = match store.dead_letters(&filter) {
            Ok(page) => page,
            Err(e) => {
                // The client sees the stream cut short, and the log says why.
                tracing::warn!(error = %e, "exporting dead letters failed");
                let _ = tx.blocking_send(Err(std::io::Error::other(e.to_string())));
                return;
            }
        };
        let mut chunk = Vec::new();
        for d in &page.items {
            let mut o = letter_fields(&d.letter, false);
            o.insert("seq".into(), d.id.0.into());
            o.insert("status".into(), d.status.as_str().into());
            o.insert(
                "payload".into(),
                base64::engine::general_purpose::STANDARD
                    .encode(&d.letter.message.payload)
                    .into(),
            );
            if serde_json::to_writer(&mut chunk, &Value::Object(o)).is_err() {
                return;
            }
            chunk.push(b'\n');
        }
        if !chunk.is_empty() && tx.blocking_send(Ok(chunk)).is_err() {
            return; // the client went away
        }
        match page.next {
            Some(next) => filter.before = Some(next),
            None => return,
        }
    }
}

/// The receiver as a stream of body chunks.
fn tokio_stream_of(
    mut rx: tokio::sync::mpsc::Receiver<Result<Vec<u8>, std::io::Error>>,
) -> impl futures_util::Stream<Item = Result<Vec<u8>, std::io::Error>> {
    futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx))
}
