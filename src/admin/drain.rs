//! Reading the rest of a request body that was answered before it was read.
//!
//! A request can be answered before its body has all been read: 413 past the limit, 401
//! before the body is looked at, 404. hyper then closes the connection, and closing a socket
//! while received bytes are still unread makes the kernel send a reset. A client that is
//! still sending gets `EPIPE` or `ECONNRESET`, and most (curl, Python's `http.client`) report
//! that instead of reading the answer that is waiting for them.
//!
//! [`drain_unread`] is a layer around every route. It gives the handler the body in a
//! wrapper that, when dropped unfinished, hands the rest back. Before the answer goes out,
//! the layer reads that rest and throws it away, up to [`DRAIN_LIMIT`] bytes and for at most
//! [`DRAIN_TIME`], so the client finishes sending and then reads its answer, and the
//! connection can even be kept alive. A body past those bounds is not worth reading: the
//! connection is closed as before.
//!
//! A client that sent `Expect: 100-continue` waits to be asked for its body. When nothing of
//! it was read, it has not sent it, and it is not asked to now: the answer goes out at once.

use axum::body::{Body, Bytes, HttpBody};
use axum::extract::Request;
use axum::http::header;
use axum::middleware::Next;
use axum::response::Response;
use http_body::{Frame, SizeHint};
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

/// The most of an unread body that is read and thrown away: 64 MiB.
pub const DRAIN_LIMIT: u64 = 64 * 1024 * 1024;

/// The longest time spent reading an unread body.
pub const DRAIN_TIME: Duration = Duration::from_secs(5);

/// The layer: answers only once the request's body has been read to its end (or past the
/// bounds above).
pub async fn drain_unread(req: Request, next: Next) -> Response {
    let waits_for_continue = req
        .headers()
        .get(header::EXPECT)
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"));
    let left = Arc::new(Mutex::new(None));
    let req = req.map(|body| {
        Body::new(Tracked {
            body: Some(body),
            polled: false,
            ended: false,
            left: Arc::clone(&left),
        })
    });
    let response = next.run(req).await;
    let unread = left.lock().unwrap_or_else(PoisonError::into_inner).take();
    if let Some(Unread { body, polled }) = unread
        && (polled || !waits_for_continue)
    {
        discard(body).await;
    }
    response
}

/// What a handler left of a body.
struct Unread {
    body: Body,
    /// Whether any of it was asked for (after which a `100-continue` client sends it all).
    polled: bool,
}

/// The request body as the handler sees it; the unread rest goes to `left` when dropped.
struct Tracked {
    body: Option<Body>,
    polled: bool,
    ended: bool,
    left: Arc<Mutex<Option<Unread>>>,
}

impl HttpBody for Tracked {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let this = self.get_mut();
        let Some(body) = this.body.as_mut() else {
            return Poll::Ready(None);
        };
        this.polled = true;
        let frame = Pin::new(body).poll_frame(cx);
        if let Poll::Ready(None | Some(Err(_))) = frame {
            // The end, or a broken connection: nothing left worth reading either way.
            this.ended = true;
        }
        frame
    }

    fn is_end_stream(&self) -> bool {
        self.ended || self.body.as_ref().is_none_or(Body::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        self.body
            .as_ref()
            .map_or_else(|| SizeHint::with_exact(0), Body::size_hint)
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        if let Some(body) = self.body.take()
            && !self.ended
            && !body.is_end_stream()
        {
            let unread = Unread {
                body,
                polled: self.polled,
            };
            *self.left.lock().unwrap_or_else(PoisonError::into_inner) = Some(unread);
        }
    }
}

/// Reads `body` to its end and throws it away, within the bounds.
async fn discard(mut body: Body) {
    // A declared length past the limit would be read in vain.
    if body.size_hint().lower() > DRAIN_LIMIT {
        return;
    }
    let read_all = async {
        let mut read: u64 = 0;
        while let Some(Ok(frame)) =
            std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await
        {
            if let Some(data) = frame.data_ref() {
                read = read.saturating_add(data.len() as u64);
                if read > DRAIN_LIMIT {
                    return;
                }
            }
        }
    };
    let _ = tokio::time::timeout(DRAIN_TIME, read_all).await;
}
