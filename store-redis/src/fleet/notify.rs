//! Hints that a new rule set was pushed: `{NS}:rules:pushed`, on a connection of its own.
//!
//! Pub/sub is at most once: a node that is disconnected when a push is published never sees
//! it. So a hint is only a reason to look sooner. The connection is a RESP3
//! [`ConnectionManager`] that reconnects as soon as it sees the connection drop and subscribes
//! again by itself; each (re)subscription is a [`RulesHint::Subscribed`], on which the node
//! reads [`RedisStore::rules_version`] (pushes made while it was away were missed). The node
//! also polls that version about once a second, which covers everything the hints miss.

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{IntoConnectionInfo, ProtocolVersion, PushInfo, PushKind, Value};
use tokio::sync::mpsc::{UnboundedReceiver, error::TryRecvError};

use crate::{RedisOptions, RedisStore};
use rebound_engine::Version;
use rebound_runtime::store::Result;

/// A hint from the rules channel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RulesHint {
    /// A node pushed this version.
    Pushed(Version),
    /// The subscription is (again) in place: read the version, pushes may have been missed.
    Subscribed,
}

/// The receiving end of the rules channel. Dropping it closes its connection.
pub struct RulesNotifications {
    rx: UnboundedReceiver<PushInfo>,
    channel: Vec<u8>,
    // Held for its connection: the manager reconnects only while a handle lives.
    _conn: ConnectionManager,
}

impl std::fmt::Debug for RulesNotifications {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RulesNotifications")
            .field("channel", &String::from_utf8_lossy(&self.channel))
            .finish_non_exhaustive()
    }
}

impl RulesNotifications {
    /// The next hint; `None` once the connection is gone for good.
    pub async fn recv(&mut self) -> Option<RulesHint> {
        loop {
            let push = self.rx.recv().await?;
            if let Some(hint) = self.hint(push) {
                return Some(hint);
            }
        }
    }

    /// The next hint if one has arrived, without waiting.
    pub fn try_recv(&mut self) -> Option<RulesHint> {
        loop {
            match self.rx.try_recv() {
                Ok(push) => {
                    if let Some(hint) = self.hint(push) {
                        return Some(hint);
                    }
                }
                Err(TryRecvError::Empty | TryRecvError::Disconnected) => return None,
            }
        }
    }

    fn hint(&self, push: PushInfo) -> Option<RulesHint> {
        let on_channel =
            matches!(push.data.first(), Some(Value::BulkString(c)) if *c == self.channel);
        match push.kind {
            // A message that names no version is no hint (the poll still reads the record).
            PushKind::Message if on_channel => match push.data.get(1) {
                Some(Value::BulkString(v)) => std::str::from_utf8(v)
                    .ok()
                    .and_then(|v| v.parse().ok())
                    .map(RulesHint::Pushed),
                _ => None,
            },
            PushKind::Subscribe if on_channel => Some(RulesHint::Subscribed),
            _ => None,
        }
    }
}

impl RedisStore {
    /// Subscribes to the rules channel on a connection of its own (RESP3, resubscribing after
    /// every reconnect). `options` are the ones the store was connected with (the store does
    /// not keep the URL: it may hold a password).
    pub fn rules_notifications(&self, options: &RedisOptions) -> Result<RulesNotifications> {
        let fail = |e: redis::RedisError| {
            crate::conn::redis_error("subscribe rules", self.io.location(), &e)
        };
        let info = options.url.as_str().into_connection_info().map_err(fail)?;
        let settings = info
            .redis_settings()
            .clone()
            .set_protocol(ProtocolVersion::RESP3);
        let client = redis::Client::open(info.set_redis_settings(settings)).map_err(fail)?;
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let config = ConnectionManagerConfig::new()
            .set_push_sender(tx)
            .set_automatic_resubscription()
            .set_response_timeout(Some(options.response_timeout))
            .set_connection_timeout(Some(options.connect_timeout))
            .set_min_delay(std::time::Duration::from_millis(50))
            .set_max_delay(std::time::Duration::from_secs(2))
            .set_number_of_retries(usize::MAX / 2);
        let channel = self.keys.rules_pushed();
        let subscribe_to = channel.clone();
        // Made on the store's runtime, which then drives it (and its reconnections). The first
        // connection retries without end, so the wait for it is bounded here.
        let wait = options.connect_timeout + options.response_timeout;
        let conn = self.io.run("subscribe rules", move |_| async move {
            let setup = async move {
                let mut conn = ConnectionManager::new_with_config(client, config).await?;
                conn.subscribe(subscribe_to).await?;
                Ok(conn)
            };
            match tokio::time::timeout(wait, setup).await {
                Ok(subscribed) => subscribed,
                Err(_) => Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!("no subscription to the rules channel within {wait:?}"),
                )
                .into()),
            }
        })?;
        Ok(RulesNotifications {
            rx,
            channel: channel.into_bytes(),
            _conn: conn,
        })
    }
}
