//! Publishing to a Redis stream: one `XADD STREAM * payload BYTES rebound-id ID …` per
//! letter, on a multiplexed connection made again after any error.

use std::time::Duration;

use rebound_runtime::store::DeadLetter;
use redis::AsyncConnectionConfig;
use redis::aio::MultiplexedConnection;

use super::fields::{PAYLOAD, letter_headers};

/// How long a connection may take to be made, and a reply to come.
const CONNECT: Duration = Duration::from_secs(2);
const REPLY: Duration = Duration::from_secs(5);

/// A Redis stream letters are added to.
pub(super) struct RedisSink {
    client: redis::Client,
    stream: String,
    conn: Option<MultiplexedConnection>,
}

impl RedisSink {
    /// The stream `stream` on `server` (`redis://…`, checked when the URL was read).
    pub(super) fn new(server: &str, stream: &str) -> Result<RedisSink, String> {
        let client = redis::Client::open(server)
            .map_err(|_| "redis-rs does not take the server's address".to_owned())?;
        Ok(RedisSink {
            client,
            stream: stream.to_owned(),
            conn: None,
        })
    }

    /// Adds `letter` to the stream; `Err` says why it was not (never with a password: the
    /// client's errors name the address, not the credentials).
    pub(super) async fn send(&mut self, letter: &DeadLetter) -> Result<(), String> {
        let mut conn = match self.conn.take() {
            Some(conn) => conn,
            None => {
                let config = AsyncConnectionConfig::new()
                    .set_connection_timeout(Some(CONNECT))
                    .set_response_timeout(Some(REPLY));
                self.client
                    .get_multiplexed_async_connection_with_config(&config)
                    .await
                    .map_err(|e| format!("cannot connect: {e}"))?
            }
        };
        let mut xadd = redis::cmd("XADD");
        xadd.arg(&self.stream)
            .arg("*")
            .arg(PAYLOAD)
            .arg(&letter.message.payload[..]);
        for (name, value) in letter_headers(letter) {
            xadd.arg(name).arg(value);
        }
        let added: Result<String, _> = xadd.query_async(&mut conn).await;
        match added {
            Ok(_) => {
                self.conn = Some(conn);
                Ok(())
            }
            Err(e) => Err(format!("XADD refused: {e}")),
        }
    }
}
