//! A durable order pipeline written with the public API: the rule engine decides failures,
//! retries and dead letters live in SQLite, and the source commits its position only after
//! each message's fate. (`rebound run` is the full version of this, in
//! `rebound::pipeline`.)
//!
//! ```sh
//! cargo run --example order_pipeline            # the shipped rules/, a temporary data directory
//! ```
//!
//! - `orders` (spout): 2,000 numbered orders, each at its offset. On `ack` (the runtime has
//!   already queued the acked fate) it moves its [`SourcePosition`]; on `dead_lettered` (sent
//!   only after the letter is committed) it moves the position too. Acked fates below the
//!   committed position are not kept: the position is their record.
//! - `parse` (simple bolt, 2 tasks): one order in fifty is not JSON → `BAD_JSON`, which the
//!   rules give up on at once (label `L3`).
//! - `store` (simple bolt, fields grouping on `id`): an idempotent write that hits a lock wait
//!   now and then → `DB_LOCK_WAIT`, retried by the `db-lock` rule with its backoff.
//!
//! The program then starts the same topology a second time on the same data directory: the
//! position is past every order, so nothing runs again.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rebound_engine::PolicyHandle;
use rebound_runtime::durable::{Durable, DurableOptions, SourcePosition};
use rebound_runtime::policy::{RulePolicy, TimeScale};
use rebound_runtime::store::{DeadLetterFilter, SqliteStore, Store};
use rebound_runtime::time::TokioTime;
use rebound_runtime::topology::*;

const ORDERS: u64 = 2_000;

fn id_of(n: u64) -> String {
    format!("order-{n:06}")
}

struct Orders {
    next: u64,
    position: SourcePosition,
}

impl Spout for Orders {
    fn next(&mut self) -> NextMessage {
        loop {
            self.next += 1;
            if self.next > ORDERS {
                return NextMessage::Exhausted;
            }
            // After a restart: orders with a known fate are not delivered again.
            if !self.position.should_skip(self.next) {
                break;
            }
        }
        let n = self.next;
        self.position.handing_out(n);
        let payload = if n.is_multiple_of(50) {
            "{\"order\": ".to_string() // cut off: not JSON
        } else {
            format!(
                "{{\"order\":\"{}\",\"amount_cents\":{}}}",
                id_of(n),
                100 + n
            )
        };
        NextMessage::Ready(Message::new(id_of(n), "ORDER", payload).with_offset(n))
    }

    fn ack(&mut self, id: &MessageId) {
        self.position.settled(number(id));
    }

    fn dead_lettered(&mut self, id: &MessageId) {
        self.position.settled(number(id));
    }

    fn close(&mut self) {
        self.position.sync();
    }
}

fn number(id: &MessageId) -> u64 {
    id.as_str()
        .trim_start_matches("order-")
        .parse()
        .unwrap_or(0)
}

#[derive(serde::Deserialize)]
struct Order {
    order: String,
    amount_cents: i64,
}

struct Parse;

impl Bolt for Parse {
    fn execute(&mut self, input: &Tuple, out: &mut Emitter<'_>) -> Result<(), Failure> {
        let payload = input.bytes("payload").cloned().unwrap_or_default();
        let order: Order = serde_json::from_slice(&payload)
            .map_err(|e| Failure::new("BAD_JSON", e.to_string()))?;
        let attempt = input.int("attempt").unwrap_or(1);
        out.emit((order.order, order.amount_cents, attempt));
        Ok(())
    }
}

struct Write {
    table: Arc<Mutex<BTreeSet<String>>>,
}

impl Bolt for Write {
    fn execute(&mut self, input: &Tuple, _: &mut Emitter<'_>) -> Result<(), Failure> {
        let id = input.str("id").unwrap_or_default().to_owned();
        let attempt = input.int("attempt").unwrap_or(1);
        // Deterministic lock waits: one order in thirteen, at its first two attempts.
        if number(&MessageId::from(id.as_str())).is_multiple_of(13) && attempt <= 2 {
            return Err(Failure::new("DB_LOCK_WAIT", "lock wait timeout"));
        }
        self.table.lock().unwrap().insert(id); // idempotent by order id
        Ok(())
    }
}

async fn run_once(data: &Path, rules: &Arc<PolicyHandle>) -> anyhow::Result<()> {
    let store = Arc::new(SqliteStore::open(data)?);
    let durable = Durable::new(
        store.clone(),
        Arc::new(TokioTime::new()),
        DurableOptions::default(),
    );
    // Retries scheduled before a restart come back with their due times and metadata.
    let recovered = durable.recover()?;
    let owned = recovered.iter().map(number);
    let position = durable.source_position("orders", id_of, owned)?;
    println!(
        "starting at position {} ({} retries recovered)",
        position.committed(),
        recovered.len()
    );

    let table = Arc::new(Mutex::new(BTreeSet::new()));
    let spout = Mutex::new(Some(Orders {
        next: position.committed(),
        position,
    }));
    let mut b = TopologyBuilder::new("orders");
    b.config(Config {
        message_timeout: Duration::from_secs(30),
        ..Config::default()
    });
    b.spout("orders", 1, move |_| {
        spout.lock().unwrap().take().expect("one task")
    });
    b.bolt("parse", 2, |_| Parse)
        .output(["id", "amount_cents", "attempt"])
        .shuffle("orders");
    let t = table.clone();
    b.bolt("store", 1, move |_| Write { table: t.clone() })
        .fields("parse", ["id"]);

    // The rules decide every failure; at 100× their delays (1 s, 2 s… for db-lock) pass in
    // tens of milliseconds.
    let policy = RulePolicy::new(rules.clone(), TimeScale::new(100.0)?);
    let running = b.build()?.start(durable.seams(policy));
    running.wait_quiescent().await;
    let stats = running.stats();
    running.shutdown(Duration::from_secs(5)).await;
    durable.journal().flush().await;

    println!(
        "  {} deliveries, {} acked, {} retries {:?}, {} dead letters {:?}, {} orders written",
        stats.emitted,
        stats.acked,
        stats.retries,
        stats.retries_by_rule,
        stats.dead_lettered,
        stats.dead_letters_by_label,
        table.lock().unwrap().len()
    );
    let letters = store.dead_letters(&DeadLetterFilter {
        limit: 3,
        ..DeadLetterFilter::default()
    })?;
    for d in letters.items {
        let l = d.letter;
        println!(
            "  dead letter {}: {} ({}) by rule {} of set {}",
            l.message.id, l.label, l.reason, l.rule, l.version
        );
    }
    println!(
        "  position committed: {:?}",
        store.position("orders")?.unwrap_or(0)
    );
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let rules_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("rules");
    let set = rebound_engine::load_dir(&rules_dir)?
        .map_err(|rejected| anyhow::anyhow!("the rules are invalid: {rejected:?}"))?;
    println!("rules {} from {}", set.version(), rules_dir.display());
    let rules = Arc::new(PolicyHandle::new(set));
    let data = tempfile::tempdir()?;
    run_once(data.path(), &rules).await?;
    println!("again, on the same data directory:");
    run_once(data.path(), &rules).await?;
    Ok(())
}
