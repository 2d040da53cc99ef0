//! `rebound relay` on a Redis stream, end to end: the real binary, a `redis-server` of the
//! test's own, a handler of the test's own. Every message ends acked by the handler or
//! dead-lettered, the broker holds nothing once Rebound has custody, a `kill -9` of the relay
//! loses nothing, and the report says what happened.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use rebound_store_redis::TestServer;

use super::support::{self, Answer, HandlerServer, Received, Relay, Release, n_of, within, xadd};

/// The rules of these tests: a payment still processing is retried soon, a declined one is a
/// dead letter at once, one held back by the test (`WAIT`) is retried again and again, a slow
/// one waits an hour.
const RULES: &str = "version: 1
defaults:
  retry: { max_retries: 2, backoff: { fixed: 50ms } }
  dead_letter: L2
rules:
  - id: processing
    match: { code: PAY_PROCESSING }
    retry: { max_retries: 3, backoff: { fixed: 100ms } }
    dead_letter: L1
  - id: declined
    match: { code: PAY_FAILED }
    give_up: true
    dead_letter: L3
  - id: wait
    match: { code: WAIT }
    retry: { max_retries: 1000, backoff: { fixed: 100ms } }
    dead_letter: L1
  - id: slow
    match: { code: SLOW }
    retry: { max_retries: 3, backoff: { fixed: 1h } }
    dead_letter: L1
";

pub fn rules_dir() -> tempfile::TempDir {
    rules_dir_with("")
}

/// [`rules_dir`]'s rules, and `more` of them after (YAML list items under `rules:`).
pub fn rules_dir_with(more: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("rules.yaml"), format!("{RULES}{more}")).unwrap();
    dir
}

fn add(server: &TestServer, from: usize, n: usize) {
    xadd(server, "orders", from..from + n, |i| {
        vec![("key", format!("order-{i}")), ("trace", format!("t-{i}"))]
    });
}

/// Entries read by the group and not acknowledged.
fn pending(server: &TestServer) -> u64 {
    support::pending(server, "orders", "rebound")
}

fn source(server: &TestServer) -> String {
    format!(
        "redis-stream://127.0.0.1:{}/orders?group=rebound",
        server.port()
    )
}

/// The ids the handler answered 200, by payload number.
fn acked(handler: &HandlerServer, ok: impl Fn(&Received) -> bool) -> BTreeSet<usize> {
    handler
        .received()
        .iter()
        .filter(|r| ok(r))
        .map(n_of)
        .collect()
}

#[test]
fn every_message_reaches_the_handler_and_ends_acked_or_dead_lettered_with_nothing_pending() {
    let server = TestServer::start();
    add(&server, 0, 40);
    // n % 10 == 3: still processing on the first attempt; n % 10 == 7: declined for good.
    let answer = |r: &Received| {
        let n = n_of(r);
        match n % 10 {
            3 if r.header("rebound-attempt") == "1" => {
                let mut a = Answer::code(503, "PAY_PROCESSING");
                a.headers.push(("retry-after", "0".into()));
                a
            }
            7 => Answer::code(422, "PAY_FAILED"),
            _ => Answer::ok(),
        }
    };
    let handler = HandlerServer::start(answer);
    let (rules, data) = (rules_dir(), tempfile::tempdir().unwrap());
    let relay = Relay::start(
        rules.path(),
        data.path(),
        &[
            "--source",
            &source(&server),
            "--handler",
            &handler.url(),
            "--node",
            "relay-1",
        ],
    );
    let is_ok = |r: &Received| {
        !(n_of(r) % 10 == 7 || (n_of(r) % 10 == 3 && r.header("rebound-attempt") == "1"))
    };
    let all_ok: BTreeSet<usize> = (0..40).filter(|n| n % 10 != 7).collect();
    assert!(
        within(Duration::from_secs(20), || acked(&handler, is_ok) == all_ok
            && pending(&server) == 0),
        "acked {:?} of {all_ok:?}, {} pending\n{}",
        acked(&handler, is_ok),
        pending(&server),
        relay.stderr()
    );
    // What the handler was told.
    let received = handler.received();
    let version = relay.get_json("/v1/rules")["version"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut first_seen: BTreeMap<String, String> = BTreeMap::new();
    for r in &received {
        let id = r.header("rebound-message-id");
        assert!(id.starts_with("orders/"), "{r:?}");
        assert_eq!(r.header("idempotency-key"), id);
        assert_eq!(r.header("rebound-biz"), "PAYMENT");
        assert_eq!(r.header("rebound-key"), format!("order-{}", n_of(r)));
        assert_eq!(
            r.header("trace"),
            format!("t-{}", n_of(r)),
            "the entry's other fields are headers"
        );
        assert_eq!(r.header("rebound-rule-version"), version);
        humantime::parse_rfc3339(r.header("rebound-first-delivery")).expect("RFC 3339");
        let first = first_seen
            .entry(id.to_owned())
            .or_insert_with(|| r.header("rebound-first-delivery").to_owned());
        assert_eq!(
            first,
            r.header("rebound-first-delivery"),
            "the same on every attempt"
        );
    }
    let retried: Vec<&Received> = received
        .iter()
        .filter(|r| r.header("rebound-attempt") == "2")
        .collect();
    assert_eq!(
        retried.len(),
        4,
        "the four still processing, once more each"
    );
    // The declined ones are dead letters, their handler answer among the failures.
    let letters = relay.get_json("/v1/dead-letters");
    assert_eq!(letters["total"], 4, "{letters}");
    let declined = received.iter().find(|r| n_of(r) % 10 == 7).unwrap();
    let id = declined.header("rebound-message-id");
    let message = relay.get_json(&format!("/v1/messages/{}", id.replace('/', "%2F")));
    assert_eq!(message["state"], "dead_lettered", "{message}");
    let failure = &message["failures"][0];
    assert_eq!(failure["code"], "PAY_FAILED", "{message}");
    assert_eq!(failure["attrs"]["handler_status"], "422", "{message}");
    // The metrics.
    let metrics = relay.get("/metrics");
    for line in [
        "rebound_source_received_total{source=\"orders\"} 40",
        "rebound_handler_requests_total{class=\"2xx\"} 36",
        "rebound_handler_requests_total{class=\"4xx\"} 4",
        "rebound_handler_requests_total{class=\"5xx\"} 4",
        "rebound_source_custody_total{source=\"orders\",at=\"dead_lettered\"} 4",
    ] {
        assert!(metrics.contains(line), "{line} missing from:\n{metrics}");
    }
    // The console's overview: the source and the handler.
    let overview = relay.get_json("/v1/overview");
    let source = &overview["sources"][0];
    assert_eq!(source["name"], "orders", "{overview}");
    assert_eq!(source["received"], 40, "{overview}");
    assert_eq!(source["custody"]["dead_lettered"], 4, "{overview}");
    assert_eq!(source["reachable"], true, "{overview}");
    assert_eq!(overview["handler"]["answers"]["2xx"], 36, "{overview}");
    assert_eq!(overview["handler"]["answers"]["5xx"], 4, "{overview}");
    assert!(
        overview["handler"]["latency_ms"]["p99"].is_number(),
        "{overview}"
    );
    let (status, stdout, stderr) = relay.terminate();
    assert!(status.success(), "{status}\n{stderr}");
    for part in [
        "relay of orders",
        "received       40",
        "acked          36",
        "retried        4",
        "dead-lettered  4",
        "in custody     40 acknowledged to the broker",
        "handler        200: 36, 422: 4, 503: 4",
    ] {
        assert!(stdout.contains(part), "{part:?} missing from:\n{stdout}");
    }
}

#[test]
fn a_retry_waiting_an_hour_holds_nothing_at_the_broker() {
    let server = TestServer::start();
    add(&server, 0, 30);
    let handler = HandlerServer::start(|r| {
        if n_of(r).is_multiple_of(3) {
            Answer::code(503, "SLOW")
        } else {
            Answer::ok()
        }
    });
    let (rules, data) = (rules_dir(), tempfile::tempdir().unwrap());
    let relay = Relay::start(
        rules.path(),
        data.path(),
        &["--source", &source(&server), "--handler", &handler.url()],
    );
    let custody = |at: &str| {
        let metrics = relay.get("/metrics");
        let line = format!("rebound_source_custody_total{{source=\"orders\",at=\"{at}\"}} ");
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(&line))
            .and_then(|n| n.trim().parse::<u64>().ok())
            .unwrap_or(0)
    };
    assert!(
        within(Duration::from_secs(20), || custody("retained") == 10
            && custody("acked") == 20
            && pending(&server) == 0),
        "retained {}, acked {}, pending {}\n{}",
        custody("retained"),
        custody("acked"),
        pending(&server),
        relay.stderr()
    );
    let scheduled = relay.get_json("/v1/retries");
    let (status, stdout, stderr) = relay.terminate();
    assert!(status.success(), "{status}\n{stderr}");
    assert!(
        stdout.contains("10 retries waiting in the store"),
        "{stdout}\n{scheduled}"
    );
    assert_eq!(pending(&server), 0);
}

#[test]
fn a_relay_killed_with_sigkill_mid_run_loses_nothing() {
    let server = TestServer::start();
    add(&server, 0, 300);
    // Messages from 100 on wait until the relay has been killed.
    let release = Release::upto(100);
    let handler =
        HandlerServer::start(release.answer(|_| Answer::ok().after(Duration::from_millis(5))));
    let (rules, data) = (rules_dir(), tempfile::tempdir().unwrap());
    let args = [
        "--source",
        &source(&server),
        "--handler",
        &handler.url(),
        "--node",
        "relay-1",
    ];
    let args: Vec<&str> = args.iter().map(|s| &**s).collect();
    let relay = Relay::start(rules.path(), data.path(), &args);
    assert!(
        within(Duration::from_secs(20), || handler.received().len() >= 60),
        "the handler got {}",
        handler.received().len()
    );
    relay.kill9();
    release.to(usize::MAX);
    let relay = Relay::start(rules.path(), data.path(), &args);
    let all: BTreeSet<usize> = (0..300).collect();
    let ok = |r: &Received| r.status == 200;
    assert!(
        within(Duration::from_secs(30), || acked(&handler, ok) == all
            && pending(&server) == 0),
        "{} of 300 handled, {} pending\n{}",
        acked(&handler, ok).len(),
        pending(&server),
        relay.stderr()
    );
    // A message seen twice is seen with the same key each time.
    let mut keys: BTreeMap<usize, BTreeSet<String>> = BTreeMap::new();
    for r in handler.received() {
        keys.entry(n_of(&r))
            .or_default()
            .insert(r.header("idempotency-key").to_owned());
    }
    assert!(keys.values().all(|k| k.len() == 1));
    let (status, _, stderr) = relay.terminate();
    assert!(status.success(), "{status}\n{stderr}");
}

#[test]
fn a_source_url_s_password_is_never_printed() {
    let handler = HandlerServer::start(|_| Answer::ok());
    // A relay whose broker does not answer: it keeps trying, says so, and shows the URL only
    // with its password hidden.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let (rules, data) = (rules_dir(), tempfile::tempdir().unwrap());
    let url = format!("redis-stream://user:s3cret-pw@127.0.0.1:{port}/orders?group=g");
    let relay = Relay::start(
        rules.path(),
        data.path(),
        &["--source", &url, "--handler", &handler.url()],
    );
    let readyz = || {
        super::super::support::get(format!("{}/readyz", relay.base))
            .map(|r| (r.status().as_u16(), r.text().unwrap_or_default()))
            .unwrap_or((0, String::new()))
    };
    assert!(
        within(Duration::from_secs(10), || readyz().0 == 503),
        "{:?}",
        readyz()
    );
    let (_, body) = readyz();
    let body: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["source"], "unreachable", "{body}");
    let metrics = relay.get("/metrics");
    let (_, stdout, stderr) = relay.terminate();
    for text in [&metrics, &stdout, &stderr, &body.to_string()] {
        assert!(!text.contains("s3cret-pw"), "{text}");
    }
    assert!(
        stderr.contains("***"),
        "the URL is shown, its password hidden:\n{stderr}"
    );
    let output = super::super::support::rebound()
        .args(["relay", "--rules"])
        .arg(rules.path())
        .arg("--data")
        .arg(data.path())
        .args([
            "--source",
            "redis-stream://user:s3cret-pw@127.0.0.1:1/orders",
            "--handler",
            &handler.url(),
        ])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("group"), "{stderr}");
    assert!(!stderr.contains("s3cret-pw"), "{stderr}");
}

#[test]
fn a_redis_restarted_from_its_append_only_file_mid_run_loses_nothing() {
    let mut server = TestServer::start_with(&["--appendonly", "yes", "--appendfsync", "always"]);
    add(&server, 0, 300);
    // Messages from 100 on wait until the server has restarted.
    let release = Release::upto(100);
    let handler =
        HandlerServer::start(release.answer(|_| Answer::ok().after(Duration::from_millis(10))));
    let (rules, data) = (rules_dir(), tempfile::tempdir().unwrap());
    let relay = Relay::start(
        rules.path(),
        data.path(),
        &["--source", &source(&server), "--handler", &handler.url()],
    );
    assert!(
        within(Duration::from_secs(20), || handler.received().len() >= 60),
        "the handler got {}",
        handler.received().len()
    );
    server.restart();
    release.to(usize::MAX);
    let all: BTreeSet<usize> = (0..300).collect();
    let ok = |r: &Received| r.status == 200;
    assert!(
        within(Duration::from_secs(30), || acked(&handler, ok) == all
            && pending(&server) == 0),
        "{} of 300 handled, {} pending\n{}",
        acked(&handler, ok).len(),
        pending(&server),
        relay.stderr()
    );
    let (status, _, stderr) = relay.terminate();
    assert!(status.success(), "{status}\n{stderr}");
}
