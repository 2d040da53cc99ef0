//! A shared idempotent effect set: the bundled pipeline's order sink across nodes. The fleet
//! delivers at least once (a node killed mid-delivery means a second delivery elsewhere), so
//! the sink keeps each order id once and counts the repeats it absorbed: the run's
//! `duplicates`, fleet-wide.
//!
//! Its keys, in the store's namespace (script `scripts/put_effects.lua`, run by
//! [`RedisStore::eval`]): a set's duplicates are a field of one hash, so no set name can reach
//! another set's counter.
//!
//! | key | type | holds |
//! |---|---|---|
//! | `{NS}:effects:<set>` | set | the set's ids |
//! | `{NS}:effects-dups` | hash | set → duplicates it absorbed |

use std::sync::LazyLock;

use rebound_runtime::store::Result;
use rebound_store_redis::redis::{self, Script};
use rebound_store_redis::{RedisStore, ScriptCall};

static PUT: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/put_effects.lua")));

/// Records the effects `ids` in `set`, in one round trip: true for an id recorded now, false
/// for one already there (counted as a duplicate). An empty `ids` makes no round trip.
pub fn put(store: &RedisStore, set: &str, ids: &[&str]) -> Result<Vec<bool>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let mut call = ScriptCall::new(&PUT)
        .key(set_key(store, set))
        .key(dups_key(store))
        .arg(set);
    for id in ids {
        call = call.arg(*id);
    }
    let added: Vec<u8> = store.eval("put effects", call)?;
    Ok(added.into_iter().map(|a| a == 1).collect())
}

/// How many distinct effects `set` holds, and how many duplicates it absorbed.
pub fn count(store: &RedisStore, set: &str) -> Result<(u64, u64)> {
    let (distinct, duplicates): (u64, Option<u64>) = store.query(
        "effects",
        redis::pipe()
            .scard(set_key(store, set))
            .hget(dups_key(store), set)
            .clone(),
    )?;
    Ok((distinct, duplicates.unwrap_or(0)))
}

/// Which of `ids` `set` holds, in one round trip (none for an empty `ids`).
pub fn held(store: &RedisStore, set: &str, ids: &[&str]) -> Result<Vec<bool>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let (held,): (Vec<bool>,) = store.query(
        "effects held",
        redis::pipe().smismember(set_key(store, set), ids).clone(),
    )?;
    Ok(held)
}

/// `{NS}:effects:<set>`.
fn set_key(store: &RedisStore, set: &str) -> String {
    store.keys().key(&format!("effects:{set}"))
}

/// `{NS}:effects-dups`.
fn dups_key(store: &RedisStore) -> String {
    store.keys().key("effects-dups")
}
