//! What a rule file says, as serde reads it.
//!
//! These types mirror the YAML one to one and reject unknown keys. Values whose syntax is
//! richer than YAML's (durations, globs, comparisons, jitter) are kept as written
//! ([`Scalar`]) and checked by the compiler, which knows each value's position and can point
//! at it.

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::Deserialize;
use serde::de::{self, Deserializer, SeqAccess, Visitor};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;

/// A rule file.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RuleFile {
    /// Format version; only `1` exists.
    #[schemars(range(min = 1, max = 1))]
    pub version: u64,
    /// Defaults for the whole set; at most one file of a set may have them.
    #[serde(default)]
    pub defaults: Option<DefaultsSpec>,
    /// The rules, in first-match order.
    #[serde(default)]
    pub rules: Vec<RuleSpec>,
}

/// `defaults:`: what a rule that does not say takes, and what decides when no rule matches.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DefaultsSpec {
    /// Default retry fields.
    #[serde(default)]
    pub retry: Option<RetrySpec>,
    /// Default dead-letter label.
    #[serde(default)]
    pub dead_letter: Option<String>,
}

/// One rule.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RuleSpec {
    /// Unique id in the set.
    pub id: String,
    /// Free text for people.
    #[serde(default)]
    pub description: Option<String>,
    /// Structured conditions.
    #[serde(default, rename = "match")]
    pub conditions: Option<MatchSpec>,
    /// rhai guard, evaluated only when `match` holds.
    #[serde(default, rename = "if")]
    pub guard: Option<String>,
    /// How to retry.
    #[serde(default)]
    pub retry: Option<RetrySpec>,
    /// Never retry.
    #[serde(default)]
    pub give_up: Option<bool>,
    /// Where the message goes when it is not retried.
    #[serde(default)]
    pub dead_letter: Option<String>,
}

/// `match:`: all given keys must hold.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MatchSpec {
    /// Business type: `NAME`, `[A, B]` or a glob.
    #[serde(default)]
    pub biz: Option<OneOrMany>,
    /// Error code: as for `biz`.
    #[serde(default)]
    pub code: Option<OneOrMany>,
    /// Attempt: an integer, `"OP N"`, or a list of those.
    #[serde(default)]
    pub attempt: Option<OneOrMany>,
    /// Elapsed: `"OP DURATION"` or a list of those.
    #[serde(default)]
    pub elapsed: Option<OneOrMany>,
    /// Attributes: name to `NAME` / list / glob.
    #[serde(default)]
    pub attrs: Option<BTreeMap<String, OneOrMany>>,
}

/// `retry:`: every field optional; missing ones come from the defaults.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RetrySpec {
    /// Re-deliveries allowed after the first delivery.
    #[serde(default)]
    pub max_retries: Option<u32>,
    /// No retry may be scheduled to start after this much time since the first delivery.
    #[serde(default)]
    pub max_elapsed: Option<Scalar>,
    /// How long to wait.
    #[serde(default)]
    pub backoff: Option<BackoffSpec>,
    /// Honour a delay the failure asks for.
    #[serde(default)]
    pub respect_retry_after: Option<bool>,
}

/// `backoff:`: exactly one kind plus an optional jitter.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BackoffSpec {
    /// `fixed: 100ms`
    #[serde(default)]
    pub fixed: Option<Scalar>,
    /// `linear: { base, step, max }`
    #[serde(default)]
    pub linear: Option<LinearSpec>,
    /// `exponential: { base, factor, max }`
    #[serde(default)]
    pub exponential: Option<ExponentialSpec>,
    /// `schedule: [1s, 5s, …]`
    #[serde(default)]
    pub schedule: Option<Vec<Scalar>>,
    /// `script: 'rhai expression in ms'`
    #[serde(default)]
    pub script: Option<String>,
    /// `none`, `full`, `equal`, `decorrelated`, `"20%"` or `"100ms"`.
    #[serde(default)]
    pub jitter: Option<Scalar>,
}

/// `linear:` parameters.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LinearSpec {
    /// Delay of the first retry.
    pub base: Scalar,
    /// Added per retry; defaults to `base`.
    #[serde(default)]
    pub step: Option<Scalar>,
    /// Cap, applied after jitter.
    #[serde(default)]
    pub max: Option<Scalar>,
}

/// `exponential:` parameters.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExponentialSpec {
    /// Delay of the first retry.
    pub base: Scalar,
    /// Growth per retry; defaults to 2.
    #[serde(default)]
    pub factor: Option<f64>,
    /// Cap, applied after jitter.
    #[serde(default)]
    pub max: Option<Scalar>,
}

/// A scalar kept as written: a string or a number. Durations, globs, comparisons and jitter
/// are parsed from it by the compiler.
#[derive(Debug, Clone, PartialEq)]
pub enum Scalar {
    /// A string (plain or quoted).
    Str(String),
    /// An integer.
    Int(i128),
    /// A float.
    Float(f64),
}

impl fmt::Display for Scalar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scalar::Str(s) => f.write_str(s),
            Scalar::Int(i) => write!(f, "{i}"),
            Scalar::Float(x) => write!(f, "{x}"),
        }
    }
}

struct ScalarVisitor;

impl Visitor<'_> for ScalarVisitor {
    type Value = Scalar;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string or a number")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Scalar, E> {
        Ok(Scalar::Str(v.to_string()))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Scalar, E> {
        Ok(Scalar::Int(v.into()))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Scalar, E> {
        Ok(Scalar::Int(v.into()))
    }

    fn visit_i128<E: de::Error>(self, v: i128) -> Result<Scalar, E> {
        Ok(Scalar::Int(v))
    }

    fn visit_u128<E: de::Error>(self, v: u128) -> Result<Scalar, E> {
        Ok(Scalar::Int(i128::try_from(v).unwrap_or(i128::MAX)))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Scalar, E> {
        Ok(Scalar::Float(v))
    }
}

/// In the JSON Schema a scalar is a string or a number: which strings are valid depends on
/// where it sits (a duration, a glob, a comparison, a jitter), and the compiler checks that.
impl JsonSchema for Scalar {
    fn schema_name() -> Cow<'static, str> {
        "Scalar".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": ["string", "number"],
            "description": "A string or a number: a duration ('250ms', '1.5s', '2m', '1h30m', or bare milliseconds), a name or glob, a comparison ('>= 5') or a jitter, depending on the key."
        })
    }
}

impl<'de> Deserialize<'de> for Scalar {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ScalarVisitor)
    }
}

/// A single value or a list of values, as `biz: PAYMENT` or `biz: [ORDER, PAYMENT]`.
#[derive(Debug, Clone, PartialEq)]
pub enum OneOrMany {
    /// One value.
    One(Scalar),
    /// A list of values.
    Many(Vec<Scalar>),
}

impl OneOrMany {
    /// The values with their index in the list (`None` for a single value).
    pub fn items(&self) -> Vec<(Option<usize>, &Scalar)> {
        match self {
            OneOrMany::One(s) => vec![(None, s)],
            OneOrMany::Many(list) => list.iter().enumerate().map(|(i, s)| (Some(i), s)).collect(),
        }
    }
}

struct OneOrManyVisitor;

impl<'de> Visitor<'de> for OneOrManyVisitor {
    type Value = OneOrMany;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a value or a list of values")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<OneOrMany, E> {
        ScalarVisitor.visit_str(v).map(OneOrMany::One)
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<OneOrMany, E> {
        ScalarVisitor.visit_i64(v).map(OneOrMany::One)
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<OneOrMany, E> {
        ScalarVisitor.visit_u64(v).map(OneOrMany::One)
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<OneOrMany, E> {
        ScalarVisitor.visit_f64(v).map(OneOrMany::One)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<OneOrMany, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<Scalar>()? {
            items.push(item);
        }
        Ok(OneOrMany::Many(items))
    }
}

/// In the JSON Schema: one value, or a list of values.
impl JsonSchema for OneOrMany {
    fn schema_name() -> Cow<'static, str> {
        "OneOrMany".into()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        let one = generator.subschema_for::<Scalar>();
        json_schema!({
            "description": "One value, or a list of values (any of them may match).",
            "anyOf": [
                one,
                { "type": "array", "items": one }
            ]
        })
    }
}

impl<'de> Deserialize<'de> for OneOrMany {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(OneOrManyVisitor)
    }
}
