//! The fleet's adaptive state on Redis ([`RedisFleetState`], the runtime's
//! [`FleetState`]): each sync is one call of `scripts/fleet_adaptive.lua`, which adds the
//! node's counts into buckets a tenth of each counter's window wide (by the server's clock),
//! opens the breaker records it opened at the epoch it knew (first opener wins), stores its
//! heat, and answers the fleet's sums over the ten buckets ending now, every breaker record,
//! the live processes and the others' heat. See the script for what is safe to run twice.

use std::sync::LazyLock;
use std::time::Duration;

use redis::Script;

use super::{Member, corrupt};
use crate::{RedisStore, ScriptCall};
use rebound_runtime::adaptive::{BreakerRecord, FleetState, LIVE_WITHIN, Push, Totals};
use rebound_runtime::store::Result;

static SYNC: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../scripts/fleet_adaptive.lua")));

/// The narrowest bucket: a window under 100 ms is counted in 10 ms buckets (fewer than ten).
const MIN_BUCKET: Duration = Duration::from_millis(10);

/// One process's side of the fleet's adaptive state, on the shared store.
#[derive(Debug, Clone)]
pub struct RedisFleetState {
    store: RedisStore,
    /// This process (the member's instance: a restarted node is a new process, with its
    /// pushes counted from 1 again).
    process: String,
}

impl RedisFleetState {
    /// The adaptive state of `member`'s process on `store`'s namespace.
    pub fn new(store: &RedisStore, member: &Member) -> RedisFleetState {
        RedisFleetState {
            store: store.clone(),
            process: member.instance.clone(),
        }
    }
}

/// A counter's bucket width: a tenth of its window, whole milliseconds, at least
/// [`MIN_BUCKET`].
fn bucket_ms(window: Duration) -> u64 {
    u64::try_from((window / 10).max(MIN_BUCKET).as_millis()).unwrap_or(u64::MAX)
}

/// What the script answers: the sums, the records, the live processes, the others' heat and
/// the server's now.
type Answer = (Vec<u64>, Vec<String>, usize, Vec<String>, u64);

impl FleetState for RedisFleetState {
    fn sync(&self, push: &Push) -> Result<Totals> {
        let keys = self.store.keys();
        let mut call = ScriptCall::new(&SYNC)
            .key(keys.adaptive_members())
            .key(keys.adaptive_breakers())
            .key(keys.adaptive_seq())
            .arg(keys.prefix())
            .arg(&self.process)
            .arg(push.seq)
            .arg(u64::try_from(LIVE_WITHIN.as_millis()).unwrap_or(u64::MAX))
            .arg(push.adds.len());
        for (counter, n) in &push.adds {
            call = call
                .arg(counter.name())
                .arg(bucket_ms(counter.window))
                .arg(*n);
        }
        call = call.arg(push.reads.len());
        for counter in &push.reads {
            call = call.arg(counter.name()).arg(bucket_ms(counter.window));
        }
        call = call.arg(push.openings.len());
        for o in &push.openings {
            call = call
                .arg(format!("{}\u{1f}{}", o.breaker, o.key))
                .arg(o.known_epoch);
        }
        call = call.arg(push.heat.len());
        for (biz, value) in &push.heat {
            call = call.arg(biz.as_str()).arg(value.to_string());
        }
        let (counts, records, nodes, heat, now): Answer =
            self.store.eval("fleet adaptive", call)?;
        if counts.len() != push.reads.len() {
            return Err(corrupt(
                "adaptive sums",
                format!("{} sums for {} reads", counts.len(), push.reads.len()),
            ));
        }
        let mut breakers = Vec::with_capacity(records.len() / 2);
        for pair in records.chunks_exact(2) {
            let (field, value) = (&pair[0], &pair[1]);
            let (breaker, key) = field
                .split_once('\u{1f}')
                .ok_or_else(|| corrupt("adaptive breaker", field))?;
            let (epoch, at) = value
                .split_once(' ')
                .and_then(|(e, a)| Some((e.parse::<u64>().ok()?, a.parse::<u64>().ok()?)))
                .ok_or_else(|| corrupt("adaptive breaker record", value))?;
            breakers.push(BreakerRecord {
                breaker: breaker.to_owned(),
                key: key.to_owned(),
                epoch,
                opened_ago: Duration::from_millis(now.saturating_sub(at)),
            });
        }
        let heat = heat
            .chunks_exact(3)
            .filter_map(|h| {
                let value = h[1].parse::<f64>().ok()?;
                let ago = h[2].parse::<u64>().ok()?;
                Some((h[0].clone(), value, Duration::from_millis(ago)))
            })
            .collect();
        Ok(Totals {
            counts,
            breakers,
            nodes: nodes.max(1),
            heat,
        })
    }
}
