//! Every load-time error and warning of the spec, each from a real fixture file under
//! `tests/fixtures/errors/`, must name the file, line and column.

use rebound_engine::{Diagnostic, Severity, load_dir};
use std::path::Path;
use std::time::{Duration, Instant};

const FIXTURES: &str = "tests/fixtures/errors";

/// The diagnostics of loading a fixture set that must be rejected.
fn rejected(name: &str) -> Vec<Diagnostic> {
    let dir = Path::new(FIXTURES).join(name);
    match load_dir(&dir).expect("fixture directory is readable") {
        Ok(_) => panic!("{name}: the set loaded but must be rejected"),
        Err(rejected) => rejected.0,
    }
}

/// Where each diagnostic of a rejected fixture set is, as (line, column); every one has both.
fn places(name: &str) -> Vec<(usize, usize)> {
    rejected(name)
        .iter()
        .map(|d| match (d.line, d.column) {
            (Some(line), Some(column)) => (line, column),
            _ => panic!("{name}: no position in {d}"),
        })
        .collect()
}

/// Asserts the first error is at `file:line:col` and says `needle`.
fn assert_error(name: &str, file: &str, line: usize, column: usize, needle: &str) {
    let diags = rejected(name);
    let first = diags.iter().find(|d| d.is_error()).expect("an error");
    let prefix = format!("{FIXTURES}/{name}/{file}:{line}:{column}: error: ");
    let text = first.to_string();
    assert!(
        text.starts_with(&prefix),
        "{name}: expected prefix {prefix:?}, got {text:?}"
    );
    assert!(
        text.contains(needle),
        "{name}: expected {needle:?} in {text:?}"
    );
}

#[test]
fn yaml_syntax_error_is_located() {
    assert_error(
        "yaml-syntax",
        "rules.yaml",
        4,
        26,
        "did not find expected ',' or ']'",
    );
}

#[test]
fn yaml_syntax_errors_are_said_in_a_rule_authors_words() {
    assert_error(
        "yaml-tab",
        "rules.yaml",
        6,
        1,
        "tabs are not allowed for indentation; use spaces",
    );
    assert_error(
        "yaml-over-indented",
        "rules.yaml",
        7,
        6,
        "'backoff' at line 7 column 6 is indented less than 'max_retries' above it (column \
         7) but deeper than 'retry' (column 5); line it up with column 7",
    );
    assert_error(
        "yaml-unquoted-glob",
        "rules.yaml",
        6,
        13,
        "a value starting with '*' is a YAML alias: quote the glob, \"*DB_LOCK\"",
    );
}

#[test]
fn unknown_key_is_located_and_the_nearest_key_suggested() {
    assert_error(
        "unknown-key",
        "rules.yaml",
        6,
        7,
        "unknown field 'max_retry', expected one of 'max_retries'",
    );
    let diags = rejected("unknown-key");
    assert_eq!(
        diags[0].help.as_deref(),
        Some("did you mean 'max_retries'?")
    );
}

#[test]
fn every_misspelt_key_of_a_file_is_reported_at_once() {
    let found: Vec<String> = rejected("unknown-keys-several")
        .iter()
        .map(|d| {
            format!(
                "{}:{} {}",
                d.line.unwrap(),
                d.column.unwrap(),
                d.help.as_deref().unwrap_or("")
            )
        })
        .collect();
    assert_eq!(
        found,
        [
            "4:5 did you mean 'match'?",
            "6:7 did you mean 'max_retries'?",
            "12:7 did you mean 'backoff'?",
        ]
    );
}

#[test]
fn a_repeated_key_is_located_at_the_repeat() {
    assert_error(
        "duplicate-key",
        "rules.yaml",
        8,
        7,
        "duplicate key 'max_retries': the mapping at line 6, column 7 already has one",
    );
}

#[test]
fn a_second_document_is_located_at_its_marker() {
    assert_error(
        "two-documents",
        "rules.yaml",
        7,
        1,
        "a second YAML document starts here; a rule file holds exactly one",
    );
}

#[test]
fn a_files_errors_come_top_to_bottom() {
    assert_eq!(
        places("several-errors"),
        [(5, 13), (6, 12), (7, 16), (9, 25), (10, 9)]
    );
}

#[test]
fn rhai_errors_skip_anchors_and_tags_and_stay_at_an_alias() {
    // `&g attempt > 1 && atempt < 5`, then `*g`, then `!!str attempt > 1 && atempt < 5`.
    assert_eq!(places("rhai-anchored-guard"), [(4, 27), (7, 9), (10, 30)]);
}

#[test]
fn a_byte_order_mark_in_a_comment_loses_no_position() {
    assert_error("bom-in-comment", "rules.yaml", 6, 25, "bad duration '5q'");
}

#[test]
fn two_leading_byte_order_marks_move_no_column() {
    assert_error(
        "two-leading-boms",
        "rules.yaml",
        1,
        10,
        "unsupported version 2",
    );
    assert_eq!(places("two-leading-boms"), [(1, 10), (5, 25)]);
}

#[test]
fn byte_order_marks_inside_values_lose_no_position() {
    // The id, a code (valid, so no error), a duration, and a later value.
    assert_eq!(places("bom-in-value"), [(3, 9), (6, 25), (7, 20)]);
}

#[test]
fn a_line_indented_by_a_byte_order_mark_is_pointed_out() {
    assert_error(
        "bom-indents-a-line",
        "rules.yaml",
        3,
        1,
        "a second YAML document starts here",
    );
    let help = rejected("bom-indents-a-line")[0].help.clone();
    assert!(
        help.as_deref()
            .is_some_and(|h| h.starts_with("line 2 starts with a byte-order mark (U+FEFF)")),
        "{help:?}"
    );
}

#[test]
fn a_yaml_1_1_line_break_ends_a_line_for_every_position() {
    // Line 2 is a U+0085 (next line) alone, a line break to serde_yaml: `rules` is on line 3.
    assert_eq!(places("nel-line-break"), [(6, 25)]);
}

#[test]
fn errors_past_what_the_position_pass_reads_keep_their_place() {
    // The flow sequence's second line starts at column 1, which serde_yaml accepts and
    // saphyr-parser does not: the guard and the duration after it are located all the same.
    assert_eq!(places("flow-at-column-one"), [(7, 10), (9, 25)]);
}

#[test]
fn unknown_key_under_defaults_reads_like_any_other() {
    assert_error(
        "unknown-key-in-defaults",
        "rules.yaml",
        5,
        3,
        "error: unknown field 'dead_leter', expected 'retry' or 'dead_letter'",
    );
    let diags = rejected("unknown-key-in-defaults");
    assert_eq!(
        diags[0].help.as_deref(),
        Some("did you mean 'dead_letter'?")
    );
}

#[test]
fn duplicate_id_names_both_places() {
    assert_error(
        "duplicate-id",
        "20-b.yaml",
        5,
        9,
        "duplicate rule id 'same': first defined at tests/fixtures/errors/duplicate-id/10-a.yaml:3:9",
    );
}

#[test]
fn bad_duration_is_located() {
    assert_error(
        "bad-duration",
        "rules.yaml",
        5,
        25,
        "bad duration '5 parsecs'",
    );
}

#[test]
fn bad_glob_is_located() {
    assert_error("bad-glob", "rules.yaml", 5, 20, "bad glob 'PAY?'");
}

#[test]
fn bad_comparison_is_located() {
    assert_error(
        "bad-comparison",
        "rules.yaml",
        6,
        16,
        "bad comparison '=> 5'",
    );
}

#[test]
fn retry_together_with_give_up_is_an_error() {
    assert_error(
        "retry-and-give-up",
        "rules.yaml",
        6,
        5,
        "has both 'retry' and 'give_up: true'",
    );
}

#[test]
fn defaults_in_two_files_names_both() {
    assert_error(
        "defaults-twice",
        "10-b.yaml",
        3,
        1,
        "defaults are declared twice: here and at tests/fixtures/errors/defaults-twice/00-a.yaml:2:1",
    );
}

#[test]
fn unsupported_version_is_located() {
    assert_error("bad-version", "rules.yaml", 1, 10, "unsupported version 2");
}

#[test]
fn rhai_syntax_error_points_inside_the_expression() {
    assert_error("rhai-syntax", "rules.yaml", 4, 20, "the 'if' guard");
}

#[test]
fn rhai_type_error_is_located() {
    assert_error(
        "rhai-type",
        "rules.yaml",
        4,
        9,
        "yields an integer on the sample failure, expected a boolean",
    );
}

#[test]
fn rhai_unknown_variable_points_at_it() {
    assert_error("rhai-unknown-variable", "rules.yaml", 4, 37, "atempt");
}

#[test]
fn rhai_error_in_a_block_scalar_points_at_its_line() {
    assert_error("rhai-block-guard", "rules.yaml", 6, 9, "atempt");
}

#[test]
fn rhai_error_in_a_folded_scalar_points_at_its_line() {
    assert_error("rhai-folded-guard", "rules.yaml", 7, 7, "atempt");
}

#[test]
fn script_that_is_not_a_number_is_rejected() {
    assert_error(
        "script-type",
        "rules.yaml",
        5,
        26,
        "expected a number of milliseconds",
    );
}

#[test]
fn empty_id_is_an_error() {
    assert_error("empty-id", "rules.yaml", 3, 9, "the rule id is empty");
}

#[test]
fn reserved_id_defaults_is_an_error() {
    assert_error("reserved-id", "rules.yaml", 3, 9, "'defaults' is reserved");
}

#[test]
fn malformed_id_is_an_error() {
    assert_error(
        "bad-id",
        "rules.yaml",
        3,
        9,
        "bad rule id 'Payment Processing'",
    );
}

#[test]
fn file_that_is_not_utf8_is_located() {
    assert_error("not-utf8", "rules.yaml", 3, 12, "not valid UTF-8");
}

#[test]
fn empty_label_is_an_error() {
    assert_error(
        "empty-label",
        "rules.yaml",
        5,
        18,
        "the dead-letter label is empty",
    );
}

#[test]
fn backoff_with_two_kinds_is_an_error() {
    assert_error(
        "two-backoff-kinds",
        "rules.yaml",
        5,
        16,
        "the backoff has 2 kinds (fixed, linear)",
    );
}

#[test]
fn bad_jitter_is_an_error() {
    assert_error("bad-jitter", "rules.yaml", 5, 37, "bad jitter 'lots'");
}

#[test]
fn empty_file_is_an_error() {
    assert_error("empty-file", "rules.yaml", 1, 1, "the file is empty");
}

#[test]
fn alias_bombs_are_rejected_quickly() {
    for name in ["alias-bomb", "alias-bomb-toplevel"] {
        let started = Instant::now();
        let diags = rejected(name);
        assert!(diags.iter().any(Diagnostic::is_error), "{name}");
        // Not a speed target: a bomb that expanded would take minutes and gigabytes.
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{name} took {:?}",
            started.elapsed()
        );
    }
}

#[test]
fn one_error_rejects_the_whole_set() {
    // duplicate-id has a valid first file; nothing of the set is usable.
    assert!(!rejected("duplicate-id").is_empty());
}

fn warnings(name: &str) -> Vec<Diagnostic> {
    let dir = Path::new(FIXTURES).join(name);
    let set = load_dir(&dir)
        .unwrap()
        .expect("warnings do not reject a set");
    set.warnings().to_vec()
}

#[test]
fn shadowed_rule_warning_names_both_rules() {
    let w = warnings("warn-shadowed");
    assert_eq!(w.len(), 1, "{w:?}");
    assert_eq!(w[0].severity, Severity::Warning);
    let text = w[0].to_string();
    assert!(
        text.starts_with("tests/fixtures/errors/warn-shadowed/rules.yaml:6:5: warning: "),
        "{text}"
    );
    assert!(
        text.contains("'payment-processing'") && text.contains("'all-payments'"),
        "{text}"
    );
}

#[test]
fn a_glob_inside_an_earlier_glob_is_shadowed() {
    let w = warnings("warn-shadowed-glob");
    let texts: Vec<String> = w.iter().map(ToString::to_string).collect();
    let at = "tests/fixtures/errors/warn-shadowed-glob/rules.yaml";
    assert_eq!(texts.len(), 2, "{texts:?}");
    assert!(
        texts[0].starts_with(&format!(
            "{at}:6:5: warning: rule 'db-lock' can never decide: the earlier rule 'db-any'"
        )),
        "{texts:?}"
    );
    assert!(
        texts[1].starts_with(&format!(
            "{at}:9:5: warning: rule 'db-lock-wait' can never decide: the earlier rule 'db-any'"
        )),
        "{texts:?}"
    );
}

#[test]
fn jitter_that_can_exceed_an_hour_without_max_warns() {
    let w = warnings("warn-long-jitter");
    let hour = w
        .iter()
        .find(|d| d.message.contains("no 'max'"))
        .unwrap_or_else(|| panic!("no one-hour warning in {w:?}"));
    assert!(
        hour.to_string().starts_with(
            "tests/fixtures/errors/warn-long-jitter/rules.yaml:3:5: warning: rule 'drifting'"
        ),
        "{hour}"
    );
}

#[test]
fn shipped_rules_load_without_warnings() {
    let set = load_dir(Path::new("rules"))
        .unwrap()
        .expect("shipped rules are valid");
    assert!(set.warnings().is_empty(), "{:?}", set.warnings());
    assert!(set.rules().len() >= 8);
}
