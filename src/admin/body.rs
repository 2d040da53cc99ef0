//! JSON request bodies with JSON errors: 413 past the size limit, 400 with serde's message
//! for anything that is not the expected JSON.
//!
//! A `Content-Length` past the limit gets its 413 before any of the body is read (a client
//! that sent `Expect: 100-continue` then never sends it); the [`drain`](super::drain) layer
//! reads whatever the client sends anyway.

use super::connections::BodyTimedOut;
use super::error::ApiError;
use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::{StatusCode, header};
use serde::de::DeserializeOwned;

/// A JSON body of type `T`. The `Content-Type` is not checked, so `curl -d` works as is.
#[derive(Debug)]
pub struct JsonBody<T>(pub T);

/// An optional JSON body: `None` when the body is empty.
#[derive(Debug)]
pub struct OptionalJsonBody<T>(pub Option<T>);

fn too_large() -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        format!(
            "the request body is larger than the limit of {} bytes",
            super::MAX_BODY
        ),
    )
}

async fn bytes<S: Send + Sync>(req: Request, state: &S) -> Result<Bytes, ApiError> {
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|n| n > super::MAX_BODY as u64) {
        return Err(too_large());
    }
    Bytes::from_request(req, state).await.map_err(|rejection| {
        let status = rejection.status();
        if status == StatusCode::PAYLOAD_TOO_LARGE {
            too_large()
        } else if let Some(late) = timed_out(&rejection) {
            ApiError::new(StatusCode::REQUEST_TIMEOUT, late.to_string())
        } else {
            ApiError::new(status, rejection.body_text())
        }
    })
}

/// The body's deadline, when that is why it could not be read.
fn timed_out<'a>(rejection: &'a (dyn std::error::Error + 'static)) -> Option<&'a BodyTimedOut> {
    let mut cause = Some(rejection);
    while let Some(e) = cause {
        if let Some(late) = e.downcast_ref::<BodyTimedOut>() {
            return Some(late);
        }
        cause = e.source();
    }
    None
}

fn parse<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(bytes).map_err(|e| {
        let what = match e.classify() {
            serde_json::error::Category::Data => "the JSON body does not have the expected shape",
            _ => "malformed JSON body",
        };
        ApiError::bad_request(format!("{what}: {e}"))
    })
}

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let bytes = bytes(req, state).await?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Err(ApiError::bad_request("the request needs a JSON body"));
        }
        parse(&bytes).map(JsonBody)
    }
}

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for OptionalJsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let bytes = bytes(req, state).await?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(OptionalJsonBody(None));
        }
        parse(&bytes).map(|v| OptionalJsonBody(Some(v)))
    }
}
