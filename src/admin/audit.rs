//! `GET /v1/audit`: the audit log, newest first, filtered and paged.

use super::AdminState;
use super::dead_letters::{blocking, desk, number, page_size, time};
use super::error::ApiError;
use crate::json::audit_json;
use axum::Json;
use axum::extract::{Query, State};
use rebound_runtime::store::{AuditAction, AuditFilter, MAX_PAGE, MessageId};
use serde::Deserialize;
use serde_json::{Value, json};

/// The query of `GET /v1/audit`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditQuery {
    /// Only this message.
    pub message: Option<String>,
    /// Only this operator.
    pub operator: Option<String>,
    /// Only this action: `replay`, `skip`, `expire`, `retry_now`, `kill`.
    pub action: Option<String>,
    /// At or after (RFC 3339).
    pub since: Option<String>,
    /// Before (RFC 3339).
    pub until: Option<String>,
    /// Page size (default 100, at most [`MAX_PAGE`]).
    pub limit: Option<String>,
    /// Paging cursor: the previous page's `next`.
    pub before: Option<String>,
}

/// `GET /v1/audit?message=&operator=&action=&since=&until=&limit=&before=`:
/// `{"audit": [..], "next"}`.
pub async fn list(
    State(state): State<AdminState>,
    query: Result<Query<AuditQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let Query(q) = query.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let action = q
        .action
        .as_deref()
        .map(|a| {
            AuditAction::parse(a).ok_or_else(|| {
                ApiError::bad_request(format!(
                    "action must be one of replay, skip, expire, retry_now, kill, not '{a}'"
                ))
            })
        })
        .transpose()?;
    let filter = AuditFilter {
        message_id: q.message.map(MessageId::from),
        operator: q.operator,
        action,
        since: time("since", q.since.as_deref())?,
        until: time("until", q.until.as_deref())?,
        before: number::<i64>("before", q.before.as_deref())?,
        limit: page_size(q.limit.as_deref(), MAX_PAGE)?,
    };
    let desk = desk(&state)?;
    desk.settle().await;
    let store = desk.store();
    let page = blocking(move || store.audit_log(&filter)).await?;
    Ok(Json(json!({
        "audit": page.items.iter().map(audit_json).collect::<Vec<_>>(),
        "next": page.next,
    })))
}
