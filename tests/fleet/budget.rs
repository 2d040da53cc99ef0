//! One budget for three nodes over a real run (`operations.md`, "One fleet, one budget"):
//! through an outage that fails every payment, the payment retries the fleet fired in any
//! window of the budget exceed its allowance by at most the spec's bound,
//! `(N − 1) × ⌈allowance / N⌉`. What the fleet fired is read from the fleet's own counters on
//! the test's redis-server (the buckets the nodes add their retries to, a tenth of the window
//! each, by the server's clock), polled while the run lasts: counts, not the test's speed.

use std::collections::BTreeMap;
use std::fs::File;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::*;
use crate::one_at_a_time;

const MESSAGES: u64 = 6_000;
const SCALE: f64 = 10.0;
/// The floor alone: 10 a second over 10 s is 100 retries a window (1 s real at ×10).
const BUDGET: &str = "version: 1\nbudgets:\n  - id: payment-retries\n    match: { biz: PAYMENT }\n    ratio: 0%\n    min_per_s: 10\n    window: 10s\n    exhausted: hold\n";
const ALLOWANCE: u64 = 100;
const NODES: u64 = 3;
/// A window's buckets: a tenth of it each, 100 ms at ×10.
const BUCKET_MS: u64 = 100;

/// The shipped rules with the budget above for their adaptive file (no breaker: the budget
/// alone holds the retries back).
fn rules(dir: &Path) -> std::path::PathBuf {
    let rules = dir.join("rules");
    std::fs::create_dir_all(&rules).unwrap();
    for entry in std::fs::read_dir(shipped_rules()).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if path.is_file() && name.ends_with(".yaml") && name != "60-adaptive.yaml" {
            std::fs::copy(&path, rules.join(&name)).unwrap();
        }
    }
    std::fs::write(rules.join("60-adaptive.yaml"), BUDGET).unwrap();
    rules
}

/// Every bucket of the budget's retries fired the fleet's counters hold now, into `seen`
/// (bucket number -> the highest count read: a bucket only grows until it expires).
fn read_buckets(c: &mut redis::Connection, ns: &str, seen: &Mutex<BTreeMap<u64, u64>>) {
    let prefix = format!("{{{ns}}}:adaptive:c:{BUCKET_MS}:");
    for key in scan(c, &format!("{prefix}*")) {
        let Ok(bucket) = key[prefix.len()..].parse::<u64>() else {
            continue;
        };
        let fired: Option<u64> = redis::cmd("HGET")
            .arg(&key)
            .arg("r:payment-retries")
            .query(c)
            .expect("HGET a bucket");
        if let Some(n) = fired {
            let mut seen = seen.lock().unwrap();
            let at = seen.entry(bucket).or_default();
            *at = (*at).max(n);
        }
    }
}

#[test]
fn three_nodes_overshoot_one_budget_by_at_most_the_specs_bound() {
    let _one = one_at_a_time();
    let server = TestServer::start();
    let ns = "budget";
    let dir = tempfile::tempdir().unwrap();
    let rules = rules(dir.path());
    let seen = Arc::new(Mutex::new(BTreeMap::new()));
    let done = Arc::new(AtomicBool::new(false));
    let poller = {
        let (seen, done) = (seen.clone(), done.clone());
        let mut c = server.client();
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                read_buckets(&mut c, ns, &seen);
                std::thread::sleep(Duration::from_millis(100));
            }
            read_buckets(&mut c, ns, &seen);
        })
    };
    let nodes: Vec<(Running, std::path::PathBuf)> = ["a", "b", "c"]
        .iter()
        .map(|node| {
            let log = dir.path().join(format!("{node}.log"));
            let mut cmd = run_cmd(&dir.path().join(node), &rules, MESSAGES, SCALE);
            cmd.args(["--store", &server.url(), "--namespace", ns, "--node", node])
                .args(["--lease", "5s", "--outage", "100s"])
                .stdout(Stdio::piped())
                .stderr(File::create(&log).expect("a log file"));
            (Running::of(cmd.spawn().expect("spawn rebound")), log)
        })
        .collect();
    let run = Run {
        server: &server,
        ns,
        messages: MESSAGES,
    };
    let reports = finish(&run, nodes);
    done.store(true, Ordering::Relaxed);
    poller.join().unwrap();
    for r in &reports {
        assert_eq!(r["lost"], 0, "{r:#}");
    }
    let held = reports[0]["budgets"]["payment-retries"]["held"]
        .as_u64()
        .unwrap_or(0);

    // Every window of ten buckets (a missing bucket fired nothing).
    let seen = seen.lock().unwrap();
    let (first, last) = match (seen.keys().next(), seen.keys().last()) {
        (Some(f), Some(l)) => (*f, *l),
        _ => panic!("no bucket of the budget's retries was ever read"),
    };
    let fired_in = |end: u64| -> u64 {
        (end.saturating_sub(9)..=end)
            .map(|b| seen.get(&b).copied().unwrap_or(0))
            .sum()
    };
    let (peak_end, peak) = (first..=last + 9)
        .map(|end| (end, fired_in(end)))
        .max_by_key(|(_, n)| *n)
        .unwrap();
    let bound = ALLOWANCE + (NODES - 1) * ALLOWANCE.div_ceil(NODES);
    let total: u64 = seen.values().sum();
    eprintln!(
        "budget of {ALLOWANCE} a window, 3 nodes: the busiest window fired {peak} (bound \
         {bound}); {total} retries counted in {} buckets; held {held}",
        seen.len()
    );
    assert!(
        peak >= ALLOWANCE * 9 / 10,
        "the budget never held the fleet back (peak {peak}): the test would prove nothing"
    );
    assert!(held > 0, "no retry was held for want of room");
    assert!(
        peak <= bound,
        "the window ending at bucket {peak_end} fired {peak}, above the allowance {ALLOWANCE} \
         and the bound {bound}"
    );
}
