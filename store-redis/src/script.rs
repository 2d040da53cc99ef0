//! A program's own records in the namespace: its Lua scripts and commands, run on the store's
//! connection with the store's errors ([`StoreError::Backend`](rebound_runtime::store::StoreError::Backend),
//! backend `redis`), round-trip count and per-call deadline, exactly as the store's own fleet
//! records are. A program names its keys with [`Keys::key`](crate::Keys::key) (so they begin
//! with `{NS}:`, the namespace's hash tag) and documents them where it defines them; a script
//! is atomic on the server, and should be safe to run twice (a reply lost to a dropped
//! connection leaves its outcome unknown, and the caller may run it again).
//!
//! ```no_run
//! use std::sync::LazyLock;
//! use rebound_store_redis::{RedisOptions, RedisStore, ScriptCall};
//! use rebound_store_redis::redis::{self, Script};
//!
//! static FIRST: LazyLock<Script> =
//!     LazyLock::new(|| Script::new("redis.call('SET', KEYS[1], ARGV[1], 'NX') return redis.call('GET', KEYS[1])"));
//!
//! let store = RedisStore::connect(&RedisOptions::new("redis://127.0.0.1/", "demo"))?;
//! let call = ScriptCall::new(&FIRST).key(store.keys().key("first")).arg("me");
//! let first: String = store.eval("first wins", call)?;
//! let count: (u64,) = store.query("count", redis::pipe().scard(store.keys().key("set")).clone())?;
//! # Ok::<(), rebound_runtime::store::StoreError>(())
//! ```

use redis::{FromRedisValue, Pipeline, Script, ToRedisArgs};

use crate::RedisStore;
use rebound_runtime::store::Result;

/// One script call's keys and arguments, built before the round trip (the future it runs in
/// must own them).
#[derive(Debug, Clone)]
pub struct ScriptCall {
    script: &'static Script,
    keys: Vec<String>,
    args: Vec<Vec<u8>>,
}

impl ScriptCall {
    /// A call of `script`, with no keys or arguments yet.
    pub fn new(script: &'static Script) -> ScriptCall {
        ScriptCall {
            script,
            keys: Vec::new(),
            args: Vec::new(),
        }
    }

    /// Adds the next key (`KEYS[n]`).
    pub fn key(mut self, key: String) -> ScriptCall {
        self.keys.push(key);
        self
    }

    /// Adds the next argument (`ARGV[n]`; a value that writes several, such as a slice,
    /// adds each).
    pub fn arg(mut self, arg: impl ToRedisArgs) -> ScriptCall {
        self.args.extend(arg.to_redis_args());
        self
    }
}

impl RedisStore {
    /// Runs one script (`EVALSHA`, loading it on the first call): one round trip. `what`
    /// names the call in an error.
    pub fn eval<T>(&self, what: &'static str, call: ScriptCall) -> Result<T>
    where
        T: FromRedisValue + Send + 'static,
    {
        self.io.run(what, move |mut c| async move {
            let mut invocation = call.script.prepare_invoke();
            for k in &call.keys {
                invocation.key(k);
            }
            for a in &call.args {
                invocation.arg(a.as_slice());
            }
            invocation.invoke_async(&mut c).await
        })
    }

    /// Runs `commands` (reads, or writes that need no check first), pipelined: one round
    /// trip, answered as a tuple or list of their replies. `what` names the call in an error.
    pub fn query<T>(&self, what: &'static str, commands: Pipeline) -> Result<T>
    where
        T: FromRedisValue + Send + 'static,
    {
        self.io.run(what, move |mut c| async move {
            commands.query_async(&mut c).await
        })
    }
}
