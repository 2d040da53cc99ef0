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
