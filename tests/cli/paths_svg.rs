//! `rebound paths --svg DIR`: one chart per rule of the shipped rules and one for the
//! defaults, each an SVG document titled with its rule id; the table is still printed; a
//! directory that cannot be made is an error that names it.

use assert_cmd::Command;
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn shipped() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("rules")
}

fn paths(args: &[&str], svg: &Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_rebound"))
        .arg("paths")
        .args(args)
        .arg("--rules")
        .arg(shipped())
        .arg("--svg")
        .arg(svg)
        .output()
        .unwrap()
}

/// The rule ids of the shipped rule files, read from the YAML itself.
fn rule_ids() -> BTreeSet<String> {
    let mut ids = BTreeSet::new();
    for entry in std::fs::read_dir(shipped()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "yaml") {
            continue;
        }
        let doc: serde_yaml::Value =
            serde_yaml::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        for rule in doc["rules"].as_sequence().into_iter().flatten() {
            ids.insert(rule["id"].as_str().unwrap().to_string());
        }
    }
    ids
}

#[test]
fn every_shipped_rule_and_the_defaults_get_a_chart_that_parses_and_names_its_rule() {
    let out_dir = tempfile::tempdir().unwrap();
    // A directory that does not exist yet, two levels down.
    let dir = out_dir.path().join("charts/paths");
    let out = paths(&[], &dir);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    // The table is printed as without --svg.
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.starts_with("Retry paths of rule set "), "{stdout}");

    let mut expected = rule_ids();
    assert!(expected.len() >= 5, "{expected:?}");
    expected.insert("defaults".to_string());
    let written: BTreeSet<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    let wanted: BTreeSet<String> = expected.iter().map(|id| format!("{id}.svg")).collect();
    assert_eq!(written, wanted);
    assert!(
        stderr.contains(&format!("wrote {} charts into", wanted.len())),
        "{stderr}"
    );

    for id in &expected {
        let text = std::fs::read_to_string(dir.join(format!("{id}.svg"))).unwrap();
        let doc = roxmltree::Document::parse(&text)
            .unwrap_or_else(|e| panic!("{id}.svg is not XML: {e}\n{text}"));
        let root = doc.root_element();
        assert_eq!(root.tag_name().name(), "svg", "{id}");
        assert_eq!(
            root.tag_name().namespace(),
            Some("http://www.w3.org/2000/svg")
        );
        let title = root.children().find(|n| n.has_tag_name("title"));
        assert_eq!(title.and_then(|t| t.text()), Some(id.as_str()), "{id}");
        let texts: Vec<&str> = doc
            .descendants()
            .filter(|n| n.has_tag_name("text"))
            .filter_map(|n| n.text())
            .collect();
        assert_eq!(texts.first(), Some(&id.as_str()), "the visible title");
        assert!(
            texts.iter().any(|t| t.starts_with("ends: ")),
            "{id}: {texts:?}"
        );
        assert!(!text.contains("<script"), "{id}");
    }
}

#[test]
fn with_json_stdout_is_still_the_one_document() {
    let dir = tempfile::tempdir().unwrap();
    let out = paths(&["--json"], dir.path());
    assert_eq!(out.status.code(), Some(0));
    let doc: Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    let n = doc["paths"].as_array().unwrap().len();
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), n);
}

#[test]
fn a_directory_that_cannot_be_made_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let blocker = dir.path().join("taken");
    std::fs::write(&blocker, "a file, not a directory").unwrap();
    let target = blocker.join("charts");
    let out = paths(&[], &target);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "cannot create the chart directory {}",
            target.display()
        )),
        "{stderr}"
    );
    assert!(out.stdout.is_empty(), "nothing printed after the error");
}
