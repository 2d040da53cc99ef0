//! The bundled run's records in the shared store (`rebound::pipeline::fleet::run`): the first
//! node's parameters win, and the run's end is recorded once.

use rebound::pipeline::fleet::effects;
use rebound::pipeline::fleet::run::{self, Difference};
use rebound_runtime::time::Timestamp;
use rebound_store_redis::TestServer;

use crate::open as store;

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

    let recorded = run::record(&first, &params("1000", "60", "7")).unwrap();
    assert!(recorded.recorded_now);
    assert_eq!(recorded.get("messages"), Some("1000"));
    assert!(recorded.differences(&params("1000", "60", "7")).is_empty());

    let seen = run::record(&later, &params("2000", "60", "8")).unwrap();
    assert!(!seen.recorded_now, "the first node's record stands");
    assert_eq!(seen.params, recorded.params);
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
        run::record(&store(&server, "run-2"), &params("5", "1", "1"))
            .unwrap()
            .recorded_now
    );
}

#[test]
fn the_first_finish_wins() {
    let server = TestServer::start();
    let s = store(&server, "run-finish");
    assert_eq!(run::finished(&s).unwrap(), None);
    let t1 = Timestamp::from_millis(1_700_000_000_123);
    assert_eq!(run::finish(&s, t1).unwrap(), t1);
    assert_eq!(
        run::finish(&s, Timestamp::from_millis(1_700_000_999_000)).unwrap(),
        t1
    );
    assert_eq!(run::finished(&s).unwrap(), Some(t1));
}

#[test]
fn the_runs_records_stay_in_their_namespace() {
    let server = TestServer::start();
    for ns in ["rec-a", "rec-b"] {
        let s = store(&server, ns);
        run::record(&s, &params("10", "1", "1")).unwrap();
        run::finish(&s, Timestamp::from_millis(5)).unwrap();
        effects::put(&s, "orders", &["o-1", "o-1"]).unwrap();
    }
    let mut c = server.client();
    let mut keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut c).expect("KEYS");
    keys.sort();
    let expected: Vec<String> = ["rec-a", "rec-b"]
        .iter()
        .flat_map(|ns| {
            ["effects-dups", "effects:orders", "run", "run:finished"]
                .map(|k| format!("{{{ns}}}:{k}"))
        })
        .collect();
    assert_eq!(
        keys, expected,
        "the keys the product documents, in each namespace"
    );
}
