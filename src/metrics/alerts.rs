//! `rebound_alerts_total{receiver, result="sent|failed|dropped|deferred"}` (`docs/spec/operations.md`,
//! "Dead-letter levels that act"), read at each scrape from the [`AlertDispatcher`]'s counts.
//! Before a dispatcher is attached (or with no receivers) the family is there without series.

use crate::alerts::AlertDispatcher;
use arc_swap::ArcSwapOption;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::MetricType;

use super::runtime::Value;

/// The alert group of the registry; attach the running dispatcher to fill it.
#[derive(Debug, Default)]
pub struct AlertMetrics {
    source: ArcSwapOption<AlertDispatcher>,
}

impl AlertMetrics {
    /// Reports `dispatcher`'s counts from now on.
    pub fn attach(&self, dispatcher: AlertDispatcher) {
        self.source.store(Some(std::sync::Arc::new(dispatcher)));
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReceiverResult {
    receiver: String,
    result: &'static str,
}

impl Collector for AlertMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let counts = self
            .source
            .load()
            .as_ref()
            .map(|d| d.counts())
            .unwrap_or_default();
        let mut family = encoder.encode_descriptor(
            "alerts",
            "Dead letters sent to alert receivers (sent), failed delivery attempts (failed), letters given up (dropped), and letters past a full queue left in the store to send once the receiver answers (deferred), by receiver.",
            None,
            MetricType::Counter,
        )?;
        for (receiver, c) in counts {
            for (result, n) in [
                ("sent", c.sent),
                ("failed", c.failed),
                ("dropped", c.dropped),
                ("deferred", c.deferred),
            ] {
                let labels = ReceiverResult {
                    receiver: receiver.clone(),
                    result,
                };
                Value(MetricType::Counter, n).encode(family.encode_family(&labels)?)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::alerts::{AlertDispatcher, AlertOptions};
    use crate::config::{Receiver, Receivers};
    use crate::metrics::Metrics;

    #[tokio::test]
    async fn the_alert_counts_are_exported_by_receiver_and_result() {
        let metrics = Metrics::new();
        let text = metrics.encode(false);
        assert!(
            text.contains("# TYPE rebound_alerts_total counter"),
            "{text}"
        );
        // A receiver sent nothing yet reads 0 in each result; a name no receiver has, its
        // dropped letters.
        let receivers = Receivers::new([Receiver {
            name: "oncall".to_owned(),
            webhook: "http://127.0.0.1:9/hook".to_owned(),
            kind: Default::default(),
            include_payload: false,
            ca_file: None,
            headers: Default::default(),
        }]);
        let dispatcher = AlertDispatcher::start(&receivers, AlertOptions::default());
        metrics.alerts.attach(dispatcher.clone());
        dispatcher.send("nobody", serde_json::json!({}));
        let text = metrics.encode(false);
        for line in [
            "rebound_alerts_total{receiver=\"oncall\",result=\"sent\"} 0",
            "rebound_alerts_total{receiver=\"oncall\",result=\"failed\"} 0",
            "rebound_alerts_total{receiver=\"oncall\",result=\"dropped\"} 0",
            "rebound_alerts_total{receiver=\"oncall\",result=\"deferred\"} 0",
            "rebound_alerts_total{receiver=\"nobody\",result=\"dropped\"} 1",
        ] {
            assert!(text.contains(line), "{line} missing from:\n{text}");
        }
    }
}
