//! An operator on `/ui/dead-letters`: filters the letters by label, selects two, replays them
//! with their name and a reason (typing the admin token when asked), and the API then shows
//! both letters `replayed`, each with its audit entry.

use super::check::{assert_no_console_errors, give_token, notice, open, screenshot, token_asked};
use super::server::Console;
use super::webdriver::Browser;
use serde_json::{Value, json};
use std::collections::BTreeSet;

#[test]
fn an_operator_filters_by_label_selects_two_letters_and_replays_them() {
    let console = Console::start();
    let browser = Browser::start(1280, 800);
    open(
        &browser,
        &console,
        "/ui/dead-letters",
        "document.querySelectorAll('#letters input.pick').length > 0",
    );
    // Before the filter, the run's other labels show too (L1: payments still processing).
    browser
        .wait_for("#filters input[name=label]")
        .send_keys("L3");
    browser.wait_for("#apply").click();
    browser.wait_js(
        "only L3 letters",
        "location.search === '?label=L3'
         && [...document.querySelectorAll('#letters tbody tr')].length > 0
         && [...document.querySelectorAll('#letters tbody tr')]
              .every((tr) => tr.children[4].textContent === 'L3')",
    );
    // The page counts what the API counts (read again if a letter arrived in between).
    browser.wait_until("the page's total to be the API's", || {
        let api = console.get("/v1/dead-letters?label=L3&limit=1")["total"].clone();
        browser.wait_for("#total").text() == format!("{api} letters match")
    });

    let picks = browser.find_all("#letters input.pick");
    assert!(picks.len() >= 2, "{} letters", picks.len());
    let chosen: BTreeSet<String> = picks[..2]
        .iter()
        .map(|p| p.attribute("value").expect("a letter id"))
        .collect();
    for pick in &picks[..2] {
        pick.click();
        assert_eq!(pick.property("checked"), json!(true));
    }
    browser.wait_for("#operator").send_keys("ops-alice");
    browser
        .wait_for("#reason")
        .send_keys("parser fixed in 2.4.1");
    assert!(!token_asked(&browser), "no token is asked before a write");
    browser.wait_for("#replay").click();
    give_token(&browser);
    notice(&browser, "ok", "2 letters replayed.");
    screenshot(&browser, "dead-letters-replayed");
    assert_no_console_errors(&browser, "/ui/dead-letters");

    // The API says so: both letters replayed (the replayed messages fail again as poison, so
    // each also has a new open letter), and an audit entry each, with who and why.
    let replayed = console.get("/v1/dead-letters?label=L3&status=replayed&limit=100");
    let ids: BTreeSet<String> = letters(&replayed)
        .map(|d| d["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ids, chosen, "{replayed}");
    let audit = console.get("/v1/audit?limit=100");
    let entries: Vec<&Value> = audit["audit"]
        .as_array()
        .expect("audit entries")
        .iter()
        .filter(|e| chosen.contains(e["message"].as_str().unwrap_or_default()))
        .collect();
    assert_eq!(entries.len(), 2, "{audit}");
    for e in entries {
        assert_eq!(e["action"], "replay", "{e}");
        assert_eq!(e["operator"], "ops-alice", "{e}");
        assert_eq!(e["reason"], "parser fixed in 2.4.1", "{e}");
    }
}

fn letters(page: &Value) -> impl Iterator<Item = &Value> {
    page["dead_letters"].as_array().expect("letters").iter()
}
