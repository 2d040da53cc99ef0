//! Redis: the stream, the pending list, the server's own counts.

#![allow(unused_imports)]

use super::*;
// Redis: the stream, the pending list, the server's own counts.

pub(crate) fn fill(server: &rebound_store_redis::TestServer, stream: &str, from: u64, n: u64) {
    let mut c = server.client();
    let mut pipe = redis::pipe();
    for i in from..from + n {
        pipe.cmd("XADD")
            .arg(stream)
            .arg("*")
            .arg("biz")
            .arg(BIZ)
            .arg("payload")
            .arg(format!("{{\"n\":{i}}}"))
            .ignore();
        if (i - from) % 1000 == 999 || i + 1 == from + n {
            pipe.query::<()>(&mut c).unwrap();
            pipe = redis::pipe();
        }
    }
}

pub(crate) fn pending(c: &mut redis::Connection, stream: &str) -> u64 {
    type Summary = (
        u64,
        Option<String>,
        Option<String>,
        Option<Vec<(String, String)>>,
    );
    redis::cmd("XPENDING")
        .arg(stream)
        .arg(GROUP)
        .query::<Summary>(c)
        .map_or(u64::MAX, |s| s.0)
}

/// `INFO commandstats`: calls by command.
pub(crate) fn command_calls(c: &mut redis::Connection) -> BTreeMap<String, u64> {
    let info: String = redis::cmd("INFO").arg("commandstats").query(c).unwrap();
    info.lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("cmdstat_")?;
            let (name, rest) = rest.split_once(':')?;
            let calls = rest
                .strip_prefix("calls=")?
                .split(',')
                .next()?
                .parse()
                .ok()?;
            Some((name.to_owned(), calls))
        })
        .collect()
}

/// The server's CPU seconds (user and system), from `INFO cpu`.
pub(crate) fn redis_cpu(c: &mut redis::Connection) -> f64 {
    let info: String = redis::cmd("INFO").arg("cpu").query(c).unwrap();
    info.lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(':')?;
            matches!(k, "used_cpu_sys" | "used_cpu_user")
                .then(|| v.trim().parse::<f64>().ok())
                .flatten()
        })
        .sum()
}

/// The round trips between two `INFO commandstats`, without the bench's own commands.
pub(crate) fn round_trips(
    before: &BTreeMap<String, u64>,
    after: &BTreeMap<String, u64>,
) -> (u64, String) {
    let mut total = 0;
    let mut each = Vec::new();
    for (name, calls) in after {
        if matches!(name.as_str(), "info" | "xpending" | "xadd") {
            continue;
        }
        let n = calls - before.get(name).copied().unwrap_or(0);
        if n > 0 {
            total += n;
            each.push(format!("{name} {n}"));
        }
    }
    (total, each.join(", "))
}
