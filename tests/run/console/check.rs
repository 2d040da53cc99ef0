//! What every page must satisfy, and the steps many tests share: a page shown, the browser's
//! log free of errors, every request on the admin address, the token typed when asked, a
//! screenshot kept.

use super::server::{Console, TOKEN};
use super::webdriver::Browser;
use serde_json::json;
use std::path::PathBuf;

/// Where screenshots go: `target/console-screenshots/` (under `CARGO_TARGET_DIR` if set).
pub fn screenshots_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target"))
        .join("console-screenshots")
}

/// Writes `NAME.png` under [`screenshots_dir`].
pub fn screenshot(browser: &Browser, name: &str) {
    browser.screenshot(&screenshots_dir().join(format!("{name}.png")));
}

/// Opens `path` and waits until the page shows what `ready` (a script expression) says, with
/// no error notice.
pub fn open(browser: &Browser, console: &Console, path: &str, ready: &str) {
    browser.goto(&console.url(path));
    browser.wait_js(&format!("{path} to show ({ready})"), ready);
    let notice = browser.execute(
        "const n = document.getElementById('notice');
         return n.hidden || !n.classList.contains('error') ? null : n.textContent;",
        json!([]),
    );
    assert!(notice.is_null(), "{path} says: {notice}");
}

/// The browser's SEVERE log entries since the last look, except those containing any of
/// `expected` (an answer the test provoked on purpose, such as a 409).
pub fn console_errors(browser: &Browser, expected: &[&str]) -> Vec<String> {
    browser
        .log()
        .into_iter()
        .filter(|e| e.level == "SEVERE")
        .map(|e| e.message)
        .filter(|m| !expected.iter().any(|x| m.contains(x)))
        .collect()
}

/// No CSP violation, failed load or script error on the page since the last look.
pub fn assert_no_console_errors(browser: &Browser, page: &str) {
    let errors = console_errors(browser, &[]);
    assert!(errors.is_empty(), "console errors on {page}: {errors:#?}");
}

/// Every resource the page loaded, and the page itself, came from the admin address.
pub fn assert_only_admin_requests(browser: &Browser, console: &Console, page: &str) -> Vec<String> {
    let loaded = browser.execute(
        "return performance.getEntriesByType('navigation')
           .concat(performance.getEntriesByType('resource')).map((e) => e.name);",
        json!([]),
    );
    let loaded: Vec<String> = loaded
        .as_array()
        .expect("a list")
        .iter()
        .map(|v| v.as_str().unwrap_or_default().to_owned())
        .collect();
    assert!(loaded.len() >= 4, "{page} loaded {loaded:?}");
    let origin = format!("{}/", console.base);
    let elsewhere: Vec<&String> = loaded.iter().filter(|u| !u.starts_with(&origin)).collect();
    assert!(
        elsewhere.is_empty(),
        "{page} asked elsewhere: {elsewhere:?}"
    );
    loaded
}

/// Waits for the token dialog and answers it with the admin token.
pub fn give_token(browser: &Browser) {
    browser.wait_js(
        "the token dialog",
        "document.getElementById('token-dialog').open",
    );
    browser.wait_for("#token-input").send_keys(TOKEN);
    browser.wait_for("#token-ok").click();
    browser.wait_js(
        "the token dialog to close",
        "!document.getElementById('token-dialog').open",
    );
}

/// Whether the token dialog is open.
pub fn token_asked(browser: &Browser) -> bool {
    browser.execute(
        "return document.getElementById('token-dialog').open",
        json!([]),
    ) == json!(true)
}

/// Waits for a notice of `kind` (`ok`, `error`, or `""` for one that is neither) that says
/// `saying`, and returns its text.
pub fn notice(browser: &Browser, kind: &str, saying: &str) -> String {
    let of_kind = if kind.is_empty() {
        "!n.classList.contains('ok') && !n.classList.contains('error')".to_owned()
    } else {
        format!("n.classList.contains('{kind}')")
    };
    browser.wait_js(
        &format!("a notice of kind {kind:?} saying {saying:?}"),
        &format!(
            "(() => {{ const n = document.getElementById('notice');
               return !n.hidden && {of_kind}
                 && n.textContent.includes({}); }})()",
            json!(saying)
        ),
    );
    browser.wait_for("#notice").text()
}

/// Waits for the console's confirmation dialog, checks that it says `saying`, and answers it
/// with its action button: the question's text.
pub fn confirm(browser: &Browser, saying: &str) -> String {
    browser.wait_js(
        "the confirmation dialog",
        "document.getElementById('confirm-dialog')?.open",
    );
    let text = browser.wait_for("#confirm-text").text();
    assert!(text.contains(saying), "the confirmation says {text:?}");
    browser.wait_for("#confirm-ok").click();
    browser.wait_js(
        "the confirmation dialog to close",
        "!document.getElementById('confirm-dialog')",
    );
    text
}
