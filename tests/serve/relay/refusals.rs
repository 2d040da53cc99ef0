//! What `rebound relay` refuses before it starts (exit 2, one line or the file's diagnostics
//! naming the cause), and a second live node of one name on a fleet.

use std::process::Output;

use rebound_store_redis::TestServer;

use super::super::support::rebound;
use super::support::{Answer, HandlerServer, Relay};

fn relay(args: &[&str]) -> Output {
    let rules = super::redis_stream::rules_dir();
    let data = tempfile::tempdir().unwrap();
    rebound()
        .arg("relay")
        .arg("--rules")
        .arg(rules.path())
        .arg("--data")
        .arg(data.path())
        .args(args)
        .output()
        .unwrap()
}

fn refused(out: &Output, says: &[&str]) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    for s in says {
        assert!(stderr.contains(s), "{s:?} missing from:\n{stderr}");
    }
}

fn config(text: &str) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("relay.yaml");
    std::fs::write(&path, text).unwrap();
    let shown = path.to_str().unwrap().to_owned();
    (dir, shown)
}

const SOURCE: &str = "redis-stream://127.0.0.1:1/orders?group=g";
const HANDLER: &str = "http://127.0.0.1:1/orders";

#[test]
fn a_relay_without_a_source_or_a_handler_or_with_bad_ones_is_refused_naming_why() {
    refused(
        &relay(&["--handler", HANDLER]),
        &["relay needs --source URL"],
    );
    refused(
        &relay(&["--source", SOURCE]),
        &["relay needs --handler URL"],
    );
    // A build without the feature `kafka` names it; one with it refuses credentials, unshown.
    #[cfg(not(feature = "kafka"))]
    refused(
        &relay(&[
            "--source",
            "kafka://127.0.0.1:9092/orders?group=g",
            "--handler",
            HANDLER,
        ]),
        &[
            "--source",
            "this build has no Kafka source: build with --features kafka",
        ],
    );
    #[cfg(feature = "kafka")]
    {
        let out = relay(&[
            "--source",
            "kafka://app:s3cret@127.0.0.1:9092/orders?group=g",
            "--handler",
            HANDLER,
        ]);
        refused(&out, &["--source", "neither SASL nor TLS"]);
        assert!(!String::from_utf8_lossy(&out.stderr).contains("s3cret"));
    }
    refused(
        &relay(&["--source", SOURCE, "--handler", "ftp://127.0.0.1/x"]),
        &["--handler", "not http:// or https://"],
    );
    // The file's sections are checked as the rest of the file is: the place, and a near key.
    let (_d, file) = config("handler:\n  url: http://127.0.0.1:1/orders\n  timout: 1s\n");
    refused(
        &relay(&["--source", SOURCE, "--config", &file]),
        &["relay.yaml:3:3", "did you mean 'timeout'?"],
    );
    let (_d, file) = config("source:\n  url: nats://127.0.0.1:4222/ORDERS\n");
    refused(
        &relay(&["--handler", HANDLER, "--config", &file]),
        &["relay.yaml:2:8", "consumer"],
    );
    let (_d, file) = config("handler:\n  url: http://127.0.0.1:1/orders\n  timeout: 40s\n");
    refused(
        &relay(&["--source", SOURCE, "--config", &file]),
        &["handler.timeout (40s) must be below the topology's message_timeout (30s)"],
    );
    let (_d, file) =
        config("handler:\n  url: https://127.0.0.1:1/orders\n  ca_file: /nonexistent/ca.pem\n");
    refused(
        &relay(&["--source", SOURCE, "--config", &file]),
        &["/nonexistent/ca.pem"],
    );
}

#[test]
fn a_second_relay_of_one_name_on_a_fleet_is_refused_while_the_first_is_live() {
    let server = TestServer::start_with(&["--appendonly", "yes"]);
    let handler = HandlerServer::start(|_| Answer::ok());
    let rules = super::redis_stream::rules_dir();
    let data = tempfile::tempdir().unwrap();
    let source = format!("redis-stream://127.0.0.1:{}/orders?group=g", server.port());
    let args = [
        "--source",
        &source,
        "--handler",
        &handler.url(),
        "--store",
        &server.url(),
        "--node",
        "twin",
    ];
    let first = Relay::start(rules.path(), data.path(), &args);
    let mut second = args.to_vec();
    second.extend(["--admin", "127.0.0.1:0"]);
    refused(&relay(&second), &["node twin is already live"]);
    let nodes = first.get_json("/v1/nodes");
    assert!(nodes.to_string().contains("twin"), "{nodes}");
    let (status, _, stderr) = first.terminate();
    assert!(status.success(), "{status}\n{stderr}");
}
