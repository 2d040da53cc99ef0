//! Liveness and metrics.

use super::AdminState;
use super::error::ApiError;
use crate::metrics::Metrics;
use crate::metrics::handler::HandlerStats;
use crate::metrics::recent;
use crate::metrics::sources::SourceMetrics;
use axum::Json;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use rebound_runtime::sources::CustodyAt;
use serde_json::{Value, json};
use std::sync::atomic::Ordering::Relaxed;

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
/// (with `?since=MS`, only those after it). A relay adds `sources` (each source's name, lag,
/// unacked, custody by `at`, reachable or since when not) and `handler` (answers by class,
/// latency p50/p99 in ms). With a topology running, `adaptive_scope` says whose budgets and
/// breakers are in force: `fleet` or `node`.
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
    let mut body = json!({
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
    });
    if let Some(scope) = state.metrics.gate.scope() {
        // `fleet` while synced with the shared store, `node` otherwise (operations.md).
        body["adaptive_scope"] = json!(scope.as_str());
    }
    add_relay(&mut body, &state.metrics);
    Ok(Json(body))
}

/// A relay's source and handler (`sources.md`) into the overview's `body`: `sources` and
/// `handler`, each absent when none is attached (`serve`, `run`).
fn add_relay(body: &mut Value, metrics: &Metrics) {
    let sources = sources(&metrics.sources);
    if !sources.is_empty() {
        body["sources"] = Value::Array(sources);
    }
    if let Some(stats) = metrics.handler.stats() {
        body["handler"] = handler(&stats);
    }
}

/// Each attached source: its name, what it read, what the broker holds unacknowledged and has
/// waiting (`lag`), its custody acks by what gave custody, and whether its broker answers.
fn sources(metrics: &SourceMetrics) -> Vec<Value> {
    metrics
        .each()
        .iter()
        .map(|(name, stats)| {
            let custody: serde_json::Map<String, Value> = CustodyAt::ALL
                .iter()
                .map(|at| (at.as_str().to_owned(), stats.custody(*at).into()))
                .collect();
            let since = stats.unreachable_since();
            json!({
                "name": name,
                "received": stats.received.load(Relaxed),
                "redelivered": stats.redelivered.load(Relaxed),
                "unacked": stats.unacked.load(Relaxed),
                "lag": stats.lag.load(Relaxed),
                "custody": custody,
                "reachable": since.is_none(),
                "unreachable_since": since.map(super::fleet::rfc3339),
            })
        })
        .collect()
}

/// The handler's answers by class and its latency's p50 and p99 in milliseconds (from the
/// histogram's buckets; `null` before the first answer).
fn handler(stats: &HandlerStats) -> Value {
    let answers: serde_json::Map<String, Value> = stats
        .by_class()
        .iter()
        .map(|(class, n)| ((*class).to_owned(), (*n).into()))
        .collect();
    let ms = |q| {
        stats
            .latency_quantile(q)
            .map(|d| (d.as_secs_f64() * 1000.0 * 1000.0).round() / 1000.0)
    };
    json!({
        "answers": answers,
        "latency_ms": { "p50": ms(0.5), "p99": ms(0.99) },
    })
}

/// `GET /v1/overview?since=MS`: only the rates that ended after `since` (a refresh sends the
/// last `at_ms` it has).
#[derive(Debug, serde::Deserialize)]
pub struct OverviewQuery {
    since: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use rebound_runtime::sources::SourceStats;
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn the_overview_has_a_relay_s_source_and_handler_only_when_attached() {
        let metrics = Metrics::new();
        let mut body = json!({ "version": "v" });
        add_relay(&mut body, &metrics);
        assert_eq!(
            body,
            json!({ "version": "v" }),
            "nothing attached, nothing added"
        );

        let source = Arc::new(SourceStats::default());
        source.received.store(12, Relaxed);
        source.unacked.store(3, Relaxed);
        source.lag.store(40, Relaxed);
        source.count_custody(CustodyAt::Retained);
        source.count_custody(CustodyAt::Acked);
        source.count_custody(CustodyAt::Acked);
        metrics.sources.attach("<orders>", source.clone());
        let handler = Arc::new(HandlerStats::default());
        handler.answered("2xx", Some(200), Duration::from_micros(500));
        handler.answered("5xx", Some(503), Duration::from_millis(3));
        metrics.handler.attach(handler);
        add_relay(&mut body, &metrics);
        assert_eq!(
            body["sources"],
            json!([{
                "name": "<orders>",
                "received": 12,
                "redelivered": 0,
                "unacked": 3,
                "lag": 40,
                "custody": { "retained": 1, "acked": 2, "dead_lettered": 0 },
                "reachable": true,
                "unreachable_since": null,
            }])
        );
        let answers = &body["handler"]["answers"];
        assert_eq!(
            *answers,
            json!({ "2xx": 1, "4xx": 0, "5xx": 1, "timeout": 0, "unavailable": 0 })
        );
        let p50 = body["handler"]["latency_ms"]["p50"].as_f64().unwrap();
        let p99 = body["handler"]["latency_ms"]["p99"].as_f64().unwrap();
        assert!(p50 > 0.0 && p50 <= 1.0 && p99 > 2.0 && p99 <= 4.0, "{body}");

        source.reachable(false);
        let mut body = json!({});
        add_relay(&mut body, &metrics);
        assert_eq!(body["sources"][0]["reachable"], false);
        let since = body["sources"][0]["unreachable_since"].as_str().unwrap();
        humantime::parse_rfc3339(since).expect("an RFC 3339 time");
    }
}
