//! The retry paths over the admin API: `GET /v1/paths` is exactly `rebound paths --json` for
//! the set in force, `GET /v1/paths/{rule}.svg` each path's chart, an unknown rule 404; reads
//! need no token.

use crate::support::*;
use serde_json::Value;
use std::path::{Path, PathBuf};

fn shipped() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("rules")
}

fn paths_json(rules: &Path) -> Value {
    let out = rebound()
        .args(["paths", "--json", "--rules"])
        .arg(rules)
        .output()
        .unwrap();
    assert!(out.status.success());
    serde_json::from_slice(&out.stdout).unwrap()
}

/// `GET path`: the status, the content type and the body.
fn fetch(server: &Server, path: &str) -> (u16, String, String) {
    let r = server.get(path).send().unwrap();
    let status = r.status().as_u16();
    let kind = r.headers()["content-type"].to_str().unwrap().to_string();
    (status, kind, r.text().unwrap())
}

#[test]
fn paths_is_the_json_of_paths_json_and_each_rule_has_its_chart() {
    let server = Server::start(&shipped(), &[]);
    let api = server.get_json("/v1/paths");
    assert_eq!(api, paths_json(&shipped()));

    let rules: Vec<&str> = api["paths"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["rule"].as_str().unwrap())
        .collect();
    assert!(
        rules.len() >= 5 && rules.last() == Some(&"defaults"),
        "{rules:?}"
    );
    let charts = tempfile::tempdir().unwrap();
    let out = rebound()
        .args(["paths", "--rules"])
        .arg(shipped())
        .arg("--svg")
        .arg(charts.path())
        .output()
        .unwrap();
    assert!(out.status.success());
    for rule in rules {
        let (status, kind, body) = fetch(&server, &format!("/v1/paths/{rule}.svg"));
        assert_eq!(
            (status, kind.as_str()),
            (200, "image/svg+xml"),
            "{rule}: {body}"
        );
        let doc = roxmltree::Document::parse(&body)
            .unwrap_or_else(|e| panic!("{rule}.svg is not XML: {e}"));
        let root = doc.root_element();
        assert_eq!(root.tag_name().name(), "svg");
        let title = root.children().find(|n| n.has_tag_name("title"));
        assert_eq!(title.and_then(|t| t.text()), Some(rule));
        // The same chart that `paths --svg` writes.
        let written = std::fs::read_to_string(charts.path().join(format!("{rule}.svg"))).unwrap();
        assert_eq!(body, written, "{rule}");
    }
}

#[test]
fn an_unknown_rule_or_a_name_without_svg_is_a_json_404() {
    let server = Server::start(&shipped(), &[]);
    for (path, says) in [
        ("/v1/paths/no-such-rule.svg", "no rule 'no-such-rule'"),
        (
            "/v1/paths/payment-processing",
            "charts are /v1/paths/RULE_ID.svg",
        ),
    ] {
        let (status, kind, body) = fetch(&server, path);
        assert_eq!(status, 404, "{path}: {body}");
        assert!(kind.starts_with("application/json"), "{path}: {kind}");
        let body: Value = serde_json::from_str(&body).unwrap();
        assert!(
            body["error"].as_str().unwrap().contains(says),
            "{path}: {body}"
        );
    }
}

#[test]
fn the_paths_follow_the_set_in_force_and_need_no_token() {
    let dir = rules_dir_with("fast");
    let token_dir = tempfile::tempdir().unwrap();
    let token_file = token_dir.path().join("token");
    std::fs::write(&token_file, "s3cret-token\n").unwrap();
    let server = Server::start(dir.path(), &["--token-file", token_file.to_str().unwrap()]);
    let before = server.get_json("/v1/paths");
    assert_eq!(before["version"], server.version().as_str());
    let delay = |doc: &Value| doc["paths"][0]["retries"][0]["delay_max_ms"].clone();
    assert_eq!(delay(&before), 100);

    let r = server
        .put("/v1/rules")
        .bearer_auth("s3cret-token")
        .json(&push_body("slow"))
        .send()
        .unwrap();
    assert_eq!(r.status(), 200);
    let after = server.get_json("/v1/paths");
    assert_eq!(after["version"], server.version().as_str());
    assert_ne!(after["version"], before["version"]);
    assert_eq!(delay(&after), 200);
    let rule = after["paths"][0]["rule"].as_str().unwrap();
    let (status, _, body) = fetch(&server, &format!("/v1/paths/{rule}.svg"));
    assert_eq!(status, 200);
    assert!(body.contains(&format!("<title>{rule}</title>")), "{body}");
}
