//! The Prometheus registry and the spec's metric names (`docs/spec/runtime.md`, "Metrics").
//!
//! Metrics come in groups, one struct per part of the system, each registering its own
//! families into the one [`Registry`]: the rule-set group (`rebound_rules_reloads_total{result}`,
//! `rebound_rules_version_info{version}`) and the runtime group ([`runtime`]: messages,
//! failures, retries, dead letters, pending, queue depth, fuse, latencies), which reads the
//! topology's live counters at each scrape, and the rule-error group ([`rule_errors`]:
//! `rebound_rule_errors_total{rule}`), which reads the set in force at each scrape, and the
//! alert group ([`alerts`]: `rebound_alerts_total{receiver, result}`), which reads the alert
//! dispatcher's counts once one is attached, and the release group ([`release`]: the shadow's
//! decisions, the canary's state and its arms' figures).
//!
//! `GET /metrics` serves the OpenMetrics text to a scraper that asks for it, and the classic
//! Prometheus text format (0.0.4) otherwise; see [`Metrics::encode`].

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use rebound_engine::reload::{HistoryEntry, Outcome};
use std::sync::{Arc, Mutex, PoisonError};

pub mod alerts;
pub mod fleet;
pub mod gate;
pub mod handler;
pub mod letters;
pub mod publish;
pub mod recent;
pub mod release;
pub mod rule_errors;
pub mod runtime;
pub mod sources;
pub use alerts::AlertMetrics;
pub use fleet::{FleetGauges, FleetMetrics, FleetSnapshot};
pub use gate::{GateGauges, GateMetrics};
pub use letters::{LetterGauges, LetterMetrics};
pub use recent::{Rates, RecentRates};
pub use rule_errors::RuleErrorMetrics;
pub use runtime::RuntimeMetrics;

/// Every metric of the process.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    /// The rule-set reload metrics.
    pub rules: RuleMetrics,
    /// The runtime's metrics; attach a running topology's stats to fill them.
    pub runtime: Arc<RuntimeMetrics>,
    /// A shared store's metrics; attach a fleet node's gauges to fill them.
    pub fleet: Arc<FleetMetrics>,
    /// Guard and script errors per rule; attach the live rules' handle to fill them.
    pub rule_errors: Arc<RuleErrorMetrics>,
    /// Alerts by receiver and result; attach the alert dispatcher to fill them.
    pub alerts: Arc<AlertMetrics>,
    /// The dead letters: open, overdue, oldest, redrives; attach a pipeline to fill them.
    pub letters: Arc<LetterMetrics>,
    /// The budgets and breakers; attach a pipeline to fill them.
    pub gate: Arc<GateMetrics>,
    /// The broker sources; attach each source's counters to fill them.
    pub sources: Arc<sources::SourceMetrics>,
    /// A relay's handler; attach its stats to fill them.
    pub handler: Arc<handler::HandlerMetrics>,
    /// A relay's dead letters published to the broker; attach its publisher's stats to fill
    /// them.
    pub publish: Arc<publish::PublishMetrics>,
    /// The shadow's and the canary's; attach the process's release desk to fill them.
    pub release: Arc<release::ReleaseMetrics>,
    /// The last 15 minutes of per-second rates (not exported: `GET /v1/overview` shows them).
    pub recent: RecentRates,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    /// A registry with every group registered under the `rebound_` prefix.
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("rebound");
        let rules = RuleMetrics::register(&mut registry);
        let runtime = Arc::new(RuntimeMetrics::default());
        registry.register_collector(Box::new(runtime.clone()));
        let fleet = Arc::new(FleetMetrics::default());
        registry.register_collector(Box::new(fleet.clone()));
        let rule_errors = Arc::new(RuleErrorMetrics::default());
        registry.register_collector(Box::new(rule_errors.clone()));
        let alerts = Arc::new(AlertMetrics::default());
        registry.register_collector(Box::new(alerts.clone()));
        let letters = Arc::new(LetterMetrics::default());
        registry.register_collector(Box::new(letters.clone()));
        let gate = Arc::new(GateMetrics::default());
        registry.register_collector(Box::new(gate.clone()));
        let sources = Arc::new(sources::SourceMetrics::default());
        registry.register_collector(Box::new(sources.clone()));
        let handler = Arc::new(handler::HandlerMetrics::default());
        registry.register_collector(Box::new(handler.clone()));
        let publish = Arc::new(publish::PublishMetrics::default());
        registry.register_collector(Box::new(publish.clone()));
        let release = Arc::new(release::ReleaseMetrics::default());
        registry.register_collector(Box::new(release.clone()));
        Metrics {
            registry,
            release,
            rules,
            runtime,
            fleet,
            rule_errors,
            alerts,
            letters,
            gate,
            sources,
            handler,
            publish,
            recent: RecentRates::default(),
        }
    }

    /// Takes one sample of the attached topology's counters into [`Metrics::recent`].
    pub fn sample_recent(&self) {
        self.recent
            .sample(&self.runtime.snapshot(), std::time::SystemTime::now());
    }

    /// The exposition: OpenMetrics text when `openmetrics`, else Prometheus text 0.0.4.
    pub fn encode(&self, openmetrics: bool) -> String {
        let mut text = String::new();
        if prometheus_client::encoding::text::encode(&mut text, &self.registry).is_err() {
            // Writing into a String cannot fail; keep the scrape alive regardless.
            text.clear();
        }
        if openmetrics {
            text
        } else {
            openmetrics_to_prometheus(&text)
        }
    }
}

/// Labels of `rebound_rules_reloads_total`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabel {
    /// `accepted` or `rejected`.
    pub result: &'static str,
}

/// Labels of `rebound_rules_version_info`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct VersionLabel {
    /// The version in force.
    pub version: String,
}

/// Reload counts and the version in force.
#[derive(Debug)]
pub struct RuleMetrics {
    reloads: Family<ResultLabel, Counter>,
    version_info: Family<VersionLabel, Gauge>,
    current: Mutex<Option<String>>,
}

impl RuleMetrics {
    fn register(registry: &mut Registry) -> RuleMetrics {
        let reloads = Family::<ResultLabel, Counter>::default();
        let version_info = Family::<VersionLabel, Gauge>::default();
        // Both results are present from the start, so a rate() over them is defined.
        for result in ["accepted", "rejected"] {
            let _ = reloads.get_or_create(&ResultLabel { result });
        }
        registry.register(
            "rules_reloads",
            "Rule-set reload attempts (start-up load, file changes, pushes, pulls, rollbacks), by result",
            reloads.clone(),
        );
        registry.register(
            "rules_version_info",
            "The version of the rule set in force (value 1)",
            version_info.clone(),
        );
        RuleMetrics {
            reloads,
            version_info,
            current: Mutex::new(None),
        }
    }

    /// Counts a reload attempt and, for an accepted one, moves the version label.
    pub fn observe(&self, entry: &HistoryEntry) {
        self.reloads
            .get_or_create(&ResultLabel {
                result: entry.outcome.as_str(),
            })
            .inc();
        if entry.outcome == Outcome::Accepted {
            self.set_version(entry.version.as_str());
        }
    }

    /// Makes `version` the one `rebound_rules_version_info` reports.
    pub fn set_version(&self, version: &str) {
        let mut current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        if current.as_deref() == Some(version) {
            return;
        }
        if let Some(old) = current.take() {
            self.version_info.remove(&VersionLabel { version: old });
        }
        self.version_info
            .get_or_create(&VersionLabel {
                version: version.to_string(),
            })
            .set(1);
        *current = Some(version.to_string());
    }

    /// The count of reload attempts with `outcome` so far.
    pub fn reloads(&self, outcome: Outcome) -> u64 {
        self.reloads
            .get_or_create(&ResultLabel {
                result: outcome.as_str(),
            })
            .get()
    }
}

/// OpenMetrics text → Prometheus text 0.0.4: counters are declared under their `_total`
/// sample name, `# UNIT` lines and the `# EOF` marker go.
fn openmetrics_to_prometheus(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut counters = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ")
            && let Some(name) = rest.strip_suffix(" counter")
        {
            counters.push(name.to_string());
        }
    }
    for line in text.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        let renamed = ["# HELP ", "# TYPE "].iter().find_map(|prefix| {
            let rest = line.strip_prefix(prefix)?;
            let (name, tail) = rest.split_once(' ')?;
            counters
                .iter()
                .any(|c| c == name)
                .then(|| format!("{prefix}{name}_total {tail}"))
        });
        out.push_str(renamed.as_deref().unwrap_or(line));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use rebound_engine::reload::Source;
    use std::time::SystemTime;

    fn entry(version: &str, outcome: Outcome) -> HistoryEntry {
        HistoryEntry {
            version: version.parse().expect("a test version"),
            outcome,
            source: Source::Push,
            at: SystemTime::now(),
            errors: Vec::new(),
            by: None,
            arms: None,
        }
    }

    #[test]
    fn reloads_are_counted_and_the_version_label_moves() {
        let m = Metrics::new();
        m.rules
            .observe(&entry("00000000000aaaaa", Outcome::Accepted));
        m.rules
            .observe(&entry("00000000000bbbbb", Outcome::Rejected));
        m.rules
            .observe(&entry("00000000000ccccc", Outcome::Accepted));
        let text = m.encode(false);
        assert!(
            text.contains("rebound_rules_reloads_total{result=\"accepted\"} 2\n"),
            "{text}"
        );
        assert!(
            text.contains("rebound_rules_reloads_total{result=\"rejected\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("rebound_rules_version_info{version=\"00000000000ccccc\"} 1\n"),
            "{text}"
        );
        assert!(!text.contains("00000000000aaaaa"), "{text}");
        assert!(
            text.contains("# TYPE rebound_rules_reloads_total counter\n"),
            "{text}"
        );
        assert!(!text.contains("# EOF"));
    }

    #[test]
    fn openmetrics_is_served_to_who_asks_for_it() {
        let m = Metrics::new();
        let text = m.encode(true);
        assert!(text.ends_with("# EOF\n"), "{text}");
        assert!(
            text.contains("# TYPE rebound_rules_reloads counter\n"),
            "{text}"
        );
        assert!(
            text.contains("rebound_rules_reloads_total{result=\"rejected\"} 0\n"),
            "{text}"
        );
    }
}
