//! [`ClaimQueue`] for [`RedisStore`]: claim, extend and reap are one script call each
//! (`scripts/claim.lua`, `extend.lua`, `reap.lua`, each documenting what it reads, checks and
//! writes), on the server's clock. See [`ClaimQueue`]'s docs for the life of a claim.

use std::sync::LazyLock;
use std::time::Duration;

use redis::{Script, Value};

use super::RedisStore;
use super::wire::{self, Fields};
use rebound_runtime::store::{
    ClaimQueue, ClaimToken, Claimed, MessageId, Reaped, Result, ScheduledRetry,
};

static CLAIM: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("scripts/claim.lua")));
static EXTEND: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("scripts/extend.lua")));
static REAP: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("scripts/reap.lua")));

/// A lease in whole milliseconds, at least one.
fn lease_ms(lease: Duration) -> u64 {
    u64::try_from(lease.as_millis())
        .unwrap_or(u64::MAX / 2)
        .max(1)
}

/// A claimed row as a script answers it: `{ token, fields }`.
fn claimed(v: Value) -> Result<ScheduledRetry> {
    let mut items = wire::array(v)?.into_iter();
    let token = wire::int(items.next())?;
    let token = u64::try_from(token).map_err(|_| wire::bad_reply(format!("token {token}")))?;
    let fields = Fields::from_value(items.next().unwrap_or(Value::Nil))?;
    let mut retry = wire::retry(&fields)?;
    let token = ClaimToken::new(token).ok_or_else(|| wire::bad_reply("token 0".to_owned()))?;
    retry.claim = Some(token);
    Ok(retry)
}

impl ClaimQueue for RedisStore {
    fn claim(&self, node: &str, limit: usize, lease: Duration) -> Result<Claimed> {
        let mut call = CLAIM.prepare_invoke();
        call.key(self.keys.prefix())
            .arg(node)
            .arg(limit)
            .arg(lease_ms(lease));
        let reply: Vec<Value> = self.io.run("claim", move |mut c| async move {
            call.invoke_async(&mut c).await
        })?;
        let mut items = reply.into_iter();
        let now = wire::millis(items.next())?;
        let next_due = match items.next() {
            None | Some(Value::Nil) => None,
            head => Some(wire::millis(head)?),
        };
        let reclaims = wire::int(items.next())?;
        let retries = items.map(claimed).collect::<Result<Vec<_>>>()?;
        Ok(Claimed {
            reclaims: usize::try_from(reclaims).unwrap_or(0),
            retries,
            next_due,
            now,
        })
    }

    fn extend(
        &self,
        node: &str,
        claims: &[(MessageId, ClaimToken)],
        lease: Duration,
    ) -> Result<Vec<bool>> {
        if claims.is_empty() {
            return Ok(Vec::new());
        }
        let mut call = EXTEND.prepare_invoke();
        call.key(self.keys.prefix()).arg(node).arg(lease_ms(lease));
        for (id, token) in claims {
            call.arg(id.as_str()).arg(token.get());
        }
        let held: Vec<i64> = self.io.run("extend", move |mut c| async move {
            call.invoke_async(&mut c).await
        })?;
        if held.len() != claims.len() {
            return Err(wire::bad_reply(format!(
                "{} answers to {} claims",
                held.len(),
                claims.len()
            )));
        }
        Ok(held.into_iter().map(|h| h == 1).collect())
    }

    fn reap(&self, node: &str, limit: usize, max_reaps: u32, lease: Duration) -> Result<Reaped> {
        let mut call = REAP.prepare_invoke();
        call.key(self.keys.prefix())
            .arg(node)
            .arg(limit)
            .arg(max_reaps)
            .arg(lease_ms(lease));
        let reply: Vec<Value> = self.io.run("reap", move |mut c| async move {
            call.invoke_async(&mut c).await
        })?;
        let mut items = reply.into_iter();
        let returned = wire::array(items.next().unwrap_or(Value::Nil))?
            .into_iter()
            .map(|id| wire::message_id(Some(id)))
            .collect::<Result<_>>()?;
        let crash_loops = wire::array(items.next().unwrap_or(Value::Nil))?
            .into_iter()
            .map(claimed)
            .collect::<Result<_>>()?;
        Ok(Reaped {
            returned,
            crash_loops,
        })
    }

    fn depth(&self) -> Result<(u64, u64)> {
        let mut pipe = redis::pipe();
        pipe.cmd("ZCARD")
            .arg(self.keys.due())
            .cmd("ZCARD")
            .arg(self.keys.inflight());
        self.io.run("depth", move |mut c| async move {
            pipe.query_async(&mut c).await
        })
    }
}
