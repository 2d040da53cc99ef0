//! What a published dead letter carries (`sources.md`, "Dead letters to the broker"): the
//! message's payload as the body (on a Redis stream, the field [`PAYLOAD`]) and the
//! `rebound-*` headers (stream fields) of [`letter_headers`].

use rebound_runtime::store::DeadLetter;

/// The Redis stream field that holds the payload.
pub const PAYLOAD: &str = "payload";

/// The headers (Redis: the fields beside [`PAYLOAD`]) of `letter`, in the spec's order:
/// `rebound-id` (the message id), `rebound-biz`, `rebound-label`, `rebound-reason`,
/// `rebound-rule` (the deciding rule), `rebound-code` (the last failure's),
/// `rebound-first-code` (the first failure's) and `rebound-attempts` (deliveries made).
pub fn letter_headers(letter: &DeadLetter) -> [(&'static str, String); 8] {
    let m = &letter.message;
    let first_code = m
        .retry
        .failures
        .records()
        .first()
        .map_or(letter.failure.code.as_str(), |f| f.code.as_str());
    [
        ("rebound-id", m.id.as_str().to_owned()),
        ("rebound-biz", m.biz.to_string()),
        ("rebound-label", letter.label.as_str().to_owned()),
        ("rebound-reason", letter.reason.as_str().to_owned()),
        ("rebound-rule", letter.rule.as_str().to_owned()),
        ("rebound-code", letter.failure.code.clone()),
        ("rebound-first-code", first_code.to_owned()),
        ("rebound-attempts", m.retry.attempt.to_string()),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use rebound_engine::{GiveUpReason, Label, RuleRef, Version};
    use rebound_runtime::time::Timestamp;
    use rebound_runtime::topology::{Failure, FailureRecord, Message};

    fn letter(failures: &[&str], last: &str) -> DeadLetter {
        let mut message = Message::new("orders/1-0", "PAYMENT", b"{\"n\":1}".to_vec());
        for (i, code) in failures.iter().enumerate() {
            message.retry.failures.push(FailureRecord {
                attempt: i as u32 + 1,
                at: Timestamp::from_millis(1_000 + i as u64),
                code: (*code).to_owned(),
                message: String::new(),
                attrs: Default::default(),
                rule: RuleRef::Rule("processing".into()),
                version: Version::from_hash(7),
                delay: None,
            });
        }
        message.retry.attempt = failures.len() as u32 + 1;
        DeadLetter {
            message,
            failure: Failure::new(last, "declined"),
            label: Label::from("L3"),
            reason: GiveUpReason::GiveUp,
            rule: RuleRef::Rule("declined".into()),
            version: Version::from_hash(7),
            at: Timestamp::from_millis(2_000),
        }
    }

    #[test]
    fn a_letter_s_headers_name_its_first_and_last_codes_and_its_attempts() {
        let headers = letter_headers(&letter(&["PAY_PROCESSING", "PAY_TIMEOUT"], "PAY_FAILED"));
        let expected = [
            ("rebound-id", "orders/1-0"),
            ("rebound-biz", "PAYMENT"),
            ("rebound-label", "L3"),
            ("rebound-reason", GiveUpReason::GiveUp.as_str()),
            ("rebound-rule", "declined"),
            ("rebound-code", "PAY_FAILED"),
            ("rebound-first-code", "PAY_PROCESSING"),
            ("rebound-attempts", "3"),
        ];
        let got: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
        assert_eq!(got, expected);
    }

    #[test]
    fn a_letter_dead_at_its_first_failure_has_that_code_first_and_last() {
        let headers = letter_headers(&letter(&[], "PAY_FAILED"));
        assert_eq!(headers[5], ("rebound-code", "PAY_FAILED".to_owned()));
        assert_eq!(headers[6], ("rebound-first-code", "PAY_FAILED".to_owned()));
        assert_eq!(headers[7], ("rebound-attempts", "1".to_owned()));
    }
}
