//! The bundled pipeline through its library API (`pipeline::start` → `RunningPipeline`): a run
//! stopped half-way and resumed does not process again what already has a fate; a replay
//! through the handle re-enters the live pipeline; a finished run only reports.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rebound::pipeline::{self, Faults, PipelineDb, PipelineOptions};
use rebound_engine::PolicyHandle;
use rebound_runtime::policy::TimeScale;
use rebound_runtime::store::{DeadLetterFilter, DeadLetterStatus};

fn shipped() -> Arc<PolicyHandle> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("rules");
    Arc::new(PolicyHandle::new(
        rebound_engine::load_dir(&dir).unwrap().unwrap(),
    ))
}

fn options(data: &Path, messages: u64, faults: Faults) -> PipelineOptions {
    let mut o = PipelineOptions::new(shipped(), data);
    o.messages = Some(messages);
    o.time_scale = TimeScale::new(1000.0).unwrap();
    o.faults = faults;
    o
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_run_does_not_process_again_what_has_a_fate() {
    let dir = tempfile::tempdir().unwrap();
    // Only inventory that never arrives: those orders hold the source position back through
    // their retries, while the orders behind them finish. Nothing else fails, nothing is slow:
    // any order written twice would be a message processed again.
    let faults = Faults {
        out_of_stock: 1.0,
        ..Faults::none()
    };
    let n = 4_000;
    let first = pipeline::start(options(dir.path(), n, faults.clone()))
        .await
        .unwrap();
    let handle = first.handle();
    tokio::time::timeout(Duration::from_secs(30), async {
        while handle.progress().settled < n / 2 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("progress");
    let report = first.stop(Duration::from_secs(10)).await.unwrap();
    assert!(!report.complete, "{report:?}");
    let store = handle.store();
    let position = store.position(pipeline::orders::SOURCE).unwrap().unwrap();
    let settled = report.acked + report.dead_lettered;
    assert!(
        settled > position,
        "fates above the position (position {position}, settled {settled})"
    );
    drop(handle);
    drop(store);
    // The data directory is free once the last handle on the first pipeline is gone; on a
    // loaded machine a task of the first may finish dropping its share a moment later.
    assert!(
        tokio::time::timeout(Duration::from_secs(5), async {
            while rebound::pipeline::DataDirLock::acquire(dir.path()).is_err() {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await
        .is_ok(),
        "the first pipeline still holds the data directory"
    );

    let second = pipeline::start(options(dir.path(), n, faults))
        .await
        .unwrap();
    assert!(!second.already_finished());
    tokio::time::timeout(Duration::from_secs(60), second.finished())
        .await
        .expect("the resumed run finishes");
    let report = second.stop(Duration::from_secs(10)).await.unwrap();
    assert!(report.complete, "{report:?}");
    assert_eq!(report.lost, 0);
    assert_eq!(report.acked + report.dead_lettered, n);
    assert_eq!(report.sessions, 2);
    assert_eq!(
        report.duplicates, 0,
        "an order with a known fate was processed again"
    );
    let db = PipelineDb::open_read_only(dir.path()).unwrap();
    assert_eq!(db.orders_written().unwrap(), report.acked);
    // Every dead letter is an inventory order whose stock never came.
    assert_eq!(
        report.dead_letters_by_label.keys().collect::<Vec<_>>(),
        ["L1"]
    );
    assert_eq!(
        report.retries_by_rule.keys().collect::<Vec<_>>(),
        ["stock-insufficient"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replay_re_enters_the_running_pipeline_and_a_finished_run_only_reports() {
    let dir = tempfile::tempdir().unwrap();
    let faults = Faults {
        malformed: 0.05,
        ..Faults::none()
    };
    let n = 400;
    let running = pipeline::start(options(dir.path(), n, faults.clone()))
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(30), running.finished())
        .await
        .unwrap();
    let store = running.store();
    let letters = store
        .dead_letters(&DeadLetterFilter::default())
        .unwrap()
        .items;
    assert!(!letters.is_empty());
    let id = letters[0].letter.message.id.clone();

    // Still running (quiescent): the replay goes into the live retry queue. The payload is
    // still malformed, so it is dead-lettered again: a second letter, the first one replayed.
    let h = running.handle();
    let replay_id = id.clone();
    tokio::task::spawn_blocking(move || h.replay(replay_id.as_str(), "bob", "retry after the fix"))
        .await
        .unwrap()
        .unwrap();
    let history = || {
        store
            .dead_letters(&DeadLetterFilter {
                limit: 1000,
                ..DeadLetterFilter::default()
            })
            .unwrap()
            .items
            .into_iter()
            .filter(|d| d.letter.message.id == id)
            .map(|d| d.status)
            .collect::<Vec<_>>()
    };
    tokio::time::timeout(Duration::from_secs(10), async {
        while history().len() < 2 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the replayed message was delivered again");
    assert_eq!(
        history(),
        [DeadLetterStatus::Dead, DeadLetterStatus::Replayed]
    );
    running.finished().await;
    let report = running.stop(Duration::from_secs(5)).await.unwrap();
    assert!(report.complete);
    assert_eq!(report.lost, 0);
    assert_eq!(report.acked + report.dead_lettered, n);

    // Started again: nothing runs, the same report comes back.
    let again = pipeline::start(options(dir.path(), n, faults))
        .await
        .unwrap();
    assert!(again.already_finished());
    again.finished().await;
    // The same report, what the budgets and breakers did included.
    assert_eq!(again.stop(Duration::from_secs(1)).await.unwrap(), report);
}
