//! A decision as JSON: the shape `rebound decide --json` prints and `POST /v1/decide`
//! answers.

use crate::types::{Decided, Decision};
use serde::Serialize;

/// The JSON shape of `rebound decide --json` and `POST /v1/decide`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DecisionReport {
    /// `retry` or `dead_letter`.
    pub action: &'static str,
    /// Delay in whole milliseconds, for a retry.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delay_ms: Option<u64>,
    /// Dead-letter label, for a dead letter.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dead_letter: Option<String>,
    /// `give_up`, `max_retries` or `max_elapsed`, for a dead letter.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<&'static str>,
    /// The deciding rule's id, or `defaults`.
    pub rule: String,
    /// The attempt that failed.
    pub attempt: u32,
    /// The set's version.
    pub version: String,
}

impl Decided {
    /// The JSON report of this decision for a failure at `attempt`.
    pub fn report(&self, attempt: u32) -> DecisionReport {
        let (action, delay_ms, dead_letter, reason) = match &self.decision {
            Decision::Retry { delay, .. } => {
                let ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX);
                ("retry", Some(ms), None, None)
            }
            Decision::DeadLetter { label, reason, .. } => (
                "dead_letter",
                None,
                Some(label.to_string()),
                Some(reason.as_str()),
            ),
        };
        DecisionReport {
            action,
            delay_ms,
            dead_letter,
            reason,
            rule: self.decision.rule().to_string(),
            attempt,
            version: self.version.to_string(),
        }
    }
}
