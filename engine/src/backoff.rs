//! How a retry is paced: the policy of a rule (its `retry:` with every default resolved),
//! the backoff kinds, jitter and clamping of the spec, and steps 3–7 of the decision
//! procedure (`RetryPolicy::pace`). `explain` records the arithmetic of those steps as a
//! [`Pacing`]; recording never changes a value or a draw of the RNG.
//!
//! Everything here works in whole milliseconds and saturates instead of overflowing: a
//! computed delay that leaves `u64` milliseconds becomes the backoff's `max`, and a linear,
//! exponential or script delay without `max` never exceeds one day.

use crate::context::FailureContext;
use crate::duration::DurationDisplay;
/// A compiled rhai expression (a delay script's); [`Expr::source`] gives it as written.
pub use crate::script::Expr;
use crate::script::{RunError, ScriptDelay, ScriptEngine};
use crate::types::GiveUpReason;
use rand::{Rng, RngExt};
use std::fmt;
use std::time::Duration;

mod doubling;
mod pacing;

pub use doubling::Doubling;

/// The generator a seeded decision draws its jitter from: the runtime's (seeded by
/// [`jitter_seed`](crate::release::jitter_seed) of the message), `rebound decide --seed`,
/// `rebound explain --seed`, `POST /v1/decide`'s `seed`, a rule test case's `seed` and
/// what-if's replays, so that one seed gives one delay everywhere. Xoshiro256++ by name (not
/// `StdRng`, whose algorithm may change between releases and whose setup costs a ChaCha
/// block per decision: four times the decision itself).
pub type JitterRng = rand::rngs::Xoshiro256PlusPlus;

/// A [`JitterRng`] seeded with `seed`.
pub fn jitter_rng(seed: u64) -> JitterRng {
    <JitterRng as rand::SeedableRng>::seed_from_u64(seed)
}

pub(crate) use pacing::PaceRecorder;
pub use pacing::Pacing;

/// The ceiling of a linear, exponential or script delay that has no `max`.
pub(crate) const ONE_DAY: Duration = Duration::from_secs(86_400);
const ONE_DAY_MS: u64 = 86_400_000;

/// A rule's retry policy: the fields of its `retry:` (over the defaults') with every default
/// resolved.
#[derive(Debug, Clone)]
pub struct RetryPolicy {
    /// Re-deliveries allowed after the first delivery.
    pub max_retries: u32,
    /// No retry may be scheduled to start after this much time since the first delivery.
    pub max_elapsed: Option<Duration>,
    /// How long to wait.
    pub backoff: Backoff,
    /// Honour a delay the failure itself asks for.
    pub respect_retry_after: bool,
}

/// A backoff kind plus its jitter.
#[derive(Debug, Clone)]
pub struct Backoff {
    /// The delay before jitter.
    pub kind: BackoffKind,
    /// How the delay is randomised.
    pub jitter: Jitter,
}

/// The delay for retry `r` before jitter.
#[derive(Debug, Clone)]
pub enum BackoffKind {
    /// Always the same delay.
    Fixed(Duration),
    /// `base + step·(r−1)`.
    Linear {
        /// Delay of retry 1.
        base: Duration,
        /// Added per retry.
        step: Duration,
        /// Cap after jitter.
        max: Option<Duration>,
    },
    /// `base · factor^(r−1)`.
    Exponential {
        /// Delay of retry 1.
        base: Duration,
        /// Growth per retry.
        factor: f64,
        /// Cap after jitter.
        max: Option<Duration>,
    },
    /// Entry `r`; past the end, the last entry.
    Schedule(Vec<Duration>),
    /// A rhai expression yielding milliseconds.
    Script(Expr),
}

/// How the delay `d` is randomised.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Jitter {
    /// `d`
    None,
    /// Uniform in `[0, d]`.
    Full,
    /// Uniform in `[d/2, d]`.
    Equal,
    /// Uniform in `[base, max(base, 3·last_delay)]`.
    Decorrelated,
    /// Uniform in `[(1−p)·d, (1+p)·d]`; holds `p` (0.2 for `"20%"`).
    Proportional(f64),
    /// Uniform in `[d, d + j]`.
    Additive(Duration),
}

impl Default for RetryPolicy {
    /// The built-in defaults of the spec.
    fn default() -> Self {
        RetryPolicy {
            max_retries: 3,
            max_elapsed: None,
            backoff: Backoff::default(),
            respect_retry_after: true,
        }
    }
}

impl Default for Backoff {
    /// `{ exponential: { base: 1s, factor: 2, max: 1m }, jitter: full }`
    fn default() -> Self {
        Backoff {
            kind: BackoffKind::Exponential {
                base: Duration::from_secs(1),
                factor: 2.0,
                max: Some(Duration::from_secs(60)),
            },
            jitter: Jitter::Full,
        }
    }
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// An arithmetic result that may have left `u64`, saturated as the spec says.
fn saturate(value: Option<u64>, max: Option<Duration>) -> u64 {
    match (value, max) {
        (Some(v), Some(_)) => v,
        (None, Some(m)) => ms(m),
        (Some(v), None) => v.min(ONE_DAY_MS),
        (None, None) => ONE_DAY_MS,
    }
}

impl BackoffKind {
    /// The cap applied after jitter, if any.
    pub fn max(&self) -> Option<Duration> {
        match self {
            BackoffKind::Linear { max, .. } | BackoffKind::Exponential { max, .. } => *max,
            _ => None,
        }
    }

    /// The delay of retry `r` (1-based) before jitter, in milliseconds.
    ///
    /// Only a script can fail; its error makes the deciding rule not match.
    pub(crate) fn base_delay_ms(
        &self,
        r: u32,
        ctx: &FailureContext<'_>,
        scripts: &ScriptEngine,
    ) -> Result<u64, RunError> {
        let steps = u64::from(r.max(1) - 1);
        Ok(match self {
            BackoffKind::Fixed(d) => ms(*d),
            BackoffKind::Linear { base, step, max } => {
                let value = ms(*step)
                    .checked_mul(steps)
                    .and_then(|s| s.checked_add(ms(*base)));
                saturate(value, *max)
            }
            // 0 · factor^(r−1) is 0 however large the power: nothing overflows.
            BackoffKind::Exponential { base, .. } if base.is_zero() => 0,
            BackoffKind::Exponential { base, factor, max } if *factor == 2.0 => {
                // The common case, exactly and without floating point.
                let value = u32::try_from(steps)
                    .ok()
                    .and_then(|s| 1u64.checked_shl(s).filter(|_| s < 64))
                    .and_then(|pow| ms(*base).checked_mul(pow));
                saturate(value, *max)
            }
            BackoffKind::Exponential { base, factor, max } => {
                let value = ms(*base) as f64 * factor.powf(steps as f64);
                let fits = value.is_finite() && value < u64::MAX as f64;
                saturate(fits.then_some(value.max(0.0) as u64), *max)
            }
            BackoffKind::Schedule(entries) => {
                let i = usize::try_from(steps).unwrap_or(usize::MAX);
                entries.get(i).or(entries.last()).map_or(0, |d| ms(*d))
            }
            BackoffKind::Script(expr) => match scripts.delay(expr, ctx)? {
                ScriptDelay::Millis(v) => saturate(Some(v), None),
                ScriptDelay::Huge => ONE_DAY_MS,
            },
        })
    }

    /// The `base` decorrelated jitter starts from, given the un-jittered delay `d`.
    fn jitter_base_ms(&self, d: u64) -> u64 {
        match self {
            BackoffKind::Fixed(v) => ms(*v),
            BackoffKind::Linear { base, .. } | BackoffKind::Exponential { base, .. } => ms(*base),
            BackoffKind::Schedule(_) | BackoffKind::Script(_) => d,
        }
    }
}

impl Backoff {
    /// The inclusive range jitter draws from for un-jittered delay `d` (before the `max`
    /// clamp). Deterministic kinds give `(d, d)`.
    pub(crate) fn jitter_range_ms(&self, d: u64, last_delay: Duration) -> (u64, u64) {
        match self.jitter {
            Jitter::None => (d, d),
            Jitter::Full => (0, d),
            Jitter::Equal => (d - d / 2, d),
            Jitter::Decorrelated => {
                let base = self.kind.jitter_base_ms(d);
                let last = match ms(last_delay) {
                    0 => base,
                    l => l,
                };
                (base, base.max(last.saturating_mul(3)))
            }
            Jitter::Proportional(p) => {
                let lo = (d as f64 * (1.0 - p)).ceil().max(0.0);
                let hi = (d as f64 * (1.0 + p)).floor();
                let hi = if hi >= u64::MAX as f64 {
                    u64::MAX
                } else {
                    hi as u64
                };
                ((lo as u64).min(hi), hi)
            }
            Jitter::Additive(j) => (d, d.saturating_add(ms(j))),
        }
    }

    /// Applies jitter to `d` and clamps into `[0, max]` (steps 4 of the procedure).
    #[cfg(test)]
    pub(crate) fn jittered_ms<R: Rng + ?Sized>(
        &self,
        d: u64,
        last_delay: Duration,
        rng: &mut R,
    ) -> u64 {
        self.clamped_ms(self.drawn_ms(self.jitter_range_ms(d, last_delay), rng))
    }

    /// The value jitter draws from `(lo, hi)`: `lo` without a draw when the range is one
    /// value, so a deterministic backoff never touches the RNG.
    fn drawn_ms<R: Rng + ?Sized>(&self, (lo, hi): (u64, u64), rng: &mut R) -> u64 {
        if lo >= hi {
            lo
        } else {
            rng.random_range(lo..=hi)
        }
    }

    /// `value` clamped into `[0, max]` when the backoff has a `max`.
    fn clamped_ms(&self, value: u64) -> u64 {
        match self.kind.max() {
            Some(max) => value.min(ms(max)),
            None => value,
        }
    }
}

/// The outcome of steps 3–7 for a policy: retry after a delay, or give up for a reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Paced {
    Retry(Duration),
    Stop(GiveUpReason),
}

impl RetryPolicy {
    /// Steps 3–7 of the decision procedure, writing each value it computes into `rec`
    /// (`&mut ()` keeps none). Fails only when a delay script fails.
    pub(crate) fn pace<R: Rng + ?Sized>(
        &self,
        ctx: &FailureContext<'_>,
        rng: &mut R,
        scripts: &ScriptEngine,
        rec: &mut impl PaceRecorder,
    ) -> Result<Paced, RunError> {
        let r = ctx.attempt;
        rec.start(|| Pacing::new(self, ctx));
        if r > self.max_retries {
            rec.note(|p| p.stopped = Some(GiveUpReason::MaxRetries.as_str()));
            return Ok(Paced::Stop(GiveUpReason::MaxRetries));
        }
        let d = self.backoff.kind.base_delay_ms(r, ctx, scripts)?;
        let range = self.backoff.jitter_range_ms(d, ctx.last_delay);
        let drawn = self.backoff.drawn_ms(range, rng);
        let clamped = self.backoff.clamped_ms(drawn);
        rec.note(|p| {
            p.step = Some(self.backoff.kind.step_text(r, d));
            p.before_jitter_ms = Some(d);
            p.jitter_range_ms = Some(range);
            p.drawn_ms = Some(drawn);
            p.clamped_ms = Some(clamped);
        });
        let mut delay = Duration::from_millis(clamped);
        if self.respect_retry_after
            && let Some(asked) = ctx.retry_after
        {
            delay = delay.max(asked);
        }
        rec.note(|p| p.delay_ms = Some(ms(delay)));
        if let Some(limit) = self.max_elapsed
            && ctx.elapsed.saturating_add(delay) > limit
        {
            rec.note(|p| p.stopped = Some(GiveUpReason::MaxElapsed.as_str()));
            return Ok(Paced::Stop(GiveUpReason::MaxElapsed));
        }
        Ok(Paced::Retry(delay))
    }
}

/// As written in a rule file, e.g. `exponential { base: 1s, factor: 2, max: 1m }`.
impl fmt::Display for BackoffKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let max = |m: &Option<Duration>| {
            m.map(|m| format!(", max: {}", DurationDisplay(m)))
                .unwrap_or_default()
        };
        match self {
            BackoffKind::Fixed(v) => write!(f, "fixed {}", DurationDisplay(*v)),
            BackoffKind::Linear { base, step, max: m } => write!(
                f,
                "linear {{ base: {}, step: {}{} }}",
                DurationDisplay(*base),
                DurationDisplay(*step),
                max(m)
            ),
            BackoffKind::Exponential {
                base,
                factor,
                max: m,
            } => write!(
                f,
                "exponential {{ base: {}, factor: {factor}{} }}",
                DurationDisplay(*base),
                max(m)
            ),
            BackoffKind::Schedule(entries) => {
                let list: Vec<String> = entries
                    .iter()
                    .map(|e| DurationDisplay(*e).to_string())
                    .collect();
                write!(f, "schedule [{}]", list.join(", "))
            }
            BackoffKind::Script(expr) => write!(f, "script '{}'", expr.source()),
        }
    }
}

/// As written in a rule file: `none`, `full`, `equal`, `decorrelated`, `20%`, `100ms`.
impl fmt::Display for Jitter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Jitter::None => f.write_str("none"),
            Jitter::Full => f.write_str("full"),
            Jitter::Equal => f.write_str("equal"),
            Jitter::Decorrelated => f.write_str("decorrelated"),
            Jitter::Proportional(p) => write!(f, "{}%", p * 100.0),
            Jitter::Additive(j) => write!(f, "{}", DurationDisplay(*j)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::SmallRng;

    fn d(ms: u64) -> Duration {
        Duration::from_millis(ms)
    }

    fn base(kind: &BackoffKind, r: u32) -> u64 {
        kind.base_delay_ms(r, &FailureContext::sample(), &ScriptEngine::new())
            .unwrap()
    }

    #[test]
    fn every_kind_follows_the_table() {
        assert_eq!(base(&BackoffKind::Fixed(d(100)), 7), 100);
        let linear = BackoffKind::Linear {
            base: d(1_000),
            step: d(500),
            max: Some(d(10_000)),
        };
        assert_eq!([1, 2, 3].map(|r| base(&linear, r)), [1_000, 1_500, 2_000]);
        let exp = BackoffKind::Exponential {
            base: d(500),
            factor: 2.0,
            max: None,
        };
        assert_eq!([1, 2, 4].map(|r| base(&exp, r)), [500, 1_000, 4_000]);
        let sched = BackoffKind::Schedule(vec![d(1_000), d(5_000)]);
        assert_eq!(
            [1, 2, 3, 99].map(|r| base(&sched, r)),
            [1_000, 5_000, 5_000, 5_000]
        );
    }

    #[test]
    fn overflow_saturates_at_max_or_one_day() {
        let capped = BackoffKind::Exponential {
            base: d(500),
            factor: 2.0,
            max: Some(d(300_000)),
        };
        assert_eq!(base(&capped, u32::MAX), 300_000);
        let uncapped = BackoffKind::Exponential {
            base: d(500),
            factor: 2.0,
            max: None,
        };
        assert_eq!(base(&uncapped, u32::MAX), ONE_DAY_MS);
        let linear = BackoffKind::Linear {
            base: d(u64::MAX),
            step: d(u64::MAX),
            max: Some(d(9)),
        };
        assert_eq!(base(&linear, u32::MAX), 9);
    }

    #[test]
    fn a_zero_base_stays_zero_at_any_retry() {
        for (factor, max) in [(2.0, None), (3.0, Some(d(60_000))), (1.5, None)] {
            let exp = BackoffKind::Exponential {
                base: d(0),
                factor,
                max,
            };
            assert_eq!([1, 64, 65, 800, u32::MAX].map(|r| base(&exp, r)), [0; 5]);
        }
    }

    #[test]
    fn the_step_says_how_the_delay_before_jitter_came_about() {
        let sched = BackoffKind::Schedule(vec![d(1_000), d(5_000)]);
        assert_eq!(sched.step_text(2, 5_000), "schedule entry 2 of 2 = 5s");
        assert_eq!(
            sched.step_text(4, 5_000),
            "schedule entry 2 of 2 (past the end: the last) = 5s"
        );
        let linear = BackoffKind::Linear {
            base: d(1_000),
            step: d(500),
            max: Some(d(10_000)),
        };
        let at = |r| linear.step_text(r, base(&linear, r));
        assert_eq!(at(3), "base + step·(r−1) = 1s + 500ms·2 = 2s");
        // `max` caps after jitter; before it, only leaving u64 (or one day) saturates.
        assert!(!at(u32::MAX).ends_with("(saturated)"));
        let huge = BackoffKind::Exponential {
            base: d(500),
            factor: 2.0,
            max: None,
        };
        assert!(
            huge.step_text(u32::MAX, ONE_DAY_MS)
                .starts_with("base · factor^(r−1) = 500ms · 2^4294967294 = ")
                && huge
                    .step_text(u32::MAX, ONE_DAY_MS)
                    .ends_with(" (saturated)")
        );
        assert_eq!(
            BackoffKind::Fixed(d(100)).step_text(9, 100),
            "fixed = 100ms"
        );
        assert_eq!(
            linear.to_string(),
            "linear { base: 1s, step: 500ms, max: 10s }"
        );
        assert_eq!(Jitter::Proportional(0.2).to_string(), "20%");
    }

    #[test]
    fn jitter_draws_from_the_spec_ranges() {
        let with = |jitter| Backoff {
            kind: BackoffKind::Fixed(d(1_000)),
            jitter,
        };
        assert_eq!(
            with(Jitter::None).jitter_range_ms(1_000, d(0)),
            (1_000, 1_000)
        );
        assert_eq!(with(Jitter::Full).jitter_range_ms(1_000, d(0)), (0, 1_000));
        assert_eq!(
            with(Jitter::Equal).jitter_range_ms(1_000, d(0)),
            (500, 1_000)
        );
        assert_eq!(
            with(Jitter::Decorrelated).jitter_range_ms(1_000, d(0)),
            (1_000, 3_000)
        );
        assert_eq!(
            with(Jitter::Decorrelated).jitter_range_ms(1_000, d(2_000)),
            (1_000, 6_000)
        );
        assert_eq!(
            with(Jitter::Proportional(0.2)).jitter_range_ms(1_000, d(0)),
            (800, 1_200)
        );
        assert_eq!(
            with(Jitter::Additive(d(100))).jitter_range_ms(1_000, d(0)),
            (1_000, 1_100)
        );
        let mut rng = SmallRng::seed_from_u64(7);
        for _ in 0..100 {
            let v = with(Jitter::Full).jittered_ms(1_000, d(0), &mut rng);
            assert!(v <= 1_000);
        }
    }
}
