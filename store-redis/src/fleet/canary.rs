//! The fleet's canary (`docs/spec/release.md`, "A fleet runs one canary"): one record per
//! namespace, which every node applies, and the counters of its arms summed over the nodes.
//!
//! The record holds what the product says of the canary (`spec`, its JSON: files, slice,
//! guard, `promote_after`) under an `epoch` that each start moves on; `state` is `running`,
//! `held`, `promoted` or `rolled_back`. A start is refused while one is running or held. An
//! end (or a change between running and held) names its epoch and changes the record only
//! while that epoch is running or held: when several nodes judge the same figures at once,
//! the first wins and the others see the record changed. The counters are reset at each
//! start; a node adds what it counted since its last sync and reads the sums in the same
//! script, so every node judges the fleet's figures. Times are the server's.

use std::collections::HashMap;
use std::sync::LazyLock;

use redis::{AsyncCommands, Script};

use super::corrupt;
use crate::{RedisStore, ScriptCall};
use rebound_runtime::store::Result;

static START: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../scripts/fleet_canary_start.lua")));
static SYNC: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../scripts/fleet_canary_sync.lua")));
static END: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../scripts/fleet_canary_end.lua")));

/// The fleet's canary as recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CanaryRecord {
    /// Moves on at each start.
    pub epoch: u64,
    /// `running`, `held`, `promoted` or `rolled_back`.
    pub state: String,
    /// The product's description of it (JSON).
    pub spec: String,
    /// When it started, by the server's clock (ms since the epoch).
    pub since_ms: u64,
    /// Why it is held or how it ended (empty while running).
    pub reason: String,
    /// The figures that ended it (the product's JSON; empty while it runs).
    pub arms: String,
}

impl CanaryRecord {
    /// Whether it still decides (running or held).
    pub fn is_active(&self) -> bool {
        matches!(self.state.as_str(), "running" | "held")
    }
}

/// What a start answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CanaryStart {
    /// Started under this epoch, at this time of the server's (ms).
    Started {
        /// Its epoch.
        epoch: u64,
        /// When.
        since_ms: u64,
    },
    /// Refused: the canary of this epoch is running or held.
    Active {
        /// The active one's epoch.
        epoch: u64,
    },
}

impl RedisStore {
    /// Starts the fleet's canary described by `spec`, unless one is running or held.
    pub fn start_canary(&self, spec: &str) -> Result<CanaryStart> {
        let call = ScriptCall::new(&START)
            .key(self.keys.canary())
            .key(self.keys.canary_arms())
            .arg(spec);
        let (started, epoch, third): (u8, u64, redis::Value) =
            self.eval("start the canary", call)?;
        Ok(if started == 1 {
            let since_ms = match third {
                redis::Value::Int(n) => n as u64,
                other => return Err(corrupt("canary start", format!("{other:?}"))),
            };
            CanaryStart::Started { epoch, since_ms }
        } else {
            CanaryStart::Active { epoch }
        })
    }

    /// The fleet's canary, if one was ever started.
    pub fn canary(&self) -> Result<Option<CanaryRecord>> {
        let key = self.keys.canary();
        let fields: HashMap<String, String> =
            self.io.run("read the canary", move |mut c| async move {
                c.hgetall(key).await
            })?;
        if fields.is_empty() {
            return Ok(None);
        }
        let text = |name: &str| fields.get(name).cloned().unwrap_or_default();
        let number = |name: &str| -> Result<u64> {
            text(name)
                .parse()
                .map_err(|e| corrupt("canary", format!("{name}: {e}")))
        };
        Ok(Some(CanaryRecord {
            epoch: number("epoch")?,
            state: text("state"),
            spec: text("spec"),
            since_ms: number("since_ms")?,
            reason: text("reason"),
            arms: text("arms"),
        }))
    }

    /// Adds `counts` (field, increment) to the canary of `epoch`'s counters and answers the
    /// fleet's sums by field; `None` when the counters are another epoch's (a canary started
    /// since).
    pub fn sync_canary(
        &self,
        epoch: u64,
        counts: &[(String, u64)],
    ) -> Result<Option<HashMap<String, u64>>> {
        let mut call = ScriptCall::new(&SYNC)
            .key(self.keys.canary_arms())
            .arg(epoch);
        for (field, n) in counts {
            call = call.arg(field).arg(*n);
        }
        let flat: Option<Vec<String>> = self.eval("sync the canary", call)?;
        let Some(flat) = flat else {
            return Ok(None);
        };
        let mut sums = HashMap::new();
        for pair in flat.chunks(2) {
            if let [field, value] = pair {
                let n = value
                    .parse()
                    .map_err(|e| corrupt("canary arms", format!("{field}: {e}")))?;
                sums.insert(field.clone(), n);
            }
        }
        Ok(Some(sums))
    }

    /// Sets the canary of `epoch` to `state` with `reason` and the figures `arms`, if it is
    /// still running or held: true when this call changed it (the first node to end it).
    pub fn end_canary(&self, epoch: u64, state: &str, reason: &str, arms: &str) -> Result<bool> {
        let call = ScriptCall::new(&END)
            .key(self.keys.canary())
            .arg(epoch)
            .arg(state)
            .arg(reason)
            .arg(arms);
        let changed: u8 = self.eval("end the canary", call)?;
        Ok(changed == 1)
    }
}
