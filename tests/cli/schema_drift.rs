//! The checked-in JSON Schemas are exactly what the Rust types generate.

use std::path::PathBuf;

#[test]
fn checked_in_schemas_match_the_types() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("schemas");
    for (name, generated) in rebound_engine::schema::generated() {
        let path = dir.join(name);
        let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            on_disk == generated,
            "schemas/{name} differs from what the Rust types generate.\n\
             Regenerate it with:  cargo run -- schema\n\
             (then review and commit the change)"
        );
    }
}

#[test]
fn schemas_are_draft07_with_hover_docs() {
    let schema = rebound_engine::schema::rules_schema();
    assert_eq!(schema["$schema"], "http://json-schema.org/draft-07/schema#");
    let rule = &schema["definitions"]["RuleSpec"];
    assert_eq!(rule["additionalProperties"], false);
    assert!(
        rule["properties"]["id"]["description"]
            .as_str()
            .unwrap()
            .contains("Unique id")
    );
    assert_eq!(schema["$id"], rebound_engine::schema::RULES_SCHEMA_ID);
    // Editors complete `jitter:` from the enum and the examples.
    let jitter = &schema["definitions"]["Jitter"];
    assert_eq!(
        jitter["anyOf"][0]["enum"],
        serde_json::json!(["none", "full", "equal", "decorrelated"])
    );
    assert!(jitter["examples"].as_array().unwrap().len() >= 4);
    let names = &schema["definitions"]["Names"]["anyOf"];
    assert_eq!(names[1]["type"], "array");
    let test = rebound_engine::schema::rules_test_schema();
    assert_eq!(test["$schema"], "http://json-schema.org/draft-07/schema#");
    assert_eq!(test["$id"], rebound_engine::schema::RULES_TEST_SCHEMA_ID);
    assert!(test["properties"]["paths"].is_object());
}

#[test]
fn schema_print_writes_exactly_the_checked_in_schema_to_stdout() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("schemas");
    for (which, file) in [
        ("rules", "rules.schema.json"),
        ("rules-test", "rules-test.schema.json"),
    ] {
        let out = assert_cmd::Command::new(env!("CARGO_BIN_EXE_rebound"))
            .args(["schema", "--print", which])
            .assert()
            .success()
            .get_output()
            .stdout
            .clone();
        let on_disk = std::fs::read(dir.join(file)).unwrap();
        assert!(
            out == on_disk,
            "`rebound schema --print {which}` differs from schemas/{file}"
        );
    }
    assert_cmd::Command::new(env!("CARGO_BIN_EXE_rebound"))
        .args(["schema", "--print", "rule"])
        .assert()
        .code(2);
}
