//! Crash recovery with a real process and a real SIGKILL.
//!
//! The test re-runs its own binary as a child with `REBOUND_CRASH_WRITER_DIR` set, which turns
//! `crash_writer_role` into a writer: it schedules 10,000 retries and writes dead letters, in
//! batches of 100 retries plus 10 dead letters per transaction, printing `committed N` after
//! each commit. The parent kills it (`Child::kill` is SIGKILL on Unix) partway, reopens the
//! data directory and checks: every batch the child reported is there, the number of batches
//! on disk is whole (no half-written batch), no id is duplicated or missing, every field reads
//! back as written, and recovery puts every retry back in a scheduler.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

use rebound_runtime::fate::{GiveUpReason, Label, RuleRef, Version};
use rebound_runtime::scheduler::RetryScheduler;
use rebound_runtime::store::*;
use rebound_runtime::time::Timestamp;
use rebound_runtime::topology::{Failure, FailureRecord};

const ENV_DIR: &str = "REBOUND_CRASH_WRITER_DIR";
const BATCHES: u64 = 100;
const RETRIES_PER_BATCH: u64 = 100; // 10,000 retries in all
const LETTERS_PER_BATCH: u64 = 10;
/// The parent kills the child once it has reported this many commits.
const KILL_AFTER: u64 = 30;

/// The writer's test, as the test harness names it inside this binary.
fn writer_role() -> String {
    let module = module_path!().split_once("::").map_or("", |(_, m)| m);
    format!("{module}::crash_writer_role")
}

fn payload(i: u64) -> Vec<u8> {
    // Distinct, sizeable payloads so a torn write could not go unnoticed.
    (0..512)
        .map(|k| (i.wrapping_mul(31).wrapping_add(k) % 251) as u8)
        .collect()
}

fn version() -> Version {
    Version::from_hash(0x0011_2233_aabb_ccdd)
}

fn retry(i: u64) -> ScheduledRetry {
    let due = Timestamp::from_millis(1_700_000_000_000 + (i % 97) * 1_000);
    let delay = Duration::from_millis(i % 97 * 1_000);
    let mut message = Message::new(format!("r{i:05}"), "ORDER", payload(i))
        .with_header("n", i.to_string())
        .with_offset(i + 1);
    message.retry.attempt = (i % 5) as u32 + 1;
    message.retry.first_delivery = Some(Timestamp::from_millis(1_699_999_000_000 + i));
    message.retry.failures.push(FailureRecord {
        attempt: message.retry.attempt,
        code: "DB_LOCK_WAIT".into(),
        message: format!("lock wait #{i}"),
        attrs: Default::default(),
        at: due.saturating_sub(delay),
        delay: Some(delay),
        rule: RuleRef::Rule("db-lock".into()),
        version: version(),
    });
    ScheduledRetry::new(message, due)
}

fn letter(i: u64) -> DeadLetter {
    let mut message = Message::new(format!("d{i:05}"), "PAYMENT", payload(i + 1_000_000));
    message.retry.attempt = 6;
    message.retry.first_delivery = Some(Timestamp::from_millis(1_699_999_000_000));
    DeadLetter {
        message,
        failure: Failure::new("NET_TIMEOUT", format!("timeout #{i}"))
            .with_attr("upstream", format!("gw-{}", i % 3)),
        label: Label::from("L2"),
        reason: GiveUpReason::MaxRetries,
        rule: RuleRef::Rule("net-timeout".into()),
        version: version(),
        at: Timestamp::from_millis(1_700_000_000_000 + i),
    }
}

/// The child's role; a no-op in a normal test run.
#[test]
fn crash_writer_role() {
    let Ok(dir) = std::env::var(ENV_DIR) else {
        return;
    };
    let store = SqliteStore::open(&dir).expect("open store in child");
    let mut out = std::io::stdout();
    for b in 0..BATCHES {
        let mut ops = Vec::new();
        for i in b * RETRIES_PER_BATCH..(b + 1) * RETRIES_PER_BATCH {
            ops.push(WriteOp::Schedule(retry(i)));
        }
        for i in b * LETTERS_PER_BATCH..(b + 1) * LETTERS_PER_BATCH {
            ops.push(WriteOp::DeadLetter(Box::new(letter(i))));
        }
        store.apply(&ops).expect("write batch");
        writeln!(out, "committed {}", b + 1).expect("stdout");
        out.flush().expect("stdout");
        // Paced up to the kill point so the parent keeps up; flat out afterwards, so the kill
        // usually lands inside a transaction. Nothing is asserted on time.
        if b + 1 < KILL_AFTER {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    writeln!(out, "finished").expect("stdout");
}

#[test]
fn sigkill_mid_write_keeps_every_committed_batch_and_no_half_batch() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", &writer_role(), "--nocapture", "--test-threads=1"])
        .env(ENV_DIR, dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn the writer");
    let stdout = child.stdout.take().unwrap();
    let mut reported = 0;
    let mut finished = false;
    for line in BufReader::new(stdout).lines() {
        let line = line.unwrap();
        if let Some(n) = line.strip_prefix("committed ") {
            reported = n.trim().parse::<u64>().unwrap();
            if reported >= KILL_AFTER {
                break;
            }
        }
        finished |= line == "finished";
    }
    child.kill().expect("SIGKILL the writer");
    child.wait().unwrap();
    assert!(!finished, "the writer finished before the kill");
    assert!(
        reported >= KILL_AFTER,
        "the writer died early: reported {reported}"
    );

    let store = SqliteStore::open(dir.path()).expect("reopen after the crash");

    // Retries: a whole number of batches, at least every reported one, ids exactly 0..n.
    let scheduled = store.scheduled().unwrap();
    let n = scheduled.len() as u64;
    assert_eq!(
        n % RETRIES_PER_BATCH,
        0,
        "a half-written batch: {n} retries"
    );
    let batches = n / RETRIES_PER_BATCH;
    assert!(
        batches >= reported,
        "lost committed batches: {batches} < {reported}"
    );
    assert!(batches < BATCHES, "the kill came after the last batch");
    eprintln!("child reported {reported} batches; {batches} on disk after SIGKILL");
    let ids: BTreeSet<_> = scheduled.iter().map(|(id, _)| id.clone()).collect();
    assert_eq!(ids.len() as u64, n, "duplicated retries");
    let expected: BTreeSet<_> = (0..n).map(|i| retry(i).message.id).collect();
    assert_eq!(ids, expected, "missing or foreign retries");
    let all: Vec<_> = ids.into_iter().collect();
    let rows = store.retries(&all).unwrap();
    assert_eq!(rows.len() as u64, n, "every scheduled id has its retry");
    for row in &rows {
        let i: u64 = row.message.id.as_str()[1..].parse().unwrap();
        assert_eq!(row, &retry(i), "retry {i} reads back as written");
    }

    // Dead letters: written in the same transactions, so exactly `batches` batches of them.
    let mut letters = Vec::new();
    let mut filter = DeadLetterFilter {
        limit: MAX_PAGE,
        ..Default::default()
    };
    loop {
        let page = store.dead_letters(&filter).unwrap();
        letters.extend(page.items);
        match page.next {
            Some(cursor) => filter.before = Some(cursor),
            None => break,
        }
    }
    assert_eq!(letters.len() as u64, batches * LETTERS_PER_BATCH);
    let letter_ids: BTreeSet<_> = letters
        .iter()
        .map(|d| d.letter.message.id.clone())
        .collect();
    assert_eq!(letter_ids.len(), letters.len(), "duplicated dead letters");
    for d in &letters {
        let i: u64 = d.letter.message.id.as_str()[1..].parse().unwrap();
        assert!(i < batches * LETTERS_PER_BATCH);
        assert_eq!(d.letter, letter(i), "dead letter {i} reads back as written");
        assert_eq!(d.status, DeadLetterStatus::Dead);
    }
    let letter_ids: Vec<MessageId> = letter_ids.into_iter().collect();
    let fates = store.known_fates(&letter_ids).unwrap();
    assert_eq!(
        fates.len(),
        letters.len(),
        "every stored letter has its fate"
    );
    assert!(fates.iter().all(|(_, f)| *f == Fate::DeadLettered));

    // And the scheduler gets every retry back with its original due time, as a restart does.
    let mut scheduler = RetryScheduler::new();
    for (id, due) in &scheduled {
        scheduler.schedule(id.clone(), *due);
    }
    assert_eq!(scheduler.len() as u64, n);
    assert_eq!(
        scheduler.due_of(&MessageId::from("r00007")),
        Some(retry(7).due)
    );
}
