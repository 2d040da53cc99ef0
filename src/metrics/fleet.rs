//! The fleet's metrics (`docs/spec/scale-out.md`, "Operating the fleet"), read at each scrape
//! from what a node on a shared store knows ([`FleetGauges`]). In a process on the embedded
//! store they read zero, so dashboards see the names from the start.

use arc_swap::ArcSwapOption;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::MetricType;
use std::collections::BTreeMap;
use std::sync::Arc;

use super::runtime::{Value, single};

/// What a node on a shared store counts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FleetSnapshot {
    /// Retries this node claimed again after a reap (their first claimant died or stalled).
    pub reclaims: u64,
    /// This node's writes the store refused as stale.
    pub stale_writes: u64,
    /// Round trips to the store.
    pub round_trips: u64,
    /// Failed round trips, by kind.
    pub errors: BTreeMap<String, u64>,
    /// Whether the store answers now.
    pub up: bool,
    /// Live nodes seen at the last heartbeat.
    pub nodes: u64,
}

/// Where the fleet's metrics come from.
pub trait FleetGauges: Send + Sync {
    /// The counts now.
    fn fleet_snapshot(&self) -> FleetSnapshot;
}

/// The fleet group of the registry; attach a node's gauges to fill it.
#[derive(Default)]
pub struct FleetMetrics {
    source: ArcSwapOption<Box<dyn FleetGauges>>,
}

impl std::fmt::Debug for FleetMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FleetMetrics")
            .field("attached", &self.source.load().is_some())
            .finish()
    }
}

impl FleetMetrics {
    /// Reports `gauges` from now on.
    pub fn attach(&self, gauges: impl FleetGauges + 'static) {
        self.source.store(Some(Arc::new(Box::new(gauges))));
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Kind {
    kind: String,
}

impl Collector for FleetMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let s = self
            .source
            .load()
            .as_ref()
            .map(|g| g.fleet_snapshot())
            .unwrap_or_default();
        let counter = |v: u64| Value(MetricType::Counter, v);
        let gauge = |v: u64| Value(MetricType::Gauge, v);
        let e = &mut encoder;
        single(
            e,
            "retry_reclaims",
            "Retries fired again by this node because the node that claimed them died or stalled past its lease.",
            &counter(s.reclaims),
        )?;
        single(
            e,
            "stale_writes",
            "This node's writes the shared store refused: made under a claim it no longer held.",
            &counter(s.stale_writes),
        )?;
        single(
            e,
            "store_round_trips",
            "Round trips to the shared store.",
            &counter(s.round_trips),
        )?;
        let mut family = e.encode_descriptor(
            "store_errors",
            "Failed round trips to the shared store, by kind.",
            None,
            MetricType::Counter,
        )?;
        for (kind, n) in &s.errors {
            counter(*n).encode(family.encode_family(&Kind { kind: kind.clone() })?)?;
        }
        single(
            e,
            "store_up",
            "1 while the shared store answers, else 0 (1 on the embedded store).",
            &gauge(u64::from(s.up || self.source.load().is_none())),
        )?;
        single(
            e,
            "nodes",
            "Live nodes of the fleet, as this node last saw them.",
            &gauge(s.nodes),
        )?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::Metrics;

    struct Fixed;

    impl FleetGauges for Fixed {
        fn fleet_snapshot(&self) -> FleetSnapshot {
            FleetSnapshot {
                reclaims: 3,
                stale_writes: 2,
                round_trips: 41,
                errors: [("unreachable".to_owned(), 5)].into(),
                up: false,
                nodes: 3,
            }
        }
    }

    #[test]
    fn the_fleet_metrics_are_there_before_a_fleet_and_read_its_gauges_after() {
        let metrics = Metrics::new();
        let text = metrics.encode(false);
        for name in [
            "rebound_retry_reclaims_total 0",
            "rebound_stale_writes_total 0",
            "rebound_store_round_trips_total 0",
            "# TYPE rebound_store_errors_total counter",
            "rebound_store_up 1",
            "rebound_nodes 0",
        ] {
            assert!(text.contains(name), "{name} missing from:\n{text}");
        }
        metrics.fleet.attach(Fixed);
        let text = metrics.encode(false);
        for name in [
            "rebound_retry_reclaims_total 3",
            "rebound_stale_writes_total 2",
            "rebound_store_round_trips_total 41",
            "rebound_store_errors_total{kind=\"unreachable\"} 5",
            "rebound_store_up 0",
            "rebound_nodes 3",
        ] {
            assert!(text.contains(name), "{name} missing from:\n{text}");
        }
    }
}
