//! `rebound fmt` on files with a `labels:` section: the spec's example is left as it is, a
//! messy one gets the spec's key order and a flow `redrive`, and both mean what they meant.

use super::{FileKind, format, same_decisions};
use crate::{SourceFile, compile};
use std::path::Path;

fn fixture(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/labels")
        .join(name);
    std::fs::read_to_string(path).unwrap()
}

fn set(text: &str) -> crate::CompiledSet {
    let rules = fixture("10-rules.yaml");
    compile(vec![
        SourceFile::new("10-rules.yaml", "10-rules.yaml", rules),
        SourceFile::new("20-labels.yaml", "20-labels.yaml", text),
    ])
    .unwrap()
}

#[test]
fn fmt_keeps_the_spec_labels_example_as_it_is() {
    let text = fixture("20-labels.yaml");
    assert_eq!(format(&text, FileKind::Rules).unwrap(), text);
}

#[test]
fn fmt_orders_label_keys_and_flows_redrive_without_changing_what_they_say() {
    let messy = "\
labels:
  L1:
    sla: 1h
    # replayed automatically
    redrive:
      max: 3
      after: 10m
    description:   transient trouble
  payment-dlq:
    expire: 30d
    alert: oncall
version: 1
rules: []
";
    let tidy = "\
version: 1
rules: []
labels:
  L1:
    description: transient trouble
    # replayed automatically
    redrive: { after: 10m, max: 3 }
    sla: 1h
  payment-dlq:
    alert: oncall
    expire: 30d
";
    let formatted = format(messy, FileKind::Rules).unwrap();
    assert_eq!(formatted, tidy);
    assert_eq!(format(tidy, FileKind::Rules).unwrap(), tidy);
    assert_eq!(same_decisions(&set(messy), &set(&formatted)), Ok(()));
}
