//! The broker sources' metrics (`sources.md`, "`rebound relay`"), read at each scrape from
//! each attached source's [`SourceStats`]: `rebound_source_received_total{source}`,
//! `rebound_source_redelivered_total{source}`, `rebound_source_custody_total{source,at}`,
//! `rebound_source_unacked{source}` and `rebound_source_lag{source}`. They also say whether
//! every source's broker answers, for `/readyz`.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex, PoisonError};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use rebound_runtime::sources::{CustodyAt, SourceStats};
use rebound_runtime::time::Timestamp;

/// The sources' group of the registry: each source by the name it is shown under.
#[derive(Debug, Default)]
pub struct SourceMetrics {
    sources: Mutex<Vec<(String, Arc<SourceStats>)>>,
}

impl SourceMetrics {
    /// Reports `stats` as source `name` from now on.
    pub fn attach(&self, name: impl Into<String>, stats: Arc<SourceStats>) {
        let mut sources = self.sources.lock().unwrap_or_else(PoisonError::into_inner);
        sources.push((name.into(), stats));
    }

    /// The first source whose broker does not answer, and since when.
    pub fn unreachable(&self) -> Option<(String, Timestamp)> {
        let sources = self.sources.lock().unwrap_or_else(PoisonError::into_inner);
        sources
            .iter()
            .find_map(|(name, s)| s.unreachable_since().map(|at| (name.clone(), at)))
    }

    /// Every attached source: its name and its stats (the console's overview reads them).
    pub fn each(&self) -> Vec<(String, Arc<SourceStats>)> {
        self.sources
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SourceLabel {
    source: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CustodyLabels {
    source: String,
    at: &'static str,
}

impl Collector for SourceMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let sources = self.each();
        if sources.is_empty() {
            return Ok(());
        }
        let label = |name: &String| SourceLabel {
            source: name.clone(),
        };
        type Read = fn(&SourceStats) -> u64;
        let counters: [(&str, &str, Read); 2] = [
            (
                "source_received",
                "Messages read from the source's broker.",
                |s| s.received.load(Relaxed),
            ),
            (
                "source_redelivered",
                "Messages the broker delivered again (or taken over from a dead consumer).",
                |s| s.redelivered.load(Relaxed),
            ),
        ];
        for (name, help, read) in counters {
            let mut family = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
            for (source, stats) in &sources {
                ConstCounter::new(read(stats)).encode(family.encode_family(&label(source))?)?;
            }
        }
        let mut custody = encoder.encode_descriptor(
            "source_custody",
            "Messages acknowledged to the broker, by what gave Rebound custody: a stored first retry, an ack, a stored dead letter.",
            None,
            MetricType::Counter,
        )?;
        for (source, stats) in &sources {
            for at in CustodyAt::ALL {
                let labels = CustodyLabels {
                    source: source.clone(),
                    at: at.as_str(),
                };
                ConstCounter::new(stats.custody(at)).encode(custody.encode_family(&labels)?)?;
            }
        }
        let gauges: [(&str, &str, Read); 2] = [
            (
                "source_unacked",
                "Messages read and not yet confirmed acknowledged at the broker.",
                |s| s.unacked.load(Relaxed),
            ),
            (
                "source_lag",
                "What the broker says is waiting to be read.",
                |s| s.lag.load(Relaxed),
            ),
        ];
        for (name, help, read) in gauges {
            let mut family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
            for (source, stats) in &sources {
                let value = i64::try_from(read(stats)).unwrap_or(i64::MAX);
                ConstGauge::new(value).encode(family.encode_family(&label(source))?)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::Metrics;

    #[test]
    fn each_source_s_counts_are_exported_under_its_name() {
        let metrics = Metrics::new();
        let stats = Arc::new(SourceStats::default());
        stats.received.store(7, Relaxed);
        stats.unacked.store(3, Relaxed);
        stats.count_custody(CustodyAt::Retained);
        metrics.sources.attach("orders", stats.clone());
        let text = metrics.encode(false);
        for line in [
            "rebound_source_received_total{source=\"orders\"} 7",
            "rebound_source_custody_total{source=\"orders\",at=\"retained\"} 1",
            "rebound_source_custody_total{source=\"orders\",at=\"acked\"} 0",
            "rebound_source_unacked{source=\"orders\"} 3",
        ] {
            assert!(text.contains(line), "{line} missing from:\n{text}");
        }
        assert_eq!(metrics.sources.unreachable(), None);
        stats.reachable(false);
        assert_eq!(
            metrics.sources.unreachable().map(|(n, _)| n),
            Some("orders".into())
        );
    }
}
