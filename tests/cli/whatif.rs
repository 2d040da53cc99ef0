//! `rebound whatif` through the real binary, over a data directory whose store holds a known
//! decision log (written as the runtime writes it, `WriteOp::LogDecisions`, by the shipped
//! rules): the shipped set against its own log, a candidate that changes one rule's delay, one
//! that changes an action, `--fail-on-change`, `--since`, an invalid candidate, a missing data
//! directory, an empty log, a Redis store, and the printed replay command run as printed.

use super::whatif_log::*;
use assert_cmd::Command;
use predicates::prelude::*;
use rebound_runtime::store::{Store, WriteOp};
use serde_json::Value;
use std::path::Path;

fn rebound() -> Command {
    Command::new(env!("CARGO_BIN_EXE_rebound"))
}

fn whatif_json(rules: &Path, data: &Path, extra: &[&str]) -> Value {
    let out = rebound()
        .arg("whatif")
        .arg("--rules")
        .arg(rules)
        .arg("--data")
        .arg(data)
        .arg("--json")
        .args(extra)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("one JSON document")
}

fn version_of(rules: &Path) -> String {
    rebound_engine::load_dir(rules)
        .unwrap()
        .unwrap()
        .version()
        .to_string()
}

#[test]
fn the_shipped_rules_against_their_own_log_change_nothing() {
    let log = log_of(&failures_at(now_ms()), 1);
    let data = data_with(&log);
    let answer = whatif_json(&root(SHIPPED), data.path(), &["--fail-on-change"]);
    assert_eq!(answer["total"], log.len());
    assert_eq!(answer["changed"], 0);
    assert_eq!(answer["by"], serde_json::json!([]));
    let version = version_of(&root(SHIPPED));
    assert_eq!(answer["version"], version.as_str());
    assert_eq!(answer["candidate"], version.as_str());
    // `--store sqlite` names the embedded store of --data, as for run and serve.
    let again = whatif_json(&root(SHIPPED), data.path(), &["--store", "sqlite"]);
    assert_eq!(again, answer);
}

#[test]
fn a_changed_delay_shows_exactly_that_rules_decisions_with_the_right_count() {
    let log = log_of(&failures_at(now_ms()), 1);
    let data = data_with(&log);
    let rules = candidate(Some(SLOWER_PROCESSING));
    let answer = whatif_json(rules.path(), data.path(), &[]);
    let expected = log
        .iter()
        .filter(|d| d.outcome.rule == "payment-processing" && d.outcome.action == "retry")
        .count();
    assert_eq!(expected, 3, "attempts 1 to 3 retry");
    assert_eq!(answer["changed"], expected);
    let by = answer["by"].as_array().unwrap();
    assert_eq!(by.len(), 1, "{answer}");
    let row = &by[0];
    let verdict =
        serde_json::json!({"rule": "payment-processing", "action": "retry", "label": null});
    assert_eq!(row["old"], verdict);
    assert_eq!(row["new"], verdict);
    assert_eq!(row["count"], expected);
    assert_eq!(
        row["delay_ms"],
        serde_json::json!({"old": {"p50": 100, "p99": 100}, "new": {"p50": 250, "p99": 250}})
    );
    let examples = row["examples"].as_array().unwrap();
    assert_eq!(examples.len(), expected);
    assert!(examples[0]["id"].as_str().unwrap().starts_with("order-"));
    assert_eq!(answer["candidate"], version_of(rules.path()).as_str());
}

#[test]
fn fail_on_change_exits_one_only_when_something_changed() {
    let data = data_with(&log_of(&failures_at(now_ms()), 1));
    let rules = candidate(Some(PANIC_GIVES_UP));
    let run = |extra: &[&str]| {
        rebound()
            .arg("whatif")
            .arg("--rules")
            .arg(rules.path())
            .arg("--data")
            .arg(data.path())
            .args(extra)
            .assert()
    };
    run(&[])
        .success()
        .stdout(predicate::str::contains("changed: 1\n"));
    run(&["--fail-on-change"])
        .code(1)
        .stdout(predicate::str::contains("changed: 1\n"));
    run(&["--fail-on-change", "--json"])
        .code(1)
        .stdout(predicate::str::contains("\"changed\":1"));
}

#[test]
fn the_table_shows_each_row_with_a_replay_command_that_replays_it() {
    let data = data_with(&log_of(&failures_at(now_ms()), 1));
    let rules = candidate(Some(PANIC_GIVES_UP));
    let out = rebound()
        .arg("whatif")
        .arg("--rules")
        .arg(rules.path())
        .arg("--data")
        .arg(data.path())
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.starts_with("total: 48 decisions"), "{text}");
    assert!(text.contains("\nchanged: 1\n"), "{text}");
    let row = text
        .lines()
        .find(|l| l.contains("panic → panic"))
        .unwrap_or_else(|| panic!("no row in {text}"));
    assert!(row.contains("retry → dead_letter"), "{row}");
    assert!(row.contains("- → L3"), "{row}");
    assert!(row.contains("5000ms/5000ms → -/-"), "{row}");
    let replay = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("replay: "))
        .unwrap_or_else(|| panic!("no replay line in {text}"));
    // The words need no shell here: the temp path and the fields have no spaces.
    let words: Vec<&str> = replay.split(' ').collect();
    assert_eq!(&words[..2], ["rebound", "explain"], "{replay}");
    assert!(replay.contains("--seed "), "{replay}");
    let out = rebound().args(&words[1..]).arg("--json").output().unwrap();
    assert!(out.status.success(), "{replay}: {out:?}");
    let explained: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(explained["decision"]["rule"], "panic");
    assert_eq!(explained["decision"]["action"], "dead_letter");
}

#[test]
fn since_counts_only_the_recent_decisions() {
    let now = now_ms();
    let mut log = log_of(&failures_at(now - 2 * 3_600_000), 1);
    let recent = log_of(&failures_at(now - 60_000), 1000);
    log.extend(recent.iter().cloned());
    let data = data_with(&log);
    let all = whatif_json(&root(SHIPPED), data.path(), &[]);
    assert_eq!(all["total"], log.len());
    let hour = whatif_json(&root(SHIPPED), data.path(), &["--since", "1h"]);
    assert_eq!(hour["total"], recent.len());
}

#[test]
fn an_invalid_candidate_exits_one_with_file_line_col_diagnostics() {
    let data = data_with(&log_of(&failures_at(now_ms()), 1));
    let rules = candidate(None);
    let file = rules.path().join("00-defaults.yaml");
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&file, text.replace("max_retries: 3", "max_retry: 3")).unwrap();
    let expected = format!("{}:18:5: error: unknown field 'max_retry'", file.display());
    rebound()
        .arg("whatif")
        .arg("--rules")
        .arg(rules.path())
        .arg("--data")
        .arg(data.path())
        .assert()
        .code(1)
        .stderr(predicate::str::contains(expected));
}

#[test]
fn a_missing_data_directory_or_store_exits_two_and_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nowhere");
    rebound()
        .arg("whatif")
        .arg("--data")
        .arg(&missing)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .assert()
        .code(2)
        .stderr(predicate::str::contains("does not exist"));
    assert!(!missing.exists());
    rebound()
        .arg("whatif")
        .arg("--data")
        .arg(dir.path())
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .assert()
        .code(2)
        .stderr(predicate::str::contains("holds no store (rebound.db)"));
    assert!(!dir.path().join("rebound.db").exists());
}

#[test]
fn bad_flags_exit_two() {
    for args in [
        vec!["--since", "soon"],
        vec!["--store", "mysql://x"],
        vec!["--namespace", "ns"],
        vec!["--data", "d", "--store", "redis://127.0.0.1:1"],
    ] {
        rebound()
            .arg("whatif")
            .args(&args)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .assert()
            .code(2);
    }
}

#[test]
fn an_empty_log_says_so_and_exits_zero() {
    let data = data_with(&[]);
    rebound()
        .arg("whatif")
        .arg("--rules")
        .arg(root(SHIPPED))
        .arg("--data")
        .arg(data.path())
        .arg("--fail-on-change")
        .assert()
        .success()
        .stdout(format!(
            "the decision log is empty (no decisions recorded yet in {})\n",
            data.path().display()
        ));
    let answer = whatif_json(&root(SHIPPED), data.path(), &[]);
    assert_eq!(answer["total"], 0);
    assert_eq!(answer["version"], Value::Null);
}

#[test]
fn a_shared_store_is_read_by_its_namespace() {
    use rebound_store_redis::{RedisOptions, RedisStore, TestServer};
    let server = TestServer::start();
    let log = log_of(&failures_at(now_ms()), 1);
    let store = RedisStore::connect(&RedisOptions::new(server.url(), "shop")).unwrap();
    store
        .apply(&[WriteOp::LogDecisions {
            decisions: rebound_runtime::store::DecisionPage::of(&log).unwrap(),
            keep: 100_000,
        }])
        .unwrap();
    let rules = candidate(Some(SLOWER_PROCESSING));
    let ask = |ns: &str| {
        let out = rebound()
            .arg("whatif")
            .arg("--rules")
            .arg(rules.path())
            .args(["--store", &server.url(), "--namespace", ns, "--json"])
            .env_remove("REBOUND_STORE_PASSWORD")
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        serde_json::from_slice::<Value>(&out.stdout).unwrap()
    };
    let answer = ask("shop");
    assert_eq!(answer["total"], log.len());
    assert_eq!(answer["changed"], 3);
    assert_eq!(ask("other")["total"], 0);
}

#[test]
fn an_unreachable_store_exits_two() {
    // A port nothing listens on: taken, then released.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    rebound()
        .arg("whatif")
        .arg("--rules")
        .arg(root(SHIPPED))
        .args(["--store", &format!("redis://127.0.0.1:{port}")])
        .env_remove("REBOUND_STORE_PASSWORD")
        .assert()
        .code(2)
        .stderr(predicate::str::contains("cannot read the decision log"));
}
