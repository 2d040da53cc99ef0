//! One timed run of the relay or of the hand loop.

#![allow(unused_imports)]

use super::*;
// One timed run.

pub(crate) struct Run {
    pub(crate) rate: f64,
    pub(crate) took: Duration,
    pub(crate) trips: u64,
    pub(crate) trips_each: String,
    pub(crate) cpu: Cpu,
}

/// Waits until the handler answered `n` with 200 and `stream`'s group holds nothing pending;
/// the time since the handler's first request.
pub(crate) fn wait_done(
    server: &rebound_store_redis::TestServer,
    seen: &Seen,
    stream: &str,
    n: u64,
) -> Duration {
    let mut c = server.client();
    let end = Instant::now() + Duration::from_secs(600);
    loop {
        assert!(Instant::now() < end, "{stream}: not done in 10 minutes");
        if seen.ok.load(Relaxed) >= n && pending(&mut c, stream) == 0 {
            let done = Instant::now();
            return done - seen.first().expect("the handler saw a request");
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

pub(crate) fn relay_run(
    server: &rebound_store_redis::TestServer,
    seen: &Seen,
    handler: &str,
    stream: &str,
    n: u64,
    fail_tenth: bool,
) -> (Run, String, String) {
    fill(server, stream, 0, n);
    seen.reset(fail_tenth);
    let mut c = server.client();
    let calls = command_calls(&mut c);
    let relay = Relay::start(server.port(), stream, handler);
    let cpu = Cpu::now(Some(relay.pid()), &mut c);
    let took = wait_done(server, seen, stream, n);
    let cpu = Cpu::now(Some(relay.pid()), &mut c).since(cpu);
    let (trips, trips_each) = round_trips(&calls, &command_calls(&mut c));
    let metrics = reqwest::blocking::get(format!("{}/metrics", relay.admin))
        .and_then(|r| r.text())
        .unwrap_or_default();
    let report = relay.stop();
    let run = Run {
        rate: n as f64 / took.as_secs_f64(),
        took,
        trips,
        trips_each,
        cpu,
    };
    (run, metrics, report)
}

pub(crate) fn hand_run(
    rt: &tokio::runtime::Runtime,
    server: &rebound_store_redis::TestServer,
    seen: &Seen,
    handler: &str,
    stream: &str,
    n: u64,
) -> Run {
    fill(server, stream, 0, n);
    seen.reset(false);
    let mut c = server.client();
    let calls = command_calls(&mut c);
    let cpu = Cpu::now(None, &mut c);
    let task = rt.spawn(hand_loop(
        server.url(),
        stream.to_owned(),
        n,
        handler.to_owned(),
    ));
    let took = wait_done(server, seen, stream, n);
    rt.block_on(task).unwrap();
    let cpu = Cpu::now(None, &mut c).since(cpu);
    let (trips, trips_each) = round_trips(&calls, &command_calls(&mut c));
    Run {
        rate: n as f64 / took.as_secs_f64(),
        took,
        trips,
        trips_each,
        cpu,
    }
}

pub(crate) fn print_run(what: &str, run: &Run, n: u64) {
    println!(
        "  {what}: {n} in {:.3} s = {:.0}/s; Redis round trips {:.3}/message ({}); CPU s: relay {:.2}, redis {:.2}, bench process {:.2}",
        run.took.as_secs_f64(),
        run.rate,
        run.trips as f64 / n as f64,
        run.trips_each,
        run.cpu.relay,
        run.cpu.redis,
        run.cpu.bench,
    );
}
