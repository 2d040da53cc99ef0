//! The dead-letter labels' actions in a program that embeds the runtime (`rules.md`,
//! "Dead-letter levels"): the framework's [`LetterKeeper`] redrives and expires by the labels
//! of the set in force, at most `max` redrives in a message's life, and [`labels::alerting`]
//! hands the letters whose label alerts to the embedding's sink. Time is a test's hand.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rebound_engine::PolicyHandle;
use rebound_engine::{Label, RuleRef, Version};
use rebound_runtime::durable::labels::{self, AlertSink, LetterKeeper, Sweep};
use rebound_runtime::durable::{Durable, DurableOptions};
use rebound_runtime::fate::{DeadLetter, GiveUpReason};
use rebound_runtime::policy::TimeScale;
use rebound_runtime::store::{DeadLetterStatus, SqliteStore, Store, WriteOp};
use rebound_runtime::time::{ManualTime, TimeSource, Timestamp};
use rebound_runtime::topology::{Failure, Message, MessageId};

fn rules() -> Arc<PolicyHandle> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/labels");
    let set = rebound_engine::load_dir(&dir).unwrap().unwrap();
    Arc::new(PolicyHandle::new(set))
}

fn letter(id: &str, label: &str, redrives: u32, at: Timestamp) -> DeadLetter {
    let mut message = Message::new(id, "PAYMENT", "{}");
    message.retry.attempt = 1;
    message.retry.first_delivery = Some(at);
    message.retry.redrives = redrives;
    DeadLetter {
        message,
        failure: Failure::new("GATEWAY_DOWN", "gave up"),
        label: Label::from(label),
        reason: GiveUpReason::MaxRetries,
        rule: RuleRef::Rule("payments".into()),
        version: Version::from_hash(1),
        at,
    }
}

fn status(store: &dyn Store, id: &str) -> DeadLetterStatus {
    store
        .dead_letter(&MessageId::from(id))
        .unwrap()
        .expect("a letter")
        .status
}

#[derive(Debug, Default)]
struct Told(Mutex<Vec<(String, String)>>);

impl AlertSink for Told {
    fn send(&self, receiver: &str, letter: &DeadLetter) {
        let id = letter.id().as_str().to_owned();
        self.0.lock().unwrap().push((receiver.to_owned(), id));
    }
}

#[test]
fn a_keeper_redrives_and_expires_by_the_labels_at_most_max_times() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(dir.path()).unwrap());
    let time = ManualTime::new(Timestamp::from_millis(1_700_000_000_000));
    let durable = Durable::new(
        store.clone(),
        Arc::new(time.clone()),
        DurableOptions::default(),
    );
    let keeper = LetterKeeper::new(durable, rules(), TimeScale::REAL);
    let now = time.wall();
    store
        .apply(&[
            WriteOp::DeadLetter(Box::new(letter("once", "L1", 0, now))),
            WriteOp::DeadLetter(Box::new(letter("again", "L1", 1, now))),
            WriteOp::DeadLetter(Box::new(letter("old", "L2", 0, now))),
        ])
        .unwrap();

    // Nothing is due yet: L1's letter waits for its 10 s; the one already redriven once does
    // not (max 1).
    let sweep = keeper.sweep().unwrap();
    assert_eq!(
        sweep,
        Sweep {
            redriven: 0,
            waiting: 1,
            expired: 0
        }
    );

    time.advance(Duration::from_secs(11));
    let sweep = keeper.sweep().unwrap();
    assert_eq!(
        sweep,
        Sweep {
            redriven: 1,
            waiting: 0,
            expired: 0
        }
    );
    assert_eq!(status(store.as_ref(), "once"), DeadLetterStatus::Replayed);
    assert_eq!(status(store.as_ref(), "again"), DeadLetterStatus::Dead);
    let retry = store.retries(&[MessageId::from("once")]).unwrap();
    assert_eq!(
        retry.len(),
        1,
        "the redrive is a fresh delivery in the store"
    );
    assert_eq!(retry[0].message.retry.redrives, 1);
    assert_eq!(keeper.redrives(), [("L1".to_owned(), 1)]);

    // L2's letter is overdue past its SLA, and expired past its minute (kept, not open).
    let counts = keeper.counts().unwrap();
    let l2 = counts
        .open
        .iter()
        .find(|o| o.label == "L2")
        .expect("L2 open");
    assert_eq!((l2.open, l2.overdue), (1, 0));
    time.advance(Duration::from_secs(30));
    let counts = keeper.counts().unwrap();
    let l2 = counts
        .open
        .iter()
        .find(|o| o.label == "L2")
        .expect("L2 open");
    assert_eq!((l2.open, l2.overdue), (1, 1));
    time.advance(Duration::from_secs(20));
    let sweep = keeper.sweep().unwrap();
    assert_eq!(sweep.expired, 1);
    assert_eq!(status(store.as_ref(), "old"), DeadLetterStatus::Expired);
    assert_eq!(keeper.sweep().unwrap(), Sweep::default(), "nothing twice");
}

#[test]
fn only_the_letters_whose_label_alerts_reach_the_sink_with_its_receiver() {
    let told = Arc::new(Told::default());
    let observe = labels::alerting(rules(), told.clone());
    let now = Timestamp::from_millis(1_700_000_000_000);
    observe(&[
        letter("a", "L1", 0, now),
        letter("b", "L2", 0, now),
        letter("c", "NOT_A_LABEL", 0, now),
    ]);
    assert_eq!(
        *told.0.lock().unwrap(),
        [("team".to_owned(), "a".to_owned())]
    );
}
