//! What a rule-test file says, as serde reads it (`tests/*.yaml` inside a rule set).
//!
//! Like the rule model, these types reject unknown keys, and keep durations as written
//! ([`Scalar`]) so that the loader can point at a bad one. The JSON Schema
//! `schemas/rules-test.schema.json` is generated from them; their doc comments are its hover
//! docs.
// Without the runner (feature `testing`) nothing reads a test file: the types then only
// describe the schema.
#![cfg_attr(not(feature = "testing"), allow(dead_code))]

use crate::model::Scalar;
use schemars::JsonSchema;
use serde::Deserialize;
use std::collections::BTreeMap;

/// A Rebound rule-test file: cases (single decisions) and paths (a failure replayed attempt
/// after attempt until it is dead-lettered). Each case and each path counts once in
/// `rebound test`'s closing `N passed, M failed` line.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct TestFile {
    /// Format version; only `1` exists.
    #[schemars(range(min = 1, max = 1))]
    pub version: u64,
    /// Single decisions: a failure and what the set must answer.
    #[serde(default)]
    pub cases: Vec<CaseSpec>,
    /// Whole retry paths, checked under many RNG seeds (at least 64); each must hold for
    /// every seed.
    #[serde(default)]
    pub paths: Vec<PathSpec>,
}

/// One case: a failure, decided once, and what the decision must be.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CaseSpec {
    /// What the case checks, in a few words; failures are reported by this name.
    pub name: String,
    /// The failure to decide. Omitted keys: `biz`/`code` empty, `attempt` 1, `elapsed` 0,
    /// no `retry_after`, `last_delay` 0, no `attrs`, `headers` or `signals`, `now`
    /// `2026-01-01T00:00:00Z`.
    #[serde(default)]
    pub given: GivenSpec,
    /// What the decision must be; every key given must hold, under every seed tried.
    pub expect: CaseExpectSpec,
}

/// One path: the same failure replayed attempt after attempt (1, 2, …), `elapsed` advancing
/// by each delay plus `processing`, until the decision is a dead letter.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct PathSpec {
    /// What the path checks, in a few words; failures are reported by this name.
    pub name: String,
    /// The failure that keeps happening. `attempt`, `elapsed` and `last_delay` give where the
    /// path starts (default: attempt 1, elapsed 0, last delay 0); `retry_after`, if given, is
    /// asked by every failure; `seed`, if given, is tried before the seed search.
    #[serde(default)]
    pub given: GivenSpec,
    /// Time each attempt takes before it fails (default 0), e.g. `20ms`.
    #[serde(default)]
    pub processing: Option<Scalar>,
    /// What the whole path must do; every key given must hold, under every seed tried.
    pub expect: PathExpectSpec,
}

/// A failure, as the decision procedure sees it.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct GivenSpec {
    /// Business type of the failed message (default: empty).
    #[serde(default)]
    pub biz: Option<String>,
    /// Error code of the failure (default: empty).
    #[serde(default)]
    pub code: Option<String>,
    /// The attempt that just failed, 1 for the first delivery (default 1).
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub attempt: Option<u32>,
    /// How many times the message has been redriven from a dead-letter label (default 0).
    #[serde(default)]
    pub redrives: Option<u32>,
    /// Time since the first delivery began, e.g. `30s` (default 0).
    #[serde(default)]
    pub elapsed: Option<Scalar>,
    /// A delay the failure itself asks for (HTTP 429 `Retry-After`), e.g. `5s`.
    #[serde(default)]
    pub retry_after: Option<Scalar>,
    /// The delay chosen before the previous attempt (default 0); decorrelated jitter uses it.
    #[serde(default)]
    pub last_delay: Option<Scalar>,
    /// String attributes the failure carries.
    #[serde(default)]
    pub attrs: Option<BTreeMap<String, String>>,
    /// Headers of the failed message, as its source gave them.
    #[serde(default)]
    pub headers: Option<BTreeMap<String, String>>,
    /// When the failure happens, as RFC 3339 (default `2026-01-01T00:00:00Z`, so that tests do
    /// not depend on the day they run), e.g. `2026-03-02T08:30:00+01:00`. A path advances it
    /// with `elapsed`.
    #[serde(default)]
    pub now: Option<String>,
    /// Signals from the runtime (`fail_rate`, `retry_queue_depth`, …); missing ones read 0.0.
    #[serde(default)]
    pub signals: Option<BTreeMap<String, f64>>,
    /// Pins the RNG: a case runs under this seed only (as `rebound decide --seed`); a path
    /// tries it first, then searches other seeds as usual.
    #[serde(default)]
    pub seed: Option<u64>,
}

/// What a single decision must be.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CaseExpectSpec {
    /// `retry` or `dead_letter`.
    #[serde(default)]
    pub action: Option<ActionSpec>,
    /// The exact delay of a retry, e.g. `100ms`.
    #[serde(default)]
    pub delay: Option<Scalar>,
    /// The delay of a retry lies in `[min, max]`, both inclusive, e.g. `[1s, 2s]`.
    #[serde(default)]
    #[schemars(length(min = 2, max = 2))]
    pub delay_between: Option<Vec<Scalar>>,
    /// The deciding rule's id, or `defaults` when no rule matches.
    #[serde(default)]
    pub rule: Option<String>,
    /// The dead-letter label of a dead letter, e.g. `L1`.
    #[serde(default)]
    pub dead_letter: Option<String>,
    /// Why the message is not retried: `give_up`, `max_retries` or `max_elapsed`.
    #[serde(default)]
    pub reason: Option<ReasonSpec>,
}

/// What a whole path must do.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct PathExpectSpec {
    /// How many retries happen before the dead letter.
    #[serde(default)]
    pub retries: Option<u32>,
    /// The label the path ends in, e.g. `L1`.
    #[serde(default)]
    pub dead_letter: Option<String>,
    /// Why the path ends: `give_up`, `max_retries` or `max_elapsed`.
    #[serde(default)]
    pub reason: Option<ReasonSpec>,
    /// The rule that makes the final (dead-letter) decision, or `defaults`.
    #[serde(default)]
    pub rule: Option<String>,
    /// The sum of all retry delays is at most this, e.g. `1s`.
    #[serde(default)]
    pub total_delay_at_most: Option<Scalar>,
    /// The sum of all retry delays is at least this, e.g. `300ms`.
    #[serde(default)]
    pub total_delay_at_least: Option<Scalar>,
}

/// What a decision does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ActionSpec {
    /// Deliver again after a delay.
    Retry,
    /// Stop and store the message under a label.
    DeadLetter,
}

/// Why a message is not retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum ReasonSpec {
    /// The rule says `give_up: true`.
    GiveUp,
    /// The attempt is past `max_retries`.
    MaxRetries,
    /// The retry would start after `max_elapsed`.
    MaxElapsed,
}
