//! A failure message holding markup (`<script>alert(1)</script>`, an `<img onerror>`) shows as
//! that text on the dead-letter list and on the message's page: no element is made of it, no
//! dialog opens, and the browser reports nothing (a blocked inline script would be a CSP
//! violation in its log).
//!
//! The bundled pipeline's failure messages are its own fixed texts (a parse error quotes
//! serde's message, never the payload), and no operator route writes a failure, so the letter
//! is written into the run's store through the store API before the run starts, as the
//! pipeline itself writes one: a message with a failure history and the failure that ended it.

use super::check::{assert_no_console_errors, open, screenshot};
use super::server::Console;
use super::webdriver::Browser;
use rebound_runtime::fate::{DeadLetter, GiveUpReason, Label, RuleRef, Version};
use rebound_runtime::store::{Message, WriteOp};
use rebound_runtime::time::Timestamp;
use rebound_runtime::topology::{Failure, FailureRecord};
use serde_json::json;
use std::time::Duration;

const HOSTILE: &str = "<script>alert(1)</script><img src=x onerror=\"alert(2)\">";
const ID: &str = "hostile-1";

/// A dead letter whose every text field a page shows holds [`HOSTILE`].
fn hostile_letter() -> WriteOp {
    let now = Timestamp::now();
    let mut message = Message::new(ID, "ORDER", HOSTILE);
    message.retry.first_delivery = Some(now.saturating_sub(Duration::from_secs(3)));
    message.retry.failures.push(FailureRecord {
        attempt: 1,
        at: now.saturating_sub(Duration::from_secs(2)),
        code: "HOSTILE".into(),
        message: HOSTILE.into(),
        attrs: [("note".to_owned(), HOSTILE.to_owned())].into(),
        rule: RuleRef::Rule("db-lock".into()),
        version: Version::from_hash(1),
        delay: Some(Duration::from_secs(1)),
    });
    message.retry.attempt = 2;
    WriteOp::DeadLetter(Box::new(DeadLetter {
        message,
        failure: Failure::new("HOSTILE", HOSTILE).with_attr("note", HOSTILE),
        label: Label::from("L2"),
        reason: GiveUpReason::MaxRetries,
        rule: RuleRef::Rule("db-lock".into()),
        version: Version::from_hash(1),
        at: now,
    }))
}

/// Nothing in the page was made from the hostile text, and no dialog is open.
fn assert_inert(browser: &Browser, page: &str) {
    let made = browser.execute(
        "return document.querySelectorAll('#app script, #app img, #app [onerror]').length",
        json!([]),
    );
    assert_eq!(made, 0, "elements made of a failure message on {page}");
    if let Some(text) = browser.alert_text() {
        browser.accept_alert();
        panic!("a dialog opened on {page}: {text}");
    }
    assert_no_console_errors(browser, page);
}

#[test]
fn a_failure_message_holding_a_script_shows_as_text_and_opens_no_dialog() {
    let console = Console::start_with(vec![hostile_letter()]);
    let stored = console.get("/v1/dead-letters?code=HOSTILE");
    assert_eq!(
        stored["dead_letters"][0]["last_message"], HOSTILE,
        "{stored}"
    );
    let browser = Browser::start(1280, 800);

    open(
        &browser,
        &console,
        "/ui/dead-letters?code=HOSTILE",
        "document.querySelectorAll('#letters input.pick').length === 1",
    );
    let cell = browser.wait_for("#letters tbody td.msg");
    assert_eq!(cell.text(), HOSTILE);
    assert_inert(&browser, "/ui/dead-letters");
    screenshot(&browser, "hostile-letters");

    browser
        .wait_for(&format!("#letters a[href='/ui/messages/{ID}']"))
        .click();
    browser.wait_for("#state");
    let cells: Vec<String> = browser
        .find_all("td.msg")
        .iter()
        .map(|td| td.text())
        .collect();
    // Both failures, and the letter's last failure.
    assert_eq!(
        cells.iter().filter(|t| *t == HOSTILE).count(),
        3,
        "{cells:?}"
    );
    assert_inert(&browser, &format!("/ui/messages/{ID}"));
    screenshot(&browser, "hostile-message");
}
