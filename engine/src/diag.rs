//! Diagnostics: what a rule author reads when a file is wrong.
//!
//! Every problem the loader finds becomes a [`Diagnostic`] that names the file and, where the
//! input has one, the line and column (both 1-based). Its `Display` is the one-line form the
//! CLI prints: `rules/20-db.yaml:14:7: error: unknown field 'max_retry', ...`.

use serde::Serialize;
use std::fmt;

/// How bad a diagnostic is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Rejects the whole set.
    Error,
    /// The set still loads; `rebound check --strict` turns it into an error.
    Warning,
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        })
    }
}

/// A 1-based line and column in a source file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Pos {
    /// 1-based line.
    pub line: usize,
    /// 1-based column, in characters.
    pub column: usize,
}

impl Pos {
    /// A position from a 1-based line and column.
    pub const fn new(line: usize, column: usize) -> Pos {
        Pos { line, column }
    }
}

impl fmt::Display for Pos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.column)
    }
}

/// One problem in a rule set or a test file.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Diagnostic {
    /// The file as the user named it (`rules/20-db.yaml`), or the pushed file name.
    pub file: String,
    /// 1-based line, when the problem has a place in the file.
    pub line: Option<usize>,
    /// 1-based column, when the problem has a place in the file.
    pub column: Option<usize>,
    /// Error or warning.
    pub severity: Severity,
    /// What is wrong and what was expected.
    pub message: String,
    /// A hint, such as the nearest valid key for a misspelt one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub help: Option<String>,
}

impl Diagnostic {
    /// An error at `pos` (or for the whole file when `pos` is `None`).
    pub fn error(file: impl Into<String>, pos: Option<Pos>, message: impl Into<String>) -> Self {
        Self::new(Severity::Error, file.into(), pos, message.into())
    }

    /// A warning at `pos` (or for the whole file when `pos` is `None`).
    pub fn warning(file: impl Into<String>, pos: Option<Pos>, message: impl Into<String>) -> Self {
        Self::new(Severity::Warning, file.into(), pos, message.into())
    }

    fn new(severity: Severity, file: String, pos: Option<Pos>, message: String) -> Self {
        Diagnostic {
            file,
            line: pos.map(|p| p.line),
            column: pos.map(|p| p.column),
            severity,
            message,
            help: None,
        }
    }

    /// The same diagnostic with a hint attached.
    pub fn with_help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }

    /// The position, when the diagnostic has one.
    pub fn pos(&self) -> Option<Pos> {
        Some(Pos::new(self.line?, self.column?))
    }

    /// True for errors.
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.file)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
            if let Some(column) = self.column {
                write!(f, ":{column}")?;
            }
        }
        write!(f, ": {}: {}", self.severity, self.message)
    }
}

/// The diagnostics of a set that failed to load: errors first, in file order.
#[derive(Debug, Clone, PartialEq, Serialize, thiserror::Error)]
#[error("{}", render_all(.0))]
pub struct Rejected(pub Vec<Diagnostic>);

impl Rejected {
    /// Only the errors.
    pub fn errors(&self) -> impl Iterator<Item = &Diagnostic> {
        self.0.iter().filter(|d| d.is_error())
    }
}

fn render_all(diags: &[Diagnostic]) -> String {
    diags
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("\n")
}

/// The key among `candidates` nearest to a misspelt `key`, if one is close enough to suggest.
pub(crate) fn did_you_mean<'a>(key: &str, candidates: &[&'a str]) -> Option<&'a str> {
    candidates
        .iter()
        .map(|c| (strsim::jaro_winkler(key, c), *c))
        .filter(|(score, _)| *score > 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, c)| c)
}

/// The byte offsets where the lines of `text` start, the first at 0.
///
/// A line ends at `\n`, at a `\r` that no `\n` follows, and at U+0085, U+2028 and U+2029:
/// the line breaks of YAML 1.1, which libyaml (and so serde_yaml) reads and which the
/// positions pass is made to read too. Every line of a diagnostic is counted this way.
pub(crate) fn line_starts(text: &str) -> impl Iterator<Item = usize> + '_ {
    let ends = text.char_indices().filter_map(move |(i, c)| {
        let next = i + c.len_utf8();
        let ends = match c {
            '\n' | '\u{85}' | '\u{2028}' | '\u{2029}' => true,
            '\r' => !text[next..].starts_with('\n'),
            _ => false,
        };
        ends.then_some(next)
    });
    std::iter::once(0).chain(ends)
}

/// 1-based line and column of byte offset `offset` in `text`.
pub(crate) fn pos_of_offset(text: &str, offset: usize) -> Pos {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let (line, start) = line_starts(text)
        .take_while(|&start| start <= offset)
        .enumerate()
        .last()
        .unwrap_or((0, 0));
    Pos::new(line + 1, text[start..offset].chars().count() + 1)
}

/// The byte offset of `pos` (1-based line and column, in characters) in `text`; a column
/// past the end of its line runs on into the next. `None` past the last line.
pub fn offset_of_pos(text: &str, pos: Pos) -> Option<usize> {
    let start = line_starts(text).nth(pos.line.checked_sub(1)?)?;
    let within: usize = text[start..]
        .chars()
        .take(pos.column.checked_sub(1)?)
        .map(char::len_utf8)
        .sum();
    Some(start + within)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_form_names_file_line_and_column() {
        let d = Diagnostic::error("rules/20-db.yaml", Some(Pos::new(14, 7)), "bad");
        assert_eq!(d.to_string(), "rules/20-db.yaml:14:7: error: bad");
        let w = Diagnostic::warning("a.yaml", None, "meh");
        assert_eq!(w.to_string(), "a.yaml: warning: meh");
    }

    #[test]
    fn suggests_the_nearest_key() {
        let keys = ["max_retries", "max_elapsed", "backoff"];
        assert_eq!(did_you_mean("max_retry", &keys), Some("max_retries"));
        assert_eq!(did_you_mean("zzz", &keys), None);
    }

    #[test]
    fn offsets_become_line_and_column() {
        let t = "ab\ncd\né";
        assert_eq!(pos_of_offset(t, 0), Pos::new(1, 1));
        assert_eq!(pos_of_offset(t, 4), Pos::new(2, 2));
        assert_eq!(pos_of_offset(t, 6), Pos::new(3, 1));
    }

    #[test]
    fn lines_end_where_yaml_ends_them() {
        let t = "a\r\nb\rc\u{85}d\u{2028}é\u{2029}f\n";
        let starts: Vec<usize> = line_starts(t).collect();
        assert_eq!(starts, [0, 3, 5, 8, 12, 17, 19]);
        for (i, &start) in starts.iter().enumerate() {
            assert_eq!(pos_of_offset(t, start), Pos::new(i + 1, 1));
            assert_eq!(offset_of_pos(t, Pos::new(i + 1, 1)), Some(start));
        }
        assert_eq!(offset_of_pos(t, Pos::new(5, 2)), Some(14));
        assert_eq!(pos_of_offset(t, 14), Pos::new(5, 2));
        assert_eq!(offset_of_pos(t, Pos::new(8, 1)), None);
    }
}
