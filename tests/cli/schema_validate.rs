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

/// The errors of validating the YAML `text` against the rule-file schema.
fn rules_schema_errors(text: &str) -> Vec<String> {
    let doc: Value = serde_yaml::from_str(text).unwrap();
    validator("rules.schema.json")
        .iter_errors(&doc)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect()
}

#[test]
fn the_rules_schema_rejects_what_check_rejects() {
    let rule = |body: &str| format!("version: 1\nrules:\n  - id: a\n{body}");
    for (what, text) in [
        (
            "a duration with a unit of its own",
            rule("    retry: { max_elapsed: 10sec }\n"),
        ),
        (
            "a misspelt jitter",
            rule("    retry: { backoff: { fixed: 1s, jitter: ful } }\n"),
        ),
        (
            "a comparison with no operator",
            rule("    match: { attempt: \"=> 5\" }\n"),
        ),
        (
            "an id in capitals",
            "version: 1\nrules:\n  - id: DB_Lock\n".to_string(),
        ),
        (
            "retry beside give_up",
            rule("    retry: { max_retries: 1 }\n    give_up: true\n"),
        ),
        (
            "a question-mark glob",
            rule("    match: { code: \"PAY?\" }\n"),
        ),
        (
            "the reserved id",
            "version: 1\nrules:\n  - id: defaults\n".to_string(),
        ),
        (
            "an elapsed without operator",
            rule("    match: { elapsed: 30s }\n"),
        ),
        (
            "a percentage over 100",
            rule("    retry: { backoff: { fixed: 1s, jitter: 120% } }\n"),
        ),
        (
            "two backoff kinds",
            rule("    retry: { backoff: { fixed: 1s, schedule: [1s] } }\n"),
        ),
        (
            "a jitter alone",
            rule("    retry: { backoff: { jitter: full } }\n"),
        ),
        ("an empty label", rule("    dead_letter: \" \"\n")),
    ] {
        assert!(
            !rules_schema_errors(&text).is_empty(),
            "{what} passes the schema:\n{text}"
        );
    }
    // The values next to them that check accepts, the schema accepts too.
    for text in [
        rule("    retry: { max_elapsed: 1h30m, backoff: { fixed: 250, jitter: \"20%\" } }\n"),
        rule("    retry: { backoff: { schedule: [1.5s, 2m], jitter: 100ms } }\n"),
        rule("    match: { attempt: [\">= 5\", \"!=7\", 3], elapsed: \"> 30s\" }\n"),
        rule("    match: { code: \"*DB_LOCK*\", attrs: { region: [EU, \"US*\"] } }\n"),
        rule("    retry: { max_retries: 1 }\n    give_up: false\n"),
        "version: 1\nrules:\n  - id: db-lock.v2_x\n    give_up: true\n".to_string(),
    ] {
        assert_eq!(rules_schema_errors(&text), Vec::<String>::new(), "{text}");
    }
}

#[test]
fn the_error_fixtures_of_those_values_fail_the_schema() {
    for name in [
        "bad-duration",
        "bad-jitter",
        "bad-comparison",
        "bad-id",
        "retry-and-give-up",
        "bad-glob",
        "reserved-id",
        "two-backoff-kinds",
        "empty-label",
    ] {
        let dir = root().join("tests/fixtures/errors").join(name);
        let errors: usize = yaml_files(&dir)
            .iter()
            .map(|f| rules_schema_errors(&std::fs::read_to_string(f).unwrap()).len())
            .sum();
        assert!(errors > 0, "tests/fixtures/errors/{name} passes the schema");
    }
}

/// Every directory under `dir` (itself included) that holds rule files.
fn rule_dirs(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut has_yaml = false;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n != "tests") {
                rule_dirs(&path, out);
            }
        } else if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
            has_yaml = true;
        }
    }
    if has_yaml {
        out.push(dir.to_path_buf());
    }
}

#[test]
fn every_fixture_set_that_loads_is_valid_against_the_rules_schema() {
    let mut dirs = Vec::new();
    rule_dirs(&root().join("tests/fixtures"), &mut dirs);
    let mut valid = 0;
    for dir in dirs {
        if rebound_engine::load_dir(&dir).unwrap().is_err() {
            continue;
        }
        valid += 1;
        for file in yaml_files(&dir) {
            let errors = rules_schema_errors(&std::fs::read_to_string(&file).unwrap());
            assert!(
                errors.is_empty(),
                "{} loads but is invalid against the schema:\n{}",
                file.display(),
                errors.join("\n")
            );
        }
    }
    assert!(valid >= 5, "only {valid} fixture sets load");
}

#[test]
fn the_rules_schema_knows_labels_as_check_does() {
    let spec = root().join("engine/tests/fixtures/labels/20-labels.yaml");
    let spec = std::fs::read_to_string(spec).unwrap();
    assert_eq!(rules_schema_errors(&spec), Vec::<String>::new(), "{spec}");
    let label = |body: &str| format!("version: 1\nlabels:\n  L1:\n{body}");
    for (what, text) in [
        ("an unknown key", label("    expires: 30d\n")),
        (
            "a redrive max of 0",
            label("    redrive: { after: 10m, max: 0 }\n"),
        ),
        (
            "a redrive without max",
            label("    redrive: { after: 10m }\n"),
        ),
        ("a bad duration", label("    sla: soon\n")),
        ("an empty alert", label("    alert: \" \"\n")),
        (
            "a label name with a space",
            "version: 1\nlabels:\n  bad label: {}\n".to_string(),
        ),
    ] {
        assert!(
            !rules_schema_errors(&text).is_empty(),
            "{what} passes the schema:\n{text}"
        );
    }
    for text in [
        "version: 1\nlabels:\n  payment-dlq.v2:\n  L2: {}\n".to_string(),
        label("    redrive: { after: 90000, max: 1 }\n    expire: 1h30m\n"),
    ] {
        assert_eq!(rules_schema_errors(&text), Vec::<String>::new(), "{text}");
    }
}

#[test]
fn the_rules_schema_knows_budgets_and_breakers_as_check_does() {
    let spec = "version: 1
budgets:
  - id: payment-retries
    match: { biz: PAYMENT }
    ratio: 20%
    min_per_s: 5
    window: 10s
    exhausted: hold
breakers:
  - id: payment-gateway
    match: { biz: PAYMENT, code: [NET_TIMEOUT, PAY_PROCESSING] }
    per: attrs.downstream
    open_at: 50%
    min_samples: 20
    window: 10s
    cool_down: 30s
    ramp: 1m
";
    assert_eq!(rules_schema_errors(spec), Vec::<String>::new());
    for (what, text) in [
        (
            "a ratio over 100%",
            spec.replace("ratio: 20%", "ratio: 120%"),
        ),
        (
            "an unknown exhausted",
            spec.replace("exhausted: hold", "exhausted: drop"),
        ),
        (
            "a bad per",
            spec.replace("per: attrs.downstream", "per: downstream"),
        ),
        (
            "a bad duration",
            spec.replace("cool_down: 30s", "cool_down: soon"),
        ),
        (
            "an upper-case id",
            spec.replace("id: payment-gateway", "id: Gateway"),
        ),
        ("an unknown key", spec.replace("ramp: 1m", "rmap: 1m")),
    ] {
        assert!(
            !rules_schema_errors(&text).is_empty(),
            "{what} passes the schema:\n{text}"
        );
    }
}
