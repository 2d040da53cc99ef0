//! Shared test components: a counting spout that records every fate it is told, and helpers.
#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, Once};

use rebound_runtime::topology::{Message, MessageId, NextMessage, Spout};

/// Every fate each id was told, by kind.
#[derive(Default, Debug)]
pub struct FateLog {
    pub handed_out: BTreeSet<String>,
    pub acked: BTreeMap<String, u32>,
    pub dead_lettered: BTreeMap<String, u32>,
}

impl FateLog {
    /// Records that `id` was acked.
    pub fn acked(&mut self, id: &MessageId) {
        *self.acked.entry(id.to_string()).or_default() += 1;
    }

    /// Records that `id` was dead-lettered.
    pub fn dead_lettered(&mut self, id: &MessageId) {
        *self.dead_lettered.entry(id.to_string()).or_default() += 1;
    }

    /// Asserts at-least-once: every id handed out got exactly one fate, acked or dead-lettered.
    pub fn assert_one_fate_each(&self) {
        for id in &self.handed_out {
            let a = self.acked.get(id).copied().unwrap_or(0);
            let d = self.dead_lettered.get(id).copied().unwrap_or(0);
            assert_eq!(
                a + d,
                1,
                "id {id}: acked {a} times, dead-lettered {d} times"
            );
        }
        for id in self.acked.keys().chain(self.dead_lettered.keys()) {
            assert!(self.handed_out.contains(id), "fate for unknown id {id}");
        }
    }
}

pub type SharedLog = Arc<Mutex<FateLog>>;

/// Hands out `total` messages named `{prefix}-{n}`, saying `Idle` every `idle_every` calls.
pub struct CountingSpout {
    pub prefix: String,
    pub next: u64,
    pub total: u64,
    pub idle_every: u64,
    pub calls: u64,
    pub biz: &'static str,
    pub log: SharedLog,
}

impl CountingSpout {
    pub fn new(prefix: impl Into<String>, total: u64, log: SharedLog) -> Self {
        CountingSpout {
            prefix: prefix.into(),
            next: 0,
            total,
            idle_every: 0,
            calls: 0,
            biz: "ORDER",
            log,
        }
    }
}

impl Spout for CountingSpout {
    fn next(&mut self) -> NextMessage {
        self.calls += 1;
        if self.idle_every > 0 && self.calls.is_multiple_of(self.idle_every) {
            return NextMessage::Idle;
        }
        if self.next >= self.total {
            return NextMessage::Exhausted;
        }
        self.next += 1;
        let id = format!("{}-{}", self.prefix, self.next);
        self.log.lock().unwrap().handed_out.insert(id.clone());
        NextMessage::Ready(Message::new(id, self.biz, "payload"))
    }
    fn ack(&mut self, id: &MessageId) {
        self.log.lock().unwrap().acked(id);
    }
    fn dead_lettered(&mut self, id: &MessageId) {
        self.log.lock().unwrap().dead_lettered(id);
    }
}

/// Keeps the output readable: injected panics are expected, so their messages are not printed.
pub fn quiet_injected_panics() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let msg = info
                .payload()
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| info.payload().downcast_ref::<String>().cloned())
                .unwrap_or_default();
            if !msg.contains("injected") {
                default(info);
            }
        }));
    });
}

/// A current-thread runtime with tokio's clock paused: time jumps ahead whenever every task
/// waits, so timeouts and retry delays cost no real time and tests do not depend on speed.
pub fn paused_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .expect("a tokio runtime")
}
