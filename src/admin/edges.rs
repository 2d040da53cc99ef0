//! Who may talk to the admin API (`docs/spec/operations.md`, "The admin API at its edges"):
//! the bounds of its connections, and the `Origin` and `Host` checks that keep web pages of
//! other origins out.
//!
//! A loopback admin without a token trusts whoever can reach it, and a browser can reach it
//! on behalf of any page it shows. Two checks close that, before anything is read or done:
//!
//! - a request with an `Origin` other than `http://` + its own `Host`, or with
//!   `Sec-Fetch-Site: cross-site`, is another site's: 403. Tools that send no `Origin` (curl,
//!   scripts) are unaffected, and the console, served from the same origin, sends its own;
//! - a request whose `Host` is none of the admin's own names is a DNS-rebinding page's (its
//!   name now points at 127.0.0.1, so its `Origin` and `Host` agree): 421. The admin's names
//!   are the address it listens on, `localhost`, `127.0.0.1`, `[::1]` and `admin.hosts`.
//!
//! No route grants a CORS preflight: none sends `Access-Control-Allow-*`, and a preflight from
//! another origin gets its 403 here.

use super::AdminState;
use super::error::ApiError;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::net::SocketAddr;
use std::time::Duration;

/// The bounds of the admin API's connections and the names it answers to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Edges {
    /// Connections open at once at most; the next is closed at once (`admin.max_connections`).
    pub max_connections: usize,
    /// `admin.hosts`: host names the API answers to beside its own, lower case, no port.
    pub hosts: Vec<String>,
    /// How long a request's headers may take.
    pub header_timeout: Duration,
    /// How long a request's body may take, from its headers on.
    pub body_timeout: Duration,
    /// How long a keep-alive connection may wait for its next request.
    pub idle_timeout: Duration,
}

impl Default for Edges {
    /// The spec's bounds: 512 connections, headers in 10 s, a body in 30 s, idle for 60 s.
    fn default() -> Self {
        Edges {
            max_connections: 512,
            hosts: Vec::new(),
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(60),
        }
    }
}

/// The names a request's `Host` may carry, as the admin was started.
#[derive(Clone, Debug, Default)]
pub struct OwnNames {
    /// `localhost`, the loopback addresses, the bound address and the name it was given
    /// (`--admin rebound.local:8080`), and `admin.hosts`: lower case, without a port.
    names: Vec<String>,
}

impl OwnNames {
    /// The names of an admin API given as `given` (`HOST:PORT`), bound to `bound`.
    pub fn new(given: &str, bound: SocketAddr, hosts: &[String]) -> OwnNames {
        let mut names: Vec<String> = ["localhost", "127.0.0.1", "[::1]"]
            .into_iter()
            .map(str::to_owned)
            .collect();
        names.push(host_only(&bound.to_string()).to_ascii_lowercase());
        names.push(host_only(given).to_ascii_lowercase());
        names.extend(hosts.iter().map(|h| h.to_ascii_lowercase()));
        names.sort();
        names.dedup();
        OwnNames { names }
    }

    /// Whether `host` (a `Host` header's value, with or without its port) is one of them.
    pub fn allows(&self, host: &str) -> bool {
        let name = host_only(host).to_ascii_lowercase();
        // `localhost.` is `localhost`: a trailing dot is the same DNS name.
        let name = name.strip_suffix('.').unwrap_or(&name);
        self.names.iter().any(|n| n == name)
    }
}

/// `host` without its `:PORT`: `[::1]:80` → `[::1]`, `a:80` → `a`, `a` → `a`.
fn host_only(host: &str) -> &str {
    let host = host.trim();
    if host.starts_with('[') {
        return host.find(']').map_or(host, |end| &host[..=end]);
    }
    match host.rsplit_once(':') {
        Some((name, port)) if port.chars().all(|c| c.is_ascii_digit()) => name,
        _ => host,
    }
}

/// The layer: 403 for another origin's request, 421 for another host's, before the route.
pub async fn same_origin_only(
    State(state): State<AdminState>,
    req: Request,
    next: Next,
) -> Response {
    match refusal(&state.names, &req) {
        Some(refused) => refused.into_response(),
        None => next.run(req).await,
    }
}

/// Why `req` is refused, if it is.
fn refusal(names: &OwnNames, req: &Request) -> Option<ApiError> {
    let headers = req.headers();
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .map(str::to_owned)
        .or_else(|| req.uri().authority().map(|a| a.as_str().to_owned()));
    let cross_site = headers
        .get("sec-fetch-site")
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"cross-site"));
    if cross_site {
        return Some(forbidden("it was sent by a page of another site"));
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let own = host.as_deref().map(|h| format!("http://{h}"));
        let same = own.is_some_and(|own| origin.as_bytes().eq_ignore_ascii_case(own.as_bytes()));
        if !same {
            let shown = String::from_utf8_lossy(origin.as_bytes()).into_owned();
            return Some(forbidden(&format!(
                "it comes from the origin {shown:?}, not the admin API's own"
            )));
        }
    }
    match host {
        Some(h) if names.allows(&h) => None,
        Some(h) => Some(ApiError::new(
            StatusCode::MISDIRECTED_REQUEST,
            format!(
                "this admin API does not answer to the host {h:?}; it answers to its address, \
                 localhost, 127.0.0.1, [::1] and the names listed in admin.hosts"
            ),
        )),
        None => Some(ApiError::bad_request("the request has no Host header")),
    }
}

fn forbidden(why: &str) -> ApiError {
    ApiError::new(
        StatusCode::FORBIDDEN,
        format!(
            "cross-origin requests are refused: {why}. Send the request from a tool that sends \
             no Origin header (curl, a script), or from the console the admin API serves"
        ),
    )
}

/// The bounds the configuration file's `admin:` section sets, defaults elsewhere.
impl From<&crate::config::Admin> for Edges {
    fn from(a: &crate::config::Admin) -> Edges {
        let default = Edges::default();
        Edges {
            max_connections: a.max_connections.unwrap_or(default.max_connections),
            hosts: a.hosts.iter().map(|h| h.0.clone()).collect(),
            header_timeout: a.header_timeout.unwrap_or(default.header_timeout),
            body_timeout: a.body_timeout.unwrap_or(default.body_timeout),
            idle_timeout: a.idle_timeout.unwrap_or(default.idle_timeout),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;

    fn names() -> OwnNames {
        let bound: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        OwnNames::new("127.0.0.1:8080", bound, &["rebound.internal".to_owned()])
    }

    fn request(headers: &[(&str, &str)]) -> Request {
        let mut b = Request::builder()
            .method("POST")
            .uri("/v1/dead-letters/replay");
        for (k, v) in headers {
            b = b.header(*k, *v);
        }
        b.body(Body::empty()).unwrap()
    }

    fn status(headers: &[(&str, &str)]) -> Option<StatusCode> {
        refusal(&names(), &request(headers)).map(|e| e.status())
    }

    #[test]
    fn own_names_pass_with_any_port_and_others_get_421() {
        for host in [
            "127.0.0.1:8080",
            "localhost:9",
            "LOCALHOST",
            "localhost.:8080",
            "[::1]:8080",
            "rebound.internal:8080",
        ] {
            assert_eq!(status(&[("host", host)]), None, "{host}");
        }
        for host in [
            "evil.example:8080",
            "10.0.0.1:8080",
            "rebound.internal.evil",
        ] {
            assert_eq!(
                status(&[("host", host)]),
                Some(StatusCode::MISDIRECTED_REQUEST),
                "{host}"
            );
        }
    }

    #[test]
    fn another_origin_or_a_cross_site_fetch_gets_403() {
        let host = ("host", "127.0.0.1:8080");
        assert_eq!(status(&[host, ("origin", "http://127.0.0.1:8080")]), None);
        assert_eq!(status(&[host, ("sec-fetch-site", "same-origin")]), None);
        for origin in [
            "http://evil.example",
            "null",
            "https://127.0.0.1:8080",
            "http://127.0.0.1:8081",
        ] {
            assert_eq!(
                status(&[host, ("origin", origin)]),
                Some(StatusCode::FORBIDDEN),
                "{origin}"
            );
        }
        assert_eq!(
            status(&[host, ("sec-fetch-site", "cross-site")]),
            Some(StatusCode::FORBIDDEN)
        );
        // A rebinding page's Origin matches its Host; the Host is refused.
        let rebound = [
            ("host", "evil.example:8080"),
            ("origin", "http://evil.example:8080"),
        ];
        assert_eq!(status(&rebound), Some(StatusCode::MISDIRECTED_REQUEST));
    }
}
