//! The work of each stage, shared by the topology and the bare pipelines.

use super::*;

// ---- the work of each stage, shared by both pipelines ----

pub(crate) fn mix(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x
}

/// What the parse stage does with the payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Work {
    /// A checksum over the payload: almost no work, so the runtime's own cost dominates.
    Light,
    /// `serde_json` into a struct, as the bundled pipeline's parse bolt does.
    Json,
}

#[derive(serde::Deserialize)]
#[allow(dead_code)]
pub(crate) struct Order<'a> {
    order: &'a str,
    amount: i64,
    currency: &'a str,
    items: u32,
}

/// "Parse": the order number from the id, an amount from the payload.
pub(crate) fn parse(work: Work, id: &str, payload: &[u8]) -> (u64, i64) {
    let order = id.bytes().fold(0u64, |a, b| a * 10 + u64::from(b - b'0'));
    let amount = match work {
        Work::Light => {
            let sum = payload.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
                (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3)
            });
            (sum % 10_000) as i64
        }
        Work::Json => serde_json::from_slice::<Order<'_>>(payload).map_or(-1, |o| o.amount),
    };
    (order, amount)
}

/// "Store": an idempotent write into a table; fails for one in `fail_one_in` (order, attempt)
/// pairs (20: 5%).
pub(crate) fn store(
    table: &mut [i64],
    order: u64,
    amount: i64,
    attempt: i64,
    fail_one_in: u64,
) -> bool {
    if mix(order ^ (attempt as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)).is_multiple_of(fail_one_in)
    {
        return false;
    }
    let slot = (mix(order) as usize) % table.len();
    table[slot] = amount;
    true
}

pub(crate) fn id_for(buf: &mut String, n: u64) -> Arc<str> {
    buf.clear();
    let _ = write!(buf, "{n}");
    Arc::from(buf.as_str())
}
