//! A shared idempotent effect set: the bundled pipeline's order sink across nodes. The fleet
//! delivers at least once (a node killed mid-delivery means a second delivery elsewhere), so
//! the sink keeps each order id once and counts the repeats it absorbed: the run's
//! `duplicates`, fleet-wide.
//!
//! A set is `{NS}:effects:<set>` (a Redis set of ids); its duplicates are the field `<set>`
//! of the hash `{NS}:effects-dups`, so no set name can reach another set's counter.

use std::sync::LazyLock;

use redis::{AsyncCommands, Script};

use crate::{RedisStore, ScriptCall};
use rebound_runtime::store::Result;

static PUT: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../scripts/fleet_effects.lua")));

impl RedisStore {
    /// Records the effects `ids` in `set`, in one round trip: true for an id recorded now,
    /// false for one already there (counted as a duplicate). An empty `ids` makes no round
    /// trip.
    pub fn put_effects(&self, set: &str, ids: &[&str]) -> Result<Vec<bool>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut call = ScriptCall::new(&PUT)
            .key(self.keys.effects(set))
            .key(self.keys.effects_dups())
            .arg(set);
        for id in ids {
            call = call.arg(*id);
        }
        let added: Vec<u8> = self.eval("put effects", call)?;
        Ok(added.into_iter().map(|a| a == 1).collect())
    }

    /// How many distinct effects `set` holds, and how many duplicates it absorbed.
    pub fn effects(&self, set: &str) -> Result<(u64, u64)> {
        let (key, dups, field) = (
            self.keys.effects(set),
            self.keys.effects_dups(),
            set.to_owned(),
        );
        let (distinct, duplicates): (u64, Option<u64>) =
            self.io.run("effects", move |mut c| async move {
                redis::pipe()
                    .scard(key)
                    .hget(dups, field)
                    .query_async(&mut c)
                    .await
            })?;
        Ok((distinct, duplicates.unwrap_or(0)))
    }

    /// Which of `ids` `set` holds, in one round trip (none for an empty `ids`).
    pub fn effects_held(&self, set: &str, ids: &[&str]) -> Result<Vec<bool>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let key = self.keys.effects(set);
        let ids: Vec<String> = ids.iter().map(|id| (*id).to_owned()).collect();
        self.io.run("effects held", move |mut c| async move {
            c.smismember(key, ids).await
        })
    }

    /// True if `set` holds the effect `id`.
    pub fn effect_exists(&self, set: &str, id: &str) -> Result<bool> {
        let (key, id) = (self.keys.effects(set), id.to_owned());
        self.io.run("effect exists", move |mut c| async move {
            c.sismember(key, id).await
        })
    }
}
