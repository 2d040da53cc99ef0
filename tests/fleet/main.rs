//! `rebound run --store redis://…` on several nodes: each test starts its own `redis-server`
//! (on a free port, in a temp directory, with `appendonly yes`, `appendfsync always`) and
//! its own namespace, starts the nodes as processes, kills them by PID, and reads the fleet's
//! state from Redis at the end: `kill9` (a node killed and restarted, or gone for good),
//! `faults` (Redis killed, a node stalled), `startup` (the start-up checks), `ordered` (an
//! `--ordered` run with a node killed), `outage` (three nodes and one alone through a
//! payment-gateway outage: one budget, one breaker); and the bundled run's own records in the store
//! (`run_records`, `effects`: no process of their own).
//!
//! A binary of its own, and one test at a time ([`one_at_a_time`]): each starts several
//! processes that keep both cores busy, and would starve the timing of the other tests.

#[path = "../run/support.rs"]
mod support;

mod bounded;
mod budget;
mod effects;
mod faults;
mod kill9;
mod ordered;
mod outage;
mod password;
mod run_records;
mod stale_owner;
mod startup;

/// Held for the length of a test: the fleet tests run one at a time.
pub fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use crate::support::*;
use rebound::pipeline::orders::order_id;
use rebound_runtime::store::{Fate, MessageId, Store};
use rebound_store_redis::fleet::partition_source;
use rebound_store_redis::{RedisOptions, RedisStore, TestServer};

/// The partitions of the bundled order source (`rebound::pipeline::fleet`).
const PARTITIONS: u64 = 16;

/// `rebound run` as node `node` of the fleet in namespace `ns` on `server`.
pub fn node_cmd(
    server: &TestServer,
    ns: &str,
    node: &str,
    data: &Path,
    messages: u64,
    scale: f64,
    lease: &str,
) -> Command {
    let mut cmd = run_cmd(data, &shipped_rules(), messages, scale);
    cmd.args(["--store", &server.url(), "--namespace", ns, "--node", node])
        .args(["--lease", lease])
        .env("RUST_LOG", "warn,rebound_runtime::durable::claimer=debug");
    cmd
}

/// The longest a node may take to end its run once a test waits for it (a run of these tests
/// takes well under a minute on two loaded cores): past it, the test fails saying what the
/// node's threads are doing.
pub const FINISH_AT_MOST: Duration = Duration::from_secs(300);

/// Waits for each node (started with its stderr in the file beside it), asserting it exited 0
/// (the log's tail in the message if not): each node's report and its whole log.
pub fn finish_logged(
    run: &Run<'_>,
    nodes: Vec<(Running, std::path::PathBuf)>,
) -> Vec<(serde_json::Value, String)> {
    nodes
        .into_iter()
        .map(|(child, log)| {
            let out = child.wait_or_explain(FINISH_AT_MOST, Some(&log), || run.stuck());
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            let tail: String = text.lines().rev().take(30).collect::<Vec<_>>().join("\n");
            assert_eq!(out.status.code(), Some(0), "a node failed:\n{tail}");
            (report(&out), text)
        })
        .collect()
}

/// [`finish_logged`], the reports only.
pub fn finish(run: &Run<'_>, nodes: Vec<(Running, std::path::PathBuf)>) -> Vec<serde_json::Value> {
    finish_logged(run, nodes)
        .into_iter()
        .map(|(r, _)| r)
        .collect()
}

/// One run of the fleet: its store, its namespace and its orders.
pub struct Run<'a> {
    pub server: &'a TestServer,
    pub ns: &'a str,
    pub messages: u64,
}

impl Run<'_> {
    /// Why the run has not ended, as the store shows it: each partition whose committed
    /// position is short of its length (a node ends once every position is at its end), the
    /// retries due and in flight, and the first orders without a fate with their retry rows.
    pub fn stuck(&self) -> String {
        let Ok(store) = RedisStore::connect(&RedisOptions::new(self.server.url(), self.ns)) else {
            return "the store does not answer".to_owned();
        };
        let mut out = String::from("the store, as the run stands:\n");
        for p in 0..PARTITIONS {
            let source = partition_source(rebound::pipeline::orders::SOURCE, p as u32);
            let at = store.position(&source).ok().flatten().unwrap_or(0);
            let len = (self.messages + PARTITIONS - 1 - p) / PARTITIONS;
            if at < len {
                out.push_str(&format!("  partition {p}: committed {at} of {len}\n"));
            }
        }
        let (due, inflight, rows) = leftovers(self.server, self.ns);
        out.push_str(&format!(
            "  due {due}, in flight {inflight}, retry rows {}\n",
            rows.len()
        ));
        let mut c = self.server.client();
        let missing = fleet_fates(&store, self.messages)
            .into_iter()
            .filter(|(_, f)| f.is_none())
            .map(|(id, _)| id)
            .collect::<Vec<_>>();
        out.push_str(&format!("  {} orders without a fate\n", missing.len()));
        for id in missing.iter().take(10) {
            let row: Vec<(String, String)> = redis::cmd("HGETALL")
                .arg(format!("{{{}}}:r:{id}", self.ns))
                .query(&mut c)
                .unwrap_or_default();
            out.push_str(&format!("    {id}: retry row {row:?}\n"));
        }
        out
    }
}

/// The store, as a node sees it.
pub fn open(server: &TestServer, ns: &str) -> RedisStore {
    RedisStore::connect(&RedisOptions::new(server.url(), ns)).expect("connect to the test's redis")
}

/// The orders the fleet's sink has written (its effect set `orders`), or 0 if the store
/// does not answer.
pub fn orders_written(store: &RedisStore) -> u64 {
    rebound::pipeline::fleet::effects::count(store, "orders").map_or(0, |(distinct, _)| distinct)
}

/// The fate of every order `1..=n`: its recorded fate, or acked when its partition's
/// committed position covers it (acked fates behind a position are pruned; dead-lettered
/// fates are always kept).
pub fn fleet_fates(store: &RedisStore, n: u64) -> Vec<(String, Option<Fate>)> {
    let committed: Vec<u64> = (0..PARTITIONS)
        .map(|p| {
            store
                .position(&partition_source(
                    rebound::pipeline::orders::SOURCE,
                    p as u32,
                ))
                .expect("position")
                .unwrap_or(0)
        })
        .collect();
    let mut out = Vec::with_capacity(n as usize);
    let orders: Vec<u64> = (1..=n).collect();
    for chunk in orders.chunks(1000) {
        let ids: Vec<MessageId> = chunk
            .iter()
            .map(|&k| MessageId::from(order_id(k)))
            .collect();
        let known: HashMap<String, Fate> = store
            .known_fates(&ids)
            .expect("known_fates")
            .into_iter()
            .map(|(id, f)| (id.to_string(), f))
            .collect();
        for &k in chunk {
            let id = order_id(k);
            let part = ((k - 1) % PARTITIONS) as usize;
            let pos = (k - 1) / PARTITIONS + 1;
            let covered = (pos <= committed[part]).then_some(Fate::Acked);
            out.push((id.clone(), known.get(&id).copied().or(covered)));
        }
    }
    out
}

/// What the fleet leaves in Redis that must be empty once a run is over: the due and
/// in-flight sets and the retry rows.
pub fn leftovers(server: &TestServer, ns: &str) -> (u64, u64, Vec<String>) {
    let mut c = server.client();
    let due: u64 = redis_cmd(&mut c, &["ZCARD", &format!("{{{ns}}}:due")]);
    let inflight: u64 = redis_cmd(&mut c, &["ZCARD", &format!("{{{ns}}}:inflight")]);
    let rows = scan(&mut c, &format!("{{{ns}}}:r:*"));
    (due, inflight, rows)
}

fn redis_cmd<T: redis::FromRedisValue>(c: &mut redis::Connection, args: &[&str]) -> T {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query(c).expect("a query to the test's redis")
}

fn scan(c: &mut redis::Connection, pattern: &str) -> Vec<String> {
    let mut cursor = "0".to_owned();
    let mut keys = Vec::new();
    loop {
        let (next, batch): (String, Vec<String>) =
            redis_cmd(c, &["SCAN", &cursor, "MATCH", pattern, "COUNT", "1000"]);
        keys.extend(batch);
        if next == "0" {
            return keys;
        }
        cursor = next;
    }
}

/// The claims a node logged (`claimed id=… attempt=… token=…` at debug level), as
/// (id, attempt, token).
pub fn claims(stderr: &str) -> Vec<(String, u64, u64)> {
    stderr
        .lines()
        .filter(|l| l.contains("claimed"))
        .filter_map(|l| {
            let field = |name: &str| {
                let at = l.find(&format!("{name}="))? + name.len() + 1;
                let rest = &l[at..];
                Some(rest.split_whitespace().next()?.trim_matches('"').to_owned())
            };
            Some((
                field("id")?,
                field("attempt")?.parse().ok()?,
                field("token")?.parse().ok()?,
            ))
        })
        .collect()
}

/// The ids of the claims a node's reaper returned to the due set, from its stderr.
pub fn reaps(stderr: &str) -> Vec<String> {
    stderr
        .lines()
        .filter(|l| l.contains("reaped: its lease ran out"))
        .filter_map(|l| {
            let at = l.find("id=")? + 3;
            Some(
                l[at..]
                    .split_whitespace()
                    .next()?
                    .trim_matches('"')
                    .to_owned(),
            )
        })
        .collect()
}

/// The report's fields every node of a fleet must print the same.
pub fn shared_fields(report: &serde_json::Value) -> BTreeMap<&'static str, serde_json::Value> {
    [
        "emitted",
        "acked",
        "dead_lettered",
        "lost",
        "duplicates",
        "dead_letters_by_label",
        "retries_by_rule",
        "complete",
    ]
    .into_iter()
    .map(|k| (k, report[k].clone()))
    .collect()
}

/// The stderr of a node's output.
pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}
