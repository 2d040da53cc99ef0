//! The product's one HTTP(S) client out: what the relay's handler and the alert webhooks send
//! their requests with.
//!
//! A [`client`] is reqwest over rustls with the ring provider, HTTP/1.1 with keep-alive (one
//! pool per client), no redirects followed (a `3xx` is an answer like any other) and no proxy
//! taken from the environment. Its TLS roots are the system's (read once per process) or,
//! when a CA file is given, that PEM file's certificates and nothing else (`tls.rs`). It
//! imports no other module of the product.
//!
//! Also here, because both callers need them: [`read_at_most`], a body read that stops at a
//! bound instead of buffering whatever a server sends, and [`cause`], an error's whole
//! `source()` chain on one line (so that a TLS error says what was wrong with the certificate,
//! not only "error sending request").

mod tls;

pub use tls::roots_from_file;

use bytes::{Bytes, BytesMut};
use std::path::{Path, PathBuf};

/// Why a client could not be built.
#[derive(Debug, thiserror::Error)]
pub enum OutboundError {
    /// The CA file cannot be read, holds no certificate, or holds one that is not usable.
    #[error("CA file {}: {why}", path.display())]
    CaFile {
        /// The file, as it was given.
        path: PathBuf,
        /// What is wrong with it.
        why: String,
    },
    /// The TLS configuration or the HTTP client could not be built (a bug, not an input).
    #[error("cannot build the HTTP client: {0}")]
    Build(String),
}

/// Makes ring the process's default rustls provider, if none is yet (idempotent, cheap).
///
/// reqwest is built with `rustls-no-provider` (so that no aws-lc is built), which it shares
/// with every crate of the process that uses it: a reqwest client built without a TLS
/// configuration of its own (the engine's rules puller, `reqwest::blocking::get` in a test)
/// takes the process's default provider, and panics when there is none. `main` calls this
/// first; so does [`client`].
pub fn use_ring_by_default() {
    // An error only says that a default is installed already, which is what is wanted.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// A pooled HTTP/1.1 client whose TLS trusts the system's roots, or only the certificates of
/// `ca_file` when one is given. Redirects are not followed; no proxy is used.
pub fn client(ca_file: Option<&Path>) -> Result<reqwest::Client, OutboundError> {
    use_ring_by_default();
    let tls = tls::client_config(ca_file)?;
    reqwest::Client::builder()
        .tls_backend_preconfigured(tls)
        .http1_only()
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .tcp_nodelay(true)
        .build()
        .map_err(|e| OutboundError::Build(cause(&e)))
}

/// The body of `response`, read to its end if it is at most `limit` bytes; `None` (and
/// nothing more read) once it is longer. A declared `Content-Length` above the limit is not
/// read at all.
pub async fn read_at_most(
    response: &mut reqwest::Response,
    limit: usize,
) -> Result<Option<Bytes>, reqwest::Error> {
    if response.content_length().is_some_and(|n| n > limit as u64) {
        return Ok(None);
    }
    let mut body = BytesMut::new();
    while let Some(chunk) = response.chunk().await? {
        if body.len() + chunk.len() > limit {
            return Ok(None);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(Some(body.freeze()))
}

/// `error` and each of its sources, joined by `": "`; a source whose text the one before
/// already contains is left out (many errors repeat their cause in their own message).
///
/// ```
/// let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "connection refused");
/// assert_eq!(rebound::outbound::cause(&io), "connection refused");
/// ```
pub fn cause(error: &(dyn std::error::Error + 'static)) -> String {
    let mut out = error.to_string();
    let mut last = out.clone();
    let mut next = error.source();
    while let Some(e) = next {
        let text = e.to_string();
        if !last.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        last = text;
        next = e.source();
    }
    out
}

#[cfg(test)]
pub(crate) mod test_server;
