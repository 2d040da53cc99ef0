//! `/ui/rules/history`: every reload, newest first; two accepted versions picked, and the diff
//! between their files (from `GET /v1/rules/history/{version}`) shows what was taken out and
//! what was put in, file by file.

use super::check::{assert_no_console_errors, confirm, give_token, open, screenshot};
use super::server::Console;
use super::webdriver::Browser;
use serde_json::Value;
use std::collections::BTreeSet;

const FILE: &str = "50-labels.yaml";

#[test]
fn two_picked_versions_show_their_diff() {
    let console = Console::start();
    let (first, files) = console.rules();
    let original = files[FILE].as_str().expect("the labels file").to_owned();
    assert!(original.contains("    sla: 2h\n") && original.contains("    sla: 15m\n"));
    // Two pushes, one line each.
    let mut second_files = files.clone();
    second_files.insert(FILE.into(), original.replace("sla: 2h", "sla: 3h").into());
    let second = console.push(&second_files);
    let mut third_files = second_files.clone();
    let third_text = third_files[FILE]
        .as_str()
        .unwrap()
        .replace("sla: 15m", "sla: 30m");
    third_files.insert(FILE.into(), Value::from(third_text));
    let third = console.push(&third_files);

    let browser = Browser::start(1280, 800);
    open(
        &browser,
        &console,
        "/ui/rules/history",
        &format!("document.querySelector(\"input[name=to][value='{third}']\")"),
    );
    // From the first version to the third: both pushes' changes.
    browser
        .wait_for(&format!("input[name=from][value='{first}']"))
        .click();
    browser
        .wait_for(&format!("input[name=to][value='{third}']"))
        .click();
    browser.wait_for("#compare").click();
    let diff = browser.wait_for("#diff pre.diff");
    let heading = browser.wait_for("#diff h2").text();
    assert_eq!(heading, format!("From {first} to {third}"));
    let files: Vec<String> = browser
        .find_all("#diff h2")
        .iter()
        .skip(1)
        .map(|h| h.text())
        .collect();
    assert_eq!(files, [FILE], "only the labels file changed");
    let lines = |kind: &str| -> BTreeSet<String> {
        diff.find_all(&format!("span.{kind}"))
            .iter()
            .map(|s| s.text())
            .collect()
    };
    assert_eq!(
        lines("del"),
        ["-     sla: 15m", "-     sla: 2h"].map(String::from).into()
    );
    assert_eq!(
        lines("add"),
        ["+     sla: 30m", "+     sla: 3h"].map(String::from).into()
    );
    assert!(lines("same").len() > 5, "the rest of the file, unchanged");
    screenshot(&browser, "history-diff");

    // The newest against the one before is the default pick.
    browser.goto(&console.url("/ui/rules/history"));
    browser.wait_for("#compare").click();
    browser.wait_for("#diff pre.diff");
    assert_eq!(
        browser.wait_for("#diff h2").text(),
        format!("From {second} to {third}")
    );
    assert_no_console_errors(&browser, "/ui/rules/history");

    // Back two steps at once: the first version's button rolls the set back to it.
    browser
        .wait_for(&format!("button.rollback-to[data-version='{first}']"))
        .click();
    confirm(&browser, &format!("to version {first}"));
    give_token(&browser);
    let mut now = String::new();
    for _ in 0..100 {
        now = console.rules().0;
        if now == first {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(now, first, "the rollback to {first} took effect");
    let history = console.get("/v1/rules/history");
    assert_eq!(history[0]["source"], "rollback", "{history:#}");
}
