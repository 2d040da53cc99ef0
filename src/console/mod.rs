//! The web console (`docs/spec/console.md`): pages under `/ui/`, served by the binary with
//! every asset embedded (no CDN, nothing from elsewhere), so that it works with no network.
//!
//! A page is a small static HTML shell (`pages.rs`) and two scripts: `console.js` (what every
//! page shares: the API client, the admin token kept in `sessionStorage` and sent as
//! `Authorization: Bearer`, DOM building with text nodes only, tables with the API's cursors,
//! charts and diffs) and the page's own. Everything a page shows or does goes through the
//! public admin API: the console has no route of its own besides its files. Every response
//! here carries `Content-Security-Policy: default-src 'self'` (no inline script, no `eval`).

mod assets;
mod pages;

use crate::admin::AdminState;
use axum::Router;
use axum::extract::Path;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;

pub use pages::{PAGES, Page};

/// The policy every console response carries.
pub const CSP: &str = "default-src 'self'";

/// The console's routes: its pages and its assets.
pub fn routes() -> Router<AdminState> {
    let mut router = Router::new()
        .route("/ui", get(|| async { Redirect::permanent("/ui/") }))
        .route("/ui/assets/{name}", get(asset))
        .route(
            "/ui/messages/{id}",
            get(|_: Path<String>| async { page("message") }),
        );
    for p in PAGES.iter().filter(|p| !p.path.contains('{')) {
        router = router.route(p.path, get(move || async move { page(p.key) }));
    }
    router
}

/// The headers every console response carries.
fn guarded(mut response: Response) -> Response {
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

fn page(key: &str) -> Response {
    let page = PAGES
        .iter()
        .find(|p| p.key == key)
        .expect("every routed page is listed");
    guarded(
        (
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/html; charset=utf-8"),
            )],
            pages::html(page),
        )
            .into_response(),
    )
}

async fn asset(Path(name): Path<String>) -> Response {
    let response = match assets::get(&name) {
        Some((content_type, body)) => (
            [(header::CONTENT_TYPE, HeaderValue::from_static(content_type))],
            body,
        )
            .into_response(),
        None => (
            StatusCode::NOT_FOUND,
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/plain; charset=utf-8"),
            )],
            format!("no console asset named {name}"),
        )
            .into_response(),
    };
    guarded(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_page_names_only_embedded_scripts_and_no_inline_code() {
        for p in PAGES {
            let html = pages::html(p);
            assert!(
                html.contains(&format!("/ui/assets/{}.js", p.key)),
                "{}",
                p.key
            );
            assert!(assets::get(&format!("{}.js", p.key)).is_some(), "{}", p.key);
            assert!(!html.contains("<script>"), "no inline script in {}", p.key);
            assert!(!html.contains("style="), "no inline style in {}", p.key);
            assert!(
                !html.contains("http"),
                "nothing from elsewhere in {}",
                p.key
            );
        }
        for name in ["console.js", "console.css", "favicon.svg"] {
            assert!(assets::get(name).is_some(), "{name}");
        }
        assert!(assets::get("../Cargo.toml").is_none());
    }
}
