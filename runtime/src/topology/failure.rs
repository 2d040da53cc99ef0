//! [`Failure`]: why a tuple (and so its whole tree) failed.

use std::collections::BTreeMap;
use std::time::Duration;

/// Failure codes that the runtime itself produces.
pub mod codes {
    /// A bolt panicked while handling the tuple; its task was restarted.
    pub const PANIC: &str = "PANIC";
    /// The tuple tree did not complete within `message_timeout`.
    pub const TIMEOUT: &str = "TIMEOUT";
    /// A [`PendingTuple`](crate::topology::PendingTuple) was dropped without being acked or
    /// failed: a forgotten ack, found at once instead of at the timeout.
    pub const UNACKED: &str = "UNACKED";
    /// The spout handed out a payload larger than `Config::max_payload`: dead-lettered at
    /// once, undelivered.
    pub const PAYLOAD_TOO_LARGE: &str = "PAYLOAD_TOO_LARGE";
}

/// Why a tuple failed: a code the rules match on, an optional `retry_after` hint (e.g. from a
/// rate limiter), string attributes, and a human message.
///
/// ```
/// use rebound_runtime::topology::Failure;
/// use std::time::Duration;
/// let f = Failure::new("RATE_LIMITED", "429 from the payment API")
///     .with_retry_after(Duration::from_secs(2))
///     .with_attr("endpoint", "/pay");
/// assert_eq!(f.code, "RATE_LIMITED");
/// ```
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct Failure {
    /// The code, e.g. `DB_LOCK_WAIT`.
    pub code: String,
    /// Do not retry before this much time has passed.
    pub retry_after: Option<Duration>,
    /// Extra facts for the rules, e.g. `{"http_status": "503"}`.
    pub attrs: BTreeMap<String, String>,
    /// A human message.
    pub message: String,
}

impl Failure {
    /// A failure with a code and a message.
    pub fn new(code: impl Into<String>, message: impl Into<String>) -> Failure {
        Failure {
            code: code.into(),
            retry_after: None,
            attrs: BTreeMap::new(),
            message: message.into(),
        }
    }

    /// The same failure with a `retry_after` hint.
    pub fn with_retry_after(mut self, after: Duration) -> Failure {
        self.retry_after = Some(after);
        self
    }

    /// The same failure with an attribute.
    pub fn with_attr(mut self, key: impl Into<String>, value: impl Into<String>) -> Failure {
        self.attrs.insert(key.into(), value.into());
        self
    }
}
