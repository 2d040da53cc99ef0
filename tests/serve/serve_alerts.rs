//! `alert:` labels against a real webhook receiver the test starts on loopback: letters
//! arrive batched (at most 100 a request, without payloads, with the receiver's headers); a
//! receiver that answers 500 and then 200 gets them again; one that never answers slows no
//! run, and its letters are counted as dropped.

use crate::receiver::{Answer, Receiver};
use crate::support::*;
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

/// The shipped rules, L3 (poison orders) alerting `oncall`.
fn rules() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("rules");
    for entry in std::fs::read_dir(shipped).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            std::fs::copy(&path, dir.path().join(path.file_name().unwrap())).unwrap();
        }
    }
    std::fs::write(
        dir.path().join("50-labels.yaml"),
        "version: 1\nlabels:\n  L3:\n    alert: oncall\n",
    )
    .unwrap();
    dir
}

fn config(dir: &Path, url: &str) -> std::path::PathBuf {
    config_with(dir, url, "")
}

/// The configuration of one receiver `oncall` at `url`, with `more` keys of its own.
fn config_with(dir: &Path, url: &str, more: &str) -> std::path::PathBuf {
    let path = dir.join("config.yaml");
    std::fs::write(
        &path,
        format!(
            "receivers:\n  oncall:\n    webhook: {url}\n    headers: {{ X-Team: payments }}\n{more}"
        ),
    )
    .unwrap();
    path
}

fn ids_of(body: &Value) -> Vec<String> {
    body["dead_letters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["id"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn letters_arrive_batched_and_a_failed_delivery_is_retried() {
    let receiver = Receiver::start(Answer::Statuses(vec![500, 200]));
    let rules = rules();
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), &receiver.url);
    let server = Server::start(
        rules.path(),
        &[
            "--config",
            cfg.to_str().unwrap(),
            "--rate",
            "400",
            "--time-scale",
            "100",
        ],
    );
    // Enough poison orders to alert about, and the 500 answered and retried.
    assert!(eventually(|| {
        let l3 = server.get_json("/v1/dead-letters?label=L3&limit=1");
        l3["total"].as_u64() >= Some(5) && receiver.requests().len() >= 2
    }));
    let listed = server.get_json("/v1/dead-letters?label=L3&limit=1000");
    let stored: BTreeSet<String> = ids_of(&listed).into_iter().collect();
    // Every stored L3 letter arrives in a 200-answered request.
    assert!(eventually(|| {
        let delivered: BTreeSet<String> = receiver
            .requests()
            .iter()
            .filter(|r| r.status == Some(200))
            .flat_map(|r| ids_of(&r.body))
            .collect();
        stored.is_subset(&delivered)
    }));
    let requests = receiver.requests();
    assert_eq!(requests[0].status, Some(500));
    let first: BTreeSet<String> = ids_of(&requests[0].body).into_iter().collect();
    let later: BTreeSet<String> = requests[1..].iter().flat_map(|r| ids_of(&r.body)).collect();
    assert!(
        first.is_subset(&later),
        "the 500-answered letters came again"
    );
    for r in &requests {
        let letters = r.body["dead_letters"].as_array().unwrap();
        assert!(!letters.is_empty() && letters.len() <= 100);
        assert!(
            letters
                .iter()
                .all(|l| l["label"] == "L3" && l.get("payload").is_none())
        );
        assert!(
            r.headers
                .iter()
                .any(|(k, v)| k == "x-team" && v == "payments"),
            "{:?}",
            r.headers
        );
    }
    let metrics = server.get("/metrics").send().unwrap().text().unwrap();
    let count = |result: &str| -> u64 {
        metrics
            .lines()
            .find(|l| {
                l.starts_with("rebound_alerts_total")
                    && l.contains("receiver=\"oncall\"")
                    && l.contains(&format!("result=\"{result}\""))
            })
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    assert!(count("failed") >= 1, "{metrics}");
    assert!(count("sent") >= stored.len() as u64, "{metrics}");
}

/// `rebound run` alerting `url`: its report and stderr.
fn run(dir: &Path, rules: &Path, url: &str) -> (Value, String) {
    run_with(dir, rules, url, "")
}

/// `rebound run` alerting `url`, its receiver with `more` keys: its report and stderr.
fn run_with(dir: &Path, rules: &Path, url: &str, more: &str) -> (Value, String) {
    let data = dir.join(format!("data-{}", url.len() + rand_suffix()));
    let cfg = config_with(dir, url, more);
    let out = Command::new(env!("CARGO_BIN_EXE_rebound"))
        .args([
            "run",
            "--json",
            "--messages",
            "4000",
            "--time-scale",
            "1000",
        ])
        .arg("--rules")
        .arg(rules)
        .arg("--data")
        .arg(&data)
        .arg("--config")
        .arg(&cfg)
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    (serde_json::from_slice(&out.stdout).unwrap(), stderr)
}

fn rand_suffix() -> usize {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

#[test]
fn a_receiver_that_never_answers_slows_no_run_and_its_letters_are_counted_dropped() {
    let rules = rules();
    let dir = tempfile::tempdir().unwrap();
    let answering = Receiver::start(Answer::Statuses(vec![200]));
    let silent = Receiver::start(Answer::Never);
    // In turns, twice each, so that a slow moment of the machine does not fall on one side.
    let mut with_answers = Vec::new();
    let mut with_silence = Vec::new();
    let mut silent_stderr = String::new();
    for _ in 0..2 {
        let (r, _) = run(dir.path(), rules.path(), &answering.url);
        with_answers.push(r["throughput_per_s"].as_f64().unwrap());
        let (r, stderr) = run(dir.path(), rules.path(), &silent.url);
        assert_eq!(r["lost"], 0, "{r}");
        assert!(r["dead_letters_by_label"]["L3"].as_u64() > Some(0), "{r}");
        with_silence.push(r["throughput_per_s"].as_f64().unwrap());
        silent_stderr = stderr;
    }
    let best = |v: &[f64]| v.iter().cloned().fold(0.0, f64::max);
    // Within noise: the silent receiver's best run is not far off the answering one's.
    assert!(
        best(&with_silence) >= 0.6 * best(&with_answers),
        "throughput with a silent receiver {with_silence:?}, with an answering one {with_answers:?}"
    );
    assert!(!silent.requests().is_empty(), "the letters were sent");
    assert!(
        silent_stderr.contains("alerts not delivered") && silent_stderr.contains("dropped="),
        "{silent_stderr}"
    );
    assert!(!answering.requests().is_empty());
}

#[test]
fn an_https_receiver_with_its_ca_file_gets_every_letter_and_one_without_names_the_certificate() {
    let rules = rules();
    let dir = tempfile::tempdir().unwrap();
    let (receiver, ca_pem) = Receiver::start_tls(Answer::Statuses(vec![200]));
    let ca_file = dir.path().join("ca.pem");
    std::fs::write(&ca_file, ca_pem).unwrap();
    let more = format!("    ca_file: {}\n", ca_file.display());
    let (report, stderr) = run_with(dir.path(), rules.path(), &receiver.url, &more);
    let l3 = report["dead_letters_by_label"]["L3"].as_u64().unwrap_or(0);
    assert!(l3 > 0, "{report}");
    assert!(!stderr.contains("alerts not delivered"), "{stderr}");
    let requests = receiver.requests();
    assert!(requests.iter().all(|r| r.status == Some(200)));
    let delivered: BTreeSet<String> = requests.iter().flat_map(|r| ids_of(&r.body)).collect();
    assert_eq!(delivered.len() as u64, l3, "every L3 letter, over TLS");
    assert!(
        requests[0]
            .headers
            .iter()
            .any(|(k, v)| k == "x-team" && v == "payments")
    );

    // The same receiver on the system's roots, which do not know its CA: nothing delivered,
    // and the run says why.
    let before = receiver.requests().len();
    let (report, stderr) = run(dir.path(), rules.path(), &receiver.url);
    assert_eq!(report["lost"], 0, "{report}");
    assert!(stderr.contains("alerts not delivered"), "{stderr}");
    assert!(
        stderr.contains("invalid peer certificate") && stderr.contains("UnknownIssuer"),
        "{stderr}"
    );
    assert_eq!(receiver.requests().len(), before);
}

#[test]
fn a_set_alerting_a_receiver_the_configuration_lacks_is_refused_at_start_and_at_reload() {
    let rules = rules();
    // At start: no configuration, so no receiver `oncall`.
    let data = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_rebound"))
        .args(["run", "--messages", "10"])
        .arg("--rules")
        .arg(rules.path())
        .arg("--data")
        .arg(data.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("50-labels.yaml:4:12: error: label 'L3' alerts receiver 'oncall'"),
        "{stderr}"
    );
    assert!(!data.path().join("rebound.db").exists(), "nothing started");

    // At reload: a push naming `pager` is refused with the label's place; `oncall` stays.
    let receiver = Receiver::start(Answer::Statuses(vec![200]));
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), &receiver.url);
    let server = Server::start(
        rules.path(),
        &["--config", cfg.to_str().unwrap(), "--rate", "1"],
    );
    let mut files = serde_json::Map::new();
    for entry in std::fs::read_dir(rules.path()).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap().to_owned();
        let mut text = std::fs::read_to_string(&path).unwrap();
        if name == "50-labels.yaml" {
            text = text.replace("oncall", "pager");
        }
        files.insert(name, Value::String(text));
    }
    let (status, body) = status_and_json(
        server
            .put("/v1/rules")
            .json(&serde_json::json!({ "files": files }))
            .send()
            .unwrap(),
    );
    assert_eq!(status, 422, "{body}");
    let error = &body["errors"][0];
    assert_eq!(error["file"], "50-labels.yaml", "{body}");
    assert_eq!(
        (error["line"].as_u64(), error["column"].as_u64()),
        (Some(4), Some(12)),
        "{body}"
    );
    assert!(
        error["message"].as_str().unwrap().contains("'pager'"),
        "{body}"
    );
}
