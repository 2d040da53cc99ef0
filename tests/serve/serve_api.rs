//! End to end: the real `rebound serve` binary, spoken to over loopback with a real HTTP
//! client, as an operator or a config center would.

/// The bounds of connections, origins, hosts and nesting.
mod bounds;
/// The edges: what a careless or hostile client sends, what a set-up gets wrong.
mod edges;
/// The rule history with files, and a rollback to a chosen version.
mod history;
/// The retry paths: `GET /v1/paths` and each rule's chart.
mod paths;

use crate::support::*;
use serde_json::{Value, json};

#[test]
fn pushing_a_set_changes_decisions_and_is_written_into_the_rules_directory() {
    let dir = rules_dir_with("fast");
    let server = Server::start(dir.path(), &[]);
    assert_eq!(server.payment_delay_ms(), Some(100));

    let r = server
        .put("/v1/rules")
        .json(&push_body("slow"))
        .send()
        .unwrap();
    let (status, body) = status_and_json(r);
    assert_eq!(status, 200, "{body}");
    let version = body["version"].as_str().unwrap().to_string();
    assert_eq!(server.payment_delay_ms(), Some(200));
    assert_eq!(server.payment_decision()["version"], version.as_str());
    assert_eq!(
        std::fs::read_to_string(dir.path().join("10-payment.yaml")).unwrap(),
        files_of("slow")["10-payment.yaml"]
    );

    let rules = server.get_json("/v1/rules");
    assert_eq!(rules["version"], version.as_str());
    assert_eq!(rules["source"], "push");
    assert!(rules["loaded_at"].as_str().unwrap().ends_with('Z'));
    assert_eq!(rules["files"], json!(files_of("slow")));
}

#[test]
fn an_invalid_push_gets_422_with_positions_and_the_old_set_keeps_deciding() {
    let dir = rules_dir_with("fast");
    let server = Server::start(dir.path(), &[]);
    let before = server.version();

    let r = server
        .put("/v1/rules")
        .json(&push_body("broken"))
        .send()
        .unwrap();
    let (status, body) = status_and_json(r);
    assert_eq!(status, 422, "{body}");
    let first = &body["errors"][0];
    assert_eq!(first["file"], "10-payment.yaml");
    assert_eq!(first["line"], 7);
    assert_eq!(first["column"], 7);
    assert!(
        first["message"].as_str().unwrap().contains("max_retry"),
        "{first}"
    );

    assert_eq!(server.version(), before);
    assert_eq!(server.payment_delay_ms(), Some(100));
    assert_eq!(
        std::fs::read_to_string(dir.path().join("10-payment.yaml")).unwrap(),
        files_of("fast")["10-payment.yaml"]
    );
    let history = server.get_json("/v1/rules/history");
    assert_eq!(history[0]["result"], "rejected");
    assert_eq!(history[0]["source"], "push");
    assert_eq!(history[0]["errors"][0]["line"], 7);
}

#[test]
fn if_match_with_a_stale_version_gets_409_and_the_current_one_goes_through() {
    let dir = rules_dir_with("fast");
    let server = Server::start(dir.path(), &[]);
    let current = server.version();

    let r = server
        .put("/v1/rules")
        .header("If-Match", "\"0000000000000000\"")
        .json(&push_body("slow"))
        .send()
        .unwrap();
    let (status, body) = status_and_json(r);
    assert_eq!(status, 409, "{body}");
    assert_eq!(server.payment_delay_ms(), Some(100));

    // Quotes are optional.
    let r = server
        .put("/v1/rules")
        .header("If-Match", current.as_str())
        .json(&push_body("slow"))
        .send()
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(server.payment_delay_ms(), Some(200));

    // The version just replaced is stale now.
    let r = server
        .put("/v1/rules")
        .header("If-Match", format!("\"{current}\""))
        .json(&push_body("fast"))
        .send()
        .unwrap();
    assert_eq!(r.status(), 409);
}

#[test]
fn rollback_returns_to_the_previous_version_and_409_when_there_is_none() {
    let dir = rules_dir_with("fast");
    let server = Server::start(dir.path(), &[]);
    let start = server.version();

    let r = server.post("/v1/rules/rollback").send().unwrap();
    let (status, body) = status_and_json(r);
    assert_eq!(status, 409, "{body}");

    let r = server
        .put("/v1/rules")
        .json(&push_body("slow"))
        .send()
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(server.payment_delay_ms(), Some(200));

    // The body is optional, but when there is one it must be JSON.
    let r = server
        .post("/v1/rules/rollback")
        .body("not json")
        .send()
        .unwrap();
    assert_eq!(status_and_json(r).0, 400);
    assert_eq!(server.payment_delay_ms(), Some(200));
    let r = server
        .post("/v1/rules/rollback")
        .json(&json!({ "reason": "the slow set was a mistake" }))
        .send()
        .unwrap();
    let (status, body) = status_and_json(r);
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["version"], start.as_str());
    assert_eq!(server.version(), start);
    assert_eq!(server.payment_delay_ms(), Some(100));
    assert_eq!(
        std::fs::read_to_string(dir.path().join("10-payment.yaml")).unwrap(),
        files_of("fast")["10-payment.yaml"]
    );
    assert_eq!(server.get_json("/v1/rules")["source"], "rollback");

    let history = server.get_json("/v1/rules/history");
    let sources: Vec<&str> = history
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["source"].as_str().unwrap())
        .collect();
    assert_eq!(sources, ["rollback", "push", "file"]);
    for entry in history.as_array().unwrap() {
        assert_eq!(entry["result"], "accepted");
        assert!(entry.get("errors").is_none(), "{entry}");
        assert!(entry["at"].as_str().unwrap().ends_with('Z'));
    }
}

#[test]
fn validate_is_a_dry_run() {
    let dir = rules_dir_with("fast");
    let server = Server::start(dir.path(), &[]);
    let before = server.get_json("/v1/rules/history");

    let r = server
        .post("/v1/rules/validate")
        .json(&push_body("slow"))
        .send()
        .unwrap();
    let (status, body) = status_and_json(r);
    assert_eq!(status, 200, "{body}");
    assert_ne!(body["version"], server.version().as_str());

    let r = server
        .post("/v1/rules/validate")
        .json(&push_body("broken"))
        .send()
        .unwrap();
    let (status, body) = status_and_json(r);
    assert_eq!(status, 422);
    assert_eq!(body["errors"][0]["line"], 7);

    assert_eq!(server.payment_delay_ms(), Some(100));
    assert_eq!(server.get_json("/v1/rules/history"), before);
}

#[test]
fn unsafe_file_names_are_refused_with_400_and_nothing_is_written() {
    let dir = rules_dir_with("fast");
    let server = Server::start(dir.path(), &[]);
    for name in ["../x.yaml", "a/b.yaml", "..", "x.json", "/etc/x.yaml"] {
        let body = json!({ "files": { name: "version: 1\n" } });
        let r = server.put("/v1/rules").json(&body).send().unwrap();
        let (status, body) = status_and_json(r);
        assert_eq!(status, 400, "{name}: {body}");
        assert!(body["error"].is_string());
    }
    assert!(!dir.path().parent().unwrap().join("x.yaml").exists());
    assert_eq!(server.payment_delay_ms(), Some(100));
}

#[test]
fn bodies_over_four_mib_get_413_and_malformed_json_gets_400() {
    let dir = rules_dir_with("fast");
    let server = Server::start(dir.path(), &[]);

    let big = "#".repeat(4 * 1024 * 1024 + 1024);
    let body = json!({ "files": { "a.yaml": big } }).to_string();
    let r = server
        .put("/v1/rules")
        .header("Content-Type", "application/json")
        .body(body)
        .send()
        .unwrap();
    let (status, body) = status_and_json(r);
    assert_eq!(status, 413, "{body}");
    assert!(body["error"].is_string());

    for (path, bad) in [
        ("/v1/rules", "{\"files\": "),
        ("/v1/rules/validate", "not json"),
        ("/v1/decide", "{\"biz\": \"PAYMENT\""),
    ] {
        let request = if path == "/v1/rules" {
            server.put(path)
        } else {
            server.post(path)
        };
        let r = request
            .header("Content-Type", "application/json")
            .body(bad)
            .send()
            .unwrap();
        let (status, body) = status_and_json(r);
        assert_eq!(status, 400, "{path}: {body}");
        assert!(
            body["error"].as_str().unwrap().contains("JSON"),
            "{path}: {body}"
        );
    }
    assert_eq!(server.payment_delay_ms(), Some(100));
}

#[test]
fn decide_answers_exactly_what_decide_json_prints() {
    let server = Server::start(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("rules"),
        &[],
    );
    let cases = [
        (
            json!({"biz": "PAYMENT", "code": "PAY_PROCESSING", "attempt": 1}),
            vec![
                "--biz",
                "PAYMENT",
                "--code",
                "PAY_PROCESSING",
                "--attempt",
                "1",
            ],
        ),
        (
            json!({"biz": "ORDER", "code": "RATE_LIMITED", "attempt": 2, "retry_after_ms": 1500,
                   "elapsed_ms": 2000, "seed": 42}),
            vec![
                "--biz",
                "ORDER",
                "--code",
                "RATE_LIMITED",
                "--attempt",
                "2",
                "--retry-after",
                "1500ms",
                "--elapsed",
                "2s",
                "--seed",
                "42",
            ],
        ),
        (
            json!({"biz": "ORDER", "code": "DB_LOCK_WAIT", "attempt": 3, "last_delay_ms": 2000,
                   "attrs": {"region": "eu"}, "signals": {"fail_rate": 0.9}, "seed": 7}),
            vec![
                "--biz",
                "ORDER",
                "--code",
                "DB_LOCK_WAIT",
                "--attempt",
                "3",
                "--last-delay",
                "2s",
                "--attr",
                "region=eu",
                "--signal",
                "fail_rate=0.9",
                "--seed",
                "7",
            ],
        ),
        (
            json!({"biz": "ORDER", "code": "BAD_JSON", "attempt": 1}),
            vec!["--biz", "ORDER", "--code", "BAD_JSON", "--attempt", "1"],
        ),
    ];
    for (body, flags) in cases {
        let r = server.post("/v1/decide").json(&body).send().unwrap();
        let (status, api) = status_and_json(r);
        assert_eq!(status, 200, "{api}");
        let out = rebound()
            .args(["decide", "--json", "--rules"])
            .arg(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("rules"))
            .args(&flags)
            .output()
            .unwrap();
        assert!(out.status.success());
        let cli: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(api, cli, "{body}");
    }

    let r = server
        .post("/v1/decide")
        .json(
            &json!({"biz": "PAYMENT", "code": "PAY_PROCESSING", "attempt": 1,
                      "elapsed_ms": null, "retry_after_ms": null, "attrs": null, "seed": null}),
        )
        .send()
        .unwrap();
    let (status, body) = status_and_json(r);
    assert_eq!(status, 200, "optional fields may be null: {body}");
    assert_eq!(body["delay_ms"], 100);

    let r = server
        .post("/v1/decide")
        .json(&json!({"biz": "PAYMENT", "code": "X", "attempt": 0}))
        .send()
        .unwrap();
    assert_eq!(r.status(), 400);
    let r = server
        .post("/v1/decide")
        .json(&json!({"biz": "PAYMENT", "code": "X", "attempt": 1, "retry_after": 5}))
        .send()
        .unwrap();
    let (status, body) = status_and_json(r);
    assert_eq!(status, 400, "a misspelt field is not ignored: {body}");
}

#[test]
fn decide_takes_headers_and_now_as_decide_does() {
    let fixture =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/headers-now");
    let server = Server::start(&fixture, &[]);
    for (body, flags) in [
        (
            json!({"biz": "", "code": "X", "attempt": 1, "headers": {"tenant": "vip-eu"},
                   "now": "2026-01-05T12:00:00Z"}),
            vec!["--header", "tenant=vip-eu", "--now", "2026-01-05T12:00:00Z"],
        ),
        (
            json!({"biz": "", "code": "X", "attempt": 1, "now": "2026-01-05T08:30:00+01:00"}),
            vec!["--now", "2026-01-05T08:30:00+01:00"],
        ),
    ] {
        let r = server.post("/v1/decide").json(&body).send().unwrap();
        let (status, api) = status_and_json(r);
        assert_eq!(status, 200, "{api}");
        let out = rebound()
            .args([
                "decide",
                "--json",
                "--code",
                "X",
                "--attempt",
                "1",
                "--rules",
            ])
            .arg(&fixture)
            .args(&flags)
            .output()
            .unwrap();
        let cli: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(api, cli, "{body}");
    }
    let r = server
        .post("/v1/decide")
        .json(&json!({"biz": "", "code": "X", "attempt": 1, "now": "at noon"}))
        .send()
        .unwrap();
    let (status, body) = status_and_json(r);
    assert_eq!(status, 400, "{body}");
    assert!(body["error"].as_str().unwrap().contains("'now'"), "{body}");
}

#[test]
fn health_metrics_and_unknown_routes() {
    let dir = rules_dir_with("fast");
    let server = Server::start(dir.path(), &[]);
    let health = server.get_json("/healthz");
    assert_eq!(health["status"], "ok");

    server
        .put("/v1/rules")
        .json(&push_body("broken"))
        .send()
        .unwrap();
    let r = server
        .put("/v1/rules")
        .json(&push_body("slow"))
        .send()
        .unwrap();
    let version = status_and_json(r).1["version"]
        .as_str()
        .unwrap()
        .to_string();

    let r = server.get("/metrics").send().unwrap();
    assert_eq!(r.status(), 200);
    assert!(
        r.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain")
    );
    let text = r.text().unwrap();
    // The start-up load and the push were accepted; the broken push was rejected.
    assert!(
        text.contains("rebound_rules_reloads_total{result=\"accepted\"} 2"),
        "{text}"
    );
    assert!(
        text.contains("rebound_rules_reloads_total{result=\"rejected\"} 1"),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "rebound_rules_version_info{{version=\"{version}\"}} 1"
        )),
        "{text}"
    );
    // Guard and script errors per rule of the set in force, from the start.
    assert!(
        text.contains("rebound_rule_errors_total{rule=\"defaults\"} 0"),
        "{text}"
    );

    let r = server.get("/v1/nothing-here").send().unwrap();
    let (status, body) = status_and_json(r);
    assert_eq!(status, 404);
    assert!(body["error"].is_string());
    let r = server
        .client
        .delete(server.url("/v1/rules"))
        .send()
        .unwrap();
    assert_eq!(status_and_json(r).0, 405);
}

#[test]
fn with_a_token_writes_need_it_and_reads_decide_and_validate_do_not() {
    let dir = rules_dir_with("fast");
    let token_dir = tempfile::tempdir().unwrap();
    let token_file = token_dir.path().join("token");
    std::fs::write(&token_file, "s3cret-token\n").unwrap();
    let server = Server::start(dir.path(), &["--token-file", token_file.to_str().unwrap()]);

    let r = server
        .put("/v1/rules")
        .json(&push_body("slow"))
        .send()
        .unwrap();
    let (status, body) = status_and_json(r);
    assert_eq!(status, 401, "{body}");
    let r = server
        .put("/v1/rules")
        .bearer_auth("wrong")
        .json(&push_body("slow"))
        .send()
        .unwrap();
    assert_eq!(r.status(), 401);
    assert!(r.headers().contains_key("www-authenticate"));
    let r = server.post("/v1/rules/rollback").send().unwrap();
    assert_eq!(r.status(), 401);
    assert_eq!(server.payment_delay_ms(), Some(100));

    // Reads, decide and validate need no token.
    server.get_json("/v1/rules");
    server.get_json("/v1/rules/history");
    let r = server
        .post("/v1/rules/validate")
        .json(&push_body("slow"))
        .send()
        .unwrap();
    assert_eq!(r.status(), 200);

    let r = server
        .put("/v1/rules")
        .bearer_auth("s3cret-token")
        .json(&push_body("slow"))
        .send()
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(server.payment_delay_ms(), Some(200));
    let r = server
        .post("/v1/rules/rollback")
        .bearer_auth("s3cret-token")
        .send()
        .unwrap();
    assert_eq!(r.status(), 200);
}

#[test]
fn the_token_can_come_from_the_environment() {
    let dir = rules_dir_with("fast");
    let server = Server::start_with_env(dir.path(), &[], &[("REBOUND_ADMIN_TOKEN", "from-env")]);
    let r = server
        .put("/v1/rules")
        .json(&push_body("slow"))
        .send()
        .unwrap();
    assert_eq!(r.status(), 401);
    let r = server
        .put("/v1/rules")
        .header("Authorization", "bearer from-env")
        .json(&push_body("slow"))
        .send()
        .unwrap();
    assert_eq!(r.status(), 200);
}

#[test]
fn serve_refuses_a_non_loopback_address_without_a_token() {
    let dir = rules_dir_with("fast");
    let out = rebound()
        .args(["serve", "--admin", "0.0.0.0:0", "--rules"])
        .arg(dir.path())
        .env_remove("REBOUND_ADMIN_TOKEN")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("token"), "{stderr}");
    assert!(out.stdout.is_empty());
}

#[test]
fn start_up_errors_exit_with_the_documented_codes() {
    // An invalid set: 1, with the diagnostics.
    let broken = rules_dir_with("broken");
    let out = rebound()
        .args(["serve", "--admin", "127.0.0.1:0", "--rules"])
        .arg(broken.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("10-payment.yaml:7:7"));

    // A missing directory: 2.
    let out = rebound()
        .args([
            "serve",
            "--admin",
            "127.0.0.1:0",
            "--rules",
            "/nonexistent/rules",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));

    // An address already taken: 2.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let dir = rules_dir_with("fast");
    let out = rebound()
        .args(["serve", "--admin", &addr, "--rules"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot listen"));

    // Not an address at all: 2.
    let out = rebound()
        .args(["serve", "--admin", "nowhere", "--rules"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn sigterm_stops_gracefully_with_exit_0() {
    let dir = rules_dir_with("fast");
    let data = tempfile::tempdir().unwrap();
    let data_arg = data.path().to_str().unwrap();
    let server = Server::start(dir.path(), &["--data", data_arg, "--time-scale", "10"]);
    assert_eq!(server.payment_delay_ms(), Some(100));
    let (status, stderr) = server.terminate();
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("stopped"), "{stderr}");
}

/// The `_bucket` samples of histogram `name` in order, and its `_count`.
fn histogram(text: &str, name: &str) -> (Vec<(String, u64)>, u64) {
    let mut buckets = Vec::new();
    let mut count = None;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix(&format!("{name}_bucket{{le=\"")) {
            let (le, value) = rest.split_once("\"} ").unwrap();
            buckets.push((le.to_string(), value.trim().parse().unwrap()));
        } else if let Some(value) = line.strip_prefix(&format!("{name}_count ")) {
            count = Some(value.trim().parse().unwrap());
        }
    }
    (
        buckets,
        count.unwrap_or_else(|| panic!("no {name}_count in:\n{text}")),
    )
}

#[test]
fn histograms_on_metrics_are_cumulative_and_end_at_their_count() {
    // The shipped rules over the bundled pipeline, fast enough that retries happen at once.
    let rules = tempfile::tempdir().unwrap();
    let shipped = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("rules");
    for entry in std::fs::read_dir(shipped).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "yaml") {
            std::fs::copy(&path, rules.path().join(path.file_name().unwrap())).unwrap();
        }
    }
    let server = Server::start(rules.path(), &["--time-scale", "100", "--rate", "200"]);
    let names = [
        "rebound_complete_latency_seconds",
        "rebound_retry_delay_seconds",
    ];
    let scrape = |accept: &str| {
        server
            .get("/metrics")
            .header("accept", accept)
            .send()
            .unwrap()
            .text()
            .unwrap()
    };
    assert!(
        eventually(|| {
            let text = scrape("text/plain");
            names.iter().all(|n| histogram(&text, n).1 >= 3)
        }),
        "no observations in both histograms:\n{}",
        scrape("text/plain")
    );
    for accept in ["text/plain", "application/openmetrics-text"] {
        let text = scrape(accept);
        for name in names {
            let (buckets, count) = histogram(&text, name);
            assert_eq!(buckets.last().map(|b| b.0.as_str()), Some("+Inf"), "{text}");
            // Prometheus: the `+Inf` bucket is `_count`, and buckets only grow with `le`.
            assert_eq!(
                buckets.last().unwrap().1,
                count,
                "{name} ({accept}):\n{text}"
            );
            assert!(
                buckets.windows(2).all(|w| w[0].1 <= w[1].1),
                "{name} buckets are not cumulative ({accept}):\n{text}"
            );
        }
    }
}
