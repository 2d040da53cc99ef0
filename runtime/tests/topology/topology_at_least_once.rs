//! At-least-once under injected faults: random topologies (spout and bolt parallelism, chain
//! length, groupings) with random fault rates — bolt errors, panics, handles dropped un-acked,
//! handles held until the tree times out, async acks — and a dead-letter store that fails now
//! and then. At quiescence every id the spouts handed out was told exactly one fate, the
//! dead-letter store holds exactly the dead-lettered ids, and no spout task ever had more than
//! `max_spout_pending` trees in flight.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common::{CountingSpout, FateLog, SharedLog, paused_runtime, quiet_injected_panics};
use proptest::prelude::*;
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use rebound_runtime::fate::memory::{FixedPolicy, MemoryDeadLetters};
use rebound_runtime::fate::{BoxFuture, DeadLetter, DeadLetterSink, Seams, SinkError};
use rebound_runtime::topology::*;

#[derive(Clone, Copy, Debug)]
struct Faults {
    error: f64,
    panic: f64,
    drop_handle: f64,
    hold_handle: f64,
    async_ack: f64,
}

struct FaultyBolt {
    rng: SmallRng,
    faults: Faults,
    fanout: u32,
}

impl Bolt for FaultyBolt {
    fn execute(&mut self, input: &Tuple, out: &mut Emitter<'_>) -> Result<(), Failure> {
        let r: f64 = self.rng.random();
        if r < self.faults.panic {
            panic!("injected panic");
        }
        if r < self.faults.panic + self.faults.error {
            return Err(Failure::new("INJECTED", "injected error"));
        }
        let key = input.get(0).cloned().unwrap_or(Value::Null);
        for _ in 0..self.rng.random_range(0..=self.fanout) {
            out.emit((key.clone(),));
        }
        Ok(())
    }
}

struct FaultyDeferred {
    rng: SmallRng,
    faults: Faults,
    held: Vec<PendingTuple>,
    fanout: u32,
}

impl DeferredBolt for FaultyDeferred {
    fn execute(&mut self, input: PendingTuple) {
        let f = self.faults;
        let r: f64 = self.rng.random();
        let key = input.tuple().get(0).cloned().unwrap_or(Value::Null);
        let emits: Vec<Values> = (0..self.rng.random_range(0..=self.fanout))
            .map(|_| Values::from((key.clone(),)))
            .collect();
        let mut edge = f.panic;
        if r < edge {
            panic!("injected panic in a deferred bolt");
        }
        edge += f.drop_handle;
        if r < edge {
            drop(input); // forgotten ack: fails at once with UNACKED
            return;
        }
        edge += f.hold_handle;
        if r < edge {
            self.held.push(input); // never acked: the tree times out
            return;
        }
        edge += f.error;
        if r < edge {
            input.fail(Failure::new("INJECTED", "injected error"));
            return;
        }
        edge += f.async_ack;
        if r < edge {
            let delay = Duration::from_millis(self.rng.random_range(1..20));
            tokio::spawn(async move {
                tokio::time::sleep(delay).await;
                input.ack_emitting(emits);
            });
            return;
        }
        input.ack_emitting(emits);
    }
}

/// A dead-letter store that fails a share of its calls (the runtime must retry them).
struct FlakySink {
    inner: MemoryDeadLetters,
    calls: AtomicU64,
    fail_every: u64,
}

impl DeadLetterSink for FlakySink {
    fn store<'a>(&'a self, batch: &'a [DeadLetter]) -> BoxFuture<'a, Result<(), SinkError>> {
        Box::pin(async move {
            let n = self.calls.fetch_add(1, Ordering::Relaxed);
            if self.fail_every > 0 && n % self.fail_every == 1 {
                return Err(SinkError("injected sink failure".into()));
            }
            self.inner.store(batch).await
        })
    }
}

#[derive(Clone, Debug)]
struct Scenario {
    seed: u64,
    spout_tasks: usize,
    messages: u64,
    stages: Vec<(usize, u8, bool)>, // (parallelism, grouping 0..4, deferred)
    faults: Faults,
    max_pending: usize,
    ackers: usize,
    sink_fail_every: u64,
}

fn scenario() -> impl Strategy<Value = Scenario> {
    (
        any::<u64>(),
        1usize..=3,
        20u64..=120,
        prop::collection::vec((1usize..=3, 0u8..4, any::<bool>()), 1..=3),
        (
            0.0f64..0.15,
            0.0f64..0.05,
            0.0f64..0.05,
            0.0f64..0.03,
            0.0f64..0.3,
        ),
        prop_oneof![Just(1usize), Just(4), Just(50)],
        1usize..=3,
        prop_oneof![Just(0u64), Just(3)],
    )
        .prop_map(
            |(
                seed,
                spout_tasks,
                messages,
                stages,
                (error, panic, drop_handle, hold_handle, async_ack),
                max_pending,
                ackers,
                sink_fail_every,
            )| Scenario {
                seed,
                spout_tasks,
                messages,
                stages,
                faults: Faults {
                    error,
                    panic,
                    drop_handle,
                    hold_handle,
                    async_ack,
                },
                max_pending,
                ackers,
                sink_fail_every,
            },
        )
}

async fn run_scenario(s: Scenario) {
    let log: SharedLog = Arc::new(Mutex::new(FateLog::default()));
    let mut b = TopologyBuilder::new("faults");
    b.config(Config {
        message_timeout: Duration::from_millis(500),
        max_spout_pending: s.max_pending,
        ackers: s.ackers,
        batch_size: 16,
        channel_capacity: 4,
        ..Config::default()
    });
    let spout_log = log.clone();
    let total = s.messages;
    b.spout("source", s.spout_tasks, move |task| {
        let mut spout = CountingSpout::new(format!("s{}", task.index), total, spout_log.clone());
        spout.idle_every = 13;
        spout
    });
    let mut upstream = ("source".to_string(), "id".to_string());
    for (i, (par, grouping, deferred)) in s.stages.iter().enumerate() {
        let name = format!("stage{i}");
        let seed = s.seed.wrapping_add(i as u64 * 7919);
        let faults = s.faults;
        let counter = Arc::new(AtomicU64::new(0));
        let decl = if *deferred {
            b.deferred_bolt(&name, *par, move |task| FaultyDeferred {
                rng: SmallRng::seed_from_u64(
                    seed ^ (task.index as u64) ^ counter.fetch_add(1 << 32, Ordering::Relaxed),
                ),
                faults,
                held: Vec::new(),
                fanout: 2,
            })
        } else {
            b.bolt(&name, *par, move |task| FaultyBolt {
                rng: SmallRng::seed_from_u64(
                    seed ^ (task.index as u64) ^ counter.fetch_add(1 << 32, Ordering::Relaxed),
                ),
                faults,
                fanout: 2,
            })
        };
        decl.output(["k"]);
        let (source, key) = &upstream;
        match grouping {
            0 => decl.shuffle(source),
            1 => decl.fields(source, [key.as_str()]),
            2 => decl.all(source),
            _ => decl.global(source),
        };
        upstream = (name, "k".to_string());
    }
    let topology = b.build().expect("valid topology");
    let letters = MemoryDeadLetters::new();
    let seams = Seams::in_memory()
        .with_policy(FixedPolicy {
            max_attempts: 3,
            base_delay: Duration::from_millis(10),
            ..FixedPolicy::default()
        })
        .with_dead_letters(FlakySink {
            inner: letters.clone(),
            calls: AtomicU64::new(0),
            fail_every: s.sink_fail_every,
        });
    let running = topology.start(seams);
    tokio::time::timeout(Duration::from_secs(3600), running.wait_quiescent())
        .await
        .expect("the topology reaches quiescence");
    let stats = running.stats();
    let report = running.shutdown(Duration::from_secs(10)).await;
    assert!(report.drained);
    assert_eq!(report.abandoned, 0);

    let log = log.lock().unwrap();
    assert_eq!(
        log.handed_out.len() as u64,
        s.messages * s.spout_tasks as u64
    );
    log.assert_one_fate_each();
    let stored: BTreeSet<String> = letters
        .letters()
        .iter()
        .map(|d| d.id().to_string())
        .collect();
    let told: BTreeSet<String> = log.dead_lettered.keys().cloned().collect();
    assert_eq!(
        stored, told,
        "the store holds exactly the dead-lettered ids"
    );
    assert!(
        stats.task_pending_high_water <= s.max_pending as u64,
        "pending high water {} > max_spout_pending {}",
        stats.task_pending_high_water,
        s.max_pending
    );
    assert_eq!(stats.pending, 0);
    assert_eq!(stats.retry_queue_depth, 0);
    assert_eq!(stats.acked, log.acked.len() as u64);
    assert_eq!(stats.dead_lettered, log.dead_lettered.len() as u64);
    assert_eq!(
        stats.emitted,
        stats.acked + stats.retries + stats.dead_lettered
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

    #[test]
    fn every_message_ends_acked_or_dead_lettered_exactly_once(s in scenario()) {
        quiet_injected_panics();
        paused_runtime().block_on(run_scenario(s));
    }
}

/// The same property on a real multi-threaded runtime and real time, so that tasks truly run
/// in parallel. Bounds are generous: nothing here depends on the machine's speed.
#[test]
fn at_least_once_on_a_multi_threaded_runtime() {
    quiet_injected_panics();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    for seed in 0..3 {
        rt.block_on(run_scenario(Scenario {
            seed,
            spout_tasks: 2,
            messages: 300,
            stages: vec![(2, 0, false), (2, 1, true), (1, 2, false)],
            faults: Faults {
                error: 0.05,
                panic: 0.01,
                drop_handle: 0.01,
                hold_handle: 0.005,
                async_ack: 0.2,
            },
            max_pending: 40,
            ackers: 2,
            sink_fail_every: 3,
        }));
    }
}
