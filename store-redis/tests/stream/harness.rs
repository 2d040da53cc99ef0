//! The source suite's harness for Redis Streams: a `redis-server` of the case's own (AOF,
//! fsync always), the stream `orders` and the group `rebound`.

use std::time::Duration;

use rebound_runtime::sources::conformance::{SourceHarness, SourceSpec};
use rebound_runtime::topology::Spout;
use rebound_store_redis::TestServer;
use rebound_store_redis::stream::{StreamOptions, StreamSource, StreamUrl};

pub const STREAM: &str = "orders";
pub const GROUP: &str = "rebound";

pub struct RedisHarness {
    pub server: TestServer,
}

impl RedisHarness {
    pub fn options(&self, consumer: &str) -> StreamOptions {
        let url = format!(
            "redis-stream://127.0.0.1:{}/{STREAM}?group={GROUP}",
            self.server.port()
        );
        let mut o = StreamOptions::new(StreamUrl::parse(&url).unwrap(), consumer);
        o.block = Duration::from_millis(100);
        o
    }
}

impl SourceHarness for RedisHarness {
    fn start() -> Self {
        RedisHarness {
            server: TestServer::start(),
        }
    }

    fn source(&self, spec: SourceSpec) -> Box<dyn Spout> {
        let mut o = self.options(&spec.consumer);
        o.batch = spec.batch;
        o.max_unacked = spec.max_unacked;
        Box::new(StreamSource::start(o, spec.durable).expect("the source starts"))
    }

    fn publish(&self, biz: &str, key: Option<&str>, payload: &str) {
        let mut cmd = redis::cmd("XADD");
        cmd.arg(STREAM)
            .arg("*")
            .arg("biz")
            .arg(biz)
            .arg("payload")
            .arg(payload);
        if let Some(key) = key {
            cmd.arg("key").arg(key);
        }
        let _: String = cmd.query(&mut self.server.client()).expect("XADD");
    }

    fn unacked(&self) -> u64 {
        type Summary = (
            u64,
            Option<String>,
            Option<String>,
            Option<Vec<(String, String)>>,
        );
        let summary: redis::RedisResult<Summary> = redis::cmd("XPENDING")
            .arg(STREAM)
            .arg(GROUP)
            .query(&mut self.server.client());
        match summary {
            Ok(s) => s.0,
            // Before the source made the group, or while the server restarts: nothing known.
            Err(e) if e.code() == Some("NOGROUP") => 0,
            Err(e) => panic!("XPENDING: {e}"),
        }
    }

    fn kill(&mut self) {
        self.server.kill();
    }

    fn restart(&mut self) {
        self.server.restart();
    }

    /// A restarted consumer of the same name reads its own pending entries at once.
    fn redelivery_after(&self) -> Duration {
        Duration::ZERO
    }

    fn shown(&self) -> Option<(Vec<String>, String)> {
        let secret = "pa55-w0rd".to_owned();
        let url = format!("redis-stream://app:{secret}@127.0.0.1:1/{STREAM}?group={GROUP}");
        let parsed = StreamUrl::parse(&url).unwrap();
        let bad = StreamUrl::parse(&format!("{url}&start=7")).unwrap_err();
        let options = StreamOptions::new(parsed.clone(), "node-1");
        let texts = vec![
            parsed.to_string(),
            format!("{parsed:?}"),
            bad.to_string(),
            format!("{options:?}"),
        ];
        Some((texts, secret))
    }
}
