//! The JSON of the release routes (`docs/spec/release.md`): an arm's figures, both arms, a
//! canary's state and a shadow's report. One shape for the admin API and the rule history.

use super::{CanaryView, ShadowReport};
use rebound_engine::release::{ArmFigures, Arms, Verdict};
use serde_json::{Value, json};

/// RFC 3339 in UTC with milliseconds, as every time the admin API shows.
fn timestamp(at: std::time::SystemTime) -> String {
    humantime::format_rfc3339_millis(at).to_string()
}

/// `{"first_deliveries", "retries", "dead_letters", "retry_ratio", "dead_letter_ratio",
/// "success_by_attempt": [acked at attempt 1, at 2, …]}`.
pub fn arm(figures: &ArmFigures) -> Value {
    json!({
        "first_deliveries": figures.first_deliveries,
        "retries": figures.retries,
        "dead_letters": figures.dead_letters,
        "retry_ratio": figures.retry_ratio(),
        "dead_letter_ratio": figures.dead_letter_ratio(),
        "success_by_attempt": figures.acked_by_attempt,
    })
}

/// `{"stable": arm, "canary": arm}`.
pub fn arms(arms: &Arms) -> Value {
    json!({ "stable": arm(&arms.stable), "canary": arm(&arms.canary) })
}

/// `GET /v1/rules/canary`: `{"version", "state", "since", "arms", "reason"?}`, with what was
/// asked beside it (`stable_version`, `percent`, `biz`, `promote_after`, `guard`).
pub fn canary(view: &CanaryView) -> Value {
    let mut body = json!({
        "version": view.version.as_str(),
        "state": view.state.as_str(),
        "since": timestamp(view.since),
        "arms": arms(&view.arms),
        "stable_version": view.stable_version.as_str(),
        "percent": view.slice.percent(),
        "biz": view.slice.biz(),
        "promote_after": rebound_engine::duration::format_duration(view.promote_after),
        "guard": {
            "retry_ratio": view.guard.retry_ratio.to_string(),
            "dead_letter_ratio": view.guard.dead_letter_ratio.to_string(),
            "min_samples": view.guard.min_samples,
        },
    });
    if let Some(reason) = &view.reason {
        body["reason"] = json!(reason);
    }
    body
}

/// `{"rule", "action", "label"}`.
pub fn verdict(v: &Verdict) -> Value {
    json!({ "rule": v.rule, "action": v.action, "label": v.label })
}

/// `GET /v1/rules/shadow`: `{"version", "since", "decisions", "changed", "by": [{"old",
/// "new", "count"}]}`. Every row of the report is changed decisions, the most frequent first
/// (a row whose verdicts are equal is a retry whose delay moved: counted in `changed` too).
pub fn shadow(report: &ShadowReport) -> Value {
    let rows = &report.by;
    json!({
        "version": report.version.as_str(),
        "since": timestamp(report.since),
        "decisions": report.decisions,
        "changed": report.changed,
        "by": rows.iter().map(|r| json!({
            "old": verdict(&r.old),
            "new": verdict(&r.new),
            "count": r.count,
        })).collect::<Vec<_>>(),
    })
}
