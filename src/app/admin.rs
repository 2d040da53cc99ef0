//! Where the admin API listens, checked before anything starts (the address resolves, and a
//! non-loopback address has a token), and the admin API served with the console next to a
//! running pipeline ([`serve_admin`]).

use crate::Outcome;
use crate::admin::AdminState;
use crate::admin::auth::{TOKEN_ENV, Token};
use crate::admin::edges::Edges;
use crate::admin::is_loopback;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::Arc;

use crate::pipeline::PipelineHandle;

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

/// Serves the admin API and the console on `listener` next to the running pipeline until `shutdown`
/// completes: the pipeline's live counters join the metrics, and it is the dead-letter desk
/// (a replay goes straight back into its retry queue).
pub async fn serve_admin(
    listener: tokio::net::TcpListener,
    mut state: AdminState,
    pipeline: PipelineHandle,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    state.metrics.runtime.attach(pipeline.stats());
    state.metrics.letters.attach(pipeline.clone());
    state.metrics.gate.attach(pipeline.clone());
    state
        .metrics
        .runtime
        .attach_duplicates(pipeline.duplicates());
    if let Some(fleet) = pipeline.fleet() {
        state.fleet = Some(Arc::new(fleet.clone()));
        state
            .metrics
            .runtime
            .attach_fleet_depth(fleet.state.queue_depth.clone());
        state.metrics.fleet.attach(pipeline.clone());
    }
    state.dead_letters = Some(Arc::new(pipeline));
    crate::admin::serve(listener, state, crate::console::routes(), shutdown).await
}
