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

/// The histogram's buckets: 1 ms, doubling, to about 16 s.
const FIRST_BOUND_S: f64 = 0.001;
const BOUNDS: u16 = 15;

/// What a handler answered: counted by class and by status, with the time each answer took.
#[derive(Debug)]
pub struct HandlerStats {
    by_class: [AtomicU64; CLASSES.len()],
    /// Answers with a status, by status; `None`'s are the timeouts and unavailable ones.
    by_status: Mutex<BTreeMap<u16, u64>>,
    seconds: Histogram,
    /// The same observations by bucket (not cumulative; the last one is above every bound),
    /// for [`HandlerStats::latency_quantile`]: the exported histogram cannot be read back.
    buckets: [AtomicU64; BOUNDS as usize + 1],
}

impl Default for HandlerStats {
    fn default() -> Self {
        HandlerStats {
            by_class: Default::default(),
            by_status: Mutex::default(),
            seconds: Histogram::new(exponential_buckets(FIRST_BOUND_S, 2.0, BOUNDS)),
            buckets: Default::default(),
        }
    }
}

/// The upper bound of bucket `i` in seconds (`+inf` for the last).
fn bound(i: usize) -> f64 {
    if i >= usize::from(BOUNDS) {
        f64::INFINITY
    } else {
        FIRST_BOUND_S * f64::from(1u32 << i)
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
        let seconds = latency.as_secs_f64();
        self.seconds.observe(seconds);
        let i = (0..usize::from(BOUNDS))
            .find(|&i| seconds <= bound(i))
            .unwrap_or(usize::from(BOUNDS));
        self.buckets[i].fetch_add(1, Relaxed);
    }

    /// The `q` quantile (0 to 1) of the answers' latency so far, from the histogram's buckets,
    /// interpolated within its bucket as Prometheus's `histogram_quantile` does (so it is
    /// as precise as the buckets are: 1 ms, then doubling); one above every bound is the
    /// highest bound. `None` before the first answer.
    pub fn latency_quantile(&self, q: f64) -> Option<Duration> {
        let counts: Vec<u64> = self.buckets.iter().map(|b| b.load(Relaxed)).collect();
        let total: u64 = counts.iter().sum();
        if total == 0 {
            return None;
        }
        let rank = q.clamp(0.0, 1.0) * total as f64;
        let (mut lower, mut below) = (0.0, 0u64);
        for (i, &n) in counts.iter().enumerate() {
            let upper = bound(i);
            if n > 0 && (below + n) as f64 >= rank {
                if upper.is_infinite() {
                    return Some(Duration::from_secs_f64(lower));
                }
                let within = (rank - below as f64).max(0.0) / n as f64;
                return Some(Duration::from_secs_f64(lower + (upper - lower) * within));
            }
            below += n;
            lower = upper;
        }
        Some(Duration::from_secs_f64(lower))
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

    /// The attached stats, if a relay attached its handler's (the console's overview reads
    /// them).
    pub fn stats(&self) -> Option<Arc<HandlerStats>> {
        self.stats
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ClassLabel {
    class: &'static str,
}

impl Collector for HandlerMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let Some(stats) = self.stats() else {
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

    #[test]
    fn latency_quantiles_come_from_the_buckets() {
        let stats = HandlerStats::default();
        assert_eq!(stats.latency_quantile(0.5), None);
        // 98 answers within 1 ms, one at 3 ms (the 2-4 ms bucket), one above every bound.
        for _ in 0..98 {
            stats.answered("2xx", Some(200), Duration::from_micros(300));
        }
        stats.answered("5xx", Some(503), Duration::from_millis(3));
        stats.answered("timeout", None, Duration::from_secs(60));
        let ms = |q| stats.latency_quantile(q).unwrap().as_secs_f64() * 1000.0;
        // The median is half-way into the first bucket (rank 50 of its 98).
        assert!((ms(0.5) - 50.0 / 98.0).abs() < 1e-6, "{}", ms(0.5));
        // The 99th is the 99th answer: the end of the 2-4 ms bucket.
        assert!((ms(0.99) - 4.0).abs() < 1e-6, "{}", ms(0.99));
        // Above every bound: the highest bound (16.384 s).
        assert!((ms(1.0) - 16_384.0).abs() < 1e-6, "{}", ms(1.0));
    }
}
