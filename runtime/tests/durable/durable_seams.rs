//! The durable seams on their own: retries survive a restart with their due times and
//! metadata (overdue ones fire at once); a message whose fate is known is not handed out
//! again; a spout hears `dead_lettered` only after the letter is committed; a replayed dead
//! letter re-enters a live topology. (The journal as a writer is `journal_writes`; a durable
//! source with a committed position is `durable_source`.)

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rebound_runtime::durable::{Durable, DurableOptions, Journal, JournalOptions, SourcePosition};
use rebound_runtime::fate::memory::FixedPolicy;
use rebound_runtime::fate::{GiveUpReason, RetryQueue, RuleRef, Version};
use rebound_runtime::store::{
    self, DeadLetterStatus, Fate, Offset, ScheduledRetry, SqliteStore, Store, WriteOp,
};
use rebound_runtime::time::{TimeSource, Timestamp, TokioTime};
use rebound_runtime::topology::*;

pub(crate) fn open(dir: &Path) -> (Arc<SqliteStore>, Durable) {
    open_with(dir, DurableOptions::default())
}

pub(crate) fn open_with(dir: &Path, options: DurableOptions) -> (Arc<SqliteStore>, Durable) {
    let store = Arc::new(SqliteStore::open(dir).unwrap());
    let durable = Durable::new(store.clone(), Arc::new(TokioTime::new()), options);
    (store, durable)
}

/// An operator's replay through the journal; it waits for the commit, so async code runs it
/// on a blocking thread (as the admin API does).
async fn blocking_replay(d: &Durable, id: &str, operator: &str, reason: &str) -> ScheduledRetry {
    let (d, id, operator, reason) = (
        d.clone(),
        id.to_owned(),
        operator.to_owned(),
        reason.to_owned(),
    );
    tokio::task::spawn_blocking(move || d.replay(&id, &operator, &reason))
        .await
        .unwrap()
        .unwrap()
}

/// The fate the store knows for `id`.
pub(crate) fn fate_of(store: &SqliteStore, id: &str) -> Option<Fate> {
    let fates = store.known_fates(&[MessageId::from(id)]).unwrap();
    fates.into_iter().next().map(|(_, fate)| fate)
}

/// The ids with a retry row, in due order.
fn scheduled_ids(store: &SqliteStore) -> Vec<String> {
    store
        .scheduled()
        .unwrap()
        .into_iter()
        .map(|(id, _)| id.to_string())
        .collect()
}

fn queue_of(d: &Durable) -> Box<dyn RetryQueue> {
    let seams = d.seams(FixedPolicy::default());
    (seams.retry_queues)(&TaskInfo {
        component: "orders",
        index: 0,
        parallelism: 1,
    })
}

/// A message as the spout task hands it to the queue after a failure: attempt, first delivery
/// and the last failure filled in (times at millisecond precision, as the store keeps them).
pub(crate) fn failed(id: &str, attempt: u32, delay: Duration) -> Message {
    let mut m =
        Message::new(id, "PAYMENT", format!("{{\"order\":\"{id}\"}}")).with_header("trace", id);
    m.retry.attempt = attempt;
    m.retry.first_delivery = Some(Timestamp::from_millis(1_700_000_000_123));
    m.retry.failures.push(FailureRecord {
        attempt,
        code: "PAY_PROCESSING".into(),
        message: "still processing".into(),
        attrs: Default::default(),
        at: Timestamp::now(),
        delay: Some(delay),
        rule: RuleRef::Rule("payment-processing".into()),
        version: version(),
    });
    m
}

fn version() -> Version {
    "00112233aabbccdd".parse().unwrap()
}

fn same_but_at(a: &Message, b: &Message) {
    let (mut a, mut b) = (a.clone(), b.clone());
    for m in [&mut a, &mut b] {
        if let Some(l) = m.retry.failures.last_mut() {
            l.at = Timestamp::ZERO;
        }
    }
    assert_eq!(a, b);
}

#[tokio::test]
async fn scheduled_retries_survive_a_restart_with_their_due_times_and_metadata() {
    let dir = tempfile::tempdir().unwrap();
    let soon = failed("order-1", 2, Duration::from_millis(50));
    let later = failed("order-2", 4, Duration::from_secs(3600));
    {
        let (_, durable) = open(dir.path());
        assert!(durable.recover().unwrap().is_empty());
        let mut q = queue_of(&durable);
        let now = tokio::time::Instant::now();
        q.schedule(now + Duration::from_millis(50), soon.clone());
        q.schedule(now + Duration::from_secs(3600), later.clone());
        assert_eq!(q.len(), 2);
        q.flush().await;
        // Dropped without anything else: as far as the store knows, a crash.
    }
    tokio::time::sleep(Duration::from_millis(120)).await;

    let (store, durable) = open(dir.path());
    let recovered: BTreeSet<String> = durable
        .recover()
        .unwrap()
        .iter()
        .map(|id| id.to_string())
        .collect();
    assert_eq!(recovered, ["order-1", "order-2"].map(String::from).into());
    let mut q = queue_of(&durable);
    assert_eq!(q.len(), 2);
    let now = tokio::time::Instant::now();
    let fired = q.pop_due(now).expect("the overdue retry fires at once");
    same_but_at(&fired, &soon);
    assert!(q.pop_due(now).is_none(), "the other is not due");
    let due = q.next_due().unwrap();
    let left = due - now;
    assert!(
        left > Duration::from_secs(3590) && left <= Duration::from_secs(3600),
        "{left:?}"
    );

    // The row stays until the fate is recorded (by the spout task, through the seams).
    assert_eq!(store.scheduled().unwrap().len(), 2);
    durable
        .seams(FixedPolicy::default())
        .acked
        .acked(&fired, Timestamp::from_millis(5));
    durable.journal().flush().await;
    assert_eq!(scheduled_ids(&store), ["order-2"]);
    assert_eq!(fate_of(&store, "order-1"), Some(Fate::Acked));
    // The far retry kept its metadata too.
    let row = &store.retries(&[MessageId::from("order-2")]).unwrap()[0];
    same_but_at(&row.message, &later);
    assert_eq!(row.message.retry.attempt, 4);
    let last = row.message.retry.last_failure().unwrap();
    assert_eq!(last.rule.as_str(), "payment-processing");
    assert_eq!(last.version, version());
    assert_eq!(row.message.retry.last_delay(), Duration::from_secs(3600));
}

/// With `record_every_ack: false`, an acked fate is written only to drop a retry row: a row
/// recovered from the last run, or one the journal wrote. A retry settled while the journal
/// still held it leaves nothing in the store.
#[tokio::test]
async fn without_a_fate_for_every_ack_only_rows_that_reached_the_store_are_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let options = DurableOptions {
        journal: JournalOptions {
            record_every_ack: false,
            // Held until a flush: what is moot does not depend on timing.
            hold: Duration::from_secs(3600),
            ..JournalOptions::default()
        },
        ..DurableOptions::default()
    };
    let open = |dir: &Path| open_with(dir, options.clone());
    let hour = Duration::from_secs(3600);
    {
        let (_, durable) = open(dir.path());
        durable.recover().unwrap();
        let mut q = queue_of(&durable);
        q.schedule(
            tokio::time::Instant::now() + hour,
            failed("recovered", 1, hour),
        );
        q.flush().await;
    }
    let (store, durable) = open(dir.path());
    assert_eq!(durable.recover().unwrap().len(), 1);
    let mut q = queue_of(&durable);
    let now = tokio::time::Instant::now();
    q.schedule(now, failed("quick", 1, Duration::ZERO));
    q.schedule(now + hour, failed("written", 1, hour));
    q.flush().await; // writes what the journal holds: "quick" and "written"
    q.schedule(now, failed("held", 2, Duration::ZERO));
    // The spout task records each acked fate through the seams.
    let acked = durable.seams(FixedPolicy::default()).acked;
    for id in ["recovered", "written", "held", "never-failed"] {
        acked.acked(
            &Message::new(id, "PAYMENT", "{}"),
            Timestamp::from_millis(5),
        );
    }
    durable.journal().flush().await;

    let fate = |id: &str| fate_of(&store, id);
    assert_eq!(fate("recovered"), Some(Fate::Acked));
    assert_eq!(fate("written"), Some(Fate::Acked));
    assert_eq!(fate("held"), None, "settled while held: nothing written");
    assert_eq!(fate("never-failed"), None);
    assert_eq!(
        scheduled_ids(&store),
        ["quick"],
        "only the retry still waiting keeps its row"
    );
    assert_eq!(
        durable.journal().stats().moot,
        3,
        "held#2, its fate, and the fate of never-failed (now queued to the journal, which \
         finds it moot)"
    );
}

/// An operator may replay a dead letter as soon as it is committed, before the sink's task
/// runs again: the replay's row must still be known, and dropped when the message is acked.
#[tokio::test]
async fn a_replay_right_after_the_letter_commits_is_dropped_on_its_ack() {
    use rebound_runtime::fate::{DeadLetter, Label};
    use std::task::Poll;
    let dir = tempfile::tempdir().unwrap();
    let (store, durable) = open_with(
        dir.path(),
        DurableOptions {
            journal: JournalOptions {
                record_every_ack: false,
                hold: Duration::from_secs(3600),
                ..JournalOptions::default()
            },
            ..DurableOptions::default()
        },
    );
    durable.recover().unwrap();
    let seams = durable.seams(FixedPolicy::default());
    let mut q = (seams.retry_queues)(&TaskInfo {
        component: "orders",
        index: 0,
        parallelism: 1,
    });
    let mut message = Message::new("m", "PAYMENT", "{}");
    message.retry.attempt = 4;
    message.retry.first_delivery = Some(Timestamp::now());
    let letter = DeadLetter {
        message,
        failure: Failure::new("PAY_PROCESSING", "still processing"),
        label: Label::from("L1"),
        reason: GiveUpReason::MaxRetries,
        rule: RuleRef::Rule("payment-processing".into()),
        version: version(),
        at: Timestamp::now(),
    };
    let mut storing = seams.dead_letters.store(std::slice::from_ref(&letter));
    // Its first poll queues the letter; the sink then waits for the commit.
    let first = std::future::poll_fn(|cx| Poll::Ready(storing.as_mut().poll(cx))).await;
    assert!(first.is_pending());
    for _ in 0..500 {
        if fate_of(&store, "m").is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(fate_of(&store, "m"), Some(Fate::DeadLettered));
    // Replayed, delivered, failed again and rescheduled: all before the sink's task resumes.
    blocking_replay(&durable, "m", "alice", "fixed upstream").await;
    let now = tokio::time::Instant::now();
    let replayed = q.pop_due(now).expect("the replay is due at once");
    q.schedule(now, failed("m", 1, Duration::ZERO));
    storing.await.unwrap();
    seams.acked.acked(&replayed, Timestamp::from_millis(5));
    durable.journal().flush().await;
    assert!(
        scheduled_ids(&store).is_empty(),
        "the replay's row is dropped"
    );
    assert_eq!(fate_of(&store, "m"), Some(Fate::Acked));
}

#[tokio::test]
async fn a_message_whose_fate_is_known_is_not_handed_out_again() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(SqliteStore::open(dir.path()).unwrap());
    let id = |n: u64| format!("m-{n}");
    // Before the crash: 1..=2 committed; 3 and 5 acked above the mark (with their offsets, as
    // a durable source's are); 4 in flight; 7 waits in the retry queue; positions up to 10
    // reserved.
    let t = Timestamp::from_millis(1);
    let acked_at = |n: u64| WriteOp::Acked {
        id: MessageId::from(id(n)),
        at: t,
        offset: Some(Offset {
            source: "src".into(),
            position: n,
        }),
    };
    let position = |source: &str, position| WriteOp::Position {
        source: source.into(),
        position,
        at: t,
    };
    store
        .apply(&[
            acked_at(3),
            acked_at(5),
            position("src", 2),
            position("src.reserved", 10),
        ])
        .unwrap();

    let journal = Journal::spawn(store.clone(), JournalOptions::default());
    let time: Arc<dyn TimeSource> = Arc::new(TokioTime::new());
    let mut pos =
        SourcePosition::load(store.as_ref(), journal.clone(), time, "src", id, [7], false).unwrap();
    // 3 already has its fate: the mark moves over it at once.
    assert_eq!(pos.committed(), 3);
    assert_eq!(pos.known_at_start(), 2);
    let skipped: Vec<u64> = (1..=12).filter(|&n| pos.should_skip(n)).collect();
    assert_eq!(skipped, [1, 2, 3, 5, 7]);

    // 4 finishes: the mark moves over the known 5 to 5, and is written at sync.
    assert!(pos.settled(4));
    assert_eq!(pos.committed(), 5);
    pos.sync();
    journal.flush().await;
    assert_eq!(store.position("src").unwrap(), Some(5));
    // The position is the record of the fates at or below it: theirs are pruned.
    assert_eq!(fate_of(&store, &id(3)), None);
    assert_eq!(fate_of(&store, &id(5)), None);
    // A replayed message settling again does not move anything.
    assert!(!pos.settled(2));
    // Handing out beyond the reservation reserves further ahead, before anything else.
    pos.handing_out(11);
    journal.flush().await;
    assert!(store.position("src.reserved").unwrap().unwrap() > 11);
}

/// Hands out `n` messages, then says `Exhausted`; records the fates it is told. (It records
/// nothing in the store: the spout task does.)
struct Source {
    next: u64,
    n: u64,
    acked: Arc<Mutex<Vec<String>>>,
    dead: Arc<Mutex<Vec<String>>>,
}

impl Spout for Source {
    fn next(&mut self) -> NextMessage {
        if self.next == self.n {
            return NextMessage::Exhausted;
        }
        self.next += 1;
        NextMessage::Ready(Message::new(format!("m-{}", self.next), "ORDER", "x"))
    }
    fn ack(&mut self, id: &MessageId) {
        self.acked.lock().unwrap().push(id.to_string());
    }
    fn dead_lettered(&mut self, id: &MessageId) {
        self.dead.lock().unwrap().push(id.to_string());
    }
}

/// Fails with `code` while `failing` is set.
struct Flaky {
    failing: Arc<AtomicBool>,
    code: &'static str,
}

impl Bolt for Flaky {
    fn execute(&mut self, _: &Tuple, _: &mut Emitter<'_>) -> Result<(), Failure> {
        if self.failing.load(Ordering::SeqCst) {
            Err(Failure::new(self.code, "injected"))
        } else {
            Ok(())
        }
    }
}

type Fated = Arc<Mutex<Vec<String>>>;

fn topology(n: u64, failing: Arc<AtomicBool>) -> (Topology, Fated, Fated) {
    let acked: Fated = Arc::default();
    let dead: Fated = Arc::default();
    let (a, d) = (acked.clone(), dead.clone());
    let mut b = TopologyBuilder::new("t");
    b.spout("src", 1, move |_| Source {
        next: 0,
        n,
        acked: a.clone(),
        dead: d.clone(),
    });
    b.bolt("work", 1, move |_| Flaky {
        failing: failing.clone(),
        code: "POISON",
    })
    .shuffle("src");
    (b.build().unwrap(), acked, dead)
}

pub(crate) fn give_up_poison() -> FixedPolicy {
    FixedPolicy {
        give_up_codes: ["POISON".to_string()].into(),
        label: "L3".into(),
        ..FixedPolicy::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_spout_hears_dead_lettered_only_after_the_commit() {
    let dir = tempfile::tempdir().unwrap();
    let (store, durable) = open(dir.path());
    // Another connection holds the write lock: the journal's commit has to wait for it.
    let blocker = rusqlite::Connection::open(store.path()).unwrap();
    blocker.execute_batch("BEGIN IMMEDIATE").unwrap();

    let (t, acked, dead) = topology(20, Arc::new(AtomicBool::new(true)));
    let running = t.start(durable.seams(give_up_poison()));
    // Wait until all 20 failed (and were decided), then a little more.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while running.stats().failures_by_code.get("POISON") != Some(&20)
        && tokio::time::Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        dead.lock().unwrap().is_empty(),
        "told dead_lettered before the letters were committed"
    );
    assert!(acked.lock().unwrap().is_empty());
    assert_eq!(
        running.stats().pending,
        20,
        "dead letters being stored count as pending"
    );

    blocker.execute_batch("ROLLBACK").unwrap();
    tokio::time::timeout(Duration::from_secs(20), running.wait_quiescent())
        .await
        .expect("the letters are stored once the lock is gone");
    let told = dead.lock().unwrap().clone();
    assert_eq!(told.len(), 20);
    for id in &told {
        // Committed by the time the spout heard of it.
        let letter = store
            .dead_letter(&MessageId::from(id.as_str()))
            .unwrap()
            .expect("stored");
        assert_eq!(letter.letter.label.as_str(), "L3");
        assert_eq!(letter.letter.reason, GiveUpReason::GiveUp);
        assert_eq!(fate_of(&store, id), Some(Fate::DeadLettered));
    }
    running.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replayed_dead_letter_re_enters_the_live_topology() {
    let dir = tempfile::tempdir().unwrap();
    let (store, durable) = open(dir.path());
    let failing = Arc::new(AtomicBool::new(true));
    let (t, acked, dead) = topology(5, failing.clone());
    let running = t.start(durable.seams(give_up_poison()));
    tokio::time::timeout(Duration::from_secs(20), running.wait_quiescent())
        .await
        .unwrap();
    assert_eq!(dead.lock().unwrap().len(), 5);

    // The spout is exhausted and idle: only the replay's notification can wake it.
    failing.store(false, Ordering::SeqCst);
    let retry = blocking_replay(&durable, "m-3", "alice", "the poison was fixed").await;
    assert_eq!(retry.message.retry.attempt, 0);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while acked.lock().unwrap().is_empty() && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(*acked.lock().unwrap(), ["m-3"]);
    running.wait_quiescent().await;
    running.shutdown(Duration::from_secs(5)).await;
    durable.journal().flush().await;

    let id = MessageId::from("m-3");
    assert_eq!(
        fate_of(&store, "m-3"),
        Some(Fate::Acked),
        "the new fate (recorded by the spout task) replaced the old"
    );
    let letter = store.dead_letter(&id).unwrap().unwrap();
    assert_eq!(letter.status, DeadLetterStatus::Replayed);
    assert!(store.scheduled().unwrap().is_empty());
    let audit = store
        .audit_log(&store::AuditFilter {
            message_id: Some(id),
            ..store::AuditFilter::default()
        })
        .unwrap();
    assert_eq!(audit.items.len(), 1);
    assert_eq!(audit.items[0].operator, "alice");
}

#[tokio::test]
async fn every_dead_letter_observer_is_told_of_a_stored_letter_in_the_order_added() {
    use rebound_runtime::fate::{DeadLetter, Label};
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(SqliteStore::open(dir.path()).unwrap());
    let durable = Durable::new(
        store.clone(),
        Arc::new(TokioTime::new()),
        DurableOptions::default(),
    );
    let told: Arc<Mutex<Vec<String>>> = Arc::default();
    for who in ["alerts", "publisher"] {
        let told = told.clone();
        durable.on_dead_letters(move |letters| {
            for l in letters {
                told.lock().unwrap().push(format!("{who} {}", l.id()));
            }
        });
    }
    durable.recover().unwrap();
    let seams = durable.seams(FixedPolicy::default());
    let letter = DeadLetter {
        message: Message::new("m", "PAYMENT", "{}"),
        failure: Failure::new("PAY_FAILED", "declined"),
        label: Label::from("L1"),
        reason: GiveUpReason::MaxRetries,
        rule: RuleRef::Defaults,
        version: version(),
        at: Timestamp::now(),
    };
    seams
        .dead_letters
        .store(std::slice::from_ref(&letter))
        .await
        .unwrap();
    assert_eq!(*told.lock().unwrap(), ["alerts m", "publisher m"]);
    assert_eq!(fate_of(&store, "m"), Some(Fate::DeadLettered));
}
