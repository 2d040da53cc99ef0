//! End to end: `rebound serve --rules-url` pulls rule sets from a config center (a small
//! HTTP server this test runs on loopback) with ETag / If-None-Match, and holds up under a
//! server that holds requests (long polling).

use crate::support::*;
use serde_json::json;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// What the config center serves, and what it saw.
#[derive(Default)]
struct Center {
    /// The body and its ETag (`"n"`), once there is a set to serve.
    set: Option<(String, String)>,
    /// The If-None-Match header of each request (empty when absent).
    seen: Vec<String>,
    /// How many requests were answered 304.
    not_modified: usize,
    /// Answer without an ETag (a config center that has none).
    no_etag: bool,
}

/// A minimal HTTP/1.1 config center: `GET` → 200 with the set and its ETag, or, when the
/// client already has it, holds the request up to `hold` for a change and then answers 304.
struct ConfigCenter {
    url: String,
    state: Arc<(Mutex<Center>, Condvar)>,
}

impl ConfigCenter {
    fn start(hold: Duration) -> ConfigCenter {
        Self::start_on(0, hold)
    }

    fn start_on(port: u16, hold: Duration) -> ConfigCenter {
        let listener = TcpListener::bind(("127.0.0.1", port)).unwrap();
        let url = format!("http://{}/rules.json", listener.local_addr().unwrap());
        let state = Arc::new((Mutex::new(Center::default()), Condvar::new()));
        let shared = Arc::clone(&state);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                let shared = Arc::clone(&shared);
                std::thread::spawn(move || answer(stream, &shared, hold));
            }
        });
        ConfigCenter { url, state }
    }

    /// Serves `body` from now on, under a new ETag.
    fn publish(&self, body: serde_json::Value) {
        let (lock, changed) = &*self.state;
        let mut center = lock.lock().unwrap();
        let n = center.seen.len() + 1000;
        center.set = Some((body.to_string(), format!("\"etag-{n}\"")));
        changed.notify_all();
    }

    fn etag(&self) -> Option<String> {
        self.state
            .0
            .lock()
            .unwrap()
            .set
            .as_ref()
            .map(|s| s.1.clone())
    }

    fn seen(&self) -> Vec<String> {
        self.state.0.lock().unwrap().seen.clone()
    }

    fn not_modified(&self) -> usize {
        self.state.0.lock().unwrap().not_modified
    }
}

fn answer(stream: TcpStream, state: &(Mutex<Center>, Condvar), hold: Duration) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut if_none_match = String::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("if-none-match")
        {
            if_none_match = value.trim().to_string();
        }
    }
    let (lock, changed) = state;
    let mut center = lock.lock().unwrap();
    center.seen.push(if_none_match.clone());
    let current = |c: &Center| c.set.as_ref().map(|s| s.1.clone());
    if current(&center).as_deref() == Some(if_none_match.as_str()) {
        // The client has the current set: hold the request until it changes, or time out.
        center = changed
            .wait_timeout_while(center, hold, |c| {
                current(c).as_deref() == Some(if_none_match.as_str())
            })
            .unwrap()
            .0;
    }
    let response = match center.set.clone() {
        None => {
            "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".to_string()
        }
        Some((_, etag)) if etag == if_none_match => {
            center.not_modified += 1;
            format!("HTTP/1.1 304 Not Modified\r\nETag: {etag}\r\nConnection: close\r\n\r\n")
        }
        Some((body, _)) if center.no_etag => format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        ),
        Some((body, etag)) => format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nETag: {etag}\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        ),
    };
    drop(center);
    let mut stream = stream;
    let _ = stream.write_all(response.as_bytes());
    let _ = stream.flush();
}

#[test]
fn without_etags_an_unchanged_rejected_set_is_not_rejected_again() {
    let center = ConfigCenter::start(Duration::from_millis(10));
    center.state.0.lock().unwrap().no_etag = true;
    center.publish(push_body("broken"));
    let dir = rules_dir_with("slow");
    let server = Server::start(
        dir.path(),
        &["--rules-url", &center.url, "--rules-poll-interval", "100ms"],
    );
    // Polled again and again, served the same broken set every time.
    assert!(eventually(|| center.seen().len() >= 8));
    let history = server.get_json("/v1/rules/history");
    let rejected = history
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["source"] == "pull" && e["result"] == "rejected")
        .count();
    assert_eq!(rejected, 1, "rejected once, not on every poll: {history}");
    let warnings = server.stderr().matches("rule set rejected").count();
    assert_eq!(warnings, 1, "{}", server.stderr());
    // A change is still taken.
    center.publish(json!({ "files": files_of("fast") }));
    assert!(eventually(|| server.payment_delay_ms() == Some(100)));
}

#[test]
fn pulled_sets_go_through_the_pipeline_with_etags_and_long_polls() {
    let center = ConfigCenter::start(Duration::from_millis(300));
    center.publish(push_body("slow"));
    let dir = rules_dir_with("fast");
    let server = Server::start(
        dir.path(),
        &["--rules-url", &center.url, "--rules-poll-interval", "50ms"],
    );

    // The first poll brings the published set; it is written into the rules directory.
    assert!(eventually(|| server.payment_delay_ms() == Some(200)));
    assert_eq!(server.get_json("/v1/rules")["source"], "pull");
    assert!(eventually(|| {
        std::fs::read_to_string(dir.path().join("10-payment.yaml")).ok()
            == Some(files_of("slow")["10-payment.yaml"].clone())
    }));

    // Later polls send the ETag back and are answered 304 (after being held).
    let first_etag = center.etag().unwrap();
    assert!(eventually(|| center.not_modified() >= 2));
    assert!(center.seen().contains(&first_etag));
    assert_eq!(server.payment_delay_ms(), Some(200));

    // An invalid set is rejected and logged once; the pulled set in force stays.
    center.publish(push_body("broken"));
    assert!(eventually(|| {
        let h = server.get_json("/v1/rules/history");
        h[0]["result"] == "rejected" && h[0]["source"] == "pull"
    }));
    assert_eq!(server.payment_delay_ms(), Some(200));
    let broken_etag = center.etag().unwrap();
    assert!(eventually(|| center.seen().contains(&broken_etag)));

    // A held request is released by a change, which is applied.
    center.publish(json!({ "files": files_of("fast") }));
    assert!(eventually(|| server.payment_delay_ms() == Some(100)));
    let history = server.get_json("/v1/rules/history");
    let pulls: Vec<(&str, &str)> = history
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["source"] == "pull")
        .map(|e| {
            (
                e["result"].as_str().unwrap(),
                e["version"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(pulls.len(), 3, "{history}");
    assert_eq!(pulls.iter().filter(|p| p.0 == "rejected").count(), 1);
}

#[test]
fn a_config_center_that_is_down_is_retried_with_backoff() {
    // Reserve a port, then close it: nothing listens there at first.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}/rules.json");
    let dir = rules_dir_with("fast");
    let server = Server::start(
        dir.path(),
        &["--rules-url", &url, "--rules-poll-interval", "50ms"],
    );
    assert!(eventually(|| server
        .stderr()
        .contains("pulling the rule set failed")));
    // The server stays up and keeps deciding with the set it has.
    assert_eq!(server.payment_delay_ms(), Some(100));
    assert_eq!(server.get_json("/healthz")["status"], "ok");

    // The config center comes up: the next attempt after the backoff brings its set.
    let center = ConfigCenter::start_on(port, Duration::from_millis(300));
    center.publish(push_body("slow"));
    assert!(eventually(|| server.payment_delay_ms() == Some(200)));
    let (status, _) = server.terminate();
    assert_eq!(status.code(), Some(0));
}

#[test]
fn https_urls_are_refused_at_start() {
    let dir = rules_dir_with("fast");
    let out = rebound()
        .args([
            "serve",
            "--admin",
            "127.0.0.1:0",
            "--rules-url",
            "https://example.invalid/r",
        ])
        .arg("--rules")
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("TLS"));
}
