//! An operator edits a rule file on `/ui/rules`: an invalid edit, validated, lists its errors
//! with file:line:col (the same the API gives) and a click shows that line; a valid edit,
//! pushed, is the version `GET /v1/rules` serves; a push made from a version someone else has
//! replaced meanwhile is refused with the 409, and the page says what changed.

use super::check::{console_errors, give_token, notice, open, screenshot, token_asked};
use super::server::Console;
use super::webdriver::Browser;
use serde_json::{Value, json};

const FILE: &str = "50-labels.yaml";
/// Line 4 holds a duration that is not one.
const INVALID: &str = "version: 1\nlabels:\n  L1:\n    sla: soon\n";
const VALID: &str =
    "version: 1\nlabels:\n  L1:\n    sla: 1h\n  L2:\n    sla: 15m\n  L3:\n    sla: 3h\n";
const THEIRS: &str = "version: 1\nlabels:\n  L1:\n    sla: 2h\n";
const MINE_TOO_LATE: &str = "version: 1\nlabels:\n  L1:\n    sla: 30m\n";

/// Empties the editor (the file shown) and types `text` into it.
fn type_file(browser: &Browser, text: &str) {
    let editor = browser.wait_for("#editor");
    editor.clear();
    editor.send_keys(text);
    assert_eq!(editor.property("value"), json!(text), "what was typed");
}

#[test]
fn an_invalid_edit_shows_file_line_col_a_valid_push_is_served_and_a_stale_push_is_a_409() {
    let console = Console::start();
    let (first, mut files) = console.rules();
    let browser = Browser::start(1280, 800);
    open(
        &browser,
        &console,
        "/ui/rules",
        "document.getElementById('editor')?.value.length > 0",
    );
    assert_eq!(browser.wait_for("#version").text(), first);
    browser
        .wait_for(&format!("#files button[data-file='{FILE}']"))
        .click();
    browser.wait_js(
        "the file to open",
        &format!("document.getElementById('editor').dataset.file === '{FILE}'"),
    );

    // Invalid: the errors the API gives for the same files, each a button naming its place.
    type_file(&browser, INVALID);
    files.insert(FILE.into(), INVALID.into());
    let expected = console.validate(&files);
    assert!(!expected.is_empty(), "the edit is invalid");
    assert!(
        expected
            .iter()
            .all(|at| at.starts_with(&format!("{FILE}:4:"))),
        "{expected:?}"
    );
    browser.wait_for("#validate").click();
    browser.wait_for("#errors button[data-at]");
    let shown: Vec<String> = browser
        .find_all("#errors button[data-at]")
        .iter()
        .map(|b| b.attribute("data-at").unwrap())
        .collect();
    assert_eq!(shown, expected);
    assert!(
        !token_asked(&browser),
        "validating changes nothing: no token"
    );
    notice(&browser, "error", "not valid");
    browser.find("#errors button[data-at]").unwrap().click();
    let line = browser.wait_for("#line-view .line-shown");
    assert_eq!(line.attribute("data-line").as_deref(), Some("4"));
    assert!(line.text().contains("sla: soon"), "{}", line.text());
    let selected = browser.execute(
        "const e = document.getElementById('editor');
         return e.value.slice(e.selectionStart, e.selectionEnd);",
        json!([]),
    );
    assert_eq!(selected, "    sla: soon", "the editor selects the line");
    screenshot(&browser, "rules-errors");

    // Valid, pushed: the version in force changes to the one the page shows.
    type_file(&browser, VALID);
    files.insert(FILE.into(), VALID.into());
    assert_eq!(console.validate(&files), Vec::<String>::new());
    browser.wait_for("#validate").click();
    browser.wait_for("#valid");
    browser.wait_for("#push").click();
    give_token(&browser);
    let said = notice(&browser, "ok", "Pushed");
    let (pushed, now) = console.rules();
    assert_ne!(pushed, first, "{said}");
    assert_eq!(now[FILE], VALID);
    assert!(said.contains(&pushed), "{said}");
    browser.wait_js(
        "the page to show the pushed version",
        &format!(
            "document.getElementById('version').textContent === {}",
            json!(pushed)
        ),
    );

    // Stale: someone pushes from the API while the page still shows `pushed`; the page's push
    // is refused, nothing of it lands, and the page shows what changed.
    type_file(&browser, MINE_TOO_LATE);
    let mut theirs = now.clone();
    theirs.insert(FILE.into(), THEIRS.into());
    let their_version = console.push(&theirs);
    browser.wait_for("#push").click();
    let conflict = browser.wait_for("#conflict");
    let said = notice(&browser, "error", "Someone else pushed first");
    assert!(said.contains(&their_version), "{said}");
    let text = conflict.text();
    assert!(
        text.contains(&format!("What changed from {pushed} to {their_version}")),
        "{text}"
    );
    assert!(text.contains("+     sla: 2h"), "{text}");
    let (version, files) = console.rules();
    assert_eq!(version, their_version);
    assert_eq!(files[FILE], Value::from(THEIRS));
    screenshot(&browser, "rules-conflict");

    // The only errors in the browser's log are the answers provoked here.
    let errors = console_errors(
        &browser,
        &[
            "/v1/rules/validate - Failed to load resource: the server responded with a status of 422",
            "/v1/rules - Failed to load resource: the server responded with a status of 409",
        ],
    );
    assert!(errors.is_empty(), "{errors:#?}");
}
