//! One decision as the decision log keeps it: the whole context the set saw and what it
//! decided. The context is the body of `POST /v1/decide` (with the seed the jitter was drawn
//! from), so a logged context can be decided again anywhere: by a candidate (what-if), by the
//! admin API, or by `rebound explain` with its fields as flags.

use crate::context::{Attrs, FailureContext, HeaderMap, OwnedFailure, SignalView, Signals};
use crate::release::arm::{Arm, stable_hash_of};
use crate::types::{Decided, Decision, RuleRef};
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::time::Duration;

/// The seed of a runtime decision's jitter: a stable hash of the message's id, the attempt that
/// failed and its redrives (the same failure of the same message always draws the same delay,
/// two messages failing together draw apart), drawn with
/// [`jitter_rng`](crate::backoff::jitter_rng). Kept in [`LoggedContext::seed`]; a decision
/// replayed from the log uses the kept seed, never a new one.
pub fn jitter_seed(id: &str, attempt: u32, redrives: u32) -> u64 {
    stable_hash_of(&[
        id.as_bytes(),
        &attempt.to_le_bytes(),
        &redrives.to_le_bytes(),
    ])
}

/// What a decision saw, in the units of `POST /v1/decide` (milliseconds, `now` as ms since
/// the epoch here; [`LoggedContext::decide_body`] writes it as RFC 3339 for the route).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoggedContext {
    /// Business type.
    pub biz: String,
    /// Error code.
    pub code: String,
    /// The attempt that failed (1-based).
    pub attempt: u32,
    /// Redrives so far.
    #[serde(default)]
    pub redrives: u32,
    /// Since the first delivery, in the rules' time.
    #[serde(default)]
    pub elapsed_ms: u64,
    /// The delay the failure asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_ms: Option<u64>,
    /// The delay before this attempt, in the rules' time.
    #[serde(default)]
    pub last_delay_ms: u64,
    /// The failure's attributes.
    #[serde(default, skip_serializing_if = "Attrs::is_empty")]
    pub attrs: Attrs,
    /// The message's headers.
    #[serde(default, skip_serializing_if = "HeaderMap::is_empty")]
    pub headers: HeaderMap,
    /// When it failed: ms since the Unix epoch.
    pub now_ms: u64,
    /// The runtime's signals.
    #[serde(default, skip_serializing_if = "LoggedSignals::is_empty")]
    pub signals: LoggedSignals,
    /// The seed the jitter was drawn from.
    pub seed: u64,
}

impl LoggedContext {
    /// The context of `ctx`, its jitter drawn from `seed`.
    pub fn of(ctx: &FailureContext<'_>, seed: u64) -> LoggedContext {
        LoggedContext {
            biz: ctx.biz.to_owned(),
            code: ctx.code.to_owned(),
            attempt: ctx.attempt,
            redrives: ctx.redrives,
            elapsed_ms: millis(ctx.elapsed),
            retry_after_ms: ctx.retry_after.map(millis),
            last_delay_ms: millis(ctx.last_delay),
            attrs: ctx.attrs.clone(),
            headers: ctx.headers.clone(),
            now_ms: ctx.now,
            signals: LoggedSignals::of(ctx.signals),
            seed,
        }
    }

    /// The failure, owned, to decide again ([`OwnedFailure::context`]).
    pub fn failure(&self) -> OwnedFailure {
        OwnedFailure {
            biz: self.biz.clone(),
            code: self.code.clone(),
            attempt: self.attempt,
            redrives: self.redrives,
            elapsed: Duration::from_millis(self.elapsed_ms),
            retry_after: self.retry_after_ms.map(Duration::from_millis),
            last_delay: Duration::from_millis(self.last_delay_ms),
            attrs: self.attrs.clone(),
            headers: self.headers.clone(),
            now: self.now_ms,
            signals: self.signals.to_map(),
        }
    }

    /// The body of `POST /v1/decide` that decides this context again (`now` as RFC 3339).
    pub fn decide_body(&self) -> serde_json::Value {
        let mut body = serde_json::json!({
            "biz": self.biz,
            "code": self.code,
            "attempt": self.attempt,
            "redrives": self.redrives,
            "elapsed_ms": self.elapsed_ms,
            "last_delay_ms": self.last_delay_ms,
            "now": crate::wall_time::format_rfc3339(self.now_ms),
            "seed": self.seed,
        });
        let map = body.as_object_mut().expect("an object");
        if let Some(ms) = self.retry_after_ms {
            map.insert("retry_after_ms".into(), ms.into());
        }
        if !self.attrs.is_empty() {
            map.insert("attrs".into(), serde_json::json!(self.attrs));
        }
        if !self.headers.is_empty() {
            map.insert("headers".into(), serde_json::json!(self.headers));
        }
        if !self.signals.is_empty() {
            map.insert("signals".into(), serde_json::json!(self.signals.to_map()));
        }
        body
    }
}

/// The signals a decision saw, by name, first of a name kept (as [`SignalView::get`] reads
/// them). A runtime's fixed names are borrowed, not copied: logging a decision allocates
/// nothing for them. Written as a JSON object.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LoggedSignals(pub Vec<(Cow<'static, str>, f64)>);

impl LoggedSignals {
    /// The signals of `view`.
    pub fn of(view: SignalView<'_>) -> LoggedSignals {
        let mut out: Vec<(Cow<'static, str>, f64)> = Vec::new();
        let mut add = |name: Cow<'static, str>, v: f64| {
            if !out.iter().any(|(n, _)| *n == name) {
                out.push((name, v));
            }
        };
        match view {
            SignalView::Pairs(pairs) => {
                for &(k, v) in pairs {
                    add(Cow::Borrowed(k), v);
                }
            }
            SignalView::Map(map) => {
                for (k, v) in map {
                    add(Cow::Owned(k.clone()), *v);
                }
            }
        }
        LoggedSignals(out)
    }

    /// None at all.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// As the engine's map.
    pub fn to_map(&self) -> Signals {
        let mut map = Signals::new();
        for (k, v) in &self.0 {
            map.entry(k.to_string()).or_insert(*v);
        }
        map
    }
}

impl<const N: usize> From<[(Cow<'static, str>, f64); N]> for LoggedSignals {
    fn from(pairs: [(Cow<'static, str>, f64); N]) -> LoggedSignals {
        LoggedSignals(pairs.into())
    }
}

impl Serialize for LoggedSignals {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            map.serialize_entry(k.as_ref(), v)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for LoggedSignals {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<LoggedSignals, D::Error> {
        let map = Signals::deserialize(d)?;
        Ok(LoggedSignals(
            map.into_iter().map(|(k, v)| (Cow::Owned(k), v)).collect(),
        ))
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// What a set decided.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outcome {
    /// `retry` or `dead_letter`.
    pub action: Cow<'static, str>,
    /// A retry's delay, in the rules' time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_ms: Option<u64>,
    /// A dead letter's label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<Cow<'static, str>>,
    /// A dead letter's reason (`give_up`, `max_retries`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<Cow<'static, str>>,
    /// The deciding rule's id, or `defaults` (the names are interned: borrowed, not copied).
    pub rule: Cow<'static, str>,
    /// The set's version.
    pub version: String,
}

impl Outcome {
    /// The outcome of `decided`.
    pub fn of(decided: &Decided) -> Outcome {
        let (action, delay_ms, label, reason) = match &decided.decision {
            Decision::Retry { delay, .. } => ("retry", Some(millis(*delay)), None, None),
            Decision::DeadLetter { label, reason, .. } => (
                "dead_letter",
                None,
                Some(Cow::Borrowed(label.as_str())),
                Some(Cow::Borrowed(reason.as_str())),
            ),
        };
        let rule = match decided.decision.rule() {
            RuleRef::Rule(id) => id.as_str(),
            RuleRef::Defaults => "defaults",
        };
        Outcome {
            action: Cow::Borrowed(action),
            delay_ms,
            label,
            reason,
            rule: Cow::Borrowed(rule),
            version: decided.version.to_string(),
        }
    }
}

/// One entry of the decision log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoggedDecision {
    /// The message's id.
    pub id: String,
    /// What the set saw.
    pub context: LoggedContext,
    /// What it decided (the rules' decision, before any budget).
    pub outcome: Outcome,
    /// The canary arm that decided, while a canary ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arm: Option<Arm>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backoff::jitter_rng;
    use crate::{SourceFile, compile};

    #[test]
    fn a_logged_context_decides_again_as_it_did() {
        let yaml = "version: 1\nrules:\n  - id: j\n    match: { code: X }\n    retry: { max_retries: 9, backoff: { exponential: { base: 1s, max: 1m }, jitter: full } }\n";
        let set = compile(vec![SourceFile::new("a.yaml", "a.yaml", yaml)]).unwrap();
        for attempt in 1..6 {
            let failure = OwnedFailure {
                biz: "B".into(),
                code: "X".into(),
                attempt,
                now: 1_700_000_000_000,
                ..OwnedFailure::default()
            };
            let seed = jitter_seed("m-1", attempt, 0);
            let decided = set.decide(&failure.context(), &mut jitter_rng(seed));
            let logged = LoggedDecision {
                id: "m-1".into(),
                context: LoggedContext::of(&failure.context(), seed),
                outcome: Outcome::of(&decided),
                arm: None,
            };
            let back: LoggedDecision =
                serde_json::from_str(&serde_json::to_string(&logged).unwrap()).unwrap();
            assert_eq!(back, logged);
            let again = set.decide(
                &back.context.failure().context(),
                &mut jitter_rng(back.context.seed),
            );
            assert_eq!(Outcome::of(&again), logged.outcome);
        }
    }

    #[test]
    fn seeds_differ_by_message_and_attempt() {
        assert_ne!(jitter_seed("a", 1, 0), jitter_seed("b", 1, 0));
        assert_ne!(jitter_seed("a", 1, 0), jitter_seed("a", 2, 0));
        assert_eq!(jitter_seed("a", 1, 0), jitter_seed("a", 1, 0));
    }
}
