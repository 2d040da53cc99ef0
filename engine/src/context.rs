//! What a decision looks at: a failure ([`FailureContext`], borrowed; [`OwnedFailure`],
//! owned), its string attributes, its message's headers, the time it happened, and the
//! runtime's signals as a borrowed [`SignalView`].
//!
//! Nothing here imports the rest of the engine: matching, scripts and pacing all read a
//! context, none of them is needed to make one.

use std::collections::BTreeMap;
use std::time::Duration;

/// String attributes a failure carries.
pub type Attrs = BTreeMap<String, String>;
/// Numeric signals by name (`fail_rate`, `retry_queue_depth`, …), as a map: what the CLI's
/// `--signal`, rule tests and [`OwnedFailure`] hold.
pub type Signals = BTreeMap<String, f64>;

/// The headers of the failed message, as its source gave them: string keys to string values.
/// Borrowed by a [`FailureContext`] like [`Attrs`]; a runtime that keeps them elsewhere lends
/// its map (or [`HeaderMap::new`]'s empty one), never a copy.
pub type HeaderMap = BTreeMap<String, String>;

static NO_ATTRS: Attrs = BTreeMap::new();
static NO_HEADERS: HeaderMap = BTreeMap::new();

/// The runtime's signals as a decision sees them: borrowed, never copied.
///
/// A runtime with a fixed set of signals hands them over as pairs on its stack, so deciding
/// a failure allocates nothing for them; only an expression that runs in rhai copies them
/// into its scope (in place: the names once, the values each time).
///
/// ```
/// use rebound_engine::{SignalView, Signals};
///
/// let pairs = [("fail_rate", 0.2), ("pending", 7.0)];
/// let view = SignalView::Pairs(&pairs);
/// assert_eq!(view.get("pending"), Some(7.0));
/// assert_eq!(view.get("fuse_open"), None);
///
/// let map = Signals::from([("fail_rate".to_string(), 0.9)]);
/// let names: Vec<&str> = SignalView::Map(&map).iter().map(|(name, _)| name).collect();
/// assert_eq!(names, ["fail_rate"]);
/// assert_eq!(SignalView::NONE.iter().count(), 0);
/// ```
#[derive(Clone, Copy, Debug)]
pub enum SignalView<'a> {
    /// Named values in a map (the CLI's `--signal`, rule tests, OwnedFailure).
    Map(&'a Signals),
    /// Named values in a slice (a runtime's fixed set, e.g. `[("fail_rate", 0.2), …]`).
    Pairs(&'a [(&'static str, f64)]),
}

impl<'a> SignalView<'a> {
    /// No signals at all.
    pub const NONE: SignalView<'static> = SignalView::Pairs(&[]);

    /// The value of the signal `name`, if there is one (in a slice, the first pair so named).
    pub fn get(&self, name: &str) -> Option<f64> {
        match *self {
            SignalView::Map(map) => map.get(name).copied(),
            SignalView::Pairs(pairs) => pairs.iter().find(|(n, _)| *n == name).map(|p| p.1),
        }
    }

    /// Every signal with its value: a map's in name order, a slice's in its order.
    pub fn iter(&self) -> impl Iterator<Item = (&'a str, f64)> + use<'a> {
        let (map, pairs) = match *self {
            SignalView::Map(map) => (Some(map), None),
            SignalView::Pairs(pairs) => (None, Some(pairs)),
        };
        let from_map = map.into_iter().flatten().map(|(k, v)| (k.as_str(), *v));
        let from_pairs = pairs.into_iter().flatten().map(|&(k, v)| (k, v));
        from_map.chain(from_pairs)
    }
}

/// Everything a decision looks at.
#[derive(Debug, Clone, Copy)]
pub struct FailureContext<'a> {
    /// Business type of the failed message.
    pub biz: &'a str,
    /// Error code of the failure.
    pub code: &'a str,
    /// The attempt that just failed, 1 for the first delivery.
    pub attempt: u32,
    /// How many times the message has been redriven from a dead-letter label (0 for a
    /// message never redriven); rules match it as `redrives`.
    pub redrives: u32,
    /// Time since the first delivery began.
    pub elapsed: Duration,
    /// A delay the failure itself asks for (HTTP 429 `Retry-After`).
    pub retry_after: Option<Duration>,
    /// The delay chosen before the previous attempt (zero on the first failure).
    pub last_delay: Duration,
    /// String attributes of the failure.
    pub attrs: &'a Attrs,
    /// Headers of the failed message.
    pub headers: &'a HeaderMap,
    /// When the failure happened: milliseconds since the Unix epoch (UTC), from the runtime's
    /// wall clock. Rule expressions see it as `now`.
    pub now: u64,
    /// Signals from the runtime.
    pub signals: SignalView<'a>,
}

impl<'a> FailureContext<'a> {
    /// A failure of `biz`/`code` at `attempt`, with nothing else known (no attrs, headers or
    /// signals; `now` is the epoch).
    pub fn new(biz: &'a str, code: &'a str, attempt: u32) -> Self {
        FailureContext {
            biz,
            code,
            attempt,
            redrives: 0,
            elapsed: Duration::ZERO,
            retry_after: None,
            last_delay: Duration::ZERO,
            attrs: &NO_ATTRS,
            headers: &NO_HEADERS,
            now: 0,
            signals: SignalView::NONE,
        }
    }

    /// The sample failure every expression is evaluated against at load.
    pub(crate) fn sample() -> FailureContext<'static> {
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
    /// Redrives of the message so far.
    pub redrives: u32,
    /// Time since the first delivery began.
    pub elapsed: Duration,
    /// A delay the failure asks for.
    pub retry_after: Option<Duration>,
    /// The delay chosen before the previous attempt.
    pub last_delay: Duration,
    /// String attributes.
    pub attrs: Attrs,
    /// The message's headers.
    pub headers: HeaderMap,
    /// When it failed, in milliseconds since the Unix epoch.
    pub now: u64,
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
            redrives: self.redrives,
            elapsed: self.elapsed,
            retry_after: self.retry_after,
            last_delay: self.last_delay,
            attrs: &self.attrs,
            headers: &self.headers,
            now: self.now,
            signals: SignalView::Map(&self.signals),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signal_view_reads_the_same_from_a_map_and_from_pairs() {
        let map = Signals::from([("b".to_string(), 2.0), ("a".to_string(), 1.0)]);
        let pairs = [("b", 2.0), ("a", 1.0), ("a", 9.0)];
        for view in [SignalView::Map(&map), SignalView::Pairs(&pairs)] {
            assert_eq!(
                (view.get("a"), view.get("b"), view.get("c")),
                (Some(1.0), Some(2.0), None)
            );
        }
        let from_map: Vec<_> = SignalView::Map(&map).iter().collect();
        assert_eq!(from_map, [("a", 1.0), ("b", 2.0)]);
        let from_pairs: Vec<_> = SignalView::Pairs(&pairs).iter().collect();
        assert_eq!(from_pairs, [("b", 2.0), ("a", 1.0), ("a", 9.0)]);
        assert_eq!(SignalView::NONE.get("a"), None);
    }
}
