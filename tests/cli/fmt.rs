//! `rebound fmt`: the shipped rules are formatted, a messy set is found and fixed, and a
//! formatted set checks, tests and formats as it did.

use assert_cmd::Command;
use predicates::prelude::*;
use std::fs;
use std::path::Path;

const MESSY: &str = "tests/fixtures/toolkit/fmt-messy";

fn rebound() -> Command {
    Command::new(env!("CARGO_BIN_EXE_rebound"))
}

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for entry in fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            fs::copy(entry.path(), target).unwrap();
        }
    }
}

fn comments(text: &str) -> Vec<String> {
    let mut c: Vec<String> = text
        .lines()
        .filter_map(|l| l.find('#').map(|at| l[at..].trim().to_string()))
        .collect();
    c.sort();
    c
}

#[test]
fn fmt_check_accepts_the_shipped_rules_and_their_tests() {
    rebound()
        .args(["fmt", "--check", "--rules", "rules"])
        .assert()
        .success()
        .stdout("");
}

#[test]
fn fmt_check_names_a_messy_file_and_its_first_difference_and_writes_nothing() {
    let before = fs::read(Path::new(MESSY).join("rules.yaml")).unwrap();
    rebound()
        .args(["fmt", "--check", "--rules", MESSY])
        .assert()
        .code(1)
        .stdout(predicate::str::contains(format!(
            "{MESSY}/rules.yaml\n  line 2: - \"rules:\"\n  line 2: + \"version: 1\""
        )))
        .stdout(predicate::str::contains(format!(
            "{MESSY}/tests/rules.yaml"
        )));
    assert_eq!(
        fs::read(Path::new(MESSY).join("rules.yaml")).unwrap(),
        before
    );
}

#[test]
fn fmt_then_fmt_check_passes_and_the_set_checks_and_tests_as_before() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("rules");
    copy_dir(Path::new(MESSY), &dir);
    let original = fs::read_to_string(dir.join("rules.yaml")).unwrap();
    let d = dir.to_str().unwrap();
    rebound()
        .args(["fmt", "--rules", d])
        .assert()
        .success()
        .stdout(predicate::str::contains("rules.yaml\n"));
    let formatted = fs::read_to_string(dir.join("rules.yaml")).unwrap();
    assert_eq!(comments(&original), comments(&formatted));
    assert!(formatted.starts_with("# A rule file"), "{formatted}");
    assert!(formatted.contains("\n  # why this rule exists\n  - id: payment-processing\n    match:\n      biz: PAYMENT\n      code: PAY_PROCESSING\n    retry:\n      max_retries: 3\n      backoff: { fixed: 100ms }\n    dead_letter: L1\n\n  - id: db-lock\n"), "{formatted}");
    assert!(!formatted.contains(".rebound-fmt.tmp"));
    rebound()
        .args(["fmt", "--check", "--rules", d])
        .assert()
        .success()
        .stdout("");
    rebound()
        .args(["fmt", "--rules", d])
        .assert()
        .success()
        .stdout("");
    rebound().args(["check", "--rules", d]).assert().success();
    rebound()
        .args(["test", "--rules", d])
        .assert()
        .success()
        .stdout(predicate::str::contains("1 passed, 0 failed"));
    let left: Vec<_> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left.len(), 2, "{left:?}"); // rules.yaml and tests/, no temporary file
}

#[test]
fn fmt_check_takes_files_and_names_one_that_is_not_yaml() {
    let tmp = tempfile::tempdir().unwrap();
    let bad = tmp.path().join("bad.yaml");
    fs::write(&bad, "version: 1\nrules: [\n").unwrap();
    rebound()
        .args(["fmt", "--check", bad.to_str().unwrap()])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("bad.yaml: error: not valid YAML"));
    rebound()
        .args(["fmt", "--check", &format!("{MESSY}/rules.yaml")])
        .assert()
        .code(1)
        .stdout(predicate::str::contains("fmt-messy/rules.yaml"))
        .stdout(predicate::str::contains("tests/rules.yaml").not());
}
