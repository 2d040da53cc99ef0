//! The admin API (`docs/spec/runtime.md`, "Admin API"): HTTP and JSON over axum.
//!
//! | route | module |
//! |---|---|
//! | `GET /v1/rules`, `PUT /v1/rules`, `POST /v1/rules/validate`, `GET`, `POST /v1/rules/rollback`, `GET /v1/rules/history`, `GET /v1/rules/history/{version}` | [`rules`]; a push runs the set's rule tests first ([`rule_tests`]) |
//! | `PUT`, `GET`, `DELETE /v1/rules/shadow`, `PUT`, `GET`, `DELETE /v1/rules/canary` | [`release`] |
//! | `POST /v1/rules/whatif` | [`whatif`] |
//! | `POST /v1/decide` | [`decide`] |
//! | `GET /v1/paths`, `GET /v1/paths/{rule}.svg` | [`paths`] |
//! | `GET /v1/dead-letters`, `POST /v1/dead-letters/{id}/replay`, `POST /v1/dead-letters/{id}/skip` | [`dead_letters`] |
//! | `GET /healthz`, `GET /metrics`, `GET /v1/overview` | [`status`] |
//! | `GET /ui/…`: the web console's pages and assets (merged by `app`) | `console` |
//!
//! Writes (`PUT`, and `POST` except `decide`, `validate` and `whatif`) need the bearer token when one
//! is configured ([`auth`]). A request from another origin gets 403 and one for another host
//! 421 ([`edges`]); connections are bounded in number and time ([`connections`]), and the
//! work a request starts in time and concurrency ([`limits`]). Bodies are JSON, at most [`MAX_BODY`] bytes ([`body`]), and
//! every error is JSON too ([`error`]). A body answered before it was read is read to its
//! end before the answer goes out, so the client reads the answer rather than a reset
//! ([`drain`]).

pub mod action;
pub mod audit;
pub mod auth;
pub mod body;
pub mod bulk;
pub mod connections;
pub mod dead_letters;
pub mod decide;
pub mod desks;
pub mod drain;
pub mod edges;
pub mod error;
pub mod fleet;
pub mod limits;
pub mod messages;
pub mod paths;
pub mod release;
pub mod retries;
pub mod rule_tests;
pub mod rules;
pub mod status;
pub mod whatif;

use crate::metrics::Metrics;
use auth::Token;
use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::{Method, StatusCode, Uri};
use axum::routing::{get, post};
use error::ApiError;
use rebound_engine::reload::Reloader;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

/// The largest request body accepted: 4 MiB.
pub const MAX_BODY: usize = 4 * 1024 * 1024;

/// What the handlers share.
#[derive(Clone, Debug)]
pub struct AdminState {
    /// The reload pipeline, and through it the handle that decides.
    pub reloader: Arc<Reloader>,
    /// The metrics registry.
    pub metrics: Arc<Metrics>,
    /// The token writes need, if one is configured.
    pub token: Option<Token>,
    /// The dead letters, when a store is open in this process.
    pub dead_letters: Option<Arc<dyn dead_letters::DeadLetterDesk>>,
    /// On a shared store: the fleet (readiness, the live nodes).
    pub fleet: Option<Arc<dyn fleet::FleetDesk>>,
    /// On a shared store: the fleet's rule history (history and rollback act on it).
    pub shared_rules: Option<Arc<dyn rules::SharedRules>>,
    /// The bounds of the connections.
    pub edges: edges::Edges,
    /// The names a request's `Host` may carry.
    pub names: edges::OwnNames,
    /// The process's release state: a shadow set, a canary, the decision log (release.md).
    pub release: Arc<rebound_runtime::release::Release>,
    /// The shadow and the canary as the admin routes install, judge and end them, over
    /// `release`.
    pub desks: Arc<crate::release::ReleaseDesk>,
}

/// The admin API's routes, with `more` (the console's) merged under the same edges: the
/// same-origin check, the body limit, the draining of unread bodies.
pub fn router(state: AdminState, more: Router<AdminState>) -> Router {
    Router::new()
        .route("/v1/rules", get(rules::get).put(rules::put))
        .route("/v1/rules/validate", post(rules::validate))
        .route("/v1/rules/whatif", post(whatif::whatif))
        .route(
            "/v1/rules/rollback",
            get(rules::rollback_target).post(rules::rollback),
        )
        .route(
            "/v1/rules/shadow",
            get(release::get_shadow)
                .put(release::put_shadow)
                .delete(release::delete_shadow),
        )
        .route(
            "/v1/rules/canary",
            get(release::get_canary)
                .put(release::put_canary)
                .delete(release::delete_canary),
        )
        .route("/v1/rules/history", get(rules::history))
        .route("/v1/rules/history/{version}", get(rules::history_files))
        .route("/v1/decide", post(decide::decide))
        .route("/v1/paths", get(paths::list))
        .route("/v1/paths/{file}", get(paths::chart))
        .route("/v1/dead-letters", get(dead_letters::list))
        .route("/v1/dead-letters/{id}/replay", post(dead_letters::replay))
        .route("/v1/dead-letters/{id}/skip", post(dead_letters::skip))
        .route("/v1/dead-letters/replay", post(bulk::replay))
        .route("/v1/dead-letters/skip", post(bulk::skip))
        .route("/v1/dead-letters/export", get(bulk::export))
        .route("/v1/messages/{id}", get(messages::get))
        .route("/v1/retries", get(retries::list))
        .route("/v1/retries/{id}/now", post(retries::now))
        .route("/v1/retries/{id}/kill", post(retries::kill))
        .route("/v1/audit", get(audit::list))
        .route("/healthz", get(status::healthz))
        .route("/readyz", get(fleet::readyz))
        .route("/v1/nodes", get(fleet::nodes))
        .route("/metrics", get(status::metrics))
        .route("/v1/overview", get(status::overview))
        .merge(more)
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            edges::same_origin_only,
        ))
        .layer(axum::middleware::from_fn(drain::drain_unread))
        .with_state(state)
}

/// Serves the admin API (and `more`: the console's routes) on `listener` until `shutdown` completes, then
/// finishes the requests in flight. While it serves, the process's recent rates are sampled
/// once a second for `GET /v1/overview`.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: AdminState,
    more: Router<AdminState>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let metrics = Arc::clone(&state.metrics);
    let sampler = tokio::spawn(async move {
        let mut tick = tokio::time::interval(crate::metrics::recent::EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            metrics.sample_recent();
        }
    });
    let edges = state.edges.clone();
    let served =
        connections::serve_connections(listener, router(state, more), edges, shutdown).await;
    sampler.abort();
    served
}

/// Whether the admin API may listen on `addr` without a token: only on loopback.
pub fn is_loopback(addr: &SocketAddr) -> bool {
    addr.ip().is_loopback()
}

async fn not_found(method: Method, uri: Uri) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        format!("no route for {method} {uri}"),
    )
}

async fn method_not_allowed(method: Method, uri: Uri) -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        format!("{method} is not allowed on {}", uri.path()),
    )
}
