//! A topology consuming a Redis stream through `rebound::app` (`sources.md`): the source's
//! counters are in `/metrics`, `/readyz` says 503 naming the source while its server is down
//! and 200 once it is back, and every entry ends acknowledged at the broker. In process, on a
//! `redis-server` of the test's own.

use std::net::TcpListener;
use std::path::Path;
use std::sync::Arc;

use rebound::Outcome;
use rebound::app::{self, AdminListen, JobError, Options, TokenFrom, TopologyJob};
use rebound_runtime::store::SqliteStore;
use rebound_runtime::topology::*;
use rebound_store_redis::TestServer;
use rebound_store_redis::stream::{StreamOptions, StreamSource, StreamUrl};

use super::support::eventually;

/// The stream's source, exhausted once it handed out `left` messages (so the job can end).
struct Upto {
    source: StreamSource,
    left: usize,
}

impl Spout for Upto {
    fn next(&mut self) -> NextMessage {
        if self.left == 0 {
            return NextMessage::Exhausted;
        }
        let next = self.source.next();
        if matches!(next, NextMessage::Ready(_)) {
            self.left -= 1;
        }
        next
    }
    fn ack(&mut self, id: &MessageId) {
        self.source.ack(id)
    }
    fn dead_lettered(&mut self, id: &MessageId) {
        self.source.dead_lettered(id)
    }
    fn retained(&mut self, id: &MessageId) {
        self.source.retained(id)
    }
    fn close(&mut self) {
        self.source.close()
    }
}

struct Handle;

impl Bolt for Handle {
    fn execute(&mut self, _: &Tuple, _: &mut Emitter<'_>) -> Result<(), Failure> {
        Ok(())
    }
}

fn add(server: &TestServer, n: usize) {
    let mut c = server.client();
    for i in 0..n {
        let _: String = redis::cmd("XADD")
            .arg("orders")
            .arg("*")
            .arg("biz")
            .arg("PAYMENT")
            .arg("payload")
            .arg(format!("{{\"n\":{i}}}"))
            .query(&mut c)
            .unwrap();
    }
}

#[test]
fn a_stream_s_source_is_in_metrics_and_readyz_and_every_entry_is_acknowledged() {
    let mut server = TestServer::start();
    add(&server, 20);
    let rules = Path::new(env!("CARGO_MANIFEST_DIR")).join("rules");
    let set = rebound_engine::load_dir(&rules).unwrap().unwrap();
    let data = tempfile::tempdir().unwrap();
    let store = Arc::new(SqliteStore::open(data.path()).unwrap());
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = format!("127.0.0.1:{port}");
    let mut options = Options::embedded(&rules);
    options.admin = Some(AdminListen::check(&addr, TokenFrom::Env).expect("a loopback address"));
    let url = format!("redis-stream://127.0.0.1:{}/orders?group=g", server.port());
    let mut source = StreamOptions::new(StreamUrl::parse(&url).unwrap(), "node-1");
    source.block = std::time::Duration::from_millis(100);
    let stats = source.stats.clone();
    let job = TopologyJob::new(store, move |durable, _| {
        let (source, durable) = (source.clone(), durable.clone());
        let mut b = TopologyBuilder::new("stream");
        b.spout("orders", 1, move |_| Upto {
            source: StreamSource::start(source.clone(), Some(durable.clone())).unwrap(),
            left: 21,
        });
        b.bolt("handle", 1, |_| Handle).shuffle("orders");
        Ok::<_, JobError>(b.build()?)
    })
    .source("orders", stats)
    .until_quiet();
    let app = std::thread::spawn(move || app::run_job(options, set, job));

    rebound::outbound::use_ring_by_default();
    let http = reqwest::blocking::Client::new();
    let get = |path: &str| -> Option<(u16, String)> {
        let r = http.get(format!("http://{addr}{path}")).send().ok()?;
        Some((r.status().as_u16(), r.text().ok()?))
    };
    let received = |m: &str| m.contains("rebound_source_received_total{source=\"orders\"} 20");
    assert!(
        eventually(|| get("/metrics").is_some_and(|(s, m)| s == 200 && received(&m))),
        "{:?}",
        get("/metrics")
    );
    assert_eq!(get("/readyz").map(|(s, _)| s), Some(200));

    server.kill();
    assert!(
        eventually(|| get("/readyz").is_some_and(|(s, _)| s == 503)),
        "/readyz stayed 200 with the stream's server down"
    );
    let (_, body) = get("/readyz").unwrap();
    let body: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["source"], "unreachable", "{body}");
    assert_eq!(body["name"], "orders", "{body}");
    assert!(body["since"].is_string(), "{body}");

    server.restart();
    assert!(
        eventually(|| get("/readyz").is_some_and(|(s, _)| s == 200)),
        "/readyz stayed 503 with the server back"
    );
    add(&server, 1);
    assert_eq!(app.join().unwrap(), Outcome::Ok);
    type Summary = (
        u64,
        Option<String>,
        Option<String>,
        Option<Vec<(String, String)>>,
    );
    let pending: Summary = redis::cmd("XPENDING")
        .arg("orders")
        .arg("g")
        .query(&mut server.client())
        .unwrap();
    assert_eq!(pending.0, 0, "every entry acknowledged at the broker");
}
