//! What an operator's push on `/ui/rules` is checked against before it lands, and how a
//! rollback asks first:
//!
//! - **Validate** shows a valid set's warnings (a guard that is always false) with their
//!   file:line:col, rather than a bare "valid";
//! - **Push** runs the set's rule tests (`rules/tests`, as `rebound test` does): an edit that
//!   breaks two of the 46 is refused, nothing changes, and the page lists the two failures
//!   with their places; **Push anyway** pushes it with `"skip_tests": true`;
//! - **Rollback** names the version it goes back to, and does nothing until the operator
//!   confirms (Cancel leaves the set alone).
//!
//! The edit is `fixtures/20-payment-edited.yaml`: the shipped payment rules with the
//! processing poll slowed to 200 ms (the shipped tests pin it at 100 ms) and a new rule whose
//! guard compares a number with a string.

use super::check::{confirm, console_errors, give_token, notice, open, screenshot};
use super::server::Console;
use super::webdriver::Browser;
use serde_json::{Value, json};

const FILE: &str = "20-payment.yaml";
const EDITED: &str = include_str!("fixtures/20-payment-edited.yaml");

#[test]
fn validate_shows_warnings_a_failing_rule_test_refuses_a_push_and_rollback_asks_naming_its_version()
{
    let console = Console::start_with_rule_tests();
    let (first, mut files) = console.rules();
    files.insert(FILE.into(), EDITED.into());

    // The API first: the warning's place, and the push its tests refuse.
    let (status, valid) = console.send(
        reqwest::Method::POST,
        "/v1/rules/validate",
        json!({ "files": files }),
    );
    assert_eq!(status, 200, "{valid}");
    let warning = &valid["warnings"][0];
    assert!(
        warning["message"]
            .as_str()
            .unwrap()
            .contains("always false"),
        "{valid}"
    );
    let warned_at = format!("{FILE}:{}:{}", warning["line"], warning["column"]);
    let (status, refused) =
        console.send(reqwest::Method::PUT, "/v1/rules", json!({ "files": files }));
    assert_eq!(status, 422, "{refused}");
    assert_eq!(
        refused["tests"],
        json!({"passed": 44, "failed": 2}),
        "{refused}"
    );
    assert_eq!(console.rules().0, first, "a refused push changes nothing");
    assert_eq!(
        console.get("/v1/rules/rollback"),
        json!({ "version": null }),
        "nothing before the start-up set"
    );

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
    browser.wait_js(
        "the file to open",
        &format!("document.getElementById('editor').dataset.file === '{FILE}'"),
    );
    // The whole file at once, as a paste: the page hears it as the operator's input.
    let editor = browser.wait_for("#editor");
    browser.execute(
        "arguments[0].value = arguments[1];
         arguments[0].dispatchEvent(new Event('input', { bubbles: true }));",
        json!([editor.as_arg(), EDITED]),
    );

    // Validate: valid, with the warning shown at its place (a click shows its line).
    browser.wait_for("#validate").click();
    let said = notice(&browser, "", "valid, with 1 warning");
    assert!(!said.contains("The edited set is valid."), "{said}");
    let shown = browser.wait_for("#warnings button[data-at]");
    assert_eq!(shown.attribute("data-at"), Some(warned_at.clone()));
    assert!(shown.text().contains("always false"), "{}", shown.text());
    shown.click();
    let line = browser.wait_for("#line-view .line-shown");
    assert!(line.text().contains("attempt > \"2\""), "{}", line.text());
    screenshot(&browser, "rules-warnings");

    // Push: refused by its tests, each failure at its place in the tests.
    browser.wait_for("#push").click();
    give_token(&browser);
    let said = notice(&browser, "error", "2 of 46 rule tests failed");
    assert!(said.contains("Nothing was changed"), "{said}");
    let failed: Vec<String> = browser
        .find_all("#errors button[data-at]")
        .iter()
        .map(|b| b.attribute("data-at").unwrap())
        .collect();
    assert_eq!(failed.len(), 2, "{failed:?}");
    assert!(
        failed
            .iter()
            .all(|at| at.starts_with("tests/20-payment.yaml:")),
        "{failed:?}"
    );
    assert_eq!(console.rules().0, first, "the refused push changed nothing");
    screenshot(&browser, "rules-tests-refused");

    // Push anyway: in force, saying its tests were skipped.
    browser.wait_for("#push-skip-tests").click();
    let said = notice(&browser, "ok", "Pushed");
    assert!(said.contains("rule tests were skipped"), "{said}");
    let (second, now) = console.rules();
    assert_ne!(second, first);
    assert_eq!(now[FILE], Value::from(EDITED));
    browser.wait_js(
        "the page to show the pushed version",
        &format!(
            "document.getElementById('version').textContent === {}",
            json!(second)
        ),
    );

    // Rollback: it names the version it goes back to; Cancel does nothing.
    assert_eq!(
        console.get("/v1/rules/rollback"),
        json!({ "version": first })
    );
    assert_eq!(browser.wait_for("#rollback-to").text(), first);
    browser.wait_for("#rollback").click();
    browser.wait_js(
        "the confirmation dialog",
        "document.getElementById('confirm-dialog')?.open",
    );
    let question = browser.wait_for("#confirm-text").text();
    assert!(
        question.contains(&format!("from version {second} to version {first}")),
        "{question}"
    );
    browser.wait_for("#confirm-cancel").click();
    notice(&browser, "", "Nothing was rolled back");
    assert_eq!(
        console.rules().0,
        second,
        "a cancelled rollback changes nothing"
    );

    browser.wait_for("#rollback").click();
    confirm(&browser, &format!("to version {first}"));
    let said = notice(&browser, "ok", "Rolled back");
    assert!(said.contains(&first), "{said}");
    assert_eq!(console.rules().0, first);
    screenshot(&browser, "rules-rolled-back");

    let errors = console_errors(
        &browser,
        &["/v1/rules - Failed to load resource: the server responded with a status of 422"],
    );
    assert!(errors.is_empty(), "{errors:#?}");
}
