//! The run's records in the shared store: its parameters (recorded by the first node, checked
//! by every later one), each session's counters (one per node process, checkpointed like
//! `pipeline.db`'s), and the order sink: an idempotent set of the orders written, so that
//! `duplicates` counts the redeliveries the whole fleet absorbed.

use std::sync::Arc;
use std::time::Duration;

use crate::pipeline::book::{BookError, OrderSink, RunBook};
use crate::pipeline::db::{OrderRow, RunRecord, SessionRow, SessionStats};
use rebound_runtime::store::redis::RedisStore;
use rebound_runtime::time::Timestamp;

/// The effect set the store bolt writes orders into.
const ORDERS: &str = "orders";

/// Where sessions' counters are kept (`RedisStore::put_doc`).
const SESSIONS: &str = "sessions";

/// The run's parameters as the store keeps them.
pub(crate) fn run_params(
    messages: Option<u64>,
    time_scale: f64,
    seed: u64,
) -> Vec<(String, String)> {
    vec![
        (
            "messages".into(),
            messages.map_or_else(|| "unbounded".into(), |n| n.to_string()),
        ),
        ("time_scale".into(), time_scale.to_string()),
        ("fault_seed".into(), seed.to_string()),
    ]
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
        let finished = self.store.run_finished()?;
        Ok(Some(RunRecord {
            finished_ms: finished.map(Timestamp::as_millis),
            ..self.run.clone()
        }))
    }

    fn finish_run(&self, now_ms: u64) -> Result<(), BookError> {
        self.store.finish_run(Timestamp::from_millis(now_ms))?;
        Ok(())
    }

    fn begin_session(&self, now_ms: u64, emitted_high: u64) -> Result<i64, BookError> {
        let session = now_ms as i64;
        self.checkpoint_at(
            session,
            now_ms,
            Duration::ZERO,
            emitted_high,
            &SessionStats::default(),
            None,
        )?;
        Ok(session)
    }

    fn checkpoint(
        &self,
        session: i64,
        elapsed: Duration,
        emitted_high: u64,
        stats: &SessionStats,
        ended: Option<&str>,
    ) -> Result<(), BookError> {
        self.checkpoint_at(session, session as u64, elapsed, emitted_high, stats, ended)
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
        Ok(self.store.effects(ORDERS)?.1)
    }
}

impl FleetBook {
    fn checkpoint_at(
        &self,
        session: i64,
        started_ms: u64,
        elapsed: Duration,
        emitted_high: u64,
        stats: &SessionStats,
        ended: Option<&str>,
    ) -> Result<(), BookError> {
        let doc = StoredSession {
            node: self.node.clone(),
            started_ms,
            elapsed_ms: elapsed.as_millis() as u64,
            emitted_high,
            stats: stats.clone(),
            ended: ended.map(str::to_owned),
        };
        let json = serde_json::to_string(&doc).unwrap_or_else(|_| "{}".into());
        Ok(self
            .store
            .put_doc(SESSIONS, &format!("{}#{session}", self.node), &json)?)
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
    fn write(&mut self, rows: &[OrderRow], _now_ms: u64) -> Result<u64, String> {
        let ids: Vec<&str> = rows.iter().map(|r| &*r.id).collect();
        let fresh = self
            .0
            .put_effects(ORDERS, &ids)
            .map_err(|e| e.to_string())?;
        Ok(fresh.iter().filter(|&&f| !f).count() as u64)
    }
}
