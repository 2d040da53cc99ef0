//! The real `rebound serve` binary and the parts of cli.md that every subcommand shares:
//! `--json` prints one JSON document on stdout.

use serde_json::Value;
use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};

fn rebound() -> Command {
    Command::new(env!("CARGO_BIN_EXE_rebound"))
}

#[test]
fn serve_json_prints_one_json_document_and_stops_on_sigterm() {
    let data = tempfile::tempdir().unwrap();
    let mut child = rebound()
        .args([
            "serve",
            "--rules",
            "rules",
            "--admin",
            "127.0.0.1:0",
            "--json",
        ])
        .arg("--data")
        .arg(data.path())
        .env_remove("REBOUND_ADMIN_TOKEN")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The start-up line, read on a thread: a server that stalls fails the test, not hangs it.
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut line = String::new();
        let _ = stdout.read_line(&mut line);
        let _ = tx.send(line);
        stdout
    });
    let Ok(line) = rx.recv_timeout(std::time::Duration::from_secs(60)) else {
        let _ = child.kill();
        panic!("serve printed no start-up line within 60 s");
    };
    let mut stdout = reader.join().unwrap();
    let doc: Value = serde_json::from_str(&line)
        .unwrap_or_else(|e| panic!("the start-up line is one JSON document ({e}): {line:?}"));
    let addr = doc["listening"].as_str().expect("a 'listening' address");
    assert!(addr.starts_with("127.0.0.1:"), "{doc}");
    assert!(
        doc["version"].as_str().is_some_and(|v| v.len() == 16),
        "{doc}"
    );

    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let status = child.wait().unwrap();
    let mut rest = String::new();
    stdout.read_to_string(&mut rest).unwrap();
    assert!(
        rest.is_empty(),
        "nothing but the document on stdout: {rest:?}"
    );
    assert_eq!(status.code(), Some(0), "a graceful stop");
}

#[test]
fn serve_json_on_an_invalid_set_exits_1_with_the_errors_as_json() {
    let data = tempfile::tempdir().unwrap();
    let out = rebound()
        .args(["serve", "--admin", "127.0.0.1:0", "--json", "--rules"])
        .arg("tests/fixtures/errors/unknown-key")
        .arg("--data")
        .arg(data.path())
        .env_remove("REBOUND_ADMIN_TOKEN")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is one JSON document ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    });
    assert_eq!(doc["errors"][0]["line"], 6);
    assert_eq!(doc["errors"][0]["column"], 7);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("rules.yaml:6:7: error: unknown field"),
        "the diagnostics go to stderr as well"
    );
}
