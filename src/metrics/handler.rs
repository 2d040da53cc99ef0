//! The handler's metrics (`sources.md`, "`rebound relay`"): `rebound_handler_requests_total
//! {class}` (`2xx`, `4xx`, `5xx`, `timeout`, `unavailable`) and the histogram
//! `rebound_handler_seconds`, read at each scrape from the attached [`HandlerStats`], which
//! also keeps the answers by status for the relay's report.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};

/// The classes a handler's answers are counted by, in the order they are exported.
pub const CLASSES: [&str; 5] = ["2xx", "4xx", "5xx", "timeout", "unavailable"];

/// What a handler answered: counted by class and by status, with the time each answer took.
#[derive(Debug)]
pub struct HandlerStats {
    by_class: [AtomicU64; CLASSES.len()],
    /// Answers with a status, by status; `None`'s are the timeouts and unavailable ones.
    by_status: Mutex<BTreeMap<u16, u64>>,
    seconds: Histogram,
}

impl Default for HandlerStats {
    fn default() -> Self {
        HandlerStats {
            by_class: Default::default(),
            by_status: Mutex::default(),
            // 1 ms to about 16 s.
            seconds: Histogram::new(exponential_buckets(0.001, 2.0, 15)),
        }
    }
}

impl HandlerStats {
    /// Counts one answer of `class` (one of [`CLASSES`]; another is counted as `unavailable`),
    /// with its status if it had one, that took `latency`.
    pub fn answered(&self, class: &str, status: Option<u16>, latency: Duration) {
        let i = CLASSES
            .iter()
            .position(|c| *c == class)
            .unwrap_or(CLASSES.len() - 1);
        self.by_class[i].fetch_add(1, Relaxed);
        if let Some(status) = status {
            let mut by_status = self
                .by_status
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            *by_status.entry(status).or_default() += 1;
        }
        self.seconds.observe(latency.as_secs_f64());
    }

    /// The answers so far by class, in [`CLASSES`]' order.
    pub fn by_class(&self) -> [(&'static str, u64); CLASSES.len()] {
        std::array::from_fn(|i| (CLASSES[i], self.by_class[i].load(Relaxed)))
    }

    /// The answers with a status so far, by status.
    pub fn by_status(&self) -> BTreeMap<u16, u64> {
        self.by_status
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// The handler's group of the registry (empty until a relay attaches its handler's stats).
#[derive(Debug, Default)]
pub struct HandlerMetrics {
    stats: Mutex<Option<Arc<HandlerStats>>>,
}

impl HandlerMetrics {
    /// Reports `stats` from now on.
    pub fn attach(&self, stats: Arc<HandlerStats>) {
        *self.stats.lock().unwrap_or_else(PoisonError::into_inner) = Some(stats);
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ClassLabel {
    class: &'static str,
}

impl Collector for HandlerMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let Some(stats) = self
            .stats
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
        else {
            return Ok(());
        };
        let mut requests = encoder.encode_descriptor(
            "handler_requests",
            "Requests to the handler, by how it answered: its status class, no answer in time, or no connection.",
            None,
            MetricType::Counter,
        )?;
        for (class, n) in stats.by_class() {
            ConstCounter::new(n).encode(requests.encode_family(&ClassLabel { class })?)?;
        }
        let seconds = encoder.encode_descriptor(
            "handler_seconds",
            "How long the handler took to answer a request (a timeout counts its whole bound).",
            None,
            MetricType::Histogram,
        )?;
        stats.seconds.encode(seconds)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::Metrics;

    #[test]
    fn answers_are_exported_by_class_with_their_latency() {
        let metrics = Metrics::new();
        let stats = Arc::new(HandlerStats::default());
        metrics.handler.attach(stats.clone());
        stats.answered("2xx", Some(200), Duration::from_millis(3));
        stats.answered("5xx", Some(503), Duration::from_millis(20));
        stats.answered("5xx", Some(503), Duration::from_millis(20));
        stats.answered("timeout", None, Duration::from_secs(10));
        let text = metrics.encode(false);
        for line in [
            "rebound_handler_requests_total{class=\"2xx\"} 1",
            "rebound_handler_requests_total{class=\"5xx\"} 2",
            "rebound_handler_requests_total{class=\"timeout\"} 1",
            "rebound_handler_requests_total{class=\"unavailable\"} 0",
            "rebound_handler_seconds_count 4",
        ] {
            assert!(text.contains(line), "{line} missing from:\n{text}");
        }
        assert_eq!(stats.by_status(), BTreeMap::from([(200, 1), (503, 2)]));
    }
}
