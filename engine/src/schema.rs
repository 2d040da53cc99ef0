//! The JSON Schemas of rule files and rule-test files, generated from the serde types in
//! `model.rs` and `ruletest/model.rs`, as draft-07 (what
//! yaml-language-server reads best). Doc comments become the `description`s editors show on
//! hover.
//!
//! The schemas are checked in under `schemas/`; `rebound schema` writes them, and a test fails
//! when they drift from the types.
//!
//! ```
//! let schema = rebound_engine::schema::rules_schema();
//! assert_eq!(schema["$schema"], "http://json-schema.org/draft-07/schema#");
//! assert_eq!(schema["additionalProperties"], false);
//! ```

use crate::model::RuleFile;
use crate::ruletest::model::TestFile;
use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde_json::Value;

/// The file name of the rule-file schema under `schemas/`.
pub(crate) const RULES_SCHEMA_FILE: &str = "rules.schema.json";
/// The file name of the test-file schema under `schemas/`.
pub(crate) const RULES_TEST_SCHEMA_FILE: &str = "rules-test.schema.json";

fn draft07<T: JsonSchema>(title: &str) -> Value {
    let schema = SchemaSettings::draft07()
        .into_generator()
        .into_root_schema_for::<T>();
    let mut value = schema.to_value();
    if let Some(map) = value.as_object_mut() {
        map.insert("title".into(), Value::from(title));
    }
    value
}

/// The schema of a rule file (`rules/*.yaml`).
pub fn rules_schema() -> Value {
    draft07::<RuleFile>("Rebound rule file (format v1)")
}

/// The schema of a rule-test file (`rules/tests/*.yaml`).
pub fn rules_test_schema() -> Value {
    draft07::<TestFile>("Rebound rule-test file (format v1)")
}

/// Every schema with its file name, rendered as it is checked in: pretty JSON and a final
/// newline.
pub fn generated() -> Vec<(&'static str, String)> {
    [
        (RULES_SCHEMA_FILE, rules_schema()),
        (RULES_TEST_SCHEMA_FILE, rules_test_schema()),
    ]
    .into_iter()
    .map(|(name, value)| {
        let text = serde_json::to_string_pretty(&value).unwrap_or_default();
        (name, text + "\n")
    })
    .collect()
}
