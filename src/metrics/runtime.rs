//! The runtime's metrics, read from the topology's live [`Stats`] at each scrape.
//!
//! The executors already count everything in `Stats` (atomics on the hot path); copying
//! those counts into a second set of Prometheus counters would put work on every ack. So the
//! runtime group is a [`Collector`]: a scrape takes one snapshot and encodes it. Before a
//! topology is attached (or in a process without one), every metric reads zero, so scrapers
//! and dashboards see the names from the start.
//!
//! One count is not the runtime's: `rebound_duplicates_total`, the deliveries the bundled
//! pipeline's idempotent order sink absorbed, is counted by that sink and attached here
//! ([`RuntimeMetrics::attach_duplicates`]); the runtime cannot tell a duplicate write.

use arc_swap::ArcSwapOption;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{
    DescriptorEncoder, EncodeLabelSet, EncodeMetric, MetricEncoder, NoLabelSet,
};
use prometheus_client::metrics::MetricType;
use rebound_runtime::stats::{
    ACKED_ATTEMPTS, BOLT_LATENCY_BOUNDS, Histogram, LATENCY_BOUNDS, RETRY_DELAY_BOUNDS, Stats,
    StatsSnapshot,
};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// The topology whose counters `/metrics` reports, attached once it runs.
#[derive(Default)]
pub struct RuntimeMetrics {
    stats: ArcSwapOption<Stats>,
    /// On a shared store: the fleet's retry queue depth, read from the store.
    fleet_depth: ArcSwapOption<AtomicU64>,
    /// The deliveries an idempotent sink absorbed (the bundled pipeline's order sink).
    duplicates: ArcSwapOption<AtomicU64>,
}

impl std::fmt::Debug for RuntimeMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RuntimeMetrics")
            .field("attached", &self.stats.load().is_some())
            .finish()
    }
}

impl RuntimeMetrics {
    /// Reports `stats` from now on.
    pub fn attach(&self, stats: Arc<Stats>) {
        self.stats.store(Some(stats));
    }

    /// Reports `depth` as `rebound_retry_queue_depth` from now on (a fleet's depth, read from
    /// the shared store, rather than this process's queues).
    pub fn attach_fleet_depth(&self, depth: Arc<AtomicU64>) {
        self.fleet_depth.store(Some(depth));
    }

    /// Reports `duplicates` as `rebound_duplicates_total` from now on: the deliveries an
    /// idempotent sink of the topology absorbed, which only the sink can tell.
    pub fn attach_duplicates(&self, duplicates: Arc<AtomicU64>) {
        self.duplicates.store(Some(duplicates));
    }

    /// The attached topology's counters now (all zero before one is attached).
    pub fn snapshot(&self) -> StatsSnapshot {
        self.stats
            .load()
            .as_ref()
            .map(|s| s.snapshot())
            .unwrap_or_default()
    }
}

/// A counter or gauge value as one sample.
#[derive(Debug)]
pub(super) struct Value(pub(super) MetricType, pub(super) u64);

impl EncodeMetric for Value {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        match self.0 {
            MetricType::Counter => encoder.encode_counter::<NoLabelSet, _, u64>(&self.1, None),
            _ => encoder.encode_gauge(&i64::try_from(self.1).unwrap_or(i64::MAX)),
        }
    }

    fn metric_type(&self) -> MetricType {
        self.0
    }
}

/// A counter of seconds.
#[derive(Debug)]
struct SecondsTotal(std::time::Duration);

impl EncodeMetric for SecondsTotal {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        encoder.encode_counter::<NoLabelSet, _, u64>(&self.0.as_secs_f64(), None)
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Counter
    }
}

/// A gauge of seconds.
#[derive(Debug)]
struct SecondsGauge(std::time::Duration);

impl EncodeMetric for SecondsGauge {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        encoder.encode_gauge(&self.0.as_secs_f64())
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Gauge
    }
}

/// A histogram snapshot with its bucket bounds, in seconds.
#[derive(Debug)]
struct Seconds<'a>(&'a Histogram, &'a [std::time::Duration]);

impl EncodeMetric for Seconds<'_> {
    fn encode(&self, encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        self.encode_with(encoder)
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}

impl Seconds<'_> {
    fn encode_with(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        // prometheus-client takes per-bucket counts and makes them cumulative itself.
        let buckets: Vec<(f64, u64)> = self
            .0
            .buckets
            .iter()
            .enumerate()
            .map(|(i, &n)| (self.1.get(i).map_or(f64::INFINITY, |b| b.as_secs_f64()), n))
            .collect();
        // The snapshot reads its atomics one by one, so an observation that lands meanwhile
        // can be in the count and not yet in a bucket; `_count` must equal the `+Inf` bucket.
        let count = self.0.buckets.iter().sum();
        encoder.encode_histogram::<NoLabelSet>(self.0.sum.as_secs_f64(), count, &buckets, None)
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Code {
    code: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Rule {
    rule: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Label {
    label: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Attempt {
    attempt: &'static str,
}

/// The `attempt` label of each slot of [`StatsSnapshot::acked_by_attempt`].
const ATTEMPTS: [&str; ACKED_ATTEMPTS] = ["1", "2", "3", "4", "5", "6+"];

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Component {
    component: String,
}

pub(super) fn single(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    metric: &impl EncodeMetric,
) -> std::fmt::Result {
    let e = encoder.encode_descriptor(name, help, None, metric.metric_type())?;
    metric.encode(e)
}

fn by_label<L: EncodeLabelSet>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    counts: &BTreeMap<String, u64>,
    label: impl Fn(String) -> L,
) -> std::fmt::Result {
    let mut family = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
    for (key, count) in counts {
        let labels = label(key.clone());
        Value(MetricType::Counter, *count).encode(family.encode_family(&labels)?)?;
    }
    Ok(())
}

/// `rebound_acked_by_attempt_total{attempt}`: every attempt label, zeros included.
fn acked_by_attempt(encoder: &mut DescriptorEncoder, s: &StatsSnapshot) -> std::fmt::Result {
    let mut family = encoder.encode_descriptor(
        "acked_by_attempt",
        "Acked messages, by the attempt that succeeded (1 to 5, then 6+).",
        None,
        MetricType::Counter,
    )?;
    for (attempt, count) in ATTEMPTS.into_iter().zip(s.acked_by_attempt) {
        Value(MetricType::Counter, count).encode(family.encode_family(&Attempt { attempt })?)?;
    }
    Ok(())
}

/// `rebound_bolt_latency_seconds{component}`: one histogram per bolt component.
fn bolt_latency(encoder: &mut DescriptorEncoder, s: &StatsSnapshot) -> std::fmt::Result {
    let mut family = encoder.encode_descriptor(
        "bolt_latency_seconds",
        "Time a bolt task spends on one tuple, by component.",
        None,
        MetricType::Histogram,
    )?;
    for (component, h) in &s.bolt_latency {
        let labels = Component {
            component: component.clone(),
        };
        Seconds(h, &BOLT_LATENCY_BOUNDS).encode_with(family.encode_family(&labels)?)?;
    }
    Ok(())
}

impl Collector for RuntimeMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let s = self.snapshot();
        let counter = |v: u64| Value(MetricType::Counter, v);
        let gauge = |v: u64| Value(MetricType::Gauge, v);
        let e = &mut encoder;
        single(
            e,
            "messages_emitted",
            "Deliveries emitted by spouts (new messages and retries).",
            &counter(s.emitted),
        )?;
        single(
            e,
            "messages_new",
            "First deliveries: messages emitted for the first time (retries are not new).",
            &counter(s.new_messages),
        )?;
        single(
            e,
            "messages_acked",
            "Messages whose whole tuple tree completed.",
            &counter(s.acked),
        )?;
        acked_by_attempt(e, &s)?;
        single(
            e,
            "retry_fuse_open",
            "1 while the retry fuse holds retries back, else 0.",
            &gauge(u64::from(s.fuse_open)),
        )?;
        by_label(
            e,
            "failures",
            "Failed tuple trees, by failure code.",
            &s.failures_by_code,
            |code| Code { code },
        )?;
        by_label(
            e,
            "retries_scheduled",
            "Retries scheduled, by deciding rule.",
            &s.retries_by_rule,
            |rule| Rule { rule },
        )?;
        by_label(
            e,
            "retries_fired",
            "Retries fired (redeliveries emitted), by the rule that decided the retry.",
            &s.retries_fired_by_rule,
            |rule| Rule { rule },
        )?;
        by_label(
            e,
            "dead_letters",
            "Dead letters stored, by label.",
            &s.dead_letters_by_label,
            |label| Label { label },
        )?;
        single(
            e,
            "duplicates",
            "Deliveries that the idempotent sink absorbed (written before).",
            &counter(
                self.duplicates
                    .load()
                    .as_ref()
                    .map_or(0, |d| d.load(Relaxed)),
            ),
        )?;
        single(
            e,
            "pending",
            "Tuple trees in flight now.",
            &gauge(s.pending),
        )?;
        single(
            e,
            "pending_high_water",
            "The most tuple trees in flight at once since start.",
            &gauge(s.pending_high_water),
        )?;
        single(
            e,
            "message_timeout_seconds",
            "The message timeout in force: a tree not complete after it fails with TIMEOUT.",
            &SecondsGauge(s.message_timeout),
        )?;
        single(
            e,
            "retry_queue_depth",
            "Messages waiting for their retry now.",
            &gauge(
                self.fleet_depth
                    .load()
                    .as_ref()
                    .map_or(s.retry_queue_depth, |d| d.load(Relaxed)),
            ),
        )?;
        single(
            e,
            "spout_stalled",
            "Spout tasks stalled now: at max_spout_pending with no tree finished for a second.",
            &gauge(s.stalled_spout_tasks),
        )?;
        single(
            e,
            "spout_stalled_seconds",
            "Time spout tasks spent stalled at max_spout_pending, summed over the tasks.",
            &SecondsTotal(s.stalled),
        )?;
        single(
            e,
            "ordered_held",
            "Messages held back behind an earlier message of their key now (ordered keys).",
            &gauge(s.ordered_held),
        )?;
        single(
            e,
            "ordered_keys_blocked",
            "Keys holding a message back now, or blocked by a dead letter until an operator \
             replays or skips it.",
            &gauge(s.ordered_keys_blocked),
        )?;
        single(
            e,
            "complete_latency_seconds",
            "Time from a delivery's emit to its tree's completion.",
            &Seconds(&s.complete_latency, &LATENCY_BOUNDS),
        )?;
        single(
            e,
            "retry_delay_seconds",
            "Delays waited before scheduled retries.",
            &Seconds(&s.retry_delay, &RETRY_DELAY_BOUNDS),
        )?;
        single(
            e,
            "retry_lateness_seconds",
            "How much later than its due time each retry fired (a retry held by the fuse, a \
             budget, a breaker or its key counts the hold).",
            &Seconds(&s.retry_lateness, &LATENCY_BOUNDS),
        )?;
        single(
            e,
            "ack_seconds",
            "How long each fate waited between the acker and its spout task.",
            &Seconds(&s.ack_wait, &LATENCY_BOUNDS),
        )?;
        bolt_latency(e, &s)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::metrics::Metrics;
    use rebound_runtime::stats::{RETRY_DELAY_BOUNDS, Stats, StatsSnapshot};
    use std::sync::Arc;

    /// Every runtime metric name of the spec, as a Prometheus scraper sees it.
    const NAMES: [&str; 21] = [
        "rebound_retry_lateness_seconds_bucket",
        "rebound_ack_seconds_count",
        "rebound_messages_emitted_total",
        "rebound_messages_new_total 0\n",
        "rebound_messages_acked_total",
        "rebound_acked_by_attempt_total{attempt=\"6+\"} 0\n",
        "# TYPE rebound_retries_fired_total counter",
        "rebound_duplicates_total 0\n",
        "rebound_pending_high_water 0\n",
        "rebound_message_timeout_seconds 0",
        "# TYPE rebound_bolt_latency_seconds histogram",
        "rebound_retry_fuse_open",
        "rebound_pending",
        "rebound_retry_queue_depth",
        "rebound_complete_latency_seconds_bucket",
        "rebound_complete_latency_seconds_count",
        "rebound_retry_delay_seconds_bucket",
        "# TYPE rebound_failures_total counter",
        "# TYPE rebound_dead_letters_total counter",
        "rebound_ordered_held 0\n",
        "rebound_ordered_keys_blocked 0\n",
    ];

    #[test]
    fn every_runtime_metric_is_there_before_a_topology_runs() {
        let text = Metrics::new().encode(false);
        for name in NAMES {
            assert!(text.contains(name), "{name} missing from:\n{text}");
        }
        assert!(
            text.contains("rebound_messages_emitted_total 0\n"),
            "{text}"
        );
    }

    #[test]
    fn histogram_buckets_are_cumulative_once_and_end_at_the_count() {
        use std::time::Duration;
        let metrics = Metrics::new();
        let mut stats = StatsSnapshot::default();
        // One delay in each of (0, 10 ms], (50, 100 ms] and (1, 2.5 s].
        for ms in [5, 80, 2000] {
            stats
                .retry_delay
                .observe_in(Duration::from_millis(ms), &RETRY_DELAY_BOUNDS);
        }
        metrics.runtime.attach(Arc::new(Stats::from(&stats)));
        let text = metrics.encode(false);
        for line in [
            "rebound_retry_delay_seconds_count 3\n",
            "rebound_retry_delay_seconds_bucket{le=\"0.01\"} 1\n",
            "rebound_retry_delay_seconds_bucket{le=\"0.05\"} 1\n",
            "rebound_retry_delay_seconds_bucket{le=\"0.1\"} 2\n",
            "rebound_retry_delay_seconds_bucket{le=\"1.0\"} 2\n",
            "rebound_retry_delay_seconds_bucket{le=\"2.5\"} 3\n",
            "rebound_retry_delay_seconds_bucket{le=\"3600.0\"} 3\n",
            "rebound_retry_delay_seconds_bucket{le=\"+Inf\"} 3\n",
        ] {
            assert!(text.contains(line), "{line:?} missing from:\n{text}");
        }
    }

    #[test]
    fn stalls_show_up_as_a_gauge_and_a_seconds_counter() {
        let text = Metrics::new().encode(false);
        assert!(text.contains("rebound_spout_stalled 0\n"), "{text}");
        assert!(
            text.contains("rebound_spout_stalled_seconds_total 0.0\n"),
            "{text}"
        );
        let metrics = Metrics::new();
        let stats = StatsSnapshot {
            stalled_spout_tasks: 1,
            stalled: std::time::Duration::from_millis(22_500),
            ..StatsSnapshot::default()
        };
        metrics.runtime.attach(Arc::new(Stats::from(&stats)));
        let text = metrics.encode(false);
        assert!(text.contains("rebound_spout_stalled 1\n"), "{text}");
        assert!(
            text.contains("rebound_spout_stalled_seconds_total 22.5\n"),
            "{text}"
        );
    }

    #[test]
    fn attached_stats_show_up_with_their_labels() {
        let metrics = Metrics::new();
        let one = |key: &str| [(key.to_owned(), 1)].into();
        let stats = StatsSnapshot {
            emitted: 7,
            acked: 5,
            failures_by_code: one("DB_LOCK_WAIT"),
            retries: 1,
            retries_by_rule: one("db-lock"),
            dead_lettered: 1,
            dead_letters_by_label: one("L3"),
            ..StatsSnapshot::default()
        };
        metrics.runtime.attach(Arc::new(Stats::from(&stats)));
        let text = metrics.encode(false);
        assert!(
            text.contains("rebound_messages_emitted_total 7\n"),
            "{text}"
        );
        assert!(text.contains("rebound_messages_acked_total 5\n"), "{text}");
        assert!(
            text.contains("rebound_failures_total{code=\"DB_LOCK_WAIT\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("rebound_retries_scheduled_total{rule=\"db-lock\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("rebound_dead_letters_total{label=\"L3\"} 1\n"),
            "{text}"
        );
    }
}

#[cfg(test)]
mod operations_metrics {
    use crate::metrics::Metrics;
    use rebound_runtime::stats::{BOLT_LATENCY_BOUNDS, Histogram, Stats, StatsSnapshot};
    use std::sync::Arc;
    use std::sync::atomic::AtomicU64;
    use std::time::Duration;

    #[test]
    fn the_operations_metrics_show_their_values_and_labels() {
        let metrics = Metrics::new();
        let mut parse = Histogram::default();
        for us in [20, 20, 700] {
            parse.observe_in(Duration::from_micros(us), &BOLT_LATENCY_BOUNDS);
        }
        let stats = StatsSnapshot {
            new_messages: 10,
            acked: 9,
            acked_by_attempt: [6, 2, 0, 0, 0, 1],
            retries_fired_by_rule: [("db-lock".to_owned(), 3)].into(),
            pending_high_water: 4,
            message_timeout: Duration::from_millis(300),
            bolt_latency: [
                ("parse".to_owned(), parse),
                ("store".to_owned(), Histogram::default()),
            ]
            .into(),
            ..StatsSnapshot::default()
        };
        metrics.runtime.attach(Arc::new(Stats::from(&stats)));
        metrics
            .runtime
            .attach_duplicates(Arc::new(AtomicU64::new(2)));
        let text = metrics.encode(false);
        for line in [
            "rebound_messages_new_total 10\n",
            "rebound_acked_by_attempt_total{attempt=\"1\"} 6\n",
            "rebound_acked_by_attempt_total{attempt=\"2\"} 2\n",
            "rebound_acked_by_attempt_total{attempt=\"5\"} 0\n",
            "rebound_acked_by_attempt_total{attempt=\"6+\"} 1\n",
            "rebound_retries_fired_total{rule=\"db-lock\"} 3\n",
            "rebound_duplicates_total 2\n",
            "rebound_pending_high_water 4\n",
            "rebound_message_timeout_seconds 0.3\n",
            "# TYPE rebound_bolt_latency_seconds histogram\n",
            "rebound_bolt_latency_seconds_bucket{le=\"0.000025\",component=\"parse\"} 2\n",
            "rebound_bolt_latency_seconds_bucket{le=\"0.001\",component=\"parse\"} 3\n",
            "rebound_bolt_latency_seconds_count{component=\"parse\"} 3\n",
            "rebound_bolt_latency_seconds_count{component=\"store\"} 0\n",
        ] {
            assert!(text.contains(line), "{line:?} missing from:\n{text}");
        }
    }
}
