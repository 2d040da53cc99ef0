//! The budgets' and breakers' metrics (`operations.md`, "Metrics"), read at each scrape from
//! the topology's retry gate: `rebound_budget_held_total{budget}`,
//! `rebound_budget_exhausted_total{budget}` and `rebound_breaker_state{breaker,key,state}`
//! (1 for the state a breaker is in, 0 for the other two). Keys are bounded by the gate (at
//! most 100 per breaker, the rest as `other`). `rebound_adaptive_scope{scope}` is 1 for the
//! adaptive state in force: `fleet` (synced with the shared store) or `node` (the process's
//! own: a store of one process, or a shared store that does not answer).

use arc_swap::ArcSwapOption;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use rebound_runtime::adaptive::{BreakerState, GateSnapshot, Scope};
use std::sync::Arc;

/// Where the gate's metrics come from.
pub trait GateGauges: Send + Sync {
    /// The gate now (`None` without a running topology).
    fn gate_snapshot(&self) -> Option<GateSnapshot>;
    /// The adaptive state in force (`None`: unknown, nothing is reported).
    fn scope(&self) -> Option<Scope> {
        None
    }
}

/// Any running topology's gate.
impl GateGauges for Arc<rebound_runtime::adaptive::RetryGate> {
    fn gate_snapshot(&self) -> Option<GateSnapshot> {
        Some(self.snapshot(tokio::time::Instant::now()))
    }

    fn scope(&self) -> Option<Scope> {
        Some(rebound_runtime::adaptive::RetryGate::scope(self))
    }
}

/// The budgets' and breakers' group of the registry.
#[derive(Default)]
pub struct GateMetrics {
    source: ArcSwapOption<Box<dyn GateGauges>>,
}

impl std::fmt::Debug for GateMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GateMetrics")
            .field("attached", &self.source.load().is_some())
            .finish()
    }
}

impl GateMetrics {
    /// Reports `gauges` from now on.
    pub fn attach(&self, gauges: impl GateGauges + 'static) {
        self.source.store(Some(Arc::new(Box::new(gauges))));
    }

    /// The adaptive state in force, when a topology is attached (`/v1/overview`'s
    /// `adaptive_scope`).
    pub fn scope(&self) -> Option<Scope> {
        self.source.load().as_ref().and_then(|g| g.scope())
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BudgetLabel {
    budget: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ScopeLabel {
    scope: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BreakerLabels {
    breaker: String,
    key: String,
    state: &'static str,
}

impl Collector for GateMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        if let Some(scope) = self.scope() {
            let mut family = encoder.encode_descriptor(
                "adaptive_scope",
                "1 for the adaptive state in force: fleet (synced with the shared store) or node (this process's own).",
                None,
                MetricType::Gauge,
            )?;
            for name in ["fleet", "node"] {
                ConstGauge::new(i64::from(scope.as_str() == name))
                    .encode(family.encode_family(&ScopeLabel { scope: name })?)?;
            }
        }
        let s = self
            .source
            .load()
            .as_ref()
            .and_then(|g| g.gate_snapshot())
            .unwrap_or_default();
        let mut held = encoder.encode_descriptor(
            "budget_held",
            "Retries a budget held back until it had room, by budget.",
            None,
            MetricType::Counter,
        )?;
        for (id, (n, _)) in &s.budgets {
            ConstCounter::new(*n)
                .encode(held.encode_family(&BudgetLabel { budget: id.clone() })?)?;
        }
        let mut exhausted = encoder.encode_descriptor(
            "budget_exhausted",
            "Retries dead-lettered (reason budget) because their budget had no room, by budget.",
            None,
            MetricType::Counter,
        )?;
        for (id, (_, n)) in &s.budgets {
            ConstCounter::new(*n)
                .encode(exhausted.encode_family(&BudgetLabel { budget: id.clone() })?)?;
        }
        let mut state = encoder.encode_descriptor(
            "breaker_state",
            "1 for the state a breaker (one per key) is in: closed, open or half_open.",
            None,
            MetricType::Gauge,
        )?;
        for ((id, key), b) in &s.breakers {
            for st in [
                BreakerState::Closed,
                BreakerState::Open,
                BreakerState::HalfOpen,
            ] {
                let labels = BreakerLabels {
                    breaker: id.clone(),
                    key: key.clone(),
                    state: st.as_str(),
                };
                ConstGauge::new(i64::from(b.state == st)).encode(state.encode_family(&labels)?)?;
            }
        }
        Ok(())
    }
}

/// What a node says of its breakers in its heartbeat (`/v1/nodes`' `breakers`): every
/// breaker and key its gate keeps, and the fuse once it has been anything but closed.
pub(crate) fn node_breakers(
    gate: &rebound_runtime::adaptive::RetryGate,
) -> Vec<rebound_store_redis::NodeBreaker> {
    gate.snapshot(tokio::time::Instant::now())
        .breakers
        .into_iter()
        .map(|((breaker, key), view)| rebound_store_redis::NodeBreaker {
            breaker,
            key,
            state: view.state.as_str().to_owned(),
        })
        .collect()
}

/// How a heartbeat reads the node's breakers.
pub(crate) type Breakers = Arc<dyn Fn() -> Vec<rebound_store_redis::NodeBreaker> + Send + Sync>;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::Metrics;
    use rebound_runtime::adaptive::BreakerView;

    struct Fixed;

    impl GateGauges for Fixed {
        fn gate_snapshot(&self) -> Option<GateSnapshot> {
            let mut s = GateSnapshot::default();
            s.budgets.insert("pay".into(), (4, 2));
            s.breakers.insert(
                ("gw".into(), "pg-1".into()),
                BreakerView {
                    state: BreakerState::HalfOpen,
                    history: vec![BreakerState::Open, BreakerState::HalfOpen],
                    openings: Vec::new(),
                },
            );
            Some(s)
        }

        fn scope(&self) -> Option<Scope> {
            Some(Scope::Node)
        }
    }

    #[test]
    fn the_gate_metrics_read_the_gate_at_each_scrape() {
        let metrics = Metrics::new();
        metrics.gate.attach(Fixed);
        let text = metrics.encode(false);
        for line in [
            "rebound_budget_held_total{budget=\"pay\"} 4",
            "rebound_budget_exhausted_total{budget=\"pay\"} 2",
            "rebound_adaptive_scope{scope=\"fleet\"} 0",
            "rebound_adaptive_scope{scope=\"node\"} 1",
            "rebound_breaker_state{breaker=\"gw\",key=\"pg-1\",state=\"half_open\"} 1",
            "rebound_breaker_state{breaker=\"gw\",key=\"pg-1\",state=\"open\"} 0",
            "rebound_breaker_state{breaker=\"gw\",key=\"pg-1\",state=\"closed\"} 0",
        ] {
            assert!(text.contains(line), "{line} missing from:\n{text}");
        }
    }
}
