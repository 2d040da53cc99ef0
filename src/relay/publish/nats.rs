//! Publishing to a JetStream subject: the payload as the body, the `rebound-*` headers, the
//! server's ack awaited. `Nats-Msg-Id` is the letter's (message id and time), so a letter sent
//! again after an ack that did not come is dropped by the stream's duplicate window.

use std::time::Duration;

use async_nats::HeaderMap;
use async_nats::jetstream::Context;
use rebound_runtime::store::DeadLetter;

use super::fields::letter_headers;

/// How long the server's ack may take.
const ACK: Duration = Duration::from_secs(5);

/// A JetStream subject letters are published to.
pub(super) struct NatsSink {
    js: Context,
    subject: String,
}

impl NatsSink {
    /// A client of `server` (`HOST:PORT`) that connects in the background and reconnects
    /// without end; fails only on an address the client cannot take.
    pub(super) async fn connect(
        server: &str,
        credentials: Option<&(String, String)>,
        subject: &str,
    ) -> Result<NatsSink, String> {
        let mut options = async_nats::ConnectOptions::new()
            .name("rebound dead letters")
            .retry_on_initial_connect()
            .max_reconnects(None)
            .connection_timeout(Duration::from_secs(2));
        if let Some((user, password)) = credentials {
            options = options.user_and_password(user.clone(), password.clone());
        }
        // The address carries no credentials (they go in the CONNECT).
        let client = options.connect(server).await.map_err(|e| e.to_string())?;
        let mut js = async_nats::jetstream::new(client);
        js.set_timeout(ACK);
        Ok(NatsSink {
            js,
            subject: subject.to_owned(),
        })
    }

    /// Publishes `letter` and waits for the server's ack.
    pub(super) async fn send(&mut self, letter: &DeadLetter) -> Result<(), String> {
        let mut headers = HeaderMap::new();
        for (name, value) in letter_headers(letter) {
            headers.insert(name, header_value(&value));
        }
        headers.insert(
            "Nats-Msg-Id",
            header_value(&format!(
                "{}@{}",
                letter.id().as_str(),
                letter.at.as_millis()
            )),
        );
        let payload = letter.message.payload.clone();
        let publish = async {
            self.js
                .publish_with_headers(self.subject.clone(), headers, payload)
                .await
                .map_err(|e| format!("publish refused: {e}"))?
                .await
                .map_err(|e| format!("no ack: {e}"))
        };
        match tokio::time::timeout(ACK + Duration::from_secs(1), publish).await {
            Ok(Ok(_ack)) => Ok(()),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(format!("no ack within {}s", ACK.as_secs() + 1)),
        }
    }
}

/// `value` as a header may carry it: on one line.
fn header_value(value: &str) -> String {
    value.replace(|c: char| c.is_control(), " ")
}
