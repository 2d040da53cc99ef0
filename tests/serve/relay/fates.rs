//! The handler's answers as fates (sources.md, "Handlers"), one case per row of the table,
//! through the real `rebound relay` between a `redis-server` and a handler of the test's own:
//! what `GET /v1/messages/{id}` then shows of each message.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use rebound_store_redis::TestServer;

use super::support::{Answer, HandlerServer, Relay, n_of, within, xadd};

const RULES: &str = "version: 1
defaults:
  retry: { max_retries: 2, backoff: { fixed: 50ms } }
  dead_letter: L2
rules:
  - id: declined
    match: { code: PAY_FAILED }
    give_up: true
    dead_letter: L3
  - id: slow-down
    match: { code: SLOW_DOWN }
    retry: { max_retries: 3, backoff: { fixed: 1s }, respect_retry_after: true }
    dead_letter: L1
";

/// The config of these relays: a short handler timeout.
const CONFIG: &str = "handler:\n  timeout: 300ms\n";

/// The answer of row `n`.
fn row(n: usize) -> Answer {
    match n {
        0 => Answer::status(204),
        1 => Answer {
            body: r#"{"code":"PAY_FAILED","message":"card declined","attrs":{"card":"visa","tries":3}}"#.into(),
            ..Answer::status(500)
        },
        2 => Answer::status(503),
        3 => {
            let mut a = Answer::code(429, "SLOW_DOWN");
            a.headers.push(("retry-after", "3600".into()));
            a
        }
        4 => {
            let mut a = Answer::code(429, "SLOW_DOWN");
            let at = SystemTime::now() + Duration::from_secs(7200);
            a.headers.push(("retry-after", httpdate::fmt_http_date(at)));
            a
        }
        5 => Answer::ok().after(Duration::from_secs(2)),
        _ => Answer {
            body: format!(r#"{{"code":"PAY_FAILED","pad":"{}"}}"#, "x".repeat(70 * 1024)),
            ..Answer::status(500)
        },
    }
}

#[test]
fn each_answer_of_the_table_is_the_fate_sources_md_says() {
    let server = TestServer::start();
    xadd(&server, "orders", 0..7, |_| Vec::new());
    let handler = HandlerServer::start(|r| row(n_of(r)));
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("rules.yaml"), RULES).unwrap();
    // Beside the rules, not among them: every YAML file there is a rule file.
    let config_dir = tempfile::tempdir().unwrap();
    let config = config_dir.path().join("relay.yaml");
    std::fs::write(&config, CONFIG).unwrap();
    let data = tempfile::tempdir().unwrap();
    let source = format!("redis-stream://127.0.0.1:{}/orders?group=g", server.port());
    let relay = Relay::start(
        dir.path(),
        data.path(),
        &[
            "--source",
            &source,
            "--handler",
            &handler.url(),
            "--config",
            config.to_str().unwrap(),
        ],
    );
    let ids = || -> BTreeMap<usize, String> {
        handler
            .received()
            .iter()
            .map(|r| (n_of(r), r.header("rebound-message-id").to_owned()))
            .collect()
    };
    let message = |n: usize| {
        let id = ids().get(&n).cloned().unwrap_or_default();
        relay.get_json(&format!("/v1/messages/{}", id.replace('/', "%2F")))
    };
    let settled = |n: usize, state: &str| message(n)["state"] == state;
    assert!(
        within(Duration::from_secs(20), || {
            settled(0, "acked") || message(0)["state"] == "unknown" && ids().contains_key(&0)
        }),
        "{}",
        message(0)
    );
    // 1: a JSON failure body: its code, message and attrs, decided by the rules (a dead letter).
    assert!(
        within(Duration::from_secs(20), || settled(1, "dead_lettered")),
        "{}",
        message(1)
    );
    let m = message(1);
    let f = &m["failures"][0];
    assert_eq!(f["code"], "PAY_FAILED", "{m}");
    assert_eq!(f["message"], "card declined", "{m}");
    assert_eq!(f["attrs"]["card"], "visa", "{m}");
    assert_eq!(f["attrs"]["tries"], "3", "{m}");
    assert_eq!(f["attrs"]["handler_status"], "500", "{m}");
    // 2: a status without such a body: HTTP_<status>, retried by the defaults, then L2.
    assert!(
        within(Duration::from_secs(20), || settled(2, "dead_lettered")),
        "{}",
        message(2)
    );
    let m = message(2);
    assert_eq!(m["failures"][0]["code"], "HTTP_503", "{m}");
    assert_eq!(m["attempts"], 3, "{m}");
    // 3 and 4: Retry-After in seconds and as an HTTP date: the retry waits that long.
    for (n, at_least) in [(3, 3500), (4, 7100)] {
        assert!(
            within(Duration::from_secs(20), || settled(n, "scheduled")),
            "{}",
            message(n)
        );
        let m = message(n);
        let due = humantime::parse_rfc3339(m["scheduled"]["due"].as_str().unwrap()).unwrap();
        let wait = due.duration_since(SystemTime::now()).unwrap_or_default();
        assert!(
            wait >= Duration::from_secs(at_least),
            "row {n}: due in {wait:?}: {m}"
        );
        assert_eq!(m["failures"][0]["code"], "SLOW_DOWN", "{m}");
    }
    // 5: no answer within handler.timeout: HANDLER_TIMEOUT.
    assert!(
        within(
            Duration::from_secs(20),
            || message(5)["failures"][0]["code"] == "HANDLER_TIMEOUT"
        ),
        "{}",
        message(5)
    );
    // 6: a failure body over 64 KiB counts as no body: HTTP_500.
    assert!(
        within(
            Duration::from_secs(20),
            || message(6)["failures"][0]["code"] == "HTTP_500"
        ),
        "{}",
        message(6)
    );
    // 0: any 2xx acks: it was handed over once and never again.
    let zero = handler.received().iter().filter(|r| n_of(r) == 0).count();
    assert_eq!(zero, 1);
    let (status, _, stderr) = relay.terminate();
    assert!(status.success(), "{status}\n{stderr}");

    // No handler at all (a closed port): HANDLER_UNAVAILABLE, the cause as the message.
    xadd(&server, "lonely", 0..1, |_| Vec::new());
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let gone = format!("http://{}/orders", closed.local_addr().unwrap());
    drop(closed);
    let source = format!("redis-stream://127.0.0.1:{}/lonely?group=g", server.port());
    let data = tempfile::tempdir().unwrap();
    let relay = Relay::start(
        dir.path(),
        data.path(),
        &["--source", &source, "--handler", &gone],
    );
    let letters = || relay.get_json("/v1/dead-letters");
    assert!(
        within(Duration::from_secs(20), || letters()["total"] == 1),
        "{}",
        letters()
    );
    let letter = &letters()["dead_letters"][0];
    let id = letter["id"].as_str().unwrap().replace('/', "%2F");
    let m = relay.get_json(&format!("/v1/messages/{id}"));
    let f = &m["failures"][0];
    assert_eq!(f["code"], "HANDLER_UNAVAILABLE", "{m}");
    assert!(
        f["message"]
            .as_str()
            .unwrap_or("")
            .to_lowercase()
            .contains("refused"),
        "{m}"
    );
    assert!(f["attrs"].get("handler_status").is_none(), "{m}");
    let (status, _, stderr) = relay.terminate();
    assert!(status.success(), "{status}\n{stderr}");
}
