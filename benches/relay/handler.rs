//! The handler: a no-op HTTP server in this process, counting what it answers.

#![allow(unused_imports)]

use super::*;
// The handler: a no-op HTTP server in this process.

/// What the handler saw in the current run.
#[derive(Default)]
pub(crate) struct Seen {
    /// Answered 200.
    pub(crate) ok: AtomicU64,
    /// Answered 503.
    pub(crate) failed: AtomicU64,
    /// Fail every tenth message's first attempt.
    pub(crate) fail_tenth: AtomicBool,
    pub(crate) first: Mutex<Option<Instant>>,
}

impl Seen {
    pub(crate) fn reset(&self, fail_tenth: bool) {
        self.ok.store(0, Relaxed);
        self.failed.store(0, Relaxed);
        self.fail_tenth.store(fail_tenth, Relaxed);
        *self.first.lock().unwrap() = None;
    }

    pub(crate) fn first(&self) -> Option<Instant> {
        *self.first.lock().unwrap()
    }
}

/// The `n` of a payload `{"n":N}`.
pub(crate) fn payload_n(body: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(body).ok()?;
    let rest = &text[text.find("\"n\":")? + 4..];
    let end = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    rest[..end].parse().ok()
}

pub(crate) async fn answer(
    seen: &Seen,
    headers: HeaderMap,
    body: Bytes,
) -> (StatusCode, &'static str) {
    {
        let mut first = seen.first.lock().unwrap();
        if first.is_none() {
            *first = Some(Instant::now());
        }
    }
    if seen.fail_tenth.load(Relaxed) {
        let attempt = headers
            .get("rebound-attempt")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("1");
        if attempt == "1" && payload_n(&body).is_some_and(|n| n % 10 == 9) {
            seen.failed.fetch_add(1, Relaxed);
            return (
                StatusCode::SERVICE_UNAVAILABLE,
                r#"{"code":"PAY_PROCESSING","message":"still processing"}"#,
            );
        }
    }
    seen.ok.fetch_add(1, Relaxed);
    (StatusCode::OK, "")
}

/// Starts the handler on a runtime of its own (two workers); its URL.
pub(crate) fn start_handler(seen: Arc<Seen>) -> String {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("handler")
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(listener.local_addr().unwrap()).unwrap();
            let app = axum::Router::new().fallback(move |headers: HeaderMap, body: Bytes| {
                let seen = seen.clone();
                async move { answer(&seen, headers, body).await }
            });
            axum::serve(listener, app).await.unwrap();
        });
    });
    let addr = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    format!("http://{addr}/orders")
}
