//! What a relay did, printed after its stop (`sources.md`, "`rebound relay`"): received,
//! acked, retried, dead-lettered, in custody, and the handler's answers by status.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::Ordering::Relaxed;

use rebound_runtime::sources::{CustodyAt, SourceStats};
use rebound_runtime::stats::StatsSnapshot;
use serde_json::json;

use crate::metrics::handler::HandlerStats;

/// A relay's report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelayReport {
    /// The source, as it is shown (its stream).
    pub source: String,
    /// Messages read from the broker (redeliveries included).
    pub received: u64,
    /// Of them, delivered again by the broker (or claimed from a dead consumer).
    pub redelivered: u64,
    /// Deliveries acked by the handler.
    pub acked: u64,
    /// Retries the rules scheduled.
    pub retried: u64,
    /// Dead letters stored.
    pub dead_lettered: u64,
    /// Messages acknowledged to the broker, by what gave Rebound custody.
    pub custody: BTreeMap<&'static str, u64>,
    /// Read and not yet acknowledged at the broker when the relay stopped (the broker
    /// delivers them again).
    pub unacked: u64,
    /// Retries waiting in the store at the stop (the next start fires them).
    pub waiting: u64,
    /// The handler's answers by class.
    pub classes: BTreeMap<&'static str, u64>,
    /// The handler's answers with a status, by status.
    pub statuses: BTreeMap<u16, u64>,
}

impl RelayReport {
    /// The report of a relay over `source` (shown as `name`) and `handler`, from the
    /// topology's last counters.
    pub fn new(
        name: &str,
        source: &SourceStats,
        handler: &HandlerStats,
        topology: &StatsSnapshot,
    ) -> RelayReport {
        RelayReport {
            source: name.to_owned(),
            received: source.received.load(Relaxed),
            redelivered: source.redelivered.load(Relaxed),
            acked: topology.acked,
            retried: topology.retries,
            dead_lettered: topology.dead_lettered,
            custody: CustodyAt::ALL
                .into_iter()
                .map(|at| (at.as_str(), source.custody(at)))
                .collect(),
            unacked: source.unacked.load(Relaxed),
            waiting: topology.retry_queue_depth,
            classes: handler.by_class().into_iter().collect(),
            statuses: handler.by_status(),
        }
    }

    fn custody_total(&self) -> u64 {
        self.custody.values().sum()
    }

    /// The report for a person.
    pub fn text(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "relay of {}", self.source);
        let _ = writeln!(
            out,
            "  received       {} ({} delivered again by the broker)",
            self.received, self.redelivered
        );
        let _ = writeln!(out, "  acked          {}", self.acked);
        let _ = writeln!(out, "  retried        {}", self.retried);
        let _ = writeln!(out, "  dead-lettered  {}", self.dead_lettered);
        let custody: Vec<String> = self
            .custody
            .iter()
            .map(|(at, n)| format!("{n} {}", at.replace('_', "-")))
            .collect();
        let _ = writeln!(
            out,
            "  in custody     {} acknowledged to the broker ({})",
            self.custody_total(),
            custody.join(", ")
        );
        let _ = writeln!(
            out,
            "  left           {} unacknowledged at the broker (delivered again), {} retries waiting in the store",
            self.unacked, self.waiting
        );
        let answers: Vec<String> = self
            .statuses
            .iter()
            .map(|(status, n)| format!("{status}: {n}"))
            .chain(["timeout", "unavailable"].into_iter().filter_map(|c| {
                self.classes
                    .get(c)
                    .filter(|n| **n > 0)
                    .map(|n| format!("{c}: {n}"))
            }))
            .collect();
        let answers = if answers.is_empty() {
            "none".to_owned()
        } else {
            answers.join(", ")
        };
        let _ = writeln!(out, "  handler        {answers}");
        out
    }

    /// The report as one JSON document.
    pub fn json(&self) -> String {
        let statuses: BTreeMap<String, u64> = self
            .statuses
            .iter()
            .map(|(s, n)| (s.to_string(), *n))
            .collect();
        json!({
            "source": self.source,
            "received": self.received,
            "redelivered": self.redelivered,
            "acked": self.acked,
            "retried": self.retried,
            "dead_lettered": self.dead_lettered,
            "custody": self.custody,
            "in_custody": self.custody_total(),
            "unacked": self.unacked,
            "waiting": self.waiting,
            "handler": {"classes": self.classes, "statuses": statuses},
        })
        .to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn the_report_says_what_came_in_and_how_each_ended() {
        let source = SourceStats::default();
        source.received.store(12, Relaxed);
        source.redelivered.store(2, Relaxed);
        for _ in 0..9 {
            source.count_custody(CustodyAt::Acked);
        }
        source.count_custody(CustodyAt::Retained);
        source.count_custody(CustodyAt::DeadLettered);
        let handler = HandlerStats::default();
        for _ in 0..9 {
            handler.answered("2xx", Some(200), Duration::from_millis(1));
        }
        handler.answered("5xx", Some(503), Duration::from_millis(1));
        handler.answered("timeout", None, Duration::from_secs(1));
        let topology = StatsSnapshot {
            acked: 9,
            retries: 2,
            dead_lettered: 1,
            ..StatsSnapshot::default()
        };
        let report = RelayReport::new("orders", &source, &handler, &topology);
        let text = report.text();
        for part in [
            "relay of orders",
            "received       12 (2 delivered again",
            "acked          9",
            "retried        2",
            "dead-lettered  1",
            "in custody     11 acknowledged to the broker (9 acked, 1 dead-lettered, 1 retained)",
            "handler        200: 9, 503: 1, timeout: 1",
        ] {
            assert!(text.contains(part), "{part:?} missing from:\n{text}");
        }
        let doc: serde_json::Value = serde_json::from_str(&report.json()).expect("JSON");
        assert_eq!(doc["in_custody"], 11);
        assert_eq!(doc["handler"]["statuses"]["503"], 1);
        assert_eq!(doc["handler"]["classes"]["timeout"], 1);
    }
}
