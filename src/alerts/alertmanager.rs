//! A dead letter as a Prometheus Alertmanager alert (`POST /api/v2/alerts`, a JSON array):
//! one alert per letter, so that teams route letters through what they already run.
//!
//! - labels: `alertname` (`ReboundDeadLetter`), `label`, `biz`, `code` (the last failure's),
//!   `rule`, and `message_id` (without it, the Alertmanager would take letters with the same
//!   label, biz, code and rule for one alert and show one of them);
//! - annotations: `summary`, `message` (the last failure's message), `last_failure`
//!   (`CODE: message`), `attempts`, `reason`, and with `include_payload` the payload
//!   (`payload_base64`, at most 4 KiB of it, `payload_truncated`);
//! - `startsAt`: when the letter was stored.
//!
//! An Alertmanager resolves an alert with no `endsAt` after its `resolve_timeout` (5 min by
//! default): a letter's alert fires once and fades, as a page should.

use serde_json::{Map, Value, json};

/// The alert name every letter's alert carries.
pub const ALERT_NAME: &str = "ReboundDeadLetter";

/// The alert of one letter (as the alert sink makes it: the letter as `GET /v1/dead-letters`
/// lists it, with `payload_base64` when its receiver asked for the payload).
pub fn alert(letter: &Value) -> Value {
    let text = |key: &str| letter.get(key).and_then(Value::as_str).unwrap_or("");
    let mut labels = Map::new();
    labels.insert("alertname".into(), ALERT_NAME.into());
    for (name, key) in [
        ("label", "label"),
        ("biz", "biz"),
        ("code", "last_code"),
        ("rule", "rule"),
        ("message_id", "id"),
    ] {
        let value = text(key);
        if !value.is_empty() {
            labels.insert(name.into(), value.into());
        }
    }
    let attempts = letter.get("attempts").and_then(Value::as_u64).unwrap_or(0);
    let mut annotations = json!({
        "summary": format!(
            "dead letter {} ({}, label {}): {}",
            text("id"),
            text("biz"),
            text("label"),
            text("last_code")
        ),
        "message": text("last_message"),
        "last_failure": format!("{}: {}", text("last_code"), text("last_message")),
        "attempts": attempts.to_string(),
        "reason": text("reason"),
    });
    if let Some(payload) = letter.get("payload_base64").and_then(Value::as_str) {
        annotations["payload_base64"] = payload.into();
        let truncated = letter.get("payload_truncated") == Some(&Value::Bool(true));
        annotations["payload_truncated"] = truncated.to_string().into();
    }
    let mut alert = json!({ "labels": labels, "annotations": annotations });
    if let Some(ms) = letter.get("last_time_ms").and_then(Value::as_u64) {
        alert["startsAt"] = rfc3339_ms(ms).into();
    }
    alert
}

/// `ms` since the epoch as RFC 3339 (UTC, milliseconds).
fn rfc3339_ms(ms: u64) -> String {
    crate::json::rfc3339(rebound_runtime::time::Timestamp::from_millis(ms))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_letter_is_one_alert_with_its_labels_and_its_failure_in_the_annotations() {
        let letter = json!({
            "id": "order-7", "biz": "PAYMENT", "label": "L3", "last_code": "CARD_DECLINED",
            "last_message": "declined by the issuer", "rule": "card-declined", "attempts": 4,
            "reason": "max_retries", "last_time_ms": 1_700_000_000_123u64,
        });
        let a = alert(&letter);
        assert_eq!(
            a["labels"],
            json!({
                "alertname": "ReboundDeadLetter", "label": "L3", "biz": "PAYMENT",
                "code": "CARD_DECLINED", "rule": "card-declined", "message_id": "order-7",
            })
        );
        assert_eq!(a["annotations"]["message"], "declined by the issuer");
        assert_eq!(
            a["annotations"]["last_failure"],
            "CARD_DECLINED: declined by the issuer"
        );
        assert_eq!(a["annotations"]["attempts"], "4");
        assert!(a["annotations"].get("payload_base64").is_none());
        assert_eq!(a["startsAt"], "2023-11-14T22:13:20.123Z");
        let with = alert(&json!({"id": "x", "payload_base64": "e30=", "payload_truncated": false}));
        assert_eq!(with["annotations"]["payload_base64"], "e30=");
        assert_eq!(with["annotations"]["payload_truncated"], "false");
    }
}
