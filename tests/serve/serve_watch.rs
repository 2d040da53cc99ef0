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

/// How many file descriptors process `pid` has open.
fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, Iterator::count)
}

#[test]
fn an_edit_made_while_the_process_is_out_of_file_descriptors_is_applied_once_they_are_back() {
    let dir = rules_dir_with("fast");
    let conf = tempfile::tempdir().unwrap();
    let config = conf.path().join("rebound.yaml");
    // Connections that send nothing stay open for the test's length.
    std::fs::write(
        &config,
        "admin:\n  header_timeout: 10m\n  idle_timeout: 10m\n",
    )
    .unwrap();
    let server = Server::start(dir.path(), &["--config", config.to_str().unwrap()]);
    assert_eq!(server.payment_delay_ms(), Some(100));
    let pid = server.pid();
    // A few descriptors to spare, then idle connections until none is left.
    let limit = open_fds(pid) + 8;
    let limited = std::process::Command::new("prlimit")
        .args(["--pid", &pid.to_string(), &format!("--nofile={limit}:")])
        .status()
        .expect("prlimit runs");
    assert!(limited.success());
    let addr = server.base.trim_start_matches("http://").to_owned();
    let sockets: Vec<std::net::TcpStream> = (0..40)
        .map(|_| std::net::TcpStream::connect(&addr).expect("connects"))
        .collect();
    assert!(
        eventually(|| open_fds(pid) >= limit),
        "the server ran out of descriptors: {} of {limit}",
        open_fds(pid)
    );

    let target = dir.path().join("10-payment.yaml");
    std::fs::write(&target, &files_of("slow")["10-payment.yaml"]).unwrap();
    assert!(
        eventually(|| server.stderr().contains("is read again in")),
        "the failed read is retried: {}",
        server.stderr()
    );

    drop(sockets);
    assert!(
        eventually(|| server.payment_delay_ms() == Some(200)),
        "the edit is applied once descriptors are back: {}",
        server.stderr()
    );
    let history = server.get_json("/v1/rules/history");
    let unread = history
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["result"] == "rejected")
        .expect("the failed read is in the history");
    let message = unread["errors"][0]["message"].as_str().unwrap();
    assert!(message.contains("cannot read the rule set"), "{message}");
    let metrics = server.get("/metrics").send().unwrap().text().unwrap();
    assert!(
        !metrics.contains("rebound_rules_reloads_total{result=\"rejected\"} 0")
            && metrics.contains("rebound_rules_reloads_total{result=\"rejected\"}"),
        "{metrics}"
    );
}
