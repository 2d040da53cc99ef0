//! A canary on `/ui/rules`: while it runs, the page shows its state and its two arms side by
//! side (first deliveries, retries, dead letters, both ratios, success by attempt), and the
//! operator aborts it with **Abort canary…**, confirmed, with the token: the API then says it
//! was rolled back, and the history records it.

use super::check::{assert_no_console_errors, confirm, give_token, notice, open, screenshot};
use super::server::Console;
use super::webdriver::Browser;
use serde_json::{Value, json};

#[test]
fn a_running_canary_shows_its_arms_side_by_side_and_is_aborted_from_the_page() {
    let console = Console::start();
    let (stable, mut files) = console.rules();
    // Before any canary the page shows none (and asks nothing that would be a 404).
    let browser = Browser::start(1280, 800);
    open(
        &browser,
        &console,
        "/ui/rules",
        "document.getElementById('editor')?.value.length > 0",
    );
    assert_eq!(
        browser.execute("return document.getElementById('canary').hidden", json!([])),
        json!(true)
    );
    assert_no_console_errors(&browser, "/ui/rules without a canary");

    let (name, text) = files
        .iter()
        .next()
        .map(|(n, t)| (n.clone(), t.clone()))
        .unwrap();
    let cosmetic = format!("{}\n# a cosmetic change\n", text.as_str().unwrap());
    files.insert(name, Value::String(cosmetic));
    let (status, started) = console.send(
        reqwest::Method::PUT,
        "/v1/rules/canary",
        json!({
            "files": files, "percent": 50, "biz": ["PAYMENT"], "promote_after": "1h",
            "guard": {"min_samples": 1_000_000},
        }),
    );
    assert_eq!(status, 200, "{started}");
    let candidate = started["version"].as_str().unwrap().to_owned();

    browser.wait_js(
        "the canary's state",
        "document.getElementById('canary-state')?.textContent === 'running'",
    );
    assert!(
        browser
            .wait_for("#canary-version")
            .text()
            .contains(&candidate)
    );
    let heads: Vec<String> = browser
        .find_all("#canary-arms thead th")
        .iter()
        .map(|th| th.text())
        .collect();
    assert_eq!(heads[1..], ["stable".to_owned(), "canary".to_owned()]);
    let rows: Vec<String> = browser
        .find_all("#canary-arms tbody tr td:first-child")
        .iter()
        .map(|td| td.text())
        .collect();
    assert_eq!(
        rows,
        [
            "first deliveries",
            "retries",
            "dead letters",
            "retry ratio",
            "dead-letter ratio",
            "success by attempt"
        ]
    );
    let first = browser
        .wait_for("#canary-arms tbody tr td:nth-child(2)")
        .text();
    assert!(first.replace(',', "").parse::<u64>().is_ok(), "{first:?}");
    screenshot(&browser, "rules-canary");

    browser.wait_for("#canary-abort").click();
    confirm(&browser, "Abort the canary?");
    give_token(&browser);
    notice(&browser, "ok", "aborted");
    browser.wait_js(
        "the canary's end",
        "document.getElementById('canary-state')?.textContent === 'rolled_back'",
    );
    assert_eq!(console.get("/v1/rules/canary")["state"], "rolled_back");
    let history = console.get("/v1/rules/history");
    assert_eq!(history[0]["source"], "rolled_back", "{history}");
    assert_eq!(history[0]["version"], json!(candidate));
    assert_eq!(console.rules().0, stable, "the stable set stays in force");
    assert!(
        browser.find("#canary-abort").is_none(),
        "nothing to abort any more"
    );
    assert_no_console_errors(&browser, "/ui/rules with a canary");
}
