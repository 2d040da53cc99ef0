//! `/ui/paths`: one chart per rule of the set in force (and one for the defaults), each loaded
//! by the browser (an image that failed to load or to parse has no width), and each chart an
//! SVG document that names its rule. (`tests/cli/paths_svg.rs` checks `paths --svg`'s files.)

use super::check::{assert_no_console_errors, open, screenshot};
use super::pages::wait_for_charts;
use super::server::Console;
use super::webdriver::Browser;
use std::collections::BTreeSet;

/// The rule ids of the run's rule files, read from the YAML itself.
fn rule_ids(console: &Console) -> BTreeSet<String> {
    let mut ids = BTreeSet::new();
    for entry in std::fs::read_dir(console.rules.path()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "yaml") {
            continue;
        }
        let doc: serde_yaml::Value =
            serde_yaml::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        for rule in doc["rules"].as_sequence().into_iter().flatten() {
            ids.insert(rule["id"].as_str().unwrap().to_owned());
        }
    }
    ids
}

#[test]
fn the_paths_page_shows_one_loaded_chart_per_rule() {
    let console = Console::start();
    let mut expected = rule_ids(&console);
    assert!(expected.len() >= 5, "{expected:?}");
    expected.insert("defaults".to_owned());
    let browser = Browser::start(1280, 800);
    open(
        &browser,
        &console,
        "/ui/paths",
        "document.querySelectorAll('#paths figure').length > 0",
    );
    let figures = browser.find_all("#paths figure");
    let shown: Vec<String> = figures
        .iter()
        .map(|f| f.attribute("data-rule").expect("a rule"))
        .collect();
    assert_eq!(shown.len(), expected.len(), "one chart each: {shown:?}");
    assert_eq!(shown.iter().cloned().collect::<BTreeSet<_>>(), expected);
    wait_for_charts(&browser);
    for figure in &figures {
        let rule = figure.attribute("data-rule").unwrap();
        let img = &figure.find_all("img")[0];
        assert!(
            img.property("naturalWidth").as_u64().unwrap_or(0) > 0,
            "{rule}'s chart did not load"
        );
        let src = img.attribute("src").expect("a source");
        assert_eq!(src, format!("/v1/paths/{rule}.svg"));
        let (status, headers, svg) = console.fetch(&src);
        assert_eq!(status, 200, "{src}");
        assert_eq!(headers["content-type"], "image/svg+xml", "{src}");
        let doc =
            roxmltree::Document::parse(&svg).unwrap_or_else(|e| panic!("{src} is not XML: {e}"));
        assert_eq!(doc.root_element().tag_name().name(), "svg", "{src}");
        assert!(
            doc.descendants().any(|n| n.text() == Some(rule.as_str())),
            "{src} names its rule"
        );
    }
    assert_no_console_errors(&browser, "/ui/paths");
    browser.execute("window.scrollTo(0, 0)", serde_json::json!([]));
    screenshot(&browser, "paths-loaded");
}
