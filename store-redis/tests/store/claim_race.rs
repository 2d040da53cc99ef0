//! A claim race: 100,000 due retries, three OS processes (this test binary run again, in a
//! role named by an environment variable) with three claiming threads each, every thread with
//! a store (a connection) of its own, claiming, acking and reaping until nothing is left. One
//! thread's connection goes through a [`Proxy`] that loses some of its claims' replies: their
//! retries stay in flight under tokens nobody holds, and must come back after the lease.
//!
//! Each process writes what it claimed (id and token) and what it reaped to a file; the test
//! then checks that every retry was claimed, none twice without a reap between, every token
//! once, and every message acked.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use rebound_runtime::store::*;
use rebound_runtime::time::Timestamp;
use rebound_store_redis::RedisStore;

use super::proxy::Proxy;
use super::{connect, fresh_namespace, server};

const ROLE: &str = "REBOUND_CLAIM_RACE_ROLE";
const PORT: &str = "REBOUND_CLAIM_RACE_PORT";
const NS: &str = "REBOUND_CLAIM_RACE_NS";
const OUT: &str = "REBOUND_CLAIM_RACE_OUT";

const RETRIES: usize = 100_000;
const PROCESSES: usize = 3;
const THREADS: usize = 3;
const LEASE: Duration = Duration::from_millis(300);
/// Claims whose reply the proxied thread loses.
const LOST: usize = 8;

fn due_retry(i: usize) -> WriteOp {
    let mut message = Message::new(format!("race-{i:06}"), "ORDER", "{}");
    message.retry.first_delivery = Some(Timestamp::from_millis(1));
    WriteOp::Schedule(ScheduledRetry::new(
        message,
        Timestamp::from_millis(1_000 + (i % 1_000) as u64),
    ))
}

#[test]
fn claim_race_across_processes_claims_every_retry_once_between_reaps() {
    if let Ok(role) = std::env::var(ROLE) {
        return claimer_process(role.parse().expect("a process number"));
    }
    let started = Instant::now();
    let ns = fresh_namespace("claim-race");
    let store = connect(&server().url(), &ns);
    let ops: Vec<WriteOp> = (0..RETRIES).map(due_retry).collect();
    for batch in ops.chunks(4_096) {
        assert!(
            store
                .apply(batch)
                .unwrap()
                .iter()
                .all(|a| *a == Applied::Done)
        );
    }
    assert_eq!(store.depth().unwrap(), (RETRIES as u64, 0));
    let scheduled = started.elapsed();

    // This test, and only it, in each process.
    let name = module_path!()
        .split_once("::")
        .map_or(module_path!(), |(_, rest)| rest);
    let name = format!("{name}::claim_race_across_processes_claims_every_retry_once_between_reaps");
    let out = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let mut children: Vec<_> = (0..PROCESSES)
        .map(|p| {
            Command::new(&exe)
                .args([name.as_str(), "--exact", "--nocapture", "--test-threads=1"])
                .env(ROLE, p.to_string())
                .env(PORT, server().port().to_string())
                .env(NS, &ns)
                .env(OUT, out.path().join(format!("claims-{p}.txt")))
                .stdout(Stdio::null())
                .spawn()
                .expect("run the test binary again")
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(240);
    for child in &mut children {
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                assert!(status.success(), "a claimer process failed: {status}");
                break;
            }
            if Instant::now() > deadline {
                for c in &mut children {
                    let _ = c.kill();
                }
                panic!("the claimers did not finish within 240 s");
            }
            thread::sleep(Duration::from_millis(50));
        }
    }

    // What they did.
    let mut claims: HashMap<String, usize> = HashMap::new();
    let mut reaps: HashMap<String, usize> = HashMap::new();
    let mut tokens = HashSet::new();
    let (mut lost, mut errors) = (0, 0);
    for p in 0..PROCESSES {
        let log = std::fs::read_to_string(out.path().join(format!("claims-{p}.txt"))).unwrap();
        for line in log.lines() {
            match line.split(' ').collect::<Vec<_>>()[..] {
                ["C", id, token] => {
                    *claims.entry(id.to_owned()).or_default() += 1;
                    assert!(
                        tokens.insert(token.to_owned()),
                        "token {token} handed out twice"
                    );
                }
                ["R", id] => *reaps.entry(id.to_owned()).or_default() += 1,
                ["E"] => errors += 1,
                ["L", n] => lost += n.parse::<usize>().unwrap(),
                _ => panic!("unreadable line {line:?}"),
            }
        }
    }
    assert_eq!(claims.len(), RETRIES, "every retry claimed");
    for (id, n) in &claims {
        let reaped = reaps.get(id).copied().unwrap_or(0);
        assert!(
            *n <= 1 + reaped,
            "{id} claimed {n} times with {reaped} reaps"
        );
    }
    assert_eq!(lost, LOST, "replies the proxy lost");
    assert!(
        errors >= LOST,
        "{errors} claims failed, {lost} replies lost"
    );
    let reaped: usize = reaps.values().sum();
    assert!(reaped >= 1, "the lost claims came back through a reap");
    let ids: Vec<MessageId> = (0..RETRIES)
        .map(|i| MessageId::from(format!("race-{i:06}")))
        .collect();
    let fates = store.known_fates(&ids).unwrap();
    assert_eq!(fates.len(), RETRIES);
    assert!(fates.iter().all(|(_, f)| *f == Fate::Acked));
    assert_eq!(store.depth().unwrap(), (0, 0));
    let reclaimed = claims.values().filter(|n| **n > 1).count();
    println!(
        "claim race: {RETRIES} retries scheduled in {scheduled:?}, claimed and acked by \
         {PROCESSES}x{THREADS} claimers in {:?}; {lost} replies lost, {reaped} reaps, \
         {reclaimed} retries claimed again",
        started.elapsed() - scheduled
    );
}

/// One claimer process: its threads claim until nothing is left, then it writes its log.
fn claimer_process(p: usize) {
    let port: u16 = std::env::var(PORT).unwrap().parse().unwrap();
    let ns = std::env::var(NS).unwrap();
    let url = format!("redis://127.0.0.1:{port}/0");
    let proxy = (p == 0).then(|| Proxy::start(port));
    let logs: Vec<Vec<String>> = thread::scope(|scope| {
        let threads: Vec<_> = (0..THREADS)
            .map(|t| {
                let proxy = proxy.as_ref().filter(|_| t == 0);
                let store = connect(&proxy.map_or_else(|| url.clone(), Proxy::url), &ns);
                scope.spawn(move || claimer(&format!("p{p}-t{t}"), &store, proxy))
            })
            .collect();
        threads.into_iter().map(|t| t.join().unwrap()).collect()
    });
    let mut log = logs.concat();
    if let Some(proxy) = &proxy {
        log.push(format!("L {}", proxy.cuts()));
    }
    let path = std::env::var(OUT).unwrap();
    std::fs::write(Path::new(&path), log.join("\n")).unwrap();
}

/// Claims, acks and reaps until the namespace is empty; returns its log lines.
fn claimer(node: &str, store: &RedisStore, proxy: Option<&Proxy>) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(200);
    let mut log = Vec::new();
    let mut round = 0u64;
    loop {
        round += 1;
        assert!(Instant::now() < deadline, "{node}: not done within 200 s");
        if let Some(proxy) = proxy
            && round % 5 == 2
            && proxy.cuts() < LOST
        {
            proxy.lose_next_reply();
        }
        match store.claim(node, 100, LEASE) {
            Ok(claimed) if claimed.retries.is_empty() => {
                log.extend(reap(store, node));
                if store.depth().is_ok_and(|d| d == (0, 0)) {
                    return log;
                }
                thread::sleep(Duration::from_millis(20));
            }
            Ok(claimed) => {
                let mut acks = Vec::with_capacity(claimed.retries.len());
                for r in claimed.retries {
                    let token = r.claim.expect("a token").get();
                    log.push(format!("C {} {token}", r.message.id));
                    acks.push(WriteOp::Acked {
                        id: r.message.id,
                        at: claimed.now,
                        offset: None,
                    });
                }
                // Applied again until it goes through (the connection may be coming back).
                while let Err(e) = store.apply(&acks) {
                    assert!(e.is_unreachable(), "{node}: {e}");
                    thread::sleep(Duration::from_millis(20));
                }
            }
            Err(e) => {
                assert!(e.is_unreachable(), "{node}: {e}");
                log.push("E".to_owned());
                thread::sleep(Duration::from_millis(20));
            }
        }
        if round % 8 == 7 {
            log.extend(reap(store, node));
        }
    }
}

fn reap(store: &RedisStore, node: &str) -> Vec<String> {
    match store.reap(node, 1_000, 1_000, LEASE) {
        Ok(r) => r.returned.iter().map(|id| format!("R {id}")).collect(),
        Err(e) if e.is_unreachable() => Vec::new(),
        Err(e) => panic!("{node}: reap: {e}"),
    }
}
