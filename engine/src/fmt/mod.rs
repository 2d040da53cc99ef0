//! `rebound fmt`: canonical formatting of rule files and rule-test files, on their text.
//!
//! The formatter never re-emits YAML from a tree (that would lose comments). It edits lines:
//! line endings become `\n`, trailing whitespace goes, `key:   value` becomes `key: value`,
//! runs of blank lines become one and the file ends with one newline; the keys of the top
//! level, of `defaults`, of each rule (and its `retry` and `match`) and of each test case or
//! path move into the order the spec shows, each with the comment lines directly above it;
//! and short block maps under `backoff`, `redrive`, `given` and `expect` become flow maps
//! `{ a: 1, b: 2 }` when they hold no comment and fit in 100 columns, as does each entry of
//! `heat.weights` (`- { code: "NET_*", weight: 3 }`, `heat.rs`).
//!
//! Safety comes from one rule: every edit is tried on its own and kept only when the file
//! still parses to the same YAML value as the original (mapping key order aside, which the
//! models ignore). So anything the line model does not understand (anchors, block scalars
//! in a moved part, multi-line flow) is left as it was. [`same_decisions`] is the second,
//! set-level check that `rebound fmt` runs before it writes anything.

mod equivalence;
mod heat;
mod lines;

pub use equivalence::{Disagreement, same_decisions};

/// What a file holds, which decides the key orders it is formatted to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// A rule file (`rules/*.yaml`).
    Rules,
    /// A rule-test file (`rules/tests/*.yaml`).
    Tests,
}

/// Why a file cannot be formatted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FmtError {
    /// The file is not one YAML document (the formatter leaves broken files to `check`).
    #[error("not valid YAML: {0}")]
    NotYaml(String),
}

/// The canonical form of `text`, a file of `kind`. Formatting a formatted file changes
/// nothing, and the result always parses to the same YAML value as `text`.
///
/// ```
/// use rebound_engine::fmt::{FileKind, format};
/// let messy = "version: 1\nrules:\n  - dead_letter: L1   \n    id: a\n    retry:\n      backoff:\n        fixed: 1s\n";
/// let tidy = "version: 1\nrules:\n  - id: a\n    retry:\n      backoff: { fixed: 1s }\n    dead_letter: L1\n";
/// assert_eq!(format(messy, FileKind::Rules).unwrap(), tidy);
/// assert_eq!(format(tidy, FileKind::Rules).unwrap(), tidy);
/// ```
pub fn format(text: &str, kind: FileKind) -> Result<String, FmtError> {
    lines::format(text, kind)
}

#[cfg(test)]
mod labels_tests;
#[cfg(test)]
mod props;
