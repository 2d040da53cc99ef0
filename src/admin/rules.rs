//! The rules routes: read the set in force, push, dry-run, roll back (one step, or to a chosen
//! version), the history, and the files of each of the last 50 accepted versions.

use super::AdminState;
use super::auth::Writer;
use super::body::{JsonBody, OptionalJsonBody};
use super::error::{ApiError, ErrorJson};
use super::rule_tests;
use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use rebound_engine::Version;
use rebound_engine::reload::{
    Actor, FILES_KEPT, HistoryEntry, IfMatch, PushError, Pushed, RollbackError, Source,
};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::time::SystemTime;

use rebound_runtime::store::StoreError;

/// A version a rollback goes back to, and its files.
pub type RollbackTarget = (Version, BTreeMap<String, String>);

/// The rule history several nodes share (on a shared store): `GET /v1/rules/history` and
/// `POST /v1/rules/rollback` act on it instead of this process's own.
pub trait SharedRules: Send + Sync + std::fmt::Debug {
    /// The accepted sets, newest first (the engine's entries, shown as this process's own
    /// are). Blocking.
    fn history(&self) -> Result<Vec<HistoryEntry>, StoreError>;
    /// The version a rollback goes back to and its files, if there is one. Blocking.
    fn rollback_target(&self) -> Result<Option<RollbackTarget>, StoreError>;
    /// The files of `version`, if it is one of the accepted versions whose files the store
    /// keeps (the last 50). Blocking.
    fn files_at(&self, version: Version) -> Result<Option<BTreeMap<String, String>>, StoreError>;
}

/// The body of `PUT /v1/rules` and `POST /v1/rules/validate`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PushBody {
    /// File name → content.
    pub files: BTreeMap<String, String>,
    /// Push even when the set's rule tests fail (a push runs them first; a validation never
    /// does, so there it changes nothing).
    #[serde(default)]
    pub skip_tests: bool,
    /// Who pushes (optional; with `reason`, kept in the history).
    pub operator: Option<String>,
    /// Why.
    pub reason: Option<String>,
    /// Abort a running canary (recorded as rolled back) and push; without it a push while a
    /// canary runs is a 409.
    #[serde(default)]
    pub abort_canary: bool,
}

/// `GET /v1/rules`: `{"version", "loaded_at", "source", "files": {name: content}}`.
pub async fn get(State(state): State<AdminState>) -> Response {
    let status = state.reloader.status();
    let files: Map<String, Value> = status
        .set
        .files()
        .iter()
        .map(|f| {
            let text = String::from_utf8_lossy(&f.bytes).into_owned();
            (f.name.clone(), Value::String(text))
        })
        .collect();
    let version = status.set.version().to_string();
    let body = json!({
        "version": version,
        "loaded_at": timestamp(status.loaded_at),
        "source": status.source.as_str(),
        "files": files,
    });
    with_etag(&version, Json(body))
}

/// `PUT /v1/rules`: validate, run the set's rule tests (unless `"skip_tests": true`), write
/// into the rules directory, swap. `If-Match` optional. While a canary runs a push is a 409
/// (`a canary is running`) unless it says `"abort_canary": true`: then a push that would be
/// accepted aborts the canary (recorded as rolled back) and goes on.
pub async fn put(
    _: Writer,
    State(state): State<AdminState>,
    headers: HeaderMap,
    JsonBody(body): JsonBody<PushBody>,
) -> Result<Response, ApiError> {
    let if_match = if_match(&headers)?;
    let operator = body.operator.clone();
    let by = actor(body.operator, body.reason)?;
    let reloader = state.reloader.clone();
    let pushed = blocking(move || {
        // A stale push is a 409 whatever its tests say; a push that would be accepted is tested.
        let valid = reloader
            .validate(body.files.clone(), if_match.as_ref())
            .is_ok();
        if !body.skip_tests && valid {
            rule_tests::check(reloader.dir(), &body.files)?;
        }
        // A running canary refuses the push, or (`abort_canary`) is aborted for a push that
        // would be accepted.
        if !valid && body.abort_canary {
            return reloader
                .push_as(body.files, if_match.as_ref(), Source::Push, by)
                .map_err(push_error);
        }
        super::release::clear_for(&state, body.abort_canary, operator, "aborted by a push")?;
        reloader
            .push_as(body.files, if_match.as_ref(), Source::Push, by)
            .map_err(push_error)
    })
    .await??;
    Ok(pushed_response(&pushed))
}

/// `POST /v1/rules/validate`: a dry run of a push; nothing changes. Unauthenticated, so
/// bounded: two at a time, 5 s each ([`VALIDATIONS`](super::limits::VALIDATIONS)).
pub async fn validate(
    State(state): State<AdminState>,
    headers: HeaderMap,
    JsonBody(body): JsonBody<PushBody>,
) -> Result<Response, ApiError> {
    let if_match = if_match(&headers)?;
    let reloader = state.reloader.clone();
    let pushed = super::limits::VALIDATIONS
        .run(move || reloader.validate(body.files, if_match.as_ref()))
        .await?
        .map_err(push_error)?;
    Ok(pushed_response(&pushed))
}

/// `GET /v1/rules/rollback`: `{"version"}`, the version a `POST /v1/rules/rollback` without a
/// body would go back to now (null when there is none), so that a client can name it before
/// it acts. On a shared store it reads the fleet's history, so it is asked for, not polled.
pub async fn rollback_target(State(state): State<AdminState>) -> Result<Json<Value>, ApiError> {
    let version = match state.shared_rules.clone() {
        None => state
            .reloader
            .previous_versions()
            .first()
            .map(|v| v.to_string()),
        Some(shared) => blocking(move || shared.rollback_target())
            .await?
            .map_err(|e| ApiError::new(StatusCode::SERVICE_UNAVAILABLE, e.to_string()))?
            .map(|(version, _)| version.to_string()),
    };
    Ok(Json(json!({ "version": version })))
}

/// `POST /v1/rules/rollback`: back to the previous accepted set (409 when there is none), or
/// with `{"version": V}` back to that accepted version, one of the last 50 (404 for another).
/// While a canary runs it is a 409 (`a canary is running`), as a push is, unless the body says
/// `"abort_canary": true`: then the canary is aborted (recorded as rolled back) first.
///
/// The body is optional; other fields (a note for the log, say) are allowed and ignored.
/// When there is one it must still be JSON, and `version`, when given, a version string.
pub async fn rollback(
    _: Writer,
    State(state): State<AdminState>,
    OptionalJsonBody(body): OptionalJsonBody<Value>,
) -> Result<Response, ApiError> {
    let target = requested_version(body.as_ref())?;
    let text = |name: &str| match body.as_ref().and_then(|b| b.get(name)) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(ApiError::bad_request(format!(
            "the field '{name}' must be a string, not {other}"
        ))),
    };
    let operator = text("operator")?;
    let by = actor(operator.clone(), text("reason")?)?;
    let abort_canary = match body.as_ref().and_then(|b| b.get("abort_canary")) {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "the field 'abort_canary' must be true or false, not {other}"
            )));
        }
    };
    {
        let state = state.clone();
        blocking(move || {
            super::release::clear_for(&state, abort_canary, operator, "aborted by a rollback")
        })
        .await??;
    }
    let reloader = state.reloader.clone();
    if let Some(shared) = state.shared_rules.clone() {
        let version = blocking(move || match target {
            Some(v) => shared_rollback_to(&reloader, shared.as_ref(), v, by),
            None => shared_rollback(&reloader, shared.as_ref(), by),
        })
        .await??;
        return Ok(with_etag(&version, Json(json!({ "version": version }))));
    }
    let version = blocking(move || match target {
        Some(v) => reloader.rollback_to_as(&v, by),
        None => reloader.rollback_as(by),
    })
    .await?
    .map_err(rollback_error)?;
    let version = version.to_string();
    Ok(with_etag(&version, Json(json!({ "version": version }))))
}

/// Who pushes or rolls back, and why: both or neither (the set's history keeps them); a
/// blank one is refused as the dead-letter actions refuse it.
fn actor(operator: Option<String>, reason: Option<String>) -> Result<Option<Actor>, ApiError> {
    // A reason alone (the rollback body has always taken one) is accepted, with no operator to
    // record; an operator must say why.
    if operator.is_none() {
        return Ok(None);
    }
    let field = |v: Option<String>, name: &str| {
        v.filter(|s| !s.trim().is_empty()).ok_or_else(|| {
            ApiError::bad_request(format!(
                "'{name}' is required with the other: who acts and why are kept in the rule history (give both, or neither)"
            ))
        })
    };
    Ok(Some(Actor {
        operator: field(operator, "operator")?,
        reason: field(reason, "reason")?,
    }))
}

/// The `version` of a rollback's body: absent or null for one step back.
fn requested_version(body: Option<&Value>) -> Result<Option<Version>, ApiError> {
    let expected = "a rule-set version string (16 hex digits, as GET /v1/rules/history shows)";
    match body.and_then(|b| b.get("version")) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(v)) => v.parse().map(Some).map_err(|_| {
            ApiError::bad_request(format!("the field 'version' must be {expected}, not {v:?}"))
        }),
        Some(other) => Err(ApiError::bad_request(format!(
            "the field 'version' must be {expected}, not {other}"
        ))),
    }
}

fn rollback_error(e: RollbackError) -> ApiError {
    match e {
        RollbackError::NoPrevious => ApiError::new(StatusCode::CONFLICT, e.to_string()),
        RollbackError::NotKept(_) => ApiError::new(StatusCode::NOT_FOUND, e.to_string()),
        RollbackError::Rejected(rejected) => ApiError::rejected(rejected.errors()),
        RollbackError::Unpublished(_) => {
            ApiError::new(StatusCode::SERVICE_UNAVAILABLE, e.to_string())
        }
        // `Write`, or a kind the engine adds later: the server's fault.
        _ => ApiError::internal(e.to_string()),
    }
}

/// A rollback on a shared store to `version`: its files from the store (the last 50 accepted
/// versions keep theirs), pushed with a compare-and-set on the version in force (source
/// `rollback`). The version in force is a no-op.
fn shared_rollback_to(
    reloader: &rebound_engine::reload::Reloader,
    shared: &dyn SharedRules,
    version: Version,
    by: Option<Actor>,
) -> Result<String, ApiError> {
    let current = *reloader.handle().current().version();
    if version == current {
        return Ok(version.to_string());
    }
    let unavailable = |e: StoreError| ApiError::new(StatusCode::SERVICE_UNAVAILABLE, e.to_string());
    let Some(files) = shared.files_at(version).map_err(unavailable)? else {
        return Err(rollback_error(RollbackError::NotKept(version)));
    };
    let current = IfMatch::OneOf(vec![current.to_string()]);
    let pushed = reloader
        .push_as(files, Some(&current), Source::Rollback, by)
        .map_err(push_error)?;
    Ok(pushed.version.to_string())
}

/// A rollback on a shared store: to the set the shared history says came before, pushed with
/// a compare-and-set on the version in force (source `rollback`).
fn shared_rollback(
    reloader: &rebound_engine::reload::Reloader,
    shared: &dyn SharedRules,
    by: Option<Actor>,
) -> Result<String, ApiError> {
    let unavailable = |e: StoreError| ApiError::new(StatusCode::SERVICE_UNAVAILABLE, e.to_string());
    let Some((_, files)) = shared.rollback_target().map_err(unavailable)? else {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            RollbackError::NoPrevious.to_string(),
        ));
    };
    let current = IfMatch::OneOf(vec![reloader.handle().current().version().to_string()]);
    let pushed = reloader
        .push_as(files, Some(&current), Source::Rollback, by)
        .map_err(push_error)?;
    Ok(pushed.version.to_string())
}

/// `GET /v1/rules/history`: every recorded attempt, newest first (on a shared store, the
/// fleet's accepted sets).
pub async fn history(State(state): State<AdminState>) -> Result<Json<Vec<Value>>, ApiError> {
    match state.shared_rules.clone() {
        None => Ok(Json(
            state.reloader.history().iter().map(history_json).collect(),
        )),
        Some(shared) => blocking(move || shared.history())
            .await?
            .map(|entries| Json(entries.iter().map(history_json).collect()))
            .map_err(|e| ApiError::new(StatusCode::SERVICE_UNAVAILABLE, e.to_string())),
    }
}

/// `GET /v1/rules/history/{version}`: `{"version", "files": {name: content}}` for one of the
/// last 50 accepted versions (this process's, or on a shared store the fleet's); 404 for
/// another.
pub async fn history_files(
    State(state): State<AdminState>,
    Path(version): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let not_kept = || {
        ApiError::new(
            StatusCode::NOT_FOUND,
            format!(
                "no files are kept for version '{version}': only the last {FILES_KEPT} accepted versions keep theirs"
            ),
        )
    };
    let files: Map<String, Value> = match (state.shared_rules.clone(), version.parse()) {
        (_, Err(_)) => return Err(not_kept()),
        (None, Ok(v)) => state
            .reloader
            .history_files(&v)
            .ok_or_else(not_kept)?
            .iter()
            .map(|f| {
                let text = String::from_utf8_lossy(&f.bytes).into_owned();
                (f.name.clone(), Value::String(text))
            })
            .collect(),
        (Some(shared), Ok(v)) => {
            let v: Version = v;
            blocking(move || shared.files_at(v))
                .await?
                .map_err(|e| ApiError::new(StatusCode::SERVICE_UNAVAILABLE, e.to_string()))?
                .ok_or_else(not_kept)?
                .into_iter()
                .map(|(name, text)| (name, Value::String(text)))
                .collect()
        }
    };
    Ok(Json(json!({ "version": version, "files": files })))
}

fn history_json(e: &HistoryEntry) -> Value {
    let mut entry = json!({
        "version": e.version.as_str(),
        "result": e.outcome.as_str(),
        "source": e.source.as_str(),
        "at": timestamp(e.at),
    });
    if !e.errors.is_empty() {
        entry["errors"] = json!(e.errors.iter().map(ErrorJson::from).collect::<Vec<_>>());
    }
    if let Some(by) = &e.by {
        entry["operator"] = json!(by.operator);
        entry["reason"] = json!(by.reason);
    }
    if let Some(arms) = &e.arms {
        entry["arms"] = crate::release::json::arms(arms);
    }
    entry
}

/// The `If-Match` precondition, if any.
fn if_match(headers: &HeaderMap) -> Result<Option<IfMatch>, ApiError> {
    headers
        .get(header::IF_MATCH)
        .map(|v| {
            v.to_str()
                .map(IfMatch::parse)
                .map_err(|_| ApiError::bad_request("the If-Match header is not valid text"))
        })
        .transpose()
}

/// A refused push as the API answers it (400, 409, 422, 503, 500).
pub(super) fn push_error(e: PushError) -> ApiError {
    match &e {
        PushError::BadName(_) | PushError::Empty => ApiError::bad_request(e.to_string()),
        PushError::Conflict { current } => ApiError::with_body(
            StatusCode::CONFLICT,
            json!({ "error": e.to_string(), "version": current.as_str() }),
        ),
        PushError::Rejected(rejected) => ApiError::rejected(rejected.errors()),
        PushError::Unpublished(_) => ApiError::new(StatusCode::SERVICE_UNAVAILABLE, e.to_string()),
        // `Write`, or a kind the engine adds later: the server's fault.
        _ => ApiError::internal(e.to_string()),
    }
}

/// `{"version"}`, with the set's warnings when it has any.
fn pushed_response(pushed: &Pushed) -> Response {
    let version = pushed.version.to_string();
    let mut body = json!({ "version": version });
    if !pushed.warnings.is_empty() {
        body["warnings"] = json!(
            pushed
                .warnings
                .iter()
                .map(ErrorJson::from)
                .collect::<Vec<_>>()
        );
    }
    with_etag(&version, Json(body))
}

/// The version as a strong `ETag`, so that a client can send it back in `If-Match`.
fn with_etag(version: &str, body: impl IntoResponse) -> Response {
    let mut response = body.into_response();
    if let Ok(tag) = HeaderValue::from_str(&format!("\"{version}\"")) {
        response.headers_mut().insert(header::ETAG, tag);
    }
    response
}

/// RFC 3339 in UTC with milliseconds: `2025-01-31T12:00:00.123Z`.
pub fn timestamp(at: SystemTime) -> String {
    humantime::format_rfc3339_millis(at).to_string()
}

/// Runs pipeline work (compiling, writing files) off the async workers.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| ApiError::internal(format!("the reload task failed: {e}")))
}
