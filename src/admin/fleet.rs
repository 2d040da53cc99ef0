//! The fleet's routes: `GET /readyz` (is the store answering?) and `GET /v1/nodes` (the live
//! nodes of a shared store), over a [`FleetDesk`].

use super::AdminState;
use super::error::ApiError;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use rebound_runtime::store::StoreError;
use rebound_runtime::time::Timestamp;
use rebound_store_redis::NodeReport;
use serde_json::{Value, json};

/// What the fleet's routes need of a node on a shared store.
pub trait FleetDesk: Send + Sync + std::fmt::Debug {
    /// `None` while the store answers; since when it does not, otherwise.
    fn unreachable_since(&self) -> Option<Timestamp>;
    /// The live nodes, as the store knows them. Blocking.
    fn nodes(&self) -> Result<Vec<NodeReport>, StoreError>;
}

/// An RFC 3339 time, in UTC with milliseconds.
pub(super) fn rfc3339(t: Timestamp) -> String {
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_millis(t.as_millis());
    humantime::format_rfc3339_millis(at).to_string()
}

/// `GET /readyz`: 200 `{"store": "ok"}` while the store answers and takes the runtime's
/// writes, else 503 `{"store": "unreachable", "since": …}` (a shared store that does not
/// answer) or, on the embedded store, `{"store": "unwritable", "since": …, "error": …}`
/// (commits refused: a full disk, a read-only file, a database locked by someone else). A broker source that does not
/// answer makes it 503 `{"source": "unreachable", "name": …, "since": …}` (`sources.md`).
pub async fn readyz(State(state): State<AdminState>) -> Response {
    if let Some((name, since)) = state.metrics.sources.unreachable() {
        let body = json!({ "source": "unreachable", "name": name, "since": rfc3339(since) });
        return (StatusCode::SERVICE_UNAVAILABLE, Json(body)).into_response();
    }
    // A shared store is judged by its probe (a store that does not answer also refuses the
    // writes, and says so first as unreachable); the embedded one by the journal's commits.
    if let Some(fleet) = &state.fleet {
        return match fleet.unreachable_since() {
            None => Json(json!({ "store": "ok" })).into_response(),
            Some(since) => (
                StatusCode::SERVICE_UNAVAILABLE,
                Json(json!({ "store": "unreachable", "since": rfc3339(since) })),
            )
                .into_response(),
        };
    }
    match state.dead_letters.as_ref().and_then(|d| d.unwritable()) {
        None => Json(json!({ "store": "ok" })).into_response(),
        Some((since, error)) => (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({ "store": "unwritable", "since": rfc3339(since), "error": error })),
        )
            .into_response(),
    }
}

/// `GET /v1/nodes`: the live nodes of the fleet, each with its own view of the breakers
/// (`breakers`: `{breaker, key, state}`, as its last heartbeat reported them).
pub async fn nodes(State(state): State<AdminState>) -> Result<Json<Value>, ApiError> {
    let Some(fleet) = state.fleet.clone() else {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "this process runs the embedded store (--store sqlite): it has no fleet",
        ));
    };
    let nodes = tokio::task::spawn_blocking(move || fleet.nodes())
        .await
        .map_err(|e| ApiError::internal(e.to_string()))?
        .map_err(|e| ApiError::new(StatusCode::SERVICE_UNAVAILABLE, e.to_string()))?;
    let nodes: Vec<Value> = nodes
        .into_iter()
        .map(|n| {
            let mut v = json!({
                "node": n.node,
                "started_at": rfc3339(n.started_at),
                "last_seen": rfc3339(n.last_seen),
                "rules_version": n.status.rules_version,
                "canary_version": n.status.canary_version,
                "partitions": n.status.partitions,
                "in_flight": n.status.in_flight,
                "retries_claimed": n.status.retries_claimed,
                "breakers": n.status.breakers.iter().map(|b| json!({
                    "breaker": b.breaker,
                    "key": b.key,
                    "state": b.state,
                })).collect::<Vec<_>>(),
            });
            if let Some(errors) = n.status.rules_errors {
                v["rules_errors"] = json!(errors);
            }
            v
        })
        .collect();
    Ok(Json(Value::Array(nodes)))
}
