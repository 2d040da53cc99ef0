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

use std::sync::Arc;

use rebound_engine::PolicyHandle;
use rebound_engine::backoff::jitter_rng;
use rebound_engine::release::{Arm, jitter_seed};

use crate::fate::{Decided, Decision, FailureContext, FailurePolicy};
use crate::release::{Observed, Release};
pub use crate::time::TimeScale;
use crate::topology::Message;

/// Decides failures with the rule engine: one [`PolicyHandle::decide`] per failure, on the set
/// that is current at that moment (or the canary's, for a message in its slice), with jitter
/// drawn from [`jitter_seed`] of the message and the attempt, so that the decision log's
/// context decides again as it did. See the [module docs](self) for the time scale.
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
    release: Option<Arc<Release>>,
}

impl RulePolicy {
    /// A policy deciding with `handle` (share the reloader's, so reloads take effect) at
    /// `scale`.
    pub fn new(handle: Arc<PolicyHandle>, scale: TimeScale) -> RulePolicy {
        RulePolicy {
            handle,
            scale,
            release: None,
        }
    }

    /// The same policy, consulting `release` at every decision: the decision log, a shadow
    /// set, a canary.
    pub fn with_release(mut self, release: Arc<Release>) -> RulePolicy {
        self.release = Some(release);
        self
    }

    /// The handle decisions go through.
    pub fn handle(&self) -> &Arc<PolicyHandle> {
        &self.handle
    }

    /// The time scale.
    pub fn scale(&self) -> TimeScale {
        self.scale
    }

    /// The release state it consults, if any.
    pub fn release(&self) -> Option<&Arc<Release>> {
        self.release.as_ref()
    }

    /// The rules' decision of `ctx` (already in the rules' time), with the release's
    /// canary, shadow and log.
    fn decide_in_rules_time(&self, ctx: &FailureContext<'_>, message: &Message) -> Decided {
        let seed = jitter_seed(message.id.as_str(), ctx.attempt, ctx.redrives);
        let rng = &mut jitter_rng(seed);
        let Some(release) = &self.release else {
            return self.handle.decide(ctx, rng);
        };
        let (decided, arm) = match release.canary_arm(message) {
            Some((Arm::Canary, set)) => (set.decide(ctx, rng), Some(Arm::Canary)),
            Some((Arm::Stable, _)) => (self.handle.decide(ctx, rng), Some(Arm::Stable)),
            None => (self.handle.decide(ctx, rng), None),
        };
        if let Some(shadow) = release.shadow_run().as_ref() {
            let theirs = shadow.set().decide(ctx, &mut jitter_rng(seed));
            shadow.count(&decided, &theirs);
        }
        release.log().record(message, ctx, seed, &decided, arm);
        decided
    }
}

/// `d` without its part below a millisecond.
fn whole_ms(d: std::time::Duration) -> std::time::Duration {
    std::time::Duration::from_millis(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

impl FailurePolicy for RulePolicy {
    fn decide(&self, ctx: &FailureContext<'_>, message: &Message) -> Decided {
        // In whole milliseconds, as the decision log keeps them: a logged context decides
        // again exactly as it did (a `max_elapsed` of 4m30s is not 270,000.5 ms apart).
        let rules_ctx = FailureContext {
            elapsed: whole_ms(self.scale.to_rules(ctx.elapsed)),
            last_delay: whole_ms(self.scale.to_rules(ctx.last_delay)),
            retry_after: ctx.retry_after.map(whole_ms),
            ..*ctx
        };
        let mut decided = self.decide_in_rules_time(&rules_ctx, message);
        if let Decision::Retry { delay, rule } = &mut decided.decision {
            let real = self.scale.to_real(*delay);
            tracing::trace!(
                biz = ctx.biz, code = ctx.code, rule = %rule, attempt = ctx.attempt,
                rules_delay_ms = delay.as_millis() as u64,
                delay_ms = real.as_millis() as u64, "decided: retry"
            );
            *delay = real;
        }
        decided
    }

    fn observe(&self, message: &Message, event: Observed) {
        if let Some(release) = &self.release {
            release.observe(message, event);
        }
    }

    /// The set's `heat.weights`: the first code pattern that matches, else 1.
    fn heat_weight(&self, code: &str) -> f64 {
        self.handle.current().heat().weight(code)
    }

    /// The set's `heat.half_life` (30 s of rule time unless it says), in real time: heat
    /// cools `F` times faster at `--time-scale F`, as every other rule-time duration does.
    fn heat_half_life(&self) -> std::time::Duration {
        self.scale.to_real(self.handle.current().heat().half_life())
    }

    fn adaptive(&self) -> Option<(Arc<rebound_engine::CompiledSet>, TimeScale)> {
        Some((self.handle.current(), self.scale))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fate::{GiveUpReason, RuleRef, Signals};
    use crate::topology::{Failure, FailureRecord, Message};
    use rebound_engine::{SourceFile, compile};
    use std::time::Duration;

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

    /// What the spout task asks: the message's metadata, the failure and the signals.
    fn decide(p: &RulePolicy, m: &Message, f: &Failure, elapsed: Duration, s: Signals) -> Decided {
        let signals: rebound_engine::Signals = s
            .named()
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect();
        p.decide(
            &FailureContext {
                biz: &m.biz,
                code: &f.code,
                attempt: m.retry.attempt,
                redrives: m.retry.redrives,
                elapsed,
                retry_after: f.retry_after,
                last_delay: m.retry.last_delay(),
                attrs: &f.attrs,
                headers: m.headers.view(),
                now: 0,
                signals: rebound_engine::SignalView::Map(&signals),
            },
            m,
        )
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
        let Decision::DeadLetter {
            label,
            reason,
            rule,
        } = v.decision
        else {
            panic!("{v:?}")
        };
        assert_eq!((label.as_str(), reason), ("L3", GiveUpReason::GiveUp));
        assert_eq!(rule.as_str(), "bad");
        assert_eq!(
            v.version.as_str(),
            p.handle().current().version().as_str(),
            "the verdict carries the deciding set's version"
        );
    }

    #[test]
    fn delays_are_scaled_and_retry_after_is_in_rule_time() {
        let p = policy(100.0);
        let f = Failure::new("RATE_LIMITED", "429").with_retry_after(Duration::from_secs(45));
        match decide(&p, &msg(1), &f, Duration::ZERO, Signals::default()).decision {
            Decision::Retry { delay, rule } => {
                assert_eq!(rule.as_str(), "limited");
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
        assert!(
            matches!(early.decision, Decision::Retry { .. }),
            "{early:?}"
        );
        let late = decide(
            &p,
            &msg(2),
            &f,
            Duration::from_millis(550),
            Signals::default(),
        );
        assert!(
            matches!(
                late.decision,
                Decision::DeadLetter {
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
        m.retry.failures.push(FailureRecord {
            attempt: 1,
            code: "HOT".into(),
            message: String::new(),
            attrs: Default::default(),
            at: crate::time::Timestamp::ZERO,
            delay: Some(Duration::from_secs(2)), // 20 s of rule time at 10×
            rule: RuleRef::Defaults,
            version: rebound_engine::Version::from_hash(0),
        });
        let hot = Signals {
            fail_rate: 0.9,
            ..Signals::default()
        };
        let v = decide(&p, &m, &Failure::new("HOT", ""), Duration::ZERO, hot);
        assert!(
            matches!(&v.decision, Decision::DeadLetter { label, .. } if label.as_str() == "L9"),
            "{v:?}"
        );
        let calm = decide(
            &p,
            &m,
            &Failure::new("HOT", ""),
            Duration::ZERO,
            Signals::default(),
        );
        assert!(matches!(calm.decision, Decision::Retry { .. }), "{calm:?}");
    }

    #[test]
    fn heat_weighs_one_and_cools_by_the_default_half_life_in_real_time() {
        let p = policy(10.0);
        assert_eq!(p.heat_weight("NET_TIMEOUT"), 1.0);
        assert_eq!(
            p.heat_half_life(),
            Duration::from_secs(3),
            "30 s of rule time at 10×"
        );
    }

    #[test]
    fn heat_weighs_and_cools_as_the_sets_heat_says() {
        let p = policy(10.0);
        let with_heat = format!(
            "{RULES}heat:\n  half_life: 1m\n  weights:\n    - {{ code: \"NET_*\", weight: 3 }}\n"
        );
        let set = compile(vec![SourceFile::new(
            "a.yaml",
            "a.yaml",
            with_heat.as_str(),
        )])
        .unwrap();
        p.handle().swap(Arc::new(set));
        assert_eq!(p.heat_weight("NET_TIMEOUT"), 3.0);
        assert_eq!(p.heat_weight("DB_LOCK_WAIT"), 1.0);
        assert_eq!(
            p.heat_half_life(),
            Duration::from_secs(6),
            "1 m of rule time at 10×"
        );
    }

    #[test]
    fn a_swapped_set_decides_the_next_failure() {
        let p = policy(1.0);
        let f = Failure::new("UNKNOWN", "");
        let before = decide(&p, &msg(1), &f, Duration::ZERO, Signals::default());
        assert!(
            matches!(before.decision, Decision::Retry { delay, .. } if delay == Duration::from_secs(1))
        );
        let faster = RULES.replace(
            "fixed: 1s } }\n  dead_letter: L2",
            "fixed: 3s } }\n  dead_letter: L2",
        );
        let set = compile(vec![SourceFile::new("a.yaml", "a.yaml", faster.as_str())]).unwrap();
        let new_version = set.version().as_str().to_owned();
        p.handle().swap(Arc::new(set));
        let after = decide(&p, &msg(1), &f, Duration::ZERO, Signals::default());
        match after.decision {
            Decision::Retry { delay, .. } => {
                assert_eq!(delay, Duration::from_secs(3));
                assert_eq!(after.version.as_str(), new_version);
            }
            other => panic!("{other:?}"),
        }
    }
}
