//! What a comparison of two decisions of the same context looks at: the deciding rule, the
//! action and the label (a [`Verdict`], the key of what-if's and the shadow's tables), and for
//! two retries the delay ([`changed`]: the same verdict with another delay is a change, shown
//! in its row's delay quantiles).

use crate::release::logged::Outcome;
use crate::types::{Decided, Decision};
use serde::Serialize;

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
            rule: o.rule.clone(),
            action: o.action.clone(),
            label: o.label.clone(),
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
