//! One `POST` of a batch to a receiver's webhook, `http://` or `https://`, through the
//! product's client ([`crate::outbound`]): a pool of its own per receiver, whose TLS trusts
//! the receiver's `ca_file` or the system's roots.

use super::alertmanager;
use crate::config::{Receiver, ReceiverKind};
use crate::outbound;
use bytes::Bytes;
use http::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use std::time::Duration;

/// What a receiver's requests carry besides the body: its client, URL and headers, made once,
/// and what it speaks.
pub(super) struct Request {
    client: reqwest::Client,
    url: reqwest::Url,
    headers: HeaderMap,
    kind: ReceiverKind,
}

/// How one attempt ended.
pub(super) enum Attempt {
    /// Answered 2xx.
    Delivered,
    /// No answer in time, a connection or TLS error, or another status: why, for the log.
    Failed(String),
}

/// Where an Alertmanager takes alerts, below its base URL.
const ALERTS_PATH: &str = "/api/v2/alerts";

/// The most of an answer's body that is read (to put the connection back in the pool); past
/// it the connection is closed instead.
const MAX_ANSWER_BODY: usize = 64 * 1024;

impl Request {
    /// The request for `receiver`, or why its webhook, headers or CA file are not usable
    /// (the configuration checks them; a `Receiver` built in code may not be).
    pub(super) fn new(receiver: &Receiver) -> Result<Request, String> {
        let mut url = reqwest::Url::parse(&receiver.webhook)
            .map_err(|e| format!("webhook {:?}: {e}", receiver.webhook))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(format!(
                "webhook {:?}: expected an http:// or https:// URL",
                receiver.webhook
            ));
        }
        if receiver.kind == ReceiverKind::Alertmanager && !url.path().ends_with(ALERTS_PATH) {
            let path = format!("{}{ALERTS_PATH}", url.path().trim_end_matches('/'));
            url.set_path(&path);
        }
        let mut headers = HeaderMap::new();
        for (name, value) in &receiver.headers {
            let name = HeaderName::from_bytes(name.as_bytes())
                .map_err(|e| format!("header {name:?}: {e}"))?;
            let value = HeaderValue::from_str(value).map_err(|e| format!("header {name}: {e}"))?;
            headers.insert(name, value);
        }
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        let client = outbound::client(receiver.ca_file.as_deref()).map_err(|e| e.to_string())?;
        Ok(Request {
            client,
            url,
            headers,
            kind: receiver.kind,
        })
    }

    /// The body of a batch: `{"dead_letters": [ … ]}` for a webhook, an array of alerts (one
    /// per letter, `alertmanager.rs`) for an Alertmanager.
    pub(super) fn body(&self, letters: Vec<serde_json::Value>) -> Bytes {
        let doc = match self.kind {
            ReceiverKind::Webhook => serde_json::json!({ "dead_letters": letters }),
            ReceiverKind::Alertmanager => letters.iter().map(alertmanager::alert).collect(),
        };
        Bytes::from(serde_json::to_vec(&doc).unwrap_or_default())
    }

    /// `POST`s `body` to the webhook; an answer (head and body) must come within `within`.
    pub(super) async fn post(&self, body: Bytes, within: Duration) -> Attempt {
        let exchange = async {
            let mut response = self
                .client
                .post(self.url.clone())
                .headers(self.headers.clone())
                .body(body)
                .send()
                .await
                .map_err(|e| outbound::cause(&e.without_url()))?;
            // Read the answer to its end, so that the connection goes back to the pool.
            let _ = outbound::read_at_most(&mut response, MAX_ANSWER_BODY).await;
            Ok::<_, String>(response.status())
        };
        match tokio::time::timeout(within, exchange).await {
            Err(_) => Attempt::Failed(format!("no answer within {within:?}")),
            Ok(Err(e)) => Attempt::Failed(e),
            Ok(Ok(status)) if status.is_success() => Attempt::Delivered,
            Ok(Ok(status)) => Attempt::Failed(format!("answered {status}")),
        }
    }
}
