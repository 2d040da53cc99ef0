//! `labels:` through the real binary: `check` counts them and warns of a dead letter that
//! names none, `paths` follows their redrives. The set is the engine's labels fixture (the
//! spec's example block beside rules that use it).

use assert_cmd::Command;
use predicates::prelude::*;

const FIXTURE: &str = "engine/tests/fixtures/labels";

fn rebound() -> Command {
    Command::new(env!("CARGO_BIN_EXE_rebound"))
}

#[test]
fn check_counts_the_labels_and_warns_of_an_undefined_dead_letter() {
    rebound()
        .args(["check", "--rules", FIXTURE])
        .assert()
        .success()
        .stdout(
            predicate::str::is_match(r"^ok: 2 files, 3 rules, 4 labels, version [0-9a-f]{16}\n$")
                .unwrap(),
        );
    let dir = tempfile::tempdir().unwrap();
    for name in ["10-rules.yaml", "20-labels.yaml"] {
        let text = std::fs::read_to_string(format!("{FIXTURE}/{name}")).unwrap();
        std::fs::write(
            dir.path().join(name),
            text.replace("dead_letter: L2", "dead_letter: L22"),
        )
        .unwrap();
    }
    let rules = dir.path().join("10-rules.yaml").display().to_string();
    rebound()
        .args(["check", "--rules"])
        .arg(dir.path())
        .assert()
        .success()
        .stderr(predicate::str::contains(format!(
            "{rules}:17:18: warning: dead_letter 'L22' names no label of the set"
        )))
        .stderr(predicate::str::contains("did you mean 'L2'?"));
}

#[test]
fn paths_follow_a_redriving_label() {
    rebound()
        .args(["paths", "--rules", FIXTURE])
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "  redrive 3/3 after 10m: replayed as a first delivery (attempts from 1 again)\n",
        ))
        .stdout(predicate::str::contains(
            "  worst-case total with 3 redrives: 30m1s200ms\n",
        ));
}
