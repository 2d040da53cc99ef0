//! Word count: a complete topology on the in-memory seams.
//!
//! `cargo run -p rebound-runtime --example word_count`
//!
//! - `sentences` (spout): 2 000 numbered sentences, then exhausted. It is told each message's
//!   fate, which is where a durable source would commit its position.
//! - `split` (simple bolt, 2 tasks, shuffle): one tuple per word, anchored by the runtime.
//!   Sentences containing "poison" fail with a code the policy never retries.
//! - `count` (simple bolt, 2 tasks, fields grouping on `word`): counts words; fails now and then
//!   with a transient `FLAKY` code, so those messages are retried.
//! - `report` (deferred bolt, 1 task, global): batches counts and acks them together, the way
//!   a bolt that writes batches to a database would.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rebound_runtime::fate::Seams;
use rebound_runtime::fate::memory::{FixedPolicy, MemoryDeadLetters};
use rebound_runtime::topology::*;

struct Sentences {
    next: u64,
    total: u64,
    fates: Arc<Mutex<(u64, u64)>>,
}

impl Spout for Sentences {
    fn next(&mut self) -> NextMessage {
        if self.next == self.total {
            return NextMessage::Exhausted;
        }
        self.next += 1;
        let text = if self.next.is_multiple_of(500) {
            "this one carries poison".to_string()
        } else {
            format!(
                "the quick brown fox {} jumps over the lazy dog",
                self.next % 7
            )
        };
        NextMessage::Ready(Message::new(self.next.to_string(), "TEXT", text))
    }
    fn ack(&mut self, _id: &MessageId) {
        self.fates.lock().unwrap().0 += 1;
    }
    fn dead_lettered(&mut self, _id: &MessageId) {
        self.fates.lock().unwrap().1 += 1;
    }
}

struct Split;

impl Bolt for Split {
    fn execute(&mut self, input: &Tuple, out: &mut Emitter<'_>) -> Result<(), Failure> {
        let payload = input.bytes("payload").cloned().unwrap_or_default();
        let text =
            std::str::from_utf8(&payload).map_err(|e| Failure::new("BAD_UTF8", e.to_string()))?;
        if text.contains("poison") {
            return Err(Failure::new(
                "POISON",
                "this sentence can never be processed",
            ));
        }
        for word in text.split_whitespace() {
            out.emit((word,));
        }
        Ok(())
    }
}

#[derive(Default)]
struct Count {
    counts: HashMap<String, i64>,
    seen: u64,
}

impl Bolt for Count {
    fn execute(&mut self, input: &Tuple, out: &mut Emitter<'_>) -> Result<(), Failure> {
        self.seen += 1;
        if self.seen.is_multiple_of(997) {
            return Err(Failure::new("FLAKY", "a transient hiccup").with_attr("task", "count"));
        }
        let word = input.str("word").unwrap_or_default();
        let n = self.counts.entry(word.to_owned()).or_default();
        *n += 1;
        out.emit((word, *n));
        Ok(())
    }
}

/// Holds handles until 64 have arrived (or a tick), then acks them all at once.
struct Report {
    batch: Vec<PendingTuple>,
    totals: Arc<Mutex<HashMap<String, i64>>>,
}

impl Report {
    fn flush(&mut self) {
        let mut totals = self.totals.lock().unwrap();
        for h in self.batch.drain(..) {
            let t = h.tuple();
            if let (Some(w), Some(n)) = (t.str("word"), t.int("count")) {
                let e = totals.entry(w.to_owned()).or_default();
                *e = (*e).max(n);
            }
            h.ack();
        }
    }
}

impl DeferredBolt for Report {
    fn execute(&mut self, input: PendingTuple) {
        self.batch.push(input);
        if self.batch.len() >= 64 {
            self.flush();
        }
    }
    fn tick(&mut self) {
        self.flush();
    }
}

#[tokio::main]
async fn main() -> Result<(), BuildError> {
    let fates = Arc::new(Mutex::new((0, 0)));
    let totals = Arc::new(Mutex::new(HashMap::new()));

    let mut b = TopologyBuilder::new("word-count");
    b.config(Config {
        message_timeout: Duration::from_secs(5),
        max_spout_pending: 200,
        ackers: 2,
        ..Config::default()
    });
    let spout_fates = fates.clone();
    b.spout("sentences", 1, move |_| Sentences {
        next: 0,
        total: 2_000,
        fates: spout_fates.clone(),
    });
    b.bolt("split", 2, |_| Split)
        .output(["word"])
        .shuffle("sentences");
    b.bolt("count", 2, |_| Count::default())
        .output(["word", "count"])
        .fields("split", ["word"]);
    let report_totals = totals.clone();
    b.deferred_bolt("report", 1, move |_| Report {
        batch: Vec::new(),
        totals: report_totals.clone(),
    })
    .global("count")
    .tick(Duration::from_millis(20));
    let topology = b.build()?;

    let dead_letters = MemoryDeadLetters::new();
    let policy = FixedPolicy {
        max_attempts: 4,
        base_delay: Duration::from_millis(10),
        give_up_codes: BTreeSet::from(["POISON".to_string()]),
        ..FixedPolicy::default()
    };
    let seams = Seams::in_memory()
        .with_policy(policy)
        .with_dead_letters(dead_letters.clone());

    let running = topology.start(seams);
    running.wait_quiescent().await;
    let stats = running.stats();
    let report = running.shutdown(Duration::from_secs(5)).await;

    let (acked, dead) = *fates.lock().unwrap();
    println!("spout told: {acked} acked, {dead} dead-lettered (of 2000)");
    println!(
        "stats: emitted {} acked {} retries {} dead letters {:?} failures {:?}",
        stats.emitted,
        stats.acked,
        stats.retries,
        stats.dead_letters_by_label,
        stats.failures_by_code
    );
    println!(
        "complete latency p50 {:?} p99 {:?}",
        stats.complete_latency.quantile(0.5),
        stats.complete_latency.quantile(0.99)
    );
    for dl in dead_letters.letters().iter().take(2) {
        println!(
            "dead letter {}: {} after {} attempt(s), rule {}",
            dl.id(),
            dl.failure.code,
            dl.message.retry.attempt,
            dl.rule
        );
    }
    let totals = totals.lock().unwrap();
    println!(
        "'fox' counted {} times",
        totals.get("fox").copied().unwrap_or(0)
    );
    println!("shutdown: {report:?}");
    assert_eq!(acked + dead, 2_000);
    Ok(())
}
