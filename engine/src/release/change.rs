//! What a comparison of two decisions of the same context looks at: the deciding rule, the
//! action and the label (a [`Verdict`], the key of what-if's and the shadow's tables), and for
//! two retries the delay ([`changed`]: the same verdict with another delay is a change, shown
//! in its row's delay quantiles).

use crate::release::logged::Outcome;
use crate::types::{Decided, Decision, Version};
use serde::Serialize;
use std::time::SystemTime;

/// A decision as compared: `{"rule", "action", "label"}` (`label` null for a retry).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct Verdict {
    /// The deciding rule's id, or `defaults`.
    pub rule: String,
    /// `retry` or `dead_letter`.
    pub action: String,
    /// A dead letter's label.
    pub label: Option<String>,
}

impl Verdict {
    /// The verdict of `decided`.
    pub fn of(decided: &Decided) -> Verdict {
        Verdict::from(&Outcome::of(decided))
    }
}

impl From<&Outcome> for Verdict {
    fn from(o: &Outcome) -> Verdict {
        Verdict {
            rule: o.rule.to_string(),
            action: o.action.to_string(),
            label: o.label.as_deref().map(str::to_owned),
        }
    }
}

/// Whether two decisions of one context differ: in rule, action or label, or, both being
/// retries, in delay (a candidate that only moves a rule's delay changes that rule's
/// decisions). No allocation: the shadow's path.
pub fn changed(a: &Decided, b: &Decided) -> bool {
    match (&a.decision, &b.decision) {
        (
            Decision::Retry {
                rule: x, delay: dx, ..
            },
            Decision::Retry {
                rule: y, delay: dy, ..
            },
        ) => x != y || dx != dy,
        (
            Decision::DeadLetter {
                rule: x, label: lx, ..
            },
            Decision::DeadLetter {
                rule: y, label: ly, ..
            },
        ) => x != y || lx != ly,
        _ => true,
    }
}

/// One row of the shadow's table: decisions the current set decided `old` and the shadow
/// `new`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShadowRow {
    /// What the current set decided.
    pub old: Verdict,
    /// What the shadow decided.
    pub new: Verdict,
    /// How many.
    pub count: u64,
}

/// The shadow's figures (`GET /v1/rules/shadow`).
#[derive(Debug, Clone, PartialEq)]
pub struct ShadowReport {
    /// The shadow set's version.
    pub version: Version,
    /// When it was installed.
    pub since: SystemTime,
    /// Decisions it made (every decision since `since`).
    pub decisions: u64,
    /// Of those, the ones that differ from what was acted on ([`changed`]).
    pub changed: u64,
    /// The changed ones by (old, new), most first (a runtime may list only so many).
    pub by: Vec<ShadowRow>,
}
