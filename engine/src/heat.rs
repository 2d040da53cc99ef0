//! The set's `heat:` section (`docs/spec/rules.md`, "Labels, heat, budgets and breakers"): how
//! the runtime weighs failures into its decaying `heat` signal, as a [`HeatPolicy`]
//! ([`CompiledSet::heat`](crate::CompiledSet::heat)).
//!
//! The engine only reads and checks the section; the runtime keeps the heat itself: each
//! failure adds [`HeatPolicy::weight`] of its code, the sum halves every
//! [`HeatPolicy::half_life`], and rules read it as `signals.heat` (and `signals.heat_total`).
//! A set without `heat:` has the defaults: a half-life of 30 s, and every code weighs 1.
//!
//! ```
//! use rebound_engine::{SourceFile, compile};
//! use std::time::Duration;
//!
//! let yaml = "version: 1\nheat:\n  half_life: 1m\n  weights:\n    - { code: \"NET_*\", weight: 3 }\n    - { code: NET_DNS, weight: 10 }\n";
//! let set = compile(vec![SourceFile::new("heat.yaml", "rules/heat.yaml", yaml)]).unwrap();
//! let heat = set.heat();
//! assert_eq!(heat.half_life(), Duration::from_secs(60));
//! assert_eq!(heat.weight("NET_TIMEOUT"), 3.0);
//! assert_eq!(heat.weight("NET_DNS"), 3.0); // the first matching pattern wins
//! assert_eq!(heat.weight("DB_LOCK"), 1.0); // unmatched codes weigh 1
//! assert_eq!(heat.at().as_deref(), Some("rules/heat.yaml:2:1"));
//! ```

use crate::diag::Pos;
use crate::pattern::NamePattern;
use std::time::Duration;

/// How failures heat up: the half-life of the decay and each code's weight.
#[derive(Debug, Clone, PartialEq)]
pub struct HeatPolicy {
    half_life: Duration,
    weights: Vec<HeatWeight>,
    /// Where `heat:` is written (file, position), when the set has it.
    written: Option<(String, Pos)>,
}

/// One `{ code: PATTERN, weight: NUMBER }` of `heat.weights`.
#[derive(Debug, Clone, PartialEq)]
pub struct HeatWeight {
    code: NamePattern,
    weight: f64,
}

impl HeatWeight {
    pub(crate) fn new(code: NamePattern, weight: f64) -> Self {
        HeatWeight { code, weight }
    }

    /// The code pattern as written (`NET_*`).
    pub fn code(&self) -> String {
        self.code.to_string()
    }

    /// Whether the failure code `code` matches the pattern.
    pub fn matches(&self, code: &str) -> bool {
        self.code.matches(code)
    }

    /// What a failure of a matching code adds to the heat (a finite number, at least 0).
    pub fn weight(&self) -> f64 {
        self.weight
    }
}

impl HeatPolicy {
    /// The half-life of a set that does not say: 30 s.
    pub const DEFAULT_HALF_LIFE: Duration = Duration::from_secs(30);
    /// The weight of a code no pattern matches.
    pub const DEFAULT_WEIGHT: f64 = 1.0;

    pub(crate) fn new(
        half_life: Duration,
        weights: Vec<HeatWeight>,
        written: Option<(String, Pos)>,
    ) -> Self {
        HeatPolicy {
            half_life,
            weights,
            written,
        }
    }

    /// How long the heat takes to halve when nothing fails.
    pub fn half_life(&self) -> Duration {
        self.half_life
    }

    /// What one failure of `code` adds to the heat: the weight of the first pattern in
    /// `weights` that matches it, else 1.
    pub fn weight(&self, code: &str) -> f64 {
        self.weights
            .iter()
            .find(|w| w.matches(code))
            .map_or(Self::DEFAULT_WEIGHT, HeatWeight::weight)
    }

    /// The weights, in the order written (the order [`weight`](Self::weight) tries them).
    pub fn weights(&self) -> &[HeatWeight] {
        &self.weights
    }

    /// Where `heat:` is written, as `FILE:LINE:COL`; `None` for a set without it.
    pub fn at(&self) -> Option<String> {
        self.written
            .as_ref()
            .map(|(file, pos)| format!("{file}:{pos}"))
    }
}

impl Default for HeatPolicy {
    /// No `heat:`: a half-life of 30 s, every code weighs 1.
    fn default() -> Self {
        HeatPolicy::new(Self::DEFAULT_HALF_LIFE, Vec::new(), None)
    }
}
