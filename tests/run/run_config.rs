//! `rebound run --config FILE`: the file's keys are used, and a flag wins over its key.

use super::support::{bin, shipped_rules};
use std::process::Command;

#[test]
fn a_run_uses_the_files_keys_and_a_flag_wins_over_one() {
    let dir = tempfile::tempdir().unwrap();
    let from_file = dir.path().join("data-from-the-file");
    let from_flag = dir.path().join("data-from-the-flag");
    let config = dir.path().join("config.yaml");
    std::fs::write(
        &config,
        format!(
            "rules: {rules}\ndata: {data}\nmessages: 40\ntime_scale: 1000\n\
             topology:\n  max_spout_pending: 8\n  batch_size: 4\n  fuse: off\n",
            rules = shipped_rules().display(),
            data = from_file.display(),
        ),
    )
    .unwrap();
    let out = Command::new(bin())
        .args(["run", "--json", "--config"])
        .arg(&config)
        .arg("--data")
        .arg(&from_flag)
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // The file's messages and time scale, the flag's data directory.
    assert_eq!(report["messages"], 40, "{report}");
    assert_eq!(report["time_scale"], 1000.0, "{report}");
    assert!(
        from_flag.join("rebound.db").exists(),
        "the flag's --data is used"
    );
    assert!(!from_file.exists(), "the file's data directory is not");
}
