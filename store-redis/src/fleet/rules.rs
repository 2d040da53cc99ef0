//! The rule set of record. In shared mode the store holds the set every node runs and its
//! history: a push or rollback on any node is a compare-and-set on the version
//! ([`RedisStore::push_rules`]); a node that finds the store empty seeds it
//! ([`RedisStore::seed_rules`], which loses to a seed already there). Every node notices a
//! new version by a hint ([`RedisStore::rules_notifications`]), on every reconnect, and by
//! polling [`RedisStore::rules_version`] about once a second; it then reads
//! [`RedisStore::rules`], compiles it, and reports what it runs
//! ([`RedisStore::set_applied`]).
//!
//! The history is never trimmed (the spec: rule history is never trimmed by the store). The
//! files of the last [`FILES_KEPT`] accepted versions are kept beside it
//! (`{NS}:rules:set:<version>`), so that a console can diff two of them and a rollback can go
//! back to any of them ([`RedisStore::rules_at`]); an older version keeps its history entries
//! but not its files (`docs/spec/console.md`, "Rule history for diffs").
//!
//! Versions and sources are the engine's ([`Version`], [`Source`]), and a history entry is the
//! engine's [`HistoryEntry`] (accepted, as every set the store took is): the store is one more
//! place the engine's records are kept, not a vocabulary of its own. The store spells two
//! sources its own way, as it always has: a push is `api`, and the set the first node brought
//! from its files is `seed` (read back as [`Source::Push`] and [`Source::File`]).

use std::sync::LazyLock;
use std::time::{Duration, UNIX_EPOCH};

use redis::{AsyncCommands, Script};

use super::corrupt;
use crate::{RedisStore, ScriptCall};
use rebound_engine::Version;
use rebound_engine::reload::{FILES_KEPT, HistoryEntry, Outcome, Source};
use rebound_runtime::store::Result;
use rebound_runtime::time::Timestamp;

static PUSH: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../scripts/fleet_rules_push.lua")));
static APPLIED: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../scripts/fleet_rules_applied.lua")));

/// A rule set as the store holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleRecord {
    /// Its version (the engine's content hash).
    pub version: Version,
    /// Each rule file: its name in the rules directory and its YAML text.
    pub files: Vec<(String, String)>,
    /// Where it came from (a seed reads back as [`Source::File`]).
    pub source: Source,
    /// When it was pushed.
    pub at: Timestamp,
}

/// What a push did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pushed {
    /// It is the set of record now, and in the history.
    Done,
    /// The set of record already has this version: nothing written (also the answer to a
    /// push run again after its reply was lost).
    Unchanged,
    /// The set of record is not the expected one: nothing written.
    Conflict {
        /// Its version, or `None` if the store has no set.
        current: Option<Version>,
    },
}

/// A hash's fields and values.
type Fields = Vec<(String, String)>;

/// What one node runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RulesApplied {
    /// The node.
    pub node: String,
    /// The version it runs.
    pub version: Version,
    /// Why it could not run the store's set, if it could not.
    pub errors: Option<Vec<String>>,
}

impl RedisStore {
    /// The rule set of record, if one was pushed or seeded.
    pub fn rules(&self) -> Result<Option<RuleRecord>> {
        self.rule_record("rules", self.keys.rules())
    }

    /// The version of the set of record: one cheap read, for polling.
    pub fn rules_version(&self) -> Result<Option<Version>> {
        let key = self.keys.rules();
        let version: Option<String> = self.io.run("rules version", move |mut c| async move {
            c.hget(key, "version").await
        })?;
        version.as_deref().map(version_of).transpose()
    }

    /// Makes `record` the set of record, if the current version is `expected` (`None`: any
    /// or none). A record whose version is the current one is [`Pushed::Unchanged`], whatever
    /// was expected.
    pub fn push_rules(&self, expected: Option<Version>, record: &RuleRecord) -> Result<Pushed> {
        let source = stored_source(record.source);
        match expected {
            Some(v) => self.push("match", v.as_str(), record, source),
            None => self.push("any", "", record, source),
        }
    }

    /// Makes `record` the set of record if the store has none: a node seeding an empty store
    /// from its rules directory. Two nodes seeding at once: one is [`Pushed::Done`], the other
    /// a [`Pushed::Conflict`] (it then loads the set of record) or [`Pushed::Unchanged`]. The
    /// store records its source as `seed`, whatever `record.source` says.
    pub fn seed_rules(&self, record: &RuleRecord) -> Result<Pushed> {
        self.push("none", "", record, SEED)
    }

    fn push(
        &self,
        mode: &str,
        expected: &str,
        record: &RuleRecord,
        source: &str,
    ) -> Result<Pushed> {
        let files = serde_json::to_string(&record.files).map_err(|e| corrupt("rule files", e))?;
        let version = record.version.as_str();
        let entry = serde_json::json!([version, source, record.at.as_millis()]);
        let call = ScriptCall::new(&PUSH)
            .key(self.keys.rules())
            .key(self.keys.rules_history())
            .key(self.keys.rules_kept())
            .arg(self.keys.prefix())
            .arg(mode)
            .arg(expected)
            .arg(version)
            .arg(files)
            .arg(source)
            .arg(record.at.as_millis())
            .arg(entry.to_string())
            .arg(FILES_KEPT);
        let reply: Vec<String> = self.eval("push rules", call)?;
        match reply.first().map(String::as_str) {
            Some("done") => Ok(Pushed::Done),
            Some("unchanged") => Ok(Pushed::Unchanged),
            Some("conflict") => Ok(Pushed::Conflict {
                current: reply
                    .get(1)
                    .filter(|v| !v.is_empty())
                    .map(|v| version_of(v))
                    .transpose()?,
            }),
            _ => Err(corrupt("push rules reply", format!("{reply:?}"))),
        }
    }

    /// The newest `limit` entries of the rule history, newest first: each accepted, with no
    /// errors, actor or arms (the store keeps none).
    pub fn rules_history(&self, limit: usize) -> Result<Vec<HistoryEntry>> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let key = self.keys.rules_history();
        let stop = isize::try_from(limit - 1).unwrap_or(isize::MAX);
        let entries: Vec<String> = self.io.run("rules history", move |mut c| async move {
            c.lrange(key, 0, stop).await
        })?;
        entries
            .iter()
            .map(|e| {
                let (version, source, at): (String, String, u64) =
                    serde_json::from_str(e).map_err(|err| corrupt("rule history entry", err))?;
                Ok(HistoryEntry {
                    version: version_of(&version)?,
                    outcome: Outcome::Accepted,
                    source: source_of(&source)?,
                    at: UNIX_EPOCH + Duration::from_millis(at),
                    errors: Vec::new(),
                    by: None,
                    arms: None,
                })
            })
            .collect()
    }

    /// The set of `version` with its files (as it was last pushed), if it is one of the last
    /// [`FILES_KEPT`] accepted versions: for a diff, or a rollback.
    pub fn rules_at(&self, version: Version) -> Result<Option<RuleRecord>> {
        self.rule_record("rules at", self.keys.rule_set(version.as_str()))
    }

    fn rule_record(&self, op: &'static str, key: String) -> Result<Option<RuleRecord>> {
        let fields: Fields = self
            .io
            .run(op, move |mut c| async move { c.hgetall(key).await })?;
        if fields.is_empty() {
            return Ok(None);
        }
        let get = |name: &str| {
            fields
                .iter()
                .find(|(f, _)| f == name)
                .map(|(_, v)| v.as_str())
                .ok_or_else(|| corrupt("rule set", format!("no field {name}")))
        };
        let files = serde_json::from_str(get("files")?).map_err(|e| corrupt("rule files", e))?;
        let at = get("at")?
            .parse::<u64>()
            .map_err(|e| corrupt("rule set at", e))?;
        Ok(Some(RuleRecord {
            version: version_of(get("version")?)?,
            files,
            source: source_of(get("source")?)?,
            at: Timestamp::from_millis(at),
        }))
    }

    /// Records that `node` runs `version`, and the errors that kept it from running the set
    /// of record (`None`: it runs it).
    pub fn set_applied(
        &self,
        node: &str,
        version: Version,
        errors: Option<&[String]>,
    ) -> Result<()> {
        let errors = errors
            .map(|e| serde_json::json!(e).to_string())
            .unwrap_or_default();
        let call = ScriptCall::new(&APPLIED)
            .key(self.keys.rules_applied())
            .key(self.keys.rules_errors())
            .arg(node)
            .arg(version.as_str())
            .arg(errors);
        let _: u8 = self.eval("set applied", call)?;
        Ok(())
    }

    /// What each node said it runs, by node.
    pub fn applied(&self) -> Result<Vec<RulesApplied>> {
        let (applied, errors) = (self.keys.rules_applied(), self.keys.rules_errors());
        let (versions, errors): (Fields, Fields) =
            self.io.run("applied", move |mut c| async move {
                redis::pipe()
                    .hgetall(applied)
                    .hgetall(errors)
                    .query_async(&mut c)
                    .await
            })?;
        let mut out = versions
            .into_iter()
            .map(|(node, version)| {
                let errors = errors
                    .iter()
                    .find(|(n, _)| *n == node)
                    .map(|(_, e)| serde_json::from_str(e))
                    .transpose()
                    .map_err(|e| corrupt("rules errors", e))?;
                Ok(RulesApplied {
                    version: version_of(&version)?,
                    node,
                    errors,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        out.sort_by(|a, b| a.node.cmp(&b.node));
        Ok(out)
    }
}

/// The store's name of a seed's source (read back as [`Source::File`]).
const SEED: &str = "seed";

/// How the store spells `source`: the admin API's name, but `api` for a push.
fn stored_source(source: Source) -> &'static str {
    match source {
        Source::Push => "api",
        other => other.as_str(),
    }
}

/// Every source a set of record can have.
const SOURCES: [Source; 7] = [
    Source::File,
    Source::Push,
    Source::Pull,
    Source::Rollback,
    Source::Fleet,
    Source::Canary,
    Source::RolledBack,
];

/// The source the store spelled `stored`.
fn source_of(stored: &str) -> Result<Source> {
    if stored == SEED {
        return Ok(Source::File);
    }
    SOURCES
        .into_iter()
        .find(|s| stored_source(*s) == stored)
        .ok_or_else(|| corrupt("rule set source", stored))
}

/// A version the store holds.
fn version_of(text: &str) -> Result<Version> {
    text.parse().map_err(|e| corrupt("rule set version", e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_source_reads_back_as_written_and_a_seed_as_a_file() {
        for source in SOURCES {
            assert_eq!(source_of(stored_source(source)).unwrap(), source);
        }
        assert_eq!(stored_source(Source::Push), "api");
        assert_eq!(source_of("seed").unwrap(), Source::File);
        assert!(source_of("push").is_err(), "a push is stored as api");
    }
}
