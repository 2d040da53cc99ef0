//! The run's records in the shared store: its parameters (recorded by the first node, checked
//! by every later one), each session's counters (one per node process, checkpointed like
//! `pipeline.db`'s), and the order sink: an idempotent set of the orders written, so that
//! `duplicates` counts the redeliveries the whole fleet absorbed. A keyed run's events are
//! checked in sequence as `pipeline.db` checks them, in two more sets: every event that
//! arrived (`order#place`), and those an earlier event of their order arrived after.

use std::sync::Arc;
use std::time::Duration;

use super::{effects, run};
use crate::pipeline::book::{BookError, OrderSink, RunBook};
use crate::pipeline::db::{Checkpoint, OrderRow, RunRecord, SessionRow, SessionStats};
use rebound_runtime::time::Timestamp;
use rebound_store_redis::RedisStore;

/// The effect set the store bolt writes orders into.
const ORDERS: &str = "orders";

/// A keyed run's events that reached the sink, as `order#place`.
const ARRIVED: &str = "events";

/// The events of [`ARRIVED`] that an earlier event of their order arrived after.
const OVERTAKEN: &str = "events-out-of-order";

/// Where sessions' counters are kept (`RedisStore::put_doc`).
const SESSIONS: &str = "sessions";

/// The run's parameters as the store keeps them (`keyed` only for a keyed run, so that a run
/// recorded before keyed runs existed reads the same).
pub(crate) fn run_params(
    messages: Option<u64>,
    keyed: bool,
    time_scale: f64,
    seed: u64,
) -> Vec<(String, String)> {
    let mut params = vec![
        (
            "messages".into(),
            messages.map_or_else(|| "unbounded".into(), |n| n.to_string()),
        ),
        ("time_scale".into(), time_scale.to_string()),
        ("fault_seed".into(), seed.to_string()),
    ];
    if keyed {
        params.push(("keyed".into(), "true".into()));
    }
    params
}

/// The fleet's book: the run's records in the shared store.
pub(crate) struct FleetBook {
    pub(crate) store: Arc<RedisStore>,
    pub(crate) node: String,
    /// The run as recorded (its parameters do not change).
    pub(crate) run: RunRecord,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct StoredSession {
    node: String,
    started_ms: u64,
    elapsed_ms: u64,
    emitted_high: u64,
    stats: SessionStats,
    ended: Option<String>,
}

impl RunBook for FleetBook {
    fn run(&self) -> Result<Option<RunRecord>, BookError> {
        let finished = run::finished(&self.store)?;
        Ok(Some(RunRecord {
            finished_ms: finished.map(Timestamp::as_millis),
            ..self.run.clone()
        }))
    }

    fn finish_run(&self, now_ms: u64) -> Result<(), BookError> {
        run::finish(&self.store, Timestamp::from_millis(now_ms))?;
        Ok(())
    }

    /// A session's id is when it started (Unix ms).
    fn begin_session(&self, now_ms: u64, emitted_high: u64) -> Result<i64, BookError> {
        let session = now_ms as i64;
        self.checkpoint(&Checkpoint {
            session,
            elapsed: Duration::ZERO,
            emitted_high,
            stats: &SessionStats::default(),
            ended: None,
        })?;
        Ok(session)
    }

    /// The node's document of the session, `NODE#SESSION`, its start the session's id.
    fn checkpoint(&self, c: &Checkpoint<'_>) -> Result<(), BookError> {
        let doc = StoredSession {
            node: self.node.clone(),
            started_ms: c.session as u64,
            elapsed_ms: c.elapsed.as_millis() as u64,
            emitted_high: c.emitted_high,
            stats: c.stats.clone(),
            ended: c.ended.map(str::to_owned),
        };
        let json = serde_json::to_string(&doc).unwrap_or_else(|_| "{}".into());
        Ok(self
            .store
            .put_doc(SESSIONS, &format!("{}#{}", self.node, c.session), &json)?)
    }

    fn sessions(&self) -> Result<Vec<SessionRow>, BookError> {
        let mut rows = Vec::new();
        for (name, json) in self.store.docs(SESSIONS)? {
            let Ok(s) = serde_json::from_str::<StoredSession>(&json) else {
                tracing::warn!(session = %name, "a session's counters do not decode; left out of the report");
                continue;
            };
            rows.push(SessionRow {
                id: s.started_ms as i64,
                started_ms: s.started_ms,
                elapsed: Duration::from_millis(s.elapsed_ms),
                emitted_high: s.emitted_high,
                stats: s.stats,
                ended: s.ended,
            });
        }
        rows.sort_by_key(|r| r.started_ms);
        Ok(rows)
    }

    fn duplicates(&self) -> Result<u64, BookError> {
        Ok(effects::count(&self.store, ORDERS)?.1)
    }

    fn out_of_order(&self) -> Result<u64, BookError> {
        Ok(effects::count(&self.store, OVERTAKEN)?.0)
    }
}

/// True once the latest session of each of `live` nodes has ended: their topologies have
/// stopped and their last counters are written, so a report read now is the one every node
/// reads. (Sessions of dead processes are as final as they will get.)
pub(crate) fn live_sessions_ended(store: &RedisStore, live: &[String]) -> Result<bool, BookError> {
    let mut latest: std::collections::HashMap<String, StoredSession> = Default::default();
    for (_, json) in store.docs(SESSIONS)? {
        let Ok(s) = serde_json::from_str::<StoredSession>(&json) else {
            continue;
        };
        match latest.get(&s.node) {
            Some(l) if l.started_ms >= s.started_ms => {}
            _ => {
                latest.insert(s.node.clone(), s);
            }
        }
    }
    Ok(live
        .iter()
        .all(|node| latest.get(node).is_none_or(|s| s.ended.is_some())))
}

/// The order sink of a fleet: the shared effect set.
pub(crate) struct FleetOrders(pub(crate) Arc<RedisStore>);

impl OrderSink for FleetOrders {
    fn write(&mut self, rows: &[OrderRow], _now_ms: u64) -> Result<u64, BookError> {
        let ids: Vec<&str> = rows.iter().map(|r| &*r.id).collect();
        let fresh = effects::put(&self.0, ORDERS, &ids)?;
        let events: Vec<(&str, i64)> = rows
            .iter()
            .zip(&fresh)
            .filter(|&(_, &fresh)| fresh)
            .filter_map(|(r, _)| r.sequence.as_ref().map(|e| (e.order.as_str(), e.place)))
            .collect();
        self.in_sequence(&events)?;
        Ok(fresh.iter().filter(|&&f| !f).count() as u64)
    }
}

impl FleetOrders {
    /// Checks `events` (order, place), written now for the first time in this order, against
    /// those that arrived before: a later event of the same order already there was out of
    /// order (counted once, in [`OVERTAKEN`]).
    fn in_sequence(&self, events: &[(&str, i64)]) -> Result<(), BookError> {
        if events.is_empty() {
            return Ok(());
        }
        let name = |order: &str, place: i64| format!("{order}#{place}");
        let last = crate::pipeline::orders::EVENTS.len() as i64 - 1;
        let later: Vec<String> = events
            .iter()
            .flat_map(|&(o, s)| (s + 1..=last).map(move |t| name(o, t)))
            .collect();
        let asked: Vec<&str> = later.iter().map(String::as_str).collect();
        let held = effects::held(&self.0, ARRIVED, &asked)?;
        let mut arrived: std::collections::HashSet<String> = later
            .into_iter()
            .zip(held)
            .filter_map(|(n, held)| held.then_some(n))
            .collect();
        let mut overtaken = Vec::new();
        for &(o, s) in events {
            overtaken.extend(
                (s + 1..=last)
                    .map(|t| name(o, t))
                    .filter(|n| arrived.contains(n)),
            );
            arrived.insert(name(o, s));
        }
        let now: Vec<String> = events.iter().map(|&(o, s)| name(o, s)).collect();
        effects::put(
            &self.0,
            ARRIVED,
            &now.iter().map(String::as_str).collect::<Vec<_>>(),
        )?;
        if !overtaken.is_empty() {
            effects::put(
                &self.0,
                OVERTAKEN,
                &overtaken.iter().map(String::as_str).collect::<Vec<_>>(),
            )?;
        }
        Ok(())
    }
}
