//! What a decision looks at: a failure ([`FailureContext`], borrowed; [`OwnedFailure`],
//! owned), its string attributes and the runtime's signals.
//!
//! Nothing here imports the rest of the engine: matching, scripts and pacing all read a
//! context, none of them is needed to make one.

use std::collections::BTreeMap;
use std::time::Duration;

/// String attributes a failure carries.
pub type Attrs = BTreeMap<String, String>;
/// Numeric signals the runtime supplies (`fail_rate`, `retry_queue_depth`, …).
pub type Signals = BTreeMap<String, f64>;

static NO_ATTRS: Attrs = BTreeMap::new();
static NO_SIGNALS: Signals = BTreeMap::new();

/// Everything a decision looks at.
#[derive(Debug, Clone, Copy)]
pub struct FailureContext<'a> {
    /// Business type of the failed message.
    pub biz: &'a str,
    /// Error code of the failure.
    pub code: &'a str,
    /// The attempt that just failed, 1 for the first delivery.
    pub attempt: u32,
    /// Time since the first delivery began.
    pub elapsed: Duration,
    /// A delay the failure itself asks for (HTTP 429 `Retry-After`).
    pub retry_after: Option<Duration>,
    /// The delay chosen before the previous attempt (zero on the first failure).
    pub last_delay: Duration,
    /// String attributes of the failure.
    pub attrs: &'a Attrs,
    /// Signals from the runtime.
    pub signals: &'a Signals,
}

impl<'a> FailureContext<'a> {
    /// A failure of `biz`/`code` at `attempt`, with nothing else known.
    pub fn new(biz: &'a str, code: &'a str, attempt: u32) -> Self {
        FailureContext {
            biz,
            code,
            attempt,
            elapsed: Duration::ZERO,
            retry_after: None,
            last_delay: Duration::ZERO,
            attrs: &NO_ATTRS,
            signals: &NO_SIGNALS,
        }
    }

    /// The sample failure every expression is evaluated against at load.
    pub fn sample() -> FailureContext<'static> {
        FailureContext::new("SAMPLE", "SAMPLE", 1)
    }
}

/// A failure that owns its names and maps; [`context`](Self::context) borrows it as a
/// [`FailureContext`]. Handy where a failure is built, stored or generated before deciding.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OwnedFailure {
    /// Business type.
    pub biz: String,
    /// Error code.
    pub code: String,
    /// The attempt that failed.
    pub attempt: u32,
    /// Time since the first delivery began.
    pub elapsed: Duration,
    /// A delay the failure asks for.
    pub retry_after: Option<Duration>,
    /// The delay chosen before the previous attempt.
    pub last_delay: Duration,
    /// String attributes.
    pub attrs: Attrs,
    /// Runtime signals.
    pub signals: Signals,
}

impl OwnedFailure {
    /// The failure as the engine takes it.
    pub fn context(&self) -> FailureContext<'_> {
        FailureContext {
            biz: &self.biz,
            code: &self.code,
            attempt: self.attempt,
            elapsed: self.elapsed,
            retry_after: self.retry_after,
            last_delay: self.last_delay,
            attrs: &self.attrs,
            signals: &self.signals,
        }
    }
}
