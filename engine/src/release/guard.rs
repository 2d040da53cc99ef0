//! A canary's guard and the judgement on its two arms (`docs/spec/release.md`, "Canary").
//!
//! The judgement is a pure function of the guard, the two arms' figures, the canary's age and
//! its `promote_after`:
//!
//! - until **both** arms have `min_samples` first deliveries nothing is compared: the canary
//!   runs, and past `promote_after` it is [`Judgement::Held`] (never promoted on no data);
//! - with the samples, a canary ratio (retries or dead letters per first delivery) above the
//!   stable arm's by more than the guard is a [`Judgement::RollBack`], at once, whatever the
//!   age;
//! - with the samples and the guard holding, past `promote_after` it is
//!   [`Judgement::Promote`]; before, [`Judgement::Running`].
//!
//! A held canary is judged again on each tick, so once the samples come it is promoted or
//! rolled back. A relative guard over a stable ratio of 0 allows 0: any retry (or dead letter)
//! in a canary whose stable arm has none exceeds it (`canary > factor × 0`).

use std::fmt;
use std::time::Duration;

/// One arm's outcomes over the canary's life.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ArmFigures {
    /// Messages delivered for the first time in this arm.
    pub first_deliveries: u64,
    /// Retries fired in this arm.
    pub retries: u64,
    /// Dead letters of this arm.
    pub dead_letters: u64,
    /// Acked messages by the attempt that succeeded: `[0]` acked at attempt 1.
    pub acked_by_attempt: Vec<u64>,
}

impl ArmFigures {
    /// Retries fired per first delivery; 0 with no first delivery.
    pub fn retry_ratio(&self) -> f64 {
        ratio(self.retries, self.first_deliveries)
    }

    /// Dead letters per first delivery; 0 with no first delivery.
    pub fn dead_letter_ratio(&self) -> f64 {
        ratio(self.dead_letters, self.first_deliveries)
    }

    /// Adds `more`'s counts to these (a total over several canaries, or nodes).
    pub fn add(&mut self, more: &ArmFigures) {
        self.first_deliveries += more.first_deliveries;
        self.retries += more.retries;
        self.dead_letters += more.dead_letters;
        if self.acked_by_attempt.len() < more.acked_by_attempt.len() {
            self.acked_by_attempt.resize(more.acked_by_attempt.len(), 0);
        }
        for (t, m) in self.acked_by_attempt.iter_mut().zip(&more.acked_by_attempt) {
            *t += m;
        }
    }

    /// These counts less `then`'s, counter by counter (what was counted since `then`).
    pub fn since(&self, then: &ArmFigures) -> ArmFigures {
        ArmFigures {
            first_deliveries: self.first_deliveries.saturating_sub(then.first_deliveries),
            retries: self.retries.saturating_sub(then.retries),
            dead_letters: self.dead_letters.saturating_sub(then.dead_letters),
            acked_by_attempt: self
                .acked_by_attempt
                .iter()
                .enumerate()
                .map(|(i, x)| x.saturating_sub(then.acked_by_attempt.get(i).copied().unwrap_or(0)))
                .collect(),
        }
    }
}

/// Both arms' figures, as a rollback records them in the rule history.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Arms {
    /// The arm the current set decides.
    pub stable: ArmFigures,
    /// The arm the candidate decides.
    pub canary: ArmFigures,
}

impl Arms {
    /// Adds `more`'s counts to both arms.
    pub fn add(&mut self, more: &Arms) {
        self.stable.add(&more.stable);
        self.canary.add(&more.canary);
    }

    /// Both arms' counts less `then`'s.
    pub fn since(&self, then: &Arms) -> Arms {
        Arms {
            stable: self.stable.since(&then.stable),
            canary: self.canary.since(&then.canary),
        }
    }
}

fn ratio(n: u64, per: u64) -> f64 {
    if per == 0 { 0.0 } else { n as f64 / per as f64 }
}

/// A relative bound: `+20%` allows up to 1.2× the stable arm's ratio.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Relative {
    percent: f64,
}

impl Relative {
    /// `+percent%`; `percent` must be finite and not negative.
    pub fn new(percent: f64) -> Option<Relative> {
        (percent.is_finite() && percent >= 0.0).then_some(Relative { percent })
    }

    /// Parses `+N%` (N a non-negative decimal, `+0%` included).
    pub fn parse(text: &str) -> Option<Relative> {
        let number = text.trim().strip_prefix('+')?.strip_suffix('%')?;
        if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
            return None;
        }
        Relative::new(number.parse().ok()?)
    }

    /// The percent over the stable arm's ratio.
    pub fn percent(self) -> f64 {
        self.percent
    }

    /// The factor on the stable arm's ratio: 1.2 for `+20%`.
    pub fn factor(self) -> f64 {
        1.0 + self.percent / 100.0
    }

    /// Whether `canary` exceeds `stable` by more than this bound.
    pub fn exceeded(self, canary: f64, stable: f64) -> bool {
        canary > stable * self.factor()
    }
}

impl fmt::Display for Relative {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "+{}%", self.percent)
    }
}

/// A guard that could not be read: which field, and what was expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("guard.{field}: {message}")]
pub struct GuardError {
    /// `retry_ratio`, `dead_letter_ratio` or `min_samples`.
    pub field: &'static str,
    /// What is wrong and what was expected.
    pub message: String,
}

/// A canary's guard: how far its ratios may exceed the stable arm's, and how many first
/// deliveries each arm needs before anything is compared.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Guard {
    /// The canary's retry ratio may be at most this over the stable arm's.
    pub retry_ratio: Relative,
    /// The canary's dead-letter ratio may be at most this over the stable arm's.
    pub dead_letter_ratio: Relative,
    /// First deliveries each arm needs before the arms are compared.
    pub min_samples: u64,
}

/// The retry ratio's bound when the guard does not give one: `+20%`.
pub const DEFAULT_RETRY_RATIO: f64 = 20.0;
/// The dead-letter ratio's bound when the guard does not give one: `+10%`.
pub const DEFAULT_DEAD_LETTER_RATIO: f64 = 10.0;
/// The samples each arm needs when the guard does not say: 500.
pub const DEFAULT_MIN_SAMPLES: u64 = 500;

impl Default for Guard {
    /// The spec's example: `+20%`, `+10%`, 500.
    fn default() -> Guard {
        Guard {
            retry_ratio: Relative {
                percent: DEFAULT_RETRY_RATIO,
            },
            dead_letter_ratio: Relative {
                percent: DEFAULT_DEAD_LETTER_RATIO,
            },
            min_samples: DEFAULT_MIN_SAMPLES,
        }
    }
}

impl Guard {
    /// A guard from its fields as given (each absent one takes its default).
    pub fn parse(
        retry_ratio: Option<&str>,
        dead_letter_ratio: Option<&str>,
        min_samples: Option<u64>,
    ) -> Result<Guard, GuardError> {
        let relative = |field: &'static str, text: Option<&str>, default: Relative| {
            match text {
            None => Ok(default),
            Some(t) => Relative::parse(t).ok_or_else(|| GuardError {
                field,
                message: format!(
                    "expected a relative bound over the stable arm such as \"+20%\" (\"+0%\" allowed), not {t:?}"
                ),
            }),
        }
        };
        let default = Guard::default();
        Ok(Guard {
            retry_ratio: relative("retry_ratio", retry_ratio, default.retry_ratio)?,
            dead_letter_ratio: relative(
                "dead_letter_ratio",
                dead_letter_ratio,
                default.dead_letter_ratio,
            )?,
            min_samples: match min_samples {
                Some(0) => {
                    return Err(GuardError {
                        field: "min_samples",
                        message: "expected at least 1 first delivery per arm, not 0".into(),
                    });
                }
                Some(n) => n,
                None => default.min_samples,
            },
        })
    }
}

/// Which ratio broke the guard, and by how much.
#[derive(Debug, Clone, PartialEq)]
pub struct Breach {
    /// `retry ratio` or `dead-letter ratio`.
    pub ratio: &'static str,
    /// The canary arm's ratio.
    pub canary: f64,
    /// The stable arm's ratio.
    pub stable: f64,
    /// The guard's factor on the stable ratio.
    pub factor: f64,
}

/// What a canary's figures say should happen now.
#[derive(Debug, Clone, PartialEq)]
pub enum Judgement {
    /// Keep running: not old enough to promote, and nothing wrong seen.
    Running,
    /// Roll it back now: a ratio broke the guard.
    RollBack {
        /// The figures that caused it, in a sentence:
        /// `retry ratio 0.950 > 1.2 × stable 0.100 (n=812/790)` (canary n / stable n).
        why: String,
        /// The same, as numbers.
        breach: Breach,
    },
    /// Promote it: old enough, both arms sampled, the guard holds.
    Promote,
    /// Old enough, but an arm has fewer than `min_samples` first deliveries: not promoted.
    Held {
        /// Which arm lacks samples, in a sentence.
        why: String,
    },
}

/// Judges a canary of age `elapsed` by its arms' figures (see the module's page).
pub fn judge(
    guard: &Guard,
    stable: &ArmFigures,
    canary: &ArmFigures,
    elapsed: Duration,
    promote_after: Duration,
) -> Judgement {
    let sampled = stable.first_deliveries >= guard.min_samples
        && canary.first_deliveries >= guard.min_samples;
    if !sampled {
        if elapsed < promote_after {
            return Judgement::Running;
        }
        return Judgement::Held {
            why: format!(
                "held: each arm needs {} first deliveries before it is compared; stable has {}, canary {}",
                guard.min_samples, stable.first_deliveries, canary.first_deliveries
            ),
        };
    }
    let checks = [
        (
            "retry ratio",
            guard.retry_ratio,
            canary.retry_ratio(),
            stable.retry_ratio(),
        ),
        (
            "dead-letter ratio",
            guard.dead_letter_ratio,
            canary.dead_letter_ratio(),
            stable.dead_letter_ratio(),
        ),
    ];
    for (ratio, bound, c, s) in checks {
        if bound.exceeded(c, s) {
            let breach = Breach {
                ratio,
                canary: c,
                stable: s,
                factor: bound.factor(),
            };
            let why = format!(
                "{ratio} {c:.3} > {} × stable {s:.3} (n={}/{})",
                bound.factor(),
                canary.first_deliveries,
                stable.first_deliveries
            );
            return Judgement::RollBack { why, breach };
        }
    }
    if elapsed >= promote_after {
        Judgement::Promote
    } else {
        Judgement::Running
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn arm(first: u64, retries: u64, dead: u64) -> ArmFigures {
        ArmFigures {
            first_deliveries: first,
            retries,
            dead_letters: dead,
            acked_by_attempt: vec![],
        }
    }

    const MIN: Duration = Duration::from_secs(60);

    #[test]
    fn relative_bounds_parse_as_plus_percent_only() {
        assert_eq!(Relative::parse("+20%").map(Relative::factor), Some(1.2));
        assert_eq!(Relative::parse("+0%").map(Relative::factor), Some(1.0));
        assert_eq!(Relative::parse("+2.5%").map(Relative::percent), Some(2.5));
        for bad in [
            "20%", "+20", "-5%", "+%", "+abc%", "1.2", "", "+1e3%", "+NaN%",
        ] {
            assert_eq!(Relative::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn a_guard_takes_defaults_and_names_the_bad_field() {
        assert_eq!(Guard::parse(None, None, None), Ok(Guard::default()));
        let g = Guard::parse(Some("+0%"), None, Some(20)).unwrap();
        assert_eq!((g.retry_ratio.factor(), g.min_samples), (1.0, 20));
        assert_eq!(g.dead_letter_ratio.factor(), 1.1);
        let e = Guard::parse(None, Some("10%"), None).unwrap_err();
        assert_eq!(e.field, "dead_letter_ratio");
        assert!(
            e.to_string().starts_with("guard.dead_letter_ratio: "),
            "{e}"
        );
        assert_eq!(
            Guard::parse(None, None, Some(0)).unwrap_err().field,
            "min_samples"
        );
    }

    #[test]
    fn a_canary_that_dead_letters_more_is_rolled_back_at_once() {
        let g = Guard::parse(None, None, Some(100)).unwrap();
        let j = judge(
            &g,
            &arm(790, 79, 8),
            &arm(812, 80, 400),
            Duration::ZERO,
            MIN,
        );
        let Judgement::RollBack { why, breach } = j else {
            panic!("{j:?}")
        };
        assert_eq!(breach.ratio, "dead-letter ratio");
        assert_eq!(
            why,
            "dead-letter ratio 0.493 > 1.1 × stable 0.010 (n=812/790)"
        );
    }

    #[test]
    fn without_samples_nothing_is_compared_and_past_promote_after_it_is_held() {
        let g = Guard::parse(None, None, Some(100)).unwrap();
        let (stable, bad) = (arm(1000, 10, 0), arm(99, 99, 99));
        assert_eq!(
            judge(&g, &stable, &bad, Duration::ZERO, MIN),
            Judgement::Running
        );
        let held = judge(&g, &stable, &bad, MIN, MIN);
        assert!(
            matches!(held, Judgement::Held { ref why } if why.contains("canary 99")),
            "{held:?}"
        );
        // Held, then the samples come: judged again.
        let good = arm(100, 1, 0);
        assert_eq!(judge(&g, &stable, &good, MIN * 2, MIN), Judgement::Promote);
    }

    #[test]
    fn a_stable_ratio_of_zero_allows_zero() {
        let g = Guard::default();
        let stable = arm(500, 0, 0);
        assert_eq!(
            judge(&g, &stable, &arm(500, 0, 0), MIN, MIN),
            Judgement::Promote
        );
        assert!(matches!(
            judge(&g, &stable, &arm(500, 1, 0), Duration::ZERO, MIN),
            Judgement::RollBack { .. }
        ));
    }

    #[test]
    fn within_the_guard_it_runs_until_promote_after() {
        let g = Guard::parse(Some("+20%"), Some("+10%"), Some(10)).unwrap();
        let (stable, canary) = (arm(100, 50, 10), arm(100, 60, 11));
        assert_eq!(
            judge(&g, &stable, &canary, Duration::from_secs(59), MIN),
            Judgement::Running
        );
        assert_eq!(judge(&g, &stable, &canary, MIN, MIN), Judgement::Promote);
    }

    fn figures() -> impl Strategy<Value = ArmFigures> {
        (0u64..2_000, 0u64..4_000, 0u64..2_000).prop_map(|(f, r, d)| arm(f, r, d))
    }

    fn guards() -> impl Strategy<Value = Guard> {
        (0u32..100, 0u32..100, 1u64..1_000).prop_map(|(r, d, n)| Guard {
            retry_ratio: Relative::new(f64::from(r)).unwrap(),
            dead_letter_ratio: Relative::new(f64::from(d)).unwrap(),
            min_samples: n,
        })
    }

    proptest! {
        #[test]
        fn never_promoted_with_fewer_than_min_samples(
            g in guards(), s in figures(), c in figures(), elapsed in 0u64..200, after in 0u64..200,
        ) {
            let j = judge(&g, &s, &c, Duration::from_secs(elapsed), Duration::from_secs(after));
            if s.first_deliveries < g.min_samples || c.first_deliveries < g.min_samples {
                prop_assert!(matches!(j, Judgement::Running | Judgement::Held { .. }), "{:?}", j);
            }
        }

        #[test]
        fn never_promoted_when_the_guard_fails(
            g in guards(), s in figures(), c in figures(), elapsed in 0u64..200, after in 0u64..200,
        ) {
            let j = judge(&g, &s, &c, Duration::from_secs(elapsed), Duration::from_secs(after));
            let fails = g.retry_ratio.exceeded(c.retry_ratio(), s.retry_ratio())
                || g.dead_letter_ratio.exceeded(c.dead_letter_ratio(), s.dead_letter_ratio());
            if fails {
                prop_assert!(!matches!(j, Judgement::Promote), "{:?}", j);
            }
            if matches!(j, Judgement::RollBack { .. }) {
                prop_assert!(fails);
            }
        }

        #[test]
        fn promoted_only_after_promote_after(
            g in guards(), s in figures(), c in figures(), elapsed in 0u64..200, after in 0u64..200,
        ) {
            let j = judge(&g, &s, &c, Duration::from_secs(elapsed), Duration::from_secs(after));
            if matches!(j, Judgement::Promote | Judgement::Held { .. }) {
                prop_assert!(elapsed >= after);
            }
        }
    }
}
