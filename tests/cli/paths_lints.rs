//! The static checks of `rebound check` about rules and their retry paths: a shadowed rule
//! (naming both rules), a path whose worst case waits more than a day, a schedule longer
//! than max_retries, and an attempt bound no retry can reach (which `paths` shows too).
//! `--strict` turns them into errors. The README's example rule set passes `--strict`.

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

fn rebound(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_rebound"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

const IMPOSSIBLE: &str = "tests/fixtures/toolkit/impossible-retry";

#[test]
fn an_attempt_bound_past_max_retries_is_a_warning_at_the_rule() {
    let (code, _, stderr) = rebound(&["check", "--rules", IMPOSSIBLE]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains("tests/fixtures/toolkit/impossible-retry/rules.yaml:10:5: warning: rule 'net-timeout-late' can never retry: it decides only attempts >= 5, but max_retries is 3 (as in the defaults), so every failure it decides is dead-lettered to L2 (reason max_retries); raise max_retries to at least 5, or lower the attempt bound so that it allows attempt 3 or less"),
        "{stderr}"
    );
    assert!(
        stderr.contains("rule 'net-timeout-late': its schedule lists 5 delays but it decides only attempts >= 5 and max_retries is 3, so all 5 (10s, 30s, 1m, 2m, 5m) can never be used"),
        "{stderr}"
    );
    let (code, _, _) = rebound(&["check", "--strict", "--rules", IMPOSSIBLE]);
    assert_eq!(code, 1);
}

#[test]
fn paths_show_no_retry_that_the_attempt_bound_forbids() {
    let (code, stdout, stderr) = rebound(&["paths", "--rules", IMPOSSIBLE]);
    assert_eq!(code, 0, "{stderr}");
    let rule: String = stdout
        .split("\n\n")
        .find(|b| b.starts_with("net-timeout-late"))
        .unwrap_or_default()
        .to_string();
    assert!(
        rule.contains(
            "note: no retry can happen: it decides only attempts >= 5 but max_retries is 3"
        ),
        "{stdout}"
    );
    assert!(!rule.contains("total worst"), "no retry rows: {rule}");
    assert!(
        rule.contains("ends: L2 after 0 retries (max_retries)"),
        "{rule}"
    );
}

/// The README's example rule set, as a user would copy it.
fn readme_example() -> String {
    let readme = include_str!("../../README.md");
    let after = readme
        .split("## A rule file")
        .nth(1)
        .expect("the README has a rule file section");
    let block = after.split("```yaml\n").nth(1).expect("a yaml block");
    block.split("```").next().unwrap_or_default().to_string()
}

#[test]
fn the_readme_example_passes_strict_and_its_late_rule_retries() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("rules.yaml"), readme_example()).unwrap();
    let rules = dir.path().to_str().unwrap();
    let (code, stdout, stderr) = rebound(&["check", "--strict", "--rules", rules]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    let (code, stdout, stderr) = rebound(&[
        "decide",
        "--rules",
        rules,
        "--code",
        "NET_TIMEOUT",
        "--attempt",
        "5",
        "--signal",
        "fail_rate=0.7",
        "--json",
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains(r#""action":"retry""#) && stdout.contains(r#""rule":"net-timeout-late""#),
        "{stdout}"
    );
}

#[test]
fn a_guard_comparing_a_string_with_a_number_is_a_warning_at_the_operator() {
    let (code, _, stderr) = rebound(&["check", "--rules", "tests/fixtures/toolkit/guard-types"]);
    assert_eq!(code, 0, "{stderr}");
    let file = "tests/fixtures/toolkit/guard-types/rules.yaml";
    assert!(
        stderr.contains(&format!("{file}:7:15: warning: the 'if' guard: '>' between code (a string) and 5 (an integer) is always false: rhai never finds a string and a number equal or ordered; compare like with like: quote the number, or convert with parse_int / parse_float / to_string")),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("{file}:11:15: warning: the 'if' guard: '>' between attempt (an integer) and \"3\" (a string) is always false")),
        "{stderr}"
    );
    let (code, _, _) = rebound(&[
        "check",
        "--strict",
        "--rules",
        "tests/fixtures/toolkit/guard-types",
    ]);
    assert_eq!(code, 1);
}
