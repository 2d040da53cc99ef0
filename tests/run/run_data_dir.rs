//! A data directory that holds another run: the refusal names the ways out (a `--data` of
//! its own, `--fresh`), each of them works, and `--fresh` removes only Rebound's own files,
//! only under the directory's lock.

use std::path::Path;
use std::process::{Command, Output};

use rebound::pipeline::DataDirLock;

use crate::support::*;

fn keyed(data: &Path, messages: u64, extra: &[&str]) -> Output {
    let mut cmd = run_cmd(data, &shipped_rules(), messages, 1000.0);
    cmd.arg("--keyed").args(extra);
    cmd.output().unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The report of a run that must have finished with every message settled.
fn finished(out: &Output, messages: u64) -> serde_json::Value {
    assert_eq!(out.status.code(), Some(0), "{}", stderr(out));
    let report = report(out);
    assert_eq!(report["emitted"], messages, "{report:#}");
    assert_eq!(report["lost"], 0, "{report:#}");
    report
}

#[test]
fn a_different_run_is_refused_naming_its_way_out_and_each_way_works() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let rules = shipped_rules();
    finished(&run_cmd(&data, &rules, 300, 1000.0).output().unwrap(), 300);

    // Another run in the finished run's directory: exit 2, with the two ways out.
    let refused = keyed(&data, 200, &[]);
    assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
    assert!(refused.stdout.is_empty());
    let own = data.join("200-keyed-x1000");
    let expected = format!(
        "error: {} holds a finished run of 300 messages at time scale 1000, not 200 keyed \
         messages at 1000: pass --data {} for a run of its own, or pass --fresh to remove it \
         and start this one in {}",
        data.display(),
        own.display(),
        data.display()
    );
    assert!(stderr(&refused).contains(&expected), "{}", stderr(&refused));

    // `serve` is offered a directory of its own, not --fresh (a flag of `run`).
    let serve = Command::new(bin())
        .args(["serve", "--admin", "127.0.0.1:0", "--data"])
        .arg(&data)
        .arg("--rules")
        .arg(&rules)
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    let said = stderr(&serve);
    assert_eq!(serve.status.code(), Some(2), "{said}");
    let serve_own = format!(
        "pass --data {} for a run of its own",
        data.join("unbounded-x1").display()
    );
    assert!(said.contains(&serve_own), "{said}");
    assert!(!said.contains("--fresh"), "{said}");

    // The directory it names works.
    let in_own = finished(&keyed(&own, 200, &[]), 200);

    // --fresh starts over in the first directory; only the run's files go.
    std::fs::write(data.join("notes.txt"), "mine").unwrap();
    let fresh = keyed(&data, 200, &["--fresh"]);
    let first = finished(&fresh, 200);
    assert!(
        stderr(&fresh).contains(&format!(
            "--fresh: started over in {}: removed its run of 300 messages at time scale 1000",
            data.display()
        )),
        "{}",
        stderr(&fresh)
    );
    assert_eq!(
        std::fs::read_to_string(data.join("notes.txt")).unwrap(),
        "mine"
    );
    assert_eq!(
        finished(&keyed(&own, 200, &[]), 200),
        in_own,
        "the run inside it stays"
    );
    // The directory now holds the new run: the same command prints its report again, and
    // the old run is gone.
    assert_eq!(finished(&keyed(&data, 200, &[]), 200), first);
    let old = run_cmd(&data, &rules, 300, 1000.0).output().unwrap();
    assert_eq!(old.status.code(), Some(2), "{}", stderr(&old));
    assert!(
        stderr(&old).contains("holds a finished run of 200 keyed messages"),
        "{}",
        stderr(&old)
    );
}

#[test]
fn fresh_on_a_directory_in_use_is_refused_and_removes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let rules = shipped_rules();
    let first = finished(&run_cmd(&data, &rules, 300, 1000.0).output().unwrap(), 300);

    let held = DataDirLock::acquire(&data).unwrap();
    let mut cmd = run_cmd(&data, &rules, 200, 1000.0);
    cmd.arg("--fresh");
    let refused = cmd.output().unwrap();
    let said = stderr(&refused);
    assert_eq!(refused.status.code(), Some(2), "{said}");
    let expected = format!(
        "data directory {} is in use by process {}",
        data.display(),
        std::process::id()
    );
    assert!(said.contains(&expected), "{said}");
    drop(held);

    // The run it held is untouched: the same command prints the same report.
    let again = run_cmd(&data, &rules, 300, 1000.0).output().unwrap();
    assert_eq!(finished(&again, 300), first);
}

#[test]
fn fresh_on_a_shared_store_is_refused_before_it_connects() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(bin())
        .args([
            "run",
            "--fresh",
            "--store",
            "redis://127.0.0.1:1",
            "--namespace",
            "demo",
        ])
        .arg("--data")
        .arg(dir.path().join("data"))
        .arg("--rules")
        .arg(shipped_rules())
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    let said = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{said}");
    assert!(said.contains("pass another --namespace"), "{said}");
    assert!(
        !said.contains("did not answer"),
        "it never tried the store: {said}"
    );
}
