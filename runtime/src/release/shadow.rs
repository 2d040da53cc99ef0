//! A shadow set: it decides every failure beside the set in force and is compared with it,
//! never acted on.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use rebound_engine::release::{Verdict, changed};
use rebound_engine::{CompiledSet, Decided, Version};

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
    /// The changed ones by (old, new), most first.
    pub by: Vec<ShadowRow>,
}

/// A shadow in force.
#[derive(Debug)]
pub(crate) struct ShadowRun {
    set: Arc<CompiledSet>,
    since: SystemTime,
    decisions: AtomicU64,
    changed: AtomicU64,
    by: Mutex<HashMap<(Verdict, Verdict), u64>>,
}

impl ShadowRun {
    pub(crate) fn new(set: Arc<CompiledSet>) -> ShadowRun {
        ShadowRun {
            set,
            since: SystemTime::now(),
            decisions: AtomicU64::new(0),
            changed: AtomicU64::new(0),
            by: Mutex::new(HashMap::new()),
        }
    }

    pub(crate) fn set(&self) -> &CompiledSet {
        &self.set
    }

    /// Counts one decision: `acted` (what the runtime acts on) against `shadow`'s.
    pub(crate) fn count(&self, acted: &Decided, shadow: &Decided) {
        self.decisions.fetch_add(1, Relaxed);
        if changed(acted, shadow) {
            self.changed.fetch_add(1, Relaxed);
            let key = (Verdict::of(acted), Verdict::of(shadow));
            *self
                .by
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .entry(key)
                .or_default() += 1;
        }
    }

    pub(crate) fn report(&self) -> ShadowReport {
        let mut by: Vec<ShadowRow> = self
            .by
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|((old, new), count)| ShadowRow {
                old: old.clone(),
                new: new.clone(),
                count: *count,
            })
            .collect();
        by.sort_by(|a, b| {
            b.count
                .cmp(&a.count)
                .then_with(|| (&a.old, &a.new).cmp(&(&b.old, &b.new)))
        });
        // Read the counters after the rows: a row is never counted in `by` but not in them.
        ShadowReport {
            version: *self.set.version(),
            since: self.since,
            decisions: self.decisions.load(Relaxed),
            changed: self.changed.load(Relaxed),
            by,
        }
    }
}
