//! The server the console runs on in these tests: a real `rebound run --admin 127.0.0.1:0`
//! with the admin token in `REBOUND_ADMIN_TOKEN`, on a copy of the shipped rules (pushes write
//! into it) and a data directory of its own, and the API calls a test makes beside the browser.
//!
//! The run is 3,000 orders at `--time-scale 1`: the poison orders (`BAD_JSON`,
//! `VALIDATION_FAILED`, label L3) are dead letters within a second, and the run stays up for
//! minutes while the shipped rules' slow schedules (30 s, 2 min, 10 min for missing stock)
//! play out in real time, far longer than a test clicks. It is killed when the test ends.

use crate::support::{Running, admin_base, run_cmd, shipped_rules};
use rebound_runtime::store::{SqliteStore, Store, WriteOp};
use serde_json::{Value, json};
use std::time::Duration;

/// The admin token writes need.
pub const TOKEN: &str = "console-test-token";

const MESSAGES: u64 = 3_000;

/// A running `rebound run --admin`.
pub struct Console {
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    /// The rule directory the run reads (a copy of the shipped rules).
    pub rules: tempfile::TempDir,
    _data: tempfile::TempDir,
    http: reqwest::blocking::Client,
    _run: Running,
}

impl Console {
    /// A run on the shipped rules, once it has poison letters (L3) to show.
    pub fn start() -> Console {
        Console::start_with(Vec::new())
    }

    /// The same, with `letters` written into its store before it starts.
    pub fn start_with(letters: Vec<WriteOp>) -> Console {
        Console::start_on(letters, false)
    }

    /// A run on the shipped rules and their rule tests (`rules/tests`), which a push runs.
    pub fn start_with_rule_tests() -> Console {
        Console::start_on(Vec::new(), true)
    }

    fn start_on(letters: Vec<WriteOp>, rule_tests: bool) -> Console {
        let rules = tempfile::tempdir().expect("a rules directory");
        copy_files(&shipped_rules(), rules.path());
        if rule_tests {
            let tests = rules.path().join("tests");
            std::fs::create_dir(&tests).expect("a tests directory");
            copy_files(&shipped_rules().join("tests"), &tests);
        }
        let data = tempfile::tempdir().expect("a data directory");
        if !letters.is_empty() {
            let store = SqliteStore::open(data.path()).expect("open the store");
            // One commit each, in order: a replay acts on the letter written before it.
            for op in letters {
                store.apply(&[op]).expect("write the letters");
            }
        }
        let mut cmd = run_cmd(data.path(), rules.path(), MESSAGES, 1.0);
        cmd.args(["--admin", "127.0.0.1:0"])
            .env("REBOUND_ADMIN_TOKEN", TOKEN);
        let mut run = Running::spawn(cmd);
        let base = admin_base(&mut run);
        rebound::outbound::use_ring_by_default();
        let console = Console {
            base,
            rules,
            _data: data,
            http: reqwest::blocking::Client::builder()
                .timeout(Duration::from_secs(60))
                .build()
                .expect("an HTTP client"),
            _run: run,
        };
        let start = std::time::Instant::now();
        while console.get("/v1/dead-letters?label=L3&limit=1")["total"]
            .as_u64()
            .unwrap_or(0)
            < 5
        {
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "no poison letters after a minute"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        console
    }

    /// `method path` with `body` and the token: the status and the JSON answer.
    pub fn send(&self, method: reqwest::Method, path: &str, body: Value) -> (u16, Value) {
        let res = self
            .http
            .request(method.clone(), self.url(path))
            .bearer_auth(TOKEN)
            .json(&body)
            .send()
            .unwrap_or_else(|e| panic!("{method} {path}: {e}"));
        let status = res.status().as_u16();
        (status, res.json().unwrap_or(Value::Null))
    }

    /// The URL of `path` on the admin address.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// `GET path`, which must answer 200 with JSON.
    pub fn get(&self, path: &str) -> Value {
        let res = self
            .http
            .get(self.url(path))
            .send()
            .unwrap_or_else(|e| panic!("GET {path}: {e}"));
        let status = res.status();
        let text = res.text().unwrap_or_default();
        assert_eq!(status, 200, "GET {path}: {text}");
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("GET {path}: {e}: {text}"))
    }

    /// `GET path`: the status, the headers and the body.
    pub fn fetch(&self, path: &str) -> (u16, reqwest::header::HeaderMap, String) {
        let res = self
            .http
            .get(self.url(path))
            .send()
            .unwrap_or_else(|e| panic!("GET {path}: {e}"));
        let status = res.status().as_u16();
        let headers = res.headers().clone();
        (status, headers, res.text().unwrap_or_default())
    }

    /// `POST path` with `body` and the token; the answer must be 200.
    pub fn post(&self, path: &str, body: Value) -> Value {
        let res = self
            .http
            .post(self.url(path))
            .bearer_auth(TOKEN)
            .json(&body)
            .send()
            .unwrap_or_else(|e| panic!("POST {path}: {e}"));
        let status = res.status();
        let body: Value = res.json().unwrap_or_else(|e| panic!("POST {path}: {e}"));
        assert_eq!(status, 200, "POST {path}: {body}");
        body
    }

    /// The rule set in force: its version and files.
    pub fn rules(&self) -> (String, serde_json::Map<String, Value>) {
        let rules = self.get("/v1/rules");
        (
            rules["version"].as_str().expect("a version").to_owned(),
            rules["files"].as_object().expect("files").clone(),
        )
    }

    /// `PUT /v1/rules` of `files` with the token (it must be accepted): the new version.
    pub fn push(&self, files: &serde_json::Map<String, Value>) -> String {
        let res = self
            .http
            .put(self.url("/v1/rules"))
            .bearer_auth(TOKEN)
            .json(&json!({ "files": files }))
            .send()
            .expect("PUT /v1/rules");
        let status = res.status();
        let body: Value = res.json().expect("JSON");
        assert_eq!(status, 200, "PUT /v1/rules: {body}");
        body["version"].as_str().expect("a version").to_owned()
    }

    /// `POST /v1/rules/validate` of `files`: its errors as `file:line:col`, none if valid.
    pub fn validate(&self, files: &serde_json::Map<String, Value>) -> Vec<String> {
        let res = self
            .http
            .post(self.url("/v1/rules/validate"))
            .json(&json!({ "files": files }))
            .send()
            .expect("POST /v1/rules/validate");
        let body: Value = res.json().expect("JSON");
        body["errors"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|e| {
                format!(
                    "{}:{}:{}",
                    e["file"].as_str().unwrap(),
                    e["line"],
                    e["column"]
                )
            })
            .collect()
    }
}

/// Copies the files (not the directories) of `from` into `to`.
fn copy_files(from: &std::path::Path, to: &std::path::Path) {
    for entry in std::fs::read_dir(from).expect("the shipped rules") {
        let path = entry.expect("a rule file").path();
        if path.is_file() {
            let dest = to.join(path.file_name().expect("a file name"));
            std::fs::copy(&path, dest).expect("copy a rule file");
        }
    }
}
