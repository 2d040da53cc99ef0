//! Liveness and metrics.

use super::AdminState;
use super::error::ApiError;
use crate::metrics::recent;
use axum::Json;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// `GET /healthz`: the process is up; also says which version decides.
pub async fn healthz(State(state): State<AdminState>) -> Json<Value> {
    let version = state.reloader.handle().current().version().to_string();
    Json(json!({ "status": "ok", "version": version }))
}

const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";
const OPENMETRICS_TEXT: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// `GET /metrics`: OpenMetrics to a scraper that accepts it, Prometheus text otherwise.
pub async fn metrics(State(state): State<AdminState>, headers: HeaderMap) -> Response {
    let openmetrics = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("application/openmetrics-text"));
    let content_type = if openmetrics {
        OPENMETRICS_TEXT
    } else {
        PROMETHEUS_TEXT
    };
    (
        [(header::CONTENT_TYPE, HeaderValue::from_static(content_type))],
        state.metrics.encode(openmetrics),
    )
        .into_response()
}

/// `GET /v1/overview`: what the console's overview shows from the process itself: the
/// rule-set version, whether it runs on a shared store (so `GET /v1/nodes` has nodes) and
/// whether writes need the token, the counters now, and the last 15 minutes of rates per
/// second, each the mean over the `window_s` seconds up to it (`metrics::recent`), oldest first
/// (with `?since=MS`, only those after it).
pub async fn overview(
    State(state): State<AdminState>,
    query: Result<Query<OverviewQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let Query(q) = query.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let since = match q.since.as_deref() {
        None | Some("") => 0,
        Some(v) => v.parse::<u64>().map_err(|_| {
            ApiError::bad_request(format!(
                "since must be a time in ms since the Unix epoch (a rate's at_ms), not '{v}'"
            ))
        })?,
    };
    let s = state.metrics.runtime.snapshot();
    let version = state.reloader.handle().current().version().to_string();
    Ok(Json(json!({
        "version": version,
        "shared": state.fleet.is_some(),
        "writes_need_token": state.token.is_some(),
        "now": {
            "emitted": s.emitted,
            "new_messages": s.new_messages,
            "acked": s.acked,
            "dead_lettered": s.dead_lettered,
            "retries_fired": s.retries_fired_by_rule.values().sum::<u64>(),
            "pending": s.pending,
            "retry_queue_depth": s.retry_queue_depth,
            "fuse_open": s.fuse_open,
        },
        "interval_s": recent::EVERY.as_secs(),
        "window_s": recent::EVERY.as_secs() * recent::WINDOW as u64,
        "rates": state.metrics.recent.rates_since(since),
    })))
}

/// `GET /v1/overview?since=MS`: only the rates that ended after `since` (a refresh sends the
/// last `at_ms` it has).
#[derive(Debug, serde::Deserialize)]
pub struct OverviewQuery {
    since: Option<String>,
}
