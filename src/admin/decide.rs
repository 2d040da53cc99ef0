//! `POST /v1/decide`: one decision with the current set, answered with the exact JSON of
//! `rebound decide --json`.

use super::AdminState;
use super::body::JsonBody;
use super::error::ApiError;
use axum::extract::State;
use rebound_engine::wall_time::parse_rfc3339;
use rebound_engine::{Attrs, FailureContext, HeaderMap, SignalView, Signals};
use serde::Deserialize;
use std::time::Duration;

/// A failure to decide. Unknown fields are refused: a misspelt `retry_after` must not be
/// silently ignored.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DecideBody {
    /// Business type of the failed message.
    pub biz: String,
    /// Error code of the failure.
    pub code: String,
    /// The attempt that just failed, 1 for the first delivery.
    pub attempt: u32,
    /// How many times the message has been redriven from a dead-letter label (0 when absent).
    #[serde(default)]
    pub redrives: Option<u32>,
    /// Time since the first delivery began, in ms (0 when absent).
    #[serde(default)]
    pub elapsed_ms: Option<u64>,
    /// A delay the failure asks for, in ms.
    #[serde(default)]
    pub retry_after_ms: Option<u64>,
    /// The delay chosen before the previous attempt, in ms (0 when absent).
    #[serde(default)]
    pub last_delay_ms: Option<u64>,
    /// String attributes of the failure.
    #[serde(default)]
    pub attrs: Option<Attrs>,
    /// Headers of the failed message.
    #[serde(default)]
    pub headers: Option<HeaderMap>,
    /// When the failure happened, as RFC 3339 (default: now).
    #[serde(default)]
    pub now: Option<String>,
    /// Runtime signals.
    #[serde(default)]
    pub signals: Option<Signals>,
    /// Seed for jitter: the same seed gives the same decision as `rebound decide --seed`.
    #[serde(default)]
    pub seed: Option<u64>,
    /// The message's id, as what-if's examples carry it (`POST /v1/rules/whatif`); it names
    /// the message and takes no part in the decision.
    #[serde(default)]
    pub id: Option<String>,
}

/// Decides `body` with the set in force.
pub async fn decide(
    State(state): State<AdminState>,
    JsonBody(body): JsonBody<DecideBody>,
) -> Result<impl axum::response::IntoResponse, ApiError> {
    if body.attempt < 1 {
        return Err(ApiError::bad_request(
            "attempt must be at least 1 (the first delivery is attempt 1)",
        ));
    }
    let now = match &body.now {
        Some(text) => parse_rfc3339(text)
            .map_err(|e| ApiError::bad_request(format!("'now' must be an RFC 3339 time: {e}")))?,
        None => rebound_engine::wall_time::system_now(),
    };
    let attrs = body.attrs.unwrap_or_default();
    let headers = body.headers.unwrap_or_default();
    let signals = body.signals.unwrap_or_default();
    let ctx = FailureContext {
        biz: &body.biz,
        code: &body.code,
        attempt: body.attempt,
        redrives: body.redrives.unwrap_or(0),
        elapsed: Duration::from_millis(body.elapsed_ms.unwrap_or(0)),
        retry_after: body.retry_after_ms.map(Duration::from_millis),
        last_delay: Duration::from_millis(body.last_delay_ms.unwrap_or(0)),
        attrs: &attrs,
        headers: &headers,
        now,
        signals: SignalView::Map(&signals),
    };
    let mut rng = match body.seed {
        Some(seed) => rebound_engine::backoff::jitter_rng(seed),
        None => rebound_engine::backoff::jitter_rng(rand::random()),
    };
    let handle = state.reloader.handle();
    let set = handle.current();
    let decided = handle.decide(&ctx, &mut rng);
    // As `decide --json` prints it: the decision's keys, then what it falls under.
    let keys = crate::falls_under::keys(&set, &ctx);
    Ok((
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        crate::falls_under::with_keys(&decided.report(body.attempt), keys),
    ))
}
