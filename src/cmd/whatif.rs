//! `rebound whatif`: what a candidate rule set would have decided for every decision the log
//! holds (`docs/spec/release.md`, "What-if"). The comparison is the engine's
//! ([`rebound_engine::release::what_if`]); this module opens the store the log lives in,
//! without taking a running process's lock, and prints the answer.

use crate::Outcome;
use rebound::config::ConfigFile;
use rebound_engine::release::{ChangeRow, LoggedDecision, Quantiles, WhatIf, what_if};
use rebound_runtime::store::{DB_FILE, DecisionFilter, SqliteStore, Store};
use rebound_runtime::time::Timestamp;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Decide every logged decision again with a candidate rule set and show what would change.
#[derive(clap::Args)]
#[command(after_help = "Examples:\n  \
    rebound whatif --rules rules-next --data rebound-data      # the table of what would change\n  \
    rebound whatif --rules rules-next --since 1h --json        # the last hour, one JSON document\n  \
    rebound whatif --rules rules-next --fail-on-change         # a CI step: exit 1 on any change\n  \
    rebound whatif --rules rules-next --store redis://127.0.0.1:6379 --namespace shop\n\n\
    A decision changed when its rule, action or dead-letter label differs, or when both\n\
    decisions retry after different delays. Each row shows one example as a `rebound explain`\n\
    command that replays it. The store is only read: this works while `rebound run` or\n\
    `rebound serve` holds the data directory.")]
pub struct Args {
    /// The candidate rule set directory.
    #[arg(long, value_name = "DIR", default_value = "rules")]
    rules: PathBuf,
    /// The data directory whose store holds the decision log [default: rebound-data].
    #[arg(long, value_name = "DIR")]
    data: Option<PathBuf>,
    /// A shared store holding the log instead: `redis://[USER:PASSWORD@]HOST:PORT[/DB]`.
    #[arg(long, value_name = "URL")]
    store: Option<String>,
    /// The shared store's namespace [default: rebound].
    #[arg(long, value_name = "NS", requires = "store")]
    namespace: Option<String>,
    /// Only the decisions of this last stretch of time, e.g. 1h, 30m.
    #[arg(long, value_name = "DUR", value_parser = super::duration)]
    since: Option<Duration>,
    /// Print one JSON document instead of text.
    #[arg(long)]
    json: bool,
    /// Exit 1 when any decision changed (for a CI step).
    #[arg(long)]
    fail_on_change: bool,
}

/// Prints what would change; `Err` is the outcome to exit with when a flag, the candidate or
/// the store refuse it.
pub fn run(args: Args) -> Result<Outcome, Outcome> {
    let log = LogAt::of(&args)?;
    let (candidate, _) = super::load_rules(&args.rules, args.json)?;
    let since = args.since.map(|d| Timestamp::now().saturating_sub(d));
    let logged = log.read(since)?;
    let answer = what_if(&candidate, &logged);
    if args.json {
        let doc = serde_json::to_string(&answer).map_err(|e| {
            eprintln!("error: cannot write the answer as JSON: {e}");
            Outcome::Trouble
        })?;
        println!("{doc}");
    } else if logged.is_empty() {
        match args.since {
            None => println!(
                "the decision log is empty (no decisions recorded yet in {})",
                log.name()
            ),
            Some(d) => println!(
                "no decision was recorded in the last {} in {}",
                humantime::format_duration(d),
                log.name()
            ),
        }
    } else {
        print!("{}", describe(&answer, &args.rules));
    }
    Ok(if args.fail_on_change && answer.changed > 0 {
        Outcome::Wrong
    } else {
        Outcome::Ok
    })
}

/// Where the decision log is read from.
enum LogAt {
    /// `rebound.db` in a data directory.
    Data(PathBuf),
    /// A namespace on a shared store.
    Shared(Box<rebound::pipeline::FleetOptions>),
}

impl LogAt {
    /// The store of the flags: a bad flag is printed, exit 2.
    fn of(args: &Args) -> Result<LogAt, Outcome> {
        let data = || LogAt::Data(data_dir(args.data.clone()));
        let Some(url) = &args.store else {
            return Ok(data());
        };
        let flags = super::store::StoreArgs::reader(url.clone(), args.namespace.clone());
        match flags.fleet(&ConfigFile::default())? {
            Some(_) if args.data.is_some() => {
                eprintln!(
                    "error: --data and --store redis://… name two stores: give the one that holds the decision log"
                );
                Err(Outcome::Trouble)
            }
            Some(fleet) => Ok(LogAt::Shared(Box::new(fleet))),
            // `--store sqlite`: the embedded store of --data.
            None => Ok(data()),
        }
    }

    /// How the messages name it.
    fn name(&self) -> String {
        match self {
            LogAt::Data(dir) => dir.display().to_string(),
            LogAt::Shared(fleet) => format!("namespace {} of the store", fleet.redis.namespace),
        }
    }

    /// The logged decisions since `since`, oldest first. A store that cannot be opened or
    /// read is printed, exit 2.
    fn read(&self, since: Option<Timestamp>) -> Result<Vec<LoggedDecision>, Outcome> {
        let filter = DecisionFilter { since, limit: None };
        let trouble = |e: &dyn std::fmt::Display| {
            eprintln!(
                "error: cannot read the decision log in {}: {e}",
                self.name()
            );
            Outcome::Trouble
        };
        match self {
            LogAt::Data(dir) => {
                let store = open_sqlite(dir)?;
                store.decisions(&filter).map_err(|e| trouble(&e))
            }
            LogAt::Shared(fleet) => {
                let store = rebound_store_redis::RedisStore::connect(&fleet.redis)
                    .map_err(|e| trouble(&e))?;
                store.decisions(&filter).map_err(|e| trouble(&e))
            }
        }
    }
}

/// `--data`, else `rebound-data`.
fn data_dir(flag: Option<PathBuf>) -> PathBuf {
    flag.unwrap_or_else(|| rebound_runtime::store::DEFAULT_DATA_DIR.into())
}

/// The store of `dir`, which must already hold one: this command never creates a data
/// directory. SQLite's WAL lets it read beside the process that writes there, and the data
/// directory's lock is that process's, never taken here.
fn open_sqlite(dir: &Path) -> Result<SqliteStore, Outcome> {
    if !dir.is_dir() {
        eprintln!(
            "error: --data: the data directory {} does not exist (pass the --data of a `rebound run` or `serve`)",
            dir.display()
        );
        return Err(Outcome::Trouble);
    }
    if !dir.join(DB_FILE).is_file() {
        eprintln!(
            "error: --data: {} holds no store ({DB_FILE}): is it the --data of a `rebound run` or `serve`?",
            dir.display()
        );
        return Err(Outcome::Trouble);
    }
    SqliteStore::open(dir).map_err(|e| {
        eprintln!("error: {e}");
        Outcome::Trouble
    })
}

/// The human answer: the totals, then the table of changed rows, each with one example as a
/// replay command against the candidate in `rules`.
fn describe(answer: &WhatIf, rules: &Path) -> String {
    let mut out = format!(
        "total: {} decisions (decided by version {}), candidate {}\nchanged: {}\n",
        answer.total,
        answer.version.as_deref().unwrap_or("-"),
        answer.candidate,
        answer.changed
    );
    if answer.by.is_empty() {
        return out;
    }
    let header = [
        "rule (old → new)",
        "action",
        "label",
        "count",
        "delay p50/p99 (old → new)",
    ];
    let rows: Vec<[String; 5]> = answer.by.iter().map(columns).collect();
    let mut widths = header.map(|h| h.chars().count());
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    out.push('\n');
    out.push_str(&line(&header.map(String::from), &widths));
    for (row, changed) in rows.iter().zip(&answer.by) {
        out.push_str(&line(row, &widths));
        if let Some(example) = changed.examples.first() {
            out.push_str(&format!("    replay: {}\n", replay_command(example, rules)));
        }
    }
    out
}

/// One row's cells.
fn columns(row: &ChangeRow) -> [String; 5] {
    let label = |l: &Option<String>| l.clone().unwrap_or_else(|| "-".into());
    [
        format!("{} → {}", row.old.rule, row.new.rule),
        format!("{} → {}", row.old.action, row.new.action),
        format!("{} → {}", label(&row.old.label), label(&row.new.label)),
        row.count.to_string(),
        format!(
            "{} → {}",
            quantiles(&row.delay_ms.old),
            quantiles(&row.delay_ms.new)
        ),
    ]
}

fn quantiles(q: &Quantiles) -> String {
    let ms = |v: Option<u64>| v.map_or_else(|| "-".to_owned(), |v| format!("{v}ms"));
    format!("{}/{}", ms(q.p50), ms(q.p99))
}

/// Cells padded to `widths` (the count right-aligned), two spaces apart.
fn line(cells: &[String; 5], widths: &[usize; 5]) -> String {
    let padded: Vec<String> = cells
        .iter()
        .zip(widths)
        .enumerate()
        .map(|(i, (cell, &w))| match i {
            3 => format!("{cell:>w$}"),
            _ => format!("{cell:<w$}"),
        })
        .collect();
    format!("  {}\n", padded.join("  ").trim_end())
}

/// `rebound explain` with the flags that decide `example` (a `POST /v1/decide` body) again
/// with the candidate in `rules`.
pub fn replay_command(example: &Value, rules: &Path) -> String {
    let mut words = vec![
        "rebound".to_owned(),
        "explain".to_owned(),
        "--rules".to_owned(),
        quote(&rules.display().to_string()),
    ];
    let mut flag = |name: &str, value: String| {
        words.push(format!("--{name}"));
        words.push(quote(&value));
    };
    let text = |key: &str| example.get(key).map(plain).unwrap_or_default();
    let number = |key: &str| example.get(key).and_then(Value::as_u64);
    flag("biz", text("biz"));
    flag("code", text("code"));
    flag("attempt", text("attempt"));
    if let Some(n) = number("redrives").filter(|&n| n > 0) {
        flag("redrives", n.to_string());
    }
    flag(
        "elapsed",
        format!("{}ms", number("elapsed_ms").unwrap_or(0)),
    );
    if let Some(ms) = number("retry_after_ms") {
        flag("retry-after", format!("{ms}ms"));
    }
    if let Some(ms) = number("last_delay_ms").filter(|&ms| ms > 0) {
        flag("last-delay", format!("{ms}ms"));
    }
    for (key, name) in [
        ("attrs", "attr"),
        ("headers", "header"),
        ("signals", "signal"),
    ] {
        if let Some(map) = example.get(key).and_then(Value::as_object) {
            for (k, v) in map {
                flag(name, format!("{k}={}", plain(v)));
            }
        }
    }
    flag("now", text("now"));
    flag("seed", text("seed"));
    words.join(" ")
}

/// A JSON scalar as a flag's value: a string without its quotes.
fn plain(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// `s` as one shell word: as is when it is plain, else in single quotes.
fn quote(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.,:/=@%+".contains(c));
    if plain {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_replay_command_names_every_field_that_decides() {
        let body = json!({
            "biz": "PAYMENT", "code": "RATE_LIMITED", "attempt": 2, "redrives": 1,
            "elapsed_ms": 1500, "retry_after_ms": 2000, "last_delay_ms": 700,
            "attrs": {"downstream": "pay gw"}, "headers": {"tenant": "vip"},
            "signals": {"fail_rate": 0.5}, "now": "2026-05-28T20:26:40.001Z", "seed": 42,
            "id": "m-1",
        });
        assert_eq!(
            replay_command(&body, Path::new("rules next")),
            "rebound explain --rules 'rules next' --biz PAYMENT --code RATE_LIMITED --attempt 2 \
             --redrives 1 --elapsed 1500ms --retry-after 2000ms --last-delay 700ms \
             --attr 'downstream=pay gw' --header tenant=vip --signal fail_rate=0.5 \
             --now 2026-05-28T20:26:40.001Z --seed 42"
        );
    }

    #[test]
    fn quoting_keeps_plain_words_and_wraps_the_rest() {
        assert_eq!(quote("ORDER"), "ORDER");
        assert_eq!(quote(""), "''");
        assert_eq!(quote("it's"), r"'it'\''s'");
        assert_eq!(quote("a b"), "'a b'");
    }
}
