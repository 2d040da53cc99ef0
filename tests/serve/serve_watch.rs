//! End to end: `rebound serve` follows edits of its rules directory, and a pushed set is the
//! one loaded after a restart.

use crate::support::*;

#[test]
fn after_a_restart_the_last_pushed_set_is_loaded() {
    let dir = rules_dir_with("pair-a");
    let server = Server::start(dir.path(), &[]);
    let r = server
        .put("/v1/rules")
        .json(&push_body("slow"))
        .send()
        .unwrap();
    assert_eq!(r.status(), 200);
    let pushed = server.version();
    let (status, _) = server.terminate();
    assert_eq!(status.code(), Some(0));

    // pair-a's files are gone; only the pushed set is there.
    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["10-payment.yaml"]);

    let server = Server::start(dir.path(), &[]);
    assert_eq!(server.version(), pushed);
    assert_eq!(server.payment_delay_ms(), Some(200));
    let rules = server.get_json("/v1/rules");
    assert_eq!(rules["source"], "file");
}

#[test]
fn an_edit_saved_by_rename_is_picked_up_and_a_broken_one_is_not() {
    let dir = rules_dir_with("fast");
    let server = Server::start(dir.path(), &[]);
    let target = dir.path().join("10-payment.yaml");

    let broken = dir.path().join(".10-payment.yaml.swp");
    std::fs::write(&broken, &files_of("broken")["10-payment.yaml"]).unwrap();
    std::fs::rename(&broken, &target).unwrap();
    assert!(eventually(|| {
        let history = server.get_json("/v1/rules/history");
        history[0]["result"] == "rejected" && history[0]["source"] == "file"
    }));
    assert_eq!(server.payment_delay_ms(), Some(100));

    let tmp = dir.path().join("10-payment.yaml.tmp");
    std::fs::write(&tmp, &files_of("slow")["10-payment.yaml"]).unwrap();
    std::fs::rename(&tmp, &target).unwrap();
    assert!(eventually(|| server.payment_delay_ms() == Some(200)));
    assert_eq!(server.get_json("/v1/rules")["source"], "file");
}
