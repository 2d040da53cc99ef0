//! A topology of one's own, run through `rebound::app` with everything `rebound serve` gives
//! the bundled pipeline: the live rules (edit `rules/` and the next failure is decided by the
//! new set), the labels acting on the dead letters, the admin API and the console over its
//! store, its counters in `/metrics`, Ctrl-C / SIGTERM and the bounded stop.
//!
//! ```sh
//! cargo run --example embed_topology -- --admin 127.0.0.1:8080          # until Ctrl-C
//! cargo run --example embed_topology -- --messages 500 --until-quiet   # a batch: ends by itself
//! ```
//!
//! Flags: `--rules DIR` (default: the shipped `rules/`), `--data DIR` (default: a temporary
//! directory), `--admin ADDR` (the admin API and console, loopback without a token),
//! `--messages N` (default 1,000), `--until-quiet` (end once every payment has its fate).
//!
//! The topology: `payments` (spout) hands out N numbered payments, each at its offset, and
//! moves its source position on each fate; `charge` (bolt) fails one payment in seven with
//! `PAY_PROCESSING` at its first attempt (the shipped rules retry it) and one in thirty-one
//! with `PAY_FAILED` (the rules dead-letter it at once, under `L3`).

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use rebound::Outcome;
use rebound::app::{self, AdminListen, JobError, Options, TokenFrom, TopologyJob};
use rebound_runtime::durable::SourcePosition;
use rebound_runtime::store::SqliteStore;
use rebound_runtime::topology::*;

fn id_of(n: u64) -> String {
    format!("payment-{n:06}")
}

fn number(id: &MessageId) -> u64 {
    let digits = id.as_str().trim_start_matches("payment-");
    digits.parse().unwrap_or(0)
}

struct Payments {
    next: u64,
    last: u64,
    position: SourcePosition,
}

impl Spout for Payments {
    fn next(&mut self) -> NextMessage {
        loop {
            self.next += 1;
            if self.next > self.last {
                return NextMessage::Exhausted;
            }
            // After a restart: payments with a fate, or a retry in the store, are not handed
            // out again.
            if !self.position.should_skip(self.next) {
                break;
            }
        }
        let n = self.next;
        self.position.handing_out(n);
        let payload = format!("{{\"payment\":\"{}\",\"cents\":{}}}", id_of(n), 100 + n);
        NextMessage::Ready(Message::new(id_of(n), "PAYMENT", payload).with_offset(n))
    }

    fn ack(&mut self, id: &MessageId) {
        self.position.settled(number(id));
    }

    fn dead_lettered(&mut self, id: &MessageId) {
        self.position.settled(number(id));
    }

    fn close(&mut self) {
        self.position.sync();
    }
}

struct Charge;

impl Bolt for Charge {
    fn execute(&mut self, input: &Tuple, _: &mut Emitter<'_>) -> Result<(), Failure> {
        let n = number(&MessageId::from(input.str("id").unwrap_or_default()));
        let attempt = input.int("attempt").unwrap_or(1);
        if n.is_multiple_of(31) {
            return Err(Failure::new("PAY_FAILED", "card declined"));
        }
        if n.is_multiple_of(7) && attempt <= 1 {
            return Err(Failure::new(
                "PAY_PROCESSING",
                "the gateway is still processing",
            ));
        }
        Ok(())
    }
}

/// The flags, and what is wrong with them.
struct Flags {
    rules: PathBuf,
    data: Option<PathBuf>,
    admin: Option<String>,
    messages: u64,
    until_quiet: bool,
}

fn flags() -> Result<Flags, String> {
    let mut f = Flags {
        rules: PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("rules"),
        data: None,
        admin: None,
        messages: 1_000,
        until_quiet: false,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or(format!("{arg} needs a value"));
        match arg.as_str() {
            "--rules" => f.rules = value()?.into(),
            "--data" => f.data = Some(value()?.into()),
            "--admin" => f.admin = Some(value()?),
            "--messages" => {
                let v = value()?;
                f.messages = v
                    .parse()
                    .map_err(|_| format!("--messages: '{v}' is not a count"))?;
            }
            "--until-quiet" => f.until_quiet = true,
            other => return Err(format!("unknown flag '{other}' (see the example's docs)")),
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
    let last = flags.messages;
    let job = TopologyJob::new(store, move |durable, recovered| {
        let owned = recovered.iter().map(number);
        let position = durable.source_position("payments", id_of, owned)?;
        let spout = Mutex::new(Some(Payments {
            next: position.committed(),
            last,
            position,
        }));
        let mut b = TopologyBuilder::new("payments");
        b.spout("payments", 1, move |_| {
            spout.lock().unwrap().take().expect("one task")
        });
        b.bolt("charge", 2, |_| Charge).shuffle("payments");
        Ok::<_, JobError>(b.build()?)
    });
    let job = if flags.until_quiet {
        job.until_quiet()
    } else {
        job
    };
    code(app::run_job(options, set, job))
}
