//! The handler latency from the relay's /metrics histogram, and the steady run.

#![allow(unused_imports)]

use super::*;
// The histogram in /metrics.

/// `rebound_handler_seconds`' buckets: (upper bound, cumulative count).
pub(crate) fn buckets(metrics: &str) -> Vec<(f64, u64)> {
    metrics
        .lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("rebound_handler_seconds_bucket{le=\"")?;
            let (le, rest) = rest.split_once("\"}")?;
            let le = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().ok()?
            };
            Some((le, rest.trim().parse().ok()?))
        })
        .collect()
}

/// The `q` quantile of cumulative `buckets`, interpolated within its bucket as Prometheus's
/// `histogram_quantile` does.
pub(crate) fn quantile(buckets: &[(f64, u64)], q: f64) -> Option<f64> {
    let total = buckets.last()?.1;
    if total == 0 {
        return None;
    }
    let rank = q * total as f64;
    let (mut lower, mut below) = (0.0, 0);
    for &(le, count) in buckets {
        if count as f64 >= rank {
            if le.is_infinite() {
                return Some(lower);
            }
            let within = (count - below).max(1) as f64;
            return Some(lower + (le - lower) * (rank - below as f64) / within);
        }
        (lower, below) = (le, count);
    }
    Some(lower)
}

pub(crate) fn steady(
    server: &rebound_store_redis::TestServer,
    seen: &Seen,
    handler: &str,
    secs: u64,
) {
    let rate = env_u64("BENCH_STEADY_RATE", 2_000);
    let stream = "steady";
    fill(server, stream, 0, 1);
    seen.reset(true);
    // `source.fates_keep` (default 1 h): how long a retried message's acked fate is kept.
    let keep = std::env::var("BENCH_STEADY_FATES_KEEP").ok();
    let config = keep
        .as_ref()
        .map(|keep| format!("source:\n  fates_keep: {keep}\n"));
    let relay = Relay::start_with(server.port(), stream, handler, config.as_deref());
    let every = env_u64("BENCH_STEADY_PRINT_SECS", 60).max(1);
    println!(
        "steady: {rate}/s for {secs} s (every tenth message fails once), fates kept {}, relay pid {}, load {}",
        keep.as_deref().unwrap_or("1h"),
        relay.pid(),
        load()
    );
    let start = Instant::now();
    let mut added = 1;
    let mut next_print = every;
    let tick = Duration::from_millis(100);
    let mut c = server.client();
    while start.elapsed().as_secs() < secs {
        let due = (start.elapsed().as_secs_f64() * rate as f64) as u64 + 1;
        if due > added {
            let mut pipe = redis::pipe();
            for i in added..due {
                pipe.cmd("XADD")
                    .arg(stream)
                    .arg("*")
                    .arg("biz")
                    .arg(BIZ)
                    .arg("payload")
                    .arg(format!("{{\"n\":{i}}}"))
                    .ignore();
            }
            pipe.query::<()>(&mut c).unwrap();
            added = due;
        }
        let elapsed = start.elapsed().as_secs();
        if elapsed >= next_print {
            println!(
                "  {:>4} s: RSS {} KiB, data directory {} KiB, added {added}, answered 200 {}, pending {}",
                elapsed,
                rss_kib(relay.pid()),
                dir_bytes(relay.data.path()) / 1024,
                seen.ok.load(Relaxed),
                pending(&mut c, stream),
            );
            next_print += every;
        }
        std::thread::sleep(tick);
    }
    let end = Instant::now() + Duration::from_secs(30);
    while seen.ok.load(Relaxed) < added && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(10));
    }
    println!(
        "  end ({} s): RSS {} KiB, data directory {} KiB, added {added}, answered 200 {}, pending {}, load {}",
        start.elapsed().as_secs(),
        rss_kib(relay.pid()),
        dir_bytes(relay.data.path()) / 1024,
        seen.ok.load(Relaxed),
        pending(&mut c, stream),
        load()
    );
    relay.stop();
}
