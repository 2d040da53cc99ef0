//! A handler's answer read as the message's fate (`docs/spec/sources.md`, "Handlers"): the
//! table of that section, row by row, as pure functions of the status, the headers and the
//! body, so that each row is a unit test.
//!
//! | the handler answers | the fate |
//! |---|---|
//! | any 2xx | `Ok(())` |
//! | a non-2xx with a JSON body `{"code", "message"?, "attrs"?}` | a failure with that code, message and attrs |
//! | a non-2xx without such a body | a failure `HTTP_<status>` |
//! | a `Retry-After` (seconds or an HTTP date) with a failure | the failure's `retry_after` |
//! | no answer within the timeout | `HANDLER_TIMEOUT` |
//! | a refused or reset connection, DNS, a TLS error | `HANDLER_UNAVAILABLE`, the cause as the message |

use http::HeaderMap;
use rebound_runtime::topology::Failure;
use std::time::{Duration, SystemTime};

/// The failure code of a call that had no answer within the handler's timeout.
pub const HANDLER_TIMEOUT: &str = "HANDLER_TIMEOUT";
/// The failure code of a call that reached no handler (refused or reset, DNS, TLS).
pub const HANDLER_UNAVAILABLE: &str = "HANDLER_UNAVAILABLE";
/// The most of a failure's body that is read; a longer one counts as no body.
pub const MAX_FAILURE_BODY: usize = 64 * 1024;

/// What one call to the handler came to.
#[derive(Clone, Debug, PartialEq)]
pub struct Answer {
    /// The message's fate: `Ok(())` to ack, or the failure the rules decide.
    pub fate: Result<(), Failure>,
    /// The answer's class, as `rebound_handler_requests_total{class}` counts it.
    pub class: AnswerClass,
    /// The HTTP status; `None` for a timeout or an unavailable handler.
    pub status: Option<u16>,
    /// From sending the request to the answer (the wait for a concurrency permit excluded).
    pub latency: Duration,
}

/// The classes of answers `rebound_handler_requests_total{class}` counts.
///
/// Redirects are not followed, so a `3xx` is [`AnswerClass::Client4xx`], as every other
/// status that is neither 2xx nor 5xx is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AnswerClass {
    /// Any 2xx: the message is acked.
    Ok2xx,
    /// Any status below 500 that is not 2xx (1xx and 3xx too).
    Client4xx,
    /// A status of 500 or above.
    Server5xx,
    /// No answer within the timeout.
    Timeout,
    /// No handler reached: refused or reset, DNS, TLS.
    Unavailable,
}

impl AnswerClass {
    /// Every class, in the order the metrics list them.
    pub const ALL: [AnswerClass; 5] = [
        AnswerClass::Ok2xx,
        AnswerClass::Client4xx,
        AnswerClass::Server5xx,
        AnswerClass::Timeout,
        AnswerClass::Unavailable,
    ];

    /// The metric label: `2xx`, `4xx`, `5xx`, `timeout` or `unavailable`.
    pub fn as_str(self) -> &'static str {
        match self {
            AnswerClass::Ok2xx => "2xx",
            AnswerClass::Client4xx => "4xx",
            AnswerClass::Server5xx => "5xx",
            AnswerClass::Timeout => "timeout",
            AnswerClass::Unavailable => "unavailable",
        }
    }

    /// The class of an answer with HTTP status `status`.
    pub fn of_status(status: u16) -> AnswerClass {
        match status {
            200..=299 => AnswerClass::Ok2xx,
            500.. => AnswerClass::Server5xx,
            _ => AnswerClass::Client4xx,
        }
    }
}

impl Answer {
    /// The answer of a handler that answered `status` with `headers` and `body` (`None`: no
    /// body was read, e.g. one over [`MAX_FAILURE_BODY`]), at `now` (for a `Retry-After` date).
    pub fn answered(
        status: u16,
        headers: &HeaderMap,
        body: Option<&[u8]>,
        now: SystemTime,
        latency: Duration,
    ) -> Answer {
        Answer {
            fate: fate(status, headers, body, now),
            class: AnswerClass::of_status(status),
            status: Some(status),
            latency,
        }
    }

    /// The answer of a call with no answer within `timeout`.
    pub fn timed_out(timeout: Duration, latency: Duration) -> Answer {
        Answer {
            fate: Err(Failure::new(
                HANDLER_TIMEOUT,
                format!("no answer within {}", humantime::format_duration(timeout)),
            )),
            class: AnswerClass::Timeout,
            status: None,
            latency,
        }
    }

    /// The answer of a call that reached no handler, `cause` saying why.
    pub fn unavailable(cause: impl Into<String>, latency: Duration) -> Answer {
        Answer {
            fate: Err(Failure::new(HANDLER_UNAVAILABLE, cause)),
            class: AnswerClass::Unavailable,
            status: None,
            latency,
        }
    }
}

/// The fate of an answer: 2xx acks; any other status is a failure, from the body's JSON when
/// it is `{"code": "…", …}` of at most [`MAX_FAILURE_BODY`] bytes, else `HTTP_<status>`, with
/// the `Retry-After` header's delay.
pub(crate) fn fate(
    status: u16,
    headers: &HeaderMap,
    body: Option<&[u8]>,
    now: SystemTime,
) -> Result<(), Failure> {
    if (200..300).contains(&status) {
        return Ok(());
    }
    let failure = body
        .filter(|b| b.len() <= MAX_FAILURE_BODY)
        .and_then(failure_of_body)
        .unwrap_or_else(|| {
            let reason = http::StatusCode::from_u16(status)
                .ok()
                .and_then(|s| s.canonical_reason());
            let message = match reason {
                Some(r) => format!("the handler answered {status} {r}"),
                None => format!("the handler answered {status}"),
            };
            Failure::new(format!("HTTP_{status}"), message)
        });
    let retry_after = headers
        .get(http::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| retry_after(v, now));
    Err(match retry_after {
        Some(after) => failure.with_retry_after(after),
        None => failure,
    })
}

/// The failure a body states: a JSON object whose `code` is a non-empty string, with an
/// optional `message` and an optional object `attrs` (values that are not strings are kept as
/// their JSON text). `None` for anything else.
fn failure_of_body(body: &[u8]) -> Option<Failure> {
    let serde_json::Value::Object(doc) = serde_json::from_slice(body).ok()? else {
        return None;
    };
    let code = doc.get("code")?.as_str().filter(|c| !c.is_empty())?;
    let message = match doc.get("message") {
        None | Some(serde_json::Value::Null) => String::new(),
        Some(m) => text_of(m),
    };
    let mut failure = Failure::new(code, message);
    match doc.get("attrs") {
        None | Some(serde_json::Value::Null) => {}
        Some(serde_json::Value::Object(attrs)) => {
            for (k, v) in attrs {
                failure = failure.with_attr(k.clone(), text_of(v));
            }
        }
        Some(_) => return None,
    }
    Some(failure)
}

/// A string as itself, anything else as its JSON text.
fn text_of(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A `Retry-After` value: whole seconds, or an HTTP date (one in the past is 0 s). `None`
/// when it is neither.
fn retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if let Ok(secs) = value.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

#[cfg(test)]
#[path = "answer_tests.rs"]
mod tests;
