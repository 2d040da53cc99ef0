//! Fills a data directory's store with N dead letters, through the store API (`Store::apply`,
//! as the runtime's letter sink writes them), for `benches/console.sh` to open the console on
//! a store of 100 or of 100,000 letters. A run that dead-letters that many would spend minutes
//! on orders that succeed; this writes the same rows in seconds.
//!
//! ```sh
//! cargo run --release --example fill_dead_letters -- DIR 100000
//! ```
//!
//! Each letter is shaped like one of the bundled pipeline's: a 120-byte order payload, three
//! failures before the one that ended it, labels L1, L2 and L3 in turn with their rules and
//! codes, and the last failure spread over the hour before now (so some are overdue).

use std::time::{Duration, Instant};

use rebound_runtime::fate::{DeadLetter, GiveUpReason, Label, RuleRef, Version};
use rebound_runtime::store::{Message, SqliteStore, Store, WriteOp};
use rebound_runtime::time::Timestamp;
use rebound_runtime::topology::{Failure, FailureRecord};

const BATCH: usize = 1_000;
/// (label, rule, code, message, biz) in turn.
const KINDS: [(&str, &str, &str, &str, &str); 3] = [
    (
        "L1",
        "payment-processing",
        "PAY_PROCESSING",
        "the payment gateway is still processing",
        "PAYMENT",
    ),
    (
        "L2",
        "db-lock",
        "DB_LOCK_WAIT",
        "lock wait timeout exceeded on table orders",
        "ORDER",
    ),
    (
        "L3",
        "bad-payload",
        "BAD_JSON",
        "payload is not an order: EOF while parsing a string at line 1 column 49",
        "INVENTORY",
    ),
];

fn letter(n: u64, now: Timestamp) -> WriteOp {
    let (label, rule, code, text, biz) = KINDS[(n % 3) as usize];
    let id = format!("fill-{n:07}");
    let payload = format!(
        "{{\"order\":\"{id}\",\"customer\":\"c-{}\",\"amount_cents\":{},\"currency\":\"EUR\",\"items\":2}}",
        n % 5_000,
        100 + n % 90_000
    );
    let last = now.saturating_sub(Duration::from_millis((n * 37) % 3_600_000));
    let mut message = Message::new(id, biz, payload);
    message.retry.first_delivery = Some(last.saturating_sub(Duration::from_secs(8)));
    for attempt in 1..=3 {
        message.retry.failures.push(FailureRecord {
            attempt,
            at: last.saturating_sub(Duration::from_secs(u64::from(8 - 2 * attempt))),
            code: code.into(),
            message: text.into(),
            attrs: [("stage".to_owned(), "store".to_owned())].into(),
            rule: RuleRef::Rule(rule.into()),
            version: Version::from_hash(0x00c0_ffee),
            delay: Some(Duration::from_secs(2)),
        });
    }
    message.retry.attempt = 4;
    WriteOp::DeadLetter(Box::new(DeadLetter {
        message,
        failure: Failure::new(code, text).with_attr("stage", "store"),
        label: Label::from(label),
        reason: GiveUpReason::MaxRetries,
        rule: RuleRef::Rule(rule.into()),
        version: Version::from_hash(0x00c0_ffee),
        at: last,
    }))
}

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let (Some(dir), Some(n)) = (args.next(), args.next()) else {
        anyhow::bail!("usage: fill_dead_letters DIR N");
    };
    let n: u64 = n.parse().map_err(|e| anyhow::anyhow!("N: {e}: {n:?}"))?;
    std::fs::create_dir_all(&dir)?;
    let store = SqliteStore::open(&dir)?;
    let now = Timestamp::now();
    let start = Instant::now();
    let mut batch = Vec::with_capacity(BATCH);
    for i in 1..=n {
        batch.push(letter(i, now));
        if batch.len() == BATCH || i == n {
            store.apply(&batch)?;
            batch.clear();
        }
    }
    eprintln!(
        "{n} dead letters written into {dir} in {:.1} s",
        start.elapsed().as_secs_f64()
    );
    Ok(())
}
