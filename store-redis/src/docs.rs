//! Small documents a program keeps in the namespace beside the runtime's state, by kind and
//! name: `{NS}:docs:<kind>`, a hash of name → text. A write replaces the document whole, so
//! it is safe to repeat; a read answers every document of the kind in one round trip.

use super::RedisStore;
use rebound_runtime::store::Result;

impl RedisStore {
    /// Writes document `name` of `kind` (replacing it).
    pub fn put_doc(&self, kind: &str, name: &str, text: &str) -> Result<()> {
        let key = self.keys().key(&format!("docs:{kind}"));
        let (name, text) = (name.to_owned(), text.to_owned());
        self.io.run("put doc", move |mut c| async move {
            redis::cmd("HSET")
                .arg(key)
                .arg(name)
                .arg(text)
                .query_async::<i64>(&mut c)
                .await
                .map(drop)
        })
    }

    /// Every document of `kind`, as (name, text), in no particular order.
    pub fn docs(&self, kind: &str) -> Result<Vec<(String, String)>> {
        let key = self.keys().key(&format!("docs:{kind}"));
        self.io.run("read docs", move |mut c| async move {
            redis::cmd("HGETALL")
                .arg(key)
                .query_async::<Vec<(String, String)>>(&mut c)
                .await
        })
    }

    /// Failed round trips so far, by kind (`rebound_store_errors_total{kind}`).
    pub fn errors(&self) -> std::collections::BTreeMap<&'static str, u64> {
        self.io.errors()
    }
}
