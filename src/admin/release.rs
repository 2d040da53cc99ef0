//! The release routes (`docs/spec/release.md`, "Shadow" and "Canary"): install, read and
//! remove a shadow set; start, read and abort a canary. Writes need the token, as a push.
//!
//! A canary's body is checked field by field before anything else, each bad field a 400
//! naming it: `percent` (0 < p ≤ 100), `biz` (a non-empty list of non-empty strings; absent
//! for every biz), `promote_after` (a duration; `30m` when absent), `guard` (`+N%` bounds
//! and `min_samples` ≥ 1; the engine's defaults `+20%`, `+10%`, 500 for what it leaves out).
//! Then a running canary is a 409, and the files are validated as a push's (422 with the
//! errors).

use super::AdminState;
use super::auth::Writer;
use super::body::{JsonBody, OptionalJsonBody};
use super::error::ApiError;
use crate::release::{CanaryRequest, ReleaseDesk, StartError, json};
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use rebound_engine::duration::parse_duration;
use rebound_engine::release::{Guard, Slice};
use rebound_engine::reload::{Actor, PushError};
use serde::Deserialize;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// `promote_after` when a canary's body leaves it out.
pub const DEFAULT_PROMOTE_AFTER: Duration = Duration::from_secs(30 * 60);

/// The body of `PUT /v1/rules/shadow`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShadowBody {
    /// File name → content.
    pub files: BTreeMap<String, String>,
}

/// The body of `PUT /v1/rules/canary`. Fields other than `files` are read by hand, so that
/// each bad one gets a message naming it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CanaryBody {
    /// File name → content.
    pub files: BTreeMap<String, String>,
    /// The share of ordering keys in the canary, 0 < p ≤ 100.
    #[serde(default)]
    pub percent: Option<Value>,
    /// The biz types it takes (all when absent).
    #[serde(default)]
    pub biz: Option<Value>,
    /// How long it runs before it may be promoted.
    #[serde(default)]
    pub promote_after: Option<Value>,
    /// Its guard.
    #[serde(default)]
    pub guard: Option<GuardBody>,
}

/// The `guard` of a canary's body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GuardBody {
    /// `+N%`.
    #[serde(default)]
    pub retry_ratio: Option<Value>,
    /// `+N%`.
    #[serde(default)]
    pub dead_letter_ratio: Option<Value>,
    /// First deliveries per arm before they are compared.
    #[serde(default)]
    pub min_samples: Option<Value>,
}

/// The optional body of `DELETE /v1/rules/canary`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AbortBody {
    /// Who aborts.
    pub operator: Option<String>,
    /// Why.
    pub reason: Option<String>,
}

fn desk(state: &AdminState) -> Arc<ReleaseDesk> {
    Arc::clone(&state.desks)
}

/// `PUT /v1/rules/shadow`: validates the files as a push would (422 with the errors) and
/// installs them as the shadow, replacing any; `{"version"}`.
pub async fn put_shadow(
    _: Writer,
    State(state): State<AdminState>,
    JsonBody(body): JsonBody<ShadowBody>,
) -> Result<Json<Value>, ApiError> {
    let desk = desk(&state);
    let reloader = state.reloader.clone();
    let version = blocking(move || {
        let set = reloader
            .compile_candidate(body.files)
            .map_err(super::rules::push_error)?;
        let version = set.version().to_string();
        desk.shadow.install(Arc::new(set));
        tracing::info!(%version, "shadow set installed");
        Ok::<_, ApiError>(version)
    })
    .await??;
    Ok(Json(json!({ "version": version })))
}

fn no_shadow() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "no shadow set is installed")
}

/// `GET /v1/rules/shadow`: the shadow's report; 404 when none is installed.
pub async fn get_shadow(State(state): State<AdminState>) -> Result<Json<Value>, ApiError> {
    let report = desk(&state).shadow.report().ok_or_else(no_shadow)?;
    Ok(Json(json::shadow(&report)))
}

/// `DELETE /v1/rules/shadow`: removes the shadow and answers its last report; 404 when none
/// is installed.
pub async fn delete_shadow(
    _: Writer,
    State(state): State<AdminState>,
) -> Result<Json<Value>, ApiError> {
    let desk = desk(&state);
    let report = desk.shadow.report();
    if !desk.shadow.remove() {
        return Err(no_shadow());
    }
    let body = report.map_or(json!({}), |r| json::shadow(&r));
    tracing::info!(version = %body["version"], "shadow set removed");
    Ok(Json(body))
}

/// `PUT /v1/rules/canary`: starts a canary; the state as `GET` shows it. 400 for a bad field,
/// 409 while another runs, 422 for files a push would refuse.
pub async fn put_canary(
    _: Writer,
    State(state): State<AdminState>,
    JsonBody(body): JsonBody<CanaryBody>,
) -> Result<Json<Value>, ApiError> {
    let desk = desk(&state);
    let request = canary_request(body)?;
    let view = blocking(move || desk.canary.start(request))
        .await?
        .map_err(|e| match e {
            StartError::Running(_) => ApiError::new(StatusCode::CONFLICT, e.to_string()),
            StartError::Refused(e) => super::rules::push_error(e),
        })?;
    Ok(Json(json::canary(&view)))
}

/// `GET /v1/rules/canary`: the running canary with its arms, or how the last one ended
/// (`promoted`, `rolled_back`, with its final arms and `reason`); 404 before the first.
pub async fn get_canary(State(state): State<AdminState>) -> Result<Json<Value>, ApiError> {
    let view = desk(&state)
        .canary
        .view()
        .ok_or_else(|| ApiError::new(StatusCode::NOT_FOUND, "no canary has run in this process"))?;
    Ok(Json(json::canary(&view)))
}

/// `DELETE /v1/rules/canary`: an operator's abort, recorded in the rule history as
/// `rolled_back` with the operator and reason (`operator` and `aborted by an operator` when
/// the body does not say); answers the canary's final state. 404 when none is running.
pub async fn delete_canary(
    _: Writer,
    State(state): State<AdminState>,
    OptionalJsonBody(body): OptionalJsonBody<AbortBody>,
) -> Result<Json<Value>, ApiError> {
    let desk = desk(&state);
    let body = body.unwrap_or_default();
    let by = abort_actor(body.operator, body.reason, "aborted by an operator")?;
    let view = blocking(move || desk.canary.abort(by))
        .await?
        .ok_or_else(|| ApiError::new(StatusCode::NOT_FOUND, "no canary is running"))?;
    Ok(Json(json::canary(&view)))
}

/// Before a push or a rollback: a running canary refuses it (409, `a canary is running`)
/// unless `abort` (the body's `"abort_canary": true`); then the canary is aborted and
/// recorded, by `operator` when given, with `reason`. Blocking.
pub fn clear_for(
    state: &AdminState,
    abort: bool,
    operator: Option<String>,
    reason: &str,
) -> Result<(), ApiError> {
    let desk = &state.desks;
    if !desk.canary.is_running() {
        return Ok(());
    }
    if !abort {
        return Err(ApiError::new(StatusCode::CONFLICT, "a canary is running"));
    }
    let by = abort_actor(operator, Some(reason.to_owned()), reason)?;
    desk.canary.abort(by);
    Ok(())
}

/// Who aborts, and why: the operator (`operator` when not said) and the reason (`default`).
fn abort_actor(
    operator: Option<String>,
    reason: Option<String>,
    default: &str,
) -> Result<Actor, ApiError> {
    let blank = |name: &str| ApiError::bad_request(format!("'{name}' must not be blank"));
    let operator = match operator {
        Some(o) if o.trim().is_empty() => return Err(blank("operator")),
        Some(o) => o,
        None => "operator".to_owned(),
    };
    let reason = match reason {
        Some(r) if r.trim().is_empty() => return Err(blank("reason")),
        Some(r) => r,
        None => default.to_owned(),
    };
    Ok(Actor { operator, reason })
}

/// A canary's body, checked field by field.
fn canary_request(body: CanaryBody) -> Result<CanaryRequest, ApiError> {
    let bad = |field: &str, expected: &str, got: &Value| {
        ApiError::bad_request(format!("'{field}' must be {expected}, not {got}"))
    };
    let percent = match &body.percent {
        None => {
            return Err(ApiError::bad_request(
                "'percent' is required: the share of ordering keys in the canary, 0 < percent ≤ 100",
            ));
        }
        Some(v) => match v.as_f64() {
            Some(p) if p > 0.0 && p <= 100.0 => p,
            _ => return Err(bad("percent", "a number with 0 < percent ≤ 100", v)),
        },
    };
    let biz = match &body.biz {
        None | Some(Value::Null) => Vec::new(),
        Some(v @ Value::Array(items)) => {
            let names: Option<Vec<String>> = items
                .iter()
                .map(|i| {
                    i.as_str()
                        .filter(|s| !s.trim().is_empty())
                        .map(str::to_owned)
                })
                .collect();
            match names {
                Some(names) if !names.is_empty() => names,
                _ => {
                    return Err(bad(
                        "biz",
                        "a non-empty list of biz types (leave it out for every biz)",
                        v,
                    ));
                }
            }
        }
        Some(v) => return Err(bad("biz", "a list of biz types such as [\"PAYMENT\"]", v)),
    };
    let promote_after = match &body.promote_after {
        None | Some(Value::Null) => DEFAULT_PROMOTE_AFTER,
        Some(v) => v
            .as_str()
            .and_then(|s| parse_duration(s).ok())
            .ok_or_else(|| bad("promote_after", "a duration such as \"30m\" or \"3s\"", v))?,
    };
    let guard = match body.guard {
        None => Guard::default(),
        Some(g) => {
            let text = |field: &str, v: &Option<Value>| match v {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(s)) => Ok(Some(s.clone())),
                Some(other) => Err(bad(
                    &format!("guard.{field}"),
                    "a bound such as \"+20%\"",
                    other,
                )),
            };
            let retry = text("retry_ratio", &g.retry_ratio)?;
            let dead = text("dead_letter_ratio", &g.dead_letter_ratio)?;
            let min_samples = match &g.min_samples {
                None | Some(Value::Null) => None,
                Some(v) => Some(v.as_u64().ok_or_else(|| {
                    bad("guard.min_samples", "a whole number of first deliveries", v)
                })?),
            };
            Guard::parse(retry.as_deref(), dead.as_deref(), min_samples)
                .map_err(|e| ApiError::bad_request(e.to_string()))?
        }
    };
    if body.files.is_empty() {
        return Err(super::rules::push_error(PushError::Empty));
    }
    Ok(CanaryRequest {
        files: body.files,
        slice: Slice::new(percent, biz),
        guard,
        promote_after,
    })
}

async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| ApiError::internal(format!("the release task failed: {e}")))
}
