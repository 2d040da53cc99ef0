//! A node's start-up checks (`docs/spec/scale-out.md`, "Starting a node"): a server unfit to
//! hold durable state is refused (or warned about with `--store-check warn`), a second live
//! node of the same name is refused, a node with other run parameters is refused, the
//! password never shows, and the store keys of a configuration file (`--config`) are used,
//! each flag over its key; `appendfsync everysec` is warned about; a store stalled at start
//! (a long fsync) is waited for within 10 s, then named.

use std::process::Stdio;
use std::time::Duration;

use super::*;
use crate::one_at_a_time;

fn quick(server: &TestServer, ns: &str, node: &str, data: &Path, messages: u64) -> Command {
    let mut cmd = node_cmd(server, ns, node, data, messages, 1000.0, "1s");
    cmd.env("RUST_LOG", "warn");
    cmd
}

#[test]
fn a_redis_without_appendonly_is_refused_and_warn_starts_anyway() {
    let _one = one_at_a_time();
    let server = TestServer::start_with(&["--appendonly", "no"]);
    let dir = tempfile::tempdir().unwrap();
    let out = quick(&server, "check", "a", dir.path(), 200)
        .output()
        .unwrap();
    let stderr = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("appendonly no"), "{stderr}");
    assert!(stderr.contains("appendonly yes"), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "one line: {stderr}");

    let mut cmd = quick(&server, "check", "a", dir.path(), 200);
    cmd.args(["--store-check", "warn"]);
    let out = cmd.output().unwrap();
    let stderr = super::stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("warning:") && stderr.contains("appendonly"),
        "{stderr}"
    );
    assert_eq!(report(&out)["lost"], 0);
}

#[test]
fn a_second_live_node_of_the_same_name_is_refused() {
    let _one = one_at_a_time();
    let server = TestServer::start();
    let dir = tempfile::tempdir().unwrap();
    let mut first = quick(&server, "names", "same", &dir.path().join("a"), 1_000_000);
    first.stdout(Stdio::null()).stderr(Stdio::null());
    let first = Running::of(first.spawn().unwrap());
    let store = open(&server, "names");
    assert!(wait_until(Duration::from_secs(60), || {
        store
            .nodes(Duration::from_secs(1))
            .map(|n| !n.is_empty())
            .unwrap_or(false)
    }));
    let out = quick(&server, "names", "same", &dir.path().join("b"), 1_000_000)
        .output()
        .unwrap();
    let stderr = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("node same is already live"), "{stderr}");
    drop(first);
}

#[test]
fn a_node_with_other_run_parameters_is_refused_naming_the_difference() {
    let _one = one_at_a_time();
    let server = TestServer::start();
    let dir = tempfile::tempdir().unwrap();
    let out = quick(&server, "params", "a", &dir.path().join("a"), 300)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let first = report(&out);
    assert_eq!(first["lost"], 0);

    let out = quick(&server, "params", "b", &dir.path().join("b"), 400)
        .output()
        .unwrap();
    let stderr = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("messages: the run was recorded with 300, this node was asked for 400"),
        "{stderr}"
    );

    // The same parameters after the run finished: the same report, nothing runs.
    let out = quick(&server, "params", "c", &dir.path().join("c"), 300)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", super::stderr(&out));
    assert_eq!(shared_fields(&report(&out)), shared_fields(&first));
}

#[test]
fn the_password_never_shows() {
    let _one = one_at_a_time();
    let server = TestServer::start_with(&["--requirepass", "s3cr3t-pw"]);
    let dir = tempfile::tempdir().unwrap();
    // A wrong password: refused, and neither password is printed.
    let url = format!("redis://default:wr0ng-pw@127.0.0.1:{}/0", server.port());
    let out = Command::new(bin())
        .args(["run", "--messages", "10", "--store", &url, "--node", "p"])
        .arg("--data")
        .arg(dir.path())
        .arg("--rules")
        .arg(shipped_rules())
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    let all = format!("{}{}", String::from_utf8_lossy(&out.stdout), stderr(&out));
    assert_eq!(out.status.code(), Some(2), "{all}");
    assert!(
        !all.contains("wr0ng-pw") && !all.contains("s3cr3t-pw"),
        "{all}"
    );
    assert!(
        all.contains(&format!("127.0.0.1:{}", server.port())),
        "{all}"
    );
}

#[test]
fn the_store_keys_of_a_configuration_file_join_the_fleet_and_a_flag_wins_over_them() {
    let _one = one_at_a_time();
    let server = TestServer::start_with(&["--appendonly", "no"]);
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.yaml");
    std::fs::write(
        &config,
        format!(
            "store: {}\nnamespace: from-file\nnode: n1\nlease: 1s\nstore_check: warn\n",
            server.url()
        ),
    )
    .unwrap();
    let data = dir.path().join("data");
    let mut cmd = run_cmd(&data, &shipped_rules(), 200, 1000.0);
    cmd.arg("--config").arg(&config).env("RUST_LOG", "warn");
    let out = cmd.output().unwrap();
    let stderr = super::stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("warning:"),
        "the file's store_check: {stderr}"
    );
    assert_eq!(report(&out)["lost"], 0);
    // The run's book is under the file's namespace.
    let mut redis = redis::Client::open(server.url())
        .unwrap()
        .get_connection()
        .unwrap();
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("{from-file}:*")
        .query(&mut redis)
        .unwrap();
    assert!(!keys.is_empty(), "nothing under the file's namespace");

    let mut cmd = run_cmd(&data, &shipped_rules(), 200, 1000.0);
    cmd.arg("--config")
        .arg(&config)
        .args(["--store-check", "refuse"])
        .env("RUST_LOG", "warn");
    let out = cmd.output().unwrap();
    let stderr = super::stderr(&out);
    assert_eq!(out.status.code(), Some(2), "the flag's refuse: {stderr}");
    assert!(stderr.contains("appendonly no"), "{stderr}");
}

#[test]
fn appendfsync_everysec_is_warned_about_and_the_node_starts() {
    let _one = one_at_a_time();
    let server = TestServer::start_with(&["--appendfsync", "everysec"]);
    let dir = tempfile::tempdir().unwrap();
    let out = quick(&server, "fsync", "a", dir.path(), 200)
        .output()
        .unwrap();
    let stderr = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("warning: the Redis server has appendfsync everysec"),
        "{stderr}"
    );
    assert!(stderr.contains("appendfsync always"), "{stderr}");
    assert_eq!(report(&out)["lost"], 0);
}

/// Stalls the server for `seconds` (as a long fsync does) from a connection of its own, and
/// returns once the stall has begun.
fn stall(server: &TestServer, seconds: u32) -> std::thread::JoinHandle<()> {
    let mut c = server.client();
    // Connected before the stall (a connection's handshake would wait for its end).
    let mut probe = server.client();
    probe
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let sleeping = std::thread::spawn(move || {
        let _: redis::RedisResult<String> =
            redis::cmd("DEBUG").arg("SLEEP").arg(seconds).query(&mut c);
    });
    // The stall has begun once a PING of another connection goes unanswered.
    assert!(
        wait_until(Duration::from_secs(10), || redis::cmd("PING")
            .query::<String>(&mut probe)
            .is_err()),
        "DEBUG SLEEP did not stall the server"
    );
    sleeping
}

#[test]
fn a_node_starts_through_a_stalled_store_and_names_one_that_stays_stalled() {
    let _one = one_at_a_time();
    let server = TestServer::start_with(&["--enable-debug-command", "local"]);
    let dir = tempfile::tempdir().unwrap();
    // A stall longer than a connection's timeout (2 s): the start-up waits it out.
    let stalled = stall(&server, 6);
    let out = quick(&server, "stall", "a", &dir.path().join("a"), 200)
        .output()
        .unwrap();
    let stderr = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(report(&out)["lost"], 0);
    stalled.join().unwrap();

    // A stall past the start-up's bound (10 s): exit 2, naming the store and the cause.
    let stalled = stall(&server, 25);
    let out = quick(&server, "stall2", "b", &dir.path().join("b"), 200)
        .output()
        .unwrap();
    let stderr = super::stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("did not answer the start-up checks within 10 s"),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("127.0.0.1:{}", server.port())),
        "{stderr}"
    );
    assert_eq!(stderr.trim().lines().count(), 1, "one line: {stderr}");
    stalled.join().unwrap();
}

/// A node killed and restarted at once under its own name is its own dead predecessor (same
/// host, its PID gone): it joins at once rather than being refused until the lease ends.
#[test]
fn a_node_restarted_after_kill_9_under_its_own_name_starts_at_once() {
    let _one = one_at_a_time();
    let server = TestServer::start();
    let dir = tempfile::tempdir().unwrap();
    let cmd = || {
        let mut cmd = node_cmd(&server, "again", "x1", dir.path(), 1_000_000, 1000.0, "10s");
        cmd.env("RUST_LOG", "warn");
        cmd
    };
    let store = open(&server, "again");
    let started = || {
        store
            .nodes(Duration::from_secs(10))
            .unwrap_or_default()
            .into_iter()
            .find(|n| n.node == "x1")
            .map(|n| n.started_at)
    };
    let first = Running::spawn(cmd());
    assert!(wait_until(Duration::from_secs(60), || started().is_some()));
    let before = started();
    first.kill9();
    // Within the dead one's lease (its heartbeat is still fresh), under its name.
    let mut again = Running::spawn(cmd());
    let joined = wait_until(Duration::from_secs(60), || {
        again.exited() || started() != before
    });
    assert!(joined, "the restarted node did not join");
    assert!(!again.exited(), "refused: {}", stderr(&again.kill9()));
    // It works: it takes the partitions once the dead one's leases end.
    assert!(wait_until(Duration::from_secs(60), || {
        store
            .nodes(Duration::from_secs(10))
            .unwrap_or_default()
            .iter()
            .any(|n| n.node == "x1" && !n.status.partitions.is_empty())
    }));
    drop(again);
}
