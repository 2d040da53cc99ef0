//! The relay's bolt: each delivery handed to the team's handler, one `POST` each, its answer
//! the delivery's fate (`sources.md`, "Handlers"). A [`DeferredBolt`]: the requests run on
//! tasks of their own, at most the handler's `concurrency` at once, so one slow answer holds
//! back no other.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use rebound_engine::{PolicyHandle, Version};
use rebound_runtime::topology::{DeferredBolt, PendingTuple, Value};

use super::{Delivery, Handler};
use crate::metrics::handler::HandlerStats;

/// The attrs a relay adds to a handler's failure, so that `GET /v1/messages/{id}` shows each
/// answer among the failures: the status it answered with (absent for a timeout or no
/// connection) and how long it took.
pub const STATUS_ATTR: &str = "handler_status";
/// See [`STATUS_ATTR`]: the answer's time in milliseconds.
pub const LATENCY_ATTR: &str = "handler_ms";

/// Hands each delivery to the handler and acks or fails it by the answer.
pub struct HandlerBolt {
    handler: Handler,
    rules: Arc<PolicyHandle>,
    stats: Arc<HandlerStats>,
    runtime: tokio::runtime::Handle,
    /// The version in force as text, rendered once per version, not once per delivery.
    version: (Version, Arc<str>),
}

impl HandlerBolt {
    /// A bolt over `handler`, saying which of `rules` is in force, counting into `stats`.
    /// Made inside a tokio runtime (the requests run on it).
    pub fn new(handler: Handler, rules: Arc<PolicyHandle>, stats: Arc<HandlerStats>) -> Self {
        let current = *rules.current().version();
        HandlerBolt {
            handler,
            rules,
            stats,
            runtime: tokio::runtime::Handle::current(),
            version: (current, current.to_string().into()),
        }
    }
}

impl DeferredBolt for HandlerBolt {
    fn execute(&mut self, input: PendingTuple) {
        let (handler, stats) = (self.handler.clone(), self.stats.clone());
        let current = *self.rules.current().version();
        if current != self.version.0 {
            self.version = (current, current.to_string().into());
        }
        let version = self.version.1.clone();
        self.runtime.spawn(async move {
            let t = input.tuple();
            let headers = t
                .field("headers")
                .and_then(Value::as_map)
                .cloned()
                .unwrap_or_default();
            let first_ms = t.int("first_delivery").unwrap_or(0).max(0) as u64;
            let delivery = Delivery {
                id: t.str("id").unwrap_or_default(),
                attempt: u32::try_from(t.int("attempt").unwrap_or(1)).unwrap_or(u32::MAX),
                biz: t.str("biz").unwrap_or_default(),
                key: t.str("key"),
                first_delivery: SystemTime::UNIX_EPOCH + Duration::from_millis(first_ms),
                rule_version: &version,
                headers: &headers,
                payload: t.bytes("payload").cloned().unwrap_or_default(),
            };
            let answer = handler.call(&delivery).await;
            stats.answered(answer.class.as_str(), answer.status, answer.latency);
            match answer.fate {
                Ok(()) => input.ack(),
                Err(mut failure) => {
                    if let Some(status) = answer.status {
                        failure = failure.with_attr(STATUS_ATTR, status.to_string());
                    }
                    let ms = answer.latency.as_millis().to_string();
                    input.fail(failure.with_attr(LATENCY_ATTR, ms));
                }
            }
        });
    }
}
