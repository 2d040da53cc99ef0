//! Where the admin API listens, checked before anything starts (the address resolves, and a
//! non-loopback address has a token), and the admin API served with the console next to a
//! running job (`serve_admin`).

use crate::Outcome;
use crate::admin::AdminState;
use crate::admin::auth::{TOKEN_ENV, Token};
use crate::admin::edges::Edges;
use crate::admin::is_loopback;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;

/// Where the admin token comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TokenFrom {
    /// `$REBOUND_ADMIN_TOKEN` only (`run`).
    Env,
    /// The file given (`--token-file`), else `$REBOUND_ADMIN_TOKEN` (`serve`).
    FileOrEnv(Option<PathBuf>),
}

/// A checked admin address and its token.
#[derive(Clone, Debug)]
pub struct AdminListen {
    /// The address as given, e.g. `127.0.0.1:8080`.
    pub addr: String,
    /// What it resolves to.
    pub addrs: Vec<SocketAddr>,
    /// The token writes need, if one is configured.
    pub token: Option<Token>,
    /// The bounds of its connections and the host names it answers to (`admin:` of the
    /// configuration file).
    pub edges: Edges,
}

impl AdminListen {
    /// Reads the token and resolves `addr`. Says on stderr what is wrong (exit 2): an
    /// unreadable token, an address that does not resolve, or a non-loopback address without
    /// a token. A token file that others can read is a warning.
    pub fn check(addr: &str, from: TokenFrom) -> Result<AdminListen, Outcome> {
        let file = match &from {
            TokenFrom::Env => None,
            TokenFrom::FileOrEnv(file) => file.as_deref(),
        };
        let token = Token::configured(file).map_err(|e| {
            eprintln!("error: {e}");
            Outcome::Trouble
        })?;
        if let Some(exposed) = file.and_then(Token::readable_by_others) {
            eprintln!("warning: {exposed}");
        }
        let addrs: Vec<SocketAddr> = match addr.to_socket_addrs() {
            Ok(a) => a.collect(),
            Err(e) => {
                eprintln!(
                    "error: --admin {addr}: not an address (expected HOST:PORT, e.g. 127.0.0.1:8080): {e}"
                );
                return Err(Outcome::Trouble);
            }
        };
        if token.is_none() && !addrs.iter().all(is_loopback) {
            let set = match from {
                TokenFrom::Env => TOKEN_ENV.to_owned(),
                TokenFrom::FileOrEnv(_) => format!("--token-file FILE or {TOKEN_ENV}"),
            };
            eprintln!(
                "error: refusing to serve the admin API on {addr} without a token: it is not a \
                 loopback address. Set {set}, or listen on 127.0.0.1."
            );
            return Err(Outcome::Trouble);
        }
        Ok(AdminListen {
            addr: addr.to_owned(),
            addrs,
            token,
            edges: Edges::default(),
        })
    }

    /// The same, with the connection bounds and host names of `edges`.
    pub fn with_edges(self, edges: Edges) -> AdminListen {
        AdminListen { edges, ..self }
    }

    /// Binds the listener; returns it with the address it got (port 0 picks a free port).
    pub async fn bind(&self) -> std::io::Result<(tokio::net::TcpListener, SocketAddr)> {
        let listener = tokio::net::TcpListener::bind(self.addrs.as_slice()).await?;
        let bound = listener.local_addr()?;
        Ok((listener, bound))
    }
}

/// Serves the admin API and the console on `listener` until `shutdown` completes (`state`
/// holds the running job's desks and gauges).
pub(super) async fn serve_admin(
    listener: tokio::net::TcpListener,
    state: AdminState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    crate::admin::serve(listener, state, crate::console::routes(), shutdown).await
}
