//! The handler's client against real HTTP servers on loopback that each test starts: an axum
//! server that records every request and answers by its path, a listener that never answers,
//! a closed port, a server that holds its requests, and a TLS server with a certificate of a
//! CA the test makes. Every wait is on a condition, with a deadline.

use super::*;
use crate::outbound::test_server::{TestCa, serve_tls};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use rebound_runtime::topology::Headers;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};
use tokio::net::TcpListener;

/// One request as the server saw it.
#[derive(Clone, Debug)]
struct Seen {
    path: String,
    headers: HeaderMap,
    body: bytes::Bytes,
}

#[derive(Clone, Default)]
struct Recorder {
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Recorder {
    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

/// Answers by the request's path: one path per row of the fate table.
async fn answer(
    State(rec): State<Recorder>,
    uri: axum::http::Uri,
    headers: HeaderMap,
    body: bytes::Bytes,
) -> Response {
    let path = uri.path().to_owned();
    rec.seen.lock().unwrap().push(Seen {
        path: path.clone(),
        headers,
        body,
    });
    let failure = r#"{"code": "CARD_DECLINED", "message": "no funds", "attrs": {"tries": 3}}"#;
    match path.as_str() {
        "/ok" => StatusCode::NO_CONTENT.into_response(),
        "/json" => (
            StatusCode::UNPROCESSABLE_ENTITY,
            [("retry-after", "7")],
            failure,
        )
            .into_response(),
        "/plain" => (StatusCode::SERVICE_UNAVAILABLE, "down for maintenance").into_response(),
        "/date" => {
            let at = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(3600));
            (StatusCode::SERVICE_UNAVAILABLE, [("retry-after", at)]).into_response()
        }
        "/big" => {
            // A valid failure body, one byte past the bound.
            let mut body = br#"{"code": "BIG", "message": ""#.to_vec();
            body.resize(MAX_FAILURE_BODY + 1 - 2, b'x');
            body.extend_from_slice(br#""}"#);
            (StatusCode::INTERNAL_SERVER_ERROR, body).into_response()
        }
        "/redirect" => (StatusCode::FOUND, [("location", "/ok")]).into_response(),
        _ => StatusCode::NOT_FOUND.into_response(),
    }
}

async fn recording_server() -> (SocketAddr, Recorder) {
    let rec = Recorder::default();
    let app = axum::Router::new().fallback(answer).with_state(rec.clone());
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (addr, rec)
}

fn handler(url: String) -> Handler {
    Handler::new(&HandlerOptions {
        url,
        ..HandlerOptions::default()
    })
    .expect("a handler")
}

fn delivery<'a>(headers: &'a Headers, key: Option<&'a str>) -> Delivery<'a> {
    Delivery {
        id: "orders/42",
        attempt: 3,
        biz: "payment",
        key,
        first_delivery: SystemTime::UNIX_EPOCH + Duration::from_millis(1_700_000_000_123),
        rule_version: "v7-abc",
        headers,
        payload: bytes::Bytes::from_static(b"\x00{\"order\": 42}"),
    }
}

fn failure_of(answer: &Answer) -> &rebound_runtime::topology::Failure {
    answer.fate.as_ref().expect_err("a failure")
}

#[tokio::test]
async fn the_request_carries_rebounds_headers_the_messages_own_and_the_payload() {
    let (addr, rec) = recording_server().await;
    let h = handler(format!("http://{addr}/ok"));
    let own: Headers = [
        ("X-Tenant", "acme"),
        ("traceparent", "00-abc-def-01"),
        // Neither may override what Rebound sets.
        ("Rebound-Attempt", "99"),
        ("idempotency-key", "forged"),
        ("Content-Length", "1"),
        // Not valid HTTP: left out, not an error.
        ("bad name", "x"),
        ("X-Bad-Value", "line\nbreak"),
    ]
    .into_iter()
    .collect();
    let a = h.call(&delivery(&own, Some("customer-7"))).await;
    assert_eq!(a.fate, Ok(()));
    assert_eq!((a.class, a.status), (AnswerClass::Ok2xx, Some(204)));

    let seen = rec.seen();
    assert_eq!(seen.len(), 1);
    let s = &seen[0];
    assert_eq!(s.path, "/ok");
    assert_eq!(&s.body[..], b"\x00{\"order\": 42}");
    let all = |name: &str| -> Vec<&str> {
        s.headers
            .get_all(name)
            .iter()
            .map(|v| v.to_str().unwrap())
            .collect()
    };
    assert_eq!(all("rebound-message-id"), ["orders/42"]);
    assert_eq!(all("rebound-attempt"), ["3"]);
    assert_eq!(all("rebound-biz"), ["payment"]);
    assert_eq!(all("rebound-key"), ["customer-7"]);
    assert_eq!(all("rebound-first-delivery"), ["2023-11-14T22:13:20.123Z"]);
    assert_eq!(all("rebound-rule-version"), ["v7-abc"]);
    assert_eq!(all("idempotency-key"), ["orders/42"]);
    assert_eq!(all("x-tenant"), ["acme"]);
    assert_eq!(all("traceparent"), ["00-abc-def-01"]);
    assert_eq!(all("content-type"), ["application/octet-stream"]);
    assert_eq!(all("content-length"), ["14"]);
    assert!(s.headers.get("x-bad-value").is_none());
    assert!(!s.headers.keys().any(|k| k.as_str().contains(' ')));

    // Without a key there is no Rebound-Key; the message's content type is kept.
    let own: Headers = [("Content-Type", "application/json")].into_iter().collect();
    h.call(&delivery(&own, None)).await.fate.unwrap();
    let s = &rec.seen()[1];
    assert!(s.headers.get("rebound-key").is_none());
    let types: Vec<_> = s.headers.get_all("content-type").iter().collect();
    assert_eq!(types, ["application/json"]);
}

#[tokio::test]
async fn each_row_of_the_fate_table_over_http() {
    let (addr, rec) = recording_server().await;
    let call = |path: &str| {
        let h = handler(format!("http://{addr}{path}"));
        async move { h.call(&delivery(&Headers::new(), None)).await }
    };

    let ok = call("/ok").await;
    assert_eq!((ok.fate.clone(), ok.class), (Ok(()), AnswerClass::Ok2xx));

    let json = call("/json").await;
    let f = failure_of(&json);
    assert_eq!(
        (f.code.as_str(), f.message.as_str()),
        ("CARD_DECLINED", "no funds")
    );
    assert_eq!(f.attrs.get("tries").map(String::as_str), Some("3"));
    assert_eq!(f.retry_after, Some(Duration::from_secs(7)));
    assert_eq!(
        (json.class, json.status),
        (AnswerClass::Client4xx, Some(422))
    );

    let plain = call("/plain").await;
    assert_eq!(failure_of(&plain).code, "HTTP_503");
    assert_eq!(failure_of(&plain).retry_after, None);
    assert_eq!(
        (plain.class, plain.status),
        (AnswerClass::Server5xx, Some(503))
    );

    // An HTTP date an hour ahead (to the second, as HTTP dates are).
    let date = call("/date").await;
    let after = failure_of(&date).retry_after.expect("a retry_after");
    assert!(
        after > Duration::from_secs(3500) && after <= Duration::from_secs(3600),
        "{after:?}"
    );

    let big = call("/big").await;
    assert_eq!(failure_of(&big).code, "HTTP_500");

    // A redirect is not followed: it is the answer, of class 4xx.
    let before = rec.seen().iter().filter(|s| s.path == "/ok").count();
    let redirect = call("/redirect").await;
    assert_eq!(failure_of(&redirect).code, "HTTP_302");
    assert_eq!(redirect.class, AnswerClass::Client4xx);
    assert_eq!(
        rec.seen().iter().filter(|s| s.path == "/ok").count(),
        before
    );
}

#[tokio::test]
async fn a_handler_that_never_answers_is_handler_timeout() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    let h = Handler::new(&HandlerOptions {
        url: format!("http://{addr}/"),
        timeout: Duration::from_millis(200),
        ..HandlerOptions::default()
    })
    .unwrap();
    let a = h.call(&delivery(&Headers::new(), None)).await;
    assert_eq!(failure_of(&a).code, HANDLER_TIMEOUT);
    assert_eq!((a.class, a.status), (AnswerClass::Timeout, None));
    assert!(a.latency >= Duration::from_millis(200), "{:?}", a.latency);
}

#[tokio::test]
async fn a_closed_port_is_handler_unavailable_naming_the_refusal() {
    let addr = {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        listener.local_addr().unwrap()
    };
    let a = handler(format!("http://{addr}/"))
        .call(&delivery(&Headers::new(), None))
        .await;
    let f = failure_of(&a);
    assert_eq!(f.code, HANDLER_UNAVAILABLE);
    assert!(
        f.message.to_lowercase().contains("refused"),
        "{}",
        f.message
    );
    assert_eq!((a.class, a.status), (AnswerClass::Unavailable, None));
}

/// A server that holds each request until the test lets one go, counting those in flight.
#[derive(Clone)]
struct Gate {
    in_flight: Arc<AtomicUsize>,
    most: Arc<AtomicUsize>,
    arrived: Arc<AtomicUsize>,
    open: Arc<tokio::sync::Semaphore>,
}

async fn held(State(gate): State<Gate>) -> StatusCode {
    let now = gate.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
    gate.most.fetch_max(now, Ordering::SeqCst);
    gate.arrived.fetch_add(1, Ordering::SeqCst);
    gate.open.acquire().await.unwrap().forget();
    gate.in_flight.fetch_sub(1, Ordering::SeqCst);
    StatusCode::OK
}

async fn until(what: &str, done: impl Fn() -> bool) {
    let give_up = Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(Instant::now() < give_up, "still waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn never_more_than_concurrency_calls_are_in_flight() {
    let gate = Gate {
        in_flight: Arc::default(),
        most: Arc::default(),
        arrived: Arc::default(),
        open: Arc::new(tokio::sync::Semaphore::new(0)),
    };
    let app = axum::Router::new().fallback(held).with_state(gate.clone());
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    let h = Handler::new(&HandlerOptions {
        url: format!("http://{addr}/"),
        concurrency: 2,
        ..HandlerOptions::default()
    })
    .unwrap();
    let calls: Vec<_> = (0..6)
        .map(|_| {
            let h = h.clone();
            tokio::spawn(async move { h.call(&delivery(&Headers::new(), None)).await })
        })
        .collect();
    // Let them go one at a time: each release lets at most one more in.
    for released in 0..6 {
        until("two calls (or what is left) at the server", || {
            gate.in_flight.load(Ordering::SeqCst) == 2.min(6 - released)
        })
        .await;
        assert!(gate.arrived.load(Ordering::SeqCst) <= released + 2);
        gate.open.add_permits(1);
    }
    for call in calls {
        assert_eq!(call.await.unwrap().fate, Ok(()));
    }
    assert_eq!(gate.arrived.load(Ordering::SeqCst), 6);
    assert_eq!(gate.most.load(Ordering::SeqCst), 2);
}

#[test]
fn bad_options_are_refused_naming_what_is_wrong() {
    let err = |url: &str, ca_file: Option<&std::path::Path>| {
        Handler::new(&HandlerOptions {
            url: url.to_owned(),
            ca_file: ca_file.map(ToOwned::to_owned),
            ..HandlerOptions::default()
        })
        .expect_err("refused")
        .to_string()
    };
    assert!(err("ftp://h/x", None).contains("the scheme is \"ftp\""));
    assert!(err("not a url", None).contains("bad handler URL \"not a url\""));
    assert!(err("", None).contains("bad handler URL"));
    assert!(err("unix:/tmp/sock", None).contains("scheme"));
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.pem");
    let e = err("https://h/", Some(&missing));
    assert!(
        e.contains("missing.pem") && e.contains("cannot be read"),
        "{e}"
    );
    let not_pem = dir.path().join("notes.txt");
    std::fs::write(&not_pem, "hello\n").unwrap();
    let e = err("https://h/", Some(&not_pem));
    assert!(
        e.contains("notes.txt") && e.contains("holds no certificate"),
        "{e}"
    );
    let zero = Handler::new(&HandlerOptions {
        url: "http://h/".into(),
        concurrency: 0,
        ..HandlerOptions::default()
    });
    assert!(zero.unwrap_err().to_string().contains("concurrency is 0"));
    let h = handler("http://127.0.0.1:9/orders".into());
    assert_eq!(h.url(), "http://127.0.0.1:9/orders");
}

#[tokio::test]
async fn an_https_handler_answers_with_its_ca_file_and_is_unavailable_naming_the_certificate_without()
 {
    let ca = TestCa::new("Rebound test CA");
    let rec = Recorder::default();
    let app = axum::Router::new().fallback(answer).with_state(rec.clone());
    let addr = serve_tls(app, &ca).await;
    let dir = tempfile::tempdir().unwrap();
    let ca_file = ca.write(dir.path(), "ca.pem");
    let url = format!("https://127.0.0.1:{}/ok", addr.port());
    let with_ca = Handler::new(&HandlerOptions {
        url: url.clone(),
        ca_file: Some(ca_file),
        ..HandlerOptions::default()
    })
    .unwrap();
    let a = with_ca.call(&delivery(&Headers::new(), Some("k"))).await;
    assert_eq!((a.fate, a.status), (Ok(()), Some(204)));
    assert_eq!(rec.seen()[0].headers["idempotency-key"], "orders/42");
    // By name too: the certificate is for localhost as well.
    let by_name = Handler::new(&HandlerOptions {
        url: format!("https://localhost:{}/json", addr.port()),
        ca_file: Some(dir.path().join("ca.pem")),
        ..HandlerOptions::default()
    })
    .unwrap();
    let a = by_name.call(&delivery(&Headers::new(), None)).await;
    assert_eq!(failure_of(&a).code, "CARD_DECLINED");

    // The system's roots do not know the test's CA; nor does another CA's file.
    let other = TestCa::new("Another CA").write(dir.path(), "other.pem");
    for ca_file in [None, Some(other)] {
        let h = Handler::new(&HandlerOptions {
            url: url.clone(),
            ca_file,
            ..HandlerOptions::default()
        })
        .unwrap();
        let a = h.call(&delivery(&Headers::new(), None)).await;
        let f = failure_of(&a);
        assert_eq!(f.code, HANDLER_UNAVAILABLE);
        assert!(
            f.message.contains("invalid peer certificate") && f.message.contains("UnknownIssuer"),
            "{}",
            f.message
        );
    }
    assert_eq!(rec.seen().len(), 2);
}
