//! One `POST` of a batch to a receiver's webhook: plain HTTP/1 through hyper-util's pooled
//! client (no TLS: the configuration refuses `https://` webhooks).

use crate::config::Receiver;
use bytes::Bytes;
use http::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::{self, connect::HttpConnector};
use hyper_util::rt::TokioExecutor;
use std::time::Duration;

/// The HTTP client every lane shares (one connection pool).
#[derive(Clone)]
pub(super) struct Client(legacy::Client<HttpConnector, Full<Bytes>>);

/// What a receiver's requests carry besides the body: its URL and headers, parsed once.
pub(super) struct Request {
    uri: http::Uri,
    headers: HeaderMap,
}

/// How one attempt ended.
pub(super) enum Attempt {
    /// Answered 2xx.
    Delivered,
    /// No answer in time, a connection error, or another status: why, for the log.
    Failed(String),
}

impl Request {
    /// The request for `receiver`, or why its webhook or headers are not valid HTTP (the
    /// configuration checks both; a `Receiver` built in code may not be).
    pub(super) fn new(receiver: &Receiver) -> Result<Request, String> {
        let uri: http::Uri = receiver
            .webhook
            .parse()
            .map_err(|e| format!("webhook {:?}: {e}", receiver.webhook))?;
        if uri.scheme_str() != Some("http") {
            return Err(format!(
                "webhook {:?}: only http:// is supported",
                receiver.webhook
            ));
        }
        let mut headers = HeaderMap::new();
        for (name, value) in &receiver.headers {
            let name = HeaderName::from_bytes(name.as_bytes())
                .map_err(|e| format!("header {name:?}: {e}"))?;
            let value = HeaderValue::from_str(value).map_err(|e| format!("header {name}: {e}"))?;
            headers.insert(name, value);
        }
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        Ok(Request { uri, headers })
    }

    /// The body of a batch: `{"dead_letters": [ … ]}`.
    pub(super) fn body(letters: Vec<serde_json::Value>) -> Bytes {
        let doc = serde_json::json!({ "dead_letters": letters });
        Bytes::from(serde_json::to_vec(&doc).unwrap_or_default())
    }
}

impl Client {
    pub(super) fn new() -> Client {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        Client(legacy::Client::builder(TokioExecutor::new()).build(connector))
    }

    /// `POST`s `body` to `request`'s webhook; an answer (head and body) must come within
    /// `within`.
    pub(super) async fn post(&self, request: &Request, body: Bytes, within: Duration) -> Attempt {
        let mut builder = http::Request::post(request.uri.clone());
        if let Some(headers) = builder.headers_mut() {
            headers.extend(request.headers.clone());
        }
        let req = match builder.body(Full::new(body)) {
            Ok(r) => r,
            Err(e) => return Attempt::Failed(e.to_string()),
        };
        let exchange = async {
            let response = self.0.request(req).await.map_err(|e| e.to_string())?;
            let status = response.status();
            // Read the answer to its end, so that the connection goes back to the pool.
            let _ = response.into_body().collect().await;
            Ok::<_, String>(status)
        };
        match tokio::time::timeout(within, exchange).await {
            Err(_) => Attempt::Failed(format!("no answer within {within:?}")),
            Ok(Err(e)) => Attempt::Failed(e),
            Ok(Ok(status)) if status.is_success() => Attempt::Delivered,
            Ok(Ok(status)) => Attempt::Failed(format!("answered {status}")),
        }
    }
}
