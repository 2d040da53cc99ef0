//! `rebound_rule_errors_total{rule}`: guard and delay-script errors at decision time, per
//! rule of the set in force.
//!
//! The engine already counts them on each compiled rule (what `explain` shows), so this is a
//! [`Collector`] that reads those counts at each scrape, like the runtime group. The label
//! takes only the rule ids of the set in force, plus `defaults` (a reserved id, for the
//! defaults' delay script), so its cardinality is bounded by the set. A reload starts a new
//! set whose counts begin at zero: a counter reset, which `rate()` handles.

use arc_swap::ArcSwapOption;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{
    DescriptorEncoder, EncodeLabelSet, EncodeMetric, MetricEncoder, NoLabelSet,
};
use prometheus_client::metrics::MetricType;
use rebound_engine::PolicyHandle;
use std::sync::Arc;

/// The rule set whose error counts `/metrics` reports, attached once it is live.
#[derive(Default)]
pub struct RuleErrorMetrics {
    handle: ArcSwapOption<PolicyHandle>,
}

impl std::fmt::Debug for RuleErrorMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RuleErrorMetrics")
            .field("attached", &self.handle.load().is_some())
            .finish()
    }
}

impl RuleErrorMetrics {
    /// Reports the error counts of whatever set `handle` holds, from now on.
    pub fn attach(&self, handle: Arc<PolicyHandle>) {
        self.handle.store(Some(handle));
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Rule {
    rule: String,
}

#[derive(Debug)]
struct Count(u64);

impl EncodeMetric for Count {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        encoder.encode_counter::<NoLabelSet, _, u64>(&self.0, None)
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Counter
    }
}

impl Collector for RuleErrorMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let mut family = encoder.encode_descriptor(
            "rule_errors",
            "Guard and delay-script errors at decision time, by rule of the set in force (each made its rule not match).",
            None,
            MetricType::Counter,
        )?;
        let Some(handle) = self.handle.load_full() else {
            return Ok(());
        };
        let set = handle.current();
        for rule in set.rules() {
            let labels = Rule {
                rule: rule.id().to_string(),
            };
            Count(rule.error_count()).encode(family.encode_family(&labels)?)?;
        }
        let labels = Rule {
            rule: "defaults".into(),
        };
        Count(set.defaults_error_count()).encode(family.encode_family(&labels)?)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::Metrics;
    use rand::SeedableRng;
    use rebound_engine::{FailureContext, SourceFile, compile};

    #[test]
    fn guard_errors_are_exported_per_rule_of_the_set_in_force() {
        let m = Metrics::new();
        let text = m.encode(false);
        assert!(
            text.contains("# TYPE rebound_rule_errors_total counter\n"),
            "{text}"
        );
        assert!(!text.contains("rebound_rule_errors_total{"), "{text}");

        // `attrs.tenant` is () when absent, and () has no len(): an error at decision time.
        let yaml = "version: 1\nrules:\n  - id: tenant-guard\n    if: 'attrs.tenant.len() > 3'\n  - id: other\n    match: { code: X }\n";
        let set = compile(vec![SourceFile::new("a.yaml", "a.yaml", yaml)]).unwrap();
        let handle = Arc::new(PolicyHandle::new(set));
        m.rule_errors.attach(handle.clone());
        let mut rng = rand::rngs::StdRng::seed_from_u64(1);
        for _ in 0..2 {
            handle.decide(&FailureContext::new("ORDER", "X", 1), &mut rng);
        }
        let text = m.encode(false);
        assert!(
            text.contains("rebound_rule_errors_total{rule=\"tenant-guard\"} 2\n"),
            "{text}"
        );
        assert!(
            text.contains("rebound_rule_errors_total{rule=\"other\"} 0\n"),
            "{text}"
        );
        assert!(
            text.contains("rebound_rule_errors_total{rule=\"defaults\"} 0\n"),
            "{text}"
        );
    }
}
