//! A Redis that asks for a password, given where `ps` does not show it: in
//! `REBOUND_STORE_PASSWORD` or in the file the configuration's `store.password_file` names.
//! A password in a `--store` URL still works, with a warning; one given twice is refused.

use super::{one_at_a_time, stderr};
use crate::support::*;
use rebound_store_redis::TestServer;
use std::process::{Command, Output};

const PASSWORD: &str = "s3cr3t-pw";

/// `rebound run` of 200 orders with `args`, the password variable set to `env` (or unset).
fn run(dir: &std::path::Path, args: &[&str], env: Option<&str>) -> Output {
    let mut cmd = Command::new(bin());
    cmd.args(["run", "--json", "--messages", "200", "--time-scale", "1000"])
        .args(["--node", "p"])
        .arg("--data")
        .arg(dir.join("data"))
        .arg("--rules")
        .arg(shipped_rules())
        .args(args)
        .env_remove("RUST_LOG")
        .env_remove("REBOUND_STORE_PASSWORD");
    if let Some(p) = env {
        cmd.env("REBOUND_STORE_PASSWORD", p);
    }
    cmd.output().unwrap()
}

fn finished(out: &Output) {
    assert_eq!(out.status.code(), Some(0), "{}", stderr(out));
    let r = report(out);
    assert_eq!(r["lost"], 0, "{r}");
    assert_eq!(r["complete"], true, "{r}");
    assert!(!stderr(out).contains(PASSWORD), "{}", stderr(out));
}

#[test]
fn the_password_comes_from_the_environment_or_a_file_and_never_from_ps() {
    let _one = one_at_a_time();
    let server = TestServer::start_with(&["--requirepass", PASSWORD]);
    let url = server.url();

    // Without it: refused, saying the server wants a password.
    let dir = tempfile::tempdir().unwrap();
    let out = run(dir.path(), &["--store", &url], None);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).to_lowercase().contains("auth"),
        "{}",
        stderr(&out)
    );

    // From the environment.
    let dir = tempfile::tempdir().unwrap();
    finished(&run(dir.path(), &["--store", &url], Some(PASSWORD)));

    // From the configuration's password file (with its line break).
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("redis-password");
    std::fs::write(&secret, format!("{PASSWORD}\n")).unwrap();
    let config = dir.path().join("rebound.yaml");
    std::fs::write(
        &config,
        format!(
            "store:\n  url: {url}\n  password_file: {}\n",
            secret.display()
        ),
    )
    .unwrap();
    let out = run(dir.path(), &["--config", config.to_str().unwrap()], None);
    finished(&out);
    assert!(!stderr(&out).contains("warning"), "{}", stderr(&out));
}

#[test]
fn a_password_file_that_cannot_be_read_is_named_by_run_and_by_check() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-file");
    let config = dir.path().join("rebound.yaml");
    std::fs::write(
        &config,
        format!(
            "store: {{ url: redis://127.0.0.1:1/0, password_file: {} }}\n",
            missing.display()
        ),
    )
    .unwrap();
    let expected = format!(
        "error: store.password_file {}: cannot read it",
        missing.display()
    );
    let out = run(dir.path(), &["--config", config.to_str().unwrap()], None);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains(&expected), "{}", stderr(&out));
    let out = Command::new(bin())
        .args(["check", "--config"])
        .arg(&config)
        .arg("--rules")
        .arg(shipped_rules())
        .env_remove("REBOUND_STORE_PASSWORD")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains(&expected), "{}", stderr(&out));
    // A key the mapping does not have is named.
    std::fs::write(&config, "store:\n  url: sqlite\n  pasword_file: x\n").unwrap();
    let out = run(dir.path(), &["--config", config.to_str().unwrap()], None);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let at = format!(
        "{}:3:3: error: unknown field 'pasword_file'",
        config.display()
    );
    assert!(stderr(&out).contains(&at), "{}", stderr(&out));
    assert_eq!(
        stderr(&out).matches("error:").count(),
        1,
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_password_in_the_url_is_warned_about_and_one_given_twice_is_refused() {
    let _one = one_at_a_time();
    let server = TestServer::start_with(&["--requirepass", PASSWORD]);
    let url = format!("redis://default:{PASSWORD}@127.0.0.1:{}/0", server.port());
    let dir = tempfile::tempdir().unwrap();
    let out = run(dir.path(), &["--store", &url], None);
    finished(&out);
    assert!(
        stderr(&out).contains("warning: the --store URL holds a password, which `ps` shows"),
        "{}",
        stderr(&out)
    );
    let dir = tempfile::tempdir().unwrap();
    let out = run(dir.path(), &["--store", &url], Some(PASSWORD));
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("give it once"), "{}", stderr(&out));
}
