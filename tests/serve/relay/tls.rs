//! An `https://` handler (sources.md: TLS from the system's roots or `handler.ca_file`),
//! through the real `rebound relay`: with the CA of the handler's certificate in `ca_file`
//! every message is handed over and acked; without it, the certificate is refused and every
//! delivery fails `HANDLER_UNAVAILABLE`, the TLS cause as its message.

use std::time::Duration;

use rebound_store_redis::TestServer;

use super::super::receiver::{Answer, Receiver};
use super::support::{Relay, within, xadd};

#[test]
fn an_https_handler_is_trusted_through_ca_file_and_refused_without_it() {
    let server = TestServer::start();
    xadd(&server, "orders", 0..10, |_| Vec::new());
    xadd(&server, "other", 0..1, |_| Vec::new());
    let (handler, ca_pem) = Receiver::start_tls(Answer::Statuses(vec![200]));
    let rules = super::redis_stream::rules_dir();
    let files = tempfile::tempdir().unwrap();
    let ca = files.path().join("ca.pem");
    std::fs::write(&ca, ca_pem).unwrap();
    let config = files.path().join("relay.yaml");
    std::fs::write(&config, format!("handler:\n  ca_file: {}\n", ca.display())).unwrap();

    let data = tempfile::tempdir().unwrap();
    let source = format!("redis-stream://127.0.0.1:{}/orders?group=g", server.port());
    let relay = Relay::start(
        rules.path(),
        data.path(),
        &[
            "--source",
            &source,
            "--handler",
            &handler.url,
            "--config",
            config.to_str().unwrap(),
        ],
    );
    assert!(
        within(Duration::from_secs(20), || handler.requests().len() == 10),
        "{} of 10\n{}",
        handler.requests().len(),
        relay.stderr()
    );
    // The handler has the tenth request before the relay has its answer: wait for the count.
    let answered = "rebound_handler_requests_total{class=\"2xx\"} 10";
    assert!(
        within(Duration::from_secs(10), || relay
            .get("/metrics")
            .contains(answered)),
        "{}",
        relay.get("/metrics")
    );
    let (status, _, stderr) = relay.terminate();
    assert!(status.success(), "{status}\n{stderr}");

    // The system's roots do not know the test's CA.
    let data = tempfile::tempdir().unwrap();
    let source = format!("redis-stream://127.0.0.1:{}/other?group=g", server.port());
    let relay = Relay::start(
        rules.path(),
        data.path(),
        &["--source", &source, "--handler", &handler.url],
    );
    let letters = || relay.get_json("/v1/dead-letters");
    assert!(
        within(Duration::from_secs(20), || letters()["total"] == 1),
        "{}",
        letters()
    );
    let id = letters()["dead_letters"][0]["id"]
        .as_str()
        .unwrap()
        .replace('/', "%2F");
    let m = relay.get_json(&format!("/v1/messages/{id}"));
    let f = &m["failures"][0];
    assert_eq!(f["code"], "HANDLER_UNAVAILABLE", "{m}");
    assert!(
        f["message"].as_str().unwrap_or("").contains("certificate"),
        "{m}"
    );
    assert_eq!(
        handler.requests().len(),
        10,
        "nothing was sent over the refused connection"
    );
    let (status, _, stderr) = relay.terminate();
    assert!(status.success(), "{status}\n{stderr}");
}
