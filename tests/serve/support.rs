//! Running the real `rebound serve` binary and talking to it over loopback.
#![allow(dead_code)]

use reqwest::blocking::{Client, RequestBuilder, Response};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a test waits for something that should happen soon: generous, because the
/// machine may be busy building.
pub const DEADLINE: Duration = Duration::from_secs(10);

/// The reload fixtures shared with the engine's tests.
pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("engine/tests/fixtures/reload")
        .join(name)
}

/// A fixture set as a map name → content (the `files` of a push).
pub fn files_of(name: &str) -> BTreeMap<String, String> {
    let mut files = BTreeMap::new();
    for entry in std::fs::read_dir(fixture(name)).unwrap() {
        let entry = entry.unwrap();
        let file = entry.file_name().into_string().unwrap();
        files.insert(file, std::fs::read_to_string(entry.path()).unwrap());
    }
    files
}

/// `{"files": …}` for a fixture set.
pub fn push_body(name: &str) -> Value {
    json!({ "files": files_of(name) })
}

/// A temporary rules directory holding a copy of fixture `name`.
pub fn rules_dir_with(name: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (file, text) in files_of(name) {
        std::fs::write(dir.path().join(file), text).unwrap();
    }
    dir
}

/// A `rebound serve` child process; killed when dropped.
pub struct Server {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    pub client: Client,
    /// Everything the server wrote to stderr so far.
    stderr: Arc<Mutex<String>>,
    stderr_reader: Option<std::thread::JoinHandle<()>>,
    /// The data directory, when the test did not pass `--data` itself.
    pub data: Option<tempfile::TempDir>,
}

/// The `rebound` command.
pub fn rebound() -> Command {
    Command::new(env!("CARGO_BIN_EXE_rebound"))
}

impl Server {
    /// Starts `rebound serve --rules DIR --admin 127.0.0.1:0 EXTRA…` and waits for its
    /// address line.
    pub fn start(rules: &Path, extra: &[&str]) -> Server {
        Self::start_with_env(rules, extra, &[])
    }

    /// As [`start`](Self::start), with environment variables.
    pub fn start_with_env(rules: &Path, extra: &[&str], env: &[(&str, &str)]) -> Server {
        let mut cmd = rebound();
        cmd.arg("serve")
            .arg("--rules")
            .arg(rules)
            .args(["--admin", "127.0.0.1:0"])
            .args(extra);
        // Never let a test's store land in the working directory.
        let data =
            (!extra.contains(&"--data")).then(|| tempfile::tempdir().expect("a temp data dir"));
        if let Some(d) = &data {
            cmd.arg("--data").arg(d.path());
        }
        cmd.env_remove("REBOUND_ADMIN_TOKEN")
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("rebound serve starts");
        let stdout = child.stdout.take().unwrap();
        let stderr = Arc::new(Mutex::new(String::new()));
        let sink = Arc::clone(&stderr);
        let pipe = child.stderr.take().unwrap();
        let stderr_reader = std::thread::spawn(move || {
            let mut lines = BufReader::new(pipe);
            let mut line = String::new();
            while lines.read_line(&mut line).unwrap_or(0) > 0 {
                sink.lock().unwrap().push_str(&line);
                line.clear();
            }
        });
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = rx
            .recv_timeout(DEADLINE * 3)
            .expect("serve prints its address");
        let addr = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
            .to_string();
        let client = http().timeout(DEADLINE * 3).build().unwrap();
        Server {
            child,
            base: format!("http://{addr}"),
            client,
            stderr,
            stderr_reader: Some(stderr_reader),
            data,
        }
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// What the server has written to stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub fn get(&self, path: &str) -> RequestBuilder {
        self.client.get(self.url(path))
    }

    pub fn put(&self, path: &str) -> RequestBuilder {
        self.client.put(self.url(path))
    }

    pub fn post(&self, path: &str) -> RequestBuilder {
        self.client.post(self.url(path))
    }

    /// `GET path` as JSON, asserting 200.
    pub fn get_json(&self, path: &str) -> Value {
        let r = self.get(path).send().unwrap();
        assert_eq!(r.status(), 200, "GET {path}");
        r.json().unwrap()
    }

    /// The version in force.
    pub fn version(&self) -> String {
        self.get_json("/v1/rules")["version"]
            .as_str()
            .unwrap()
            .to_string()
    }

    /// `POST /v1/decide` for a payment still processing (attempt 1).
    pub fn payment_decision(&self) -> Value {
        let r = self
            .post("/v1/decide")
            .json(&json!({"biz": "PAYMENT", "code": "PAY_PROCESSING", "attempt": 1}))
            .send()
            .unwrap();
        assert_eq!(r.status(), 200);
        r.json().unwrap()
    }

    /// The delay for a payment still processing, in ms.
    pub fn payment_delay_ms(&self) -> Option<u64> {
        self.payment_decision()["delay_ms"].as_u64()
    }

    /// Sends SIGTERM and waits for the exit; returns the status and everything on stderr.
    pub fn terminate(self) -> (ExitStatus, String) {
        let (status, stderr, _) = self.terminate_within(DEADLINE);
        (status, stderr)
    }

    /// Sends SIGTERM and waits up to `limit` for the exit; returns the status, everything on
    /// stderr and how long the exit took.
    pub fn terminate_within(mut self, limit: Duration) -> (ExitStatus, String, Duration) {
        let pid = self.child.id().to_string();
        let sent = Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("kill runs");
        assert!(sent.success());
        let start = Instant::now();
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            assert!(
                start.elapsed() < limit,
                "the process did not exit within {limit:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        let took = start.elapsed();
        if let Some(reader) = self.stderr_reader.take() {
            let _ = reader.join();
        }
        (status, self.stderr(), took)
    }
}

impl Server {
    /// Kills the server with SIGKILL (by its PID, as a crash would) and waits for it.
    pub fn kill9(mut self) {
        let pid = self.child.id().to_string();
        let sent = Command::new("kill")
            .args(["-KILL", &pid])
            .status()
            .expect("kill runs");
        assert!(sent.success());
        wait_for_exit(&mut self.child);
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits for `child` to exit within the deadline.
pub fn wait_for_exit(child: &mut Child) -> ExitStatus {
    let end = Instant::now() + DEADLINE;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(Instant::now() < end, "the process did not exit in time");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Polls `check` until it holds or the deadline passes; true when it held.
pub fn eventually(check: impl FnMut() -> bool) -> bool {
    within(DEADLINE, check)
}

/// Polls `check` until it holds or `limit` passes; true when it held.
pub fn within(limit: Duration, mut check: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + limit;
    while Instant::now() < end {
        if check() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    check()
}

/// The files of release fixture `name` (`tests/fixtures/release/NAME/`), by file name.
pub fn release_files(name: &str) -> BTreeMap<String, String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/release")
        .join(name);
    let mut files = BTreeMap::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let file = entry.file_name().into_string().unwrap();
        files.insert(file, std::fs::read_to_string(entry.path()).unwrap());
    }
    files
}

/// The JSON body of a response, with its status.
pub fn status_and_json(r: Response) -> (u16, Value) {
    let status = r.status().as_u16();
    let text = r.text().unwrap();
    let body = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {text:?} (status {status})"));
    (status, body)
}

/// A blocking HTTP client's builder for the tests. The product builds reqwest without a TLS
/// provider of its own (src/outbound hands it a rustls config over ring), so a client a test
/// builds needs ring installed as the process's provider first: build every client here.
pub fn http() -> reqwest::blocking::ClientBuilder {
    rebound::outbound::use_ring_by_default();
    reqwest::blocking::Client::builder()
}

/// `GET url` with a client of [`http`].
pub fn get(url: impl reqwest::IntoUrl) -> reqwest::Result<reqwest::blocking::Response> {
    http().build()?.get(url).send()
}
