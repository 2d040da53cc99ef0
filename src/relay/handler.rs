//! The client of a team's handler (`docs/spec/sources.md`, "Handlers"): one `POST` per
//! delivery, with the `Rebound-*` headers, `Idempotency-Key` and the message's own headers,
//! at most `concurrency` in flight, each bounded by `timeout`; whatever happens is an
//! [`Answer`] (`answer.rs` reads it as the message's fate).

use super::answer::{Answer, MAX_FAILURE_BODY};
use crate::outbound;
use bytes::Bytes;
use http::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use rebound_runtime::topology::Headers;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use tokio::sync::Semaphore;
use tokio::time::Instant;

/// Where the handler is and how it is called: `handler:` in the configuration file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HandlerOptions {
    /// An `http://` or `https://` URL with a host.
    pub url: String,
    /// A call with no answer within this is `HANDLER_TIMEOUT` (10 s).
    pub timeout: Duration,
    /// The most calls in flight at once, at least 1 (64).
    pub concurrency: usize,
    /// The PEM file of the CA certificates an `https://` handler's certificate is checked
    /// against; `None`: the system's roots.
    pub ca_file: Option<PathBuf>,
}

impl Default for HandlerOptions {
    /// No URL; the spec's timeout (10 s) and concurrency (64); the system's roots.
    fn default() -> Self {
        HandlerOptions {
            url: String::new(),
            timeout: Duration::from_secs(10),
            concurrency: 64,
            ca_file: None,
        }
    }
}

/// Why a [`Handler`] could not be made.
#[derive(Debug, thiserror::Error)]
pub enum HandlerError {
    /// The URL does not parse, is not `http://` or `https://`, or has no host.
    #[error("bad handler URL {url:?}: {why}; expected http://HOST[:PORT]/PATH or https://…")]
    Url {
        /// The URL as given.
        url: String,
        /// What is wrong with it.
        why: String,
    },
    /// A concurrency of 0, or a timeout of 0.
    #[error("bad handler options: {0}")]
    Options(String),
    /// The client could not be built: the CA file cannot be read or holds no usable
    /// certificate (the error names it).
    #[error(transparent)]
    Client(#[from] outbound::OutboundError),
}

/// One delivery of a message to the handler: what its request says.
#[derive(Clone, Debug)]
pub struct Delivery<'a> {
    /// The message id: `Rebound-Message-Id` and `Idempotency-Key`.
    pub id: &'a str,
    /// `Rebound-Attempt`: 1 for the first delivery.
    pub attempt: u32,
    /// `Rebound-Biz`.
    pub biz: &'a str,
    /// `Rebound-Key`, sent only when there is one.
    pub key: Option<&'a str>,
    /// `Rebound-First-Delivery` (RFC 3339, UTC, in milliseconds).
    pub first_delivery: SystemTime,
    /// `Rebound-Rule-Version`: the version of the rules that decide this message.
    pub rule_version: &'a str,
    /// The message's own headers, sent as they came (those that are not valid HTTP, and those
    /// named like the headers Rebound sets or HTTP's framing ones, are left out).
    pub headers: &'a Headers,
    /// The body.
    pub payload: Bytes,
}

/// The handler's client; cheap to clone (the clones share one connection pool and one
/// concurrency bound).
#[derive(Clone)]
pub struct Handler {
    inner: Arc<Inner>,
}

struct Inner {
    client: reqwest::Client,
    url: reqwest::Url,
    text: String,
    timeout: Duration,
    permits: Semaphore,
}

impl std::fmt::Debug for Handler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handler")
            .field("url", &self.inner.text)
            .field("timeout", &self.inner.timeout)
            .finish_non_exhaustive()
    }
}

/// Message headers never sent: the ones Rebound sets itself (a message cannot override them)
/// and those of HTTP's own framing, which the client writes.
const RESERVED: &[&str] = &[
    "rebound-message-id",
    "rebound-attempt",
    "rebound-biz",
    "rebound-key",
    "rebound-first-delivery",
    "rebound-rule-version",
    "idempotency-key",
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "proxy-connection",
    "upgrade",
    "te",
    "trailer",
    "expect",
];

impl Handler {
    /// A client of the handler `options` describe. Errors name what is wrong: the URL (not
    /// `http` or `https`, no host), the CA file, a concurrency or timeout of 0.
    pub fn new(options: &HandlerOptions) -> Result<Handler, HandlerError> {
        let bad = |why: &str| HandlerError::Url {
            url: options.url.clone(),
            why: why.to_owned(),
        };
        let url = reqwest::Url::parse(&options.url).map_err(|e| bad(&e.to_string()))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(bad(&format!("the scheme is {:?}", url.scheme())));
        }
        if url.host_str().is_none_or(str::is_empty) {
            return Err(bad("no host"));
        }
        if options.concurrency == 0 {
            return Err(HandlerError::Options(
                "concurrency is 0; expected at least 1".into(),
            ));
        }
        if options.timeout.is_zero() {
            return Err(HandlerError::Options(
                "timeout is 0; expected e.g. 10s".into(),
            ));
        }
        let client = outbound::client(options.ca_file.as_deref())?;
        Ok(Handler {
            inner: Arc::new(Inner {
                client,
                url,
                text: options.url.clone(),
                timeout: options.timeout,
                permits: Semaphore::new(options.concurrency),
            }),
        })
    }

    /// The handler's URL, as given.
    pub fn url(&self) -> &str {
        &self.inner.text
    }

    /// One `POST` of `delivery`. Waits for one of `concurrency` permits first (the wait is
    /// not in the timeout, nor in the answer's latency). Never panics and never fails: every
    /// outcome, a timeout or an unreachable handler too, is an [`Answer`].
    pub async fn call(&self, delivery: &Delivery<'_>) -> Answer {
        let inner = &*self.inner;
        let Ok(_permit) = inner.permits.acquire().await else {
            return Answer::unavailable("the handler's client is closed", Duration::ZERO);
        };
        let start = Instant::now();
        let deadline = start + inner.timeout;
        let request = inner
            .client
            .post(inner.url.clone())
            .headers(request_headers(delivery))
            .body(delivery.payload.clone());
        let mut response = match tokio::time::timeout_at(deadline, request.send()).await {
            Err(_) => return Answer::timed_out(inner.timeout, start.elapsed()),
            Ok(Err(e)) if e.is_timeout() => {
                return Answer::timed_out(inner.timeout, start.elapsed());
            }
            Ok(Err(e)) => {
                return Answer::unavailable(outbound::cause(&e.without_url()), start.elapsed());
            }
            Ok(Ok(r)) => r,
        };
        let status = response.status().as_u16();
        let mut headers = HeaderMap::new();
        if let Some(v) = response.headers().get(http::header::RETRY_AFTER) {
            headers.insert(http::header::RETRY_AFTER, v.clone());
        }
        // Read (a 2xx's body too, so that the connection goes back to the pool) within what
        // is left of the timeout; a body cut short or past the bound counts as none.
        let read = outbound::read_at_most(&mut response, MAX_FAILURE_BODY);
        let body = match tokio::time::timeout_at(deadline, read).await {
            Ok(Ok(body)) => body,
            Ok(Err(_)) | Err(_) => None,
        };
        Answer::answered(
            status,
            &headers,
            body.as_deref(),
            SystemTime::now(),
            start.elapsed(),
        )
    }
}

/// The headers of `delivery`'s request: Rebound's, then the message's own, then the default
/// content type.
fn request_headers(delivery: &Delivery<'_>) -> HeaderMap {
    let mut out = HeaderMap::new();
    let mut set = |name: &'static str, value: &str| match HeaderValue::from_str(value) {
        Ok(v) => {
            out.insert(HeaderName::from_static(name), v);
        }
        Err(_) => {
            tracing::warn!(
                header = name,
                value,
                "not a valid HTTP header value; left out"
            );
        }
    };
    set("rebound-message-id", delivery.id);
    set("rebound-attempt", &delivery.attempt.to_string());
    set("rebound-biz", delivery.biz);
    if let Some(key) = delivery.key {
        set("rebound-key", key);
    }
    set(
        "rebound-first-delivery",
        &humantime::format_rfc3339_millis(delivery.first_delivery).to_string(),
    );
    set("rebound-rule-version", delivery.rule_version);
    set("idempotency-key", delivery.id);
    for (name, value) in delivery.headers.iter() {
        let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(value),
        ) else {
            continue;
        };
        if RESERVED.contains(&name.as_str()) {
            continue;
        }
        out.append(name, value);
    }
    if !out.contains_key(CONTENT_TYPE) {
        out.insert(
            CONTENT_TYPE,
            HeaderValue::from_static("application/octet-stream"),
        );
    }
    out
}
