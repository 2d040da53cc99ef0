//! Consuming a real stream: a Redis stream read by a consumer group, your own bolt handling
//! each message, the shipped rules deciding every failure, and custody: a message whose retry
//! waits is acknowledged to Redis once the retry is in Rebound's store, so nothing waits at
//! the broker. Everything `rebound serve` gives comes with it (`rebound::app`): live rules,
//! labels that act, the admin API and console, `/metrics`, Ctrl-C and the bounded stop.
//!
//! ```sh
//! redis-cli XADD orders '*' biz PAYMENT payload '{"order":1}'
//! redis-cli XADD orders '*' biz PAYMENT payload '{"order":2,"processing":true}'
//! cargo run --example consume_stream -- 'redis-stream://127.0.0.1:6379/orders?group=demo'
//! ```
//!
//! Flags: the source URL (`redis-stream://[USER:PASS@]HOST:PORT[/DB]/STREAM?group=G`),
//! `--consumer NAME` (this process's name in the group; default `example`), `--data DIR`
//! (the store; default a temporary directory), `--admin ADDR` (the admin API and console),
//! `--rules DIR` (default the shipped `rules/`).
//!
//! The bolt `charge` fails a payload that says `"processing":true` with `PAY_PROCESSING` on
//! its first attempt (the shipped rules retry it) and one that says `"declined":true` with
//! `PAY_FAILED` (dead-lettered at once, label `L3`); it prints every message it handles.

use std::path::PathBuf;
use std::sync::Arc;

use rebound::Outcome;
use rebound::app::{self, AdminListen, JobError, Options, TokenFrom, TopologyJob};
use rebound_runtime::store::SqliteStore;
use rebound_runtime::topology::*;
use rebound_store_redis::stream::{StreamOptions, StreamSource, StreamUrl};

struct Charge;

impl Bolt for Charge {
    fn execute(&mut self, input: &Tuple, _: &mut Emitter<'_>) -> Result<(), Failure> {
        let id = input.str("id").unwrap_or_default();
        let attempt = input.int("attempt").unwrap_or(1);
        let payload = input
            .field("payload")
            .and_then(Value::as_bytes)
            .map(|b| String::from_utf8_lossy(b).into_owned())
            .unwrap_or_default();
        println!("{id} (attempt {attempt}): {payload}");
        if payload.contains("\"declined\":true") {
            return Err(Failure::new("PAY_FAILED", "card declined"));
        }
        if payload.contains("\"processing\":true") && attempt <= 1 {
            return Err(Failure::new(
                "PAY_PROCESSING",
                "the gateway is still processing",
            ));
        }
        Ok(())
    }
}

struct Flags {
    url: String,
    consumer: String,
    rules: PathBuf,
    data: Option<PathBuf>,
    admin: Option<String>,
}

fn flags() -> Result<Flags, String> {
    let mut f = Flags {
        url: "redis-stream://127.0.0.1:6379/orders?group=rebound-example".into(),
        consumer: "example".into(),
        rules: PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("rules"),
        data: None,
        admin: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or(format!("{arg} needs a value"));
        match arg.as_str() {
            "--consumer" => f.consumer = value()?,
            "--rules" => f.rules = value()?.into(),
            "--data" => f.data = Some(value()?.into()),
            "--admin" => f.admin = Some(value()?),
            url if url.starts_with("redis-stream://") => f.url = url.to_owned(),
            other => {
                return Err(format!(
                    "unknown argument '{other}' (see the example's docs)"
                ));
            }
        }
    }
    Ok(f)
}

fn main() -> std::process::ExitCode {
    let code = |o: Outcome| std::process::ExitCode::from(o as u8);
    let flags = match flags() {
        Ok(f) => f,
        Err(e) => {
            eprintln!("error: {e}");
            return code(Outcome::Trouble);
        }
    };
    let url = match StreamUrl::parse(&flags.url) {
        Ok(url) => url,
        Err(e) => {
            eprintln!("error: {e}");
            return code(Outcome::Trouble);
        }
    };
    let set = match rebound_engine::load_dir(&flags.rules) {
        Ok(Ok(set)) => set,
        Ok(Err(rejected)) => {
            eprintln!(
                "error: the rules in {} do not compile:\n{rejected}",
                flags.rules.display()
            );
            return code(Outcome::Wrong);
        }
        Err(e) => {
            eprintln!("error: {}: {e}", flags.rules.display());
            return code(Outcome::Trouble);
        }
    };
    let temp = tempfile::tempdir().expect("a temporary directory");
    let data = flags.data.clone().unwrap_or_else(|| temp.path().to_owned());
    let store = match SqliteStore::open(&data) {
        Ok(s) => Arc::new(s),
        Err(e) => {
            eprintln!("error: {e}");
            return code(Outcome::Trouble);
        }
    };
    let mut options = Options::embedded(&flags.rules);
    if let Some(addr) = &flags.admin {
        match AdminListen::check(addr, TokenFrom::Env) {
            Ok(listen) => options.admin = Some(listen),
            Err(outcome) => return code(outcome),
        }
    }
    let source = StreamOptions::new(url, flags.consumer.clone());
    let stats = source.stats.clone();
    let name = source.url.stream.clone();
    let job = TopologyJob::new(store, move |durable, _recovered| {
        let mut b = TopologyBuilder::new("stream");
        let (source, durable) = (source.clone(), durable.clone());
        b.spout("orders", 1, move |_| {
            StreamSource::start(source.clone(), Some(durable.clone())).expect("a parsed URL")
        });
        b.bolt("charge", 2, |_| Charge).shuffle("orders");
        Ok::<_, JobError>(b.build()?)
    })
    .source(name, stats);
    code(app::run_job(options, set, job))
}
