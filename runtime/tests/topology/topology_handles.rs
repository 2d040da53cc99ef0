//! The failure modes from the field: forgotten acks, handles held past the timeout, panics,
//! async work, emits on failure, slow dead-letter storage, graceful shutdown, and the
//! builder's checks.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common::{CountingSpout, FateLog, SharedLog, paused_runtime, quiet_injected_panics};
use rebound_runtime::fate::memory::{FixedPolicy, MemoryDeadLetters};
use rebound_runtime::fate::{BoxFuture, DeadLetter, DeadLetterSink, Seams, SinkError};
use rebound_runtime::topology::*;
use tokio::time::Instant;

fn new_log() -> SharedLog {
    Arc::new(Mutex::new(FateLog::default()))
}

fn give_up_on(codes: &[&str]) -> FixedPolicy {
    FixedPolicy {
        max_attempts: 5,
        base_delay: Duration::from_millis(10),
        give_up_codes: codes.iter().map(|c| c.to_string()).collect(),
        ..FixedPolicy::default()
    }
}

/// Drops every handle it gets (a forgotten ack), or keeps it forever.
struct Careless {
    keep: bool,
    kept: Vec<PendingTuple>,
}

impl DeferredBolt for Careless {
    fn execute(&mut self, input: PendingTuple) {
        if self.keep {
            self.kept.push(input);
        }
    }
}

/// `messages` messages from a counting spout into a [`Careless`] bolt that keeps (or drops)
/// every handle, with this timeout and, if given, this `max_spout_pending`.
fn careless_topology(
    name: &str,
    max_pending: Option<usize>,
    timeout: Duration,
    messages: u64,
    keep: bool,
    log: &SharedLog,
) -> Topology {
    let mut b = TopologyBuilder::new(name);
    let defaults = Config::default();
    b.config(Config {
        max_spout_pending: max_pending.unwrap_or(defaults.max_spout_pending),
        message_timeout: timeout,
        ..defaults
    });
    let spout_log = log.clone();
    b.spout("source", 1, move |_| {
        CountingSpout::new("m", messages, spout_log.clone())
    });
    b.deferred_bolt("careless", 1, move |_| Careless {
        keep,
        kept: Vec::new(),
    })
    .shuffle("source");
    b.build().unwrap()
}

async fn run_careless(keep: bool, timeout: Duration) -> (Vec<DeadLetter>, Duration) {
    let log = new_log();
    let topology = careless_topology("careless", None, timeout, 10, keep, &log);
    let letters = MemoryDeadLetters::new();
    let seams = Seams::in_memory()
        .with_policy(give_up_on(&[codes::UNACKED, codes::TIMEOUT]))
        .with_dead_letters(letters.clone());
    let start = Instant::now();
    let running = topology.start(seams);
    running.wait_quiescent().await;
    let took = start.elapsed();
    running.shutdown(Duration::from_secs(1)).await;
    log.lock().unwrap().assert_one_fate_each();
    (letters.letters(), took)
}

#[test]
fn a_dropped_handle_fails_at_once_with_unacked() {
    paused_runtime().block_on(async {
        let (letters, took) = run_careless(false, Duration::from_secs(3600)).await;
        assert_eq!(letters.len(), 10);
        assert!(letters.iter().all(|d| d.failure.code == codes::UNACKED));
        assert!(
            took < Duration::from_secs(1),
            "not left to the timeout: {took:?}"
        );
    });
}

#[test]
fn a_handle_kept_forever_times_out() {
    paused_runtime().block_on(async {
        let (letters, took) = run_careless(true, Duration::from_secs(2)).await;
        assert_eq!(letters.len(), 10);
        assert!(letters.iter().all(|d| d.failure.code == codes::TIMEOUT));
        assert!(took >= Duration::from_secs(2), "{took:?}");
        assert!(took <= Duration::from_secs(4), "{took:?}");
    });
}

/// Panics on the first delivery of message `m-3`.
struct PanicsOnce;

impl Bolt for PanicsOnce {
    fn execute(&mut self, input: &Tuple, out: &mut Emitter<'_>) -> Result<(), Failure> {
        if input.str("id") == Some("m-3") && input.int("attempt") == Some(1) {
            panic!("injected panic on m-3");
        }
        out.emit((input.str("id").unwrap_or_default(),));
        Ok(())
    }
}

#[test]
fn a_bolt_panic_fails_the_tuple_with_panic_and_restarts_the_task() {
    quiet_injected_panics();
    paused_runtime().block_on(async {
        let log = new_log();
        let made = Arc::new(AtomicUsize::new(0));
        let mut b = TopologyBuilder::new("panic");
        let spout_log = log.clone();
        b.spout("source", 1, move |_| {
            CountingSpout::new("m", 20, spout_log.clone())
        });
        let factory_made = made.clone();
        b.bolt("fragile", 1, move |_| {
            factory_made.fetch_add(1, Ordering::Relaxed);
            PanicsOnce
        })
        .output(["id"])
        .shuffle("source");
        let running = b
            .build()
            .unwrap()
            .start(Seams::in_memory().with_policy(give_up_on(&[])));
        running.wait_quiescent().await;
        let stats = running.stats();
        running.shutdown(Duration::from_secs(1)).await;
        let log = log.lock().unwrap();
        log.assert_one_fate_each();
        assert_eq!(
            log.acked.len(),
            20,
            "m-3 was retried and acked; the rest carried on"
        );
        assert_eq!(stats.panics, 1);
        assert_eq!(stats.failures_by_code.get(codes::PANIC), Some(&1));
        assert_eq!(
            made.load(Ordering::Relaxed),
            2,
            "the task got a fresh instance"
        );
    });
}

/// Holds handles; panics on the 5th input. The held handles must fail as PANIC too.
struct HoldsThenPanics {
    held: Vec<PendingTuple>,
}

impl DeferredBolt for HoldsThenPanics {
    fn execute(&mut self, input: PendingTuple) {
        if input.tuple().int("attempt") == Some(1) && self.held.len() == 4 {
            panic!("injected panic while holding handles");
        }
        if input.tuple().int("attempt") == Some(1) {
            self.held.push(input);
        } else {
            input.ack();
        }
    }
}

#[test]
fn handles_held_by_a_panicking_deferred_bolt_fail_as_panic() {
    quiet_injected_panics();
    paused_runtime().block_on(async {
        let log = new_log();
        let mut b = TopologyBuilder::new("deferred-panic");
        b.config(Config {
            message_timeout: Duration::from_secs(3600),
            ..Config::default()
        });
        let spout_log = log.clone();
        b.spout("source", 1, move |_| {
            CountingSpout::new("m", 5, spout_log.clone())
        });
        b.deferred_bolt("holder", 1, |_| HoldsThenPanics { held: Vec::new() })
            .shuffle("source");
        let start = Instant::now();
        let running = b
            .build()
            .unwrap()
            .start(Seams::in_memory().with_policy(give_up_on(&[])));
        running.wait_quiescent().await;
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "no timeout involved"
        );
        let stats = running.stats();
        running.shutdown(Duration::from_secs(1)).await;
        log.lock().unwrap().assert_one_fate_each();
        assert_eq!(stats.failures_by_code.get(codes::PANIC), Some(&5));
        assert_eq!(stats.acked, 5);
    });
}

/// Acks each input from a spawned task after a delay, emitting one child with the ack.
struct AsyncWorker;

impl DeferredBolt for AsyncWorker {
    fn execute(&mut self, input: PendingTuple) {
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            let id = input.tuple().str("id").unwrap_or_default().to_owned();
            input.ack_emitting([(id,)]);
        });
    }
}

/// Fails the first delivery of every child; records what it saw.
struct FailsFirstChild {
    failed: Arc<Mutex<BTreeSet<String>>>,
}

impl Bolt for FailsFirstChild {
    fn execute(&mut self, input: &Tuple, _: &mut Emitter<'_>) -> Result<(), Failure> {
        let id = input.str("id").unwrap_or_default().to_owned();
        if self.failed.lock().unwrap().insert(id) {
            return Err(Failure::new("CHILD", "downstream of async work failed"));
        }
        Ok(())
    }
}

#[test]
fn async_acks_carry_their_children_so_the_tree_waits_for_them() {
    paused_runtime().block_on(async {
        let log = new_log();
        let failed = Arc::new(Mutex::new(BTreeSet::new()));
        let mut b = TopologyBuilder::new("async");
        let spout_log = log.clone();
        b.spout("source", 1, move |_| {
            CountingSpout::new("m", 30, spout_log.clone())
        });
        b.deferred_bolt("work", 2, |_| AsyncWorker)
            .output(["id"])
            .shuffle("source");
        let seen = failed.clone();
        b.bolt("downstream", 2, move |_| FailsFirstChild {
            failed: seen.clone(),
        })
        .fields("work", ["id"]);
        let running = b
            .build()
            .unwrap()
            .start(Seams::in_memory().with_policy(give_up_on(&[])));
        running.wait_quiescent().await;
        let stats = running.stats();
        running.shutdown(Duration::from_secs(1)).await;
        let log = log.lock().unwrap();
        log.assert_one_fate_each();
        // Had the async ack completed the tree early, the child's failure would be ignored and
        // nothing retried.
        assert_eq!(stats.failures_by_code.get("CHILD"), Some(&30));
        assert_eq!(stats.retries, 30);
        assert_eq!(log.acked.len(), 30);
    });
}

/// Emits, then fails: the emitted tuple must never be sent.
struct EmitsThenFails;

impl Bolt for EmitsThenFails {
    fn execute(&mut self, input: &Tuple, out: &mut Emitter<'_>) -> Result<(), Failure> {
        out.emit((input.str("id").unwrap_or_default(),));
        if input.int("attempt") == Some(1) {
            return Err(Failure::new("NOPE", "failed after emitting"));
        }
        Ok(())
    }
}

struct CountAttempts {
    seen: Arc<AtomicUsize>,
}

impl Bolt for CountAttempts {
    fn execute(&mut self, _: &Tuple, _: &mut Emitter<'_>) -> Result<(), Failure> {
        self.seen.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

#[test]
fn emits_are_sent_only_when_the_bolt_returns_ok() {
    paused_runtime().block_on(async {
        let log = new_log();
        let seen = Arc::new(AtomicUsize::new(0));
        let mut b = TopologyBuilder::new("emit-on-ok");
        let spout_log = log.clone();
        b.spout("source", 1, move |_| {
            CountingSpout::new("m", 25, spout_log.clone())
        });
        b.bolt("first", 1, |_| EmitsThenFails)
            .output(["id"])
            .shuffle("source");
        let sink_seen = seen.clone();
        b.bolt("second", 1, move |_| CountAttempts {
            seen: sink_seen.clone(),
        })
        .shuffle("first");
        let running = b
            .build()
            .unwrap()
            .start(Seams::in_memory().with_policy(give_up_on(&[])));
        running.wait_quiescent().await;
        running.shutdown(Duration::from_secs(1)).await;
        log.lock().unwrap().assert_one_fate_each();
        assert_eq!(
            seen.load(Ordering::Relaxed),
            25,
            "only the second attempts' emits"
        );
    });
}

/// A dead-letter store that waits for a signal before storing anything.
struct GatedSink {
    open: Arc<tokio::sync::Notify>,
    opened: Arc<AtomicBool>,
    inner: MemoryDeadLetters,
}

impl DeadLetterSink for GatedSink {
    fn store<'a>(&'a self, batch: &'a [DeadLetter]) -> BoxFuture<'a, Result<(), SinkError>> {
        Box::pin(async move {
            if !self.opened.load(Ordering::Relaxed) {
                self.open.notified().await;
            }
            self.inner.store(batch).await
        })
    }
}

struct AlwaysFails;

impl Bolt for AlwaysFails {
    fn execute(&mut self, _: &Tuple, _: &mut Emitter<'_>) -> Result<(), Failure> {
        Err(Failure::new("BAD", "never works"))
    }
}

#[test]
fn dead_lettered_is_told_only_after_the_store_finished() {
    paused_runtime().block_on(async {
        let log = new_log();
        let mut b = TopologyBuilder::new("gated");
        b.config(Config {
            max_spout_pending: 8,
            ..Config::default()
        });
        let spout_log = log.clone();
        b.spout("source", 1, move |_| {
            CountingSpout::new("m", 20, spout_log.clone())
        });
        b.bolt("fails", 1, |_| AlwaysFails).shuffle("source");
        let open = Arc::new(tokio::sync::Notify::new());
        let opened = Arc::new(AtomicBool::new(false));
        let inner = MemoryDeadLetters::new();
        let sink = GatedSink {
            open: open.clone(),
            opened: opened.clone(),
            inner: inner.clone(),
        };
        let seams = Seams::in_memory()
            .with_policy(give_up_on(&["BAD"]))
            .with_dead_letters(sink);
        let running = b.build().unwrap().start(seams);
        tokio::time::sleep(Duration::from_secs(5)).await;
        {
            let log = log.lock().unwrap();
            assert!(
                log.dead_lettered.is_empty(),
                "told before the store finished"
            );
            // Letters waiting for the store still count as pending: the spout stops at 8.
            assert_eq!(log.handed_out.len(), 8);
        }
        assert_eq!(running.stats().pending, 8);
        opened.store(true, Ordering::Relaxed);
        open.notify_waiters();
        running.wait_quiescent().await;
        running.shutdown(Duration::from_secs(1)).await;
        let log = log.lock().unwrap();
        log.assert_one_fate_each();
        assert_eq!(log.dead_lettered.len(), 20);
        assert_eq!(inner.len(), 20);
    });
}

/// Acks every handle 200 ms after it arrived.
struct SlowAcker;

impl DeferredBolt for SlowAcker {
    fn execute(&mut self, input: PendingTuple) {
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(200)).await;
            input.ack();
        });
    }
}

/// The stall of `serve` in miniature: every `max_spout_pending` slot holds a tree that only ends
/// at its timeout, so nothing goes out until the acker times them out. The task says so.
#[test]
fn a_spout_whose_every_slot_waits_for_the_timeout_reports_a_stall_until_they_time_out() {
    paused_runtime().block_on(async {
        let log = new_log();
        let topology = careless_topology("stall", Some(4), Duration::from_secs(30), 8, true, &log);
        let seams = Seams::in_memory().with_policy(give_up_on(&[codes::TIMEOUT]));
        let start = Instant::now();
        let running = topology.start(seams);
        tokio::time::sleep(Duration::from_millis(500)).await;
        let s = running.stats();
        assert_eq!(
            (s.pending, s.stalled_spout_tasks),
            (4, 0),
            "full, not stalled yet"
        );
        tokio::time::sleep(Duration::from_millis(9_500)).await;
        let s = running.stats();
        assert_eq!((s.emitted, s.stalled_spout_tasks), (4, 1));
        let stalled = s.stalled;
        assert!(
            (Duration::from_secs(9)..=Duration::from_secs(10)).contains(&stalled),
            "counted while it lasts: {stalled:?}"
        );
        running.wait_quiescent().await;
        let took = start.elapsed();
        let s = running.stats();
        assert_eq!(s.failures_by_code[codes::TIMEOUT], 8);
        assert_eq!(s.stalled_spout_tasks, 0);
        // Two stalls, each from the fourth emit of a round to its timeout.
        assert!(
            s.stalled >= Duration::from_secs(2 * 29) && s.stalled <= took,
            "stalled {:?} of {took:?}",
            s.stalled
        );
        running.shutdown(Duration::from_secs(1)).await;
        log.lock().unwrap().assert_one_fate_each();
    });
}

/// Backpressure is no stall: at the limit all the time, but a tree finishes every 200 ms.
#[test]
fn a_spout_at_its_limit_whose_trees_keep_finishing_is_not_stalled() {
    paused_runtime().block_on(async {
        let log = new_log();
        let mut b = TopologyBuilder::new("busy");
        b.config(Config {
            max_spout_pending: 4,
            ..Config::default()
        });
        let spout_log = log.clone();
        b.spout("source", 1, move |_| {
            CountingSpout::new("m", 100, spout_log.clone())
        });
        b.deferred_bolt("slow", 1, |_| SlowAcker).shuffle("source");
        let running = b.build().unwrap().start(Seams::in_memory());
        running.wait_quiescent().await;
        let s = running.stats();
        assert_eq!((s.acked, s.pending_high_water), (100, 4));
        assert_eq!((s.stalled_spout_tasks, s.stalled), (0, Duration::ZERO));
        running.shutdown(Duration::from_secs(1)).await;
    });
}

#[test]
fn shutdown_stops_the_spouts_and_lets_trees_in_flight_finish() {
    paused_runtime().block_on(async {
        let log = new_log();
        let mut b = TopologyBuilder::new("drain");
        b.config(Config {
            max_spout_pending: 50,
            ..Config::default()
        });
        let spout_log = log.clone();
        b.spout("source", 2, move |t| {
            CountingSpout::new(format!("s{}", t.index), u64::MAX, spout_log.clone())
        });
        b.deferred_bolt("slow", 2, |_| SlowAcker).shuffle("source");
        let running = b.build().unwrap().start(Seams::in_memory());
        tokio::time::sleep(Duration::from_millis(1000)).await;
        let report = running.shutdown(Duration::from_secs(5)).await;
        assert!(report.drained);
        assert_eq!(report.abandoned, 0);
        let log = log.lock().unwrap();
        assert!(log.handed_out.len() >= 100);
        log.assert_one_fate_each();
    });
}

#[test]
fn shutdown_gives_up_on_trees_that_outlast_the_drain_timeout() {
    paused_runtime().block_on(async {
        let log = new_log();
        let topology =
            careless_topology("stuck", Some(7), Duration::from_secs(3600), 100, true, &log);
        let running = topology.start(Seams::in_memory());
        tokio::time::sleep(Duration::from_millis(100)).await;
        let report = running.shutdown(Duration::from_secs(2)).await;
        assert!(!report.drained);
        assert_eq!(report.abandoned, 7);
        let log = log.lock().unwrap();
        assert_eq!(log.handed_out.len(), 7);
        assert!(log.acked.is_empty() && log.dead_lettered.is_empty());
    });
}

struct Nop;

impl Bolt for Nop {
    fn execute(&mut self, _: &Tuple, _: &mut Emitter<'_>) -> Result<(), Failure> {
        Ok(())
    }
}

#[test]
fn the_builder_rejects_broken_topologies() {
    let log = new_log();
    let spout = move |_: &TaskInfo| CountingSpout::new("m", 1, log.clone());

    let mut b = TopologyBuilder::new("t");
    b.spout("s", 1, spout.clone());
    b.bolt("a", 1, |_| Nop).shuffle("nope");
    assert!(matches!(b.build(), Err(BuildError::UnknownSource { .. })));

    let mut b = TopologyBuilder::new("t");
    b.spout("s", 1, spout.clone());
    b.bolt("a", 1, |_| Nop).fields("s", ["missing"]);
    let err = b.build().err().unwrap();
    assert!(matches!(err, BuildError::UnknownField { .. }));
    assert!(err.to_string().contains("missing"), "{err}");

    let mut b = TopologyBuilder::new("t");
    b.spout("s", 1, spout.clone());
    b.bolt("a", 1, |_| Nop)
        .output(["x"])
        .shuffle("s")
        .shuffle("b");
    b.bolt("b", 1, |_| Nop).output(["x"]).shuffle("a");
    assert!(matches!(b.build(), Err(BuildError::Cycle(_))));

    let mut b = TopologyBuilder::new("t");
    b.spout("s", 0, spout.clone());
    assert!(matches!(b.build(), Err(BuildError::ZeroParallelism(_))));

    let mut b = TopologyBuilder::new("t");
    b.spout("s", 1, spout.clone());
    b.bolt("s", 1, |_| Nop).shuffle("s");
    assert!(matches!(b.build(), Err(BuildError::DuplicateName(_))));

    let mut b = TopologyBuilder::new("t");
    b.spout("s", 1, spout.clone());
    b.bolt("a", 1, |_| Nop);
    assert!(matches!(b.build(), Err(BuildError::NoInput(_))));

    let mut b = TopologyBuilder::new("t");
    b.spout("s", 1, spout);
    b.config(Config {
        max_spout_pending: 0,
        ..Config::default()
    });
    assert!(matches!(b.build(), Err(BuildError::InvalidConfig(_))));
}
