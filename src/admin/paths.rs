//! The retry paths of the set in force: `GET /v1/paths` answers with the JSON of
//! `rebound paths --json`, `GET /v1/paths/{rule}.svg` with the rule's chart (the engine's
//! [`RetryPath::to_svg`](rebound_engine::paths::RetryPath::to_svg), the same as `paths
//! --svg` writes), `defaults.svg` with the defaults'. Reads: no token.

use super::AdminState;
use super::error::ApiError;
use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use rebound_engine::paths::{PathTable, retry_paths};

/// `GET /v1/paths`: every rule's retry path, then the defaults', as `paths --json` prints
/// them.
pub async fn list(State(state): State<AdminState>) -> Json<PathTable> {
    Json(retry_paths(&state.reloader.handle().current()))
}

/// `GET /v1/paths/{rule}.svg`: one path's chart, `image/svg+xml`; 404 for a rule the set in
/// force does not have, or a name without `.svg`.
pub async fn chart(
    State(state): State<AdminState>,
    Path(file): Path<String>,
) -> Result<Response, ApiError> {
    let Some(rule) = file.strip_suffix(".svg") else {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            format!("no chart '{file}': charts are /v1/paths/RULE_ID.svg"),
        ));
    };
    let set = state.reloader.handle().current();
    let table = retry_paths(&set);
    let Some(path) = table.paths.iter().find(|p| p.rule == rule) else {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            format!(
                "no rule '{rule}' in the rule set in force (version {})",
                table.version
            ),
        ));
    };
    Ok((
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("image/svg+xml"),
            ),
            // Opened on its own, the chart may run nothing and load nothing (it needs
            // neither); embedded as an image, the page's policy applies instead.
            (
                header::CONTENT_SECURITY_POLICY,
                HeaderValue::from_static("default-src 'none'"),
            ),
            (
                header::X_CONTENT_TYPE_OPTIONS,
                HeaderValue::from_static("nosniff"),
            ),
        ],
        path.to_svg(),
    )
        .into_response())
}
