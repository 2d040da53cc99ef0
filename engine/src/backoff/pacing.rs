//! The arithmetic of one pacing, as `explain` shows it ([`Pacing`]), and where
//! [`RetryPolicy::pace`](super::RetryPolicy::pace) writes it ([`PaceRecorder`]): the decision
//! path records nothing, `explain` everything, and recording never changes a value or a draw.

use super::{BackoffKind, Jitter, RetryPolicy, ms};
use crate::context::FailureContext;
use crate::duration::DurationDisplay;
use serde::Serialize;
use std::fmt;
use std::time::Duration;

/// Where [`RetryPolicy::pace`] writes its arithmetic: `()` keeps nothing (the decision
/// path), `Option<Pacing>` keeps it all (`explain`).
pub(crate) trait PaceRecorder {
    /// Starts a new record, dropping any earlier one.
    fn start(&mut self, make: impl FnOnce() -> Pacing);
    /// Adds to the record.
    fn note(&mut self, f: impl FnOnce(&mut Pacing));
}

impl PaceRecorder for () {
    #[inline]
    fn start(&mut self, _: impl FnOnce() -> Pacing) {}
    #[inline]
    fn note(&mut self, _: impl FnOnce(&mut Pacing)) {}
}

impl PaceRecorder for Option<Pacing> {
    fn start(&mut self, make: impl FnOnce() -> Pacing) {
        *self = Some(make());
    }

    fn note(&mut self, f: impl FnOnce(&mut Pacing)) {
        if let Some(p) = self {
            f(p);
        }
    }
}

/// The arithmetic of one pacing (steps 3–7 of the decision procedure), as `explain` shows
/// it: every value is the one the decision used.
///
/// ```
/// use rand::SeedableRng;
/// use rebound_engine::{Decision, FailureContext, PolicyHandle, SourceFile, compile};
///
/// let yaml = "version: 1\nrules:\n  - id: db\n    retry:\n      backoff: { exponential: { base: 1s, factor: 2, max: 30s }, jitter: equal }\n";
/// let set = compile(vec![SourceFile::new("r.yaml", "r.yaml", yaml)]).unwrap();
/// let handle = PolicyHandle::new(set);
/// let ctx = FailureContext::new("ORDER", "DB_LOCK", 3);
/// let explained = handle.explain(&ctx, &mut rand::rngs::StdRng::seed_from_u64(7));
/// let pacing = explained.pacing.unwrap();
/// assert_eq!(pacing.step.as_deref(), Some("base · factor^(r−1) = 1s · 2^2 = 4s"));
/// assert_eq!(pacing.jitter_range_ms, Some((2_000, 4_000)));
/// // The same seed decides the same delay.
/// let decided = handle.decide(&ctx, &mut rand::rngs::StdRng::seed_from_u64(7));
/// let Decision::Retry { delay, .. } = decided.decision else { panic!("a retry") };
/// assert_eq!(Some(delay.as_millis() as u64), pacing.delay_ms);
/// ```
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Pacing {
    /// `r`: the retry this would be (the attempt that failed).
    pub retry: u32,
    /// The policy's `max_retries` (step 3: `r > max_retries` dead-letters).
    pub max_retries: u32,
    /// The backoff kind as written, e.g. `exponential { base: 1s, factor: 2, max: 1m }`.
    pub backoff: String,
    /// How the delay before jitter came about, e.g. `base · factor^(r−1) = 1s · 2^2 = 4s`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step: Option<String>,
    /// The delay before jitter, in ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub before_jitter_ms: Option<u64>,
    /// The jitter as written: `none`, `full`, `equal`, `decorrelated`, `20%`, `100ms`.
    pub jitter: String,
    /// The range jitter draws from, as the spec writes it, e.g. `[d/2, d]`.
    pub jitter_formula: &'static str,
    /// The inclusive range jitter drew from, in ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jitter_range_ms: Option<(u64, u64)>,
    /// The value drawn (the range's only value when it has one), in ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drawn_ms: Option<u64>,
    /// The backoff's `max`, in ms, which caps the drawn value.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_ms: Option<u64>,
    /// The drawn value after the clamp into `[0, max]`, in ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clamped_ms: Option<u64>,
    /// The delay the failure asked for (`Retry-After`), in ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_after_ms: Option<u64>,
    /// Whether the policy honours it (`respect_retry_after`).
    pub respect_retry_after: bool,
    /// The delay after step 5 (`max(d, retry_after)`), in ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delay_ms: Option<u64>,
    /// Time since the first delivery, in ms.
    pub elapsed_ms: u64,
    /// The policy's `max_elapsed`, in ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_elapsed_ms: Option<u64>,
    /// The reason pacing stopped (`max_retries` or `max_elapsed`), if it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stopped: Option<&'static str>,
}

impl Pacing {
    pub(super) fn new(policy: &RetryPolicy, ctx: &FailureContext<'_>) -> Pacing {
        Pacing {
            retry: ctx.attempt,
            max_retries: policy.max_retries,
            backoff: policy.backoff.kind.to_string(),
            step: None,
            before_jitter_ms: None,
            jitter: policy.backoff.jitter.to_string(),
            jitter_formula: policy.backoff.jitter.formula(),
            jitter_range_ms: None,
            drawn_ms: None,
            max_ms: policy.backoff.kind.max().map(ms),
            clamped_ms: None,
            retry_after_ms: ctx.retry_after.map(ms),
            respect_retry_after: policy.respect_retry_after,
            delay_ms: None,
            elapsed_ms: ms(ctx.elapsed),
            max_elapsed_ms: policy.max_elapsed.map(ms),
            stopped: None,
        }
    }
}

fn dd(v: u64) -> DurationDisplay {
    DurationDisplay(Duration::from_millis(v))
}

impl BackoffKind {
    /// How the delay `d` of retry `r` came about, as arithmetic on the written values.
    pub(super) fn step_text(&self, r: u32, d: u64) -> String {
        let n = r.max(1) - 1;
        // What the formula gives without saturation, to say when saturation stepped in.
        let (text, exact) = match self {
            BackoffKind::Fixed(_) => ("fixed".to_string(), None),
            BackoffKind::Linear { base, step, .. } => (
                format!(
                    "base + step·(r−1) = {} + {}·{n}",
                    DurationDisplay(*base),
                    DurationDisplay(*step)
                ),
                Some(ms(*base) as f64 + ms(*step) as f64 * f64::from(n)),
            ),
            BackoffKind::Exponential { base, factor, .. } => (
                format!(
                    "base · factor^(r−1) = {} · {factor}^{n}",
                    DurationDisplay(*base)
                ),
                Some(ms(*base) as f64 * factor.powf(f64::from(n))),
            ),
            BackoffKind::Schedule(entries) => {
                let i = (n as usize).min(entries.len().saturating_sub(1)) + 1;
                let past = if i < r as usize {
                    " (past the end: the last)"
                } else {
                    ""
                };
                (
                    format!("schedule entry {i} of {}{past}", entries.len()),
                    None,
                )
            }
            BackoffKind::Script(expr) => (format!("script '{}'", expr.source()), None),
        };
        let saturated = match exact {
            Some(x) if (x - d as f64).abs() >= 1.0 => " (saturated)",
            _ => "",
        };
        format!("{text} = {}{saturated}", dd(d))
    }
}

impl Jitter {
    /// The range it draws from, as the spec's table writes it.
    pub(super) fn formula(self) -> &'static str {
        match self {
            Jitter::None => "[d, d]",
            Jitter::Full => "[0, d]",
            Jitter::Equal => "[d/2, d]",
            Jitter::Decorrelated => "[base, max(base, 3·last_delay)]",
            Jitter::Proportional(_) => "[(1−p)·d, (1+p)·d]",
            Jitter::Additive(_) => "[d, d + j]",
        }
    }
}

/// The arithmetic as lines for people, one per step of the procedure.
impl fmt::Display for Pacing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "retry {} of max_retries {}{}",
            self.retry,
            self.max_retries,
            if self.stopped == Some("max_retries") {
                ": past max_retries, dead letter"
            } else {
                ""
            }
        )?;
        let Some(step) = &self.step else {
            return Ok(());
        };
        writeln!(f, "backoff {}: {step}", self.backoff)?;
        if let (Some((lo, hi)), Some(drawn)) = (self.jitter_range_ms, self.drawn_ms) {
            if lo == hi {
                writeln!(f, "jitter {}: {} (nothing drawn)", self.jitter, dd(drawn))?;
            } else {
                writeln!(
                    f,
                    "jitter {}: uniform in {} = [{}, {}], drew {}",
                    self.jitter,
                    self.jitter_formula,
                    dd(lo),
                    dd(hi),
                    dd(drawn)
                )?;
            }
        }
        if let (Some(drawn), Some(clamped)) = (self.drawn_ms, self.clamped_ms) {
            match self.max_ms {
                Some(max) if clamped < drawn => writeln!(
                    f,
                    "clamp [0, {}]: {} -> {}",
                    dd(max),
                    dd(drawn),
                    dd(clamped)
                )?,
                Some(max) => writeln!(f, "clamp [0, {}]: {} (within)", dd(max), dd(clamped))?,
                None => writeln!(f, "clamp: no max, {}", dd(clamped))?,
            }
        }
        match (self.retry_after_ms, self.respect_retry_after, self.delay_ms) {
            (None, _, _) => writeln!(f, "retry_after: none asked")?,
            (Some(asked), false, _) => writeln!(
                f,
                "retry_after: {} asked, ignored (respect_retry_after: false)",
                dd(asked)
            )?,
            (Some(asked), true, Some(delay)) => writeln!(
                f,
                "retry_after: max({}, {} asked) = {}",
                dd(self.clamped_ms.unwrap_or(delay)),
                dd(asked),
                dd(delay)
            )?,
            (Some(_), true, None) => {}
        }
        if let Some(delay) = self.delay_ms {
            let total = self.elapsed_ms.saturating_add(delay);
            match self.max_elapsed_ms {
                None => writeln!(f, "max_elapsed: none set")?,
                Some(limit) => {
                    let (op, then) = if self.stopped == Some("max_elapsed") {
                        (">", "dead letter")
                    } else {
                        ("<=", "retry")
                    };
                    writeln!(
                        f,
                        "max_elapsed: elapsed {} + {} = {} {op} {}: {then}",
                        dd(self.elapsed_ms),
                        dd(delay),
                        dd(total),
                        dd(limit)
                    )?
                }
            }
        }
        Ok(())
    }
}
