//! A fleet of `rebound relay` nodes on one Redis stream and `--store redis` (sources.md, "A
//! fleet"): the consumer group divides the stream, the shared store divides the retries.
//! Nodes are killed with SIGKILL three times and the handler's server once, mid-run; every
//! message written to the stream ends acked by the handler or dead-lettered, exactly, and
//! nothing is left pending at the broker.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use rebound_store_redis::TestServer;

use super::redis_stream::rules_dir_with;
use super::support::{
    Answer, HandlerServer, Received, Relay, Release, n_of, pending, within, xadd,
};

/// The stream tests' rules, and a handler that does not answer is tried again and again (its
/// outage is waited out).
const HANDLER_DOWN: &str = "  - id: handler-down
    match: { code: [HANDLER_UNAVAILABLE, HANDLER_TIMEOUT] }
    retry: { max_retries: 1000, backoff: { fixed: 200ms } }
    dead_letter: L2
";

const MESSAGES: usize = 600;

#[test]
fn three_relays_lose_nothing_across_kills_of_nodes_and_of_the_handler() {
    let server = TestServer::start_with(&["--appendonly", "yes"]);
    xadd(&server, "orders", 0..MESSAGES, |_| Vec::new());
    // The test releases the stream in quarters: a message past what is released waits (a
    // failure the rules retry, its retry in the shared store), so each kill comes mid-run
    // however fast the rest goes. Every 50th is declined.
    let released = Release::upto(0);
    let mut handler = HandlerServer::start(released.answer(|r| {
        if n_of(r) % 50 == 7 {
            Answer::code(422, "PAY_FAILED")
        } else {
            Answer::ok().after(Duration::from_millis(5))
        }
    }));
    let rules = rules_dir_with(HANDLER_DOWN);
    let source = format!(
        "redis-stream://127.0.0.1:{}/orders?group=rebound",
        server.port()
    );
    let store = server.url();
    let url = handler.url();
    let start = |name: &str| {
        let data = tempfile::tempdir().unwrap();
        let relay = Relay::start(
            rules.path(),
            data.path(),
            &[
                "--source",
                &source,
                "--handler",
                &url,
                "--store",
                &store,
                "--node",
                name,
                "--lease",
                "1s",
            ],
        );
        (relay, data)
    };
    let mut nodes: Vec<_> = ["a", "b", "c"].iter().map(|n| start(n)).collect();
    let answered = |handler: &HandlerServer| {
        let done: BTreeSet<usize> = handler
            .received()
            .iter()
            .filter(|r| r.status != 503)
            .map(n_of)
            .collect();
        done.len()
    };
    // Release another quarter, and once a sixth more of the stream has been answered, kill a
    // node and start a new one in its place; the handler's server goes down for a while once.
    for (round, name) in ["a2", "b2", "c2"].iter().enumerate() {
        released.to((round + 1) * MESSAGES / 4);
        let goal = (round + 1) * MESSAGES / 6;
        assert!(
            within(Duration::from_secs(30), || answered(&handler) >= goal),
            "round {round}: the handler answered {} of {goal}\n{}",
            answered(&handler),
            nodes[0].0.stderr()
        );
        let (victim, _data) = nodes.remove(0);
        victim.kill9();
        if round == 1 {
            handler.stop();
            std::thread::sleep(Duration::from_millis(500));
            handler.restart();
        }
        nodes.push(start(name));
    }
    released.to(usize::MAX);
    let declined: BTreeSet<usize> = (0..MESSAGES).filter(|n| n % 50 == 7).collect();
    let ok = |r: &Received| r.status == 200;
    let acked = || -> BTreeSet<usize> {
        handler
            .received()
            .iter()
            .filter(|r| ok(r))
            .map(n_of)
            .collect()
    };
    let letters = || nodes[0].0.get_json("/v1/dead-letters?limit=1000");
    let lettered = || -> BTreeSet<usize> {
        letters()["dead_letters"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .iter()
            .filter_map(|l| l["id"].as_str().map(str::to_owned))
            .filter_map(|id| {
                let handled = handler.received();
                handled
                    .iter()
                    .find(|r| r.header("rebound-message-id") == id)
                    .map(n_of)
            })
            .collect()
    };
    let all_acked: BTreeSet<usize> = (0..MESSAGES).filter(|n| !declined.contains(n)).collect();
    assert!(
        within(Duration::from_secs(60), || {
            acked() == all_acked
                && pending(&server, "orders", "rebound") == 0
                && lettered() == declined
        }),
        "acked {} of {}, {} pending, letters {:?} of {declined:?}\n{}",
        acked().len(),
        all_acked.len(),
        pending(&server, "orders", "rebound"),
        lettered(),
        nodes[0].0.stderr()
    );
    // Exactly: one letter for each declined message, none for any other.
    assert_eq!(letters()["total"], declined.len(), "{}", letters());
    // A message the handler saw more than once carried the same Idempotency-Key each time.
    let mut keys: BTreeMap<usize, BTreeSet<String>> = BTreeMap::new();
    for r in handler.received() {
        keys.entry(n_of(&r))
            .or_default()
            .insert(r.header("idempotency-key").to_owned());
    }
    assert!(keys.values().all(|k| k.len() == 1));
    // Once every message has its fate, no more come.
    let settled = handler.received().len();
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(
        handler.received().len(),
        settled,
        "requests after every fate"
    );
    let nodes_listed = nodes[0].0.get_json("/v1/nodes");
    // The stream is on the store's server: the store sent the custody acks of retries and
    // dead letters in the scripts that wrote them.
    let says = nodes[0].0.stderr();
    assert!(says.contains("custody_acks_by_store=true"), "{says}");
    for (relay, _) in nodes {
        let (status, _, stderr) = relay.terminate();
        assert!(status.success(), "{status}\n{stderr}");
    }
    assert!(nodes_listed.to_string().contains("a2"), "{nodes_listed}");
}
