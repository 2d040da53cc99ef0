//! `heat:` sections through the binary, over `tests/fixtures/heat` (the spec's example beside a
//! rule that reads `signals.heat`): `check --strict` and `fmt --check` take them, a second
//! `heat:` in another file names both places, and `budgets:` is still an unknown key.

use assert_cmd::Command;
use predicates::prelude::*;

const SET: &str = "tests/fixtures/heat";

fn rebound() -> Command {
    Command::new(env!("CARGO_BIN_EXE_rebound"))
}

#[test]
fn check_and_fmt_take_the_spec_heat_example() {
    rebound()
        .args(["check", "--strict", "--rules", SET])
        .assert()
        .success();
    rebound()
        .args(["fmt", "--check", "--rules", SET])
        .assert()
        .success();
    // signals.heat is a signal like any other: `--signal` sets it by hand.
    rebound()
        .args([
            "decide",
            "--rules",
            SET,
            "--code",
            "NET_TIMEOUT",
            "--attempt",
            "1",
        ])
        .args(["--signal", "heat=60", "--json"])
        .assert()
        .success()
        .stdout(predicate::str::contains("\"rule\":\"hot\""));
}

#[test]
fn fmt_writes_heat_in_the_spec_order_and_its_weights_as_flow_maps() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("heat.yaml"),
        "version: 1\nheat:\n  weights:\n    - weight: 3\n      code: \"NET_*\"\n  half_life: 1m\n",
    )
    .unwrap();
    rebound()
        .args(["fmt", "--rules"])
        .arg(dir.path())
        .assert()
        .success();
    assert_eq!(
        std::fs::read_to_string(dir.path().join("heat.yaml")).unwrap(),
        "version: 1\nheat:\n  half_life: 1m\n  weights:\n    - { code: \"NET_*\", weight: 3 }\n"
    );
}

#[test]
fn heat_in_two_files_names_both_places_and_an_unknown_section_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["10-rules.yaml", "20-heat.yaml"] {
        std::fs::copy(format!("{SET}/{name}"), dir.path().join(name)).unwrap();
    }
    std::fs::write(
        dir.path().join("30-more.yaml"),
        "version: 1\nheat:\n  half_life: 1m\nbudget: []\n",
    )
    .unwrap();
    rebound()
        .args(["check", "--rules"])
        .arg(dir.path())
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "30-more.yaml:4:1: error: unknown field 'budget'",
        ));
    std::fs::write(
        dir.path().join("30-more.yaml"),
        "version: 1\nheat:\n  half_life: 1m\n",
    )
    .unwrap();
    rebound()
        .args(["check", "--rules"])
        .arg(dir.path())
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "30-more.yaml:2:1: error: heat is declared twice: here and at",
        ))
        .stderr(predicate::str::contains("20-heat.yaml:3:1"));
}
