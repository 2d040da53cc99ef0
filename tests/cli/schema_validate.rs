//! Every shipped rule file and test file starts with its yaml-language-server modeline and is
//! valid against the checked-in JSON Schema.

use serde_json::Value;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn validator(name: &str) -> jsonschema::Validator {
    let text = std::fs::read_to_string(root().join("schemas").join(name)).unwrap();
    let schema: Value = serde_json::from_str(&text).unwrap();
    jsonschema::draft7::new(&schema).unwrap()
}

fn yaml_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml" || e == "yml"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no YAML files in {}", dir.display());
    files
}

fn check(files: &[PathBuf], schema: &str, modeline: &str) {
    let v = validator(schema);
    for file in files {
        let text = std::fs::read_to_string(file).unwrap();
        assert_eq!(
            text.lines().next(),
            Some(modeline),
            "{} must start with the modeline",
            file.display()
        );
        let doc: Value = serde_yaml::from_str(&text).unwrap();
        let errors: Vec<String> = v
            .iter_errors(&doc)
            .map(|e| format!("{}: {e}", e.instance_path()))
            .collect();
        assert!(
            errors.is_empty(),
            "{} is invalid against {schema}:\n{}",
            file.display(),
            errors.join("\n")
        );
    }
}

#[test]
fn shipped_rule_files_are_valid_against_the_rules_schema() {
    check(
        &yaml_files(&root().join("rules")),
        "rules.schema.json",
        "# yaml-language-server: $schema=../schemas/rules.schema.json",
    );
}

#[test]
fn shipped_test_files_are_valid_against_the_test_schema() {
    check(
        &yaml_files(&root().join("rules/tests")),
        "rules-test.schema.json",
        "# yaml-language-server: $schema=../../schemas/rules-test.schema.json",
    );
}

#[test]
fn the_schemas_reject_unknown_keys_and_wrong_shapes() {
    let rules = validator("rules.schema.json");
    let typo: Value =
        serde_yaml::from_str("version: 1\nrules:\n  - id: a\n    retry: { max_retry: 3 }\n")
            .unwrap();
    assert!(!rules.is_valid(&typo));
    let list: Value =
        serde_yaml::from_str("version: 1\nrules:\n  - id: a\n    match: { code: [A, 1] }\n")
            .unwrap();
    assert!(rules.is_valid(&list));
    let tests = validator("rules-test.schema.json");
    let bad: Value =
        serde_yaml::from_str("version: 1\ncases:\n  - name: x\n    expect: { action: retri }\n")
            .unwrap();
    assert!(!tests.is_valid(&bad));
    let pair: Value = serde_yaml::from_str(
        "version: 1\ncases:\n  - name: x\n    expect: { delay_between: [1s] }\n",
    )
    .unwrap();
    assert!(!tests.is_valid(&pair));
}
