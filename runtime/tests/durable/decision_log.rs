//! The decision log through the journal (`release.md`): decisions the rules make reach the
//! store on their own, with no other write to carry them, in the order they were made; a
//! flush takes every decision made before it, those the log's thread has not written yet
//! included.

use std::sync::Arc;
use std::time::Duration;

use rebound_engine::{FailureContext, PolicyHandle, SourceFile, compile};
use rebound_runtime::durable::{Journal, JournalOptions};
use rebound_runtime::fate::FailurePolicy;
use rebound_runtime::policy::{RulePolicy, TimeScale};
use rebound_runtime::release::{LogOptions, Release};
use rebound_runtime::store::{DecisionFilter, SqliteStore, Store};
use rebound_runtime::topology::Message;

const RULES: &str = "version: 1
defaults:
  retry: { max_retries: 5, backoff: { fixed: 1s } }
  dead_letter: L2
";

fn policy(release: &Arc<Release>) -> RulePolicy {
    let set = compile(vec![SourceFile::new("a.yaml", "a.yaml", RULES)]).unwrap();
    RulePolicy::new(Arc::new(PolicyHandle::new(set)), TimeScale::REAL)
        .with_release(Arc::clone(release))
}

fn decide(p: &RulePolicy, n: u64) {
    let m = Message::new(format!("m-{n}"), "ORDER", "x");
    let mut ctx = FailureContext::new(&m.biz, "TIMEOUT", 1);
    ctx.now = 1_700_000_000_000 + n;
    p.decide(&ctx, &m);
}

fn logged_ids(store: &SqliteStore) -> Vec<String> {
    store
        .decisions(&DecisionFilter::default())
        .unwrap()
        .into_iter()
        .map(|d| d.id)
        .collect()
}

#[tokio::test]
async fn decisions_reach_the_store_on_their_own_and_a_flush_takes_every_one() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(SqliteStore::open(dir.path()).unwrap());
    let journal = Journal::spawn(store.clone(), JournalOptions::default());
    let release = Release::new(LogOptions::default());
    journal.log_decisions(release.shared_log());
    let p = policy(&release);
    for n in 0..50 {
        decide(&p, n);
    }
    // Nothing else is written: the journal writes the log's pages as the thread makes them.
    let want: Vec<String> = (0..50).map(|n| format!("m-{n}")).collect();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while logged_ids(&store) != want {
        assert!(
            tokio::time::Instant::now() < deadline,
            "after 10 s the store holds {:?}",
            logged_ids(&store)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Decided just before a flush: in the store once it returns.
    for n in 50..5_000 {
        decide(&p, n);
    }
    journal.flush().await;
    let want: Vec<String> = (0..5_000).map(|n| format!("m-{n}")).collect();
    assert_eq!(logged_ids(&store), want);
    assert_eq!(release.log().recorded(), 5_000);
    assert_eq!(release.log().dropped(), 0);
}
