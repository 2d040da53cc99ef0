//! The decision log's cost (release.md): the durable source at a 10% failure rate (as
//! `source-10`), its failures decided by the rule engine (`RulePolicy`, a 1 ms fixed retry),
//! with the decision log off and on (every decision recorded and written by the journal), in
//! interleaved rounds. `BENCH_DECISIONS_ONLY=1` runs only this part.

use std::sync::atomic::{AtomicU8, Ordering};

use super::topology::{Retries, run_topology_with};
use super::work::Work;
use super::{median, per_second};

/// Which policy `run_topology_with` decides with: the bench's `FixedPolicy` (0), the rules
/// without a decision log (1), the rules with it (2).
pub(crate) static POLICY: AtomicU8 = AtomicU8::new(0);

/// The rules the two variants decide with.
pub(crate) const RULES: &str = "version: 1
defaults:
  retry: { max_retries: 9, backoff: { fixed: 1ms } }
  dead_letter: L2
";

pub(crate) fn interleaved_decisions(
    rt: &tokio::runtime::Runtime,
    max_pending: usize,
    rounds: usize,
) {
    let run = |policy: u8| {
        POLICY.store(policy, Ordering::Relaxed);
        let r = per_second(run_topology_with(
            rt,
            Work::Json,
            max_pending,
            10,
            Retries::DurableEveryAck,
        ));
        POLICY.store(0, Ordering::Relaxed);
        r
    };
    let (mut off, mut on, mut ratio) = (vec![], vec![], vec![]);
    for _ in 0..rounds {
        let a = run(1);
        let b = run(2);
        off.push(a);
        on.push(b);
        ratio.push(b / a);
    }
    println!(
        "decision log (durable source, 10% failing, rules): off {:.0}/s, on {:.0}/s, on/off {:.3} (median of {rounds} interleaved rounds; target >= 0.95)",
        median(off),
        median(on),
        median(ratio),
    );
}
