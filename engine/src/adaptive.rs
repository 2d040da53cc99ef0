//! What the set's `budgets:` and `breakers:` say (`rules.md`, "Labels, heat, budgets and
//! breakers"), compiled: [`BudgetPolicy`] and [`BreakerPolicy`], each with its scope and where
//! it is written. The runtime keeps their state and applies them after the rules decide; a
//! decision only names the budget and the breakers a failure falls under
//! ([`CompiledSet::budget_for`](crate::CompiledSet::budget_for),
//! [`CompiledSet::breakers_for`](crate::CompiledSet::breakers_for)).

use crate::context::FailureContext;
use crate::diag::Pos;
use crate::rule::Conditions;
use std::fmt;
use std::time::Duration;

/// What a budget or breaker applies to: `biz`, `code` and `attrs` as in a rule's `match`.
#[derive(Debug, Clone, Default)]
pub struct Scope(pub(crate) Conditions);

impl Scope {
    /// True if `ctx` is in scope.
    pub fn matches(&self, ctx: &FailureContext<'_>) -> bool {
        self.0.miss(ctx).is_none()
    }

    /// True if the scope takes only this `biz` into account, whatever the code: whether a
    /// first delivery of `biz` counts toward a budget of this scope.
    pub fn matches_biz(&self, biz: &str) -> bool {
        self.0.biz.as_ref().is_none_or(|m| m.matches(biz))
    }
}

/// What a budget does with a retry it has no room for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exhausted {
    /// Scheduled as decided, fired only once the budget has room again (never dropped).
    Hold,
    /// Dead-lettered at once with reason `budget` and its rule's label.
    DeadLetter,
}

impl Exhausted {
    /// `hold` or `dead_letter`.
    pub fn as_str(self) -> &'static str {
        match self {
            Exhausted::Hold => "hold",
            Exhausted::DeadLetter => "dead_letter",
        }
    }
}

/// One retry budget: over `window`, the retries fired for failures in its scope may not
/// exceed `max(min_per_s × window, ratio × first deliveries of its biz in the window)`.
#[derive(Debug, Clone)]
pub struct BudgetPolicy {
    /// Its id.
    pub id: String,
    /// What it counts.
    pub scope: Scope,
    /// The share of first deliveries, 0 to 1.
    pub ratio: f64,
    /// The floor, in retries per second.
    pub min_per_s: f64,
    /// The sliding window.
    pub window: Duration,
    /// Without room.
    pub exhausted: Exhausted,
    /// The file that declares it.
    pub file: String,
    /// Where (its `id`).
    pub pos: Option<Pos>,
}

/// The key a breaker is kept per: one breaker per value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PerKey {
    /// The message's biz.
    Biz,
    /// The failure's code.
    Code,
    /// A failure attribute (`attrs.NAME`).
    Attr(String),
}

/// The key a keyed breaker counts a failure under when the failure lacks its `per` value (an
/// absent or empty attribute): shown as such everywhere, never as an empty key beside named
/// ones (`rules.md`).
pub const NO_KEY: &str = "(none)";

impl PerKey {
    /// The key's value for `ctx` (`None` for an absent or empty attribute).
    pub fn value<'a>(&self, ctx: &FailureContext<'a>) -> Option<&'a str> {
        let value = match self {
            PerKey::Biz => ctx.biz,
            PerKey::Code => ctx.code,
            PerKey::Attr(name) => ctx.attrs.get(name).map_or("", String::as_str),
        };
        (!value.is_empty()).then_some(value)
    }

    /// The breaker key for `ctx`: its value, or [`NO_KEY`] without one.
    ///
    /// ```
    /// # use rebound_engine::{FailureContext, PerKey, NO_KEY};
    /// let ctx = FailureContext::new("PAYMENT", "NET_TIMEOUT", 1);
    /// assert_eq!(PerKey::Attr("downstream".into()).key(&ctx), NO_KEY);
    /// assert_eq!(PerKey::Biz.key(&ctx), "PAYMENT");
    /// ```
    pub fn key<'a>(&self, ctx: &FailureContext<'a>) -> &'a str {
        self.value(ctx).unwrap_or(NO_KEY)
    }
}

impl fmt::Display for PerKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PerKey::Biz => f.write_str("biz"),
            PerKey::Code => f.write_str("code"),
            PerKey::Attr(name) => write!(f, "attrs.{name}"),
        }
    }
}

/// One circuit breaker (per value of `per`, if given): it opens when at least `min_samples`
/// trees of its scope finished in `window` and the failed share reaches `open_at`, or when a
/// failure of its scope sees its biz's heat at or above `open_on_heat`; after `cool_down` it
/// is half-open and releases a share of held retries rising from 10% to 100% over `ramp`.
#[derive(Debug, Clone)]
pub struct BreakerPolicy {
    /// Its id.
    pub id: String,
    /// What it counts.
    pub scope: Scope,
    /// One breaker per value of this key.
    pub per: Option<PerKey>,
    /// The failed share that opens it, 0 to 1 (`None`: the share never does).
    pub open_at: Option<f64>,
    /// The heat of a failure's biz that opens it (`None`: heat never does).
    pub open_on_heat: Option<f64>,
    /// The fewest finished trees in the window before it may open.
    pub min_samples: u64,
    /// The sliding window.
    pub window: Duration,
    /// Open this long before half-open.
    pub cool_down: Duration,
    /// Half-open this long before closed.
    pub ramp: Duration,
    /// The file that declares it.
    pub file: String,
    /// Where (its `id`).
    pub pos: Option<Pos>,
}
