//! What a rule file says, as serde reads it.
//!
//! These types mirror the YAML one to one and reject unknown keys. Values whose syntax is
//! richer than YAML's (durations, globs, comparisons, jitter) are kept as written
//! ([`Scalar`]) and checked by the compiler, which knows each value's position and can point
//! at it.

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;

/// A Rebound rule file: optional `defaults`, then `rules` in first-match order. Every
/// `*.yaml` directly inside the rule-set directory is one; files are read in name order.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RuleFile {
    /// Format version; only `1` exists.
    #[schemars(range(min = 1, max = 1))]
    pub version: u64,
    /// What a rule takes when it does not say, and what decides when no rule matches. At most
    /// one file of a set may have them.
    #[serde(default)]
    pub defaults: Option<DefaultsSpec>,
    /// The rules, in first-match order: the first rule whose conditions all hold decides.
    #[serde(default)]
    pub rules: Vec<RuleSpec>,
    /// Dead-letter labels and what the runtime does with their letters: label name to its
    /// policy (`description`, `redrive`, `alert`, `sla`, `expire`). Any file of the set may
    /// have them; a label is defined once in the set.
    #[serde(default)]
    pub labels: Option<LabelsSpec>,
    /// How the runtime weighs failures into its decaying `heat` signal (`signals.heat`):
    /// `half_life` and the `weights` of codes. At most one file of a set may have it.
    #[serde(default)]
    pub heat: Option<HeatSpec>,
    /// Retry budgets: a failure the rules would retry needs room in the first budget whose
    /// `match` holds, in file order across the set.
    #[serde(default)]
    pub budgets: Option<Vec<BudgetSpec>>,
    /// Circuit breakers: every breaker whose `match` holds counts the failure, and while one
    /// is open its scope's due retries are held.
    #[serde(default)]
    pub breakers: Option<Vec<BreakerSpec>>,
}

/// What a budget or a breaker applies to: `biz`, `code` and `attrs` as in a rule's `match`
/// (omitted: everything).
#[derive(Debug, Clone, Default, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ScopeSpec {
    /// Business type: `NAME`, `[A, B]`, or a glob with `*`.
    #[serde(default)]
    pub biz: Option<OneOrMany>,
    /// Error code: `NAME`, `[A, B]`, or a glob with `*`.
    #[serde(default)]
    pub code: Option<OneOrMany>,
    /// String attributes of the failure: name to `NAME`, list or glob (an absent attribute
    /// never matches).
    #[serde(default)]
    pub attrs: Option<BTreeMap<String, OneOrMany>>,
}

/// One retry budget.
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct BudgetSpec {
    /// Unique among the set's budgets; rule-id syntax (`payment-retries`).
    pub id: String,
    /// Which failures it counts (omitted: all).
    #[serde(default, rename = "match")]
    pub scope: Option<ScopeSpec>,
    /// Retries at most this share of the first deliveries of the budget's biz in the window:
    /// `20%`, or a number from 0 to 1.
    pub ratio: Scalar,
    /// At least this many retries per second are always allowed (default 1).
    #[serde(default)]
    pub min_per_s: Option<Scalar>,
    /// The sliding window the budget is counted over (default `10s`).
    #[serde(default)]
    pub window: Option<Scalar>,
    /// Without room: `hold` (default: scheduled as decided, fired once there is room) or
    /// `dead_letter` (at once, reason `budget`).
    #[serde(default)]
    pub exhausted: Option<String>,
}

/// One circuit breaker.
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct BreakerSpec {
    /// Unique among the set's breakers; rule-id syntax (`payment-gateway`).
    pub id: String,
    /// Which finished trees it counts, and which failures count as failed (omitted: all).
    #[serde(default, rename = "match")]
    pub scope: Option<ScopeSpec>,
    /// One breaker per value of this key: `biz`, `code` or `attrs.NAME` (omitted: one).
    #[serde(default)]
    pub per: Option<String>,
    /// Opens when the failed share reaches this: `50%`, or a number from 0 to 1.
    #[serde(default)]
    pub open_at: Option<Scalar>,
    /// Opens while its biz's heat (`signals.heat`) is at or above this, whatever the failed
    /// share. `open_at`, `open_on_heat` or both (either opens it).
    #[serde(default)]
    pub open_on_heat: Option<f64>,
    /// Opens only once at least this many trees finished in the window (default 20).
    #[serde(default)]
    pub min_samples: Option<u64>,
    /// The sliding window it counts over (default `10s`).
    #[serde(default)]
    pub window: Option<Scalar>,
    /// How long it stays open before it goes half-open.
    pub cool_down: Scalar,
    /// Half-open: the share of held retries released rises from 10% to 100% over this
    /// (default `1m`).
    #[serde(default)]
    pub ramp: Option<Scalar>,
}

/// `defaults:`: what a rule that does not say takes, and what decides when no rule matches.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct DefaultsSpec {
    /// Default `retry:` fields. Built-ins: `max_retries: 3`, no `max_elapsed`,
    /// `backoff: { exponential: { base: 1s, factor: 2, max: 1m }, jitter: full }`,
    /// `respect_retry_after: true`.
    #[serde(default)]
    pub retry: Option<RetrySpec>,
    /// Default dead-letter label (built-in: `default`).
    #[serde(default)]
    pub dead_letter: Option<String>,
}

/// One rule.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RuleSpec {
    /// Unique id in the set: lowercase letters, digits, `.`, `_` and `-`, starting with a
    /// letter or digit (`db-lock`). `defaults` is reserved.
    pub id: String,
    /// Free text for people: why the rule exists.
    #[serde(default)]
    pub description: Option<String>,
    /// Structured conditions; all given keys must hold. Without `match` and `if` the rule
    /// matches everything.
    #[serde(default, rename = "match")]
    pub conditions: Option<MatchSpec>,
    /// A rhai boolean expression, evaluated only when `match` holds, e.g.
    /// `signals.fail_rate > 0.5`. In scope: biz, code, attempt, elapsed (ms), retry_after
    /// (ms or ()), last_delay (ms), attrs, headers, now (ms since the Unix epoch, UTC;
    /// `hour_of_day(now, OFFSET_HOURS)`, `day_of_week(now, OFFSET_HOURS)`), redrives, signals.
    #[serde(default, rename = "if")]
    pub guard: Option<String>,
    /// How to retry. Fields it does not give come from `defaults.retry`. Never together
    /// with `give_up: true`.
    #[serde(default)]
    pub retry: Option<RetrySpec>,
    /// `true`: never retry; the message goes to `dead_letter` at once (reason `give_up`).
    #[serde(default)]
    pub give_up: Option<bool>,
    /// Where the message goes when it is not retried (any non-empty label, e.g. `L1`);
    /// without it, the default's.
    #[serde(default)]
    pub dead_letter: Option<String>,
}

/// `match:`: all given keys must hold.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct MatchSpec {
    /// Business type of the failed message: `NAME`, `[A, B]`, or a glob with `*` (`PAY*`).
    #[serde(default)]
    pub biz: Option<OneOrMany>,
    /// Error code of the failure: `NAME`, `[A, B]`, or a glob with `*` (`DB_LOCK*`).
    #[serde(default)]
    pub code: Option<OneOrMany>,
    /// Number of the attempt that just failed (1 for the first delivery): an integer, `"OP N"`
    /// such as `">= 5"`, or a list of those (all must hold). OP: <, <=, >, >=, ==, !=.
    #[serde(default)]
    pub attempt: Option<OneOrMany>,
    /// How many times the message has been redriven from a dead-letter label (0 for a message
    /// never redriven): as `attempt`.
    #[serde(default)]
    pub redrives: Option<OneOrMany>,
    /// Time since the first delivery began: `"OP DURATION"` such as `"> 30s"`, or a list of
    /// those (all must hold).
    #[serde(default)]
    pub elapsed: Option<OneOrMany>,
    /// String attributes of the failure: name to `NAME`, list or glob. An attribute the
    /// failure does not carry never matches, not even `*`.
    #[serde(default)]
    pub attrs: Option<BTreeMap<String, OneOrMany>>,
    /// Headers of the failed message, as its source gave them: name to `NAME`, list or glob,
    /// as for `attrs`. A header the message does not carry never matches, not even `*`.
    #[serde(default)]
    pub headers: Option<BTreeMap<String, OneOrMany>>,
}

/// `retry:`: every field optional; missing ones come from the defaults.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RetrySpec {
    /// Re-deliveries allowed after the first delivery (built-in: 3).
    #[serde(default)]
    pub max_retries: Option<u32>,
    /// No retry may be scheduled to start after this much time since the first delivery,
    /// e.g. `2m` (built-in: none).
    #[serde(default)]
    pub max_elapsed: Option<Scalar>,
    /// How long to wait: exactly one of fixed, linear, exponential, schedule or script, plus
    /// an optional jitter. Taken whole, never merged with the defaults' backoff.
    #[serde(default)]
    pub backoff: Option<BackoffSpec>,
    /// Honour a delay the failure itself asks for (HTTP 429 `Retry-After`): the delay becomes
    /// at least that (built-in: true).
    #[serde(default)]
    pub respect_retry_after: Option<bool>,
}

/// `backoff:`: exactly one kind plus an optional jitter.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct BackoffSpec {
    /// The same delay every time, e.g. `fixed: 100ms`.
    #[serde(default)]
    pub fixed: Option<Scalar>,
    /// `base + step·(r−1)` for retry r, e.g. `linear: { base: 1s, step: 500ms, max: 10s }`.
    #[serde(default)]
    pub linear: Option<LinearSpec>,
    /// `base · factor^(r−1)` for retry r, e.g. `exponential: { base: 500ms, factor: 2, max: 5m }`.
    #[serde(default)]
    pub exponential: Option<ExponentialSpec>,
    /// Entry r for retry r; past the end, the last entry, e.g. `schedule: [1s, 5s, 30s]`.
    #[serde(default)]
    pub schedule: Option<Vec<Scalar>>,
    /// A rhai expression yielding milliseconds, e.g. `script: 'min(500 * 2 ** attempt, 300_000)'`.
    #[serde(default)]
    pub script: Option<String>,
    /// How the delay d is randomised: `none` (default), `full` ([0, d]), `equal` ([d/2, d]),
    /// `decorrelated` ([base, max(base, 3·last_delay)]), a percentage such as `"20%"`
    /// ([0.8·d, 1.2·d]) or a duration such as `"100ms"` ([d, d + 100ms]).
    #[serde(default)]
    pub jitter: Option<Scalar>,
}

/// `linear:` parameters.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct LinearSpec {
    /// Delay of the first retry, e.g. `1s`.
    pub base: Scalar,
    /// Added per retry, e.g. `500ms`; defaults to `base`.
    #[serde(default)]
    pub step: Option<Scalar>,
    /// Cap on the delay, applied after jitter, e.g. `30s`. Without it a delay saturates at one
    /// day.
    #[serde(default)]
    pub max: Option<Scalar>,
}

/// `exponential:` parameters.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ExponentialSpec {
    /// Delay of the first retry, e.g. `500ms`.
    pub base: Scalar,
    /// Growth per retry, a positive number; defaults to 2.
    #[serde(default)]
    pub factor: Option<f64>,
    /// Cap on the delay, applied after jitter, e.g. `30s`. Without it a delay saturates at one
    /// day.
    #[serde(default)]
    pub max: Option<Scalar>,
}

/// `labels:`: label name to its policy, in the order written. Kept as a list rather than a
/// map so that a label written twice in one file is reported (a map would keep the last).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct LabelsSpec(pub Vec<(String, LabelSpec)>);

/// One label's policy. Every key is optional; a label with none (`L5: {}` or `L5:`) is a
/// label the set defines and says nothing more about.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct LabelSpec {
    /// Free text for people: what a letter with this label means.
    #[serde(default)]
    pub description: Option<String>,
    /// Replay the label's letters automatically, e.g. `{ after: 10m, max: 3 }`: each letter
    /// is replayed `after` its dead-lettering, at most `max` times, its attempts counted
    /// from 1 again.
    #[serde(default)]
    pub redrive: Option<RedriveSpec>,
    /// A receiver of the runtime configuration told of new letters, e.g. `oncall`.
    #[serde(default)]
    pub alert: Option<String>,
    /// How long a letter may stay open before it counts as overdue, e.g. `1h`.
    #[serde(default)]
    pub sla: Option<Scalar>,
    /// How long a letter stays open before it becomes `expired` (kept, never deleted), e.g.
    /// `30d`.
    #[serde(default)]
    pub expire: Option<Scalar>,
}

/// `redrive:` parameters.
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RedriveSpec {
    /// How long after its dead-lettering a letter is replayed, e.g. `10m`.
    pub after: Scalar,
    /// How many times a letter is replayed at most (at least 1).
    #[schemars(range(min = 1))]
    pub max: u32,
}

/// `heat:`: how failures heat up. Both keys are optional.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct HeatSpec {
    /// How long the heat takes to halve when nothing fails, e.g. `30s` (the default).
    #[serde(default)]
    pub half_life: Option<Scalar>,
    /// What a failure adds to the heat, by its code: the first entry whose `code` pattern
    /// matches wins; a code none matches weighs 1.
    #[serde(default)]
    pub weights: Option<Vec<HeatWeightSpec>>,
}

/// One entry of `heat.weights`, e.g. `{ code: "NET_*", weight: 3 }`.
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct HeatWeightSpec {
    /// An error code, or a glob with `*` (`NET_*`).
    pub code: Scalar,
    /// What one failure of a matching code adds to the heat: a number, at least 0.
    pub weight: Scalar,
}

struct LabelsVisitor;

impl<'de> Visitor<'de> for LabelsVisitor {
    type Value = LabelsSpec;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a map of label name to its policy")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<LabelsSpec, A::Error> {
        let mut out = Vec::new();
        while let Some(name) = map.next_key::<String>()? {
            let spec = map.next_value::<Option<LabelSpec>>()?;
            out.push((name, spec.unwrap_or_default()));
        }
        Ok(LabelsSpec(out))
    }

    fn visit_unit<E: de::Error>(self) -> Result<LabelsSpec, E> {
        Ok(LabelsSpec::default())
    }
}

impl<'de> Deserialize<'de> for LabelsSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(LabelsVisitor)
    }
}

/// In the JSON Schema: a map of label name to a [`LabelSpec`] (or nothing).
impl JsonSchema for LabelsSpec {
    fn schema_name() -> Cow<'static, str> {
        "LabelsSpec".into()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        let label = generator.subschema_for::<LabelSpec>();
        json_schema!({
            "description": "Dead-letter labels: label name (`L1`, `payment-dlq`) to its policy.",
            "type": "object",
            "propertyNames": { "pattern": "^[A-Za-z0-9][A-Za-z0-9._-]*$" },
            "additionalProperties": { "anyOf": [label, { "type": "null" }] }
        })
    }
}

/// A scalar kept as written: a string or a number. Durations, globs, comparisons and jitter
/// are parsed from it by the compiler.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Scalar {
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
pub(crate) enum OneOrMany {
    /// One value.
    One(Scalar),
    /// A list of values.
    Many(Vec<Scalar>),
}

impl OneOrMany {
    /// The values with their index in the list (`None` for a single value).
    pub(crate) fn items(&self) -> Vec<(Option<usize>, &Scalar)> {
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
            "description": "One value, or a list of values: for names (`biz`, `code`, attrs) any of them may match; for `attempt` and `elapsed` comparisons all must hold.",
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
