//! The run's report, computed from the durable state, so that a run restarted after a crash
//! reports all of its messages, and a finished run reports the same thing every time it is
//! asked.
//!
//! | key | from |
//! |---|---|
//! | `acked`, `dead_lettered`, `lost` | the store's fates of `order-000001…order-N` |
//! | `dead_letters_by_label` | the store's dead letters (open or skipped; replayed ones are history) |
//! | `duplicates` | `pipeline.db`'s counter, written with the orders |
//! | `out_of_order` | `pipeline.db`'s counter, written with a keyed run's events |
//! | `retries`, `retries_by_rule`, `latency_ms`, `failures_by_code` | the sessions' checkpointed counters |
//! | `elapsed_s`, `throughput_per_s` | the sessions' running times |

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::PipelineError;
use super::book::RunBook;
use super::db::{RunRecord, SessionStats};
use super::fleet::{PARTITIONS, partition_of, partition_source, position_in};
use super::orders::{SOURCE, message_id, position_of};
use rebound_runtime::adaptive::{GateSnapshot, NO_KEY, Opening};
use rebound_runtime::stats::{Histogram, LATENCY_BOUNDS};
use rebound_runtime::store::{self, DeadLetterFilter, DeadLetterStatus, Fate, MessageId, Store};

/// Two latency percentiles, in milliseconds.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Latency {
    /// Median.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
}

/// The report of a run. The first ten fields are the keys `docs/spec/runtime.md` requires of
/// `rebound run --json`; the rest are extra.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Report {
    /// Distinct messages handed out (all N once the run is complete).
    pub emitted: u64,
    /// Messages whose tree completed.
    pub acked: u64,
    /// Messages whose dead letter is stored.
    pub dead_lettered: u64,
    /// Messages that ended neither acked nor dead-lettered (must be 0). Counted once the run
    /// is complete; an interrupted run has `outstanding` messages instead.
    pub lost: u64,
    /// Retries scheduled.
    pub retries: u64,
    /// Deliveries the idempotent store absorbed (the order was already written).
    pub duplicates: u64,
    /// A keyed run's events that reached the store before an earlier event of their order
    /// (0 with ordering on; always 0 for a run that is not keyed).
    pub out_of_order: u64,
    /// Dead letters by label.
    pub dead_letters_by_label: BTreeMap<String, u64>,
    /// Retries by deciding rule.
    pub retries_by_rule: BTreeMap<String, u64>,
    /// Messages settled (acked or dead-lettered) per second of running time.
    pub throughput_per_s: f64,
    /// Complete latency of acked deliveries (real time, emit to ack).
    pub latency_ms: Latency,
    /// The messages of the run (`null` when unbounded).
    pub messages: Option<u64>,
    /// Its messages are events of orders, one to three each (`--keyed`).
    pub keyed: bool,
    /// The time scale of the run.
    pub time_scale: f64,
    /// Running time over every session, in seconds.
    pub elapsed_s: f64,
    /// True once every message has its fate and nothing waits to be retried.
    pub complete: bool,
    /// Messages without a fate yet, in an incomplete run (a restart continues them).
    pub outstanding: u64,
    /// Retries waiting in the store.
    pub scheduled_retries: u64,
    /// Deliveries in all (first deliveries and retries).
    pub deliveries: u64,
    /// Failed trees by failure code.
    pub failures_by_code: BTreeMap<String, u64>,
    /// Processes that worked on the run (1 unless it was restarted; on a fleet, every node's).
    pub sessions: u64,
    /// On a fleet: what the node that prints the report did itself.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<NodeShare>,
    /// What the set's budgets did over the run's sessions: retries held for want of room,
    /// and dead-lettered for it. Absent without budgets.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub budgets: BTreeMap<String, BudgetShare>,
    /// What the set's breakers (and the fuse, once it opened) did over the run's sessions:
    /// per breaker and key, the states they went through in order, where they stand, and
    /// what each opening saw. Absent without breakers.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub breakers: BTreeMap<String, BTreeMap<String, BreakerShare>>,
}

/// One budget in the report.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BudgetShare {
    /// Retries held until the budget had room.
    pub held: u64,
    /// Retries dead-lettered with reason `budget`.
    pub exhausted: u64,
}

/// One breaker (one key) in the report.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BreakerShare {
    /// The states it entered, in order (`open`, `half_open`, `closed`).
    pub states: Vec<String>,
    /// Where it stands now.
    pub state: String,
    /// Why it opened, each time (the first 100): what its window held then.
    #[serde(default)]
    pub openings: Vec<OpeningShare>,
}

/// What a breaker saw when it opened.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct OpeningShare {
    /// The failed share of its window, 0 to 1 (rounded to 3 places).
    pub failed_share: f64,
    /// Finished trees in its window.
    pub samples: u64,
    /// The share it opens at (`open_at`, the fuse's `threshold`; absent for a breaker that
    /// opens on heat only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_at: Option<f64>,
    /// The fewest samples it opens at.
    pub min_samples: u64,
    /// Opened on heat: the heat the failure saw (rounded to 2 places), absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heat: Option<f64>,
    /// Opened on heat: the `open_on_heat` it reached.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_on_heat: Option<f64>,
}

impl From<&Opening> for OpeningShare {
    fn from(o: &Opening) -> OpeningShare {
        OpeningShare {
            failed_share: (o.failed_share() * 1000.0).round() / 1000.0,
            samples: o.samples,
            open_at: o.open_at,
            min_samples: o.min_samples,
            heat: o.heat.map(|(h, _)| (h * 100.0).round() / 100.0),
            open_on_heat: o.heat.map(|(_, at)| at),
        }
    }
}

/// What a session's retry gate did, as the report shows it and the book keeps it (in the
/// session's counters, so that a report read back after the run has it).
pub type GateShares = (
    BTreeMap<String, BudgetShare>,
    BTreeMap<String, BTreeMap<String, BreakerShare>>,
);

/// The gate's snapshot as the report's budgets and breakers.
pub fn gate_shares(gate: &GateSnapshot) -> GateShares {
    let mut budgets = BTreeMap::new();
    for (id, (held, exhausted)) in &gate.budgets {
        let share = BudgetShare {
            held: *held,
            exhausted: *exhausted,
        };
        budgets.insert(id.clone(), share);
    }
    let mut breakers: BTreeMap<String, BTreeMap<String, BreakerShare>> = BTreeMap::new();
    for ((id, key), b) in &gate.breakers {
        breakers.entry(id.clone()).or_default().insert(
            key.clone(),
            BreakerShare {
                states: b.history.iter().map(|s| s.as_str().to_owned()).collect(),
                state: b.state.as_str().to_owned(),
                openings: b.openings.iter().map(OpeningShare::from).collect(),
            },
        );
    }
    (budgets, breakers)
}

impl Report {
    /// Adds one session's budgets and breakers to the run's: budgets' counts add up; a
    /// breaker's states and openings follow the earlier sessions', and it stands where the
    /// later session left it.
    fn add_session_gate(
        &mut self,
        budgets: &BTreeMap<String, BudgetShare>,
        breakers: &BTreeMap<String, BTreeMap<String, BreakerShare>>,
    ) {
        for (id, b) in budgets {
            let into = self.budgets.entry(id.clone()).or_default();
            into.held += b.held;
            into.exhausted += b.exhausted;
        }
        for (id, keys) in breakers {
            for (key, b) in keys {
                let into = self
                    .breakers
                    .entry(id.clone())
                    .or_default()
                    .entry(key.clone())
                    .or_default();
                into.states.extend(b.states.iter().cloned());
                into.openings.extend(b.openings.iter().cloned());
                into.state.clone_from(&b.state);
            }
        }
    }
}

/// What one node of a fleet did itself (`node` in the report).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct NodeShare {
    /// The node's name.
    pub name: String,
    /// Deliveries its spout made (first deliveries and the retries it fired).
    pub processed: u64,
    /// Retries it claimed and fired.
    pub retries_fired: u64,
    /// A `--outage` run: the `PAYMENT` retries it delivered while the gateway was down (this
    /// process's, from its own start; the fleet's is the sum over its nodes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outage_retries: Option<u64>,
}

/// The states a breaker went through, for the text report: all of them when they are few;
/// else the first and last few around how often it opened (`--json` has every one).
fn breaker_path<S: AsRef<str>>(states: &[S]) -> String {
    let states: Vec<&str> = states.iter().map(AsRef::as_ref).collect();
    const SHOWN: usize = 4;
    if states.is_empty() {
        return "stayed closed".to_owned();
    }
    if states.len() <= 2 * SHOWN {
        return format!("closed → {}", states.join(" → "));
    }
    let opened = states.iter().filter(|s| **s == "open").count();
    format!(
        "closed → {} → … opened {opened} times, {} changes … → {}",
        states[..SHOWN].join(" → "),
        states.len(),
        states[states.len() - SHOWN..].join(" → ")
    )
}

/// Why a breaker opened, for the text report: the failed share and the samples its window
/// held (their range over several openings) against its limits. `None` if it never opened.
fn opening_reason(openings: &[OpeningShare]) -> Option<String> {
    let pct = |x: f64| format!("{:.0}%", x * 100.0);
    let range = |lo: String, hi: String| if lo == hi { lo } else { format!("{lo}–{hi}") };
    let (on_heat, on_share): (Vec<&OpeningShare>, Vec<&OpeningShare>) =
        openings.iter().partition(|o| o.heat.is_some());
    let mut why = Vec::new();
    if let Some(first) = on_share.first() {
        let (mut share, mut samples) = ((f64::MAX, f64::MIN), (u64::MAX, 0));
        for o in &on_share {
            share = (share.0.min(o.failed_share), share.1.max(o.failed_share));
            samples = (samples.0.min(o.samples), samples.1.max(o.samples));
        }
        why.push(format!(
            "opened at {} failed of {} trees (opens at {} of at least {})",
            range(pct(share.0), pct(share.1)),
            range(samples.0.to_string(), samples.1.to_string()),
            first.open_at.map_or_else(|| "?".to_owned(), pct),
            first.min_samples
        ));
    }
    if let Some(first) = on_heat.first() {
        let heats = on_heat.iter().filter_map(|o| o.heat);
        let (lo, hi) = heats.fold((f64::MAX, f64::MIN), |(lo, hi), h| (lo.min(h), hi.max(h)));
        why.push(format!(
            "opened on heat {} (opens at heat {})",
            range(format!("{lo}"), format!("{hi}")),
            first.open_on_heat.unwrap_or_default()
        ));
    }
    (!why.is_empty()).then(|| why.join("; "))
}

/// The width the text report keeps to (a terminal's 80 columns).
const REPORT_WIDTH: usize = 80;

/// `text` in lines of at most `width` characters: a list (`a 1 · b 2`) is broken between its
/// items, anything else between words; a piece longer than `width` gets a line of its own. At
/// least one line.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let (pieces, sep): (Vec<&str>, &str) = if text.contains(" · ") {
        (text.split(" · ").collect(), " · ")
    } else {
        (text.split(' ').filter(|w| !w.is_empty()).collect(), " ")
    };
    // Room for the ` ·` a continued list line ends with.
    let room = if sep == " " {
        width
    } else {
        width.saturating_sub(2)
    };
    let mut lines = vec![String::new()];
    for piece in pieces {
        let last = lines.last_mut().expect("at least one line");
        let len = last.chars().count();
        if len > 0 && len + sep.chars().count() + piece.chars().count() > room {
            // A continued list keeps its separator at the end of the line.
            if sep != " " {
                last.push_str(sep.trim_end());
            }
            lines.push(piece.to_owned());
        } else {
            if len > 0 {
                last.push_str(sep);
            }
            last.push_str(piece);
        }
    }
    lines
}

/// Quantile `q` of `h`, interpolated linearly inside its bucket (the overflow bucket reports
/// its lower bound).
pub fn quantile(h: &Histogram, q: f64, bounds: &[Duration; 16]) -> Option<Duration> {
    if h.count == 0 {
        return None;
    }
    let rank = (q * h.count as f64).max(f64::MIN_POSITIVE);
    let mut seen = 0.0;
    for (i, &c) in h.buckets.iter().enumerate() {
        if c == 0 {
            continue;
        }
        let next = seen + c as f64;
        if next >= rank {
            let lo = if i == 0 {
                Duration::ZERO
            } else {
                bounds[i - 1]
            };
            let Some(&hi) = bounds.get(i) else {
                return Some(lo);
            };
            let frac = (rank - seen) / c as f64;
            return Some(lo + (hi - lo).mul_f64(frac.clamp(0.0, 1.0)));
        }
        seen = next;
    }
    bounds.last().copied()
}

fn ms(d: Option<Duration>) -> f64 {
    d.map_or(0.0, |d| (d.as_secs_f64() * 1e6).round() / 1e3)
}

fn add_all(into: &mut BTreeMap<String, u64>, from: &BTreeMap<String, u64>) {
    for (k, v) in from {
        *into.entry(k.clone()).or_default() += v;
    }
}

impl Report {
    /// Computes the report of the run in `store` and `book`. `partitioned`: the orders come
    /// from a fleet's partitions (`fleet/`), each with its own position; else from the one
    /// order source. Blocking (reads both).
    pub fn load(
        store: &dyn Store,
        book: &dyn RunBook,
        run: &RunRecord,
        partitioned: bool,
    ) -> Result<Report, PipelineError> {
        let sessions = book.sessions()?;
        let high = sessions.iter().map(|s| s.emitted_high).max().unwrap_or(0);
        let n = run.messages.unwrap_or(high);

        // Every order at or below its source's committed position has its fate; the store
        // keeps the dead-lettered ones, and prunes the acked ones (the position is their
        // record).
        let committed: Vec<u64> = if partitioned {
            (0..PARTITIONS)
                .map(|p| Ok(store.position(&partition_source(p))?.unwrap_or(0)))
                .collect::<Result<_, PipelineError>>()?
        } else {
            vec![store.position(SOURCE)?.unwrap_or(0)]
        };
        let below = |order: u64| {
            if partitioned {
                position_in(order) <= committed[partition_of(order) as usize]
            } else {
                order <= committed[0]
            }
        };
        let (mut acked, mut dead_lettered) = (0u64, 0u64);
        let mut i = 1;
        while i <= n {
            let end = (i + 511).min(n);
            let ids: Vec<MessageId> = (i..=end)
                .map(|k| MessageId::from(message_id(run.keyed, k)))
                .collect();
            let mut known_below = 0;
            for (id, fate) in store.known_fates(&ids)? {
                if position_of(id.as_str()).is_some_and(below) {
                    known_below += 1;
                }
                match fate {
                    Fate::Acked => acked += 1,
                    Fate::DeadLettered => dead_lettered += 1,
                }
            }
            let below_here = (i..=end).filter(|&k| below(k)).count() as u64;
            acked += below_here.saturating_sub(known_below);
            i = end + 1;
        }
        let in_run = |id: &str| position_of(id).is_some_and(|k| k >= 1 && k <= n);
        let scheduled_retries = store
            .scheduled()?
            .iter()
            .filter(|(id, _)| in_run(id.as_str()))
            .count() as u64;

        let mut dead_letters_by_label = BTreeMap::new();
        for status in [DeadLetterStatus::Dead, DeadLetterStatus::Skipped] {
            let mut filter = DeadLetterFilter {
                status: Some(status),
                limit: store::MAX_PAGE,
                ..DeadLetterFilter::default()
            };
            loop {
                let page = store.dead_letters(&filter)?;
                for d in &page.items {
                    if in_run(d.letter.id().as_str()) {
                        *dead_letters_by_label
                            .entry(d.letter.label.to_string())
                            .or_default() += 1;
                    }
                }
                match page.next {
                    Some(next) => filter.before = Some(next),
                    None => break,
                }
            }
        }

        let mut stats = SessionStats::default();
        let mut latency = Histogram::default();
        let mut elapsed = Duration::ZERO;
        if partitioned {
            // A fleet's sessions run side by side: its running time spans them, from the
            // first start to the last end.
            let start = sessions.iter().map(|s| s.started_ms).min().unwrap_or(0);
            let end = sessions
                .iter()
                .map(|s| s.started_ms + s.elapsed.as_millis() as u64)
                .max()
                .unwrap_or(start);
            elapsed = Duration::from_millis(end - start);
        }
        for s in &sessions {
            if !partitioned {
                elapsed += s.elapsed;
            }
            stats.deliveries += s.stats.deliveries;
            stats.retries += s.stats.retries;
            add_all(&mut stats.retries_by_rule, &s.stats.retries_by_rule);
            add_all(&mut stats.failures_by_code, &s.stats.failures_by_code);
            latency.merge(&s.stats.latency.histogram());
        }
        let mut gate = Report::default();
        for s in &sessions {
            gate.add_session_gate(&s.stats.budgets, &s.stats.breakers);
        }

        let settled = acked + dead_lettered;
        let state_complete = run.messages.is_some() && settled == n && scheduled_retries == 0;
        let complete = state_complete || run.finished_ms.is_some();
        let elapsed_s = (elapsed.as_secs_f64() * 1000.0).round() / 1000.0;
        let throughput_per_s = if elapsed_s > 0.0 {
            (settled as f64 / elapsed_s * 10.0).round() / 10.0
        } else {
            0.0
        };
        Ok(Report {
            emitted: if complete {
                n
            } else {
                high.max(settled + scheduled_retries)
            },
            acked,
            dead_lettered,
            lost: if complete { n - settled.min(n) } else { 0 },
            retries: stats.retries,
            duplicates: book.duplicates()?,
            out_of_order: book.out_of_order()?,
            dead_letters_by_label,
            retries_by_rule: stats.retries_by_rule,
            throughput_per_s,
            latency_ms: Latency {
                p50: ms(quantile(&latency, 0.5, &LATENCY_BOUNDS)),
                p99: ms(quantile(&latency, 0.99, &LATENCY_BOUNDS)),
            },
            messages: run.messages,
            keyed: run.keyed,
            time_scale: run.time_scale,
            elapsed_s,
            complete,
            outstanding: if complete {
                0
            } else {
                n.saturating_sub(settled)
            },
            scheduled_retries,
            deliveries: stats.deliveries,
            failures_by_code: stats.failures_by_code,
            sessions: sessions.len() as u64,
            node: None,
            budgets: gate.budgets,
            breakers: gate.breakers,
        })
    }

    /// The report as one JSON document.
    pub fn json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|_| "{}".into())
    }

    /// The report as text, for a terminal.
    pub fn text(&self) -> String {
        let mut out = String::new();
        let total = match (self.messages, self.keyed) {
            (Some(n), false) => format!("{n} messages"),
            (Some(n), true) => format!("{n} keyed messages"),
            (None, _) => "unbounded".to_owned(),
        };
        let state = if self.complete {
            "complete".to_owned()
        } else {
            format!(
                "interrupted: {} outstanding, {} of them scheduled for retry; run it again with the same --data to finish",
                self.outstanding, self.scheduled_retries
            )
        };
        let _ = writeln!(
            out,
            "rebound run: {total}, time scale {}× ({state})",
            self.time_scale
        );
        let list = |m: &BTreeMap<String, u64>| {
            let mut v: Vec<_> = m.iter().collect();
            v.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
            v.iter()
                .map(|(k, n)| format!("{k} {n}"))
                .collect::<Vec<_>>()
                .join(" · ")
        };
        let mut line = |name: &str, value: String, detail: String| {
            let head = format!("  {name:<14} {value:>8}   ");
            for (i, part) in wrap(&detail, REPORT_WIDTH - head.len()).iter().enumerate() {
                let lead = if i == 0 {
                    head.clone()
                } else {
                    " ".repeat(head.len())
                };
                let _ = writeln!(out, "{}", format!("{lead}{part}").trim_end());
            }
        };
        line("emitted", self.emitted.to_string(), String::new());
        line("acked", self.acked.to_string(), String::new());
        line(
            "dead-lettered",
            self.dead_lettered.to_string(),
            list(&self.dead_letters_by_label),
        );
        line(
            "lost",
            self.lost.to_string(),
            if self.complete {
                String::new()
            } else {
                "(counted once complete)".into()
            },
        );
        line(
            "retries",
            self.retries.to_string(),
            list(&self.retries_by_rule),
        );
        line(
            "duplicates",
            self.duplicates.to_string(),
            "absorbed by the idempotent store".into(),
        );
        if self.keyed {
            line(
                "out of order",
                self.out_of_order.to_string(),
                "events that reached the store before an earlier event of their order".into(),
            );
        }
        line(
            "failures",
            self.failures_by_code.values().sum::<u64>().to_string(),
            list(&self.failures_by_code),
        );
        line(
            "latency",
            format!("{:.1} ms", self.latency_ms.p50),
            format!(
                "p50 · p99 {:.1} ms (emit to ack, real time)",
                self.latency_ms.p99
            ),
        );
        line(
            "throughput",
            format!("{:.0}/s", self.throughput_per_s),
            format!(
                "{} deliveries in {:.1} s{}",
                self.deliveries,
                self.elapsed_s,
                match self.sessions {
                    0 | 1 => String::new(),
                    n => format!(" over {n} sessions"),
                }
            ),
        );
        for (id, b) in &self.budgets {
            line(
                "budget",
                id.clone(),
                format!("{} retries held, {} dead-lettered", b.held, b.exhausted),
            );
        }
        for (id, keys) in &self.breakers {
            for (key, b) in keys {
                let name = match key.as_str() {
                    "" => id.clone(),
                    NO_KEY => format!("{id} {NO_KEY}"),
                    key => format!("{id} ({key})"),
                };
                let path = breaker_path(&b.states);
                let why =
                    opening_reason(&b.openings).map_or_else(String::new, |why| format!("; {why}"));
                line("breaker", name, format!("{path}; {} now{why}", b.state));
            }
        }
        if let Some(node) = &self.node {
            line(
                "this node",
                node.name.clone(),
                format!(
                    "{} deliveries, {} retries fired",
                    node.processed, node.retries_fired
                ),
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_breaker_that_flapped_shows_its_ends_and_how_often_it_opened() {
        assert_eq!(breaker_path::<&str>(&[]), "stayed closed");
        assert_eq!(
            breaker_path(&["open", "half_open", "closed"]),
            "closed → open → half_open → closed"
        );
        let mut states = Vec::new();
        for _ in 0..10 {
            states.extend(["open", "half_open"]);
        }
        states.push("closed");
        assert_eq!(
            breaker_path(&states),
            "closed → open → half_open → open → half_open → … opened 10 times, 21 changes … \
             → half_open → open → half_open → closed"
        );
    }

    #[test]
    fn the_text_report_names_the_none_key_and_says_why_a_breaker_opened() {
        let mut r = Report::default();
        let opened = |share: f64, samples| OpeningShare {
            failed_share: share,
            samples,
            open_at: Some(0.5),
            min_samples: 500,
            ..OpeningShare::default()
        };
        let hot = |heat: f64| OpeningShare {
            heat: Some(heat),
            open_on_heat: Some(5.0),
            ..opened(0.1, 30)
        };
        let keys = r.breakers.entry("gw".into()).or_default();
        keys.insert(
            "(none)".into(),
            BreakerShare {
                state: "closed".into(),
                ..BreakerShare::default()
            },
        );
        keys.insert(
            "pg".into(),
            BreakerShare {
                states: vec!["open".into(), "half_open".into(), "closed".into()],
                state: "closed".into(),
                openings: vec![opened(0.93, 640)],
            },
        );
        r.breakers.entry("fuse".into()).or_default().insert(
            String::new(),
            BreakerShare {
                states: vec!["open".into(), "half_open".into(), "open".into()],
                state: "open".into(),
                openings: vec![opened(0.6, 900), opened(0.75, 520)],
            },
        );
        r.breakers.entry("hot".into()).or_default().insert(
            String::new(),
            BreakerShare {
                states: vec!["open".into(), "half_open".into(), "open".into()],
                state: "open".into(),
                openings: vec![hot(6.5), opened(0.8, 100), hot(5.25)],
            },
        );
        let text = r.text().replace('\n', " ");
        let text: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(text.contains("breaker gw (none) stayed closed"), "{text}");
        assert!(
            text.contains("gw (pg) closed → open → half_open → closed; closed now; opened at 93% failed of 640 trees (opens at 50% of at least 500)"),
            "{text}"
        );
        assert!(
            text.contains("opened at 60%–75% failed of 520–900 trees"),
            "{text}"
        );
        assert!(!text.contains("gw  "), "{text}");
        assert!(
            text.contains("opened at 80% failed of 100 trees (opens at 50% of at least 500); opened on heat 5.25–6.5 (opens at heat 5)"),
            "{text}"
        );
    }

    #[test]
    fn the_text_report_keeps_to_80_columns_and_breaks_between_words() {
        let mut r = Report {
            messages: Some(50_000),
            complete: true,
            ..Report::default()
        };
        for rule in [
            "payment-processing",
            "stock-insufficient",
            "db-lock",
            "net-timeout",
            "rate-limited",
            "message-timeout",
            "panic",
        ] {
            r.retries_by_rule.insert(rule.to_owned(), 12_345);
        }
        for code in [
            "PAY_PROCESSING",
            "STOCK_INSUFFICIENT",
            "DB_LOCK_WAIT",
            "NET_TIMEOUT",
            "RATE_LIMITED",
            "TIMEOUT",
            "PANIC",
        ] {
            r.failures_by_code.insert(code.to_owned(), 1_234);
        }
        let text = r.text();
        for line in text.lines().skip(1) {
            assert!(
                line.chars().count() <= 80,
                "{} columns: {line:?}\n{text}",
                line.chars().count()
            );
        }
        // Every rule's name and count survive whole, on some line.
        for rule in r.retries_by_rule.keys() {
            assert!(text.contains(&format!("{rule} 12345")), "{text}");
        }
    }

    #[test]
    fn quantiles_interpolate_inside_the_bucket() {
        let mut h = Histogram::default();
        for _ in 0..100 {
            h.observe(Duration::from_millis(3)); // the (2.5 ms, 5 ms] bucket
        }
        let p50 = quantile(&h, 0.5, &LATENCY_BOUNDS).unwrap();
        assert_eq!(p50, Duration::from_micros(3750));
        assert_eq!(quantile(&Histogram::default(), 0.5, &LATENCY_BOUNDS), None);
        h.observe(Duration::from_secs(60)); // overflow: reported at the last bound
        assert_eq!(
            quantile(&h, 1.0, &LATENCY_BOUNDS),
            Some(Duration::from_secs(30))
        );
    }
}
