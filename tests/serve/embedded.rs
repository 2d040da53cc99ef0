//! A program that embeds the runtime with a topology of its own gets, through
//! `rebound::app::run_job` and a `TopologyJob`, what `serve` gives the bundled pipeline: the
//! rules decide its failures, its dead letters are on the admin API (and an operator's replay
//! reaches its live queues), its counters are in `/metrics`, and a batch job ends by itself
//! once every message has its fate. In process: the test is the embedding.

use std::net::TcpListener;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use rebound::Outcome;
use rebound::app::{self, AdminListen, JobError, Options, TokenFrom, TopologyJob};
use rebound_runtime::durable::SourcePosition;
use rebound_runtime::store::{SqliteStore, Store};
use rebound_runtime::topology::*;

use super::support::eventually;

const PAYMENTS: u64 = 40;

fn id_of(n: u64) -> String {
    format!("payment-{n:06}")
}

fn number(id: &MessageId) -> u64 {
    id.as_str()
        .trim_start_matches("payment-")
        .parse()
        .unwrap_or(0)
}

/// Hands out the first half, then waits for `release` before the second.
struct Payments {
    next: u64,
    position: SourcePosition,
    release: Arc<AtomicBool>,
}

impl Spout for Payments {
    fn next(&mut self) -> NextMessage {
        if self.next >= PAYMENTS {
            return NextMessage::Exhausted;
        }
        if self.next == PAYMENTS / 2 && !self.release.load(Ordering::SeqCst) {
            return NextMessage::Idle;
        }
        self.next += 1;
        let n = self.next;
        self.position.handing_out(n);
        NextMessage::Ready(Message::new(id_of(n), "PAYMENT", "{}").with_offset(n))
    }
    fn ack(&mut self, id: &MessageId) {
        self.position.settled(number(id));
    }
    fn dead_lettered(&mut self, id: &MessageId) {
        self.position.settled(number(id));
    }
    fn close(&mut self) {
        self.position.sync();
    }
}

/// `PAY_FAILED` (dead-lettered by the shipped rules) for one payment in thirteen, every time.
struct Charge;

impl Bolt for Charge {
    fn execute(&mut self, input: &Tuple, _: &mut Emitter<'_>) -> Result<(), Failure> {
        let n = number(&MessageId::from(input.str("id").unwrap_or_default()));
        if n.is_multiple_of(13) {
            return Err(Failure::new("PAY_FAILED", "card declined"));
        }
        Ok(())
    }
}

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a free port");
    listener.local_addr().expect("its address").port()
}

#[test]
fn an_embedded_topology_gets_the_admin_api_metrics_and_labels_and_ends_when_quiet() {
    let rules = Path::new(env!("CARGO_MANIFEST_DIR")).join("rules");
    let set = rebound_engine::load_dir(&rules).unwrap().unwrap();
    let data = tempfile::tempdir().unwrap();
    let store = Arc::new(SqliteStore::open(data.path()).unwrap());
    let addr = format!("127.0.0.1:{}", free_port());
    let mut options = Options::embedded(&rules);
    options.admin = Some(AdminListen::check(&addr, TokenFrom::Env).expect("a loopback address"));
    let release = Arc::new(AtomicBool::new(false));
    let r = release.clone();
    let job = TopologyJob::new(store.clone(), move |durable, recovered| {
        assert!(recovered.is_empty(), "a fresh store");
        let position = durable.source_position("payments", id_of, [])?;
        let spout = Mutex::new(Some(Payments {
            next: 0,
            position,
            release: r,
        }));
        let mut b = TopologyBuilder::new("payments");
        b.spout("payments", 1, move |_| {
            spout.lock().unwrap().take().unwrap()
        });
        b.bolt("charge", 1, |_| Charge).shuffle("payments");
        Ok::<_, JobError>(b.build()?)
    })
    .until_quiet();
    let app = std::thread::spawn(move || app::run_job(options, set, job));

    rebound::outbound::use_ring_by_default();
    let http = reqwest::blocking::Client::new();
    let get = |path: &str| -> Option<(u16, String)> {
        let r = http.get(format!("http://{addr}{path}")).send().ok()?;
        Some((r.status().as_u16(), r.text().ok()?))
    };
    // The first half's letter is on the admin API, as the rules labelled it.
    let letter = "/v1/dead-letters?rule=payment-failed";
    assert!(
        eventually(|| get(letter).is_some_and(|(_, body)| body.contains("payment-000013"))),
        "{:?}",
        get(letter)
    );
    let (status, body) = get(letter).unwrap();
    assert_eq!(status, 200, "{body}");
    let listed: serde_json::Value = serde_json::from_str(&body).unwrap();
    let first = &listed["dead_letters"][0];
    assert_eq!(first["label"], "L3", "{first}");
    assert_eq!(first["last_code"], "PAY_FAILED", "{first}");
    // Its counters are in /metrics: the first half emitted, the spout idle before the second.
    let emitted = |m: &str| m.contains("rebound_messages_emitted_total 20");
    assert!(
        eventually(|| get("/metrics").is_some_and(|(s, m)| s == 200 && emitted(&m))),
        "{:?}",
        get("/metrics")
    );
    // An operator's replay reaches the live queues: the payment fails again, a second letter.
    let replay = http
        .post(format!(
            "http://{addr}/v1/dead-letters/payment-000013/replay"
        ))
        .json(&serde_json::json!({"operator": "ops", "reason": "card fixed"}))
        .send()
        .unwrap();
    assert_eq!(
        replay.status().as_u16(),
        200,
        "{}",
        replay.text().unwrap_or_default()
    );
    assert!(eventually(|| {
        get("/v1/messages/payment-000013")
            .is_some_and(|(_, b)| b.matches("PAY_FAILED").count() >= 2)
    }));

    // The second half, then the job ends by itself: every payment has its fate.
    release.store(true, Ordering::SeqCst);
    assert_eq!(app.join().unwrap(), Outcome::Ok);
    assert_eq!(store.position("payments").unwrap(), Some(PAYMENTS));
    let letters = store
        .dead_letter_count(&rebound_runtime::store::DeadLetterFilter::default())
        .unwrap();
    assert_eq!(letters, 4, "13 (twice), 26 and 39");
}
