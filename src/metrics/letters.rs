//! The dead letters' metrics (`operations.md`, "Metrics"), read at each scrape: open and
//! overdue letters and the age of the oldest open one, by label (from the store), and the
//! redrives the labels made (from the runtime's
//! [`LetterKeeper`](rebound_runtime::durable::labels::LetterKeeper)). In a
//! process without a pipeline they are absent but for their descriptors.

use arc_swap::ArcSwapOption;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use std::sync::Arc;

use rebound_runtime::durable::labels::LetterCounts;

/// Where the dead letters' metrics come from.
pub trait LetterGauges: Send + Sync {
    /// The letters now (`None` if the store cannot be read: the scrape leaves them out).
    fn letter_snapshot(&self) -> Option<LetterCounts>;
}

/// The dead-letter group of the registry.
#[derive(Default)]
pub struct LetterMetrics {
    source: ArcSwapOption<Box<dyn LetterGauges>>,
}

impl std::fmt::Debug for LetterMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LetterMetrics")
            .field("attached", &self.source.load().is_some())
            .finish()
    }
}

impl LetterMetrics {
    /// Reports `gauges` from now on.
    pub fn attach(&self, gauges: impl LetterGauges + 'static) {
        self.source.store(Some(Arc::new(Box::new(gauges))));
    }
}

/// Any topology's keeper: its store's open letters and its redrives.
impl LetterGauges for rebound_runtime::durable::labels::LetterKeeper {
    fn letter_snapshot(&self) -> Option<LetterCounts> {
        self.counts()
            .inspect_err(|e| {
                tracing::warn!(error = %e, "reading the open dead letters for the metrics failed")
            })
            .ok()
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LabelSet {
    label: String,
}

impl Collector for LetterMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let s = self
            .source
            .load()
            .as_ref()
            .and_then(|g| g.letter_snapshot())
            .unwrap_or_default();
        let label = |l: &str| LabelSet {
            label: l.to_owned(),
        };
        let mut open = encoder.encode_descriptor(
            "dead_letters_open",
            "Open dead letters (status dead), by label.",
            None,
            MetricType::Gauge,
        )?;
        for o in &s.open {
            ConstGauge::new(o.open as i64).encode(open.encode_family(&label(&o.label))?)?;
        }
        let mut overdue = encoder.encode_descriptor(
            "dead_letters_overdue",
            "Open dead letters older than their label's SLA, by label.",
            None,
            MetricType::Gauge,
        )?;
        for o in &s.open {
            ConstGauge::new(o.overdue as i64).encode(overdue.encode_family(&label(&o.label))?)?;
        }
        let mut oldest = encoder.encode_descriptor(
            "dead_letter_oldest_open_age_seconds",
            "Age of the oldest open dead letter, by label.",
            None,
            MetricType::Gauge,
        )?;
        for o in &s.open {
            let age = s.now.saturating_duration_since(o.oldest).as_secs_f64();
            ConstGauge::new(age).encode(oldest.encode_family(&label(&o.label))?)?;
        }
        let mut redrives = encoder.encode_descriptor(
            "redrives",
            "Dead letters replayed automatically by their label's redrive, by label.",
            None,
            MetricType::Counter,
        )?;
        for (l, n) in &s.redrives {
            ConstCounter::new(*n).encode(redrives.encode_family(&label(l))?)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::Metrics;
    use rebound_runtime::store::OpenLetters;
    use rebound_runtime::time::Timestamp;

    struct Fixed;

    impl LetterGauges for Fixed {
        fn letter_snapshot(&self) -> Option<LetterCounts> {
            Some(LetterCounts {
                open: vec![OpenLetters {
                    label: "L1".into(),
                    open: 7,
                    overdue: 2,
                    oldest: Timestamp::from_millis(1_000),
                }],
                redrives: vec![("L1".into(), 3)],
                now: Timestamp::from_millis(91_500),
            })
        }
    }

    #[test]
    fn the_letter_gauges_are_read_at_each_scrape() {
        let metrics = Metrics::new();
        let before = metrics.encode(false);
        assert!(
            before.contains("# TYPE rebound_dead_letters_open gauge"),
            "{before}"
        );
        metrics.letters.attach(Fixed);
        let text = metrics.encode(false);
        for line in [
            "rebound_dead_letters_open{label=\"L1\"} 7",
            "rebound_dead_letters_overdue{label=\"L1\"} 2",
            "rebound_dead_letter_oldest_open_age_seconds{label=\"L1\"} 90.5",
            "rebound_redrives_total{label=\"L1\"} 3",
        ] {
            assert!(text.contains(line), "{line} missing from:\n{text}");
        }
    }
}
