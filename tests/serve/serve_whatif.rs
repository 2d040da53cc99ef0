//! `POST /v1/rules/whatif` over a running `rebound serve` whose store holds a known decision
//! log: the set in force against its own log, a candidate that changes one rule's delay, an
//! invalid candidate (422, as validate), an example replayed with `POST /v1/decide`, and
//! `rebound whatif` reading the same log while serve holds the data directory.

use super::support::*;
use super::whatif_log::*;
use serde_json::{Value, json};

#[test]
fn whatif_decides_the_log_of_a_running_serve_again() {
    let log = log_of(&failures_at(now_ms()), 1);
    let data = data_with(&log);
    let rules = candidate(None);
    let data_flag = data.path().to_str().unwrap();
    // One order in all (the pacer lets the first go): the log is almost only the known one.
    let server = Server::start(rules.path(), &["--data", data_flag, "--rate", "0"]);
    let version = server.version();

    let ask = |files| {
        let r = server
            .post("/v1/rules/whatif")
            .json(&json!({ "files": files }))
            .send()
            .unwrap();
        status_and_json(r)
    };
    let (status, own) = ask(files_in(rules.path()));
    assert_eq!(status, 200, "{own}");
    assert_eq!(own["changed"], 0, "{own}");
    assert!(own["total"].as_u64().unwrap() >= log.len() as u64, "{own}");
    assert_eq!(own["version"], version.as_str());
    assert_eq!(own["candidate"], version.as_str());

    let slower = candidate(Some(SLOWER_PROCESSING));
    let (status, answer) = ask(files_in(slower.path()));
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["version"], version.as_str());
    assert_ne!(answer["candidate"], version.as_str());
    let by = answer["by"].as_array().unwrap();
    assert_eq!(by.len(), 1, "{answer}");
    let verdict = json!({"rule": "payment-processing", "action": "retry", "label": null});
    assert_eq!((&by[0]["old"], &by[0]["new"]), (&verdict, &verdict));
    assert!(by[0]["count"].as_u64().unwrap() >= 3, "{answer}");
    assert_eq!(by[0]["delay_ms"]["new"]["p50"], 250);

    // An example is a body of POST /v1/decide: the set in force decides it as logged.
    let example = &by[0]["examples"][0];
    let r = server.post("/v1/decide").json(example).send().unwrap();
    let (status, decided) = status_and_json(r);
    assert_eq!(status, 200, "{decided}");
    assert_eq!(decided["rule"], "payment-processing");
    assert_eq!(decided["delay_ms"], 100);

    let mut broken = files_in(slower.path());
    broken.insert(
        "00-defaults.yaml".into(),
        "version: 1\ndefaults:\n  retry: { max_retry: 3 }\n".into(),
    );
    let (status, body) = ask(broken);
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["errors"][0]["file"], "00-defaults.yaml", "{body}");
    assert_eq!(body["errors"][0]["line"], 3, "{body}");

    let (status, body) = ask(Default::default());
    assert_eq!(status, 400, "{body}");

    // The command reads the same log beside the running serve, without its lock.
    let out = rebound()
        .arg("whatif")
        .arg("--rules")
        .arg(slower.path())
        .args(["--data", data_flag, "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let cli: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(cli["total"].as_u64().unwrap() >= log.len() as u64, "{cli}");
    assert_eq!(cli["by"][0]["old"], verdict);
    assert!(
        server.stderr().lines().all(|l| !l.contains("ERROR")),
        "{}",
        server.stderr()
    );
}
