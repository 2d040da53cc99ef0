//! The judge of a failure: one pure step from a failed message to its fate.
//!
//! In: the message (its retry metadata), the [`Failure`] that ended its tree, the runtime's
//! [`Signals`] (gathered by the spout task, this failure included), the [`FailurePolicy`],
//! the topology's [`RetryGate`] (budgets) and the time (`now` for waiting, `wall` for what
//! is recorded). Out: a [`Verdict`], a [`Retry`] with its due instant, or a [`DeadLetter`].
//!
//! The judge asks the policy (a panicking policy dead-letters with
//! [`GiveUpReason::PolicyError`]), refuses a retry its budget has no room for when the budget
//! says `dead_letter` ([`GiveUpReason::Budget`], the deciding rule's label), saturates the
//! delay at [`MAX_RETRY_DELAY`] and records the failure in the message's history. It touches
//! no queue, no sink and no spout: the spout task routes what it returns.

use std::time::Duration;

use rebound_engine::{CompiledSet, SignalView};
use tokio::time::Instant;

use super::{
    DeadLetter, Decided, Decision, FailureContext, FailurePolicy, GiveUpReason, Label,
    MAX_RETRY_DELAY, RuleRef, Signals, Version,
};
use crate::adaptive::{RetryGate, gate};
use crate::executor::guarded;
use crate::time::{TimeScale, Timestamp};
use crate::topology::{Failure, FailureRecord, Message};

/// One failed tree, as the judge hears it.
pub(crate) struct Case {
    /// The message (`retry.attempt` = deliveries made, this one included).
    pub(crate) message: Message,
    /// What ended its tree.
    pub(crate) failure: Failure,
    /// The runtime's state, this failure included.
    pub(crate) signals: Signals,
    /// Monotonic time, for the due instant and the budgets.
    pub(crate) now: Instant,
    /// Wall time, for the message's age and what is recorded.
    pub(crate) wall: Timestamp,
}

/// A retry the judge scheduled: the message, its failure recorded (rule, version and delay
/// in its last [`FailureRecord`]), due at `due`.
#[derive(Debug)]
pub(crate) struct Retry {
    /// When it is due (`now + delay`).
    pub(crate) due: Instant,
    /// The delay, saturated at [`MAX_RETRY_DELAY`].
    pub(crate) delay: Duration,
    /// The message, with the failure pushed onto its history.
    pub(crate) message: Message,
}

impl Retry {
    /// The failure this retry is for (the last of the message's history).
    pub(crate) fn record(&self) -> &FailureRecord {
        self.message
            .retry
            .last_failure()
            .expect("the judge recorded the failure")
    }
}

/// A failure's fate.
#[derive(Debug)]
pub(crate) enum Verdict {
    /// Schedule it again.
    Retry(Retry),
    /// Give up on it.
    DeadLetter(DeadLetter),
}

/// The policy's set, when it declares budgets or breakers.
fn rules(policy: &dyn FailurePolicy) -> Option<(std::sync::Arc<CompiledSet>, TimeScale)> {
    policy.adaptive().filter(|(set, _)| gate::active(set))
}

/// The label of `rule` in the policy's set (for a retry its budget dead-letters).
fn label_of(policy: &dyn FailurePolicy, rule: &RuleRef) -> Label {
    let Some((set, _)) = policy.adaptive() else {
        return Label::from("default");
    };
    match rule {
        RuleRef::Rule(id) => set
            .rule(*id)
            .map_or(set.defaults().dead_letter, |r| r.dead_letter()),
        RuleRef::Defaults => set.defaults().dead_letter,
    }
}

/// The dead letter of a message its source refused (`NextMessage::Refused`), never delivered:
/// the rules are asked only for the label of the rule that matches `failure` (at attempt 1,
/// the attempt it would have had); the reason is [`GiveUpReason::Refused`]. A panicking
/// policy gives the label `POLICY_ERROR`, as in [`judge`].
pub(crate) fn refuse(
    mut message: Message,
    failure: Failure,
    policy: &dyn FailurePolicy,
    wall: Timestamp,
) -> DeadLetter {
    let first = *message.retry.first_delivery.get_or_insert(wall);
    let ctx = FailureContext {
        biz: &message.biz,
        code: &failure.code,
        attempt: 1,
        redrives: message.retry.redrives,
        elapsed: wall - first,
        retry_after: failure.retry_after,
        last_delay: message.retry.last_delay(),
        attrs: &failure.attrs,
        headers: message.headers.view(),
        now: wall.as_millis(),
        signals: SignalView::Pairs(&[]),
    };
    let (label, rule, version) = match guarded(|| policy.decide(&ctx, &message)) {
        Ok(Decided {
            decision: Decision::DeadLetter { label, rule, .. },
            version,
        }) => (label, rule, version),
        Ok(Decided {
            decision: Decision::Retry { rule, .. },
            version,
        }) => (label_of(policy, &rule), rule, version),
        Err(p) => {
            tracing::error!(id = %message.id, panic = %p.message, at = p.at(), "failure policy panicked labelling a refused message");
            (
                Label::from("POLICY_ERROR"),
                RuleRef::Rule("none".into()),
                Version::from_hash(0),
            )
        }
    };
    DeadLetter {
        message,
        failure,
        label,
        reason: GiveUpReason::Refused,
        rule,
        version,
        at: wall,
    }
}

/// Decides the fate of `case`. See the [module docs](self).
pub(crate) fn judge(case: Case, policy: &dyn FailurePolicy, gate: &RetryGate) -> Verdict {
    let Case {
        mut message,
        failure,
        signals,
        now,
        wall,
    } = case;
    // On the stack: the decision borrows them, nothing is copied.
    let named = signals.named();
    let elapsed = message
        .retry
        .first_delivery
        .map_or(Duration::ZERO, |first| wall - first);
    let ctx = FailureContext {
        biz: &message.biz,
        code: &failure.code,
        attempt: message.retry.attempt,
        redrives: message.retry.redrives,
        elapsed,
        retry_after: failure.retry_after,
        last_delay: message.retry.last_delay(),
        attrs: &failure.attrs,
        headers: message.headers.view(),
        now: wall.as_millis(),
        signals: SignalView::Pairs(&named),
    };
    let decided = guarded(|| policy.decide(&ctx, &message)).unwrap_or_else(|p| {
        tracing::error!(id = %message.id, panic = %p.message, at = p.at(), "failure policy panicked; dead-lettering");
        Decided {
            decision: Decision::DeadLetter {
                label: Label::from("POLICY_ERROR"),
                reason: GiveUpReason::PolicyError,
                rule: RuleRef::Rule("none".into()),
            },
            version: Version::from_hash(0),
        }
    });
    let version = decided.version;
    // A retry its budget has no room for, and that says `dead_letter`, ends here.
    let decision = match decided.decision {
        Decision::Retry { rule, .. }
            if rules(policy)
                .is_some_and(|(set, scale)| !gate.retry_allowed(&set, scale, &ctx, now)) =>
        {
            Decision::DeadLetter {
                label: label_of(policy, &rule),
                reason: GiveUpReason::Budget,
                rule,
            }
        }
        decision => decision,
    };
    match decision {
        Decision::Retry { delay, rule } => {
            // Saturate here, once: the due instant, the stored due time and the stored delay
            // are all computed from this.
            let delay = delay.min(MAX_RETRY_DELAY);
            message.retry.failures.push(FailureRecord {
                attempt: message.retry.attempt,
                at: wall,
                code: failure.code,
                message: failure.message,
                attrs: failure.attrs,
                rule,
                version,
                delay: Some(delay),
            });
            // An Instant that cannot reach that far (not Linux's) waits a century instead.
            let due = now
                .checked_add(delay)
                .unwrap_or_else(|| now + Duration::from_secs(100 * 365 * 86_400));
            Verdict::Retry(Retry {
                due,
                delay,
                message,
            })
        }
        Decision::DeadLetter {
            label,
            reason,
            rule,
        } => {
            policy.observe(&message, crate::release::Observed::DeadLettered);
            Verdict::DeadLetter(DeadLetter {
                message,
                failure,
                label,
                reason,
                rule,
                version,
                at: wall,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use rebound_engine::{PolicyHandle, SourceFile, compile};

    use super::*;
    use crate::fate::memory::FixedPolicy;
    use crate::policy::RulePolicy;
    use crate::topology::FuseConfig;

    const RULES: &str = "version: 1
defaults:
  retry: { max_retries: 3, backoff: { fixed: 2s } }
  dead_letter: L_DEFAULT
rules:
  - id: bad
    match: { code: BAD_JSON }
    give_up: true
    dead_letter: L_BAD
  - id: paid
    match: { biz: PAYMENT }
    retry: { max_retries: 5, backoff: { fixed: 1s } }
    dead_letter: L_PAY
  - id: tripped
    match: { code: NET }
    if: 'signals.breaker_open == 1'
    give_up: true
    dead_letter: L_BREAKER
  - id: net
    match: { code: NET }
    retry: { max_retries: 5, backoff: { fixed: 500ms } }
    dead_letter: L_NET
budgets:
  - { id: pay, match: { biz: PAYMENT }, ratio: 0%, min_per_s: 1, window: 1s, exhausted: dead_letter }
";

    fn rule_policy() -> RulePolicy {
        let set = compile(vec![SourceFile::new("a.yaml", "a.yaml", RULES)]).unwrap();
        RulePolicy::new(Arc::new(PolicyHandle::new(set)), TimeScale::REAL)
    }

    /// A gate whose fuse is off: only the set's budgets act.
    fn gate(now: Instant) -> RetryGate {
        let off = FuseConfig {
            enabled: false,
            ..FuseConfig::default()
        };
        RetryGate::new(&off, now)
    }

    /// A first delivery of `biz` that failed with `code`.
    fn case(biz: &str, code: &str, now: Instant) -> Case {
        let mut message = Message::new("m1", biz, "{}");
        message.retry.attempt = 1;
        message.retry.first_delivery = Some(Timestamp::from_millis(1_000));
        Case {
            message,
            failure: Failure::new(code, "it failed"),
            signals: Signals::default(),
            now,
            wall: Timestamp::from_millis(1_500),
        }
    }

    fn retry(v: Verdict) -> Retry {
        match v {
            Verdict::Retry(r) => r,
            Verdict::DeadLetter(d) => panic!("dead-lettered: {d:?}"),
        }
    }

    fn letter(v: Verdict) -> DeadLetter {
        match v {
            Verdict::DeadLetter(d) => d,
            Verdict::Retry(r) => panic!("retried: {r:?}"),
        }
    }

    #[test]
    fn a_retry_is_due_after_its_delay_with_the_failure_recorded() {
        let now = Instant::now();
        let r = retry(judge(case("ORDER", "NET", now), &rule_policy(), &gate(now)));
        assert_eq!(r.delay, Duration::from_millis(500));
        assert_eq!(r.due, now + Duration::from_millis(500));
        let record = r.record();
        assert_eq!(record.code, "NET");
        assert_eq!(record.rule.as_str(), "net");
        assert_eq!(record.attempt, 1);
        assert_eq!(record.at, Timestamp::from_millis(1_500));
        assert_eq!(record.delay, Some(Duration::from_millis(500)));
        assert_eq!(r.message.retry.failures.records().len(), 1);
    }

    #[test]
    fn a_give_up_rule_dead_letters_with_its_label() {
        let now = Instant::now();
        let d = letter(judge(
            case("ORDER", "BAD_JSON", now),
            &rule_policy(),
            &gate(now),
        ));
        assert_eq!(d.label, Label::from("L_BAD"));
        assert_eq!(d.reason, GiveUpReason::GiveUp);
        assert_eq!(d.rule.as_str(), "bad");
        assert_eq!(d.at, Timestamp::from_millis(1_500));
        assert_eq!(d.failure.code, "BAD_JSON");
        assert!(
            d.message.retry.failures.is_empty(),
            "the letter holds its own failure"
        );
    }

    #[test]
    fn the_last_retry_allowed_dead_letters_with_max_retries() {
        let now = Instant::now();
        let mut c = case("ORDER", "OTHER", now);
        c.message.retry.attempt = 4;
        let d = letter(judge(c, &rule_policy(), &gate(now)));
        assert_eq!(d.label, Label::from("L_DEFAULT"));
        assert_eq!(d.reason, GiveUpReason::MaxRetries);
    }

    #[test]
    fn a_budget_without_room_dead_letters_the_retry_with_its_rules_label() {
        let now = Instant::now();
        let (policy, gate) = (rule_policy(), gate(now));
        // The floor: one retry a second over a one-second window.
        let first = retry(judge(case("PAYMENT", "X", now), &policy, &gate));
        assert_eq!(first.record().rule.as_str(), "paid");
        let (set, scale) = policy.adaptive().unwrap();
        assert!(
            gate.admit(&set, scale, &first.message, now),
            "fired: the room is used"
        );
        let d = letter(judge(case("PAYMENT", "X", now), &policy, &gate));
        assert_eq!(d.reason, GiveUpReason::Budget);
        assert_eq!(d.label, Label::from("L_PAY"));
        assert_eq!(d.rule.as_str(), "paid");
        // Out of the budget's scope: retried.
        retry(judge(case("ORDER", "X", now), &policy, &gate));
    }

    #[test]
    fn an_open_breaker_reaches_the_rules_as_a_signal() {
        let now = Instant::now();
        let (policy, gate) = (rule_policy(), gate(now));
        let mut c = case("ORDER", "NET", now);
        c.signals.breaker_open = true;
        let d = letter(judge(c, &policy, &gate));
        assert_eq!(d.label, Label::from("L_BREAKER"));
        retry(judge(case("ORDER", "NET", now), &policy, &gate));
    }

    #[test]
    fn a_delay_past_the_bound_saturates() {
        let now = Instant::now();
        let policy = FixedPolicy {
            base_delay: Duration::MAX,
            max_delay: Duration::MAX,
            ..FixedPolicy::default()
        };
        let r = retry(judge(case("ORDER", "X", now), &policy, &gate(now)));
        assert_eq!(r.delay, MAX_RETRY_DELAY);
        assert_eq!(r.record().delay, Some(MAX_RETRY_DELAY));
        assert!(r.due > now);
    }

    #[test]
    fn a_panicking_policy_dead_letters_with_policy_error() {
        struct Panics;
        impl FailurePolicy for Panics {
            fn decide(&self, _: &FailureContext<'_>, _: &Message) -> Decided {
                panic!("no rules today")
            }
        }
        let now = Instant::now();
        let d = letter(judge(case("ORDER", "X", now), &Panics, &gate(now)));
        assert_eq!(d.reason, GiveUpReason::PolicyError);
        assert_eq!(d.label, Label::from("POLICY_ERROR"));
        assert_eq!(d.version, Version::from_hash(0));
    }

    #[test]
    fn the_policy_sees_the_message_age_and_the_signals() {
        /// What the policy saw: the message's age, the wall time and the signals.
        type Seen = (Duration, u64, Vec<(String, f64)>);
        struct Sees(std::sync::Mutex<Option<Seen>>);
        impl FailurePolicy for Sees {
            fn decide(&self, ctx: &FailureContext<'_>, m: &Message) -> Decided {
                let signals = match ctx.signals {
                    SignalView::Pairs(p) => p.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect(),
                    _ => Vec::new(),
                };
                *self.0.lock().unwrap() = Some((ctx.elapsed, ctx.now, signals));
                FixedPolicy::default().decide(ctx, m)
            }
        }
        let now = Instant::now();
        let policy = Sees(std::sync::Mutex::new(None));
        let mut c = case("ORDER", "X", now);
        c.signals.fail_rate = 0.25;
        judge(c, &policy, &gate(now));
        let (elapsed, at, signals) = policy.0.lock().unwrap().take().unwrap();
        assert_eq!(elapsed, Duration::from_millis(500));
        assert_eq!(at, 1_500);
        assert!(signals.contains(&("fail_rate".to_owned(), 0.25)));
    }
}
