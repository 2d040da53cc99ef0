//! [`AmqpPublisher`]: messages published to a RabbitMQ exchange with publisher confirms and
//! the `mandatory` flag, for the relay's dead letters (`sources.md`, "Dead letters to the
//! broker"). A message counts as published only once the broker confirmed it **and** routed it
//! to a queue: one it returns (`basic.return`: no queue is bound for its routing key) is
//! [`Published::Unroutable`], for the caller to retry, never dropped.
//!
//! Each message is persistent (delivery mode 2), its `message-id` the caller's id, its headers
//! as given (long strings), its body the payload.

use std::time::Duration;

use lapin::options::{BasicPublishOptions, ConfirmSelectOptions};
use lapin::types::{AMQPValue, FieldTable, LongString};
use lapin::{BasicProperties, Channel, Connection, ConnectionProperties};

use super::url::{AmqpTarget, AmqpUrl, AmqpUrlError};

/// How long the broker's confirm of one message may take.
const CONFIRM: Duration = Duration::from_secs(5);

/// What the broker did with a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Published {
    /// Confirmed, and routed to at least one queue.
    Confirmed,
    /// Returned: no queue is bound to the exchange for its routing key (not published).
    Unroutable,
    /// Refused (`basic.nack`: the broker could not take it; not published).
    Nacked,
}

/// A publisher to the exchange of an `?exchange=E[&routing_key=K]` URL; connects on first use
/// and again after any failure.
pub struct AmqpPublisher {
    url: AmqpUrl,
    exchange: String,
    routing_key: String,
    open: Option<(Connection, Channel)>,
}

impl std::fmt::Debug for AmqpPublisher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AmqpPublisher")
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

impl AmqpPublisher {
    /// A publisher to `url`'s exchange (a queue's URL is refused). Connects on first use.
    pub fn new(url: AmqpUrl) -> Result<AmqpPublisher, AmqpUrlError> {
        let AmqpTarget::Exchange {
            exchange,
            routing_key,
        } = url.target.clone()
        else {
            return Err(AmqpUrlError {
                shown: url.to_string(),
                why: "dead letters are published to an exchange (?exchange=E[&routing_key=K]), \
                      not a queue"
                    .into(),
            });
        };
        Ok(AmqpPublisher {
            url,
            exchange,
            routing_key,
            open: None,
        })
    }

    /// Where it publishes.
    pub fn url(&self) -> &AmqpUrl {
        &self.url
    }

    async fn channel(&mut self) -> Result<&Channel, String> {
        let usable = self
            .open
            .as_ref()
            .is_some_and(|(c, ch)| c.status().connected() && ch.status().connected());
        if !usable {
            if let Some((connection, _)) = self.open.take() {
                let _ = connection.close(200, "reconnecting".into()).await;
            }
            let properties =
                ConnectionProperties::default().with_connection_name("rebound dead letters".into());
            let connection = tokio::time::timeout(
                Duration::from_secs(10),
                Connection::connect_uri(self.url.uri(), properties),
            )
            .await
            .map_err(|_| "the broker did not answer within 10 s".to_owned())?
            .map_err(|e| format!("cannot connect: {e}"))?;
            let channel = connection
                .create_channel()
                .await
                .map_err(|e| format!("cannot open a channel: {e}"))?;
            channel
                .confirm_select(ConfirmSelectOptions::default())
                .await
                .map_err(|e| format!("confirm.select was refused: {e}"))?;
            self.open = Some((connection, channel));
        }
        Ok(&self.open.as_ref().expect("opened above").1)
    }

    /// Publishes one message and waits for the broker's confirm. An error (no connection, no
    /// confirm in time, the exchange missing) closes the connection: the next call opens one.
    pub async fn publish(
        &mut self,
        message_id: &str,
        headers: &[(String, String)],
        payload: &[u8],
    ) -> Result<Published, String> {
        let mut table = FieldTable::default();
        for (name, value) in headers {
            table.insert(
                name.as_str().into(),
                AMQPValue::LongString(LongString::from(value.as_bytes().to_vec())),
            );
        }
        let properties = BasicProperties::default()
            .with_message_id(message_id.into())
            .with_delivery_mode(2)
            .with_headers(table);
        let (exchange, routing_key) = (self.exchange.clone(), self.routing_key.clone());
        let result = async {
            let channel = self.channel().await?;
            let confirm = channel
                .basic_publish(
                    exchange.as_str().into(),
                    routing_key.as_str().into(),
                    BasicPublishOptions {
                        mandatory: true,
                        ..Default::default()
                    },
                    payload,
                    properties,
                )
                .await
                .map_err(|e| format!("basic.publish failed: {e}"))?;
            let confirm = tokio::time::timeout(CONFIRM, confirm)
                .await
                .map_err(|_| format!("the broker did not confirm within {CONFIRM:?}"))?
                .map_err(|e| format!("the broker did not confirm: {e}"))?;
            Ok::<_, String>(if confirm.is_nack() {
                Published::Nacked
            } else if confirm.take_message().is_some() {
                Published::Unroutable
            } else {
                Published::Confirmed
            })
        }
        .await;
        if result.is_err()
            && let Some((connection, _)) = self.open.take()
        {
            let _ = tokio::time::timeout(
                Duration::from_secs(2),
                connection.close(200, "reconnecting".into()),
            )
            .await;
        }
        result
    }
}
