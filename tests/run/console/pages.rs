//! Every page of the console, as an operator first opens it: it shows its content with no
//! error in the browser's console (a CSP violation, a failed load and a script error all land
//! there), it asks nothing of any address but the admin API's, and the page and its assets
//! carry `Content-Security-Policy: default-src 'self'`. A screenshot of each at 1280×800 is
//! kept under `target/console-screenshots/`. On a phone's width (390 px) no page is wider
//! than the screen (tables scroll inside their frame).

use super::check::{
    assert_no_console_errors, assert_only_admin_requests, open, screenshot, screenshots_dir,
};
use super::server::Console;
use super::webdriver::Browser;
use serde_json::json;
use std::collections::BTreeSet;

/// Each page: its path (`{id}` is a dead letter's message), its screenshot's name, and what it
/// shows once loaded (a script expression).
pub(super) const PAGES: &[(&str, &str, &str)] = &[
    (
        "/ui/",
        "overview",
        // Two refreshes: the live part works, not only the first paint.
        "document.querySelector('#version .value')?.textContent.length > 0
         && performance.getEntriesByType('resource')
              .filter((e) => e.name.includes('/v1/overview')).length >= 2",
    ),
    (
        "/ui/rules",
        "rules",
        "document.getElementById('editor')?.value.length > 0",
    ),
    (
        "/ui/rules/history",
        "history",
        "document.querySelector('#app table tbody tr td')",
    ),
    (
        "/ui/paths",
        "paths",
        "document.querySelectorAll('#paths figure').length > 0",
    ),
    (
        "/ui/dead-letters",
        "dead-letters",
        "document.querySelectorAll('#letters input.pick').length > 0",
    ),
    (
        "/ui/messages/{id}",
        "message",
        "document.getElementById('state')",
    ),
    (
        "/ui/retries",
        "retries",
        "document.querySelector('#retries table')",
    ),
    (
        "/ui/audit",
        "audit",
        "document.querySelector('#audit table')",
    ),
    ("/ui/nodes", "nodes", "document.getElementById('no-fleet')"),
];

const CSP: &str = "default-src 'self'";

#[test]
fn every_page_loads_with_no_console_error_nothing_from_elsewhere_and_the_csp() {
    let console = Console::start();
    let letter = replayed_letter(&console);
    let browser = Browser::start(1280, 800);
    let mut assets = BTreeSet::new();
    for (path, name, ready) in PAGES {
        let path = path.replace("{id}", &letter);
        open(&browser, &console, &path, ready);
        if *name == "paths" {
            wait_for_charts(&browser);
            browser.execute("window.scrollTo(0, 0)", json!([]));
        }
        assert_no_console_errors(&browser, &path);
        for url in assert_only_admin_requests(&browser, &console, &path) {
            if url.contains("/ui/assets/") {
                assets.insert(url);
            }
        }
        screenshot(&browser, name);

        let (status, headers, body) = console.fetch(&path);
        assert_eq!(status, 200, "{path}");
        assert_eq!(headers["content-security-policy"], CSP, "{path}");
        assert!(!body.contains("<script>"), "no inline script in {path}");
    }
    // The shared script and stylesheet, and each page's own script.
    assert!(assets.len() >= PAGES.len() + 2, "{assets:?}");
    for url in &assets {
        let path = url
            .strip_prefix(&console.base)
            .expect("on the admin address");
        let (status, headers, _) = console.fetch(path);
        assert_eq!(status, 200, "{path}");
        assert_eq!(headers["content-security-policy"], CSP, "{path}");
    }
    for (_, name, _) in PAGES {
        let png = std::fs::read(screenshots_dir().join(format!("{name}.png"))).unwrap();
        assert!(png.starts_with(b"\x89PNG"), "{name}.png is a PNG");
    }
}

#[test]
fn on_a_phone_no_page_scrolls_sideways() {
    let console = Console::start();
    let letter = replayed_letter(&console);
    let browser = Browser::start(390, 844);
    let mut too_wide = Vec::new();
    for (path, name, ready) in PAGES {
        let path = path.replace("{id}", &letter);
        open(&browser, &console, &path, ready);
        let widths = browser.execute(
            "return [document.documentElement.scrollWidth, window.innerWidth]",
            json!([]),
        );
        let (scroll, inner) = (widths[0].as_i64().unwrap(), widths[1].as_i64().unwrap());
        assert_eq!(inner, 390);
        screenshot(&browser, &format!("{name}-phone"));
        if scroll > inner {
            too_wide.push(format!("{path} is {scroll} px wide"));
        }
        assert_no_console_errors(&browser, &path);
    }
    assert!(too_wide.is_empty(), "on a 390 px screen: {too_wide:?}");
}

/// A poison letter replayed through the API, so that the audit log and its message's page
/// have something to show: its message id.
pub(super) fn replayed_letter(console: &Console) -> String {
    let id = console.get("/v1/dead-letters?label=L3&limit=1")["dead_letters"][0]["id"]
        .as_str()
        .expect("a letter")
        .to_owned();
    console.post(
        &format!("/v1/dead-letters/{id}/replay"),
        json!({"operator": "ops-bob", "reason": "a look at the parser"}),
    );
    id
}

/// Scrolls every chart into view (they load lazily) and waits until each has loaded.
pub fn wait_for_charts(browser: &Browser) {
    for figure in browser.find_all("#paths figure img") {
        browser.execute(
            "arguments[0].scrollIntoView({block: 'center'})",
            json!([figure.as_arg()]),
        );
    }
    browser.wait_js(
        "every chart to load",
        "[...document.querySelectorAll('#paths figure img')]
           .every((img) => img.complete && img.naturalWidth > 0)",
    );
}
