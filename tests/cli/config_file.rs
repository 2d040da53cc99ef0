//! The configuration file (`--config FILE`, operations.md): `check --config` validates it,
//! and `run` and `serve` refuse to start on a wrong one, with `FILE:LINE:COL` diagnostics.
//! Fixtures are in `tests/fixtures/config/`; the spec's example is copied there verbatim.

use assert_cmd::Command;
use predicates::prelude::*;
use std::path::PathBuf;

fn rebound() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_rebound"));
    cmd.env_remove("RUST_LOG").env_remove("REBOUND_ADMIN_TOKEN");
    cmd
}

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/config")
        .join(name)
}

/// A copy of fixture `name` in `dir` whose `token_file` is a token file that exists there.
fn with_a_token(dir: &std::path::Path, name: &str) -> PathBuf {
    let token = dir.join("token");
    std::fs::write(&token, "s3cret\n").unwrap();
    let text = std::fs::read_to_string(fixture(name)).unwrap().replace(
        "token_file: /etc/rebound/token",
        &format!("token_file: {}", token.display()),
    );
    let copy = dir.join(name);
    std::fs::write(&copy, text).unwrap();
    copy
}

#[test]
fn check_accepts_the_spec_example_and_the_rules_it_names() {
    // The example names /etc/rebound/token, which run and serve would refuse to miss: so
    // does check. With a token file that exists, the example is fine.
    rebound()
        .args(["check", "--config"])
        .arg(fixture("operations-example.yaml"))
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "error: cannot read the token file /etc/rebound/token",
        ));
    let dir = tempfile::tempdir().unwrap();
    // The example says `rules: rules`: the shipped set, from the repository's root.
    rebound()
        .args(["check", "--config"])
        .arg(with_a_token(dir.path(), "operations-example.yaml"))
        .assert()
        .success()
        .stdout(
            predicate::str::is_match(
                r"^ok: 7 files, \d+ rules, 3 labels, version [0-9a-f]{16}; configuration .*operations-example\.yaml: ok, 1 receiver\n$",
            )
            .unwrap(),
        );
    let out = rebound()
        .args(["check", "--json", "--config"])
        .arg(fixture("every-knob.yaml"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["ok"], true);
    assert_eq!(doc["config"]["ok"], true);
}

#[test]
fn check_reports_a_misspelt_key_with_its_place_and_the_nearest_key_and_exits_1() {
    let file = fixture("misspelt-key.yaml");
    rebound()
        .args(["check", "--config"])
        .arg(&file)
        .assert()
        .code(1)
        .stdout(predicate::str::is_empty())
        .stderr(predicate::str::contains(format!(
            "{}:3:3: error: unknown field 'max_spout_pendng'",
            file.display()
        )))
        .stderr(predicate::str::contains(
            "did you mean 'max_spout_pending'?",
        ));
}

#[test]
fn check_reports_a_bad_duration_at_its_value_and_json_says_so() {
    let file = fixture("bad-duration.yaml");
    rebound()
        .args(["check", "--config"])
        .arg(&file)
        .assert()
        .code(1)
        .stderr(predicate::str::contains(format!(
            "{}:3:20: error: bad duration '30 seconds'",
            file.display()
        )));
    let out = rebound()
        .args(["check", "--json", "--config"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["ok"], false);
    assert_eq!(doc["errors"][0]["line"], 3);
    assert_eq!(doc["errors"][0]["column"], 20);
}

#[test]
fn check_of_a_missing_configuration_is_an_io_error() {
    rebound()
        .args(["check", "--config"])
        .arg(fixture("no-such-file.yaml"))
        .assert()
        .code(2)
        .stderr(predicate::str::contains("cannot read the configuration"));
}

#[test]
fn run_and_serve_do_not_start_on_a_wrong_configuration() {
    for (command, fixture_name, says) in [
        ("run", "misspelt-key.yaml", ":3:3: error: unknown field"),
        ("serve", "misspelt-key.yaml", ":3:3: error: unknown field"),
        ("run", "bad-duration.yaml", ":3:20: error: bad duration"),
        ("serve", "bad-duration.yaml", ":3:20: error: bad duration"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let out = rebound()
            .current_dir(dir.path())
            .args([command, "--config"])
            .arg(fixture(fixture_name))
            .args(["--rules", concat!(env!("CARGO_MANIFEST_DIR"), "/rules")])
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(2),
            "{command} {fixture_name}: {out:?}"
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{command} {fixture_name}: {err}");
        // Nothing started: no data directory was made.
        assert!(
            std::fs::read_dir(dir.path()).unwrap().next().is_none(),
            "{command} left files behind"
        );
    }
}

#[test]
fn a_flag_wins_over_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.yaml");
    std::fs::write(&config, "rules: /nonexistent/from-the-file\n").unwrap();
    for command in ["run", "serve"] {
        let out = rebound()
            .current_dir(dir.path())
            .args([command, "--admin", "127.0.0.1:0", "--config"])
            .arg(&config)
            .args(["--rules", "/nonexistent/from-the-flag"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{command}: {out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("/nonexistent/from-the-flag"),
            "{command}: {err}"
        );
        assert!(!err.contains("from-the-file"), "{command}: {err}");
        // Without the flag, the file's.
        let out = rebound()
            .current_dir(dir.path())
            .args([command, "--admin", "127.0.0.1:0", "--config"])
            .arg(&config)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("/nonexistent/from-the-file"),
            "{command}: {err}"
        );
    }
}

#[test]
fn serve_takes_its_admin_address_and_token_file_from_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.yaml");
    // A non-loopback address with a token file that cannot be read: the file's token_file is
    // the one read.
    std::fs::write(
        &config,
        "admin:\n  addr: 0.0.0.0:0\n  token_file: /nonexistent/token\n",
    )
    .unwrap();
    for command in ["serve", "run"] {
        let out = rebound()
            .current_dir(dir.path())
            .args([command, "--config"])
            .arg(&config)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{command}: {out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("/nonexistent/token"), "{command}: {err}");
    }
    // serve with no address anywhere is a usage error.
    rebound()
        .current_dir(dir.path())
        .arg("serve")
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--admin"));
}

#[test]
fn run_takes_a_token_file() {
    let dir = tempfile::tempdir().unwrap();
    rebound()
        .current_dir(dir.path())
        .args([
            "run",
            "--admin",
            "0.0.0.0:0",
            "--token-file",
            "/nonexistent/token",
        ])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("/nonexistent/token"));
}

/// The `error:` lines of `stderr`, the way a diagnostic or a refusal is printed.
fn error_lines(stderr: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(stderr)
        .lines()
        .filter(|l| l.starts_with("error: ") || l.contains(": error: "))
        .map(str::to_owned)
        .collect()
}

#[test]
fn check_refuses_what_run_and_serve_refuse_with_the_same_message() {
    let receiver = fixture("undefined-receiver");
    let rules = receiver.join("rules");
    let cases: [(&str, PathBuf, Option<&PathBuf>, i32); 3] = [
        // A label alerting a receiver the file does not define: run exits 1.
        ("run", receiver.join("config.yaml"), Some(&rules), 1),
        // A token file that is not there: exit 2.
        ("serve", fixture("missing-token-file.yaml"), None, 2),
        // A non-loopback admin address without a token: serve refuses, exit 2.
        ("serve", fixture("exposed-admin.yaml"), None, 2),
    ];
    for (command, config, rules, code) in cases {
        let dir = tempfile::tempdir().unwrap();
        let with = |cmd: &mut Command| {
            cmd.current_dir(dir.path()).arg("--config").arg(&config);
            cmd.arg("--rules").arg(
                rules
                    .cloned()
                    .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("rules")),
            );
        };
        let mut refusing = rebound();
        refusing.arg(command);
        with(&mut refusing);
        let refused = refusing.output().unwrap();
        assert_eq!(refused.status.code(), Some(code), "{command}: {refused:?}");
        let said = error_lines(&refused.stderr);
        assert!(!said.is_empty(), "{command}: {refused:?}");
        let mut checking = rebound();
        checking.arg("check");
        with(&mut checking);
        let checked = checking.output().unwrap();
        assert_eq!(
            checked.status.code(),
            Some(code),
            "check --config {}: {checked:?}",
            config.display()
        );
        assert_eq!(error_lines(&checked.stderr), said, "{}", config.display());
        assert!(
            std::fs::read_dir(dir.path()).unwrap().next().is_none(),
            "{command} or check left files behind"
        );
    }
}
