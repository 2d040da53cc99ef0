//! Every error the admin API answers is JSON: `{"error": "..."}`, or for a rejected rule set
//! `{"errors": [{file, line, column, message}]}`.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use rebound_engine::Diagnostic;
use serde::Serialize;
use serde_json::{Value, json};

/// An error response: a status and a JSON body.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    body: Value,
    /// `WWW-Authenticate` for a 401.
    challenge: bool,
    /// `Retry-After`, in seconds, for a 503 that a later try may not get.
    retry_after: Option<u64>,
}

impl ApiError {
    /// `status` with `{"error": message}`.
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        ApiError {
            status,
            body: json!({ "error": message.into() }),
            challenge: false,
            retry_after: None,
        }
    }

    /// 503 with `Retry-After: seconds`: the server is busy, not broken.
    pub fn busy(message: impl Into<String>, seconds: u64) -> Self {
        ApiError {
            retry_after: Some(seconds),
            ..Self::new(StatusCode::SERVICE_UNAVAILABLE, message)
        }
    }

    /// 400 with a message.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, message)
    }

    /// 401, with the `Bearer` challenge.
    pub fn unauthorized(message: impl Into<String>) -> Self {
        ApiError {
            challenge: true,
            ..Self::new(StatusCode::UNAUTHORIZED, message)
        }
    }

    /// 500 with a message.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, message)
    }

    /// `status` with any JSON body.
    pub fn with_body(status: StatusCode, body: Value) -> Self {
        ApiError {
            status,
            body,
            challenge: false,
            retry_after: None,
        }
    }

    /// 422 with the errors of a rejected set.
    pub fn rejected<'a>(errors: impl IntoIterator<Item = &'a Diagnostic>) -> Self {
        Self::with_body(
            StatusCode::UNPROCESSABLE_ENTITY,
            json!({ "errors": errors.into_iter().map(ErrorJson::from).collect::<Vec<_>>() }),
        )
    }

    /// The status.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// The JSON body.
    pub fn body(&self) -> &Value {
        &self.body
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (self.status, axum::Json(self.body)).into_response();
        if self.challenge {
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"rebound\""),
            );
        }
        if let Some(seconds) = self.retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        response
    }
}

/// One error of a rejected set, as the admin API shows it.
#[derive(Debug, Serialize)]
pub struct ErrorJson<'a> {
    /// The file (the pushed name, or the path in the rules directory).
    pub file: &'a str,
    /// 1-based line, or null when the error is about the whole file.
    pub line: Option<usize>,
    /// 1-based column, or null.
    pub column: Option<usize>,
    /// What is wrong and what was expected.
    pub message: &'a str,
    /// A hint, such as the nearest valid key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub help: Option<&'a str>,
}

impl<'a> From<&'a Diagnostic> for ErrorJson<'a> {
    fn from(d: &'a Diagnostic) -> Self {
        ErrorJson {
            file: &d.file,
            line: d.line,
            column: d.column,
            message: &d.message,
            help: d.help.as_deref(),
        }
    }
}
