//! Liveness and metrics.

use super::AdminState;
use axum::Json;
use axum::extract::State;
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
/// whether writes need the token, the counters now, and the last 15 minutes of per-second
/// rates (`metrics::recent`), oldest first.
pub async fn overview(State(state): State<AdminState>) -> Json<Value> {
    let s = state.metrics.runtime.snapshot();
    let version = state.reloader.handle().current().version().to_string();
    Json(json!({
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
        "interval_s": crate::metrics::recent::EVERY.as_secs(),
        "rates": state.metrics.recent.rates(),
    }))
}
