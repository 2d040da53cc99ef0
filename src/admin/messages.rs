//! `GET /v1/messages/{id}`: everything known of one message: where it stands, its failures,
//! its scheduled retry, its dead letters and its audit lines.

use super::AdminState;
use super::dead_letters::{blocking, desk};
use super::error::ApiError;
use super::json::{audit_json, failures_json, letter_json, rfc3339};
use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use rebound_runtime::store::{AuditFilter, DeadLetterFilter, Fate, MAX_PAGE, MessageId};
use rebound_runtime::time::Timestamp;
use serde_json::{Value, json};

/// `GET /v1/messages/{id}`. A message the store knows nothing of is 404 (`"state":
/// "unknown"`).
pub async fn get(
    State(state): State<AdminState>,
    Path(id): Path<String>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let desk = desk(&state)?;
    desk.settle().await;
    let store = desk.store();
    let message = MessageId::from(id.as_str());
    let (fate, retry, letters, audit) = blocking(move || {
        let ids = std::slice::from_ref(&message);
        let fate = store.known_fates(ids)?.pop().map(|(_, f)| f);
        let retry = store.retries(ids)?.pop();
        let letters = store.dead_letters(&DeadLetterFilter {
            message_id: Some(message.clone()),
            limit: MAX_PAGE,
            ..DeadLetterFilter::default()
        })?;
        let audit = store.audit_log(&AuditFilter {
            message_id: Some(message.clone()),
            limit: MAX_PAGE,
            ..AuditFilter::default()
        })?;
        Ok((fate, retry, letters.items, audit.items))
    })
    .await?;
    let latest = letters.first();
    // A retry row is the latest word: a replayed message has one, and its old fate is gone.
    let state_name = match (&retry, fate) {
        (Some(r), _) if r.due > Timestamp::now() => "scheduled",
        (Some(_), _) => "pending",
        (None, Some(Fate::Acked)) => "acked",
        (None, Some(Fate::DeadLettered)) => "dead_lettered",
        (None, None) => "unknown",
    };
    let (biz, attempts, failures) = match (&retry, latest) {
        (Some(r), _) => (
            Some(r.message.biz.to_string()),
            r.message.retry.attempt,
            failures_json(&r.message.retry.failures),
        ),
        (None, Some(d)) => (
            Some(d.letter.message.biz.to_string()),
            d.letter.message.retry.attempt,
            failures_json(&d.letter.failures()),
        ),
        (None, None) => (None, 0, json!([])),
    };
    let scheduled = retry.as_ref().map(|r| {
        json!({
            "due": rfc3339(r.due),
            "due_ms": r.due.as_millis(),
            "attempt": r.message.retry.attempt,
            "rule": r.message.retry.last_failure().map(|l| l.rule.as_str()),
        })
    });
    let unknown = state_name == "unknown" && letters.is_empty() && audit.is_empty();
    let status = if unknown {
        StatusCode::NOT_FOUND
    } else {
        StatusCode::OK
    };
    Ok((
        status,
        Json(json!({
            "id": id,
            "biz": biz,
            "state": state_name,
            "attempts": attempts,
            "failures": failures,
            "scheduled": scheduled,
            "dead_letters": letters.iter().map(letter_json).collect::<Vec<_>>(),
            "audit": audit.iter().map(audit_json).collect::<Vec<_>>(),
        })),
    ))
}
