//! The static checks of `rebound check` about rules and their retry paths: a shadowed rule
//! (naming both rules), a path whose worst case waits more than a day, and a schedule longer
//! than max_retries. `--strict` turns them into errors.

use assert_cmd::Command;
use std::path::PathBuf;

fn check(strict: bool) -> (i32, String) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/toolkit/lints");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_rebound"));
    cmd.arg("check").arg("--rules").arg(dir);
    if strict {
        cmd.arg("--strict");
    }
    let out = cmd.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn each_lint_is_reported_once_at_its_rule() {
    let (code, stderr) = check(false);
    assert_eq!(code, 0, "{stderr}");
    let warnings: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains(": warning: "))
        .collect();
    assert_eq!(warnings.len(), 3, "{stderr}");
    // Both rules are named, and where the earlier one is.
    assert!(
        warnings[0].contains(
            "10-rules.yaml:10:5: warning: rule 'payment-timeout' can never decide: the earlier rule 'any-payment' (",
        ),
        "{stderr}"
    );
    assert!(
        warnings[0].contains("10-rules.yaml:5:5) has no 'if' and matches everything it matches"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("rule 'orders' can never decide"),
        "a guarded rule shadows nothing: {stderr}"
    );
    assert!(
        stderr.contains("10-rules.yaml:24:5: warning: rule 'nightly-sync': its retry path can wait 1d16h in total in the worst case (10 retries), more than one day"),
        "{stderr}"
    );
    assert!(
        stderr.contains("10-rules.yaml:28:5: warning: rule 'restock': its schedule lists 4 delays but max_retries is 2, so the last 2 (30m, 2h) can never be used"),
        "{stderr}"
    );
}

#[test]
fn strict_turns_the_warnings_into_errors() {
    let (code, stderr) = check(true);
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(
        stderr.lines().filter(|l| l.contains(": error: ")).count(),
        3,
        "{stderr}"
    );
}

#[test]
fn the_shipped_rules_pass_strict() {
    let rules = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("rules");
    let out = Command::new(env!("CARGO_BIN_EXE_rebound"))
        .args(["check", "--strict", "--rules"])
        .arg(rules)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
