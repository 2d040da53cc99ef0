//! The JSON Schemas of rule files and rule-test files, generated from the serde types in
//! `model.rs` and `ruletest/model.rs`, as draft-07 (what
//! yaml-language-server reads best). Doc comments become the `description`s editors show on
//! hover.
//!
//! The model keeps durations, globs, comparisons and jitter as plain scalars, which the
//! compiler checks with their positions. The rule-file schema says as much of that as a
//! schema can, so that an editor flags `10sec`, `jitter: ful`, `"=> 5"`, an id `DB_Lock` or
//! `retry` beside `give_up: true` as it is typed: `constrain_rules` narrows the generated
//! schema with patterns, enums and `not`, each mirroring a check of `compile.rs`. Every
//! schema carries a stable `$id` ([`RULES_SCHEMA_ID`]) that editors can be pointed at.
//!
//! The schemas are checked in under `schemas/`; `rebound schema` writes them (`--print`
//! shows one), and a test fails when they drift from the types.
//!
//! ```
//! let schema = rebound_engine::schema::rules_schema();
//! assert_eq!(schema["$schema"], "http://json-schema.org/draft-07/schema#");
//! assert_eq!(schema["additionalProperties"], false);
//! assert_eq!(schema["$id"], rebound_engine::schema::RULES_SCHEMA_ID);
//! ```

use crate::model::RuleFile;
use crate::ruletest::model::TestFile;
use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde_json::{Value, json};

/// The file name of the rule-file schema under `schemas/`.
pub(crate) const RULES_SCHEMA_FILE: &str = "rules.schema.json";
/// The file name of the test-file schema under `schemas/`.
pub(crate) const RULES_TEST_SCHEMA_FILE: &str = "rules-test.schema.json";
/// The `$id` of the rule-file schema: a name that stays the same for format v1 wherever
/// the file lives, for editor settings that map schemas by id.
pub const RULES_SCHEMA_ID: &str = "urn:rebound:schema:rules:v1";
/// The `$id` of the rule-test-file schema.
pub const RULES_TEST_SCHEMA_ID: &str = "urn:rebound:schema:rules-test:v1";

fn draft07<T: JsonSchema>(id: &str, title: &str) -> Value {
    let schema = SchemaSettings::draft07()
        .into_generator()
        .into_root_schema_for::<T>();
    let mut value = schema.to_value();
    if let Some(map) = value.as_object_mut() {
        map.insert("$id".into(), Value::from(id));
        map.insert("title".into(), Value::from(title));
    }
    value
}

/// The schema of a rule file (`rules/*.yaml`).
pub fn rules_schema() -> Value {
    let mut schema = draft07::<RuleFile>(RULES_SCHEMA_ID, "Rebound rule file (format v1)");
    constrain_rules(&mut schema);
    schema
}

/// The schema of a rule-test file (`rules/tests/*.yaml`).
pub fn rules_test_schema() -> Value {
    draft07::<TestFile>(RULES_TEST_SCHEMA_ID, "Rebound rule-test file (format v1)")
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

/// A duration's text as `duration.rs` parses it: `250ms`, `1.5s`, `1h30m`, or digits alone
/// (milliseconds).
const DURATION: &str = r"(\d+|((\d+\.?\d*|\.\d+)(ms|s|m|h|d))+)";
/// A comparison operator of `pattern.rs`.
const OP: &str = r"(<=|>=|==|!=|<|>)";

/// Narrows the generated rule-file schema to what the compiler accepts, as far as a schema
/// can say it: each value kind gets a definition with its pattern, and the properties that
/// hold one refer to it instead of to the catch-all `Scalar`.
fn constrain_rules(schema: &mut Value) {
    let duration = json!({
        "description": "A duration: '250ms', '1s', '1.5s', '2m', '1h', '1h30m' (units ms, s, m, h, d), or a bare integer meaning milliseconds.",
        "anyOf": [
            { "type": "integer", "minimum": 0 },
            { "type": "string", "pattern": format!(r"^\s*{DURATION}\s*$") }
        ],
        "examples": ["250ms", "1s", "1.5s", "2m", "1h30m"]
    });
    let jitter = json!({
        "description": "How the delay d is randomised: `none` (default), `full` ([0, d]), `equal` ([d/2, d]), `decorrelated` ([base, max(base, 3·last_delay)]), a percentage such as \"20%\" ([0.8·d, 1.2·d]) or a duration such as \"100ms\" ([d, d + 100ms]).",
        "anyOf": [
            { "enum": ["none", "full", "equal", "decorrelated"] },
            { "type": "string", "pattern": r"^\s*(100(\.0*)?|\d{1,2}(\.\d*)?|\.\d+)\s*%$" },
            { "$ref": "#/definitions/Duration" }
        ],
        "examples": ["none", "full", "equal", "decorrelated", "20%", "100ms"]
    });
    let attempt = json!({
        "description": "An attempt number (equality) or \"OP N\" such as \">= 5\"; OP is one of <, <=, >, >=, ==, !=.",
        "anyOf": [
            { "type": "integer", "minimum": 0 },
            { "type": "string", "pattern": format!(r"^\s*({OP}\s*)?\d+\s*$") }
        ],
        "examples": [">= 5", "< 3", 1]
    });
    let elapsed = json!({
        "description": "\"OP DURATION\" such as \"> 30s\"; OP is one of <, <=, >, >=, ==, !=.",
        "type": "string",
        "pattern": format!(r"^\s*{OP}\s*{DURATION}\s*$"),
        "examples": ["> 30s", "<= 2m"]
    });
    let name = json!({
        "description": "A name (`PAYMENT`), or a glob whose `*` matches any run of characters (`PAY*`, `*`); `?`, `[`, `]`, `{` and `}` are not globs. A glob that starts with `*` must be quoted: YAML reads `*NAME` as an alias.",
        "anyOf": [
            { "type": "integer" },
            { "type": "string", "pattern": r"^[^?\[\]{}]*$" }
        ]
    });
    let share = json!({
        "description": "A share: a percentage from 0% to 100% such as \"20%\", or a number from 0 to 1.",
        "anyOf": [
            { "type": "number", "minimum": 0, "maximum": 1 },
            { "type": "string", "pattern": r"^\s*(100(\.0*)?|\d{1,2}(\.\d*)?|\.\d+)\s*%\s*$" }
        ],
        "examples": ["20%", "50%", 0.2]
    });
    let rate = json!({
        "description": "Retries per second, a number >= 0.",
        "type": "number",
        "minimum": 0
    });
    let definitions = schema["definitions"]
        .as_object_mut()
        .expect("a generated schema has definitions");
    for (key, value) in [
        ("Share", share),
        ("PerSecond", rate),
        ("Duration", duration),
        ("Jitter", jitter),
        ("AttemptCondition", list_of("AttemptComparison", "attempt")),
        ("AttemptComparison", attempt),
        ("ElapsedCondition", list_of("ElapsedComparison", "elapsed")),
        ("ElapsedComparison", elapsed),
        ("Names", list_of("Name", "name")),
        ("Name", name),
    ] {
        definitions.insert(key.into(), value);
    }
    for (def, props, to) in [
        ("BackoffSpec", &["fixed", "schedule"][..], "Duration"),
        ("BackoffSpec", &["jitter"], "Jitter"),
        ("LinearSpec", &["base", "step", "max"], "Duration"),
        ("ExponentialSpec", &["base", "max"], "Duration"),
        ("RetrySpec", &["max_elapsed"], "Duration"),
        ("LabelSpec", &["sla", "expire"], "Duration"),
        ("RedriveSpec", &["after"], "Duration"),
        ("BudgetSpec", &["ratio"], "Share"),
        ("BudgetSpec", &["min_per_s"], "PerSecond"),
        ("BudgetSpec", &["window"], "Duration"),
        ("BreakerSpec", &["open_at"], "Share"),
        ("BreakerSpec", &["window", "cool_down", "ramp"], "Duration"),
        ("ScopeSpec", &["biz", "code", "attrs"], "Names"),
        ("MatchSpec", &["attempt", "redrives"], "AttemptCondition"),
        ("MatchSpec", &["elapsed"], "ElapsedCondition"),
        ("MatchSpec", &["biz", "code", "attrs", "headers"], "Names"),
    ] {
        for prop in props {
            refer_to(&mut definitions[def]["properties"][prop], to);
        }
    }
    let backoff = &mut definitions["BackoffSpec"];
    backoff["properties"]["schedule"]["minItems"] = 1.into();
    // Exactly one kind: `jitter` alone, or two kinds, is an error of the compiler too.
    let kinds = ["fixed", "linear", "exponential", "schedule", "script"];
    backoff["oneOf"] = kinds
        .iter()
        .map(|k| {
            let mut given = serde_json::Map::new();
            given.insert((*k).into(), json!({ "not": { "type": "null" } }));
            json!({ "required": [k], "properties": given })
        })
        .collect();
    definitions["ExponentialSpec"]["properties"]["factor"]["exclusiveMinimum"] = 0.into();
    let rule = &mut definitions["RuleSpec"];
    rule["properties"]["id"]["pattern"] = "^[a-z0-9][a-z0-9._-]*$".into();
    rule["properties"]["id"]["not"] = json!({ "const": "defaults" });
    // A rule either retries or gives up: `retry` beside `give_up: true` is an error.
    rule["not"] = json!({
        "required": ["retry", "give_up"],
        "properties": { "retry": { "type": "object" }, "give_up": { "const": true } }
    });
    for def in ["RuleSpec", "DefaultsSpec"] {
        definitions[def]["properties"]["dead_letter"]["pattern"] = r"\S".into();
    }
    definitions["LabelSpec"]["properties"]["alert"]["pattern"] = r"\S".into();
    for def in ["BudgetSpec", "BreakerSpec"] {
        definitions[def]["properties"]["id"]["pattern"] = "^[a-z0-9][a-z0-9._-]*$".into();
    }
    definitions["BudgetSpec"]["properties"]["exhausted"]["enum"] = json!(["hold", "dead_letter"]);
    definitions["BreakerSpec"]["properties"]["per"]["pattern"] = r"^(biz|code|attrs\..+)$".into();
    definitions["BreakerSpec"]["properties"]["min_samples"]["minimum"] = 1.into();
    definitions["BreakerSpec"]["properties"]["open_on_heat"]["exclusiveMinimum"] = 0.into();
    // Either opens it; one of them must be given.
    definitions["BreakerSpec"]["anyOf"] = json!([
        { "required": ["open_at"] },
        { "required": ["open_on_heat"] }
    ]);
    refer_to(
        &mut definitions["HeatSpec"]["properties"]["half_life"],
        "Duration",
    );
    refer_to(
        &mut definitions["HeatWeightSpec"]["properties"]["code"],
        "Name",
    );
    definitions["HeatWeightSpec"]["properties"]["weight"] = json!({
        "description": "What one failure of a matching code adds to the heat: a number, at least 0.",
        "type": "number",
        "minimum": 0
    });
    // Every use of the catch-alls now has its own kind.
    definitions.remove("Scalar");
    definitions.remove("OneOrMany");
}

/// One `item` or a non-empty list of them (`what` names the item for the description).
fn list_of(item: &str, what: &str) -> Value {
    let item = json!({ "$ref": format!("#/definitions/{item}") });
    json!({
        "description": format!("One {what}, or a non-empty list of them."),
        "anyOf": [item, { "type": "array", "items": item, "minItems": 1 }]
    })
}

/// Points every reference to `Scalar` or `OneOrMany` inside `value` at the definition `to`.
fn refer_to(value: &mut Value, to: &str) {
    match value {
        Value::Object(map) => {
            for (key, v) in map.iter_mut() {
                if key == "$ref"
                    && matches!(
                        v.as_str(),
                        Some("#/definitions/Scalar" | "#/definitions/OneOrMany")
                    )
                {
                    *v = format!("#/definitions/{to}").into();
                } else {
                    refer_to(v, to);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| refer_to(v, to)),
        _ => {}
    }
}
