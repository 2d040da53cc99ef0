//! The decision log on Redis, beyond the suite's cases: a log longer than one read's chunk
//! (5,000) read whole and through a limit across chunks, an entry written by hand that is not
//! `SEQ AT JSON` skipped (one numbered out of turn read), a read while another connection keeps appending and trimming (every
//! entry returned once, in the log's order), and a log of more decisions than one script call
//! takes (200) split over calls with one answer.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use rebound_runtime::store::conformance::records::*;
use rebound_runtime::store::*;

use super::{connect, fresh_namespace, fresh_store, server};

fn times(decisions: &[rebound_engine::release::LoggedDecision]) -> Vec<u64> {
    decisions.iter().map(|d| d.context.now_ms).collect()
}

#[test]
fn a_log_longer_than_a_chunk_reads_whole_and_through_a_limit_across_chunks() {
    let s = fresh_store("decisions-chunks");
    for batch in 0..12u64 {
        let entries = (batch * 1_000..(batch + 1) * 1_000)
            .map(|t| logged("m", t))
            .collect();
        assert_eq!(s.apply(&[log(entries, 11_000)]).unwrap(), [Applied::Done]);
    }
    assert_eq!(
        times(&decision_log(&s)),
        (1_000..12_000).collect::<Vec<_>>()
    );
    let newest = s
        .decisions(&DecisionFilter {
            since: None,
            limit: Some(7_500),
        })
        .unwrap();
    assert_eq!(times(&newest), (4_500..12_000).collect::<Vec<_>>());
    let since = s
        .decisions(&DecisionFilter {
            since: Some(ms(2_000)),
            limit: Some(6_000),
        })
        .unwrap();
    assert_eq!(times(&since), (6_000..12_000).collect::<Vec<_>>());
}

#[test]
fn an_entry_that_is_not_seq_at_json_is_skipped_and_the_rest_is_read() {
    let s = fresh_store("decisions-corrupt");
    s.apply(&[log(vec![logged("a", 10)], 10)]).unwrap();
    let mut conn = server().client();
    let key = s.keys().decisions();
    for bad in ["garbage", "99 11 {\"id\": 7}", "x 12 {}"] {
        let _: i64 = redis::cmd("RPUSH")
            .arg(&key)
            .arg(bad)
            .query(&mut conn)
            .unwrap();
    }
    // And one numbered out of turn (a seq key deleted without its list, say): still read.
    let misnumbered = format!("0 12 {}", decision_to_json(&logged("h", 12)).unwrap());
    let _: i64 = redis::cmd("RPUSH")
        .arg(&key)
        .arg(misnumbered)
        .query(&mut conn)
        .unwrap();
    s.apply(&[log(vec![logged("b", 13)], 10)]).unwrap();
    assert_eq!(
        decision_log(&s),
        [logged("a", 10), logged("h", 12), logged("b", 13)]
    );
}

#[test]
fn a_read_while_the_fleet_appends_and_trims_returns_each_entry_once_in_order() {
    let ns = fresh_namespace("decisions-live");
    let url = server().url();
    let reader = connect(&url, &ns);
    let writer = connect(&url, &ns);
    let fill = |from: u64| log((from..from + 500).map(|t| logged("m", t)).collect(), 20_000);
    let mut next = 0;
    while next < 20_000 {
        writer.apply(&[fill(next)]).unwrap();
        next += 500;
    }
    let stop = Arc::new(AtomicBool::new(false));
    let writing = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut next = next;
            while !stop.load(Ordering::Relaxed) {
                writer.apply(&[fill(next)]).unwrap();
                next += 500;
            }
            next
        })
    };
    for _ in 0..5 {
        let read = times(&decision_log(&reader));
        assert!(!read.is_empty());
        // The log's order is the order of `now_ms` here: strictly rising, so no entry twice
        // and none out of place, whatever moved between the read's chunks.
        assert!(
            read.windows(2).all(|w| w[0] < w[1]),
            "an entry read twice or out of order"
        );
        assert!(read.len() <= 20_000, "{} entries", read.len());
    }
    stop.store(true, Ordering::Relaxed);
    let end = writing.join().unwrap();
    // Once the writer stops, the log is exactly its newest 20,000.
    assert_eq!(
        times(&decision_log(&reader)),
        (end - 20_000..end).collect::<Vec<_>>()
    );
}

#[test]
fn a_log_of_more_decisions_than_a_call_takes_is_one_answer_over_several_calls() {
    let s = fresh_store("decisions-split");
    // 450 decisions between a schedule and an ack: three calls of at most 200 decisions,
    // four answers, the log trimmed to its newest 300 as one op would leave it.
    let ops = [
        schedule(retry("m1", 10)),
        log((0..450).map(|t| logged("m", t)).collect(), 300),
        acked("m1", 20),
    ];
    let before = s.round_trips();
    assert_eq!(s.apply(&ops).unwrap(), vec![Applied::Done; 3]);
    assert_eq!(s.round_trips() - before, 3);
    assert_eq!(times(&decision_log(&s)), (150..450).collect::<Vec<_>>());
    assert_eq!(fate(&s, "m1"), Some(Fate::Acked));
}
