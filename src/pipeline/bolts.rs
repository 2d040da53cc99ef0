//! The pipeline's bolts: `parse` (payload → order fields, or `BAD_JSON` / `VALIDATION_FAILED`)
//! and `store` (an idempotent write into `pipeline.db`, with the injected [faults](super::faults);
//! a keyed run's events are checked in sequence there, see `db::write_orders`).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, mpsc};
use std::time::Duration;

use serde::Deserialize;

use super::book::OrderSink;
use super::db::{OrderRow, Sequence};
use super::faults::{Fault, Faults};
use super::orders::position_of;
use rebound_runtime::time::TimeSource;
use rebound_runtime::topology::{Bolt, DeferredBolt, Emitter, Failure, PendingTuple, Tuple, Value};

/// The fields the parse bolt emits (`order` and `seq`: a keyed run's event's order and place
/// in it; `seq` is null for an order of its own).
pub const PARSED_FIELDS: [&str; 9] = [
    "id",
    "biz",
    "attempt",
    "customer",
    "amount_cents",
    "currency",
    "items",
    "order",
    "seq",
];

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OrderJson<'a> {
    /// A keyed run's event: its id, kind and place in the order.
    #[serde(default)]
    event: Option<&'a str>,
    #[serde(default)]
    kind: Option<&'a str>,
    #[serde(default)]
    seq: Option<i64>,
    order: &'a str,
    customer: &'a str,
    amount_cents: i64,
    currency: &'a str,
    items: i64,
}

/// Parses and validates an order's JSON payload.
#[derive(Debug, Default)]
pub struct ParseBolt;

impl Bolt for ParseBolt {
    fn execute(&mut self, input: &Tuple, out: &mut Emitter<'_>) -> Result<(), Failure> {
        let id = input.str("id").unwrap_or_default();
        let payload = input.bytes("payload").map(|b| &b[..]).unwrap_or_default();
        let order: OrderJson<'_> = serde_json::from_slice(payload).map_err(|e| {
            Failure::new("BAD_JSON", format!("payload of {id} is not an order: {e}"))
                .with_attr("stage", "parse")
        })?;
        let invalid = |why: &str| {
            Err(Failure::new("VALIDATION_FAILED", format!("{id}: {why}"))
                .with_attr("stage", "parse"))
        };
        if order.event.unwrap_or(order.order) != id {
            return invalid("the payload names another order");
        }
        if order.event.is_some() && (order.kind.is_none() || order.seq.is_none_or(|s| s < 0)) {
            return invalid("an event needs its kind and its place in the order");
        }
        if order.amount_cents <= 0 {
            return invalid("amount_cents must be positive");
        }
        if order.items <= 0 {
            return invalid("an order needs at least one item");
        }
        if !matches!(order.currency, "EUR" | "USD" | "GBP") {
            return invalid("unknown currency");
        }
        out.emit(vec![
            input.field("id").cloned().unwrap_or_default(),
            input.field("biz").cloned().unwrap_or_default(),
            input.field("attempt").cloned().unwrap_or_default(),
            Value::from(order.customer),
            Value::Int(order.amount_cents),
            Value::from(order.currency),
            Value::Int(order.items),
            Value::from(order.order),
            order.seq.map_or(Value::Null, Value::Int),
        ]);
        Ok(())
    }
}

/// A write for the orders writer thread: the row, and the tuple to ack once it is committed.
pub(crate) struct Write {
    pub(crate) row: OrderRow,
    pub(crate) handle: PendingTuple,
}

enum ToWriter {
    Write(Write),
    /// Answered once everything sent before it is written (or failed).
    Drained(tokio::sync::oneshot::Sender<()>),
}

/// The way to the orders writer thread. Once [`OrdersWriter::close`]d, nothing more is
/// written: a slow write still sleeping when the run stops must not change the orders or the
/// duplicates after the report was taken.
#[derive(Clone)]
pub(crate) struct OrdersWriter {
    tx: mpsc::Sender<ToWriter>,
    closed: Arc<AtomicBool>,
}

impl OrdersWriter {
    /// Starts the writer thread on `sink`; it adds the duplicates each write absorbed to
    /// `duplicates`.
    pub(crate) fn spawn(
        sink: Box<dyn OrderSink>,
        time: Arc<dyn TimeSource>,
        duplicates: Arc<AtomicU64>,
    ) -> std::io::Result<OrdersWriter> {
        let (tx, rx) = mpsc::channel();
        let closed = Arc::new(AtomicBool::new(false));
        let thread_closed = closed.clone();
        std::thread::Builder::new()
            .name("rebound-orders".into())
            .spawn(move || run_writer(sink, rx, time, &thread_closed, &duplicates))?;
        Ok(OrdersWriter { tx, closed })
    }

    fn send(&self, w: Write) {
        if self.closed.load(Ordering::SeqCst) {
            return; // dropped: the tuple fails (UNACKED), and the run is over anyway
        }
        let _ = self.tx.send(ToWriter::Write(w));
    }

    /// Stops writing, and waits until the thread has handled everything sent before.
    pub(crate) async fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        let (done, drained) = tokio::sync::oneshot::channel();
        if self.tx.send(ToWriter::Drained(done)).is_ok() {
            let _ = drained.await;
        }
    }
}

/// A `--outage` in real time, and the retries that met it.
#[derive(Clone, Debug)]
pub(crate) struct OutageWindow {
    pub(crate) from: tokio::time::Instant,
    pub(crate) until: tokio::time::Instant,
    /// `PAYMENT` retries (attempt 2 and on) this process delivered to the gateway while it
    /// was down: the report's `node.outage_retries`.
    pub(crate) retries: Arc<AtomicU64>,
}

/// Writes orders idempotently (by order id) through the writer thread, or fails them the way
/// the [fault model](super::faults) says.
pub struct StoreBolt {
    pub(crate) writer: OrdersWriter,
    pub(crate) faults: Arc<Faults>,
    /// How long a slow write takes: longer than the message timeout.
    pub(crate) slow: Duration,
    /// A correlated outage of the payment gateway, in real time.
    pub(crate) outage: Option<OutageWindow>,
    /// The lives of the orders (a replayed or redriven order's faults heal).
    pub(crate) lives: Arc<super::faults::Lives>,
}

fn row_of(t: &Tuple) -> Option<OrderRow> {
    let s = |name| match t.field(name) {
        Some(Value::Str(s)) => Some(s.clone()),
        _ => None,
    };
    Some(OrderRow {
        id: s("id")?,
        biz: s("biz")?,
        customer: t.str("customer")?.to_owned(),
        amount_cents: t.int("amount_cents")?,
        currency: t.str("currency")?.to_owned(),
        items: t.int("items")?,
        attempt: t.int("attempt")?,
        sequence: match t.int("seq") {
            Some(place) => Some(Box::new(Sequence {
                order: t.str("order")?.to_owned(),
                place,
            })),
            None => None,
        },
    })
}

impl DeferredBolt for StoreBolt {
    fn execute(&mut self, input: PendingTuple) {
        let Some(row) = row_of(input.tuple()) else {
            input.fail(Failure::new(
                "VALIDATION_FAILED",
                "the store bolt got a tuple without the order fields",
            ));
            return;
        };
        if &*row.biz == "PAYMENT"
            && let Some(outage) = &self.outage
        {
            let now = tokio::time::Instant::now();
            if now >= outage.from && now < outage.until {
                if row.attempt > 1 {
                    outage.retries.fetch_add(1, Ordering::Relaxed);
                }
                input.fail(super::faults::Outage::failure());
                return;
            }
        }
        let n = position_of(&row.id).unwrap_or(0);
        let attempt = u32::try_from(row.attempt).unwrap_or(u32::MAX);
        match self
            .faults
            .roll_in_life(n, &row.biz, attempt, self.lives.of(n))
        {
            Fault::None => self.writer.send(Write { row, handle: input }),
            Fault::Fail(failure) => input.fail(failure),
            Fault::Slow => {
                // The write lands after the tree has timed out; its late ack is ignored, and
                // the retry's write finds the order already there (a duplicate, absorbed).
                let writer = self.writer.clone();
                let slow = self.slow;
                tokio::spawn(async move {
                    tokio::time::sleep(slow).await;
                    writer.send(Write { row, handle: input });
                });
            }
            Fault::Panic => panic!("injected fault: the order writer crashed on {}", row.id),
        }
    }
}

/// The most orders in one transaction.
const MAX_BATCH: usize = 512;

/// At most one warning a second about failed order writes: a full disk fails every
/// transaction, and a line for each would bury the cause (and, on a stderr nobody reads fast
/// enough, stall the writer on its own log).
#[derive(Default)]
struct FailureLog {
    last: Option<std::time::Instant>,
    /// Failed transactions since the last warning, and their orders.
    transactions: u64,
    orders: usize,
}

impl FailureLog {
    const EVERY: std::time::Duration = std::time::Duration::from_secs(1);

    fn failed(&mut self, error: &dyn std::fmt::Display, orders: usize) {
        self.transactions += 1;
        self.orders += orders;
        let now = std::time::Instant::now();
        if self.last.is_some_and(|last| now - last < Self::EVERY) {
            return;
        }
        tracing::warn!(
            error = %error,
            orders = self.orders,
            transactions = self.transactions,
            "writing orders failed (the rules retry them)"
        );
        self.last = Some(now);
        self.transactions = 0;
        self.orders = 0;
    }
}

/// The orders writer: takes what queued up while the last commit ran, writes it in one
/// transaction, then acks each tuple (after the commit, so an ack means the order is durable).
/// A failed transaction fails its tuples with `DB_LOCK_WAIT`, and the rules retry them. Runs
/// until every sender is gone; once `closed`, it writes nothing more. Counts the duplicates
/// each transaction absorbed into `duplicates`.
fn run_writer(
    mut sink: Box<dyn OrderSink>,
    rx: mpsc::Receiver<ToWriter>,
    time: Arc<dyn TimeSource>,
    closed: &AtomicBool,
    duplicates: &AtomicU64,
) {
    let mut batch: Vec<Write> = Vec::with_capacity(MAX_BATCH);
    let mut drained = Vec::new();
    let mut rows: Vec<OrderRow> = Vec::with_capacity(MAX_BATCH);
    let mut failures = FailureLog::default();
    while let Ok(first) = rx.recv() {
        let mut next = Some(first);
        while let Some(msg) = next.take() {
            match msg {
                ToWriter::Write(w) => batch.push(w),
                ToWriter::Drained(done) => drained.push(done),
            }
            if batch.len() < MAX_BATCH {
                next = rx.try_recv().ok();
            }
        }
        if closed.load(Ordering::SeqCst) {
            batch.clear(); // the handles fail as UNACKED; nobody waits for them any more
        } else if !batch.is_empty() {
            rows.clear();
            rows.extend(batch.iter().map(|w| w.row.clone()));
            match sink.write(&rows, time.wall().as_millis()) {
                Ok(absorbed) => {
                    duplicates.fetch_add(absorbed, Ordering::Relaxed);
                    batch.drain(..).for_each(|w| w.handle.ack());
                }
                Err(e) => {
                    failures.failed(&e, batch.len());
                    let failure =
                        Failure::new("DB_LOCK_WAIT", format!("writing orders failed: {e}"))
                            .with_attr("table", "orders");
                    PendingTuple::fail_batch(batch.drain(..).map(|w| w.handle), failure);
                }
            }
        }
        for done in drained.drain(..) {
            let _ = done.send(());
        }
    }
}
