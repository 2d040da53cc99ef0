//! The bundled run: the first node's parameters win, and the run's end is recorded once.

use rebound_runtime::time::Timestamp;
use rebound_store_redis::TestServer;
use rebound_store_redis::fleet::Difference;

use crate::store;

fn params(messages: &str, time_scale: &str, seed: &str) -> Vec<(String, String)> {
    vec![
        ("messages".into(), messages.into()),
        ("time_scale".into(), time_scale.into()),
        ("seed".into(), seed.into()),
    ]
}

#[test]
fn the_first_node_records_the_run_and_later_ones_learn_what_differs() {
    let server = TestServer::start();
    let first = store(&server, "run");
    let later = store(&server, "run");

    let run = first.record_run(&params("1000", "60", "7")).unwrap();
    assert!(run.recorded_now);
    assert_eq!(run.get("messages"), Some("1000"));
    assert!(run.differences(&params("1000", "60", "7")).is_empty());

    let seen = later.record_run(&params("2000", "60", "8")).unwrap();
    assert!(!seen.recorded_now, "the first node's record stands");
    assert_eq!(seen.params, run.params);
    assert_eq!(
        seen.differences(&params("2000", "60", "8")),
        [
            Difference {
                name: "messages".into(),
                recorded: Some("1000".into()),
                asked: Some("2000".into()),
            },
            Difference {
                name: "seed".into(),
                recorded: Some("7".into()),
                asked: Some("8".into()),
            },
        ]
    );
    let fewer = vec![("messages".to_owned(), "1000".to_owned())];
    let names: Vec<String> = seen
        .differences(&fewer)
        .into_iter()
        .map(|d| d.name)
        .collect();
    assert_eq!(
        names,
        ["seed", "time_scale"],
        "a parameter only the record names differs"
    );
    assert_eq!(
        seen.differences(&fewer)[0].to_string(),
        "seed: the run was recorded with 7, this node was asked for nothing"
    );

    // Another namespace is another run.
    assert!(
        store(&server, "run-2")
            .record_run(&params("5", "1", "1"))
            .unwrap()
            .recorded_now
    );
}

#[test]
fn the_first_finish_wins() {
    let server = TestServer::start();
    let s = store(&server, "run-finish");
    assert_eq!(s.run_finished().unwrap(), None);
    let t1 = Timestamp::from_millis(1_700_000_000_123);
    assert_eq!(s.finish_run(t1).unwrap(), t1);
    assert_eq!(
        s.finish_run(Timestamp::from_millis(1_700_000_999_000))
            .unwrap(),
        t1
    );
    assert_eq!(s.run_finished().unwrap(), Some(t1));
}
