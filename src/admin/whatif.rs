//! `POST /v1/rules/whatif` (`docs/spec/release.md`, "What-if"): a candidate set, compiled as
//! `POST /v1/rules/validate` compiles it (422 with the same diagnostics when it is rejected),
//! decides every context of the process's decision log again; the answer is the JSON of
//! `rebound whatif --json`, its `version` the set in force. Unauthenticated like validate,
//! so bounded: one at a time ([`WHAT_IFS`](super::limits::WHAT_IFS)), on a blocking thread.

use super::AdminState;
use super::body::JsonBody;
use super::error::ApiError;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use rebound_engine::release::{WhatIf, what_if};
use rebound_runtime::store::DecisionFilter;
use serde::Deserialize;
use std::collections::BTreeMap;

/// The body: the candidate's files, as a push gives them.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WhatIfBody {
    /// File name → content.
    pub files: BTreeMap<String, String>,
}

/// Decides the decision log again with the candidate in `body`.
pub async fn whatif(
    State(state): State<AdminState>,
    JsonBody(body): JsonBody<WhatIfBody>,
) -> Result<Json<WhatIf>, ApiError> {
    let desk = state.dead_letters.clone().ok_or_else(|| {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "no store is open in this process, so there is no decision log to decide again",
        )
    })?;
    // What the runtime still holds back is written first, so the log is complete up to now.
    desk.settle().await;
    let reloader = state.reloader.clone();
    let answer = super::limits::WHAT_IFS
        .run(move || {
            let candidate = reloader
                .compile_candidate(body.files)
                .map_err(super::rules::push_error)?;
            let logged = desk
                .store()
                .decisions(&DecisionFilter {
                    since: None,
                    limit: None,
                })
                .map_err(|e| {
                    ApiError::new(
                        StatusCode::SERVICE_UNAVAILABLE,
                        format!("cannot read the decision log: {e}"),
                    )
                })?;
            let mut answer = what_if(&candidate, &logged);
            answer.version = Some(reloader.handle().current().version().to_string());
            Ok::<WhatIf, ApiError>(answer)
        })
        .await??;
    Ok(Json(answer))
}
