//! `GET /v1/messages/{id}`: everything known of one message: where it stands, its payload
//! (bounded), every failure kept, its scheduled retry, its dead letters and its audit lines.
//!
//! A replay or a redrive starts a message afresh (attempt 0, no failures), so its life is in
//! pieces: each dead letter keeps the failures of one cycle, and a retry row those of the cycle
//! under way. The failures shown are all of them, cycle after cycle, oldest first, each with
//! its `cycle` (1 for the first delivery's, one more after each replay or redrive).

use super::AdminState;
use super::dead_letters::{blocking, desk};
use super::error::ApiError;
use crate::json::{audit_json, failure_json, letter_json, rfc3339};
use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use rebound_runtime::store::{AuditFilter, DeadLetterFilter, Fate, MAX_PAGE, MessageId};
use rebound_runtime::time::Timestamp;
use rebound_runtime::topology::Failures;
use serde_json::{Value, json};

/// How many bytes of a payload the route shows (as text, or as hex when it is not UTF-8).
pub const PAYLOAD_SHOWN: usize = 4096;

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
    let message = retry
        .as_ref()
        .map(|r| &r.message)
        .or_else(|| latest.map(|d| &d.letter.message));
    let (biz, attempts, payload) = match message {
        Some(m) => (
            Some(m.biz.to_string()),
            m.retry.attempt,
            payload_json(&m.payload),
        ),
        None => (None, 0, Value::Null),
    };
    // Each letter's cycle, oldest first, then the cycle a retry row holds (never in a letter:
    // a killed retry's row goes when its letter is written).
    let mut cycles: Vec<(Timestamp, Failures)> = letters
        .iter()
        .map(|d| (d.letter.at, d.letter.failures()))
        .collect();
    cycles.sort_by_key(|(at, _)| *at);
    let mut cycles: Vec<Failures> = cycles.into_iter().map(|(_, f)| f).collect();
    if let Some(r) = &retry {
        cycles.push(r.message.retry.failures.clone());
    }
    let failures: Vec<Value> = cycles
        .iter()
        .enumerate()
        .flat_map(|(i, f)| {
            f.records().iter().map(move |r| {
                let mut o = failure_json(r);
                o["cycle"] = json!(i + 1);
                o
            })
        })
        .collect();
    let failures_dropped: u64 = cycles.iter().map(Failures::dropped).sum();
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
            "payload": payload,
            "failures": failures,
            "failures_dropped": failures_dropped,
            "scheduled": scheduled,
            "dead_letters": letters.iter().map(letter_json).collect::<Vec<_>>(),
            "audit": audit.iter().map(audit_json).collect::<Vec<_>>(),
        })),
    ))
}

/// `{"encoding": "text"|"hex", "data", "bytes", "truncated"}`: the first [`PAYLOAD_SHOWN`]
/// bytes, as text when the whole payload is UTF-8 (cut at a character's boundary), else as
/// lowercase hex.
fn payload_json(payload: &[u8]) -> Value {
    let (encoding, data, shown) = match std::str::from_utf8(payload) {
        Ok(text) => {
            let mut cut = text.len().min(PAYLOAD_SHOWN);
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            ("text", text[..cut].to_owned(), cut)
        }
        Err(_) => {
            let shown = &payload[..payload.len().min(PAYLOAD_SHOWN)];
            let hex = shown.iter().map(|b| format!("{b:02x}")).collect();
            ("hex", hex, shown.len())
        }
    };
    json!({
        "encoding": encoding,
        "data": data,
        "bytes": payload.len(),
        "truncated": shown < payload.len(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_payload_is_text_when_it_is_utf8_and_hex_otherwise_both_bounded() {
        assert_eq!(
            payload_json(b"{\"order\": 7}"),
            json!({"encoding": "text", "data": "{\"order\": 7}", "bytes": 12, "truncated": false})
        );
        assert_eq!(
            payload_json(&[0xff, 0x00, 0x7b]),
            json!({"encoding": "hex", "data": "ff007b", "bytes": 3, "truncated": false})
        );
        // A long text is cut at a character's boundary at or before the bound.
        let long = "é".repeat(PAYLOAD_SHOWN);
        let shown = payload_json(long.as_bytes());
        assert_eq!(shown["data"].as_str().unwrap().len(), PAYLOAD_SHOWN);
        assert_eq!(
            (shown["bytes"].as_u64(), shown["truncated"].as_bool()),
            (Some(2 * PAYLOAD_SHOWN as u64), Some(true))
        );
        let odd = format!("a{long}");
        assert_eq!(
            payload_json(odd.as_bytes())["data"].as_str().unwrap().len(),
            PAYLOAD_SHOWN - 1
        );
        let binary = vec![0xfe; PAYLOAD_SHOWN + 1];
        let shown = payload_json(&binary);
        assert_eq!(shown["data"].as_str().unwrap().len(), 2 * PAYLOAD_SHOWN);
        assert_eq!(shown["truncated"], true);
    }
}
