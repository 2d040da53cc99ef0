//! Every page of the console, checked by axe-core (vendored in `axe/`, see its README) in the
//! headless Chromium: no violation of impact `serious` or `critical` on any of the nine pages,
//! as an operator first sees them (with letters, history, a message with failures), and none
//! at all of the rules the console once broke ([`ONCE_BROKEN`]).
//!
//! Badges whose state the run may not reach (a half-open breaker) are checked too: each badge
//! style is shown once beside the overview's own before axe looks at it, so a colour that
//! fails contrast fails here whatever state the run is in.

use super::check::open;
use super::pages::{PAGES, replayed_letter, wait_for_charts};
use super::server::Console;
use super::webdriver::Browser;
use serde_json::{Value, json};

/// axe-core 4.11.4, unmodified (MPL-2.0).
const AXE: &str = include_str!("axe/axe.min.js");

/// Rules the console once broke, refused at any impact (axe rates the last two moderate and
/// minor): the badges' contrast, the rules page's two unnamed navigation landmarks, and the
/// heading-less checkbox and button columns of the history, dead letters and retries.
const ONCE_BROKEN: &[&str] = &["color-contrast", "landmark-unique", "empty-table-header"];

/// Every badge style the stylesheet has, with a word each would show.
const BADGES: &[(&str, &str)] = &[
    ("badge ok", "closed"),
    ("badge state-closed", "closed"),
    ("badge state-half_open", "half_open"),
    ("badge warn", "half_open"),
    ("badge state-open", "open"),
    ("badge bad", "overdue"),
    ("badge", "accepted"),
];

/// The serious and critical violations axe finds on the page shown, and those of
/// [`ONCE_BROKEN`], one line each with the elements it names.
fn violations(browser: &Browser) -> Vec<String> {
    let script = format!(
        "const done = arguments[arguments.length - 1];
         {AXE}
         axe.run(document, {{ resultTypes: ['violations'] }})
           .then((r) => done(r.violations))
           .catch((e) => done({{ error: String(e) }}));"
    );
    let found = browser.execute_async(&script, json!([]));
    assert!(found.get("error").is_none(), "axe-core failed: {found}");
    found
        .as_array()
        .expect("a list of violations")
        .iter()
        .filter(|v| {
            matches!(v["impact"].as_str(), Some("serious" | "critical"))
                || ONCE_BROKEN.contains(&v["id"].as_str().unwrap_or(""))
        })
        .map(|v| {
            let nodes: Vec<String> = v["nodes"]
                .as_array()
                .into_iter()
                .flatten()
                .take(5)
                .map(|n| {
                    format!(
                        "{} ({})",
                        n["target"],
                        n["failureSummary"].as_str().unwrap_or("")
                    )
                })
                .collect();
            format!(
                "{} [{}]: {} on {}",
                v["id"].as_str().unwrap_or("?"),
                v["impact"].as_str().unwrap_or("?"),
                v["help"].as_str().unwrap_or(""),
                nodes.join("; ")
            )
        })
        .collect()
}

#[test]
fn no_page_has_a_serious_or_critical_accessibility_violation() {
    let console = Console::start();
    let letter = replayed_letter(&console);
    let browser = Browser::start(1280, 800);
    let mut found = Vec::new();
    for (path, name, ready) in PAGES {
        let path = path.replace("{id}", &letter);
        open(&browser, &console, &path, ready);
        if *name == "paths" {
            wait_for_charts(&browser);
        }
        if *name == "overview" {
            // Outside #app, which each refresh replaces.
            let shown = browser.execute(
                "const box = document.createElement('p');
                 box.id = 'every-badge';
                 for (const [cls, word] of arguments[0]) {
                   const b = document.createElement('span');
                   b.className = cls;
                   b.textContent = word;
                   box.append(b, ' ');
                 }
                 document.querySelector('main').append(box);
                 return box.children.length;",
                json!([BADGES]),
            );
            assert_eq!(shown, Value::from(BADGES.len()));
        }
        for v in violations(&browser) {
            found.push(format!("{path}: {v}"));
        }
    }
    assert!(
        found.is_empty(),
        "serious or critical accessibility violations:\n{}",
        found.join("\n")
    );
}
