//! A shadow set: it decides every failure beside the set in force and is compared with it,
//! never acted on.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use arc_swap::ArcSwap;
use rebound_engine::release::{Verdict, changed};
use rebound_engine::{CompiledSet, Decided, Decision, Label, RuleId, RuleRef, Version};

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
    /// Of those, the ones that differ from what was acted on (`release::changed`).
    pub changed: u64,
    /// The changed ones by (old, new), most first (at most [`ROWS_AT_MOST`] rows).
    pub by: Vec<ShadowRow>,
}

/// A verdict as the shadow counts it, without allocating: the deciding rule and, for a dead
/// letter, its label (a retry has none). Both are interned names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Key {
    rule: Option<RuleId>,
    label: Option<Label>,
}

impl Key {
    fn of(decided: &Decided) -> Key {
        let rule = match decided.decision.rule() {
            RuleRef::Rule(id) => Some(*id),
            RuleRef::Defaults => None,
        };
        let label = match &decided.decision {
            Decision::Retry { .. } => None,
            Decision::DeadLetter { label, .. } => Some(*label),
        };
        Key { rule, label }
    }

    fn verdict(self) -> Verdict {
        Verdict {
            rule: self.rule.map_or("defaults", |r| r.as_str()).to_owned(),
            action: if self.label.is_some() {
                "dead_letter"
            } else {
                "retry"
            }
            .to_owned(),
            label: self.label.map(|l| l.as_str().to_owned()),
        }
    }
}

/// The most distinct (old, new) rows a shadow lists; changes past them count in `changed`
/// only.
pub const ROWS_AT_MOST: usize = 256;

type Rows = Vec<(Key, Key, Arc<AtomicU64>)>;

/// A shadow in force. Its rows are read without a lock (one atomic load and a short scan); a
/// new row is added under `adding`, copy on write.
#[derive(Debug)]
pub(crate) struct ShadowRun {
    set: Arc<CompiledSet>,
    since: SystemTime,
    decisions: AtomicU64,
    changed: AtomicU64,
    rows: ArcSwap<Rows>,
    adding: Mutex<()>,
}

impl ShadowRun {
    pub(crate) fn new(set: Arc<CompiledSet>) -> ShadowRun {
        ShadowRun {
            set,
            since: SystemTime::now(),
            decisions: AtomicU64::new(0),
            changed: AtomicU64::new(0),
            rows: ArcSwap::from_pointee(Vec::new()),
            adding: Mutex::new(()),
        }
    }

    pub(crate) fn set(&self) -> &CompiledSet {
        &self.set
    }

    /// Counts one decision: `acted` (what the runtime acts on) against `shadow`'s.
    pub(crate) fn count(&self, acted: &Decided, shadow: &Decided) {
        self.decisions.fetch_add(1, Relaxed);
        if !changed(acted, shadow) {
            return;
        }
        self.changed.fetch_add(1, Relaxed);
        let (old, new) = (Key::of(acted), Key::of(shadow));
        let find = |rows: &Rows| {
            rows.iter()
                .find(|(o, n, _)| *o == old && *n == new)
                .map(|(_, _, c)| Arc::clone(c))
        };
        if let Some(count) = find(&self.rows.load()) {
            count.fetch_add(1, Relaxed);
            return;
        }
        let _adding = self.adding.lock().unwrap_or_else(|p| p.into_inner());
        let rows = self.rows.load_full();
        if let Some(count) = find(&rows) {
            count.fetch_add(1, Relaxed);
        } else if rows.len() < ROWS_AT_MOST {
            let mut more = (*rows).clone();
            more.push((old, new, Arc::new(AtomicU64::new(1))));
            self.rows.store(Arc::new(more));
        }
    }

    pub(crate) fn report(&self) -> ShadowReport {
        let mut by: Vec<ShadowRow> = self
            .rows
            .load()
            .iter()
            .map(|(old, new, count)| ShadowRow {
                old: old.verdict(),
                new: new.verdict(),
                count: count.load(Relaxed),
            })
            .collect();
        by.sort_by(|a, b| {
            b.count
                .cmp(&a.count)
                .then_with(|| (&a.old, &a.new).cmp(&(&b.old, &b.new)))
        });
        ShadowReport {
            version: *self.set.version(),
            since: self.since,
            decisions: self.decisions.load(Relaxed),
            changed: self.changed.load(Relaxed),
            by,
        }
    }
}
