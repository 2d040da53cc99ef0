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

use std::sync::LazyLock;

use redis::{AsyncCommands, Script};

use super::corrupt;
use crate::{RedisStore, ScriptCall};
use rebound_runtime::store::Result;
use rebound_runtime::time::Timestamp;

/// How many accepted versions keep their files: the spec's 50, as the engine's
/// `rebound_engine::reload::FILES_KEPT` keeps them in a process of its own.
pub const FILES_KEPT: usize = 50;

static PUSH: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../scripts/fleet_rules_push.lua")));
static APPLIED: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../scripts/fleet_rules_applied.lua")));

/// A rule set as the store holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleRecord {
    /// Its version (the engine's content hash).
    pub version: String,
    /// Each rule file: its name in the rules directory and its YAML text.
    pub files: Vec<(String, String)>,
    /// Where it came from: `api`, `file`, `rollback` or `seed`.
    pub source: String,
    /// When it was pushed.
    pub at: Timestamp,
}

/// One entry of the rule history: a set accepted, without its files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleEntry {
    /// Its version.
    pub version: String,
    /// Where it came from.
    pub source: String,
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
        current: Option<String>,
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
    pub version: String,
    /// Why it could not run the store's set, if it could not.
    pub errors: Option<Vec<String>>,
}

impl RedisStore {
    /// The rule set of record, if one was pushed or seeded.
    pub fn rules(&self) -> Result<Option<RuleRecord>> {
        self.rule_record("rules", self.keys.rules())
    }

    /// The version of the set of record: one cheap read, for polling.
    pub fn rules_version(&self) -> Result<Option<String>> {
        let key = self.keys.rules();
        self.io.run("rules version", move |mut c| async move {
            c.hget(key, "version").await
        })
    }

    /// Makes `record` the set of record, if the current version is `expected` (`None`: any
    /// or none). A record whose version is the current one is [`Pushed::Unchanged`], whatever
    /// was expected.
    pub fn push_rules(&self, expected: Option<&str>, record: &RuleRecord) -> Result<Pushed> {
        match expected {
            Some(v) => self.push("match", v, record),
            None => self.push("any", "", record),
        }
    }

    /// Makes `record` the set of record if the store has none: a node seeding an empty store
    /// from its rules directory. Two nodes seeding at once: one is [`Pushed::Done`], the other
    /// a [`Pushed::Conflict`] (it then loads the set of record) or [`Pushed::Unchanged`].
    pub fn seed_rules(&self, record: &RuleRecord) -> Result<Pushed> {
        self.push("none", "", record)
    }

    fn push(&self, mode: &str, expected: &str, record: &RuleRecord) -> Result<Pushed> {
        let files = serde_json::to_string(&record.files).map_err(|e| corrupt("rule files", e))?;
        let entry = serde_json::json!([record.version, record.source, record.at.as_millis()]);
        let call = ScriptCall::new(&PUSH)
            .key(self.keys.rules())
            .key(self.keys.rules_history())
            .key(self.keys.rules_kept())
            .arg(self.keys.prefix())
            .arg(mode)
            .arg(expected)
            .arg(&record.version)
            .arg(files)
            .arg(&record.source)
            .arg(record.at.as_millis())
            .arg(entry.to_string())
            .arg(FILES_KEPT);
        let reply: Vec<String> = self.eval("push rules", call)?;
        match reply.first().map(String::as_str) {
            Some("done") => Ok(Pushed::Done),
            Some("unchanged") => Ok(Pushed::Unchanged),
            Some("conflict") => Ok(Pushed::Conflict {
                current: reply.get(1).filter(|v| !v.is_empty()).cloned(),
            }),
            _ => Err(corrupt("push rules reply", format!("{reply:?}"))),
        }
    }

    /// The newest `limit` entries of the rule history, newest first.
    pub fn rules_history(&self, limit: usize) -> Result<Vec<RuleEntry>> {
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
                Ok(RuleEntry {
                    version,
                    source,
                    at: Timestamp::from_millis(at),
                })
            })
            .collect()
    }

    /// The set of `version` with its files (as it was last pushed), if it is one of the last
    /// [`FILES_KEPT`] accepted versions: for a diff, or a rollback.
    pub fn rules_at(&self, version: &str) -> Result<Option<RuleRecord>> {
        self.rule_record("rules at", self.keys.rule_set(version))
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
            version: get("version")?.to_owned(),
            files,
            source: get("source")?.to_owned(),
            at: Timestamp::from_millis(at),
        }))
    }

    /// Records that `node` runs `version`, and the errors that kept it from running the set
    /// of record (`None`: it runs it).
    pub fn set_applied(&self, node: &str, version: &str, errors: Option<&[String]>) -> Result<()> {
        let errors = errors
            .map(|e| serde_json::json!(e).to_string())
            .unwrap_or_default();
        let call = ScriptCall::new(&APPLIED)
            .key(self.keys.rules_applied())
            .key(self.keys.rules_errors())
            .arg(node)
            .arg(version)
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
                    node,
                    version,
                    errors,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        out.sort_by(|a, b| a.node.cmp(&b.node));
        Ok(out)
    }
}
