//! The admin API's connections, each bounded (`docs/spec/operations.md`, "The admin API at
//! its edges"): at most [`Edges::max_connections`] open at once (the next is closed as soon
//! as it is accepted), headers within [`Edges::header_timeout`], a body within
//! [`Edges::body_timeout`] (`TimedBody`: past it the body reads as an error, the route
//! answers and the connection closes), and a keep-alive connection with no request in flight
//! closed after [`Edges::idle_timeout`].
//!
//! hyper's own `header_read_timeout` runs whenever the connection waits for a head, so it
//! would close an idle keep-alive connection at the header bound too. The two are told apart
//! here instead: the socket is `Watched`, and bytes read while no request is in flight
//! start the header clock; a new connection's clock starts when it opens; a connection that
//! has been answered and sent nothing since is idle.
//!
//! An accept that fails for want of file descriptors (`EMFILE`, `ENFILE`) is retried after a
//! pause rather than ending the server: the descriptors come back as connections close.
//!
//! On shutdown the listener stops accepting, every connection is asked to finish the
//! request in flight and close, and [`serve_connections`] returns when all have (each holds a
//! permit of the one semaphore, so all permits back means all closed).

use super::edges::Edges;
use axum::Router;
use axum::body::{Body, Bytes, HttpBody};
use axum::extract::Request;
use http_body::Frame;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::{Semaphore, watch};
use tokio::time::{Instant, Sleep};

/// Accepts and serves connections on `listener` until `shutdown` completes, then waits for
/// the open ones to finish.
pub async fn serve_connections(
    listener: tokio::net::TcpListener,
    router: Router,
    edges: Edges,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let limit = edges.max_connections.clamp(1, Semaphore::MAX_PERMITS);
    let open = Arc::new(Semaphore::new(limit));
    let (stop, stopping) = watch::channel(false);
    tokio::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => accepted,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(e) if out_of_descriptors(&e) => {
                tracing::warn!(error = %e, "the admin API cannot accept a connection: out of file descriptors; retrying");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
            // A connection reset before it was accepted, and the like: that one only.
            Err(_) => continue,
        };
        let Ok(permit) = Arc::clone(&open).try_acquire_owned() else {
            // Refused at once: closed without a word rather than queued.
            drop(stream);
            continue;
        };
        let router = router.clone();
        let edges = edges.clone();
        let stopping = stopping.clone();
        tokio::spawn(async move {
            serve_one(stream, router, &edges, stopping).await;
            drop(permit);
        });
    }
    drop(listener);
    let _ = stop.send(true);
    // Every connection gives its permit back when it closes.
    let _ = open.acquire_many(limit as u32).await;
    Ok(())
}

fn out_of_descriptors(e: &std::io::Error) -> bool {
    // EMFILE (24) and ENFILE (23) on Linux and macOS alike.
    matches!(e.raw_os_error(), Some(23 | 24))
}

/// Serves one connection within its bounds.
async fn serve_one(
    stream: tokio::net::TcpStream,
    router: Router,
    edges: &Edges,
    mut stopping: watch::Receiver<bool>,
) {
    let activity = Arc::new(Activity::default());
    let body_timeout = edges.body_timeout;
    let tracked = Arc::clone(&activity);
    let service = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
        // In flight until both the request's body and the answer's are done with.
        let in_flight = Arc::new(tracked.start());
        let guard = Arc::clone(&in_flight);
        let req = req.map(|body| Body::new(TimedBody::new(body, body_timeout, guard)));
        let router = router.clone();
        async move {
            let response = tower::ServiceExt::oneshot(router, req).await?;
            Ok::<_, std::convert::Infallible>(response.map(|body| {
                Body::new(Answer {
                    body,
                    _in_flight: in_flight,
                })
            }))
        }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(None)
        .keep_alive(true);
    let io = TokioIo::new(Watched {
        inner: stream,
        activity: Arc::clone(&activity),
    });
    let conn = builder.serve_connection(io, service);
    tokio::pin!(conn);
    let mut closing = false;
    loop {
        let close_at = activity.close_at(edges);
        tokio::select! {
            _ = conn.as_mut() => return,
            () = sleep_until_some(close_at) => {
                if activity.close_at(edges).is_some_and(|at| at <= Instant::now()) {
                    // Nothing in flight: a half-sent head or an idle connection, dropped.
                    return;
                }
            }
            changed = stopping.changed(), if !closing => {
                if changed.is_err() || *stopping.borrow() {
                    conn.as_mut().graceful_shutdown();
                    closing = true;
                }
            }
        }
    }
}

async fn sleep_until_some(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// What a connection is doing: requests in flight, and what it waits for otherwise.
#[derive(Debug)]
struct Activity {
    in_flight: AtomicUsize,
    wait: Mutex<Wait>,
}

/// What a connection with no request in flight waits for, and since when.
#[derive(Clone, Copy, Debug)]
enum Wait {
    /// A head: the connection is new, or sent bytes of one (the header bound).
    Head(Instant),
    /// Anything: it was answered and has sent nothing since (the idle bound).
    Idle(Instant),
}

impl Default for Activity {
    fn default() -> Self {
        Activity {
            in_flight: AtomicUsize::new(0),
            wait: Mutex::new(Wait::Head(Instant::now())),
        }
    }
}

impl Activity {
    fn start(self: &Arc<Self>) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        InFlight(Arc::clone(self))
    }

    fn wait(&self) -> std::sync::MutexGuard<'_, Wait> {
        self.wait.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Bytes came in: with no request in flight, the next head has begun.
    fn read_some(&self) {
        if self.in_flight.load(Ordering::SeqCst) == 0 {
            let mut wait = self.wait();
            if let Wait::Idle(_) = *wait {
                *wait = Wait::Head(Instant::now());
            }
        }
    }

    /// When the connection is to be closed, unless something happens first; `None` while a
    /// request is in flight (its body has its own bound).
    fn close_at(&self, edges: &Edges) -> Option<Instant> {
        if self.in_flight.load(Ordering::SeqCst) > 0 {
            return None;
        }
        Some(match *self.wait() {
            Wait::Head(since) => since + edges.header_timeout,
            Wait::Idle(since) => since + edges.idle_timeout,
        })
    }
}

/// A request in flight; it ends when its body and its answer's are both dropped.
#[derive(Debug)]
struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        *self.0.wait() = Wait::Idle(Instant::now());
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The socket, telling [`Activity`] when bytes come in.
struct Watched {
    inner: tokio::net::TcpStream,
    activity: Arc<Activity>,
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let read = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(read, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.activity.read_some();
        }
        read
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, data)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// Why a body read failed: it did not arrive in time.
#[derive(Debug, thiserror::Error)]
#[error("the request body did not arrive within {0:?}")]
pub struct BodyTimedOut(pub Duration);

/// A request body that must arrive by a deadline: past it, reading it is an error.
struct TimedBody {
    body: hyper::body::Incoming,
    deadline: Pin<Box<Sleep>>,
    timeout: Duration,
    _in_flight: Arc<InFlight>,
}

impl TimedBody {
    fn new(body: hyper::body::Incoming, timeout: Duration, in_flight: Arc<InFlight>) -> Self {
        TimedBody {
            body,
            deadline: Box::pin(tokio::time::sleep(timeout)),
            timeout,
            _in_flight: in_flight,
        }
    }
}

impl HttpBody for TimedBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let this = &mut *self;
        match Pin::new(&mut this.body).poll_frame(cx) {
            Poll::Ready(frame) => Poll::Ready(frame.map(|f| f.map_err(axum::Error::new))),
            Poll::Pending => match this.deadline.as_mut().poll(cx) {
                Poll::Ready(()) => {
                    Poll::Ready(Some(Err(axum::Error::new(BodyTimedOut(this.timeout)))))
                }
                Poll::Pending => Poll::Pending,
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

/// An answer's body, keeping its request in flight until it has been sent.
struct Answer {
    body: Body,
    _in_flight: Arc<InFlight>,
}

impl HttpBody for Answer {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}
