//! Shadow and canary on the real `rebound serve` (release.md), with real time and the bundled
//! pipeline's faults at `--time-scale 100`: a shadow decides beside the current set and is
//! never acted on; a canary that dead-letters everything is rolled back by its guard, a benign
//! one promoted after `promote_after`, one without samples held; a message's every retry is
//! decided by its arm; a push (or a rollback) during a canary is refused unless it aborts it.
//!
//! The fixtures' stable set retries every failure after 30 minutes of the rules' time (18 s
//! here), so within a test nothing is retried or dead-lettered by it: its ratios are 0.

use crate::support::*;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// `rebound serve` on a copy of release fixture `stable`, 200 new orders a second.
fn serve(stable: &str) -> (Server, tempfile::TempDir) {
    let rules = tempfile::tempdir().unwrap();
    for (file, text) in release_files(stable) {
        std::fs::write(rules.path().join(file), text).unwrap();
    }
    let server = Server::start(rules.path(), &["--time-scale", "100", "--rate", "200"]);
    (server, rules)
}

/// The sum of every sample of `name` (any labels) in `/metrics`, and of those whose labels
/// contain `with`.
fn metric(server: &Server, name: &str, with: &str) -> f64 {
    let text = server.get("/metrics").send().unwrap().text().unwrap();
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| l.starts_with(&format!("{name}{{")) || l.starts_with(&format!("{name} ")))
        .filter(|l| l.contains(with))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

fn canary(server: &Server) -> Value {
    server.get_json("/v1/rules/canary")
}

fn put_canary(server: &Server, body: &Value) -> (u16, Value) {
    status_and_json(server.put("/v1/rules/canary").json(body).send().unwrap())
}

fn dead_letters(server: &Server, label: &str) -> Vec<Value> {
    let page = server.get_json(&format!("/v1/dead-letters?label={label}&limit=1000"));
    page["dead_letters"].as_array().unwrap().clone()
}

#[test]
fn a_shadow_decides_beside_the_current_set_and_is_never_acted_on() {
    let (server, _rules) = serve("stable");
    let (status, body) = status_and_json(server.get("/v1/rules/shadow").send().unwrap());
    assert_eq!(
        (status, body),
        (404, json!({ "error": "no shadow set is installed" }))
    );
    // Its files are validated as a push's; its body takes files only.
    let bad = json!({ "files": { "a.yaml": "version: 1\nrules: [" } });
    let r = server.put("/v1/rules/shadow").json(&bad).send().unwrap();
    assert_eq!(r.status(), 422);
    let odd = json!({ "files": release_files("drop"), "percent": 5 });
    let r = server.put("/v1/rules/shadow").json(&odd).send().unwrap();
    assert_eq!(r.status(), 400);
    assert_eq!(server.get("/v1/rules/shadow").send().unwrap().status(), 404);
    let before = metric(&server, "rebound_failures_total", "");
    let (status, body) = status_and_json(
        server
            .put("/v1/rules/shadow")
            .json(&json!({ "files": release_files("drop") }))
            .send()
            .unwrap(),
    );
    assert_eq!(status, 200, "{body}");
    let after_put = metric(&server, "rebound_failures_total", "");
    assert!(
        within(
            DEADLINE * 3,
            || server.get_json("/v1/rules/shadow")["decisions"]
                .as_u64()
                .unwrap()
                >= 20
        ),
        "the shadow decides: {}",
        server.get_json("/v1/rules/shadow")
    );
    let before_get = metric(&server, "rebound_failures_total", "");
    let report = server.get_json("/v1/rules/shadow");
    let after_get = metric(&server, "rebound_failures_total", "");
    let (decisions, changed) = (
        report["decisions"].as_u64().unwrap(),
        report["changed"].as_u64().unwrap(),
    );
    assert_eq!(report["version"], body["version"]);
    // Every decision differs (a retry against a dead letter), and the rows say how.
    assert_eq!(changed, decisions, "{report}");
    let rows = report["by"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{report}");
    assert_eq!(
        rows[0]["old"],
        json!({"rule": "stable-all", "action": "retry", "label": null})
    );
    assert_eq!(
        rows[0]["new"],
        json!({"rule": "drop-all", "action": "dead_letter", "label": "dropped"})
    );
    assert_eq!(rows[0]["count"].as_u64(), Some(changed));
    // The decisions are those made while it was installed: every failure decided between the
    // two reads around the install and the report, and no more than those around them.
    let d = decisions as f64;
    assert!(
        before_get - after_put <= d && d <= after_get - before,
        "{} ≤ {d} ≤ {}",
        before_get - after_put,
        after_get - before
    );
    let counted = metric(&server, "rebound_shadow_decisions_total", "");
    assert!(
        counted >= d,
        "rebound_shadow_decisions_total {counted} ≥ {d}"
    );
    assert_eq!(
        metric(
            &server,
            "rebound_shadow_decisions_total",
            "changed=\"false\""
        ),
        0.0
    );
    // Nothing it decided was acted on: no letter of its label, no dead letter at all.
    assert!(dead_letters(&server, "dropped").is_empty());
    assert_eq!(metric(&server, "rebound_dead_letters_total", ""), 0.0);
    let r = server
        .client
        .delete(server.url("/v1/rules/shadow"))
        .send()
        .unwrap();
    assert_eq!(r.status(), 200);
    let r = server.get("/v1/rules/shadow").send().unwrap();
    assert_eq!(r.status(), 404);
}

#[test]
fn a_canary_that_dead_letters_everything_is_rolled_back_and_the_stable_set_runs_on() {
    let (server, _rules) = serve("stable");
    let stable = server.version();
    let r = server.get("/v1/rules/canary").send().unwrap();
    assert_eq!(r.status(), 404, "no canary yet");
    let (status, started) = put_canary(
        &server,
        &json!({
            "files": release_files("drop"), "percent": 50, "promote_after": "1h",
            "guard": {"retry_ratio": "+20%", "dead_letter_ratio": "+10%", "min_samples": 20},
        }),
    );
    assert_eq!(status, 200, "{started}");
    assert_eq!(started["state"], "running");
    assert!(
        within(DEADLINE * 3, || canary(&server)["state"] == "rolled_back"),
        "{}",
        canary(&server)
    );
    let ended = canary(&server);
    let reason = ended["reason"].as_str().unwrap();
    assert!(reason.starts_with("dead-letter ratio "), "{reason}");
    let arms = &ended["arms"];
    assert!(
        arms["canary"]["first_deliveries"].as_u64().unwrap() >= 20,
        "{ended}"
    );
    assert!(
        arms["stable"]["first_deliveries"].as_u64().unwrap() >= 20,
        "{ended}"
    );
    assert!(
        arms["canary"]["dead_letters"].as_u64().unwrap() > 0,
        "{ended}"
    );
    assert_eq!(arms["stable"]["dead_letters"], 0, "{ended}");
    for key in [
        "retries",
        "retry_ratio",
        "dead_letter_ratio",
        "success_by_attempt",
    ] {
        assert!(arms["canary"].get(key).is_some(), "{key} in {ended}");
    }
    // Recorded with the figures that caused it; the stable set is still in force.
    let history = server.get_json("/v1/rules/history");
    let entry = &history[0];
    assert_eq!(entry["source"], "rolled_back", "{history}");
    assert_eq!(entry["version"], started["version"]);
    assert_eq!(entry["operator"], "canary");
    assert_eq!(entry["reason"], reason);
    assert_eq!(entry["arms"], ended["arms"]);
    assert_eq!(server.version(), stable);
    assert_eq!(metric(&server, "rebound_canary_state", ""), 4.0);
    assert!(
        metric(
            &server,
            "rebound_canary_dead_letters_total",
            "arm=\"canary\""
        ) > 0.0
    );
    // No new letter of the candidate's once it is gone.
    std::thread::sleep(Duration::from_millis(500));
    let dropped = dead_letters(&server, "dropped").len();
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(dead_letters(&server, "dropped").len(), dropped);
    assert!(server.stderr().contains("canary rolled back"));
}

#[test]
fn a_benign_canary_is_promoted_after_promote_after() {
    let (server, _rules) = serve("stable");
    let (status, started) = put_canary(
        &server,
        &json!({
            "files": release_files("cosmetic"), "percent": 50, "promote_after": "3s",
            "guard": {"min_samples": 20},
        }),
    );
    assert_eq!(status, 200, "{started}");
    let t0 = Instant::now();
    assert!(
        within(DEADLINE * 3, || canary(&server)["state"] == "promoted"),
        "{}",
        canary(&server)
    );
    assert!(
        t0.elapsed() >= Duration::from_secs(2),
        "not before promote_after"
    );
    let rules = server.get_json("/v1/rules");
    assert_eq!(rules["version"], started["version"]);
    assert_eq!(rules["source"], "canary");
    let entry = &server.get_json("/v1/rules/history")[0];
    assert_eq!(entry["source"], "canary");
    assert_eq!(entry["result"], "accepted");
    assert!(
        entry["arms"]["canary"]["first_deliveries"]
            .as_u64()
            .unwrap()
            >= 20
    );
    assert_eq!(metric(&server, "rebound_canary_state", ""), 3.0);
}

#[test]
fn a_canary_without_its_samples_is_held_not_promoted() {
    let (server, _rules) = serve("stable");
    let stable = server.version();
    let (status, body) = put_canary(
        &server,
        &json!({
            "files": release_files("cosmetic"), "percent": 10, "promote_after": "1s",
            "guard": {"min_samples": 1_000_000},
        }),
    );
    assert_eq!(status, 200, "{body}");
    assert!(
        within(DEADLINE, || canary(&server)["state"] == "held"),
        "{}",
        canary(&server)
    );
    std::thread::sleep(Duration::from_secs(2));
    let held = canary(&server);
    assert_eq!(held["state"], "held", "{held}");
    assert!(
        held["reason"].as_str().unwrap().contains("1000000"),
        "{held}"
    );
    assert_eq!(server.version(), stable, "never promoted on no data");
    assert_eq!(metric(&server, "rebound_canary_state", ""), 2.0);
    // An operator's abort ends it, in the history with who and why.
    let r = server
        .client
        .delete(server.url("/v1/rules/canary"))
        .json(&json!({"operator": "ana", "reason": "not enough traffic"}))
        .send()
        .unwrap();
    let (status, ended) = status_and_json(r);
    assert_eq!(
        (status, &ended["state"]),
        (200, &json!("rolled_back")),
        "{ended}"
    );
    let entry = &server.get_json("/v1/rules/history")[0];
    assert_eq!(
        (&entry["source"], &entry["operator"], &entry["reason"]),
        (
            &json!("rolled_back"),
            &json!("ana"),
            &json!("not enough traffic")
        )
    );
    let r = server
        .client
        .delete(server.url("/v1/rules/canary"))
        .send()
        .unwrap();
    assert_eq!(r.status(), 404, "nothing runs any more");
}

#[test]
fn a_messages_retries_all_stay_in_its_arm() {
    let (server, _rules) = serve("arms-stable");
    let (status, body) = put_canary(
        &server,
        &json!({
            "files": release_files("arms-canary"), "percent": 50, "promote_after": "1h",
            "guard": {"min_samples": 1_000_000_000u64},
        }),
    );
    assert_eq!(status, 200, "{body}");
    // Letters whose messages were decided more than once, in both arms.
    let retried = |label: &str| {
        dead_letters(&server, label)
            .into_iter()
            .filter(|l| l["failures"].as_array().unwrap().len() >= 2)
            .collect::<Vec<_>>()
    };
    assert!(
        within(DEADLINE * 4, || !retried("stable-out").is_empty()
            && !retried("canary-out").is_empty()),
        "letters of both arms: {} stable, {} canary",
        retried("stable-out").len(),
        retried("canary-out").len()
    );
    for (label, rule) in [("stable-out", "stable-all"), ("canary-out", "canary-all")] {
        for letter in retried(label) {
            let rules: Vec<&str> = letter["failures"]
                .as_array()
                .unwrap()
                .iter()
                .map(|f| f["rule"].as_str().unwrap())
                .collect();
            assert!(rules.iter().all(|r| *r == rule), "{label}: {letter}");
        }
    }
    let running = canary(&server);
    assert_eq!(running["state"], "running");
    assert!(
        running["arms"]["canary"]["retries"].as_u64().unwrap() > 0,
        "{running}"
    );
    assert!(
        running["arms"]["stable"]["retries"].as_u64().unwrap() > 0,
        "{running}"
    );
}

#[test]
fn a_push_or_a_rollback_during_a_canary_is_refused_unless_it_aborts_it() {
    let (server, _rules) = serve("stable");
    let stable = server.version();
    let body = json!({
        "files": release_files("cosmetic"), "percent": 50, "promote_after": "1h",
        "guard": {"min_samples": 1_000_000},
    });
    let (status, started) = put_canary(&server, &body);
    assert_eq!(status, 200, "{started}");
    let (status, again) = put_canary(&server, &body);
    assert_eq!(status, 409, "one canary at a time: {again}");
    let push = |extra: Value| {
        let mut b = json!({ "files": release_files("drop") });
        b.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        status_and_json(server.put("/v1/rules").json(&b).send().unwrap())
    };
    let (status, refused) = push(json!({}));
    assert_eq!(
        (status, refused),
        (409, json!({ "error": "a canary is running" }))
    );
    let (status, refused) = status_and_json(server.post("/v1/rules/rollback").send().unwrap());
    assert_eq!(
        (status, refused),
        (409, json!({ "error": "a canary is running" }))
    );
    assert_eq!(server.version(), stable);
    assert_eq!(canary(&server)["state"], "running");
    let (status, pushed) = push(json!({ "abort_canary": true }));
    assert_eq!(status, 200, "{pushed}");
    assert_ne!(pushed["version"], json!(stable));
    assert_eq!(server.version(), pushed["version"].as_str().unwrap());
    let ended = canary(&server);
    assert_eq!(ended["state"], "rolled_back", "{ended}");
    let history = server.get_json("/v1/rules/history");
    assert_eq!(history[0]["source"], "push", "{history}");
    assert_eq!(history[1]["source"], "rolled_back", "{history}");
    assert_eq!(history[1]["version"], started["version"]);
    // A rollback says so too: the canary is aborted, then the set before goes back in force.
    let (status, again) = put_canary(&server, &body);
    assert_eq!(status, 200, "{again}");
    let r = server
        .post("/v1/rules/rollback")
        .json(&json!({ "abort_canary": true }))
        .send()
        .unwrap();
    let (status, rolled) = status_and_json(r);
    assert_eq!(
        (status, &rolled["version"]),
        (200, &json!(stable)),
        "{rolled}"
    );
    assert_eq!(canary(&server)["state"], "rolled_back");
    let history = server.get_json("/v1/rules/history");
    assert_eq!(
        (
            &history[0]["source"],
            &history[1]["source"],
            &history[1]["reason"]
        ),
        (
            &json!("rollback"),
            &json!("rolled_back"),
            &json!("aborted by a rollback")
        ),
        "{history}"
    );
}

#[test]
fn a_canarys_fields_are_checked_one_by_one() {
    let (server, _rules) = serve("stable");
    let files = release_files("cosmetic");
    let cases = [
        (json!({"files": files, "percent": 0}), 400, "percent"),
        (json!({"files": files, "percent": 150}), 400, "percent"),
        (json!({"files": files}), 400, "percent"),
        (
            json!({"files": files, "percent": 10, "biz": "PAYMENT"}),
            400,
            "biz",
        ),
        (
            json!({"files": files, "percent": 10, "biz": []}),
            400,
            "biz",
        ),
        (
            json!({"files": files, "percent": 10, "promote_after": "soon"}),
            400,
            "promote_after",
        ),
        (
            json!({"files": files, "percent": 10, "guard": {"retry_ratio": "20%"}}),
            400,
            "guard.retry_ratio",
        ),
        (
            json!({"files": files, "percent": 10, "guard": {"dead_letter_ratio": "-1%"}}),
            400,
            "guard.dead_letter_ratio",
        ),
        (
            json!({"files": files, "percent": 10, "guard": {"min_samples": 0}}),
            400,
            "min_samples",
        ),
        (
            json!({"files": files, "percent": 10, "guard": {"typo": 1}}),
            400,
            "typo",
        ),
        (
            json!({"files": files, "percent": 10, "colour": "red"}),
            400,
            "colour",
        ),
        (
            json!({"files": {"a.yaml": "version: 1\nrules: ["}, "percent": 10}),
            422,
            "",
        ),
    ];
    for (body, want, names) in cases {
        let (status, answer) = put_canary(&server, &body);
        assert_eq!(status, want, "{body} → {answer}");
        assert!(answer.to_string().contains(names), "{body} → {answer}");
    }
    let r = server.get("/v1/rules/canary").send().unwrap();
    assert_eq!(r.status(), 404, "none started");
}
