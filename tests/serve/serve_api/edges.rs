//! End to end, at the edges: what a careless or hostile client sends the real `rebound serve`
//! binary, and what an operator's set-up gets wrong.

use crate::support::*;
use serde_json::{Value, json};
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// A body past the 4 MiB limit: 5 MiB of JSON.
fn five_mib_of_json() -> Vec<u8> {
    json!({ "files": { "a.yaml": "#".repeat(5 * 1024 * 1024) } })
        .to_string()
        .into_bytes()
}

/// How a body goes on the wire.
#[derive(Clone, Copy, Debug)]
enum Framing {
    ContentLength,
    Chunked,
}

/// The body goes out in pieces of this size, a short pause after each: a client across a
/// network is slower than loopback, and still sending when the server has answered.
const PIECE: usize = 64 * 1024;

fn pace() {
    std::thread::sleep(Duration::from_micros(500));
}

/// One request over a fresh connection, written whole before anything is read, as naive
/// clients do (Python's `http.client`, a shell script with `nc`). The error says what went
/// wrong: a write or a read cut off by a reset, or an answer that is not `status` with a JSON
/// error.
fn raw_request(
    server: &Server,
    head: &str,
    body: &[u8],
    framing: Framing,
    status: u16,
) -> Result<(), String> {
    let addr = server.base.trim_start_matches("http://");
    let mut stream = TcpStream::connect(addr).map_err(|e| format!("connect: {e}"))?;
    stream.set_read_timeout(Some(DEADLINE * 3)).unwrap();
    stream.set_write_timeout(Some(DEADLINE * 3)).unwrap();
    let sent = match framing {
        Framing::ContentLength => {
            let head = format!("{head}Content-Length: {}\r\n\r\n", body.len());
            stream.write_all(head.as_bytes()).and_then(|()| {
                for piece in body.chunks(PIECE) {
                    stream.write_all(piece)?;
                    pace();
                }
                Ok(())
            })
        }
        Framing::Chunked => {
            let head = format!("{head}Transfer-Encoding: chunked\r\n\r\n");
            stream.write_all(head.as_bytes()).and_then(|()| {
                for chunk in body.chunks(PIECE) {
                    write!(stream, "{:x}\r\n", chunk.len())?;
                    stream.write_all(chunk)?;
                    stream.write_all(b"\r\n")?;
                    pace();
                }
                stream.write_all(b"0\r\n\r\n")
            })
        }
    };
    if let Err(e) = sent {
        let after = match read_response(&mut stream) {
            Ok(answer) => format!("the answer was still there: {:?}", first_line(&answer)),
            Err(e) => format!("no answer either: {e}"),
        };
        return Err(format!("sending the body: {e}; {after}"));
    }
    let answer = read_response(&mut stream)?;
    let (status_line, rest) = answer.split_once("\r\n").unwrap_or((&answer, ""));
    let expected = format!("HTTP/1.1 {status} ");
    if !status_line.starts_with(&expected) {
        return Err(format!("status line {status_line:?}"));
    }
    let json = rest.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    match serde_json::from_str::<Value>(json) {
        Ok(v) if v["error"].is_string() => Ok(()),
        _ => Err(format!("not a JSON error: {json:?}")),
    }
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or("")
}

/// Reads one response whole (the head, then `Content-Length` bytes) and then the clean end
/// of the connection: a reset anywhere is an error.
fn read_response(stream: &mut TcpStream) -> Result<String, String> {
    let mut got = Vec::new();
    let mut buf = [0u8; 8192];
    let complete = |got: &[u8]| -> Option<usize> {
        let text = std::str::from_utf8(got).ok()?;
        let (head, body) = text.split_once("\r\n\r\n")?;
        let length: usize = head.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse().ok())?
        })?;
        (body.len() >= length).then_some(head.len() + 4 + length)
    };
    let end = loop {
        if let Some(end) = complete(&got) {
            break end;
        }
        match stream.read(&mut buf) {
            Ok(0) => return Err(format!("closed before a whole answer: {got:?}")),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) => return Err(format!("reading the answer: {e} (after {got:?})")),
        }
    };
    // `Connection: close` was asked for: what follows is the end, not a reset.
    match stream.read(&mut buf) {
        Ok(0) => {}
        Ok(n) => return Err(format!("{n} bytes after the answer")),
        Err(e) if e.kind() == ErrorKind::ConnectionReset => {
            return Err("the connection was reset after the answer".to_string());
        }
        Err(e) => return Err(format!("after the answer: {e}")),
    }
    Ok(String::from_utf8_lossy(&got[..end]).into_owned())
}

/// Sends `tries` requests and asserts that every one read its answer.
fn every_try_reads_the_answer(
    server: &Server,
    head: &str,
    framing: Framing,
    status: u16,
    tries: usize,
) {
    let body = five_mib_of_json();
    let started = Instant::now();
    let failures: Vec<String> = (0..tries)
        .filter_map(|i| {
            raw_request(server, head, &body, framing, status)
                .err()
                .map(|e| format!("try {i}: {e}"))
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{framing:?}: {} of {tries} tries did not read the {status}:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(started.elapsed() < Duration::from_secs(120), "too slow");
}

const VALIDATE: &str = "POST /v1/rules/validate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nConnection: close\r\n";

#[test]
fn a_body_over_the_limit_always_gets_its_413_read_with_content_length() {
    let dir = rules_dir_with("fast");
    let server = Server::start(dir.path(), &[]);
    every_try_reads_the_answer(&server, VALIDATE, Framing::ContentLength, 413, 20);
}

#[test]
fn a_body_over_the_limit_always_gets_its_413_read_when_chunked() {
    let dir = rules_dir_with("fast");
    let server = Server::start(dir.path(), &[]);
    every_try_reads_the_answer(&server, VALIDATE, Framing::Chunked, 413, 20);
}

#[test]
fn a_file_name_too_long_gets_400_naming_the_limit_from_push_and_dry_run() {
    let dir = rules_dir_with("fast");
    let server = Server::start(dir.path(), &[]);
    let before = server.version();
    let text = files_of("slow")["10-payment.yaml"].clone();
    let long = format!("{}.yaml", "a".repeat(10_000));
    let body = json!({ "files": { long: text } });
    for request in [server.put("/v1/rules"), server.post("/v1/rules/validate")] {
        let (status, body) = status_and_json(request.json(&body).send().unwrap());
        assert_eq!(status, 400, "{body}");
        let message = body["error"].as_str().unwrap();
        assert!(message.contains("at most 242 bytes"), "{message}");
        assert!(
            message.len() < 300,
            "the name is not echoed whole: {message}"
        );
    }
    assert_eq!(server.version(), before);

    // The longest allowed name is written (its temporary name fits too).
    let longest = format!("{}.yaml", "a".repeat(242 - 5));
    let r = server
        .put("/v1/rules")
        .json(&json!({ "files": { longest.as_str(): text } }))
        .send()
        .unwrap();
    let (status, body) = status_and_json(r);
    assert_eq!(status, 200, "{body}");
    assert!(dir.path().join(&longest).is_file());
}

#[test]
fn a_name_the_rules_directory_cannot_hold_gets_400_and_changes_nothing() {
    let dir = rules_dir_with("fast");
    std::fs::create_dir(dir.path().join("zz.yaml")).unwrap();
    let server = Server::start(dir.path(), &[]);
    let before = server.version();
    let mut files = files_of("slow");
    files.insert("zz.yaml".into(), "version: 1\n".into());
    let r = server
        .put("/v1/rules")
        .json(&json!({ "files": files }))
        .send()
        .unwrap();
    let (status, body) = status_and_json(r);
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("zz.yaml"),
        "{body}"
    );
    assert_eq!(server.version(), before);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("10-payment.yaml")).unwrap(),
        files_of("fast")["10-payment.yaml"]
    );
}

#[test]
fn an_answer_before_the_body_is_read_is_read_too_401_without_the_token() {
    let dir = rules_dir_with("fast");
    let token_dir = tempfile::tempdir().unwrap();
    let token_file = token_dir.path().join("token");
    std::fs::write(&token_file, "s3cret-token\n").unwrap();
    let server = Server::start(dir.path(), &["--token-file", token_file.to_str().unwrap()]);
    let put = "PUT /v1/rules HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n";
    every_try_reads_the_answer(&server, put, Framing::ContentLength, 401, 5);
    every_try_reads_the_answer(&server, put, Framing::Chunked, 401, 5);
}

#[test]
fn a_client_that_expects_100_continue_gets_the_413_without_sending_its_body() {
    let dir = rules_dir_with("fast");
    let server = Server::start(dir.path(), &[]);
    let mut stream = TcpStream::connect(server.base.trim_start_matches("http://")).unwrap();
    stream.set_read_timeout(Some(DEADLINE)).unwrap();
    let head = format!(
        "{VALIDATE}Expect: 100-continue\r\nContent-Length: {}\r\n\r\n",
        5 * 1024 * 1024
    );
    stream.write_all(head.as_bytes()).unwrap();
    let answer = read_response(&mut stream).unwrap();
    assert!(
        answer.starts_with("HTTP/1.1 413 "),
        "no 100 Continue, the 413 at once: {answer}"
    );
    assert!(answer.contains("\"error\""), "{answer}");
}

#[cfg(unix)]
#[test]
fn a_token_file_others_can_read_gets_a_warning_naming_it_and_its_mode() {
    use std::os::unix::fs::PermissionsExt;
    let dir = rules_dir_with("fast");
    let token_dir = tempfile::tempdir().unwrap();
    let token_file = token_dir.path().join("token");
    std::fs::write(&token_file, "s3cret-token\n").unwrap();
    let start_with_mode = |mode| {
        std::fs::set_permissions(&token_file, std::fs::Permissions::from_mode(mode)).unwrap();
        let server = Server::start(dir.path(), &["--token-file", token_file.to_str().unwrap()]);
        // Still served, and still guarded.
        let r = server
            .put("/v1/rules")
            .json(&push_body("slow"))
            .send()
            .unwrap();
        assert_eq!(r.status(), 401);
        let (status, stderr) = server.terminate();
        assert!(status.success(), "{stderr}");
        stderr
    };

    let stderr = start_with_mode(0o644);
    let warning = format!(
        "warning: token file {} is readable by others (mode 0644); chmod 600 it",
        token_file.display()
    );
    assert!(stderr.contains(&warning), "{stderr}");

    let stderr = start_with_mode(0o600);
    assert!(!stderr.contains("token file"), "{stderr}");
}
