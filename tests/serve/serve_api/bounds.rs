//! End to end, the bounds of "The admin API at its edges" (`docs/spec/operations.md`): slow
//! and idle connections closed, the connection limit, requests of other origins and hosts
//! refused, and a rule file nested past the bound refused where it passes it. The timeouts
//! are set short in a configuration file so that the tests take seconds, not minutes; the
//! spec's defaults are checked where they are set (`src/admin/edges.rs`).

use crate::support::*;
use serde_json::{Value, json};
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// Far longer than any bound set below, and than a loaded machine needs to honour one; an
/// admin that never closes a connection fails against it.
const PATIENCE: Duration = Duration::from_secs(45);

/// `rebound serve` with the `admin:` settings `admin` (YAML lines) in a configuration file.
fn serve_with(admin: &str) -> (Server, tempfile::TempDir, tempfile::TempDir) {
    let rules = rules_dir_with("fast");
    let conf = tempfile::tempdir().unwrap();
    let path = conf.path().join("rebound.yaml");
    std::fs::write(&path, format!("admin:\n{admin}")).unwrap();
    let server = Server::start(rules.path(), &["--config", path.to_str().unwrap()]);
    (server, rules, conf)
}

fn addr(server: &Server) -> String {
    server.base.trim_start_matches("http://").to_owned()
}

fn connect(server: &Server) -> TcpStream {
    let s = TcpStream::connect(addr(server)).expect("connects");
    s.set_read_timeout(Some(PATIENCE)).unwrap();
    s
}

/// Reads until the server closes the connection; `Err` if it was still open after
/// [`PATIENCE`]. What it read comes back.
fn until_closed(mut s: TcpStream) -> Result<String, String> {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return Ok(String::from_utf8_lossy(&got).into_owned()),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == ErrorKind::ConnectionReset => {
                return Ok(String::from_utf8_lossy(&got).into_owned());
            }
            Err(e) => {
                return Err(format!(
                    "still open after {PATIENCE:?} ({e}); read {:?}",
                    String::from_utf8_lossy(&got)
                ));
            }
        }
    }
}

/// Sends one whole request (`Connection: close`) and returns its status and body.
fn exchange(server: &Server, request: &str) -> (u16, String) {
    let mut s = connect(server);
    s.write_all(request.as_bytes()).unwrap();
    let text = until_closed(s).expect("an answer");
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status line in {text:?}"));
    let body = text
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_owned();
    (status, body)
}

fn post(server: &Server, path: &str, headers: &str, body: &str) -> (u16, String) {
    exchange(
        server,
        &format!(
            "POST {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n{headers}Content-Length: {}\r\n\r\n{body}",
            addr(server),
            body.len()
        ),
    )
}

#[test]
fn half_sent_headers_are_closed_after_the_header_timeout() {
    let (server, _rules, _conf) = serve_with("  header_timeout: 1s\n");
    let mut s = connect(&server);
    let started = Instant::now();
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        .unwrap();
    until_closed(s).expect("closed");
    // Not before the bound, with a margin for a coarse timer.
    assert!(started.elapsed() >= Duration::from_millis(900));
    // The server still answers.
    assert_eq!(server.get("/healthz").send().unwrap().status(), 200);
}

#[test]
fn a_short_body_under_a_long_content_length_is_answered_by_the_body_timeout() {
    let (server, _rules, _conf) = serve_with("  body_timeout: 1s\n");
    let mut s = connect(&server);
    s.write_all(
        format!(
            "POST /v1/rules/validate HTTP/1.1\r\nHost: {}\r\nContent-Length: 100000\r\n\r\n{{\"files\":",
            addr(&server)
        )
        .as_bytes(),
    )
    .unwrap();
    let answer = until_closed(s).expect("answered and closed");
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("did not arrive within"), "{answer}");
}

#[test]
fn an_idle_keep_alive_connection_is_closed_after_the_idle_timeout() {
    // The idle bound, not the shorter header bound, closes a connection that was answered.
    let (server, _rules, _conf) = serve_with("  header_timeout: 1s\n  idle_timeout: 3s\n");
    let mut s = connect(&server);
    let started = Instant::now();
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .unwrap();
    let answer = until_closed(s).expect("closed once idle");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(
        started.elapsed() >= Duration::from_millis(2800),
        "kept open while idle, until the bound: {:?}",
        started.elapsed()
    );
}

#[test]
fn past_the_connection_limit_the_next_is_refused_at_once_and_below_it_healthz_answers() {
    // The idle connections send nothing: a header bound far above the test's own time, so that
    // none is closed for it on a loaded machine (the default 10 s was seen to pass, freeing a
    // slot for the ninth).
    let (server, _rules, _conf) = serve_with("  max_connections: 8\n  header_timeout: 300s\n");
    // Seven idle connections: the eighth still gets its answer.
    let idle: Vec<TcpStream> = (0..7).map(|_| connect(&server)).collect();
    let (status, _) = exchange(
        &server,
        "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(status, 200);
    // Eight open: the ninth is closed without an answer, long before any timeout.
    let eighth = connect(&server);
    let ninth = connect(&server);
    let started = Instant::now();
    let mut refused = ninth;
    refused
        .set_read_timeout(Some(Duration::from_secs(8)))
        .unwrap();
    let _ = refused.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    let read = until_closed(refused).expect("refused, not held");
    assert!(read.is_empty(), "no answer past the limit: {read:?}");
    assert!(started.elapsed() < Duration::from_secs(8));
    // Freed: the next one is served again.
    drop(idle);
    drop(eighth);
    assert!(eventually(|| {
        let mut s = connect(&server);
        s.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            .is_ok()
            && until_closed(s).is_ok_and(|a| a.starts_with("HTTP/1.1 200"))
    }));
}

#[test]
fn requests_from_other_origins_get_403_and_for_other_hosts_421() {
    let (server, _rules, _conf) = serve_with("  hosts: [rebound.internal]\n");
    let own = addr(&server);
    let port = own.rsplit_once(':').unwrap().1.to_owned();
    let replay = json!({ "ids": [1], "reason": "x" }).to_string();
    // A page of another origin posting as text/plain (no preflight): refused before anything.
    for extra in [
        "Origin: http://evil.example\r\nContent-Type: text/plain\r\n".to_owned(),
        "Origin: null\r\n".to_owned(),
        "Sec-Fetch-Site: cross-site\r\n".to_owned(),
        format!("Origin: http://localhost:{port}\r\n"),
    ] {
        let (status, body) = post(&server, "/v1/dead-letters/replay", &extra, &replay);
        assert_eq!(status, 403, "{extra}: {body}");
        assert!(body.contains("cross-origin"), "{body}");
    }
    // A preflight gets no permission.
    let (status, _) = exchange(
        &server,
        &format!(
            "OPTIONS /v1/rules HTTP/1.1\r\nHost: {own}\r\nOrigin: http://evil.example\r\n\
             Access-Control-Request-Method: PUT\r\nConnection: close\r\n\r\n"
        ),
    );
    assert_eq!(status, 403);
    // DNS rebinding: the page's Origin and Host agree, and the Host is not the admin's.
    let (status, body) = exchange(
        &server,
        &format!(
            "GET /v1/dead-letters HTTP/1.1\r\nHost: evil.example:{port}\r\nOrigin: http://evil.example:{port}\r\nConnection: close\r\n\r\n"
        ),
    );
    assert_eq!(status, 421, "{body}");
    // The admin's own names, with or without the same origin.
    for host in [
        own.clone(),
        format!("localhost:{port}"),
        format!("rebound.internal:{port}"),
    ] {
        let (status, body) = exchange(
            &server,
            &format!(
                "GET /healthz HTTP/1.1\r\nHost: {host}\r\nOrigin: http://{host}\r\nConnection: close\r\n\r\n"
            ),
        );
        assert_eq!(status, 200, "{host}: {body}");
    }
    // curl and scripts send no Origin.
    let validate = json!({ "files": files_of("fast") }).to_string();
    let (status, body) = post(&server, "/v1/rules/validate", "", &validate);
    assert_eq!(status, 200, "{body}");
}

#[test]
fn a_rule_file_nested_past_the_bound_is_refused_where_it_passes_it() {
    let (server, _rules, _conf) = serve_with("  max_connections: 64\n");
    // 200 KB of `[[[…]]]`: 25 s of CPU before the bound.
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    let r = server
        .post("/v1/rules/validate")
        .json(&json!({ "files": { "deep.yaml": deep } }))
        .send()
        .unwrap();
    let (status, body): (u16, Value) = status_and_json(r);
    assert_eq!(status, 422, "{body}");
    let err = &body["errors"][0];
    assert_eq!(err["file"], "deep.yaml", "{body}");
    assert_eq!(
        (err["line"].as_u64(), err["column"].as_u64()),
        (Some(1), Some(65)),
        "{body}"
    );
    assert!(
        err["message"]
            .as_str()
            .unwrap()
            .contains("nested too deeply"),
        "{body}"
    );
}
