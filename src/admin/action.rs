//! What an operator's action on dead letters or scheduled retries carries: who acts and why
//! ([`Actor`], both required: the audit log records them), and what a route that acts on one
//! message takes ([`OnOne`]).

use super::AdminState;
use super::auth::Writer;
use super::body::JsonBody;
use super::dead_letters::{DeadLetterDesk, desk};
use super::error::ApiError;
use axum::extract::{FromRequest, FromRequestParts, Path, Request};
use axum::response::{IntoResponse, Response};
use rebound_runtime::store::MessageId;
use serde::Deserialize;
use std::sync::Arc;

/// Who acts and why, as the audit log records them.
#[derive(Clone, Debug)]
pub struct Actor {
    /// Who acts.
    pub operator: String,
    /// Why.
    pub reason: String,
}

impl Actor {
    /// The operator and reason of an action's body, both required (400 without one).
    pub fn of(body: ActionBody) -> Result<Actor, ApiError> {
        let field = |v: Option<String>, name: &str| {
            v.filter(|s| !s.trim().is_empty()).ok_or_else(|| {
                ApiError::bad_request(format!(
                    "'{name}' is required: who acts and why are written to the audit log"
                ))
            })
        };
        Ok(Actor {
            operator: field(body.operator, "operator")?,
            reason: field(body.reason, "reason")?,
        })
    }
}

/// The body of an action on one message (a bulk action's body has the same two fields):
/// both are required.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ActionBody {
    /// Who acts.
    pub operator: Option<String>,
    /// Why.
    pub reason: Option<String>,
}

/// What a route acting on one message (`POST /v1/dead-letters/{id}/replay`, `/skip`,
/// `/v1/retries/{id}/now`, `/kill`) takes, checked in this order: the writer's right
/// ([`Writer`]), the message id of the path, who acts and why (the JSON body, an
/// [`ActionBody`]), and the desk to act on (503 when no store is open).
pub struct OnOne {
    /// The message the path names.
    pub id: MessageId,
    /// Who acts and why.
    pub by: Actor,
    /// The desk to act on.
    pub desk: Arc<dyn DeadLetterDesk>,
}

impl FromRequest<AdminState> for OnOne {
    type Rejection = Response;

    async fn from_request(req: Request, state: &AdminState) -> Result<Self, Response> {
        let (mut parts, body) = req.into_parts();
        Writer::from_request_parts(&mut parts, state)
            .await
            .map_err(IntoResponse::into_response)?;
        let Path(id) = Path::<String>::from_request_parts(&mut parts, state)
            .await
            .map_err(IntoResponse::into_response)?;
        let JsonBody(body) =
            JsonBody::<ActionBody>::from_request(Request::from_parts(parts, body), state)
                .await
                .map_err(IntoResponse::into_response)?;
        let by = Actor::of(body).map_err(IntoResponse::into_response)?;
        let desk = desk(state).map_err(IntoResponse::into_response)?;
        Ok(OnOne {
            id: MessageId::from(id),
            by,
            desk,
        })
    }
}
