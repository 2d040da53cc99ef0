//! `rebound relay` on RabbitMQ, end to end: the real binary, a `rabbitmq-server` of the
//! test's own, a handler of the test's own, and `dead_letters.publish` to an exchange of the
//! same broker. Every message ends acked by the handler or dead-lettered (one without a
//! `message-id` at once, `NO_MESSAGE_ID`), the queue holds nothing once Rebound has custody,
//! and a letter published while no queue is bound to the exchange is not lost: counted
//! `unroutable`, retried, and delivered once a queue is bound.

use std::collections::BTreeSet;
use std::time::Duration;

use lapin::options::{
    BasicGetOptions, BasicPublishOptions, ConfirmSelectOptions, ExchangeDeclareOptions,
    QueueBindOptions, QueueDeclareOptions,
};
use lapin::types::{AMQPValue, FieldTable, LongString};
use lapin::{BasicProperties, Channel, Connection, ConnectionProperties, ExchangeKind};
use rebound_sources::RabbitServer;

use super::redis_stream::rules_dir;
use super::support::{Answer, HandlerServer, Relay, n_of, within};

fn durable() -> QueueDeclareOptions {
    QueueDeclareOptions {
        durable: true,
        ..Default::default()
    }
}

/// The test's channel (confirm mode), with the queue `orders` and the fanout exchange `dead`
/// (no queue bound to it yet).
async fn setup(server: &RabbitServer) -> (Connection, Channel) {
    let connection = Connection::connect(&server.url(), ConnectionProperties::default())
        .await
        .unwrap();
    let channel = connection.create_channel().await.unwrap();
    channel
        .confirm_select(ConfirmSelectOptions::default())
        .await
        .unwrap();
    channel
        .queue_declare("orders".into(), durable(), FieldTable::default())
        .await
        .unwrap();
    channel
        .exchange_declare(
            "dead".into(),
            ExchangeKind::Fanout,
            ExchangeDeclareOptions {
                durable: true,
                ..Default::default()
            },
            FieldTable::default(),
        )
        .await
        .unwrap();
    (connection, channel)
}

/// Publishes `{"n":N}` to `orders`, persistent and confirmed, with `rebound-biz PAYMENT` and
/// the `message-id` `order-N` (none when `id` is false).
async fn publish(channel: &Channel, n: usize, id: bool) {
    let mut headers = FieldTable::default();
    headers.insert(
        "rebound-biz".into(),
        AMQPValue::LongString(LongString::from(b"PAYMENT".to_vec())),
    );
    let mut properties = BasicProperties::default()
        .with_delivery_mode(2)
        .with_headers(headers);
    if id {
        properties = properties.with_message_id(format!("order-{n}").into());
    }
    let confirm = channel
        .basic_publish(
            "".into(),
            "orders".into(),
            BasicPublishOptions::default(),
            format!("{{\"n\":{n}}}").as_bytes(),
            properties,
        )
        .await
        .unwrap()
        .await
        .unwrap();
    assert!(confirm.is_ack());
}

/// The `rebound_dead_letters_published_total` of `result`, from the relay's /metrics.
fn published_total(relay: &Relay, result: &str) -> u64 {
    let line = format!("rebound_dead_letters_published_total{{result=\"{result}\"}} ");
    relay
        .get("/metrics")
        .lines()
        .find_map(|l| {
            l.strip_prefix(line.as_str())
                .map(|v| v.trim().parse().unwrap_or(0))
        })
        .unwrap_or(0)
}

#[test]
fn a_rabbitmq_queue_is_relayed_every_message_acked_or_dead_lettered_and_no_letter_lost() {
    let server = RabbitServer::start();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (_connection, channel) = rt.block_on(setup(&server));
    rt.block_on(async {
        for n in 0..30 {
            publish(&channel, n, true).await;
        }
        // No message-id: refused at once, never handed to the handler.
        publish(&channel, 99, false).await;
    });
    // Every fifth is declined for good; every third else is still processing at its first
    // delivery (retried 100 ms later); the rest are paid.
    let handler = HandlerServer::start(|r| {
        let n = n_of(r);
        if n.is_multiple_of(5) {
            Answer::code(422, "PAY_FAILED")
        } else if n.is_multiple_of(3) && r.header("rebound-attempt") == "1" {
            Answer::code(503, "PAY_PROCESSING")
        } else {
            Answer::ok()
        }
    });
    let (rules, data) = (rules_dir(), tempfile::tempdir().unwrap());
    let config = data.path().join("relay.yaml");
    std::fs::write(
        &config,
        format!(
            "dead_letters:\n  publish: 'amqp://127.0.0.1:{}/%2F?exchange=dead'\n",
            server.port()
        ),
    )
    .unwrap();
    let url = format!("amqp://127.0.0.1:{}/?queue=orders", server.port());
    let relay = Relay::start(
        rules.path(),
        data.path(),
        &[
            "--source",
            &url,
            "--handler",
            &handler.url(),
            "--config",
            config.to_str().unwrap(),
        ],
    );
    let paid = || -> BTreeSet<usize> {
        handler
            .received()
            .iter()
            .filter(|r| r.status == 200)
            .map(n_of)
            .collect()
    };
    let declined = || -> BTreeSet<usize> {
        handler
            .received()
            .iter()
            .filter(|r| r.status == 422)
            .map(n_of)
            .collect()
    };
    let want_paid: BTreeSet<usize> = (0..30).filter(|n| n % 5 != 0).collect();
    let want_declined: BTreeSet<usize> = (0..30).filter(|n| n % 5 == 0).collect();
    let queued = || server.queue_messages("orders");
    // Every message acked or dead-lettered, the queue empty, and the letters, unbound, not
    // published yet: returned and retried.
    assert!(
        within(Duration::from_secs(60), || paid() == want_paid
            && declined() == want_declined
            && queued() == Some(0)
            && published_total(&relay, "unroutable") > 0),
        "paid {:?}, declined {:?}, queued {:?}, unroutable {}\n{}",
        paid(),
        declined(),
        queued(),
        published_total(&relay, "unroutable"),
        relay.stderr()
    );
    assert!(
        handler.received().iter().all(|r| n_of(r) != 99),
        "the message without a message-id never reached the handler"
    );
    assert!(
        handler
            .received()
            .iter()
            .all(
                |r| r.header("rebound-message-id") == format!("order-{}", n_of(r))
                    && r.header("rebound-biz") == "PAYMENT"
            )
    );
    assert_eq!(published_total(&relay, "published"), 0);

    // A queue bound now gets every letter: the six declined and the one without an id.
    rt.block_on(async {
        channel
            .queue_declare("dead-letters".into(), durable(), FieldTable::default())
            .await
            .unwrap();
        channel
            .queue_bind(
                "dead-letters".into(),
                "dead".into(),
                "".into(),
                QueueBindOptions::default(),
                FieldTable::default(),
            )
            .await
            .unwrap();
    });
    let mut letters: Vec<(String, String, String)> = Vec::new();
    let got_all = within(Duration::from_secs(60), || {
        rt.block_on(async {
            while let Ok(Some(m)) = channel
                .basic_get("dead-letters".into(), BasicGetOptions { no_ack: true })
                .await
            {
                let header = |name: &str| {
                    m.delivery
                        .properties
                        .headers()
                        .as_ref()
                        .and_then(|h| h.inner().get(name).cloned())
                        .and_then(|v| match v {
                            AMQPValue::LongString(s) => {
                                Some(String::from_utf8_lossy(s.as_bytes()).into_owned())
                            }
                            _ => None,
                        })
                        .unwrap_or_default()
                };
                letters.push((
                    header("rebound-id"),
                    header("rebound-code"),
                    String::from_utf8_lossy(&m.delivery.data).into_owned(),
                ));
            }
        });
        letters
            .iter()
            .map(|(id, _, _)| id.clone())
            .collect::<BTreeSet<_>>()
            .len()
            == 7
    });
    assert!(got_all, "letters {letters:?}\n{}", relay.stderr());
    let declined_ids: BTreeSet<String> =
        want_declined.iter().map(|n| format!("order-{n}")).collect();
    for (id, code, body) in &letters {
        if declined_ids.contains(id) {
            assert_eq!(code, "PAY_FAILED");
            assert_eq!(body, &format!("{{\"n\":{}}}", &id["order-".len()..]));
        } else {
            assert!(id.starts_with("orders/no-message-id/"), "{id}");
            assert_eq!(code, "NO_MESSAGE_ID");
            assert_eq!(body, "{\"n\":99}");
        }
    }
    assert!(published_total(&relay, "published") >= 7);

    let (status, stdout, stderr) = relay.terminate();
    assert!(status.success(), "{status}\n{stderr}");
    assert!(
        stdout.contains("in custody     31 acknowledged to the broker"),
        "{stdout}"
    );
}
