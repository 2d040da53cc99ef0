//! `decide --redrives N` and `explain --redrives N` (cli.md), over the engine's fixture of a
//! slower second stage for redriven payments (`engine/tests/fixtures/redrives`).

use assert_cmd::Command;
use predicates::prelude::*;

const RULES: &str = "engine/tests/fixtures/redrives";

fn rebound(command: &str, redrives: &str) -> assert_cmd::assert::Assert {
    Command::new(env!("CARGO_BIN_EXE_rebound"))
        .args([command, "--rules", RULES, "--biz", "PAYMENT", "--code", "X"])
        .args(["--attempt", "1", "--redrives", redrives, "--seed", "1"])
        .assert()
}

#[test]
fn decide_takes_the_redrives_of_the_message() {
    rebound("decide", "0")
        .success()
        .stdout(predicate::str::contains("payment").and(predicate::str::contains("100ms")));
    rebound("decide", "1")
        .success()
        .stdout(predicate::str::contains("payment-redriven").and(predicate::str::contains("2s")));
}

#[test]
fn explain_says_which_redrives_a_rule_wanted() {
    rebound("explain", "1")
        .success()
        .stdout(predicate::str::contains("redrives 1 is not >= 2"));
}

#[test]
fn a_bad_redrives_count_is_a_usage_error_naming_the_flag() {
    rebound("decide", "many")
        .code(2)
        .stderr(predicate::str::contains("--redrives"));
}
