//! The dispatcher against real HTTP receivers on loopback that each test starts: an axum
//! server that records what it is sent and answers as told, and a listener that accepts
//! connections and never answers.

use super::*;
use crate::config::Receiver;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::Instant;
use tokio::net::TcpListener;

/// What a recording receiver was sent.
#[derive(Clone, Default)]
struct Received {
    requests: Arc<Mutex<Vec<(HeaderMap, serde_json::Value)>>>,
    /// Statuses to answer, in order; 200 once they run out.
    script: Arc<Mutex<VecDeque<u16>>>,
}

impl Received {
    fn requests(&self) -> Vec<(HeaderMap, serde_json::Value)> {
        self.requests.lock().unwrap().clone()
    }

    /// The ids of the letters of every request answered 2xx or not, in order.
    fn batches(&self) -> Vec<Vec<u64>> {
        self.requests()
            .iter()
            .map(|(_, body)| {
                body["dead_letters"]
                    .as_array()
                    .expect("a dead_letters array")
                    .iter()
                    .map(|l| l["n"].as_u64().expect("a letter's n"))
                    .collect()
            })
            .collect()
    }
}

async fn record(
    State(received): State<Received>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> StatusCode {
    let body: serde_json::Value = serde_json::from_slice(&body).expect("a JSON body");
    received.requests.lock().unwrap().push((headers, body));
    let status = received.script.lock().unwrap().pop_front().unwrap_or(200);
    StatusCode::from_u16(status).unwrap()
}

/// A receiver on loopback answering `script`'s statuses, then 200.
async fn recording_receiver(script: &[u16]) -> (SocketAddr, Received) {
    let received = Received::default();
    received.script.lock().unwrap().extend(script);
    let app = axum::Router::new()
        .route("/hook", axum::routing::post(record))
        .with_state(received.clone());
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (addr, received)
}

/// A receiver on loopback that accepts every connection and never answers.
async fn silent_receiver() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    addr
}

fn receiver(name: &str, addr: SocketAddr) -> Receiver {
    Receiver {
        name: name.to_owned(),
        webhook: format!("http://{addr}/hook"),
        kind: Default::default(),
        include_payload: false,
        ca_file: None,
        headers: [("X-Team".to_owned(), "payments".to_owned())].into(),
    }
}

fn letter(n: u64) -> serde_json::Value {
    serde_json::json!({ "id": format!("order-{n:06}"), "label": "L1", "n": n })
}

fn counts_of(dispatcher: &AlertDispatcher, name: &str) -> AlertCounts {
    dispatcher
        .counts()
        .into_iter()
        .find(|(n, _)| n == name)
        .map(|(_, c)| c)
        .unwrap_or_default()
}

/// Waits (a generous bound, not a timing claim) until `done` holds of `name`'s counts.
async fn until(
    dispatcher: &AlertDispatcher,
    name: &str,
    done: impl Fn(AlertCounts) -> bool,
) -> AlertCounts {
    let give_up = Instant::now() + Duration::from_secs(20);
    loop {
        let c = counts_of(dispatcher, name);
        if done(c) {
            return c;
        }
        assert!(Instant::now() < give_up, "{name}: counts stuck at {c:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn quick() -> AlertOptions {
    AlertOptions {
        batch_wait: Duration::from_millis(100),
        timeout: Duration::from_millis(300),
        give_up_after: Duration::from_secs(10),
        retry_first: Duration::from_millis(50),
        retry_max: Duration::from_millis(200),
        ..AlertOptions::default()
    }
}

#[test]
fn the_default_options_are_the_spec_numbers() {
    let o = AlertOptions::default();
    assert_eq!(o.batch_max, 100);
    assert_eq!(o.batch_wait, Duration::from_secs(1));
    assert_eq!(o.timeout, Duration::from_secs(5));
    assert_eq!(o.give_up_after, Duration::from_secs(3600));
}

// A current-thread runtime: the lanes cannot run while the test's own code runs, so what
// `send` did is seen before any letter leaves its queue.
#[tokio::test]
async fn letters_arrive_in_batches_of_at_most_100_with_the_receivers_headers() {
    let (addr, received) = recording_receiver(&[]).await;
    let receivers = Receivers::new([receiver("oncall", addr)]);
    let dispatcher = AlertDispatcher::start(&receivers, quick());
    for n in 0..250 {
        dispatcher.send("oncall", letter(n));
    }
    let c = until(&dispatcher, "oncall", |c| c.sent == 250).await;
    assert_eq!(
        c,
        AlertCounts {
            sent: 250,
            failed: 0,
            dropped: 0,
            deferred: 0
        }
    );
    let batches = received.batches();
    let sizes: Vec<usize> = batches.iter().map(Vec::len).collect();
    assert_eq!(sizes, [100, 100, 50]);
    let ids: Vec<u64> = batches.concat();
    assert_eq!(
        ids,
        (0..250).collect::<Vec<_>>(),
        "every letter, in order, once"
    );
    for (headers, _) in received.requests() {
        assert_eq!(headers["content-type"], "application/json");
        assert_eq!(headers["x-team"], "payments");
    }
    dispatcher.shutdown(Duration::from_secs(1)).await;
}

#[tokio::test]
async fn an_https_receiver_with_its_ca_file_gets_the_letters_and_one_without_refuses_its_certificate()
 {
    use crate::outbound::test_server::{TestCa, serve_tls};
    let ca = TestCa::new("Alerts test CA");
    let received = Received::default();
    let app = axum::Router::new()
        .route("/hook", axum::routing::post(record))
        .with_state(received.clone());
    let addr = serve_tls(app, &ca).await;
    let dir = tempfile::tempdir().unwrap();
    let trusted = Receiver {
        webhook: format!("https://localhost:{}/hook", addr.port()),
        ca_file: Some(ca.write(dir.path(), "ca.pem")),
        ..receiver("oncall", addr)
    };
    // The same server, trusted only through the system's roots, which do not know its CA.
    let untrusted = Receiver {
        webhook: trusted.webhook.clone(),
        ca_file: None,
        ..receiver("system", addr)
    };
    let receivers = Receivers::new([trusted, untrusted]);
    let dispatcher = AlertDispatcher::start(&receivers, quick());
    for n in 0..3 {
        dispatcher.send("oncall", letter(n));
        dispatcher.send("system", letter(100 + n));
    }
    until(&dispatcher, "oncall", |c| c.sent == 3).await;
    until(&dispatcher, "system", |c| c.failed >= 2).await;
    assert_eq!(received.batches(), [vec![0, 1, 2]]);
    assert_eq!(received.requests()[0].0["x-team"], "payments");
    assert_eq!(counts_of(&dispatcher, "system").sent, 0);
    dispatcher.shutdown(Duration::from_millis(100)).await;
}

#[tokio::test]
async fn a_batch_waits_at_most_batch_wait_for_company() {
    let (addr, received) = recording_receiver(&[]).await;
    let receivers = Receivers::new([receiver("oncall", addr)]);
    let dispatcher = AlertDispatcher::start(&receivers, quick());
    dispatcher.send("oncall", letter(1));
    until(&dispatcher, "oncall", |c| c.sent == 1).await;
    assert_eq!(received.batches(), [vec![1]]);
    dispatcher.shutdown(Duration::from_secs(1)).await;
}

#[tokio::test]
async fn a_refused_delivery_is_retried_and_counted() {
    let (addr, received) = recording_receiver(&[500, 503]).await;
    let receivers = Receivers::new([receiver("oncall", addr)]);
    let dispatcher = AlertDispatcher::start(&receivers, quick());
    for n in 0..30 {
        dispatcher.send("oncall", letter(n));
    }
    let c = until(&dispatcher, "oncall", |c| c.sent == 30).await;
    assert_eq!(
        c,
        AlertCounts {
            sent: 30,
            failed: 2,
            dropped: 0,
            deferred: 0
        }
    );
    // The same batch three times: refused, refused, taken.
    assert_eq!(received.batches(), vec![(0..30).collect::<Vec<_>>(); 3]);
    dispatcher.shutdown(Duration::from_secs(1)).await;
}

#[tokio::test]
async fn a_receiver_that_never_answers_drops_its_letters_and_holds_back_no_one() {
    let silent = silent_receiver().await;
    let (addr, received) = recording_receiver(&[]).await;
    let receivers = Receivers::new([receiver("silent", silent), receiver("oncall", addr)]);
    let options = AlertOptions {
        queue_bound: 50,
        give_up_after: Duration::from_millis(800),
        ..quick()
    };
    let dispatcher = AlertDispatcher::start(&receivers, options);
    // `send` is not async: these return without the lanes having run once. A bound of 50
    // refuses the other 950 at once.
    for n in 0..1000 {
        dispatcher.send("silent", letter(n));
    }
    assert_eq!(
        counts_of(&dispatcher, "silent"),
        AlertCounts {
            sent: 0,
            failed: 0,
            dropped: 950,
            deferred: 0
        }
    );
    for n in 0..40 {
        dispatcher.send("oncall", letter(n));
    }
    // The other receiver gets its letters while the silent one's are still being tried.
    until(&dispatcher, "oncall", |c| c.sent == 40).await;
    assert_eq!(received.batches().concat().len(), 40);
    assert_eq!(counts_of(&dispatcher, "silent").sent, 0);
    // The queued 50 are tried until give_up_after, then dropped.
    let c = until(&dispatcher, "silent", |c| c.dropped == 1000).await;
    assert!(c.failed >= 1, "{c:?}");
    assert_eq!(c.sent, 0);
    dispatcher.shutdown(Duration::from_millis(100)).await;
}

#[tokio::test]
async fn an_unknown_receiver_counts_as_dropped() {
    let dispatcher = AlertDispatcher::start(&Receivers::default(), quick());
    dispatcher.send("nobody", letter(1));
    dispatcher.send("nobody", letter(2));
    assert_eq!(
        dispatcher.counts(),
        [(
            "nobody".to_owned(),
            AlertCounts {
                sent: 0,
                failed: 0,
                dropped: 2,
                deferred: 0
            }
        )]
    );
}

#[tokio::test]
async fn shutdown_flushes_what_is_queued_and_drops_what_it_cannot_deliver_in_time() {
    let silent = silent_receiver().await;
    let (addr, received) = recording_receiver(&[]).await;
    let receivers = Receivers::new([receiver("silent", silent), receiver("oncall", addr)]);
    // A batch would wait a minute to fill: the shutdown sends it at once.
    let options = AlertOptions {
        batch_wait: Duration::from_secs(60),
        ..quick()
    };
    let dispatcher = AlertDispatcher::start(&receivers, options);
    for n in 0..7 {
        dispatcher.send("oncall", letter(n));
        dispatcher.send("silent", letter(n));
    }
    let watcher = dispatcher.clone();
    let started = Instant::now();
    dispatcher.shutdown(Duration::from_millis(500)).await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "the shutdown is bounded"
    );
    assert_eq!(received.batches(), [(0..7).collect::<Vec<_>>()]);
    assert_eq!(counts_of(&watcher, "oncall").sent, 7);
    let silent = counts_of(&watcher, "silent");
    assert_eq!((silent.sent, silent.dropped), (0, 7), "{silent:?}");
    // After the shutdown, a send is dropped.
    watcher.send("oncall", letter(99));
    assert_eq!(counts_of(&watcher, "oncall").dropped, 1);
}

/// A store of letters for the backlog: every letter sent, read back newest first.
#[derive(Debug, Default)]
struct Kept {
    letters: Mutex<Vec<serde_json::Value>>,
    reads: std::sync::atomic::AtomicUsize,
}

impl AlertBacklog for Kept {
    fn page(
        &self,
        _receiver: &str,
        window: &Deferral,
        cursor: Option<BacklogCursor>,
        limit: usize,
    ) -> Result<BacklogPage, String> {
        self.reads
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut within: Vec<serde_json::Value> = self
            .letters
            .lock()
            .unwrap()
            .iter()
            .filter(|l| (window.from_ms..=window.to_ms).contains(&letter_time_ms(l)))
            .cloned()
            .collect();
        within.reverse();
        let skip = cursor.and_then(|c| c.from).map_or(0, |n| n as usize);
        let letters: Vec<_> = within.iter().skip(skip).take(limit).cloned().collect();
        let next = (skip + letters.len() < within.len()).then(|| BacklogCursor {
            part: 0,
            from: Some((skip + letters.len()) as i64),
        });
        Ok(BacklogPage { letters, next })
    }
}

fn timed_letter(n: u64) -> serde_json::Value {
    serde_json::json!({ "id": format!("order-{n:06}"), "label": "L1", "n": n, "last_time_ms": 1_000 + n })
}

#[tokio::test]
async fn letters_past_the_bound_are_deferred_and_sent_from_the_store_once_the_receiver_answers() {
    // The receiver refuses its first three requests: the queue's 50 letters wait, and the
    // rest are deferred, none of them held in memory.
    let (addr, received) = recording_receiver(&[503, 503, 503]).await;
    let receivers = Receivers::new([receiver("oncall", addr)]);
    let options = AlertOptions {
        queue_bound: 50,
        ..quick()
    };
    let dispatcher = AlertDispatcher::start(&receivers, options);
    let store = Arc::new(Kept::default());
    dispatcher.read_back_from(store.clone());
    for n in 0..1000 {
        store.letters.lock().unwrap().push(timed_letter(n));
        dispatcher.send("oncall", timed_letter(n));
    }
    assert_eq!(
        counts_of(&dispatcher, "oncall"),
        AlertCounts {
            sent: 0,
            failed: 0,
            dropped: 0,
            deferred: 950
        }
    );
    assert_eq!(
        dispatcher.deferred(),
        [(
            "oncall".to_owned(),
            Deferral {
                from_ms: 1_050,
                to_ms: 1_999,
                letters: 950
            }
        )]
    );
    let c = until(&dispatcher, "oncall", |c| c.sent == 1000).await;
    assert_eq!((c.failed, c.dropped, c.deferred), (3, 0, 950), "{c:?}");
    assert!(dispatcher.deferred().is_empty());
    // Every letter once, the deferred ones at most 100 to a request.
    let mut ids = received.batches()[3..].concat();
    assert!(received.batches().iter().all(|b| b.len() <= 100));
    ids.sort_unstable();
    assert_eq!(ids, (0..1000).collect::<Vec<_>>());
    // New letters are queued again, not deferred.
    dispatcher.send("oncall", timed_letter(1000));
    let c = until(&dispatcher, "oncall", |c| c.sent == 1001).await;
    assert_eq!(c.deferred, 950);
    dispatcher.shutdown(Duration::from_secs(1)).await;
}

#[tokio::test]
async fn the_queue_is_bounded_in_bytes_too() {
    let silent = silent_receiver().await;
    let receivers = Receivers::new([receiver("silent", silent)]);
    let big = |n: u64| serde_json::json!({ "n": n, "last_message": "x".repeat(10_000) });
    let options = AlertOptions {
        queue_bytes: 100_000,
        ..quick()
    };
    let dispatcher = AlertDispatcher::start(&receivers, options.clone());
    for n in 0..50 {
        dispatcher.send("silent", big(n));
    }
    // About ten letters of 10 kB fit; without a store to read them back from, the rest are
    // dropped.
    let c = counts_of(&dispatcher, "silent");
    assert_eq!(c.dropped, 41, "{c:?}");
    assert_eq!(c.deferred, 0);
    // With one, they are deferred.
    let deferring = AlertDispatcher::start(&receivers, options);
    deferring.read_back_from(Arc::new(Kept::default()));
    for n in 0..50 {
        deferring.send("silent", big(n));
    }
    let c = counts_of(&deferring, "silent");
    assert_eq!((c.dropped, c.deferred), (0, 41), "{c:?}");
    dispatcher.shutdown(Duration::from_millis(100)).await;
    deferring.shutdown(Duration::from_millis(100)).await;
}

#[tokio::test]
async fn a_store_that_cannot_be_read_keeps_the_deferral_for_a_later_try() {
    #[derive(Debug)]
    struct Broken;
    impl AlertBacklog for Broken {
        fn page(
            &self,
            _: &str,
            _: &Deferral,
            _: Option<BacklogCursor>,
            _: usize,
        ) -> Result<BacklogPage, String> {
            Err("the store does not answer".into())
        }
    }
    let (addr, _received) = recording_receiver(&[503]).await;
    let receivers = Receivers::new([receiver("oncall", addr)]);
    let options = AlertOptions {
        queue_bound: 5,
        ..quick()
    };
    let dispatcher = AlertDispatcher::start(&receivers, options);
    dispatcher.read_back_from(Arc::new(Broken));
    for n in 0..20 {
        dispatcher.send("oncall", timed_letter(n));
    }
    until(&dispatcher, "oncall", |c| c.sent == 5).await;
    // Tried, failed, and still deferred: nothing is dropped.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let c = counts_of(&dispatcher, "oncall");
    assert_eq!((c.sent, c.dropped, c.deferred), (5, 0, 15), "{c:?}");
    assert_eq!(dispatcher.deferred()[0].1.letters, 15);
    dispatcher.shutdown(Duration::from_millis(100)).await;
}
