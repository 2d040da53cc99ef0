//! How the overview and the dead letters read at 1280×800 and on a 390×844 phone.
//!
//! - The overview says what its rates are: means per second over a window ("per second,
//!   10 s mean"), on every rate card and chart.
//! - At 1280 px no message id, age, code, label or rule on the dead-letter list wraps, however
//!   long the failure messages beside them; on a phone each row stays a row (the last failure
//!   is cut to two lines, the table scrolls sideways in its frame) rather than a column of
//!   one-word lines.
//!
//! Screenshots: `layout-overview*.png`, `layout-dead-letters*.png`.

use super::check::{assert_no_console_errors, open, screenshot};
use super::server::Console;
use super::webdriver::Browser;
use rebound_runtime::fate::{DeadLetter, GiveUpReason, Label, RuleRef, Version};
use rebound_runtime::store::{Message, WriteOp};
use rebound_runtime::time::Timestamp;
use rebound_runtime::topology::Failure;
use serde_json::{Value, json};
use std::time::Duration;

/// The tallest a dead-letter row may be on a phone: three lines of text and the padding.
const PHONE_ROW_PX: f64 = 80.0;

/// Letters with long ids and long failure messages, as a busy deployment has them.
fn long_letters() -> Vec<WriteOp> {
    let now = Timestamp::now();
    (0..6)
        .map(|i| {
            let id = format!("order-2026-11-30-eu-west-{i:06}");
            let message = format!(
                "inventory service answered 409 Conflict for sku B-{i}: the reservation \
                 {id}/line-3 is held by another order; the lock holder is \
                 checkout-worker-7 and it has held it for 2m 31s, longer than the lock \
                 timeout of 30s, so the reservation cannot be moved (attempt {i})"
            );
            let mut m = Message::new(id.as_str(), "ORDER", "{}");
            m.retry.attempt = 1;
            WriteOp::DeadLetter(Box::new(DeadLetter {
                message: m,
                failure: Failure::new("INVENTORY_CONFLICT", message),
                label: Label::from("L2"),
                reason: GiveUpReason::MaxRetries,
                rule: RuleRef::Rule("inventory-conflict-long-name".into()),
                version: Version::from_hash(1),
                at: now.saturating_sub(Duration::from_secs(3_700 + 60 * i)),
            }))
        })
        .collect()
}

/// For each row of the letters table: the line boxes of its id, age, code, label and rule
/// cells (1 each when nothing wraps), and its height.
fn rows(browser: &Browser) -> Value {
    browser.execute(
        "const lines = (td) => {
           const r = document.createRange();
           r.selectNodeContents(td);
           return new Set([...r.getClientRects()].filter((x) => x.width > 0)
             .map((x) => Math.round(x.top))).size;
         };
         const heads = [...document.querySelectorAll('#letters thead th')].map((th) => th.textContent);
         const col = (name) => heads.indexOf(name);
         return [...document.querySelectorAll('#letters tbody tr')].map((tr) => {
           const cells = tr.children;
           const out = { height: tr.getBoundingClientRect().height, text: tr.textContent.slice(0, 60) };
           for (const name of ['message', 'age', 'code', 'label', 'rule']) out[name] = lines(cells[col(name)]);
           return out;
         });",
        json!([]),
    )
}

#[test]
fn the_overview_names_its_window_and_dead_letter_rows_do_not_wrap_wide_or_grow_tall_on_a_phone() {
    let console = Console::start_with(long_letters());
    let browser = Browser::start(1280, 800);

    open(
        &browser,
        &console,
        "/ui/",
        "document.querySelector('#version .value')?.textContent.length > 0",
    );
    for card in ["new-rate", "retry-rate", "acked-rate"] {
        let unit = browser.wait_for(&format!("#{card} .unit")).text();
        assert_eq!(unit, "per second, 10 s mean", "#{card}");
    }
    let ratio = browser.wait_for("#retry-ratio .unit").text();
    assert!(ratio.ends_with("10 s mean"), "{ratio}");
    let titles: Vec<String> = browser
        .find_all(".chart .title")
        .iter()
        .map(|t| t.text())
        .collect();
    assert_eq!(titles.len(), 4, "{titles:?}");
    assert!(titles.iter().all(|t| t.contains("10 s mean")), "{titles:?}");
    screenshot(&browser, "layout-overview");

    open(
        &browser,
        &console,
        "/ui/dead-letters",
        "document.querySelectorAll('#letters input.pick').length >= 11",
    );
    let wide = rows(&browser);
    let wrapped: Vec<&Value> = wide
        .as_array()
        .expect("rows")
        .iter()
        .filter(|r| {
            ["message", "age", "code", "label", "rule"]
                .iter()
                .any(|c| r[c] != 1)
        })
        .collect();
    assert!(
        wrapped.is_empty(),
        "cells that wrap at 1280 px: {wrapped:#?}"
    );
    screenshot(&browser, "layout-dead-letters");
    assert_no_console_errors(&browser, "/ui/dead-letters");

    browser.set_viewport(390, 844);
    open(
        &browser,
        &console,
        "/ui/dead-letters",
        "document.querySelectorAll('#letters input.pick').length >= 11",
    );
    let phone = rows(&browser);
    let tall: Vec<&Value> = phone
        .as_array()
        .expect("rows")
        .iter()
        .filter(|r| r["height"].as_f64().unwrap_or(f64::MAX) > PHONE_ROW_PX)
        .collect();
    assert!(
        tall.is_empty(),
        "rows taller than {PHONE_ROW_PX} px on a phone: {tall:#?}"
    );
    let widths = browser.execute(
        "return [document.documentElement.scrollWidth, window.innerWidth]",
        json!([]),
    );
    assert!(
        widths[0].as_i64() <= widths[1].as_i64(),
        "the page itself does not scroll sideways: {widths}"
    );
    screenshot(&browser, "layout-dead-letters-phone");
    assert_no_console_errors(&browser, "/ui/dead-letters on a phone");
}
