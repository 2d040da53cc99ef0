//! What-if (`docs/spec/release.md`): what a candidate set would have decided for every context
//! of the decision log, compared with what was decided.
//!
//! Each logged context is decided again by the candidate with the jitter drawn from
//! [`jitter_rng`]`(context.seed)`, the generator and seed the logged decision drew from, so a
//! rule the candidate did not change decides exactly as it did. The log holds the rules' decision in
//! the rules' time (before any budget, before the runtime's time scale), and so does this.
//!
//! **What counts as changed.** A decision changed when its [`Verdict`] (rule, action, label)
//! differs, or when both sides retry and the delay differs: a candidate that only changes a
//! rule's delay shows exactly that rule's decisions as changed. The table groups changed
//! decisions by (old verdict → new verdict), the same verdict on both sides when only the delay
//! moved; each row carries the p50 and p99 of its retry delays on each side (nearest rank,
//! `null` for a side that never retries) and up to [`EXAMPLES`] of its contexts, each as the
//! body of `POST /v1/decide` with the message's `id`, to replay with `rebound explain` or the
//! route. Rows are sorted by count, most first, then by old and new verdict.

use crate::backoff::jitter_rng;
use crate::release::change::Verdict;
use crate::release::logged::{LoggedDecision, Outcome};
use crate::set::CompiledSet;
use serde::Serialize;
use std::collections::BTreeMap;

/// How many example contexts a row keeps (the first ones in log order).
pub const EXAMPLES: usize = 5;

/// The answer of what-if: `{"version", "candidate", "total", "changed", "by"}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WhatIf {
    /// The version of the set that decided the newest logged decision (`None` for an empty
    /// log). The route puts the current set's version here.
    pub version: Option<String>,
    /// The candidate's version.
    pub candidate: String,
    /// How many logged decisions were decided again.
    pub total: u64,
    /// How many of them changed (the sum of the rows' counts).
    pub changed: u64,
    /// The changed decisions by (old verdict → new verdict), most first.
    pub by: Vec<ChangeRow>,
}

/// One row of the table: the decisions that went from `old` to `new`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChangeRow {
    /// What was decided.
    pub old: Verdict,
    /// What the candidate decides.
    pub new: Verdict,
    /// How many decisions.
    pub count: u64,
    /// Their retry delays before and after.
    pub delay_ms: DelaySides,
    /// Up to [`EXAMPLES`] of their contexts: `POST /v1/decide` bodies with the message's `id`.
    pub examples: Vec<serde_json::Value>,
}

/// A row's delays on each side: `{"old": {"p50", "p99"}, "new": {"p50", "p99"}}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct DelaySides {
    /// The logged decisions' delays.
    pub old: Quantiles,
    /// The candidate's delays.
    pub new: Quantiles,
}

/// The p50 and p99 of some delays in milliseconds, nearest rank; `None` when there are none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Quantiles {
    /// The median.
    pub p50: Option<u64>,
    /// The 99th percentile.
    pub p99: Option<u64>,
}

impl Quantiles {
    /// The quantiles of `delays` (in any order).
    pub fn of(mut delays: Vec<u64>) -> Quantiles {
        delays.sort_unstable();
        Quantiles {
            p50: nearest_rank(&delays, 50),
            p99: nearest_rank(&delays, 99),
        }
    }
}

/// The nearest-rank `p`th percentile of sorted `values`: the value at rank ⌈p·n/100⌉.
fn nearest_rank(sorted: &[u64], p: usize) -> Option<u64> {
    let rank = (p * sorted.len()).div_ceil(100).max(1);
    sorted.get(rank - 1).copied()
}

/// Whether the candidate's `new` outcome changed the logged `old` one: another verdict, or a
/// retry after another delay.
pub fn outcome_changed(old: &Outcome, new: &Outcome) -> bool {
    old.rule != new.rule
        || old.action != new.action
        || old.label != new.label
        || old.delay_ms != new.delay_ms
}

/// Decides every context of `logged` (oldest first, as the stores return it) again with
/// `candidate` and compares with what was decided.
pub fn what_if(candidate: &CompiledSet, logged: &[LoggedDecision]) -> WhatIf {
    let mut rows: BTreeMap<(Verdict, Verdict), Row> = BTreeMap::new();
    let mut changed = 0u64;
    for entry in logged {
        let failure = entry.context.failure();
        let mut rng = jitter_rng(entry.context.seed);
        let new = Outcome::of(&candidate.decide(&failure.context(), &mut rng));
        if !outcome_changed(&entry.outcome, &new) {
            continue;
        }
        changed += 1;
        let key = (Verdict::from(&entry.outcome), Verdict::from(&new));
        rows.entry(key).or_default().add(entry, &new);
    }
    let mut by: Vec<ChangeRow> = rows
        .into_iter()
        .map(|((old, new), row)| row.finish(old, new))
        .collect();
    // Stable: rows of equal count keep the map's (old, new) order.
    by.sort_by_key(|row| std::cmp::Reverse(row.count));
    WhatIf {
        version: logged.last().map(|d| d.outcome.version.clone()),
        candidate: candidate.version().to_string(),
        total: logged.len() as u64,
        changed,
        by,
    }
}

/// A row while the log is read.
#[derive(Default)]
struct Row {
    count: u64,
    old_delays: Vec<u64>,
    new_delays: Vec<u64>,
    examples: Vec<serde_json::Value>,
}

impl Row {
    fn add(&mut self, entry: &LoggedDecision, new: &Outcome) {
        self.count += 1;
        self.old_delays.extend(entry.outcome.delay_ms);
        self.new_delays.extend(new.delay_ms);
        if self.examples.len() < EXAMPLES {
            let mut body = entry.context.decide_body();
            if let Some(map) = body.as_object_mut() {
                map.insert("id".into(), entry.id.clone().into());
            }
            self.examples.push(body);
        }
    }

    fn finish(self, old: Verdict, new: Verdict) -> ChangeRow {
        ChangeRow {
            old,
            new,
            count: self.count,
            delay_ms: DelaySides {
                old: Quantiles::of(self.old_delays),
                new: Quantiles::of(self.new_delays),
            },
            examples: self.examples,
        }
    }
}

#[cfg(test)]
#[path = "whatif_tests.rs"]
mod tests;
