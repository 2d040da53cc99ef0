//! Every key of a namespace, in one place. Each begins with `{NS}:`: the braces are a Redis
//! Cluster hash tag, so a namespace is one slot and every script's keys are in it.
//!
//! | key | type | holds |
//! |---|---|---|
//! | `{NS}:r:<id>` | hash | a retry row: the fields of `rows.rs`'s retry columns (`message_id`, `biz`, `payload`, `headers`, `due_ms`, `attempt`, `first_seen_ms`, `last_code`, `last_message`, `last_delay_ms`, `rule`, `rule_set_version`, `offset` and `ordering_key` if it has them), plus `seq` (scheduling order), `state` (`due` or `inflight`), `owner`, `token`, `lease_ms` (while in flight), `claims` (times claimed), `reaps` (times reaped since it was last scheduled) |
//! | `{NS}:due` | zset | id → due ms (retries waiting; equal due times by the row's `seq`) |
//! | `{NS}:inflight` | zset | id → lease deadline ms (claimed, no fate yet) |
//! | `{NS}:seq` | string | `INCR`: scheduling order (a row's `seq`) and fencing tokens |
//! | `{NS}:f:<id>` | string | a message's fate: `acked` or `dead` |
//! | `{NS}:acked:<source>` | zset | id → source position of acked fates with an offset (pruned by the source's position) |
//! | `{NS}:acked-at` | zset | id → time (ms) of acked fates without an offset (pruned by `WriteOp::PruneFates`) |
//! | `{NS}:dl:seq` | string | `INCR`: dead-letter ids (1, 2, 3…, as SQLite numbers its rows) |
//! | `{NS}:dl:<n>` | hash | dead letter `n`: the fields of `rows.rs`'s dead-letter columns and `status` |
//! | `{NS}:dl` | zset | n → n, every dead letter (newest first by score) |
//! | `{NS}:dl:last:<id>` | string | the message's latest dead letter `n` |
//! | `{NS}:audit:seq` | string | `INCR`: audit line ids |
//! | `{NS}:audit:<n>` | hash | audit line `n`: `at_ms`, `action`, `message_id`, `dead_letter_id`, `operator`, `reason` |
//! | `{NS}:audit` | zset | n → n, every audit line |
//! | `{NS}:audit:msg:<id>` | zset | n → n, a message's audit lines |
//! | `{NS}:pos` | hash | source → committed position (forward only) |
//! | `{NS}:decisions` | list | the decision log, the fleet's one (`WriteOp::LogDecisions`): an entry per decision, oldest first, as `SEQ AT JSON` (its number from `decisions:seq`, the decision's `now_ms`, the entry's JSON as SQLite's `decisions.entry`); trimmed to the newest `keep` (`LTRIM`) in the same call |
//! | `{NS}:decisions:seq` | string | `INCRBY`: the decision log's entry numbers (a reader pages by them: delete it with the list or not at all) |
//! | `{NS}:src:<source>` | hash | a source partition's lease: `owner` (node), `instance` (process), `epoch` (fencing, `HINCRBY` on each taking), `lease_ms`; partition `p` of `orders` is the source `orders/p` |
//! | `{NS}:src-members:<source>` | zset | node → last balance ms: the nodes that run the source's partitions |
//! | `{NS}:nodes` | zset | node → last seen ms (server time) |
//! | `{NS}:node:<node>` | hash | what a node reports (`/v1/nodes`): `instance`, `started_ms`, `rules_version`, `canary_version`, `rules_errors` (JSON list), `partitions` (`1,5,9`), `in_flight`, `retries_claimed` |
//! | `{NS}:rules` | hash | the rule set of record: `version`, `files` (JSON `[[name, yaml], …]`), `source`, `at` (ms) |
//! | `{NS}:rules:set:<version>` | hash | a version's set as last pushed, same fields (for diffs and rollback), for the last 50 accepted versions only |
//! | `{NS}:rules:history` | list | every accepted set, newest first (never trimmed): JSON `[version, source, at]` |
//! | `{NS}:rules:kept` | zset | version → the history's length at its latest acceptance: which versions keep their `rules:set` |
//! | `{NS}:rules:applied` | hash | node → the version it runs |
//! | `{NS}:rules:errors` | hash | node → why it could not run the set of record (JSON list) |
//! | `{NS}:adaptive:c:<width ms>:<bucket>` | hash | the fleet's adaptive counters of one bucket (`f:BUDGET`, `r:BUDGET`, `s:BREAKER\x1fKEY`, `x:BREAKER\x1fKEY` → count), expiring after two windows |
//! | `{NS}:adaptive:breakers` | hash | `BREAKER\x1fKEY` → `EPOCH OPENED_AT_MS`: the fleet's breaker records (the fuse is `fuse\x1f`) |
//! | `{NS}:adaptive:members` | zset | process → last sync ms: who syncs the adaptive state |
//! | `{NS}:adaptive:seq` | hash | process → the last push counted |
//! | `{NS}:adaptive:heat:<process>` | hash | biz → the heat that process reported at its last sync |
//! | `{NS}:docs:<kind>` | hash | a program's documents of one kind, name → text (`docs.rs`) |
//! | `{NS}:wake`, `{NS}:rules:pushed` | channel | hints only (pub/sub is at most once) |
//!
//! A program keeps records of its own in the namespace too: its small documents (`docs:<kind>`,
//! above) and the keys its own scripts write ([`Keys::key`], `RedisStore::eval`), each
//! documented where the program defines it (the bundled pipeline's run and effect sets in
//! `src/pipeline/fleet/`). Their names must not begin as one of the names above does.
//!
//! Ids and source names are written as they are (a key is binary-safe): each kind of key has
//! a fixed prefix of its own, and the numbered ones (`dl:<n>`, `audit:<n>`) hold digits only,
//! so no id or source name can name another kind's key. The scripts build per-id keys from
//! the prefix the same way (and are given the prefix as `KEYS[1]`, for Cluster routing).

/// The key names of one namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Keys {
    prefix: String,
}

impl Keys {
    /// The keys of namespace `ns` (every one begins with `{ns}:`).
    pub fn new(ns: &str) -> Keys {
        Keys {
            prefix: format!("{{{ns}}}:"),
        }
    }

    /// `{NS}:`, what every key begins with (scripts build per-id keys from it).
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// A key of the namespace: `{NS}:<name>`.
    pub fn key(&self, name: &str) -> String {
        let mut k = String::with_capacity(self.prefix.len() + name.len());
        k.push_str(&self.prefix);
        k.push_str(name);
        k
    }

    /// `{NS}:r:<id>`: a message's retry row.
    pub fn retry(&self, id: &str) -> String {
        self.key(&format!("r:{id}"))
    }

    /// `{NS}:f:<id>`: a message's fate.
    pub fn fate(&self, id: &str) -> String {
        self.key(&format!("f:{id}"))
    }

    /// `{NS}:due`.
    pub fn due(&self) -> String {
        self.key("due")
    }

    /// `{NS}:inflight`.
    pub fn inflight(&self) -> String {
        self.key("inflight")
    }

    /// `{NS}:dl:<n>`: dead letter `n`.
    pub fn dead_letter(&self, n: i64) -> String {
        self.key(&format!("dl:{n}"))
    }

    /// `{NS}:dl`: every dead letter by id.
    pub fn dead_letters(&self) -> String {
        self.key("dl")
    }

    /// `{NS}:dl:last:<id>`: a message's latest dead letter.
    pub fn last_dead_letter(&self, id: &str) -> String {
        self.key(&format!("dl:last:{id}"))
    }

    /// `{NS}:audit:<n>`: audit line `n`.
    pub fn audit_line(&self, n: i64) -> String {
        self.key(&format!("audit:{n}"))
    }

    /// `{NS}:audit`, every audit line by id, or `{NS}:audit:msg:<id>`, one message's.
    pub fn audit(&self, message: Option<&str>) -> String {
        match message {
            None => self.key("audit"),
            Some(id) => self.key(&format!("audit:msg:{id}")),
        }
    }

    /// `{NS}:pos`: every source's committed position.
    pub fn positions(&self) -> String {
        self.key("pos")
    }

    /// `{NS}:decisions`: the decision log (a list).
    pub fn decisions(&self) -> String {
        self.key("decisions")
    }

    /// `{NS}:wake`: the channel a schedule that became the head of the due set is told on.
    pub fn wake(&self) -> String {
        self.key("wake")
    }
}

/// The fleet's keys (`fleet/`).
impl Keys {
    /// `{NS}:nodes`.
    pub fn nodes(&self) -> String {
        self.key("nodes")
    }

    /// `{NS}:src:<source>`: a source partition's lease (`source` is `orders/3`).
    pub fn source_lease(&self, source: &str) -> String {
        self.key(&format!("src:{source}"))
    }

    /// `{NS}:src-members:<source>`: the nodes that run `source`'s partitions.
    pub fn source_members(&self, source: &str) -> String {
        self.key(&format!("src-members:{source}"))
    }

    /// `{NS}:canary`: the fleet's canary (a hash: `epoch`, `state`, `spec`, `since_ms`,
    /// `reason`, `arms`), one at a time (`release.md`).
    pub fn canary(&self) -> String {
        self.key("canary")
    }

    /// `{NS}:canary:arms`: the running canary's counters, the fleet's sums (a hash: `epoch`
    /// and one field per counter of each arm), reset when a canary starts.
    pub fn canary_arms(&self) -> String {
        self.key("canary:arms")
    }

    /// `{NS}:rules`.
    pub fn rules(&self) -> String {
        self.key("rules")
    }

    /// `{NS}:rules:set:<version>`.
    pub fn rule_set(&self, version: &str) -> String {
        self.key(&format!("rules:set:{version}"))
    }

    /// `{NS}:rules:history`.
    pub fn rules_history(&self) -> String {
        self.key("rules:history")
    }

    /// `{NS}:rules:kept`.
    pub fn rules_kept(&self) -> String {
        self.key("rules:kept")
    }

    /// `{NS}:rules:applied`.
    pub fn rules_applied(&self) -> String {
        self.key("rules:applied")
    }

    /// `{NS}:rules:errors`.
    pub fn rules_errors(&self) -> String {
        self.key("rules:errors")
    }

    /// `{NS}:rules:pushed`: the channel of rule pushes.
    pub fn rules_pushed(&self) -> String {
        self.key("rules:pushed")
    }

    /// `{NS}:adaptive:members`: the processes syncing the fleet's adaptive state.
    pub fn adaptive_members(&self) -> String {
        self.key("adaptive:members")
    }

    /// `{NS}:adaptive:breakers`: the fleet's breaker records.
    pub fn adaptive_breakers(&self) -> String {
        self.key("adaptive:breakers")
    }

    /// `{NS}:adaptive:seq`: the last push counted of each process.
    pub fn adaptive_seq(&self) -> String {
        self.key("adaptive:seq")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_begins_with_the_namespace_hash_tag() {
        let k = Keys::new("orders-eu");
        assert_eq!(k.prefix(), "{orders-eu}:");
        assert_eq!(k.retry("order-1"), "{orders-eu}:r:order-1");
        assert_eq!(k.due(), "{orders-eu}:due");
    }
}
