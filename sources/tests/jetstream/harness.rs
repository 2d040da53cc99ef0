//! The source suite's harness for NATS JetStream: a `nats-server -js` of the case's own (file
//! storage), the stream `ORDERS` on `orders.>`, and the durable consumer `rebound`. The suite's
//! cases are async; the harness's own calls to the server run on a small runtime of its own,
//! from a thread of their own, so that they can be made from inside a case.

use std::future::Future;
use std::num::NonZeroUsize;
use std::time::Duration;

use async_nats::HeaderMap;
use async_nats::jetstream::{self, stream};
use rebound_runtime::sources::conformance::{SourceHarness, SourceSpec};
use rebound_runtime::topology::Spout;
use rebound_sources::jetstream::{JetStreamOptions, JetStreamSource, JetStreamUrl};

use rebound_sources::NatsServer as TestServer;

const STREAM: &str = "ORDERS";
const CONSUMER: &str = "rebound";
/// The suite's sources' `ack_wait`: what a killed consumer held comes back after it.
const ACK_WAIT: Duration = Duration::from_secs(2);

pub struct NatsHarness {
    server: TestServer,
    runtime: Option<tokio::runtime::Runtime>,
    js: jetstream::Context,
}

impl NatsHarness {
    /// Runs `f` on the harness's runtime, from a thread of its own.
    fn run<T: Send>(&self, f: impl Future<Output = T> + Send) -> T {
        let runtime = self.runtime.as_ref().expect("the harness's runtime");
        std::thread::scope(|s| {
            s.spawn(|| runtime.block_on(f))
                .join()
                .expect("the harness's call")
        })
    }
}

impl Drop for NatsHarness {
    fn drop(&mut self) {
        // Dropped inside a case's runtime: a runtime may not be dropped there, only let go.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl SourceHarness for NatsHarness {
    fn start() -> Self {
        let server = TestServer::start();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("the harness's runtime");
        let addr = server.addr();
        let js = std::thread::scope(|s| {
            s.spawn(|| {
                runtime.block_on(async {
                    let client = async_nats::ConnectOptions::new()
                        .max_reconnects(None)
                        .connect(addr)
                        .await
                        .expect("the harness connects to its nats-server");
                    let js = jetstream::new(client);
                    js.create_stream(stream::Config {
                        name: STREAM.into(),
                        subjects: vec!["orders.>".into()],
                        storage: stream::StorageType::File,
                        ..Default::default()
                    })
                    .await
                    .expect("the stream is created");
                    js
                })
            })
            .join()
            .expect("the harness starts")
        });
        NatsHarness {
            server,
            runtime: Some(runtime),
            js,
        }
    }

    fn source(&self, spec: SourceSpec) -> Box<dyn Spout> {
        let url = format!(
            "nats://127.0.0.1:{}/{STREAM}?consumer={CONSUMER}&subject=orders.%3E",
            self.server.port()
        );
        let mut o = JetStreamOptions::new(JetStreamUrl::parse(&url).expect("the URL parses"));
        o.batch = spec.batch;
        o.max_unacked = spec.max_unacked;
        o.block = Duration::from_millis(100);
        o.ack_wait = ACK_WAIT;
        o.biz_token = NonZeroUsize::new(2);
        Box::new(JetStreamSource::start(o, spec.durable).expect("the source starts"))
    }

    fn publish(&self, biz: &str, key: Option<&str>, payload: &str) {
        let mut headers = HeaderMap::new();
        if let Some(key) = key {
            headers.insert("Rebound-Key", key);
        }
        let (js, subject, payload) = (&self.js, format!("orders.{biz}"), payload.to_owned());
        self.run(async move {
            js.publish_with_headers(subject, headers, payload.into())
                .await
                .expect("published")
                .await
                .expect("the server acknowledged the publish");
        });
    }

    fn unacked(&self) -> u64 {
        let js = &self.js;
        self.run(async move {
            let Ok(stream) = js.get_stream_no_info(STREAM).await else {
                return 0;
            };
            // No consumer yet (the source makes it), or the server restarting: none known.
            stream
                .consumer_info(CONSUMER)
                .await
                .map_or(0, |i| i.num_ack_pending as u64)
        })
    }

    fn kill(&mut self) {
        self.server.kill();
    }

    fn restart(&mut self) {
        self.server.restart();
    }

    /// What a killed consumer held is delivered again once its `ack_wait` passes.
    fn redelivery_after(&self) -> Duration {
        ACK_WAIT + Duration::from_secs(1)
    }

    fn shown(&self) -> Option<(Vec<String>, String)> {
        let secret = "pa55-w0rd".to_owned();
        let url = format!("nats://app:{secret}@127.0.0.1:1/{STREAM}?consumer={CONSUMER}");
        let parsed = JetStreamUrl::parse(&url).expect("the URL parses");
        let bad = JetStreamUrl::parse(&format!("{url}&deliver=sometimes")).unwrap_err();
        let options = JetStreamOptions::new(parsed.clone());
        Some((
            vec![
                parsed.to_string(),
                format!("{parsed:?}"),
                bad.to_string(),
                format!("{options:?}"),
            ],
            secret,
        ))
    }
}
