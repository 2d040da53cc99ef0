//! The config-center pull client (feature `pull`): polls an HTTP endpoint that serves a rule
//! set as `{"files": {"NAME.yaml": "…"}}`, the body of `PUT /v1/rules`, and feeds what it
//! gets into the same pipeline as a push (source `pull`).
//!
//! - `ETag`/`If-None-Match`: the client sends back the last `ETag` it saw; a `304 Not
//!   Modified` means no change. A rejected set is not fetched again until its `ETag`
//!   changes, so its errors are logged once. Without `ETag`s, a set is fetched on every poll,
//!   and one identical to the last rejected set is not tried (nor logged, nor recorded) again.
//! - Long polls: the request timeout is generous (default 90 s), so a server may hold the
//!   request until something changes (Consul's blocking queries, Nacos' and Apollo's long
//!   polling). The next poll starts `interval` after the previous one *started*: a server
//!   that answers at once is polled every `interval`, one that holds is polled again at once.
//! - Errors (connection refused, a 5xx, a body that is not the expected JSON) back off
//!   exponentially up to `max_backoff`, and the next success resets the backoff.
//!
//! Plain HTTP only: TLS is not built in. Put a TLS-terminating proxy in front of a remote
//! config center, or reach it over a trusted network.

use super::reloader::{PushError, Reloader};
use crate::backoff::Doubling;
use crate::handle::Source;
use std::collections::BTreeMap;
use std::io::Read;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The largest body accepted from the config center, as for a push.
pub const MAX_BODY: u64 = 4 * 1024 * 1024;

/// How often and how patiently to poll.
#[derive(Debug, Clone, Copy)]
pub struct PullOptions {
    /// Time between the starts of two polls when the server answers at once (default 5 s).
    pub interval: Duration,
    /// How long one request may take, a held long poll included (default 90 s).
    pub timeout: Duration,
    /// The first wait after an error; it doubles with each further error (default 1 s).
    pub min_backoff: Duration,
    /// The longest wait after errors (default 60 s).
    pub max_backoff: Duration,
}

impl Default for PullOptions {
    fn default() -> Self {
        PullOptions {
            interval: Duration::from_secs(5),
            timeout: Duration::from_secs(90),
            min_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(60),
        }
    }
}

/// Why the pull client did not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PullError {
    /// The URL does not parse.
    #[error("invalid rules URL '{url}': {reason}")]
    BadUrl {
        /// The URL as given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The thread could not be started.
    #[error("cannot start the pull client: {0}")]
    Spawn(#[from] std::io::Error),
}

/// The body the config center serves.
#[derive(serde::Deserialize)]
struct PulledSet {
    files: BTreeMap<String, String>,
}

/// What one poll brought.
enum Polled {
    NotModified,
    Set {
        files: BTreeMap<String, String>,
        etag: Option<String>,
    },
}

/// A running pull client; it stops when dropped or [`stop`](Self::stop)ped.
///
/// Stopping does not wait for a request in flight (a held long poll may take a while); the
/// thread ends as soon as that request returns.
#[derive(Debug)]
pub struct Puller {
    stop: Arc<(Mutex<bool>, Condvar)>,
    thread: Option<JoinHandle<()>>,
}

impl Puller {
    /// Starts polling `url` and pushing what it serves into `reloader`.
    pub fn spawn(
        reloader: Arc<Reloader>,
        url: &str,
        options: PullOptions,
    ) -> Result<Puller, PullError> {
        let parsed = reqwest::Url::parse(url).map_err(|e| PullError::BadUrl {
            url: url.to_string(),
            reason: e.to_string(),
        })?;
        if parsed.scheme() != "http" {
            return Err(PullError::BadUrl {
                url: url.to_string(),
                reason: "only http:// is supported (TLS is not built in; put a \
                         TLS-terminating proxy in front of the config center)"
                    .to_string(),
            });
        }
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let flag = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("rebound-pull".into())
            .spawn(move || pull_loop(&reloader, parsed, options, &flag))?;
        tracing::info!(url, "pulling rule sets");
        Ok(Puller {
            stop,
            thread: Some(thread),
        })
    }

    /// Stops polling.
    pub fn stop(mut self) {
        self.signal_stop();
    }

    fn signal_stop(&mut self) {
        let (flag, wake) = &*self.stop;
        *flag.lock().unwrap_or_else(PoisonError::into_inner) = true;
        wake.notify_all();
        if let Some(thread) = self.thread.take()
            && thread.is_finished()
        {
            let _ = thread.join();
        }
    }
}

impl Drop for Puller {
    fn drop(&mut self) {
        self.signal_stop();
    }
}

fn pull_loop(
    reloader: &Reloader,
    url: reqwest::Url,
    options: PullOptions,
    stop: &(Mutex<bool>, Condvar),
) {
    let client = match reqwest::blocking::Client::builder()
        .timeout(options.timeout)
        .build()
    {
        Ok(c) => c,
        Err(e) => {
            tracing::error!("cannot build the HTTP client for pulling rule sets: {e}");
            return;
        }
    };
    let mut etag: Option<String> = None;
    let mut rejected: Option<BTreeMap<String, String>> = None;
    let mut failures: u32 = 0;
    loop {
        let started = Instant::now();
        let wait = match poll(&client, &url, etag.as_deref()) {
            Ok(Polled::NotModified) => {
                failures = 0;
                tracing::debug!(%url, "rule set not modified");
                next_poll(started, options.interval)
            }
            Ok(Polled::Set { files, etag: tag }) => {
                failures = 0;
                if rejected.as_ref() == Some(&files) {
                    tracing::debug!(%url, "the pulled rule set is the one rejected last; not tried again");
                    etag = tag;
                    let wait = next_poll(started, options.interval);
                    if sleep_or_stop(stop, wait) {
                        return;
                    }
                    continue;
                }
                match reloader.push(files.clone(), None, Source::Pull) {
                    Ok(_) => {
                        rejected = None;
                        etag = tag;
                    }
                    Err(PushError::Rejected(_) | PushError::BadName(_) | PushError::Empty) => {
                        // Refused and logged by the pipeline: do not try this very set again.
                        rejected = Some(files);
                        etag = tag;
                    }
                    Err(e) => tracing::warn!(%url, "pulled rule set not applied: {e}"),
                }
                next_poll(started, options.interval)
            }
            Err(e) => {
                failures = failures.saturating_add(1);
                let wait = backoff(failures, options);
                tracing::warn!(%url, retry_in = ?wait, "pulling the rule set failed: {e}");
                wait
            }
        };
        if sleep_or_stop(stop, wait) {
            return;
        }
    }
}

/// One request: `304` → not modified; `200` → the set and its `ETag`; anything else is an
/// error.
fn poll(
    client: &reqwest::blocking::Client,
    url: &reqwest::Url,
    etag: Option<&str>,
) -> Result<Polled, String> {
    let mut request = client
        .get(url.clone())
        .header(reqwest::header::ACCEPT, "application/json");
    if let Some(tag) = etag {
        request = request.header(reqwest::header::IF_NONE_MATCH, tag);
    }
    let response = request.send().map_err(|e| e.to_string())?;
    let status = response.status();
    if status == reqwest::StatusCode::NOT_MODIFIED {
        return Ok(Polled::NotModified);
    }
    if !status.is_success() {
        return Err(format!("the server answered {status}"));
    }
    let tag = response
        .headers()
        .get(reqwest::header::ETAG)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let mut body = Vec::new();
    response
        .take(MAX_BODY + 1)
        .read_to_end(&mut body)
        .map_err(|e| format!("reading the body: {e}"))?;
    if body.len() as u64 > MAX_BODY {
        return Err(format!("the body is larger than {MAX_BODY} bytes"));
    }
    let set: PulledSet = serde_json::from_slice(&body)
        .map_err(|e| format!("the body is not a rule set {{\"files\": {{…}}}}: {e}"))?;
    Ok(Polled::Set {
        files: set.files,
        etag: tag,
    })
}

/// The wait until the next poll: `interval` after the previous one started.
fn next_poll(started: Instant, interval: Duration) -> Duration {
    interval.saturating_sub(started.elapsed())
}

/// `min_backoff · 2^(failures−1)`, capped at `max_backoff`.
fn backoff(failures: u32, options: PullOptions) -> Duration {
    Doubling::new(options.min_backoff, options.max_backoff).after(failures.max(1))
}

/// Sleeps for `wait` unless told to stop first; true when stopped.
fn sleep_or_stop(stop: &(Mutex<bool>, Condvar), wait: Duration) -> bool {
    let (flag, wake) = stop;
    let deadline = Instant::now() + wait;
    let mut stopped = flag.lock().unwrap_or_else(PoisonError::into_inner);
    while !*stopped {
        let now = Instant::now();
        if now >= deadline {
            return false;
        }
        stopped = wake
            .wait_timeout(stopped, deadline - now)
            .unwrap_or_else(PoisonError::into_inner)
            .0;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        let o = PullOptions::default();
        let waits: Vec<u64> = (1..=8).map(|f| backoff(f, o).as_secs()).collect();
        assert_eq!(waits, [1, 2, 4, 8, 16, 32, 60, 60]);
        assert_eq!(backoff(u32::MAX, o), o.max_backoff);
    }

    #[test]
    fn a_held_poll_is_followed_at_once() {
        let started = Instant::now() - Duration::from_secs(30);
        assert_eq!(next_poll(started, Duration::from_secs(5)), Duration::ZERO);
    }
}
