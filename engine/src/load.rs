//! From a directory to source files, and from a source file to its typed model.

use crate::diag::{Diagnostic, Pos, did_you_mean, line_starts, pos_of_offset};
use crate::model::RuleFile;
use crate::types::Version;
use crate::yaml_errors;
use crate::yaml_indent;
use crate::yaml_seek;
use crate::yaml_syntax;
use sha2::{Digest, Sha256};
use std::path::Path;
use std::{fs, io};

/// One file of a rule set: its name in the set, how to show it to a user, and its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceFile {
    /// The plain file name (`20-db.yaml`); with the bytes, what the version hashes.
    pub name: String,
    /// How diagnostics name it (`rules/20-db.yaml`, or the name of a pushed file).
    pub path: String,
    /// The raw bytes.
    pub bytes: Vec<u8>,
}

impl SourceFile {
    /// A file known by `name`, shown as `path`.
    pub fn new(
        name: impl Into<String>,
        path: impl Into<String>,
        bytes: impl Into<Vec<u8>>,
    ) -> Self {
        SourceFile {
            name: name.into(),
            path: path.into(),
            bytes: bytes.into(),
        }
    }

    /// The text, when the bytes are valid UTF-8.
    pub fn text(&self) -> Option<&str> {
        std::str::from_utf8(&self.bytes).ok()
    }
}

/// Whether `name` is a rule file name: `*.yaml` or `*.yml`, not hidden (editors' lock and
/// swap files start with a dot).
pub(crate) fn is_rule_file_name(name: &str) -> bool {
    !name.starts_with('.') && (name.ends_with(".yaml") || name.ends_with(".yml"))
}

/// Reads every rule file directly inside `dir`, in byte-wise order of their names.
///
/// Symlinks are followed, so a Kubernetes ConfigMap mount (`name -> ..data/name`) reads as
/// its current files. Subdirectories (`tests/`) and other entries are ignored.
pub fn read_dir(dir: &Path) -> io::Result<Vec<SourceFile>> {
    let mut files = Vec::new();
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        let path = entry.path();
        if !is_rule_file_name(&name) || !fs::metadata(&path)?.is_file() {
            continue;
        }
        let bytes = fs::read(&path)?;
        files.push(SourceFile::new(name, path.display().to_string(), bytes));
    }
    files.sort_by(|a, b| a.name.as_bytes().cmp(b.name.as_bytes()));
    Ok(files)
}

/// The version of a set: a hash of its file names and bytes, in name order.
///
/// The same files give the same version wherever they live; any edit gives a new one.
pub fn version_of(files: &[SourceFile]) -> Version {
    let mut sorted: Vec<&SourceFile> = files.iter().collect();
    sorted.sort_by(|a, b| a.name.as_bytes().cmp(b.name.as_bytes()));
    let mut hash = Sha256::new();
    for file in sorted {
        hash.update((file.name.len() as u64).to_le_bytes());
        hash.update(file.name.as_bytes());
        hash.update((file.bytes.len() as u64).to_le_bytes());
        hash.update(&file.bytes);
    }
    let digest = hash.finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    Version::from_hash(u64::from_be_bytes(first))
}

/// The text of `file` without its leading byte-order marks, or an error at the first byte
/// that is not UTF-8.
pub fn utf8_text(file: &SourceFile) -> Result<&str, Diagnostic> {
    let text = std::str::from_utf8(&file.bytes).map(without_leading_byte_order_marks);
    text.map_err(|e| {
        let valid = std::str::from_utf8(&file.bytes[..e.valid_up_to()]).unwrap_or_default();
        let valid = without_leading_byte_order_marks(valid);
        Diagnostic::error(
            &file.path,
            Some(pos_of_offset(valid, valid.len())),
            format!(
                "the file is not valid UTF-8 (bad byte 0x{:02x})",
                file.bytes[e.valid_up_to()]
            ),
        )
    })
}

/// `text` without the byte-order marks it starts with: the text that positions count in.
///
/// A byte-order mark is no character of line 1 to an editor, nor to a column here; YAML 1.2
/// allows several (a tool that adds one to a file that has one makes two), though libyaml
/// would read a second as a column of indentation.
pub fn without_leading_byte_order_marks(text: &str) -> &str {
    text.trim_start_matches('\u{feff}')
}

/// Deserialises a rule or test file into `T` ([`deserialize_yaml`]); a file with nothing but
/// comments and blank lines is an error of its own.
pub(crate) fn parse_yaml<T: serde::de::DeserializeOwned>(
    path: &str,
    text: &str,
) -> Result<T, Vec<Diagnostic>> {
    if text
        .lines()
        .all(|l| l.trim().is_empty() || l.trim_start().starts_with('#'))
    {
        return Err(vec![Diagnostic::error(
            path,
            Some(Pos::new(1, 1)),
            "the file is empty; a rule file starts with 'version: 1'",
        )]);
    }
    deserialize_yaml(path, text)
}

/// Deserialises a YAML document into `T`, turning serde's error into a diagnostic with the
/// position and, for a misspelt key, the nearest valid one ("did you mean"). Public for the
/// product's other YAML files (the configuration file), which want the same diagnostics.
///
/// serde stops at the first error. When that is an unknown key, the file is parsed again
/// with the key and its value blanked out (lines keep their numbers), so that every misspelt
/// key of the file is reported at once; the first error of any other kind ends the search,
/// since it may only follow from the blanking. The returned list is never empty.
///
/// A file nested deeper than 64 mappings and sequences is refused first, at the collection
/// that passes the bound, before serde_yaml parses it (its cost grows with the square of
/// the depth).
pub fn deserialize_yaml<T: serde::de::DeserializeOwned>(
    path: &str,
    text: &str,
) -> Result<T, Vec<Diagnostic>> {
    if let Some(too_deep) = crate::yaml_depth::too_deep(path, text) {
        return Err(vec![too_deep]);
    }
    let reparse = |text: &str| {
        serde_yaml::from_str::<T>(text)
            .map(drop)
            .map_err(|e| e.location().map(|l| Pos::new(l.line(), l.column())))
    };
    let first = match serde_yaml::from_str(text) {
        Ok(model) => return Ok(model),
        Err(e) => yaml_diagnostic(path, text, &e, &reparse),
    };
    let mut diags = vec![first];
    let mut text = text.to_owned();
    while diags.len() < MAX_UNKNOWN_KEYS {
        let last = diags.last().expect("at least the first error");
        let Some(pos) = last.pos().filter(|_| is_unknown_key(last)) else {
            break;
        };
        let Some(blanked) = blank_entry(&text, pos) else {
            break;
        };
        text = blanked;
        let Err(e) = serde_yaml::from_str::<T>(&text) else {
            break;
        };
        let next = yaml_diagnostic(path, &text, &e, &reparse);
        // Only further unknown keys, each after the last one reported.
        if !is_unknown_key(&next) || next.pos().is_none_or(|p| p <= pos) {
            break;
        }
        diags.push(next);
    }
    Err(diags)
}

/// How many unknown keys of one file are reported at most.
const MAX_UNKNOWN_KEYS: usize = 50;

fn is_unknown_key(d: &Diagnostic) -> bool {
    d.message.starts_with("unknown field '")
}

/// `text` with the block-mapping entry whose key starts at `key` made spaces (line ends
/// stay, so positions after it do not move). None if it cannot be cut out safely.
fn blank_entry(text: &str, key: Pos) -> Option<String> {
    let range = yaml_errors::entry_span(text, key)?;
    Some(
        text.chars()
            .enumerate()
            .map(|(i, c)| {
                if range.contains(&i) && c != '\n' && c != '\r' {
                    ' '
                } else {
                    c
                }
            })
            .collect(),
    )
}

/// Reads a rule file's model.
pub(crate) fn parse_rule_file(file: &SourceFile) -> Result<(RuleFile, &str), Vec<Diagnostic>> {
    let text = utf8_text(file).map_err(|d| vec![d])?;
    Ok((parse_yaml(&file.path, text)?, text))
}

fn yaml_diagnostic(
    path: &str,
    text: &str,
    err: &serde_yaml::Error,
    reparse: yaml_indent::Reparse<'_>,
) -> Diagnostic {
    let mut pos = err.location().map(|l| Pos::new(l.line(), l.column()));
    let mut message = err.to_string();
    if let Some(p) = pos {
        for suffix in [
            format!(" at line {} column {}", p.line, p.column),
            format!(" at position {}", err.location().map_or(0, |l| l.index())),
        ] {
            if let Some(at) = message.find(&suffix) {
                message.replace_range(at..at + suffix.len(), "");
            }
        }
    }
    // serde_yaml prefixes the path (`rules[0].retry: `, `defaults: `); the position already
    // says where.
    if let Some((prefix, rest)) = message.split_once(": ")
        && !prefix.is_empty()
        && prefix
            .chars()
            .all(|c| c.is_alphanumeric() || "_-.[]".contains(c))
    {
        message = rest.to_string();
    }
    let mut message = message.replace('`', "'");
    // serde_yaml puts a repeated key at its mapping, and a second document nowhere.
    if let Some(name) = message
        .strip_prefix("duplicate field '")
        .and_then(|rest| rest.strip_suffix('\''))
        && let Some(first) = pos
        && let Some(again) = yaml_errors::duplicate_key(text, first, name)
    {
        message = format!(
            "duplicate key '{name}': the mapping at line {}, column {} already has one",
            first.line, first.column
        );
        pos = Some(again);
    }
    if message.starts_with("deserializing from YAML containing more than one document") {
        message = "a second YAML document starts here; a rule file holds exactly one".into();
        pos = yaml_errors::second_document(text)
            .or_else(|| yaml_seek::second_document(text))
            .or(pos);
    }
    if let Some(at) = pos
        && let Some((plain, at)) = yaml_syntax::reword(text, at, &message, reparse)
    {
        message = plain;
        pos = Some(at);
    }
    let mut diag = Diagnostic::error(path, pos, message.clone());
    if let Some(help) = byte_order_mark_help(text, &message, pos).or(unknown_key_help(&message)) {
        diag = diag.with_help(help);
    }
    diag
}

/// A hint at a byte-order mark (U+FEFF) that likely caused a YAML error: one in the text the
/// message quotes, or one that starts a line up to the error's, which YAML reads as a column
/// of indentation. Editors show neither.
fn byte_order_mark_help(text: &str, message: &str, pos: Option<Pos>) -> Option<String> {
    const MARK: &str = "a byte-order mark (U+FEFF)";
    // serde quotes a string with the mark escaped.
    if message.contains('\u{feff}') || message.contains("\\u{feff}") {
        return Some(format!(
            "the quoted text holds {MARK}, which most editors do not show; delete it"
        ));
    }
    let line = line_starts(text)
        .take(pos?.line)
        .enumerate()
        .filter(|&(_, start)| {
            text[start..].strip_prefix('\u{feff}').is_some_and(|rest| {
                let end = rest.find(['\n', '\r', '\u{85}', '\u{2028}', '\u{2029}']);
                !rest[..end.unwrap_or(rest.len())].trim().is_empty()
            })
        })
        .map(|(i, _)| i + 1)
        .last()?;
    Some(format!(
        "line {line} starts with {MARK}, which YAML reads as a column of indentation and \
         most editors do not show; delete it"
    ))
}

/// "did you mean 'max_retries'?" for `unknown field 'max_retry', expected one of ...`.
fn unknown_key_help(message: &str) -> Option<String> {
    let rest = message
        .strip_prefix("unknown field '")
        .or_else(|| message.strip_prefix("unknown variant '"))?;
    let (key, expected) = rest.split_once("', expected ")?;
    // serde says `one of 'a', 'b', 'c'`, `'a' or 'b'`, or `'a'`.
    let candidates: Vec<&str> = expected
        .trim_start_matches("one of ")
        .split(", ")
        .flat_map(|c| c.split(" or "))
        .map(|c| c.trim_matches('\''))
        .collect();
    did_you_mean(key, &candidates).map(|best| format!("did you mean '{best}'?"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_depends_on_names_and_bytes_only() {
        let a = SourceFile::new("a.yaml", "rules/a.yaml", "version: 1\n");
        let a_elsewhere = SourceFile::new("a.yaml", "other/a.yaml", "version: 1\n");
        let renamed = SourceFile::new("b.yaml", "rules/b.yaml", "version: 1\n");
        let edited = SourceFile::new("a.yaml", "rules/a.yaml", "version: 1\n# note\n");
        let v = version_of(std::slice::from_ref(&a));
        assert_eq!(v, version_of(&[a_elsewhere]));
        assert_ne!(v, version_of(&[renamed]));
        assert_ne!(v, version_of(&[edited]));
    }

    #[test]
    fn unknown_keys_get_a_suggestion() {
        let text = "version: 1\nrules:\n  - id: x\n    retry:\n      max_retry: 3\n";
        let err = parse_yaml::<RuleFile>("r.yaml", text)
            .unwrap_err()
            .remove(0);
        assert_eq!((err.line, err.column), (Some(5), Some(7)), "{err}");
        assert!(
            err.message
                .starts_with("unknown field 'max_retry', expected one of 'max_retries'"),
            "{err}"
        );
        assert_eq!(err.help.as_deref(), Some("did you mean 'max_retries'?"));
    }

    #[test]
    fn unknown_keys_of_two_field_maps_get_a_suggestion_too() {
        let text = "version: 1\ndefaults:\n  dead_leter: X\n";
        let err = parse_yaml::<RuleFile>("r.yaml", text)
            .unwrap_err()
            .remove(0);
        assert_eq!((err.line, err.column), (Some(3), Some(3)), "{err}");
        assert_eq!(
            err.message,
            "unknown field 'dead_leter', expected 'retry' or 'dead_letter'"
        );
        assert_eq!(err.help.as_deref(), Some("did you mean 'dead_letter'?"));
    }

    #[test]
    fn every_misspelt_key_of_a_file_is_reported_at_once() {
        let text = "\
version: 1
rules:
  - id: one
    mach:
      code: X
    retry:
      max_retry: 5
      delays:
      - 1s
      - 2s
      max_elapsed: 1h
  - idd: two
    retry: { max_retries: 1 }
";
        let errs = parse_yaml::<RuleFile>("r.yaml", text).unwrap_err();
        let found: Vec<(usize, usize, &str)> = errs
            .iter()
            .map(|e| {
                (
                    e.line.unwrap(),
                    e.column.unwrap(),
                    e.help.as_deref().unwrap_or(""),
                )
            })
            .collect();
        assert_eq!(
            found,
            [
                (4, 5, "did you mean 'match'?"),
                (7, 7, "did you mean 'max_retries'?"),
                (8, 7, ""),
                (12, 5, "did you mean 'id'?"),
            ]
        );
    }

    #[test]
    fn the_search_stops_at_a_key_it_cannot_cut_out_or_another_kind_of_error() {
        // In a flow mapping: only the first.
        let flow = "version: 1\nrules:\n  - { id: a, mach: 1, retri: 2 }\n";
        assert_eq!(parse_yaml::<RuleFile>("r.yaml", flow).unwrap_err().len(), 1);
        // A type error after the unknown key is not reported: it may come from the blanking.
        let typed = "version: 1\nrules:\n  - id: a\n    mach: 1\n    retry: 3\n";
        let errs = parse_yaml::<RuleFile>("r.yaml", typed).unwrap_err();
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert!(errs[0].message.starts_with("unknown field 'mach'"));
    }

    #[test]
    fn a_crlf_blank_line_inside_a_blanked_value_gives_no_bogus_key() {
        let text = "version: 1\r\nrules:\r\n  - id: one\r\n    retry:\r\n      max_retries: 3\r\n    \
                    mach:\r\n      code: X\r\n\r\n      biz: Y\r\n";
        let errs = parse_yaml::<RuleFile>("r.yaml", text).unwrap_err();
        assert_eq!(errs.len(), 1, "{errs:?}");
    }

    #[test]
    fn a_key_of_a_multi_line_flow_mapping_is_not_cut_out() {
        let text = "version: 1\nrules:\n  - id: one\n    retry: { max_retries: 1,\n      mach: 2 }\n    \
                    dead_letter: L1\n  - idd: two\n";
        let errs = parse_yaml::<RuleFile>("r.yaml", text).unwrap_err();
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert!(errs[0].message.starts_with("unknown field 'mach'"));
    }

    #[test]
    fn a_byte_order_mark_moves_no_column() {
        for start in ["\u{feff}", "\u{feff}\u{feff}"] {
            let text = format!("{start}mach: 1\nversion: 1\n");
            let file = SourceFile::new("x.yaml", "x.yaml", text);
            let errs = parse_yaml::<RuleFile>("x.yaml", utf8_text(&file).unwrap()).unwrap_err();
            assert_eq!(
                (errs[0].line, errs[0].column),
                (Some(1), Some(1)),
                "{errs:?}"
            );
        }
        let file = SourceFile::new("x.yaml", "x.yaml", b"\xef\xbb\xbfversion: \xff\n".to_vec());
        let err = utf8_text(&file).unwrap_err();
        assert_eq!((err.line, err.column), (Some(1), Some(10)));
    }

    #[test]
    fn a_byte_order_mark_behind_a_yaml_error_is_pointed_out() {
        let indented = "# c\n\u{feff}version: 1\nrules: []\n";
        let err = parse_yaml::<RuleFile>("x.yaml", indented)
            .unwrap_err()
            .remove(0);
        assert_eq!((err.line, err.column), (Some(3), Some(1)), "{err}");
        assert!(err.message.starts_with("a second YAML document"), "{err}");
        let help = err.help.unwrap_or_default();
        assert!(
            help.starts_with("line 2 starts with a byte-order mark"),
            "{help}"
        );
        let quoted = "version: 1\nrules:\n  - \u{feff}id: a\n";
        let err = parse_yaml::<RuleFile>("x.yaml", quoted)
            .unwrap_err()
            .remove(0);
        assert_eq!((err.line, err.column), (Some(3), Some(5)), "{err}");
        let help = err.help.unwrap_or_default();
        assert!(
            help.starts_with("the quoted text holds a byte-order mark"),
            "{help}"
        );
    }

    #[test]
    fn a_file_nested_past_the_bound_is_refused_where_it_passes_it() {
        // A rule file whose `rules:` holds 100 sequences inside one another: the 65th
        // collection (the document's mapping is the first) opens at column 71 of line 2.
        let text = format!(
            "version: 1\nrules: {}{}\n",
            "[".repeat(100),
            "]".repeat(100)
        );
        let errs = parse_yaml::<RuleFile>("deep.yaml", &text).unwrap_err();
        assert_eq!(errs.len(), 1, "{errs:?}");
        let err = &errs[0];
        assert_eq!((err.line, err.column), (Some(2), Some(71)), "{err}");
        assert!(err.message.contains("nested too deeply"), "{err}");
    }

    #[test]
    fn bad_utf8_is_located() {
        let file = SourceFile::new("x.yaml", "x.yaml", b"version: 1\nrules: \xff\n".to_vec());
        let err = utf8_text(&file).unwrap_err();
        assert_eq!((err.line, err.column), (Some(2), Some(8)));
    }
}
