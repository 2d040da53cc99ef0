//! End to end, at the edges: what a careless or hostile client sends the real `rebound serve`
//! binary, and what an operator's set-up gets wrong.

mod serve_support;

use serde_json::json;
use serve_support::*;

#[test]
fn a_file_name_too_long_gets_400_naming_the_limit_from_push_and_dry_run() {
    let dir = rules_dir_with("fast");
    let server = Server::start(dir.path(), &[]);
    let before = server.version();
    let text = files_of("slow")["10-payment.yaml"].clone();
    let long = format!("{}.yaml", "a".repeat(10_000));
    let body = json!({ "files": { long: text } });
    for request in [server.put("/v1/rules"), server.post("/v1/rules/validate")] {
        let (status, body) = status_and_json(request.json(&body).send().unwrap());
        assert_eq!(status, 400, "{body}");
        let message = body["error"].as_str().unwrap();
        assert!(message.contains("at most 242 bytes"), "{message}");
        assert!(
            message.len() < 300,
            "the name is not echoed whole: {message}"
        );
    }
    assert_eq!(server.version(), before);

    // The longest allowed name is written (its temporary name fits too).
    let longest = format!("{}.yaml", "a".repeat(242 - 5));
    let r = server
        .put("/v1/rules")
        .json(&json!({ "files": { longest.as_str(): text } }))
        .send()
        .unwrap();
    let (status, body) = status_and_json(r);
    assert_eq!(status, 200, "{body}");
    assert!(dir.path().join(&longest).is_file());
}

#[test]
fn a_name_the_rules_directory_cannot_hold_gets_400_and_changes_nothing() {
    let dir = rules_dir_with("fast");
    std::fs::create_dir(dir.path().join("zz.yaml")).unwrap();
    let server = Server::start(dir.path(), &[]);
    let before = server.version();
    let mut files = files_of("slow");
    files.insert("zz.yaml".into(), "version: 1\n".into());
    let r = server
        .put("/v1/rules")
        .json(&json!({ "files": files }))
        .send()
        .unwrap();
    let (status, body) = status_and_json(r);
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("zz.yaml"),
        "{body}"
    );
    assert_eq!(server.version(), before);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("10-payment.yaml")).unwrap(),
        files_of("fast")["10-payment.yaml"]
    );
}
