//! The rule engine as the runtime's [`FailurePolicy`]: [`RulePolicy`] asks a live
//! [`PolicyHandle`] (the reload pipeline's handle), so an edited rule file changes the decisions
//! that follow.
//!
//! # Time scale
//!
//! `--time-scale F` makes delays and timeouts run F times faster. The runtime itself runs in real
//! time (tokio's clock, real wall-clock timestamps in the store); the rules keep speaking in
//! their own, unscaled time. [`TimeScale`] converts at this seam and only here:
//!
//! - the engine sees `elapsed × F` and `last_delay × F` (rule time), and `retry_after` as the
//!   failure gave it (a dependency's `Retry-After` is in rule time too);
//! - the delay it answers is divided by F before the runtime schedules it.
//!
//! Persisted due times are real timestamps, so they keep their meaning across a restart (with
//! any F: only the delays decided after the restart change speed). The message timeout is
//! scaled where the topology's `Config` is built.

use std::cell::RefCell;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use rand::rngs::SmallRng;
use rebound_engine::{
    Decision, FailureContext as EngineContext, PolicyHandle, RuleRef, SignalView, Version,
};

use crate::fate::{FailureContext, FailurePolicy, GiveUpReason, Verdict};
use crate::topology::{PolicyVersion, RuleId};

/// A time scale that is not a finite number in the accepted range.
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
#[error("the time scale must be a number between 0.001 and 1000000, got {0}")]
pub struct InvalidTimeScale(pub f64);

/// How many times faster than the rules' time the runtime runs (`--time-scale F`).
///
/// ```
/// use rebound_runtime::policy::TimeScale;
/// use std::time::Duration;
/// let f = TimeScale::new(100.0).unwrap();
/// assert_eq!(f.to_real(Duration::from_secs(30)), Duration::from_millis(300));
/// assert_eq!(f.to_rules(Duration::from_millis(300)), Duration::from_secs(30));
/// assert!(TimeScale::new(0.0).is_err());
/// ```
#[derive(Clone, Copy, PartialEq)]
pub struct TimeScale(f64);

impl TimeScale {
    /// Real time: the rules' delays are waited as written.
    pub const REAL: TimeScale = TimeScale(1.0);

    /// A scale of `factor`, between 0.001 and 1,000,000.
    pub fn new(factor: f64) -> Result<TimeScale, InvalidTimeScale> {
        if factor.is_finite() && (0.001..=1e6).contains(&factor) {
            Ok(TimeScale(factor))
        } else {
            Err(InvalidTimeScale(factor))
        }
    }

    /// The factor F.
    pub fn factor(self) -> f64 {
        self.0
    }

    /// A duration in the rules' time, as real time (divided by F, to the nearest nanosecond).
    pub fn to_real(self, rules: Duration) -> Duration {
        Self::nanos(rules.as_nanos() as f64 / self.0)
    }

    /// A real duration, in the rules' time (multiplied by F, to the nearest nanosecond).
    pub fn to_rules(self, real: Duration) -> Duration {
        Self::nanos(real.as_nanos() as f64 * self.0)
    }

    fn nanos(n: f64) -> Duration {
        // Integer nanoseconds, so that 100 ms at 100× is exactly 1 ms.
        if n >= u64::MAX as f64 {
            Duration::MAX
        } else {
            Duration::from_nanos(n.round() as u64)
        }
    }
}

impl Default for TimeScale {
    fn default() -> Self {
        TimeScale::REAL
    }
}

impl fmt::Debug for TimeScale {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TimeScale({})", self.0)
    }
}

impl fmt::Display for TimeScale {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}×", self.0)
    }
}

thread_local! {
    /// Jitter for decisions made on this thread; `decide` takes `&self`, and spout tasks move
    /// between worker threads, so the RNG lives with the thread, not the policy.
    static RNG: RefCell<SmallRng> = RefCell::new(rand::make_rng());
}

/// Decides failures with the rule engine: one [`PolicyHandle::decide`] per failure, on the set
/// that is current at that moment. See the [module docs](self) for the time scale.
///
/// ```
/// use rebound_engine::{PolicyHandle, SourceFile, compile};
/// use rebound_runtime::policy::{RulePolicy, TimeScale};
/// use std::sync::Arc;
/// let yaml = "version: 1\nrules:\n  - id: bad\n    match: { code: BAD_JSON }\n    give_up: true\n    dead_letter: L3\n";
/// let set = compile(vec![SourceFile::new("a.yaml", "a.yaml", yaml)]).unwrap();
/// let policy = RulePolicy::new(Arc::new(PolicyHandle::new(set)), TimeScale::REAL);
/// # let _ = policy;
/// ```
#[derive(Clone, Debug)]
pub struct RulePolicy {
    handle: Arc<PolicyHandle>,
    scale: TimeScale,
}

impl RulePolicy {
    /// A policy deciding with `handle` (share the reloader's, so reloads take effect) at
    /// `scale`.
    pub fn new(handle: Arc<PolicyHandle>, scale: TimeScale) -> RulePolicy {
        RulePolicy { handle, scale }
    }

    /// The handle decisions go through.
    pub fn handle(&self) -> &Arc<PolicyHandle> {
        &self.handle
    }

    /// The time scale.
    pub fn scale(&self) -> TimeScale {
        self.scale
    }
}

fn rule_id(rule: &RuleRef) -> RuleId {
    RuleId::from(rule.as_str())
}

fn version(v: &Version) -> PolicyVersion {
    PolicyVersion::from(v.as_str())
}

impl FailurePolicy for RulePolicy {
    fn decide(&self, ctx: &FailureContext<'_>) -> Verdict {
        let named = ctx.signals.named();
        let engine_ctx = EngineContext {
            biz: ctx.biz(),
            code: ctx.code(),
            attempt: ctx.attempt(),
            elapsed: self.scale.to_rules(ctx.elapsed),
            retry_after: ctx.failure.retry_after,
            last_delay: self.scale.to_rules(ctx.message.retry.last_delay()),
            attrs: &ctx.failure.attrs,
            signals: SignalView::Pairs(&named),
        };
        let decided = RNG.with(|rng| self.handle.decide(&engine_ctx, &mut *rng.borrow_mut()));
        match decided.decision {
            Decision::Retry { delay, rule } => {
                let real = self.scale.to_real(delay);
                tracing::trace!(
                    id = %ctx.message.id, rule = %rule, attempt = ctx.attempt(),
                    rules_delay_ms = delay.as_millis() as u64,
                    delay_ms = real.as_millis() as u64, "decided: retry"
                );
                Verdict::Retry {
                    delay: real,
                    rule: rule_id(&rule),
                    version: version(&decided.version),
                }
            }
            Decision::DeadLetter {
                label,
                reason,
                rule,
            } => Verdict::DeadLetter {
                label: label.as_str().to_owned(),
                reason: match reason {
                    rebound_engine::GiveUpReason::GiveUp => GiveUpReason::GiveUp,
                    rebound_engine::GiveUpReason::MaxRetries => GiveUpReason::MaxRetries,
                    rebound_engine::GiveUpReason::MaxElapsed => GiveUpReason::MaxElapsed,
                    rebound_engine::GiveUpReason::PolicyError => GiveUpReason::PolicyError,
                },
                rule: rule_id(&rule),
                version: version(&decided.version),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fate::Signals;
    use crate::topology::{Failure, LastFailure, Message};
    use rebound_engine::{SourceFile, compile};

    const RULES: &str = "version: 1
defaults:
  retry: { max_retries: 2, backoff: { fixed: 1s } }
  dead_letter: L2
rules:
  - id: bad
    match: { code: BAD_JSON }
    give_up: true
    dead_letter: L3
  - id: limited
    match: { code: RATE_LIMITED }
    retry: { max_retries: 5, respect_retry_after: true, backoff: { fixed: 1s } }
    dead_letter: L1
  - id: lock
    match: { code: DB_LOCK }
    retry: { max_retries: 5, max_elapsed: 1m, backoff: { fixed: 10s } }
    dead_letter: L2
  - id: hot
    match: { code: HOT }
    if: 'signals.fail_rate > 0.5 && last_delay == 20000'
    give_up: true
    dead_letter: L9
";

    fn policy(scale: f64) -> RulePolicy {
        let set = compile(vec![SourceFile::new("a.yaml", "a.yaml", RULES)]).unwrap();
        RulePolicy::new(
            Arc::new(PolicyHandle::new(set)),
            TimeScale::new(scale).unwrap(),
        )
    }

    fn decide(p: &RulePolicy, m: &Message, f: &Failure, elapsed: Duration, s: Signals) -> Verdict {
        p.decide(&FailureContext {
            message: m,
            failure: f,
            elapsed,
            signals: &s,
        })
    }

    fn msg(attempt: u32) -> Message {
        let mut m = Message::new("order-1", "ORDER", "{}");
        m.retry.attempt = attempt;
        m
    }

    #[test]
    fn give_up_codes_dead_letter_at_once_under_their_label() {
        let p = policy(1.0);
        let v = decide(
            &p,
            &msg(1),
            &Failure::new("BAD_JSON", "x"),
            Duration::ZERO,
            Signals::default(),
        );
        let Verdict::DeadLetter {
            label,
            reason,
            rule,
            version,
        } = v
        else {
            panic!("{v:?}")
        };
        assert_eq!((label.as_str(), reason), ("L3", GiveUpReason::GiveUp));
        assert_eq!(rule.0.as_ref(), "bad");
        assert_eq!(
            version.0.as_ref(),
            p.handle().current().version().as_str(),
            "the verdict carries the deciding set's version"
        );
    }

    #[test]
    fn delays_are_scaled_and_retry_after_is_in_rule_time() {
        let p = policy(100.0);
        let f = Failure::new("RATE_LIMITED", "429").with_retry_after(Duration::from_secs(45));
        match decide(&p, &msg(1), &f, Duration::ZERO, Signals::default()) {
            Verdict::Retry { delay, rule, .. } => {
                assert_eq!(rule.0.as_ref(), "limited");
                assert_eq!(
                    delay,
                    Duration::from_millis(450),
                    "45 s of rule time at 100×"
                );
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn elapsed_is_seen_in_rule_time() {
        // 1 m of max_elapsed at 100× is 600 ms of real time: 550 ms + a 10 s (100 ms) delay passes it.
        let p = policy(100.0);
        let f = Failure::new("DB_LOCK", "busy");
        let early = decide(
            &p,
            &msg(1),
            &f,
            Duration::from_millis(400),
            Signals::default(),
        );
        assert!(matches!(early, Verdict::Retry { .. }), "{early:?}");
        let late = decide(
            &p,
            &msg(2),
            &f,
            Duration::from_millis(550),
            Signals::default(),
        );
        assert!(
            matches!(
                late,
                Verdict::DeadLetter {
                    reason: GiveUpReason::MaxElapsed,
                    ..
                }
            ),
            "{late:?}"
        );
    }

    #[test]
    fn signals_and_last_delay_reach_the_rules() {
        let p = policy(10.0);
        let mut m = msg(2);
        m.retry.last_failure = Some(Box::new(LastFailure {
            code: "HOT".into(),
            message: String::new(),
            at: std::time::SystemTime::UNIX_EPOCH,
            delay: Duration::from_secs(2), // 20 s of rule time at 10×
            rule: "defaults".into(),
            version: "x".into(),
        }));
        let hot = Signals {
            fail_rate: 0.9,
            ..Signals::default()
        };
        let v = decide(&p, &m, &Failure::new("HOT", ""), Duration::ZERO, hot);
        assert!(
            matches!(&v, Verdict::DeadLetter { label, .. } if label == "L9"),
            "{v:?}"
        );
        let calm = decide(
            &p,
            &m,
            &Failure::new("HOT", ""),
            Duration::ZERO,
            Signals::default(),
        );
        assert!(matches!(calm, Verdict::Retry { .. }), "{calm:?}");
    }

    #[test]
    fn a_swapped_set_decides_the_next_failure() {
        let p = policy(1.0);
        let f = Failure::new("UNKNOWN", "");
        let before = decide(&p, &msg(1), &f, Duration::ZERO, Signals::default());
        assert!(matches!(before, Verdict::Retry { delay, .. } if delay == Duration::from_secs(1)));
        let faster = RULES.replace(
            "fixed: 1s } }\n  dead_letter: L2",
            "fixed: 3s } }\n  dead_letter: L2",
        );
        let set = compile(vec![SourceFile::new("a.yaml", "a.yaml", faster.as_str())]).unwrap();
        let new_version = set.version().as_str().to_owned();
        p.handle().swap(Arc::new(set));
        match decide(&p, &msg(1), &f, Duration::ZERO, Signals::default()) {
            Verdict::Retry { delay, version, .. } => {
                assert_eq!(delay, Duration::from_secs(3));
                assert_eq!(version.0.as_ref(), new_version);
            }
            other => panic!("{other:?}"),
        }
    }
}
