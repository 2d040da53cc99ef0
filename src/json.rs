//! The JSON the operator's routes (and the alert webhooks) show: a dead letter, its failures,
//! a scheduled retry, an audit line; times as RFC 3339 in UTC with milliseconds.

use rebound_runtime::fate::DeadLetter;
use rebound_runtime::store::{AuditEntry, ScheduledRetry, StoredDeadLetter};
use rebound_runtime::time::Timestamp;
use rebound_runtime::topology::{FailureRecord, Failures};
use serde_json::{Map, Value, json};

/// `t` as RFC 3339 (`2026-12-01T17:04:45.123Z`).
pub fn rfc3339(t: Timestamp) -> String {
    humantime::format_rfc3339_millis(t.to_system()).to_string()
}

/// One failure: `{"attempt", "at", "code", "message", "attrs", "rule", "delay_ms"?}`.
pub fn failure_json(f: &FailureRecord) -> Value {
    let mut o = Map::new();
    o.insert("attempt".into(), f.attempt.into());
    o.insert("at".into(), rfc3339(f.at).into());
    o.insert("code".into(), f.code.clone().into());
    o.insert("message".into(), f.message.clone().into());
    o.insert("attrs".into(), json!(f.attrs));
    o.insert("rule".into(), f.rule.as_str().into());
    if let Some(d) = f.delay {
        o.insert(
            "delay_ms".into(),
            u64::try_from(d.as_millis()).unwrap_or(u64::MAX).into(),
        );
    }
    Value::Object(o)
}

/// Every failure of `failures`, oldest first.
pub fn failures_json(failures: &Failures) -> Value {
    failures.records().iter().map(failure_json).collect()
}

/// A dead letter's fields but its row id and status, with its payload (as text) or without.
pub fn letter_fields(l: &DeadLetter, payload: bool) -> Map<String, Value> {
    let m = &l.message;
    let failures = l.failures();
    let mut o = json!({
        "id": m.id.as_str(),
        "biz": &*m.biz,
        "headers": m.headers.as_map().cloned().unwrap_or_default(),
        "label": l.label.as_str(),
        "reason": l.reason.as_str(),
        "last_code": l.failure.code,
        "last_message": l.failure.message,
        "attrs": l.failure.attrs,
        "attempts": m.retry.attempt,
        "first_time_ms": l.first_at().as_millis(),
        "last_time_ms": l.at.as_millis(),
        "rule": l.rule.as_str(),
        "rule_set_version": l.version.as_str(),
        "redrives": m.retry.redrives,
        "failures": failures_json(&failures),
        "failures_dropped": failures.dropped(),
    });
    let o = o.as_object_mut().expect("an object");
    if payload {
        o.insert(
            "payload".into(),
            String::from_utf8_lossy(&m.payload).into_owned().into(),
        );
    }
    std::mem::take(o)
}

/// One dead letter as `GET /v1/dead-letters` lists it: every field the spec lists.
pub fn letter_json(d: &StoredDeadLetter) -> Value {
    stored_letter_json(d, true)
}

/// A stored dead letter as the listing shows it, with its payload or (as alerts send it)
/// without.
pub fn stored_letter_json(d: &StoredDeadLetter, payload: bool) -> Value {
    let mut o = letter_fields(&d.letter, payload);
    o.insert("seq".into(), d.id.0.into());
    o.insert("status".into(), d.status.as_str().into());
    Value::Object(o)
}

/// One scheduled retry as `GET /v1/retries` lists it.
pub fn retry_json(r: &ScheduledRetry) -> Value {
    let m = &r.message;
    let last = m.retry.last_failure();
    json!({
        "id": m.id.as_str(),
        "biz": &*m.biz,
        "due": rfc3339(r.due),
        "due_ms": r.due.as_millis(),
        "attempt": m.retry.attempt,
        "rule": last.map(|l| l.rule.as_str()),
        "last_code": last.map(|l| l.code.as_str()),
    })
}

/// One line of the audit log.
pub fn audit_json(e: &AuditEntry) -> Value {
    json!({
        "seq": e.id,
        "at": rfc3339(e.at),
        "action": e.action.as_str(),
        "message": e.message_id.as_str(),
        "dead_letter": e.dead_letter.map(|d| d.0),
        "operator": e.operator,
        "reason": e.reason,
    })
}
