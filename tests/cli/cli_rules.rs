//! The real `rebound` binary: `check`, `decide` and `explain` as cli.md pins them.

use assert_cmd::Command;
use predicates::prelude::*;
use serde_json::Value;

fn rebound() -> Command {
    Command::new(env!("CARGO_BIN_EXE_rebound"))
}

fn json(out: &[u8]) -> Value {
    serde_json::from_slice(out).unwrap_or_else(|e| {
        panic!(
            "stdout is one JSON document ({e}): {}",
            String::from_utf8_lossy(out)
        )
    })
}

#[test]
fn check_accepts_the_shipped_rules_with_a_summary() {
    rebound()
        .args(["check", "--rules", "rules"])
        .assert()
        .success()
        .stdout(
            predicate::str::is_match(r"^ok: 7 files, \d+ rules, 3 labels, version [0-9a-f]{16}\n$")
                .unwrap(),
        );
}

#[test]
fn check_prints_file_line_column_and_exits_1_on_errors() {
    rebound()
        .args(["check", "--rules", "tests/fixtures/errors/unknown-key"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "tests/fixtures/errors/unknown-key/rules.yaml:6:7: error: unknown field 'max_retry'",
        ))
        .stderr(predicate::str::contains("did you mean 'max_retries'?"));
}

#[test]
fn check_names_a_key_folded_into_the_value_above_once_and_exits_1() {
    let dir = "tests/fixtures/errors/yaml-folded-key";
    let out = rebound().args(["check", "--rules", dir]).assert().code(1);
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    let errors: Vec<&str> = stderr.lines().filter(|l| l.contains(": error: ")).collect();
    assert_eq!(
        errors,
        [format!(
            "{dir}/rules.yaml:11:8: error: 'backoff' at line 11 column 8 is indented deeper \
             than 'max_retries' above it, so YAML reads it as part of that value; line it up \
             with column 7"
        )],
        "{stderr}"
    );
    assert!(!stderr.contains("invalid type"), "{stderr}");
}

#[test]
fn check_strict_turns_warnings_into_errors() {
    let dir = "tests/fixtures/errors/warn-shadowed";
    rebound()
        .args(["check", "--rules", dir])
        .assert()
        .success()
        .stderr(predicate::str::contains("warning:"));
    rebound()
        .args(["check", "--rules", dir, "--strict"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "rules.yaml:6:5: error: rule 'payment-processing' can never decide",
        ));
}

#[test]
fn check_json_is_one_document() {
    let out = rebound()
        .args([
            "check",
            "--rules",
            "tests/fixtures/errors/duplicate-id",
            "--json",
        ])
        .assert()
        .code(1)
        .get_output()
        .stdout
        .clone();
    let doc = json(&out);
    assert_eq!(doc["ok"], false);
    assert_eq!(doc["errors"][0]["line"], 5);
    assert_eq!(doc["errors"][0]["column"], 9);
}

#[test]
fn missing_rules_directory_is_an_io_error() {
    rebound()
        .args(["check", "--rules", "no/such/dir"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("no/such/dir"));
}

#[test]
fn decide_json_has_the_exact_keys() {
    let out = rebound()
        .args([
            "decide",
            "--biz",
            "PAYMENT",
            "--code",
            "PAY_PROCESSING",
            "--attempt",
            "1",
            "--json",
        ])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let doc = json(&out);
    assert_eq!(doc["action"], "retry");
    assert_eq!(doc["delay_ms"], 100);
    assert_eq!(doc["rule"], "payment-processing");
    assert_eq!(doc["attempt"], 1);
    assert!(doc["version"].as_str().is_some_and(|v| v.len() == 16));

    let out = rebound()
        .args([
            "decide",
            "--biz",
            "PAYMENT",
            "--code",
            "PAY_PROCESSING",
            "--attempt",
            "4",
            "--json",
        ])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let doc = json(&out);
    assert_eq!(doc["action"], "dead_letter");
    assert_eq!(doc["dead_letter"], "L1");
    assert_eq!(doc["reason"], "max_retries");
    assert_eq!(doc["rule"], "payment-processing");
    assert_eq!(doc["attempt"], 4);
}

#[test]
fn decide_with_a_seed_is_reproducible_and_defaults_are_named() {
    let run = || {
        rebound()
            .args([
                "decide",
                "--biz",
                "ORDER",
                "--code",
                "SOMETHING_NEW",
                "--attempt",
                "2",
                "--seed",
                "42",
                "--json",
            ])
            .assert()
            .success()
            .get_output()
            .stdout
            .clone()
    };
    let (a, b) = (json(&run()), json(&run()));
    assert_eq!(a, b);
    assert_eq!(a["rule"], "defaults");
}

#[test]
fn decide_honours_retry_after_elapsed_and_attrs() {
    let out = rebound()
        .args([
            "decide",
            "--code",
            "RATE_LIMITED",
            "--attempt",
            "1",
            "--retry-after",
            "45s",
            "--json",
        ])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    assert_eq!(json(&out)["delay_ms"], 45_000);
    let out = rebound()
        .args([
            "decide",
            "--code",
            "DB_LOCK_WAIT",
            "--attempt",
            "3",
            "--elapsed",
            "1m59s",
            "--json",
        ])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let doc = json(&out);
    assert_eq!(doc["reason"], "max_elapsed");
    assert_eq!(doc["dead_letter"], "L2");
}

#[test]
fn decide_on_an_invalid_set_exits_1_with_diagnostics() {
    rebound()
        .args([
            "decide",
            "--rules",
            "tests/fixtures/errors/bad-glob",
            "--code",
            "X",
            "--attempt",
            "1",
        ])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("rules.yaml:5:20: error: bad glob"));
}

#[test]
fn decide_rejects_bad_flags_with_exit_2() {
    rebound()
        .args(["decide", "--code", "X", "--attempt", "0"])
        .assert()
        .code(2);
    rebound()
        .args([
            "decide",
            "--code",
            "X",
            "--attempt",
            "1",
            "--elapsed",
            "soon",
        ])
        .assert()
        .code(2);
}

#[test]
fn explain_shows_each_rule_considered_and_why() {
    rebound()
        .args([
            "explain",
            "--biz",
            "ORDER",
            "--code",
            "NET_TIMEOUT",
            "--attempt",
            "2",
            "--seed",
            "1",
        ])
        .assert()
        .success()
        .stdout(predicate::str::contains("decision: retry after"))
        .stdout(predicate::str::contains("payment-processing"))
        .stdout(predicate::str::contains(
            "biz 'ORDER' does not match PAYMENT",
        ))
        .stdout(predicate::str::contains("net-timeout"))
        .stdout(predicate::str::contains("matched"));
}

#[test]
fn explain_json_carries_decision_and_trace() {
    let out = rebound()
        .args(["explain", "--code", "BAD_JSON", "--attempt", "1", "--json"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let doc = json(&out);
    assert_eq!(doc["decision"]["reason"], "give_up");
    assert_eq!(doc["decision"]["dead_letter"], "L3");
    assert_eq!(doc["trace"][0]["rule"], "bad-payload");
    assert_eq!(doc["trace"][0]["result"], "matched");
}

#[test]
fn explain_shows_the_arithmetic_of_the_delay_after_the_trace() {
    let out = rebound()
        .args([
            "explain",
            "--code",
            "DB_LOCK_WAIT",
            "--attempt",
            "3",
            "--elapsed",
            "1m50s",
            "--seed",
            "5",
        ])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let text = String::from_utf8(out).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    // The existing lines come first, unchanged in form.
    assert!(lines[0].starts_with("decision: retry after "), "{text}");
    let at = lines
        .iter()
        .position(|l| *l == "arithmetic (db-lock, seed 5):")
        .expect("an arithmetic header");
    // The trace, then what the failure falls under, then the arithmetic.
    assert!(lines[at - 1].starts_with("falls under: "), "{text}");
    assert!(lines[at - 2].contains("db-lock") && lines[at - 2].ends_with("matched"));
    let arithmetic = &lines[at + 1..];
    assert_eq!(arithmetic[0], "  retry 3 of max_retries 5");
    assert_eq!(
        arithmetic[1],
        "  backoff exponential { base: 1s, factor: 2, max: 30s }: base · factor^(r−1) = 1s · 2^2 = 4s"
    );
    assert!(
        arithmetic[2].starts_with("  jitter equal: uniform in [d/2, d] = [2s, 4s], drew "),
        "{text}"
    );
    assert!(arithmetic[3].starts_with("  clamp [0, 30s]: "), "{text}");
    assert_eq!(arithmetic[4], "  retry_after: none asked");
    assert!(
        arithmetic[5].starts_with("  max_elapsed: elapsed 1m50s + ")
            && arithmetic[5].ends_with(" <= 2m: retry"),
        "{text}"
    );
    // The value drawn is the delay decided.
    let drawn = arithmetic[2].rsplit("drew ").next().unwrap();
    assert!(
        lines[0].starts_with(&format!("decision: retry after {drawn} ")),
        "{text}"
    );
}

#[test]
fn explain_shows_retry_after_and_a_max_elapsed_dead_letter() {
    let explain = |extra: &[&str]| {
        let out = rebound()
            .args(["explain", "--code", "DB_LOCK_WAIT", "--seed", "5"])
            .args(extra)
            .assert()
            .success()
            .get_output()
            .stdout
            .clone();
        String::from_utf8(out).unwrap()
    };
    let text = explain(&["--attempt", "2", "--retry-after", "20s"]);
    assert!(
        text.contains("  retry_after: max(") && text.contains(", 20s asked) = 20s\n"),
        "{text}"
    );
    let text = explain(&["--attempt", "3", "--elapsed", "1m59s"]);
    assert!(
        text.starts_with("decision: dead_letter L2, reason max_elapsed"),
        "{text}"
    );
    assert!(text.contains(" > 2m: dead letter\n"), "{text}");
    let text = explain(&["--attempt", "6"]);
    assert!(
        text.contains("  retry 6 of max_retries 5: past max_retries, dead letter\n"),
        "{text}"
    );
}

#[test]
fn explain_json_adds_seed_and_pacing_and_decides_as_decide_does() {
    let run = |cmd: &str, seed: Option<u64>| {
        let mut c = rebound();
        c.args([
            cmd,
            "--code",
            "NET_TIMEOUT",
            "--attempt",
            "3",
            "--last-delay",
            "2s",
            "--json",
        ]);
        if let Some(seed) = seed {
            c.args(["--seed", &seed.to_string()]);
        }
        json(&c.assert().success().get_output().stdout)
    };
    for seed in 0..6 {
        let explained = run("explain", Some(seed));
        let decided = run("decide", Some(seed));
        assert_eq!(explained["seed"], seed);
        // `decide --json` adds the budget and breakers after the decision's own keys.
        let mut decision = decided.clone();
        for key in ["budget", "breakers"] {
            decision.as_object_mut().unwrap().remove(key);
        }
        assert_eq!(explained["decision"], decision, "seed {seed}");
        let pacing = &explained["pacing"];
        assert_eq!(pacing["delay_ms"], decided["delay_ms"], "{pacing}");
        assert_eq!(pacing["jitter"], "decorrelated");
        assert_eq!(pacing["before_jitter_ms"], 2_000);
        assert_eq!(pacing["jitter_range_ms"], serde_json::json!([500, 6_000]));
        // The existing keys are still there.
        assert!(explained["trace"].is_array() && explained.get("note").is_some());
    }
    // Without --seed, the seed drawn is reported and replays the same delay in decide.
    let explained = run("explain", None);
    let seed = explained["seed"].as_u64().expect("the seed used");
    let decided = run("decide", Some(seed));
    assert_eq!(decided["delay_ms"], explained["decision"]["delay_ms"]);
    // Both name what the failure falls under (explain beside its decision).
    assert_eq!(decided["budget"], explained["budget"]);
    assert_eq!(decided["breakers"], explained["breakers"]);
}

/// Every subcommand that `rebound --help` lists answers `--help` with an example, and so does
/// `rebound --help` itself.
#[test]
fn every_listed_subcommand_has_help_with_an_example() {
    let out = rebound()
        .arg("--help")
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let top = String::from_utf8(out).unwrap();
    assert!(top.contains("Example"), "{top}");
    let listed: Vec<String> = top
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect();
    assert!(listed.len() >= 7, "{listed:?}");
    for sub in &listed {
        rebound()
            .args([sub.as_str(), "--help"])
            .assert()
            .success()
            .stdout(predicate::str::contains("Example"));
    }
}

#[test]
fn check_warns_on_an_empty_rule_set_and_strict_rejects_it() {
    let dir = tempfile::tempdir().unwrap();
    let warning = "warning: the rule set has no rule files (*.yaml or *.yml directly inside it): every decision would come from the built-in defaults (3 retries, exponential backoff from 1s with full jitter, dead letter 'default'); is --rules the right directory?";
    rebound()
        .args(["check", "--rules"])
        .arg(dir.path())
        .assert()
        .success()
        .stdout(
            predicate::str::starts_with("ok: 0 files, 0 rules, version ")
                .and(predicate::str::ends_with(", 1 warning\n")),
        )
        .stderr(predicate::str::contains(format!(
            "{}: {warning}",
            dir.path().display()
        )));
    rebound()
        .args(["check", "--strict", "--rules"])
        .arg(dir.path())
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "error: the rule set has no rule files",
        ));
    // A file that declares nothing says as little.
    std::fs::write(dir.path().join("a.yaml"), "version: 1\n").unwrap();
    rebound()
        .args(["check", "--rules"])
        .arg(dir.path())
        .assert()
        .success()
        .stderr(predicate::str::contains(
            "warning: the rule set declares no rules and no defaults: every decision",
        ));
    // Defaults alone are a deliberate choice.
    std::fs::write(
        dir.path().join("a.yaml"),
        "version: 1\ndefaults: { dead_letter: L1 }\n",
    )
    .unwrap();
    rebound()
        .args(["check", "--strict", "--rules"])
        .arg(dir.path())
        .assert()
        .success();
}
