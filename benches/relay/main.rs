//! `rebound relay` on Redis Streams against a hand-written loop, in the same run (issue 27,
//! "Measured when done"). Not a criterion statistic: throughput runs of a real process.
//!
//! The bench starts a `redis-server` of its own and a no-op handler in-process (axum on
//! 127.0.0.1:0, answering 200 at once), then, interleaved for [`ROUNDS`] rounds:
//!
//! - **relay**: the binary cargo built for this profile (`rebound relay --source
//!   redis-stream://… --handler … --admin 127.0.0.1:0`, the repo's `rules/`, a fresh data
//!   directory) over a stream of N entries added (pipelined) before it starts; timed from the
//!   first request the handler sees (process start-up excluded) until the handler has answered
//!   N with 200 and the group's pending list is empty (`XPENDING`);
//! - **hand loop**: a tokio task of this process, the same crates: `XREADGROUP` (batch 100),
//!   one `POST` per message through `rebound::outbound::client(None)` with at most 64 in flight
//!   (a `Semaphore`, as the relay's default `handler.concurrency`), `XACK` per batch once its
//!   posts are answered; on a fresh stream of N, timed the same way.
//!
//! Then one relay run in which the handler answers every tenth message's first attempt with
//! 503 `{"code":"PAY_PROCESSING"}` (biz `PAYMENT`: the shipped rules retry it after 100 ms):
//! the rate, the handler latency p50/p99 read from the relay's `rebound_handler_seconds`
//! histogram in `/metrics`, and the round trips to Redis per message (`INFO commandstats`
//! before and after, without the bench's own `XPENDING` and `INFO`).
//!
//! With `BENCH_STEADY_SECS` > 0, a relay is fed at a steady rate (`BENCH_STEADY_RATE`,
//! default 2,000/s, the same 10% failing once) for that long, and its RSS (`VmRSS`) and the
//! size of its data directory are printed each minute.
//!
//! Every run prints the CPU seconds it cost (the relay process, `redis-server`, and this
//! process, which is the handler, and the hand loop in its runs): where the time goes.
//!
//! Measured on the 2-core dev machine (`/proc/loadavg` is printed with each run), 50,000
//! messages, load 1.7: relay 35,563/s and 39,294/s against the hand loop's 35,982/s and
//! 34,969/s (ratios 0.99 and 1.12); with 10% failing, 28,697/s, handler latency p50 1.36 ms and
//! p99 3.94 ms, 0.043 Redis round trips per message (the loop makes 0.020: the relay's reader
//! reads partial batches ahead and acks custody in smaller groups). Steady at 2,000/s for
//! 120 s (10% failing once): RSS 49 MB throughout; the data directory 4.6 MB at 60 s and
//! 5.2 MB at 120 s, about 4.5 bytes per message: the acked fates of the retried messages,
//! which no source position prunes (a relay writes none for a first-delivery ack). Since the
//! store prunes those by time (`source.fates_keep`), `BENCH_STEADY_SECS=180
//! BENCH_STEADY_FATES_KEEP=30s BENCH_STEADY_PRINT_SECS=30`: RSS 48.4–49.0 MB, the data
//! directory 4,651 KiB at 30 s, 4,723 KiB at 60, 90, 120 and 150 s, 4,735 KiB at the end
//! (360,000 messages): flat once the window is full.
//!
//! Before the relay stopped recording an acked fate for every message, it ran at 0.62 to 0.75
//! of the loop (a `perf` profile: reqwest and hyper with the kernel's loopback `writev` 56%,
//! redis-rs 11%, the journal's SQLite write per message 11.5%, the handler bolt's task 8%, the
//! runtime about 8%), and its data directory grew about 43 bytes per message.
//!
//! The parts: `handler.rs` (the no-op handler), `broker.rs` (the stream and Redis's own
//! counts), `process.rs` (the relay process, CPU and memory from /proc), `hand_loop.rs`,
//! `run.rs` (one timed run), `steady.rs` (the histogram's quantiles, the steady run).
//!
//! ```sh
//! cargo bench --bench relay
//! BENCH_MESSAGES=100000 cargo bench --bench relay
//! BENCH_STEADY_SECS=600 cargo bench --bench relay     # the 10-minute RSS run
//! ```
#![allow(missing_docs)]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use tokio::sync::Semaphore;

pub(crate) const ROUNDS: usize = 2;
pub(crate) const BATCH: usize = 100;
pub(crate) const CONCURRENCY: usize = 64;
pub(crate) const GROUP: &str = "rebound";
pub(crate) const BIZ: &str = "PAYMENT";

pub(crate) fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.replace('_', "").parse().ok())
        .unwrap_or(default)
}

mod broker;
mod hand_loop;
mod handler;
mod process;
mod run;
mod steady;

use broker::*;
use hand_loop::*;
use handler::*;
use process::*;
use run::*;
use steady::*;

fn main() {
    let n = env_u64("BENCH_MESSAGES", 50_000);
    // Installs ring as the process's rustls provider (this process's reqwest has none).
    rebound::outbound::client(None).expect("the outbound client builds");
    let server = rebound_store_redis::TestServer::start_with(&["--appendonly", "no", "--save", ""]);
    let seen = Arc::new(Seen::default());
    let handler = start_handler(seen.clone());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    println!(
        "relay bench: {n} messages, batch {BATCH}, concurrency {CONCURRENCY}; {} cores, load {}",
        std::thread::available_parallelism().map_or(0, |p| p.get()),
        load()
    );

    let (mut relays, mut hands) = (Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        println!("round {round}:");
        let (run, _, _) = relay_run(
            &server,
            &seen,
            &handler,
            &format!("relay-{round}"),
            n,
            false,
        );
        print_run("relay    ", &run, n);
        relays.push(run.rate);
        let run = hand_run(&rt, &server, &seen, &handler, &format!("hand-{round}"), n);
        print_run("hand loop", &run, n);
        hands.push(run.rate);
        println!("  ratio {:.2}", relays[round] / hands[round]);
    }
    let best = |v: &[f64]| v.iter().copied().fold(0.0, f64::max);
    println!(
        "best: relay {:.0}/s, hand loop {:.0}/s, ratio {:.2} (target >= 0.8); relay absolute {:.0}/s (target >= 25,000/s); load {}",
        best(&relays),
        best(&hands),
        best(&relays) / best(&hands),
        best(&relays),
        load()
    );

    println!(
        "10% failing (503 PAY_PROCESSING on a tenth of first attempts, retried after 100 ms):"
    );
    let (run, metrics, report) = relay_run(&server, &seen, &handler, "failing", n, true);
    print_run("relay    ", &run, n);
    let b = buckets(&metrics);
    let ms = |q| quantile(&b, q).map_or("-".into(), |s| format!("{:.2} ms", s * 1000.0));
    println!(
        "  handler answered 200 {}, 503 {}; handler latency (rebound_handler_seconds) p50 {}, p99 {}; buckets (le s, cumulative): {}",
        seen.ok.load(Relaxed),
        seen.failed.load(Relaxed),
        ms(0.5),
        ms(0.99),
        b.iter()
            .take_while(|(_, c)| *c < b.last().map_or(0, |l| l.1))
            .chain(b.iter().find(|(_, c)| *c == b.last().map_or(0, |l| l.1)))
            .map(|(le, c)| format!("{le}:{c}"))
            .collect::<Vec<_>>()
            .join(" ")
    );
    if let Some(line) = report
        .lines()
        .find(|l| l.contains("received") || l.contains("retried"))
    {
        println!("  relay's report: {}", line.trim());
    }

    let secs = env_u64("BENCH_STEADY_SECS", 0);
    if secs > 0 {
        steady(&server, &seen, &handler, secs);
    }
}
