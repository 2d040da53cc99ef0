//! The chart read back as XML, as a browser or an SVG tool would read it.

use crate::paths::{PathTable, RetryPath, retry_paths};
use std::path::Path;

/// The paths of the labels fixture: `payment-processing` (fixed 100ms × 3, L1 redrives 3
/// times after 10m), `db-lock` (exponential 1s ×2 max 30s, equal jitter, max_elapsed 2m),
/// `bad-payload` (give_up), then the defaults.
fn fixture() -> PathTable {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/labels");
    retry_paths(&crate::load_dir(&dir).unwrap().unwrap())
}

fn path<'a>(table: &'a PathTable, rule: &str) -> &'a RetryPath {
    table.paths.iter().find(|p| p.rule == rule).unwrap()
}

/// The texts of a document, in order.
fn texts(doc: &roxmltree::Document<'_>) -> Vec<String> {
    doc.descendants()
        .filter(|n| n.has_tag_name("text"))
        .map(|n| n.text().unwrap_or_default().to_string())
        .collect()
}

/// The `points` of the elements of class `class`, as (x, y) pairs.
fn shapes(doc: &roxmltree::Document<'_>, class: &str) -> Vec<Vec<(f64, f64)>> {
    doc.descendants()
        .filter(|n| n.attribute("class") == Some(class))
        .map(|n| {
            n.attribute("points")
                .unwrap()
                .split(' ')
                .map(|p| {
                    let (x, y) = p.split_once(',').unwrap();
                    (x.parse().unwrap(), y.parse().unwrap())
                })
                .collect()
        })
        .collect()
}

/// The y of each tick label, by its text.
fn tick_ys(doc: &roxmltree::Document<'_>) -> Vec<(String, f64)> {
    doc.descendants()
        .filter(|n| n.has_tag_name("text") && n.attribute("text-anchor") == Some("end"))
        .map(|n| {
            let y: f64 = n.attribute("y").unwrap().parse().unwrap();
            (n.text().unwrap().to_string(), y - 4.0)
        })
        .collect()
}

#[test]
fn a_rule_id_and_label_with_markup_are_escaped_and_the_chart_still_parses() {
    let mut p = path(&fixture(), "db-lock").clone();
    p.rule = "a<b>&c\"d'".into();
    p.end.dead_letter = "<L2 & co>".into();
    p.notes.push("</desc><script>alert(1)</script>".into());
    let svg = p.to_svg();
    assert!(!svg.contains("<script"), "{svg}");
    let doc = roxmltree::Document::parse(&svg).expect("the chart is XML");
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "svg");
    assert_eq!(
        root.tag_name().namespace(),
        Some("http://www.w3.org/2000/svg")
    );
    let title = root.children().find(|n| n.has_tag_name("title")).unwrap();
    assert_eq!(title.text(), Some("a<b>&c\"d'"));
    let texts = texts(&doc);
    assert_eq!(texts[0], "a<b>&c\"d'", "the visible title: {texts:?}");
    assert!(
        texts
            .iter()
            .any(|t| t.starts_with("ends: <L2 & co> after 5 retries")),
        "{texts:?}"
    );
    let desc = root.children().find(|n| n.has_tag_name("desc")).unwrap();
    assert!(desc.text().unwrap().contains("<script>alert(1)</script>"));
}

#[test]
fn the_delay_axis_is_log_scale_with_round_ticks_and_every_value_on_it() {
    let svg = path(&fixture(), "db-lock").to_svg();
    let doc = roxmltree::Document::parse(&svg).unwrap();
    let ticks = tick_ys(&doc);
    let labels: Vec<&str> = ticks.iter().map(|(t, _)| t.as_str()).collect();
    // Delays from 500 ms (equal jitter on 1 s) to a worst-case total of 31 s.
    assert_eq!(
        labels,
        ["500 ms", "1 s", "2 s", "5 s", "10 s", "30 s", "1 min"],
        "{svg}"
    );
    // Log scale: every doubling is the same distance.
    let gap = |a: usize, b: usize| ticks[a].1 - ticks[b].1;
    assert!((gap(0, 1) - gap(1, 2)).abs() < 0.2, "{ticks:?}");
    assert!((gap(3, 4) - gap(1, 2)).abs() < 0.2, "{ticks:?}");
    assert!(gap(5, 6) < gap(4, 5), "×2 is shorter than ×3: {ticks:?}");
    let names = texts(&doc);
    assert!(names.contains(&"delay and total wait (log scale)".to_string()));
    assert!(names.contains(&"retry number".to_string()));
}

#[test]
fn the_band_spans_each_retrys_jitter_range_and_the_line_climbs_with_the_total() {
    let table = fixture();
    let p = path(&table, "db-lock");
    let doc_text = p.to_svg();
    let doc = roxmltree::Document::parse(&doc_text).unwrap();
    let bands = shapes(&doc, "band");
    assert_eq!(bands.len(), 1, "one pass, one band");
    let band = &bands[0];
    let ticks = tick_ys(&doc);
    let n = p.retries.len();
    assert_eq!(band.len(), 4 * n);
    // Top edge left to right (max delays), then the bottom edge back (min delays).
    for (i, r) in p.retries.iter().enumerate() {
        let top = band[2 * i].1;
        let bottom = band[4 * n - 1 - 2 * i].1;
        assert_eq!(r.delay_max_ms, 2 * r.delay_min_ms, "equal jitter: {r:?}");
        // A factor 2 on the log axis: as tall as from the 500 ms tick to the 1 s one.
        let doubling = ticks[0].1 - ticks[1].1;
        assert!(
            ((bottom - top) - doubling).abs() < 0.2,
            "retry {}: {top}..{bottom}, a doubling is {doubling}",
            r.retry
        );
    }
    let line = &shapes(&doc, "worst-case")[0];
    assert_eq!(line.len(), n);
    assert!(line.windows(2).all(|w| w[1].1 <= w[0].1), "{line:?}");
}

#[test]
fn redrives_follow_as_passes_with_their_own_band_and_a_named_rule() {
    let table = fixture();
    let p = path(&table, "payment-processing");
    let svg = p.to_svg();
    let doc = roxmltree::Document::parse(&svg).unwrap();
    // The path and its three replays; fixed 100 ms has no jitter: each band is a line.
    let bands = shapes(&doc, "band");
    assert_eq!(bands.len(), 4);
    assert!(bands.iter().flatten().all(|(_, y)| *y == bands[0][0].1));
    assert_eq!(shapes(&doc, "worst-case")[0].len(), 12);
    let texts = texts(&doc);
    for n in 1..=3 {
        assert!(texts.contains(&format!("redrive {n}/3")), "{texts:?}");
    }
    assert!(texts.contains(&"after 10m".to_string()));
    assert!(texts.contains(&"retry number (each redrive counts from 1 again)".to_string()));
    assert!(
        texts
            .iter()
            .any(|t| t.starts_with("redriven 3 × after 10m")),
        "{texts:?}"
    );
    // Retry numbers start from 1 again in each pass.
    let ones = texts.iter().filter(|t| *t == "1").count();
    assert_eq!(ones, 4, "{texts:?}");
}

#[test]
fn a_path_without_retries_says_so_on_labelled_axes() {
    let svg = path(&fixture(), "bad-payload").to_svg();
    let doc = roxmltree::Document::parse(&svg).unwrap();
    let texts = texts(&doc);
    assert_eq!(texts[0], "bad-payload");
    assert!(texts.contains(&"give_up: dead-lettered at once".to_string()));
    assert!(texts.contains(&"ends: L3 at once (give_up)".to_string()));
    assert!(texts.iter().any(|t| t.starts_with("no retry")));
    assert!(texts.contains(&"retry number".to_string()));
    assert!(shapes(&doc, "band").is_empty());
}
