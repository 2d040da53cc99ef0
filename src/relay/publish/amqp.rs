//! Publishing to a RabbitMQ exchange (`?exchange=E[&routing_key=K]`) through
//! [`AmqpPublisher`]: publisher confirms, `mandatory`, persistent, the `rebound-*` headers, the
//! payload as the body, `message-id` the letter's id. A letter the broker returns (no queue is
//! bound for its routing key) is not published: the worker retries it, counted `unroutable`.

use rebound_runtime::store::DeadLetter;
use rebound_sources::amqp::{AmqpPublisher, AmqpUrl, Published};

use super::fields::letter_headers;
use super::worker::Refusal;

/// A RabbitMQ exchange letters are published to.
pub(super) struct AmqpSink {
    publisher: AmqpPublisher,
}

impl AmqpSink {
    /// A publisher to `url`'s exchange; it connects at the first letter.
    pub(super) fn new(url: &AmqpUrl) -> Result<AmqpSink, String> {
        AmqpPublisher::new(url.clone())
            .map(|publisher| AmqpSink { publisher })
            .map_err(|e| e.to_string())
    }

    /// Publishes `letter` and waits for the broker's confirm.
    pub(super) async fn send(&mut self, letter: &DeadLetter) -> Result<(), Refusal> {
        let headers: Vec<(String, String)> = letter_headers(letter)
            .into_iter()
            .map(|(name, value)| (name.to_owned(), value))
            .collect();
        match self
            .publisher
            .publish(letter.id().as_str(), &headers, &letter.message.payload)
            .await
        {
            Ok(Published::Confirmed) => Ok(()),
            Ok(Published::Unroutable) => Err(Refusal::Unroutable(format!(
                "the exchange {} routes it to no queue (basic.return): bind a queue to it",
                self.publisher.url()
            ))),
            Ok(Published::Nacked) => {
                Err(Refusal::Failed("the broker refused it (basic.nack)".into()))
            }
            Err(e) => Err(Refusal::Failed(e)),
        }
    }
}
