//! `rebound relay` on NATS JetStream, end to end: the real binary, a `nats-server -js` of the
//! test's own, a handler of the test's own. The consumer is made, every message ends acked or
//! waiting in Rebound's store, and JetStream holds nothing unacknowledged for either.

use std::collections::BTreeSet;
use std::time::Duration;

use async_nats::HeaderMap;
use async_nats::jetstream::{self, stream};
use rebound_sources::NatsServer;

use super::redis_stream::rules_dir;
use super::support::{Answer, HandlerServer, Relay, Release, n_of, within};

/// A stream `ORDERS` on `orders.>` in files, with `n` messages of `Rebound-Biz` PAYMENT, each
/// acknowledged by the server; the client to look at it with.
fn orders(server: &NatsServer, rt: &tokio::runtime::Runtime, n: usize) -> jetstream::Context {
    rt.block_on(async {
        let client = async_nats::connect(server.addr()).await.unwrap();
        let js = jetstream::new(client);
        js.create_stream(stream::Config {
            name: "ORDERS".into(),
            subjects: vec!["orders.>".into()],
            storage: stream::StorageType::File,
            ..Default::default()
        })
        .await
        .unwrap();
        for i in 0..n {
            let mut headers = HeaderMap::new();
            headers.insert("Rebound-Biz", "PAYMENT");
            headers.insert("Rebound-Key", format!("order-{i}").as_str());
            js.publish_with_headers("orders.new", headers, format!("{{\"n\":{i}}}").into())
                .await
                .unwrap()
                .await
                .unwrap();
        }
        js
    })
}

/// The consumer's `num_ack_pending` and `num_pending`, when the server says.
fn held(rt: &tokio::runtime::Runtime, js: &jetstream::Context) -> Option<(usize, u64)> {
    rt.block_on(async {
        let stream = js.get_stream_no_info("ORDERS").await.ok()?;
        let info = stream.consumer_info("rebound").await.ok()?;
        Some((info.num_ack_pending, info.num_pending))
    })
}

#[test]
fn a_jetstream_consumer_is_made_and_nothing_stays_pending_at_the_server() {
    let server = NatsServer::start();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let js = orders(&server, &rt, 20);
    // Every fifth waits an hour for its retry; the rest are acked at once.
    let handler = HandlerServer::start(|r| {
        if n_of(r).is_multiple_of(5) {
            Answer::code(503, "SLOW")
        } else {
            Answer::ok()
        }
    });
    let (rules, data) = (rules_dir(), tempfile::tempdir().unwrap());
    let url = format!("nats://{}/ORDERS?consumer=rebound", server.addr());
    let relay = Relay::start(
        rules.path(),
        data.path(),
        &["--source", &url, "--handler", &handler.url()],
    );
    let held = || held(&rt, &js);
    let handled = || handler.received().iter().map(n_of).collect::<BTreeSet<_>>();
    let all: BTreeSet<usize> = (0..20).collect();
    assert!(
        within(Duration::from_secs(20), || handled() == all
            && held() == Some((0, 0))),
        "handled {:?}, held {:?}\n{}",
        handled(),
        held(),
        relay.stderr()
    );
    let received = handler.received();
    assert!(
        received
            .iter()
            .all(|r| r.header("rebound-biz") == "PAYMENT")
    );
    assert!(
        received
            .iter()
            .all(|r| r.header("rebound-message-id").starts_with("ORDERS/"))
    );
    assert!(
        received
            .iter()
            .all(|r| r.header("rebound-key") == format!("order-{}", n_of(r)))
    );
    let (status, stdout, stderr) = relay.terminate();
    assert!(status.success(), "{status}\n{stderr}");
    assert!(
        stdout.contains(
            "in custody     20 acknowledged to the broker (16 acked, 0 dead-lettered, 4 retained)"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains("4 retries waiting in the store"),
        "{stdout}"
    );
}

#[test]
fn a_nats_server_killed_and_restarted_from_its_store_mid_run_loses_nothing() {
    let mut server = NatsServer::start();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let js = orders(&server, &rt, 200);
    // Messages from 50 on wait until the server is back.
    let release = Release::upto(50);
    let handler = HandlerServer::start(release.answer(|_| Answer::ok()));
    let (rules, data) = (rules_dir(), tempfile::tempdir().unwrap());
    let url = format!("nats://{}/ORDERS?consumer=rebound", server.addr());
    let relay = Relay::start(
        rules.path(),
        data.path(),
        &["--source", &url, "--handler", &handler.url()],
    );
    let ok = || -> BTreeSet<usize> {
        handler
            .received()
            .iter()
            .filter(|r| r.status == 200)
            .map(n_of)
            .collect()
    };
    assert!(
        within(Duration::from_secs(20), || ok().len() >= 40),
        "{}",
        relay.stderr()
    );
    server.restart();
    release.to(usize::MAX);
    let all: BTreeSet<usize> = (0..200).collect();
    assert!(
        within(Duration::from_secs(40), || ok() == all
            && held(&rt, &js) == Some((0, 0))),
        "{} of 200 acked, held {:?}\n{}",
        ok().len(),
        held(&rt, &js),
        relay.stderr()
    );
    let (status, _, stderr) = relay.terminate();
    assert!(status.success(), "{status}\n{stderr}");
}
