//! The scheduled retries: `GET /v1/retries` (soonest first), and the operator's two actions
//! on one, `POST /v1/retries/{id}/now` and `/kill`.

use super::AdminState;
use super::action::OnOne;
use super::dead_letters::{blocking, desk, page_size};
use super::error::ApiError;
use crate::json::{letter_fields, retry_json, rfc3339};
use axum::Json;
use axum::extract::{Query, State};
use rebound_runtime::fate::{Label, RuleRef};
use rebound_runtime::store::{MAX_PAGE, RetryCursor, RetryFilter};
use serde::Deserialize;
use serde_json::{Value, json};

/// The query of `GET /v1/retries`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetriesQuery {
    /// Exact business type.
    pub biz: Option<String>,
    /// Exact last failure code.
    pub code: Option<String>,
    /// Exact rule that decided the retry.
    pub rule: Option<String>,
    /// Page size (default 100, at most [`MAX_PAGE`]).
    pub limit: Option<String>,
    /// Paging cursor: the previous page's `next`.
    pub after: Option<String>,
}

/// `GET /v1/retries?biz=&code=&rule=&limit=&after=`: `{"retries": [..], "next"}`.
pub async fn list(
    State(state): State<AdminState>,
    query: Result<Query<RetriesQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let Query(q) = query.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let after = q
        .after
        .as_deref()
        .map(|a| {
            a.parse::<RetryCursor>()
                .map_err(|e| ApiError::bad_request(e.to_string()))
        })
        .transpose()?;
    let filter = RetryFilter {
        biz: q.biz,
        code: q.code,
        rule: q.rule,
        after,
        limit: page_size(q.limit.as_deref(), MAX_PAGE)?,
    };
    let desk = desk(&state)?;
    desk.settle().await;
    let store = desk.store();
    let page = blocking(move || store.scheduled_retries(&filter)).await?;
    Ok(Json(json!({
        "retries": page.items.iter().map(retry_json).collect::<Vec<_>>(),
        "next": page.next.map(|n| n.to_string()),
    })))
}

/// `POST /v1/retries/{id}/now` with `{operator, reason}`: delivered now, its attempt kept.
pub async fn now(OnOne { id, by, desk }: OnOne) -> Result<Json<Value>, ApiError> {
    let message = id.clone();
    let retry = blocking(move || desk.retry_now(&message, &by)).await?;
    Ok(Json(json!({
        "id": id.as_str(),
        "due": rfc3339(retry.due),
        "attempt": retry.message.retry.attempt,
    })))
}

/// `POST /v1/retries/{id}/kill` with `{operator, reason}`: dead-lettered now, reason `killed`,
/// with its rule's label in the set in force.
pub async fn kill(
    State(state): State<AdminState>,
    OnOne { id, by, desk }: OnOne,
) -> Result<Json<Value>, ApiError> {
    let set = state.reloader.handle().current();
    let letter = blocking(move || {
        let label_of = |rule: &RuleRef| -> Label {
            match rule {
                RuleRef::Rule(id) => set
                    .rule(*id)
                    .map_or(set.defaults().dead_letter, |r| r.dead_letter()),
                RuleRef::Defaults => set.defaults().dead_letter,
            }
        };
        desk.kill(&id, &by, &label_of)
    })
    .await?;
    let mut o = letter_fields(&letter, false);
    o.insert("status".into(), "dead".into());
    Ok(Json(Value::Object(o)))
}
