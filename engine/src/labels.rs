//! The set's dead-letter labels and what the runtime does with their letters (`labels:` in
//! `docs/spec/rules.md`): a [`LabelPolicy`] per label, read through [`Labels`]
//! ([`CompiledSet::labels`](crate::CompiledSet::labels)).
//!
//! The engine checks the policies (durations, `max` ≥ 1, a label defined once in the set)
//! and `rebound paths` follows their redrives; the runtime carries them out. An `alert`
//! names a receiver of the runtime's configuration, which the engine does not know, so a
//! policy keeps where that name is written ([`LabelPolicy::alert_at`]) for the runtime to
//! point at.
//!
//! ```
//! use rebound_engine::{SourceFile, compile};
//! use std::time::Duration;
//!
//! let yaml = "version: 1\nlabels:\n  L1:\n    redrive: { after: 10m, max: 3 }\n  L2:\n    alert: oncall\n    sla: 15m\n";
//! let set = compile(vec![SourceFile::new("labels.yaml", "rules/labels.yaml", yaml)]).unwrap();
//! let l1 = set.labels().get("L1").unwrap();
//! let redrive = l1.redrive.unwrap();
//! assert_eq!((redrive.after, redrive.max), (Duration::from_secs(600), 3));
//! assert_eq!(l1.at(), "rules/labels.yaml:3:3");
//! let l2 = set.labels().get("L2").unwrap();
//! assert_eq!(l2.alert.as_deref(), Some("oncall"));
//! assert_eq!(l2.alert_at().as_deref(), Some("rules/labels.yaml:6:12"));
//! assert!(set.labels().get("L9").is_none());
//! ```

use crate::diag::Pos;
use crate::types::Label;
use std::time::Duration;

/// What the runtime does with the letters of one label.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabelPolicy {
    /// The label (`L1`).
    pub label: Label,
    /// Free text for people.
    pub description: Option<String>,
    /// Replay its letters automatically.
    pub redrive: Option<Redrive>,
    /// The receiver of the runtime configuration told of new letters (not checked here).
    pub alert: Option<String>,
    /// How long a letter may stay open before it is overdue.
    pub sla: Option<Duration>,
    /// How long a letter stays open before it becomes `expired`.
    pub expire: Option<Duration>,
    /// The file that defines it, as diagnostics name it (`rules/labels.yaml`).
    pub file: String,
    /// Where its key is written in that file.
    pub pos: Pos,
    /// Where its `alert` value is written, when it has one.
    pub alert_pos: Option<Pos>,
}

impl LabelPolicy {
    /// Where the label is defined, as `FILE:LINE:COL`.
    pub fn at(&self) -> String {
        format!("{}:{}", self.file, self.pos)
    }

    /// Where its `alert` value is written, as `FILE:LINE:COL`, when it has one: the place a
    /// message about an unknown receiver points at.
    pub fn alert_at(&self) -> Option<String> {
        self.alert_pos.map(|p| format!("{}:{p}", self.file))
    }
}

/// `redrive: { after, max }`: a letter is replayed `after` its dead-lettering, at most `max`
/// times, each replay a first delivery again (its attempts count from 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Redrive {
    /// The wait between the dead letter and its replay.
    pub after: Duration,
    /// How many replays at most (at least 1).
    pub max: u32,
}

/// The labels a set defines, in the order they are written (file by file).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Labels(Vec<LabelPolicy>);

impl Labels {
    /// The labels of `policies`, kept in their order (the compiler has checked that no label
    /// comes twice).
    pub(crate) fn new(policies: Vec<LabelPolicy>) -> Labels {
        Labels(policies)
    }

    /// The policy of `label`, if the set defines it.
    pub fn get(&self, label: &str) -> Option<&LabelPolicy> {
        self.0.iter().find(|p| p.label.as_str() == label)
    }

    /// Every label's policy, in the order written.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &LabelPolicy> {
        self.0.iter()
    }

    /// How many labels the set defines.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// True when the set defines no label (then any `dead_letter` goes unchecked).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The label names, for "did you mean".
    pub(crate) fn names(&self) -> Vec<&'static str> {
        self.0.iter().map(|p| p.label.as_str()).collect()
    }
}

impl<'a> IntoIterator for &'a Labels {
    type Item = &'a LabelPolicy;
    type IntoIter = std::slice::Iter<'a, LabelPolicy>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}
