//! `GET /readyz` on the embedded store says whether the store takes the runtime's writes: a
//! database locked by another process (as a full disk or a read-only file would) makes it 503
//! `{"store": "unwritable", "since", "error"}` while the journal retries, and 200 again once
//! the commits go through; nothing is lost meanwhile.

use crate::support::*;
use std::path::Path;
use std::time::{Duration, Instant};

/// `check` until it holds, for up to 30 s (a commit waits the store's 5 s busy timeout before
/// it fails, and a loaded machine may take a while more).
fn within_30s(mut check: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + Duration::from_secs(30);
    while Instant::now() < end {
        if check() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    check()
}

#[test]
fn readyz_is_503_while_the_embedded_store_refuses_writes_and_200_after() {
    let rules = Path::new(env!("CARGO_MANIFEST_DIR")).join("rules");
    let server = Server::start(&rules, &["--rate", "300", "--store-give-up", "300s"]);
    let ready = || {
        let r = server.get("/readyz").send().unwrap();
        status_and_json(r)
    };
    assert!(eventually(|| ready().0 == 200), "{:?}", ready());
    // Retries are being written (the demo's failures): the store has rows to take.
    let db = server.data.as_ref().unwrap().path().join("rebound.db");
    let blocker = rusqlite::Connection::open(&db).unwrap();
    blocker.execute_batch("BEGIN EXCLUSIVE").unwrap();
    assert!(
        within_30s(|| ready().0 == 503),
        "readyz stayed 200 with the store locked: {:?}",
        ready()
    );
    let (_, body) = ready();
    assert_eq!(body["store"], "unwritable", "{body}");
    assert!(
        body["since"].as_str().is_some_and(|s| s.ends_with('Z')),
        "{body}"
    );
    assert!(
        body["error"].as_str().is_some_and(|e| e.contains("locked")),
        "{body}"
    );
    blocker.execute_batch("ROLLBACK").unwrap();
    drop(blocker);
    assert!(
        within_30s(|| ready().0 == 200),
        "readyz stayed 503 after the lock went: {:?}",
        ready()
    );
}
