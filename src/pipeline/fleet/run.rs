//! The bundled run across nodes: `rebound run --messages N` on several nodes of one namespace
//! is one run. The first node records the run's parameters; a node started later reads them
//! back and refuses to start (exit 2) if it was asked for different ones, naming each
//! [`Difference`]. The first node to see every message settled records when the run finished;
//! a node started after that prints the final report and exits.
//!
//! Its keys, in the store's namespace (scripts `scripts/record_run.lua` and `finish_run.lua`,
//! run by [`RedisStore::eval`]):
//!
//! | key | type | holds |
//! |---|---|---|
//! | `{NS}:run` | hash | the run's parameters (name → value) |
//! | `{NS}:run:finished` | string | when the run finished, ms (first wins) |

use std::sync::LazyLock;

use rebound_runtime::store::{Result, StoreError};
use rebound_runtime::time::Timestamp;
use rebound_store_redis::redis::{self, Script};
use rebound_store_redis::{RedisStore, ScriptCall};

static RECORD: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/record_run.lua")));
static FINISH: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/finish_run.lua")));

/// The run's parameters as recorded by the first node, by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedRun {
    /// Each parameter and its value, sorted by name.
    pub params: Vec<(String, String)>,
    /// True if this call recorded them (this node was first). A call run again after a lost
    /// reply answers false even if its first run recorded them.
    pub recorded_now: bool,
}

/// A parameter the recorded run and a node's command disagree on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Difference {
    /// The parameter (`messages`, `time_scale`, `seed`…).
    pub name: String,
    /// Its recorded value, if the run recorded it.
    pub recorded: Option<String>,
    /// The value the node was asked for, if it was asked for one.
    pub asked: Option<String>,
}

impl std::fmt::Display for Difference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let show = |v: &Option<String>| v.clone().unwrap_or_else(|| "nothing".to_owned());
        write!(
            f,
            "{}: the run was recorded with {}, this node was asked for {}",
            self.name,
            show(&self.recorded),
            show(&self.asked)
        )
    }
}

impl RecordedRun {
    /// The recorded value of `name`.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// Every parameter on which `asked` differs from the record (a parameter only one side
    /// names differs too), by name. Empty if the node may join the run.
    ///
    /// ```
    /// use rebound::pipeline::fleet::run::RecordedRun;
    /// let run = RecordedRun {
    ///     params: vec![("messages".into(), "1000".into()), ("seed".into(), "7".into())],
    ///     recorded_now: false,
    /// };
    /// let asked = [("messages".to_owned(), "2000".to_owned()), ("seed".to_owned(), "7".to_owned())];
    /// let d = run.differences(&asked);
    /// assert_eq!(d.len(), 1);
    /// assert_eq!(d[0].name, "messages");
    /// ```
    pub fn differences(&self, asked: &[(String, String)]) -> Vec<Difference> {
        let mut names: Vec<&str> = self
            .params
            .iter()
            .chain(asked)
            .map(|(n, _)| n.as_str())
            .collect();
        names.sort_unstable();
        names.dedup();
        names
            .into_iter()
            .filter_map(|name| {
                let recorded = self.get(name);
                let wanted = asked
                    .iter()
                    .find(|(n, _)| n == name)
                    .map(|(_, v)| v.as_str());
                (recorded != wanted).then(|| Difference {
                    name: name.to_owned(),
                    recorded: recorded.map(str::to_owned),
                    asked: wanted.map(str::to_owned),
                })
            })
            .collect()
    }
}

/// Records the run's parameters in `store` if no run is recorded yet, and answers the
/// recorded ones (these, or the first node's).
pub fn record(store: &RedisStore, params: &[(String, String)]) -> Result<RecordedRun> {
    let mut call = ScriptCall::new(&RECORD).key(store.keys().key("run"));
    for (name, value) in params {
        call = call.arg(name).arg(value);
    }
    let (recorded_now, mut params): (u8, Vec<(String, String)>) = store.eval("record run", call)?;
    params.sort();
    Ok(RecordedRun {
        params,
        recorded_now: recorded_now == 1,
    })
}

/// Records that the run finished at `at`, unless a node recorded it already, and answers the
/// recorded time (first wins).
pub fn finish(store: &RedisStore, at: Timestamp) -> Result<Timestamp> {
    let call = ScriptCall::new(&FINISH)
        .key(finished_key(store))
        .arg(at.as_millis());
    let recorded: String = store.eval("finish run", call)?;
    parse_ms(&recorded)
}

/// When the run finished, if a node recorded it.
pub fn finished(store: &RedisStore) -> Result<Option<Timestamp>> {
    let (recorded,): (Option<String>,) = store.query(
        "run finished",
        redis::pipe().get(finished_key(store)).clone(),
    )?;
    recorded.as_deref().map(parse_ms).transpose()
}

/// `{NS}:run:finished`.
fn finished_key(store: &RedisStore) -> String {
    store.keys().key("run:finished")
}

fn parse_ms(text: &str) -> Result<Timestamp> {
    text.parse::<u64>()
        .map(Timestamp::from_millis)
        .map_err(|e| StoreError::corrupt("redis", "run finished", format!("{text:?}: {e}")))
}
