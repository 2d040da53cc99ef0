//! The dead letters published to the broker (`sources.md`, "Dead letters to the broker"):
//! `rebound_dead_letters_published_total{result}`, `published` for each letter the broker
//! accepted, `failed` for each attempt it refused and `unroutable` for each it took and routed
//! to no queue (a RabbitMQ exchange without a bound queue returns it), read at each scrape from the attached
//! [`PublishStats`].

use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex, PoisonError};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;

/// What a publisher did: letters accepted, attempts refused.
#[derive(Debug, Default)]
pub struct PublishStats {
    published: AtomicU64,
    failed: AtomicU64,
    unroutable: AtomicU64,
}

impl PublishStats {
    /// Counts one letter the broker accepted.
    pub fn published(&self) {
        self.published.fetch_add(1, Relaxed);
    }

    /// Counts one attempt the broker refused (or did not answer).
    pub fn failed(&self) {
        self.failed.fetch_add(1, Relaxed);
    }

    /// Counts one attempt the broker took and routed to no queue (not published: retried).
    pub fn unroutable(&self) {
        self.unroutable.fetch_add(1, Relaxed);
    }

    /// Attempts routed to no queue so far.
    pub fn unroutable_count(&self) -> u64 {
        self.unroutable.load(Relaxed)
    }

    /// Letters accepted so far and attempts refused so far.
    pub fn counts(&self) -> (u64, u64) {
        (self.published.load(Relaxed), self.failed.load(Relaxed))
    }
}

/// The publisher's group of the registry (empty until a relay attaches its publisher's stats).
#[derive(Debug, Default)]
pub struct PublishMetrics {
    stats: Mutex<Option<Arc<PublishStats>>>,
}

impl PublishMetrics {
    /// Reports `stats` from now on.
    pub fn attach(&self, stats: Arc<PublishStats>) {
        *self.stats.lock().unwrap_or_else(PoisonError::into_inner) = Some(stats);
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabel {
    result: &'static str,
}

impl Collector for PublishMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let Some(stats) = self
            .stats
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
        else {
            return Ok(());
        };
        let mut family = encoder.encode_descriptor(
            "dead_letters_published",
            "Dead letters published to dead_letters.publish: each accepted (published), each refused attempt (failed), each attempt routed to no queue (unroutable).",
            None,
            MetricType::Counter,
        )?;
        let (published, failed) = stats.counts();
        let unroutable = stats.unroutable_count();
        for (result, n) in [
            ("published", published),
            ("failed", failed),
            ("unroutable", unroutable),
        ] {
            ConstCounter::new(n).encode(family.encode_family(&ResultLabel { result })?)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::Metrics;

    #[test]
    fn published_and_failed_are_exported_once_attached() {
        let metrics = Metrics::new();
        assert!(!metrics.encode(false).contains("dead_letters_published"));
        let stats = Arc::new(PublishStats::default());
        metrics.publish.attach(stats.clone());
        stats.failed();
        stats.failed();
        stats.published();
        stats.unroutable();
        let text = metrics.encode(false);
        for line in [
            "rebound_dead_letters_published_total{result=\"published\"} 1",
            "rebound_dead_letters_published_total{result=\"failed\"} 2",
            "rebound_dead_letters_published_total{result=\"unroutable\"} 1",
        ] {
            assert!(text.contains(line), "{line} missing from:\n{text}");
        }
    }
}
