//! The shadow's and the canary's metrics (`docs/spec/release.md`), read at each scrape from
//! the process's [`ReleaseDesk`] once one is attached:
//!
//! - `rebound_shadow_decisions_total{changed="true"|"false"}`: decisions made by a shadow set
//!   beside the current one, by whether they differed (rule, action or label), over every
//!   shadow of the process;
//! - `rebound_canary_state`: the last canary's state, **0** no canary since the process
//!   started, **1** running, **2** held, **3** promoted, **4** rolled back (it stays 3 or 4
//!   until the next canary starts);
//! - `rebound_canary_first_deliveries_total{arm}`, `rebound_canary_retries_total{arm}`,
//!   `rebound_canary_dead_letters_total{arm}` (`arm="stable"|"canary"`): the arms' figures,
//!   summed over every canary of the process, the running one's so far included.
//!
//! Every series is there from the start (0 before anything is attached or installed), so a
//! `rate()` or an alert over them is defined.

use crate::release::ReleaseDesk;
use arc_swap::ArcSwapOption;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use rebound_engine::release::{ArmFigures, Arms};
use std::sync::Arc;

/// The release group of the registry; attach the process's desk to fill it.
#[derive(Debug, Default)]
pub struct ReleaseMetrics {
    desk: ArcSwapOption<ReleaseDesk>,
}

impl ReleaseMetrics {
    /// Reports `desk`'s shadow and canary from now on.
    pub fn attach(&self, desk: Arc<ReleaseDesk>) {
        self.desk.store(Some(desk));
    }
}

/// A counter of the arms: its name, its help, and which figure it reports.
type Figure = (&'static str, &'static str, fn(&ArmFigures) -> u64);

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Changed {
    changed: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ArmLabel {
    arm: &'static str,
}

impl Collector for ReleaseMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let desk = self.desk.load_full();
        let (unchanged, changed) = desk.as_ref().map_or((0, 0), |d| d.shadow.totals());
        let mut shadow = encoder.encode_descriptor(
            "shadow_decisions",
            "Decisions made by a shadow set beside the current set, by whether they differed in rule, action or label.",
            None,
            MetricType::Counter,
        )?;
        for (label, n) in [("true", changed), ("false", unchanged)] {
            ConstCounter::new(n).encode(shadow.encode_family(&Changed { changed: label })?)?;
        }
        let state = desk
            .as_ref()
            .and_then(|d| d.canary.state())
            .map_or(0, |s| s.gauge());
        let family = encoder.encode_descriptor(
            "canary_state",
            "The last canary's state: 0 none since start, 1 running, 2 held, 3 promoted, 4 rolled back.",
            None,
            MetricType::Gauge,
        )?;
        ConstGauge::new(state).encode(family)?;
        let totals = desk
            .as_ref()
            .map_or_else(Arms::default, |d| d.canary.totals());
        let counters: [Figure; 3] = [
            (
                "canary_first_deliveries",
                "First deliveries in each arm of a canary, over every canary of the process.",
                |a| a.first_deliveries,
            ),
            (
                "canary_retries",
                "Retries fired in each arm of a canary, over every canary of the process.",
                |a| a.retries,
            ),
            (
                "canary_dead_letters",
                "Dead letters of each arm of a canary, over every canary of the process.",
                |a| a.dead_letters,
            ),
        ];
        for (name, help, of) in counters {
            let mut family = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
            for (arm, figures) in [("stable", &totals.stable), ("canary", &totals.canary)] {
                ConstCounter::new(of(figures)).encode(family.encode_family(&ArmLabel { arm })?)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::metrics::Metrics;

    #[test]
    fn every_series_is_there_before_a_desk_is_attached() {
        let text = Metrics::new().encode(false);
        for line in [
            "rebound_shadow_decisions_total{changed=\"true\"} 0\n",
            "rebound_shadow_decisions_total{changed=\"false\"} 0\n",
            "rebound_canary_state 0\n",
            "rebound_canary_first_deliveries_total{arm=\"stable\"} 0\n",
            "rebound_canary_retries_total{arm=\"canary\"} 0\n",
            "rebound_canary_dead_letters_total{arm=\"canary\"} 0\n",
            "# TYPE rebound_canary_state gauge\n",
            "# TYPE rebound_canary_retries_total counter\n",
        ] {
            assert!(text.contains(line), "{line} in\n{text}");
        }
    }
}
