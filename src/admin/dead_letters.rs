//! The dead-letter routes: list with filters, and the two operator actions, replay and skip.
//!
//! The routes talk to a [`DeadLetterDesk`]. Over a plain store ([`StoreDesk`]) a replay is
//! written to the store, whose scheduled retry the runtime picks up; a running pipeline
//! provides a desk that also hands the message to its live retry queue at once.

use super::AdminState;
use super::auth::Writer;
use super::body::JsonBody;
use super::error::ApiError;
use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use rebound_runtime::store::{
    self, DeadLetterFilter, DeadLetterId, MAX_PAGE, MessageId, OperatorAction, Page,
    ScheduledRetry, Store, StoreError, StoredDeadLetter,
};
use rebound_runtime::time::Timestamp;
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Arc;

/// What the dead-letter routes need: listing and the operator actions.
pub trait DeadLetterDesk: Send + Sync + std::fmt::Debug {
    /// A page of dead letters, newest first.
    fn list(
        &self,
        filter: &DeadLetterFilter,
    ) -> Result<Page<StoredDeadLetter, DeadLetterId>, StoreError>;
    /// Sends a dead-lettered message back into the topology as a fresh delivery.
    fn replay(
        &self,
        id: &MessageId,
        operator: &str,
        reason: &str,
    ) -> Result<ScheduledRetry, StoreError>;
    /// Marks a dead letter handled without delivering it again.
    fn skip(
        &self,
        id: &MessageId,
        operator: &str,
        reason: &str,
    ) -> Result<StoredDeadLetter, StoreError>;
}

/// A desk over a store alone: a replay is scheduled in the store.
#[derive(Clone)]
pub struct StoreDesk(pub Arc<dyn Store>);

impl std::fmt::Debug for StoreDesk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StoreDesk")
    }
}

impl DeadLetterDesk for StoreDesk {
    fn list(
        &self,
        filter: &DeadLetterFilter,
    ) -> Result<Page<StoredDeadLetter, DeadLetterId>, StoreError> {
        self.0.dead_letters(filter)
    }

    fn replay(
        &self,
        id: &MessageId,
        operator: &str,
        reason: &str,
    ) -> Result<ScheduledRetry, StoreError> {
        let action = OperatorAction::new(id.clone(), operator, reason, Timestamp::now())?;
        store::replay(self.0.as_ref(), action)
    }

    fn skip(
        &self,
        id: &MessageId,
        operator: &str,
        reason: &str,
    ) -> Result<StoredDeadLetter, StoreError> {
        let action = OperatorAction::new(id.clone(), operator, reason, Timestamp::now())?;
        store::skip(self.0.as_ref(), action)
    }
}

/// The query of `GET /v1/dead-letters`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    /// Exact label.
    pub label: Option<String>,
    /// Exact business type.
    pub biz: Option<String>,
    /// Exact last failure code.
    pub code: Option<String>,
    /// Page size (default 100, at most [`MAX_PAGE`]).
    pub limit: Option<usize>,
    /// Paging cursor: the previous page's `next`.
    pub before: Option<u64>,
}

/// The body of replay and skip: both fields are required.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ActionBody {
    /// Who acts.
    pub operator: Option<String>,
    /// Why.
    pub reason: Option<String>,
}

fn desk(state: &AdminState) -> Result<Arc<dyn DeadLetterDesk>, ApiError> {
    state.dead_letters.clone().ok_or_else(|| {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "no store is open in this process, so there are no dead letters to show",
        )
    })
}

fn store_error(e: StoreError) -> ApiError {
    match e {
        StoreError::Blank { .. } => ApiError::bad_request(e.to_string()),
        StoreError::DeadLetterNotFound(_) => ApiError::new(StatusCode::NOT_FOUND, e.to_string()),
        StoreError::AlreadyHandled { .. } => ApiError::new(StatusCode::CONFLICT, e.to_string()),
        other => ApiError::internal(other.to_string()),
    }
}

async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| ApiError::internal(format!("the store task failed: {e}")))?
        .map_err(store_error)
}

/// The JSON of one dead letter: every field the spec lists.
pub fn letter_json(d: &StoredDeadLetter) -> Value {
    let l = &d.letter;
    let m = &l.message;
    json!({
        "id": m.id.as_str(),
        "seq": d.id.0,
        "status": d.status.as_str(),
        "biz": &*m.biz,
        "payload": String::from_utf8_lossy(&m.payload),
        "headers": m.headers.as_map().cloned().unwrap_or_default(),
        "label": l.label.as_str(),
        "reason": l.reason.as_str(),
        "last_code": l.failure.code,
        "last_message": l.failure.message,
        "attempts": m.retry.attempt,
        "first_time_ms": l.first_at().as_millis(),
        "last_time_ms": l.at.as_millis(),
        "rule": l.rule.as_str(),
        "rule_set_version": l.version.as_str(),
    })
}

/// `GET /v1/dead-letters?label=&biz=&code=&limit=&before=`
pub async fn list(
    State(state): State<AdminState>,
    query: Result<Query<ListQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let Query(q) = query.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let limit = q.limit.unwrap_or(100);
    if !(1..=MAX_PAGE).contains(&limit) {
        return Err(ApiError::bad_request(format!(
            "limit must be between 1 and {MAX_PAGE}"
        )));
    }
    let filter = DeadLetterFilter {
        label: q.label,
        biz: q.biz,
        code: q.code,
        before: q
            .before
            .and_then(|b| i64::try_from(b).ok())
            .map(DeadLetterId),
        limit,
        ..DeadLetterFilter::default()
    };
    let desk = desk(&state)?;
    let page = blocking(move || desk.list(&filter)).await?;
    Ok(Json(json!({
        "dead_letters": page.items.iter().map(letter_json).collect::<Vec<_>>(),
        "next": page.next.map(|n| n.0),
    })))
}

fn action(body: ActionBody) -> Result<(String, String), ApiError> {
    let field = |v: Option<String>, name: &str| {
        v.filter(|s| !s.trim().is_empty()).ok_or_else(|| {
            ApiError::bad_request(format!(
                "'{name}' is required: who acts and why are written to the audit log"
            ))
        })
    };
    Ok((
        field(body.operator, "operator")?,
        field(body.reason, "reason")?,
    ))
}

/// `POST /v1/dead-letters/{id}/replay` with `{operator, reason}`.
pub async fn replay(
    _: Writer,
    State(state): State<AdminState>,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<ActionBody>,
) -> Result<Json<Value>, ApiError> {
    let (operator, reason) = action(body)?;
    let desk = desk(&state)?;
    let message = MessageId::from(id.as_str());
    let retry = blocking(move || desk.replay(&message, &operator, &reason)).await?;
    Ok(Json(
        json!({ "id": id, "status": "replayed", "due_ms": retry.due.as_millis() }),
    ))
}

/// `POST /v1/dead-letters/{id}/skip` with `{operator, reason}`.
pub async fn skip(
    _: Writer,
    State(state): State<AdminState>,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<ActionBody>,
) -> Result<Json<Value>, ApiError> {
    let (operator, reason) = action(body)?;
    let desk = desk(&state)?;
    let message = MessageId::from(id);
    let letter = blocking(move || desk.skip(&message, &operator, &reason)).await?;
    Ok(Json(letter_json(&letter)))
}
