//! **What would change?** on `/ui/rules`: the edited files go to `POST /v1/rules/whatif` (no
//! token: it changes nothing) and the page shows what the API answers: the total of logged
//! decisions, how many would change, and one row per change (old → new, count, delays).
//!
//! The edit is `fixtures/10-poison-retried.yaml`: the shipped poison rules with malformed and
//! invalid payloads retried instead of dead-lettered at once, so each logged `bad-payload`
//! decision would change from a dead letter to a retry.

use super::check::{assert_no_console_errors, notice, open, screenshot, token_asked};
use super::server::Console;
use super::webdriver::Browser;
use serde_json::json;

const FILE: &str = "10-poison.yaml";
const EDITED: &str = include_str!("fixtures/10-poison-retried.yaml");

#[test]
fn what_would_change_shows_the_whatif_table_of_the_edited_files() {
    let console = Console::start();
    let (_, mut files) = console.rules();
    files.insert(FILE.into(), EDITED.into());
    // The run's poison letters are logged decisions by now (the console waits for five).
    let answer = console.post("/v1/rules/whatif", json!({ "files": files }));
    let changed = answer["changed"].as_u64().unwrap();
    assert!(changed > 0, "{answer}");

    let browser = Browser::start(1280, 800);
    open(
        &browser,
        &console,
        "/ui/rules",
        "document.getElementById('editor')?.value.length > 0",
    );
    browser
        .wait_for(&format!("#files button[data-file='{FILE}']"))
        .click();
    let editor = browser.wait_for("#editor");
    editor.clear();
    editor.send_keys(EDITED);
    browser.wait_for("#whatif-button").click();
    let summary = browser.wait_for("#whatif-summary").text();
    assert!(summary.contains(" would change"), "{summary}");
    assert!(!token_asked(&browser), "what-if changes nothing: no token");
    notice(&browser, "", "would change");
    let rows = browser.find_all("#whatif-rows tbody tr");
    assert!(!rows.is_empty());
    let first = rows[0].text();
    assert!(first.contains("bad-payload · dead_letter · L3"), "{first}");
    assert!(first.contains("bad-payload · retry"), "{first}");
    screenshot(&browser, "rules-whatif");
    assert_no_console_errors(&browser, "/ui/rules after What would change?");
}
