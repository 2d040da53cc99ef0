//! The source suite's harness for RabbitMQ: a `rabbitmq-server` of the case's own
//! ([`RabbitServer`]), the durable queue `orders`, and messages published to it persistent
//! and confirmed, with a `message-id`, the biz in `rebound-biz` and the key in `rebound-key`.
//! The harness's own calls to the broker run on a small runtime of its own, from a thread of
//! their own, so that they can be made from inside a case.

use std::future::Future;

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use lapin::options::{BasicPublishOptions, ConfirmSelectOptions, QueueDeclareOptions};
use lapin::types::{AMQPValue, FieldTable, LongString};
use lapin::{BasicProperties, Channel, Connection, ConnectionProperties};
use rebound_runtime::sources::conformance::{SourceHarness, SourceSpec};
use rebound_runtime::topology::Spout;
use rebound_sources::RabbitServer;
use rebound_sources::amqp::{AmqpOptions, AmqpSource, AmqpUrl};

pub const QUEUE: &str = "orders";

/// A connection of the test's own and a channel in confirm mode, opened again after a
/// restart of the broker.
pub struct Publisher {
    url: String,
    open: Option<(Connection, Channel)>,
}

impl Publisher {
    pub fn new(url: String) -> Publisher {
        Publisher { url, open: None }
    }

    pub async fn channel(&mut self) -> &Channel {
        let usable = self
            .open
            .as_ref()
            .is_some_and(|(c, ch)| c.status().connected() && ch.status().connected());
        if !usable {
            let connection = Connection::connect(&self.url, ConnectionProperties::default())
                .await
                .expect("the test connects to its broker");
            let channel = connection.create_channel().await.expect("a channel");
            channel
                .confirm_select(ConfirmSelectOptions::default())
                .await
                .expect("confirm mode");
            channel
                .queue_declare(
                    QUEUE.into(),
                    QueueDeclareOptions {
                        durable: true,
                        ..Default::default()
                    },
                    FieldTable::default(),
                )
                .await
                .expect("the queue is declared");
            self.open = Some((connection, channel));
        }
        &self.open.as_ref().unwrap().1
    }

    /// Publishes one persistent message to the queue and waits for the broker's confirm.
    pub async fn publish(
        &mut self,
        id: Option<&str>,
        headers: &[(&str, &str)],
        routing_key: &str,
        payload: &[u8],
    ) {
        let mut table = FieldTable::default();
        for (n, v) in headers {
            table.insert(
                (*n).into(),
                AMQPValue::LongString(LongString::from(v.as_bytes().to_vec())),
            );
        }
        let mut properties = BasicProperties::default()
            .with_delivery_mode(2)
            .with_headers(table);
        if let Some(id) = id {
            properties = properties.with_message_id(id.into());
        }
        let channel = self.channel().await;
        let confirm = channel
            .basic_publish(
                "".into(),
                routing_key.into(),
                BasicPublishOptions {
                    mandatory: true,
                    ..Default::default()
                },
                payload,
                properties,
            )
            .await
            .expect("published")
            .await
            .expect("confirmed");
        assert!(confirm.is_ack(), "the broker took the message");
        assert!(confirm.take_message().is_none(), "routed to the queue");
    }
}

pub struct RabbitHarness {
    pub server: RabbitServer,
    runtime: Option<tokio::runtime::Runtime>,
    publisher: tokio::sync::Mutex<Publisher>,
    published: AtomicU64,
}

impl RabbitHarness {
    /// Runs `f` on the harness's runtime, from a thread of its own.
    pub fn run<T: Send>(&self, f: impl Future<Output = T> + Send) -> T {
        let runtime = self.runtime.as_ref().expect("the harness's runtime");
        std::thread::scope(|s| {
            s.spawn(|| runtime.block_on(f))
                .join()
                .expect("the harness's call")
        })
    }

    /// The harness's publisher (its connection, opened again after a restart).
    pub async fn publisher(&self) -> tokio::sync::MutexGuard<'_, Publisher> {
        self.publisher.lock().await
    }

    /// A channel of the test's own connection (confirm mode), for what a test declares.
    pub async fn publisher_channel(&self) -> Channel {
        self.publisher.lock().await.channel().await.clone()
    }

    /// The source URL of the suite's queue.
    pub fn source_url(&self) -> AmqpUrl {
        AmqpUrl::parse(&format!("{}?queue={QUEUE}", self.server.url())).expect("the URL parses")
    }
}

impl Drop for RabbitHarness {
    fn drop(&mut self) {
        // Dropped inside a case's runtime: a runtime may not be dropped there, only let go.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl SourceHarness for RabbitHarness {
    fn start() -> Self {
        let server = RabbitServer::start();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("the harness's runtime");
        let h = RabbitHarness {
            publisher: tokio::sync::Mutex::new(Publisher::new(server.url())),
            server,
            runtime: Some(runtime),
            published: AtomicU64::new(0),
        };
        h.run(async {
            h.publisher.lock().await.channel().await;
        });
        h
    }

    fn source(&self, spec: SourceSpec) -> Box<dyn Spout> {
        let mut o = AmqpOptions::new(self.source_url());
        o.consumer = spec.consumer;
        o.max_unacked = spec.max_unacked;
        Box::new(AmqpSource::start(o, spec.durable).expect("the source starts"))
    }

    fn publish(&self, biz: &str, key: Option<&str>, payload: &str) {
        let n = self.published.fetch_add(1, Relaxed) + 1;
        let id = format!("m-{n}");
        let mut headers = vec![("rebound-biz", biz)];
        if let Some(key) = key {
            headers.push(("rebound-key", key));
        }
        self.run(async {
            self.publisher
                .lock()
                .await
                .publish(Some(&id), &headers, QUEUE, payload.as_bytes())
                .await;
        });
    }

    fn unacked(&self) -> u64 {
        // Asked again while the broker's metrics do not answer (a loaded machine); one that
        // never does holds what it held: never "none" (a wait for 0 would end on an error).
        for _ in 0..20 {
            if let Some((unacked, _)) = self.server.queue_counts(QUEUE) {
                return unacked;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        u64::MAX
    }

    /// RabbitMQ puts a dead consumer's messages back in the queue at once: what it holds.
    fn unacked_after_death(&self) -> u64 {
        self.server.queue_messages(QUEUE).unwrap_or(0)
    }

    fn kill(&mut self) {
        self.server.kill();
    }

    fn restart(&mut self) {
        self.server.restart();
    }

    /// A closed connection's unacknowledged messages are requeued at once.
    fn redelivery_after(&self) -> Duration {
        Duration::ZERO
    }

    fn shown(&self) -> Option<(Vec<String>, String)> {
        let secret = "pa55-w0rd".to_owned();
        let url = format!("amqp://app:{secret}@127.0.0.1:1/shop?queue={QUEUE}");
        let parsed = AmqpUrl::parse(&url).expect("the URL parses");
        let bad = AmqpUrl::parse(&format!("{url}&prefetch=9")).unwrap_err();
        let options = AmqpOptions::new(parsed.clone());
        let publish = AmqpUrl::parse(&format!("amqp://app:{secret}@127.0.0.1:1/?exchange=dead"))
            .expect("the URL parses");
        let publisher = rebound_sources::amqp::AmqpPublisher::new(publish.clone()).unwrap();
        Some((
            vec![
                parsed.to_string(),
                format!("{parsed:?}"),
                bad.to_string(),
                format!("{options:?}"),
                publish.to_string(),
                format!("{publisher:?}"),
            ],
            secret,
        ))
    }
}
