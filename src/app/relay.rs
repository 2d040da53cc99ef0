//! `rebound relay` as a [`TopologyJob`]: the source's spout, the handler's bolt, the rules
//! deciding each failure, custody acks to the broker, and the relay's report after the stop
//! (`sources.md`, "`rebound relay`").

use std::sync::Arc;

use rebound_runtime::durable::DurableOptions;
use rebound_runtime::topology::{Config, TopologyBuilder};

use super::job::{JobError, Summary};
use super::{JobStore, TopologyJob};
use crate::config::redact_url;
use crate::metrics::handler::HandlerStats;
use crate::relay::Handler;
use crate::relay::bolt::HandlerBolt;
use crate::relay::publish::Publisher;
use crate::relay::report::RelayReport;
use crate::relay::source::SourceSpec;

impl Summary for RelayReport {
    fn text(&self) -> String {
        RelayReport::text(self)
    }
    fn json(&self) -> String {
        RelayReport::json(self)
    }
}

/// The relay of `source` to `handler` over `store` (its own, or a fleet's), with the topology
/// settings `config` (its `max_spout_pending` bounds what the broker holds unacknowledged,
/// with one read batch), each stored dead letter also published by `publish` when given.
pub fn job(
    source: SourceSpec,
    handler: Handler,
    config: Config,
    store: JobStore,
    publish: Option<Publisher>,
) -> TopologyJob {
    let name = source.url.name().to_owned();
    let fates_keep = source.fates_keep;
    let source_stats = source.stats.clone();
    let handler_stats = Arc::new(HandlerStats::default());
    let (report_source, report_handler, bolt_stats) = (
        source_stats.clone(),
        handler_stats.clone(),
        handler_stats.clone(),
    );
    let report_name = name.clone();
    let job = TopologyJob::over_rules(store, move |durable, _recovered, rules, shared| {
        let mut source = source;
        // A stream on the shared store's own server: the store acknowledges what it takes
        // custody of in the script that writes it.
        source.store_acks = shared.is_some_and(|store| source.ack_in_store(store));
        tracing::info!(
            source = %source.url,
            handler = %redact_url(handler.url()),
            consumer = %source.consumer,
            custody_acks_by_store = source.store_acks,
            "relaying"
        );
        let mut b = TopologyBuilder::new("relay");
        b.config(config);
        let durable = durable.clone();
        // The source's URL was checked before the start: a refusal here is a server the
        // client cannot take as an address, and the task says so instead of a spout.
        let spout = source
            .start(&durable)
            .map_err(|e| JobError::Task(e.to_string()))?;
        let spout = std::sync::Mutex::new(Some(spout));
        b.spout("source", 1, move |_| {
            spout
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .take()
                .expect("the relay's one spout task is made once")
        });
        let rules = rules.clone();
        b.deferred_bolt("handler", 1, move |_| {
            HandlerBolt::new(handler.clone(), rules.clone(), bolt_stats.clone())
        })
        .shuffle("source");
        Ok(b.build()?)
    })
    .source(name, source_stats)
    .handler(handler_stats)
    .report(move |topology| {
        Box::new(RelayReport::new(
            &report_name,
            &report_source,
            &report_handler,
            topology,
        )) as Box<dyn Summary>
    });
    // The broker keeps what a relay acked on its first delivery: no fate per message in the
    // store, which no source position would ever prune (a stream has none) and which cost a
    // write per message. A retried message's acked fate is written (it drops its retry row),
    // and kept for `fates_keep`, so that a redelivery (a custody ack lost to a crash) is known;
    // every dead letter is kept. A crash between the handler's 2xx and the broker's ack
    // redelivers the message, which is handed over again with the same Idempotency-Key
    // (at-least-once).
    let mut durable = DurableOptions::default();
    durable.journal.record_every_ack = false;
    durable.journal.fates_keep = Some(fates_keep);
    let job = job.durable_options(durable);
    match publish {
        Some(publisher) => job.publisher(publisher),
        None => job,
    }
}
