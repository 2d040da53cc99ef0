//! `alert:` labels routed to a real Prometheus Alertmanager (Debian's
//! `prometheus-alertmanager`, started by the test on a free port with a store in a temp
//! directory, clustering off): every L3 letter is one alert there, with the labels `label`,
//! `biz`, `code`, `rule` and `message_id` and the last failure in its annotations; a receiver
//! with `include_payload: true` also gets the payload (base64).

use crate::support::*;
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// An Alertmanager of the test's own; killed when dropped.
struct Alertmanager {
    child: Child,
    url: String,
    _dir: tempfile::TempDir,
}

const BINARY: &str = "/usr/bin/prometheus-alertmanager";

impl Alertmanager {
    fn start() -> Alertmanager {
        assert!(
            Path::new(BINARY).exists(),
            "{BINARY} is missing: `apt-get install -y prometheus-alertmanager` (Debian's package) brings it; .ci/run installs it"
        );
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("alertmanager.yml");
        std::fs::write(
            &config,
            "route:\n  receiver: nowhere\nreceivers:\n  - name: nowhere\n",
        )
        .unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(BINARY)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--cluster.listen-address=")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("the alertmanager starts");
        let am = Alertmanager {
            child,
            url: format!("http://127.0.0.1:{port}"),
            _dir: dir,
        };
        let client = http().build().unwrap();
        assert!(
            eventually(|| client
                .get(format!("{}/-/ready", am.url))
                .send()
                .is_ok_and(|r| r.status().is_success())),
            "the alertmanager at {} never became ready",
            am.url
        );
        am
    }

    /// Every alert it holds.
    fn alerts(&self) -> Vec<Value> {
        let body: Value = http()
            .build()
            .unwrap()
            .get(format!("{}/api/v2/alerts", self.url))
            .send()
            .and_then(|r| r.json())
            .unwrap_or(Value::Null);
        body.as_array().cloned().unwrap_or_default()
    }
}

impl Drop for Alertmanager {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The shipped rules, L3 (poison orders) alerting `oncall` and `payloads`.
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

#[test]
fn every_alerted_letter_is_one_alert_in_a_real_alertmanager() {
    let am = Alertmanager::start();
    let rules = rules();
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("config.yaml");
    std::fs::write(
        &cfg,
        format!(
            "receivers:\n  oncall:\n    alertmanager: {}\n    include_payload: true\n",
            am.url
        ),
    )
    .unwrap();
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
    assert!(eventually(|| {
        server.get_json("/v1/dead-letters?label=L3&limit=1")["total"].as_u64() >= Some(5)
    }));
    let listed = server.get_json("/v1/dead-letters?label=L3&limit=1000");
    let letters: Vec<Value> = listed["dead_letters"].as_array().unwrap().clone();
    let stored: BTreeSet<String> = letters
        .iter()
        .map(|l| l["id"].as_str().unwrap().to_owned())
        .collect();
    let alerted = || -> BTreeSet<String> {
        am.alerts()
            .iter()
            .filter_map(|a| a["labels"]["message_id"].as_str().map(str::to_owned))
            .collect()
    };
    assert!(
        eventually(|| stored.is_subset(&alerted())),
        "stored {stored:?}, alerted {:?}",
        alerted()
    );
    let alerts = am.alerts();
    for letter in &letters {
        let id = letter["id"].as_str().unwrap();
        let alert = alerts
            .iter()
            .find(|a| a["labels"]["message_id"] == id)
            .unwrap();
        let labels = &alert["labels"];
        assert_eq!(labels["alertname"], "ReboundDeadLetter");
        assert_eq!(labels["label"], "L3");
        assert_eq!(labels["biz"], letter["biz"]);
        assert_eq!(labels["code"], letter["last_code"]);
        assert_eq!(labels["rule"], letter["rule"]);
        let annotations = &alert["annotations"];
        assert_eq!(annotations["message"], letter["last_message"]);
        // The payload, as the receiver asked: base64 of what the listing shows as text.
        use base64::Engine as _;
        let payload = base64::engine::general_purpose::STANDARD
            .decode(annotations["payload_base64"].as_str().unwrap())
            .unwrap();
        assert_eq!(
            String::from_utf8(payload).unwrap(),
            letter["payload"].as_str().unwrap()
        );
    }
    let metrics = server.get("/metrics").send().unwrap().text().unwrap();
    assert!(
        metrics.lines().any(|l| l
            .starts_with("rebound_alerts_total{receiver=\"oncall\",result=\"sent\"}")
            && !l.ends_with(" 0")),
        "{metrics}"
    );
}
