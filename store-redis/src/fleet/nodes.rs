//! Who is in the fleet. A node joins under its name (`--node`) with an id of this very
//! process, so that two processes given the same name can be told apart: the second is
//! refused while the first is live (seen within the lease, by the server's clock), and takes
//! the name over once the first has been silent longer than that. A heartbeat refreshes the
//! node's last seen and stores what it reports for `/v1/nodes`; it answers false once another
//! process holds the name, and the node must then stop (its claims and partitions are fenced
//! anyway, so a stalled process that wakes up cannot overwrite what the fleet did).

use std::sync::LazyLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use redis::Script;

use super::{corrupt, lease_ms};
use crate::{RedisStore, ScriptCall};
use rebound_runtime::store::Result;
use rebound_runtime::time::Timestamp;

static JOIN: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../scripts/fleet_join.lua")));
static HEARTBEAT: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../scripts/fleet_heartbeat.lua")));
static LEAVE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../scripts/fleet_leave.lua")));
static NODES: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../scripts/fleet_nodes.lua")));

/// One process in the fleet: the node's name and an id of this process, unique across
/// restarts (a restarted node has the same name and a new instance).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Member {
    /// The node's name (`--node`, default `HOSTNAME-PID`).
    pub node: String,
    /// This process: its PID, the wall-clock nanosecond it made the id and its host
    /// (`PID-NANOS-N@HOST`), so that a restart on the same host knows its dead predecessor.
    pub instance: String,
}

impl Member {
    /// This process, under the name `node`.
    ///
    /// ```
    /// use rebound_store_redis::fleet::Member;
    /// let a = Member::new("eu-1");
    /// let b = Member::new("eu-1");
    /// assert_eq!(a.node, b.node);
    /// assert_ne!(a.instance, b.instance);
    /// ```
    pub fn new(node: impl Into<String>) -> Member {
        static COUNT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        // The counter tells apart two members a process makes in the same nanosecond (tests).
        let n = COUNT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Member {
            node: node.into(),
            instance: format!("{}-{nanos}-{n}@{}", std::process::id(), host()),
        }
    }

    /// True if `instance` is a process of this host that no longer runs: a dead
    /// predecessor, whose name may be taken at once. False when unsure (another host, this
    /// very process, no `/proc`).
    fn is_dead_predecessor(&self, instance: &str) -> bool {
        let Some((pid, host)) = instance
            .split_once('@')
            .and_then(|(id, host)| Some((id.split('-').next()?.parse::<u32>().ok()?, host)))
        else {
            return false;
        };
        if host.is_empty() || host != host_of(&self.instance) || instance == self.instance {
            return false;
        }
        pid != std::process::id() && !runs(pid)
    }
}

/// This machine's name (`HOSTNAME`, else `/etc/hostname`), or empty if unknown.
fn host() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .map(|h| h.trim().to_owned())
        .unwrap_or_default()
}

fn host_of(instance: &str) -> &str {
    instance.split_once('@').map_or("", |(_, h)| h)
}

/// True unless `/proc` says process `pid` is gone (or a zombie); true where there is no
/// `/proc` to ask.
fn runs(pid: u32) -> bool {
    if !std::path::Path::new("/proc/self/stat").exists() {
        return true;
    }
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the command's closing parenthesis.
        Ok(stat) => !stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| matches!(rest.trim_start().chars().next(), Some('Z' | 'X'))),
        Err(_) => false,
    }
}

/// What [`RedisStore::join`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Join {
    /// The name is this process's now.
    Joined {
        /// When this instance joined (server time; kept if it joins again).
        started_at: Timestamp,
        /// True if the name was held by another instance that was not seen within the lease.
        took_over: bool,
    },
    /// Another live process holds the name: refuse to start (exit 2).
    Taken {
        /// When that process joined.
        started_at: Timestamp,
        /// When it was last seen (within the lease).
        last_seen: Timestamp,
    },
}

/// What a node says about itself in each heartbeat.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeStatus {
    /// The version of the rule set it runs.
    pub rules_version: Option<String>,
    /// The version of the canary it runs beside it, while one runs (`release.md`).
    pub canary_version: Option<String>,
    /// Why it could not compile the store's set, if it could not (it keeps the set it runs).
    pub rules_errors: Option<Vec<String>>,
    /// The source partitions it owns.
    pub partitions: Vec<u32>,
    /// Messages it has in flight.
    pub in_flight: u64,
    /// Retries it has claimed so far.
    pub retries_claimed: u64,
    /// Its view of the breakers (and the fuse) that are anything but closed, or were.
    pub breakers: Vec<NodeBreaker>,
}

/// One breaker (one key) as a node sees it, in `/v1/nodes`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeBreaker {
    /// The breaker's id (`fuse` for the fuse).
    pub breaker: String,
    /// Its key (`""` without `per`).
    pub key: String,
    /// `closed`, `open` or `half_open`.
    pub state: String,
}

/// One live node, as `GET /v1/nodes` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeReport {
    /// Its name.
    pub node: String,
    /// When it joined (server time).
    pub started_at: Timestamp,
    /// Its last heartbeat (server time).
    pub last_seen: Timestamp,
    /// What it said in that heartbeat (the default until its first).
    pub status: NodeStatus,
}

impl RedisStore {
    /// Takes the name `member.node` for this process, unless another process holds it and
    /// was seen within `lease`. A holder that is this host's dead process (a node killed and
    /// restarted under its own name) is no obstacle: its name is taken at once. Safe to call
    /// again (a second call keeps the start time).
    pub fn join(&self, member: &Member, lease: Duration) -> Result<Join> {
        let mut dead = String::new();
        loop {
            let call = ScriptCall::new(&JOIN)
                .key(self.keys.nodes())
                .arg(self.keys.prefix())
                .arg(&member.node)
                .arg(&member.instance)
                .arg(lease_ms(lease))
                .arg(&dead);
            let (joined, started, other, holder): (u8, u64, u64, String) =
                self.eval("join", call)?;
            match holder {
                h if joined == 0 && h != dead && member.is_dead_predecessor(&h) => dead = h,
                _ => return Ok(Self::joined(joined, started, other)),
            }
        }
    }

    fn joined(joined: u8, started: u64, other: u64) -> Join {
        if joined == 1 {
            Join::Joined {
                started_at: Timestamp::from_millis(started),
                took_over: other == 1,
            }
        } else {
            Join::Taken {
                started_at: Timestamp::from_millis(started),
                last_seen: Timestamp::from_millis(other),
            }
        }
    }

    /// Records that `member` is alive (now, by the server's clock) and what it reports.
    /// False if another process holds the name now (or the node left): stop.
    pub fn heartbeat(&self, member: &Member, status: &NodeStatus) -> Result<bool> {
        let mut clear: Vec<&str> = Vec::new();
        let mut set: Vec<(&str, String)> = vec![
            ("partitions", join_u32(&status.partitions)),
            ("in_flight", status.in_flight.to_string()),
            ("retries_claimed", status.retries_claimed.to_string()),
            ("breakers", breakers_json(&status.breakers)),
        ];
        match &status.rules_version {
            Some(v) => set.push(("rules_version", v.clone())),
            None => clear.push("rules_version"),
        }
        match &status.rules_errors {
            Some(e) => set.push(("rules_errors", serde_json::json!(e).to_string())),
            None => clear.push("rules_errors"),
        }
        match &status.canary_version {
            Some(v) => set.push(("canary_version", v.clone())),
            None => clear.push("canary_version"),
        }
        let mut call = ScriptCall::new(&HEARTBEAT)
            .key(self.keys.nodes())
            .arg(self.keys.prefix())
            .arg(&member.node)
            .arg(&member.instance)
            .arg(clear.len());
        for field in clear {
            call = call.arg(field);
        }
        for (field, value) in set {
            call = call.arg(field).arg(value);
        }
        let held: u8 = self.eval("heartbeat", call)?;
        Ok(held == 1)
    }

    /// Records the rule set `member` runs now (and why it does not run the set of record, if
    /// it does not), at once rather than at its next heartbeat: a node that adopts a set says
    /// so the moment it does (`/v1/nodes`). The rest of its report stays as its last heartbeat
    /// left it. False if another process holds the name now.
    pub fn report_rules(
        &self,
        member: &Member,
        version: &str,
        errors: Option<&[String]>,
    ) -> Result<bool> {
        let call = ScriptCall::new(&HEARTBEAT)
            .key(self.keys.nodes())
            .arg(self.keys.prefix())
            .arg(&member.node)
            .arg(&member.instance);
        let call = match errors {
            Some(e) => call
                .arg(0)
                .arg("rules_errors")
                .arg(serde_json::json!(e).to_string()),
            None => call.arg(1).arg("rules_errors"),
        };
        let held: u8 = self.eval("report rules", call.arg("rules_version").arg(version))?;
        Ok(held == 1)
    }

    /// Gives the name back, if `member` still holds it (true). Its partitions stay its own
    /// until their leases end, unless it released them first.
    pub fn leave(&self, member: &Member) -> Result<bool> {
        let call = ScriptCall::new(&LEAVE)
            .key(self.keys.nodes())
            .arg(self.keys.prefix())
            .arg(&member.node)
            .arg(&member.instance);
        let left: u8 = self.eval("leave", call)?;
        Ok(left == 1)
    }

    /// The nodes seen within `lease` (server time), by name.
    pub fn nodes(&self, lease: Duration) -> Result<Vec<NodeReport>> {
        let call = ScriptCall::new(&NODES)
            .key(self.keys.nodes())
            .arg(self.keys.prefix())
            .arg(lease_ms(lease));
        let rows: Vec<NodeRow> = self.eval("nodes", call)?;
        let mut nodes = rows
            .into_iter()
            .map(|(node, seen, fields)| report(node, seen, fields))
            .collect::<Result<Vec<_>>>()?;
        nodes.sort_by(|a, b| a.node.cmp(&b.node));
        Ok(nodes)
    }
}

/// One live node as `fleet_nodes.lua` answers it: name, last seen ms, its hash.
type NodeRow = (String, u64, Vec<(String, String)>);

/// A node's hash (`{NS}:node:<node>`) as its report.
fn report(node: String, seen: u64, fields: Vec<(String, String)>) -> Result<NodeReport> {
    let mut r = NodeReport {
        node,
        started_at: Timestamp::ZERO,
        last_seen: Timestamp::from_millis(seen),
        status: NodeStatus::default(),
    };
    let number = |what: &'static str, v: &str| v.parse::<u64>().map_err(|e| corrupt(what, e));
    for (field, value) in fields {
        match field.as_str() {
            "started_ms" => {
                r.started_at = Timestamp::from_millis(number("node started_ms", &value)?)
            }
            "rules_version" => r.status.rules_version = Some(value),
            "canary_version" => r.status.canary_version = Some(value),
            "rules_errors" => {
                let errors =
                    serde_json::from_str(&value).map_err(|e| corrupt("node rules_errors", e))?;
                r.status.rules_errors = Some(errors);
            }
            "partitions" => {
                r.status.partitions =
                    split_u32(&value).map_err(|e| corrupt("node partitions", e))?;
            }
            "in_flight" => r.status.in_flight = number("node in_flight", &value)?,
            "retries_claimed" => r.status.retries_claimed = number("node retries_claimed", &value)?,
            "breakers" => {
                let rows: Vec<[String; 3]> =
                    serde_json::from_str(&value).map_err(|e| corrupt("node breakers", e))?;
                r.status.breakers = rows
                    .into_iter()
                    .map(|[breaker, key, state]| NodeBreaker {
                        breaker,
                        key,
                        state,
                    })
                    .collect();
            }
            _ => {}
        }
    }
    Ok(r)
}

/// A node's breakers as its hash keeps them: `[[breaker, key, state], …]`.
fn breakers_json(breakers: &[NodeBreaker]) -> String {
    let rows: Vec<[&str; 3]> = breakers
        .iter()
        .map(|b| [b.breaker.as_str(), b.key.as_str(), b.state.as_str()])
        .collect();
    serde_json::json!(rows).to_string()
}

fn join_u32(values: &[u32]) -> String {
    values
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

fn split_u32(text: &str) -> std::result::Result<Vec<u32>, std::num::ParseIntError> {
    if text.is_empty() {
        return Ok(Vec::new());
    }
    text.split(',').map(str::parse).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partitions_survive_their_text_form() {
        for parts in [vec![], vec![0], vec![3, 7, 15]] {
            assert_eq!(split_u32(&join_u32(&parts)).unwrap(), parts);
        }
        assert!(split_u32("1,x").is_err());
    }
}
