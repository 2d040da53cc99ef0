//! Printing diagnostics for people: the one-line `FILE:LINE:COL: severity: message` form,
//! a hint line, and on a terminal the offending source line with a marker under it.

use miette::{GraphicalReportHandler, GraphicalTheme, LabeledSpan, MietteDiagnostic, NamedSource};
use rebound_engine::{Diagnostic, Severity, SourceFile};
use std::io::IsTerminal;

/// Prints `diags` to stderr; `sources` supply the text for source snippets.
pub fn print(diags: &[Diagnostic], sources: &[SourceFile]) {
    let fancy = std::io::stderr().is_terminal();
    for d in diags {
        eprintln!("{d}");
        match fancy.then(|| snippet(d, sources)).flatten() {
            Some(snippet) => eprintln!("{snippet}"),
            None => {
                if let Some(help) = &d.help {
                    eprintln!("  help: {help}");
                }
            }
        }
    }
}

fn snippet(d: &Diagnostic, sources: &[SourceFile]) -> Option<String> {
    let source = sources.iter().find(|s| s.path == d.file)?;
    // A file that is not UTF-8 still has an offending line to show: its first bad byte, which
    // the lossy text shows as U+FFFD at the same line and column.
    let text = String::from_utf8_lossy(&source.bytes);
    // Positions do not count the byte-order marks a file starts with.
    let text = rebound_engine::load::without_leading_byte_order_marks(&text);
    let pos = d.pos()?;
    let offset = byte_offset(text, pos.line, pos.column)?;
    // Underline the token that starts there: up to a space, a colon or the line's end.
    let token = text[offset..]
        .find(|c: char| c.is_whitespace() || c == ':' || c == ',')
        .unwrap_or(text.len() - offset)
        .max(1);
    let mut report = MietteDiagnostic::new(d.message.clone())
        .with_severity(match d.severity {
            Severity::Error => miette::Severity::Error,
            Severity::Warning => miette::Severity::Warning,
        })
        .with_label(LabeledSpan::at(offset..offset + token, "here"));
    if let Some(help) = &d.help {
        report = report.with_help(help.clone());
    }
    let report =
        miette::Report::new(report).with_source_code(NamedSource::new(&d.file, text.to_string()));
    let mut out = String::new();
    GraphicalReportHandler::new_themed(GraphicalTheme::unicode())
        .render_report(&mut out, report.as_ref())
        .ok()?;
    Some(out)
}

/// The byte offset of a 1-based line and column (in characters), within the text.
fn byte_offset(text: &str, line: usize, column: usize) -> Option<usize> {
    let at = rebound_engine::diag::offset_of_pos(text, rebound_engine::Pos::new(line, column))?;
    Some(at.min(text.len().saturating_sub(1)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rebound_engine::Pos;

    fn shown(fixture: &str, bytes: &[u8], pos: Pos) -> String {
        let path = format!("tests/fixtures/errors/{fixture}/rules.yaml");
        let source = SourceFile::new("rules.yaml", path.as_str(), bytes);
        let diag = Diagnostic::error(path.as_str(), Some(pos), "what is wrong");
        snippet(&diag, &[source]).expect("a source snippet")
    }

    #[test]
    fn a_file_that_is_not_utf8_still_shows_its_offending_line() {
        let bytes = include_bytes!("../tests/fixtures/errors/not-utf8/rules.yaml");
        let shown = shown("not-utf8", bytes, Pos::new(3, 12));
        assert!(shown.contains("  - id: caf"), "{shown}");
        assert!(shown.contains("here"), "{shown}");
    }

    #[test]
    fn a_valid_file_shows_the_line_and_a_marker() {
        let bytes = include_bytes!("../tests/fixtures/errors/unknown-key/rules.yaml");
        let shown = shown("unknown-key", bytes, Pos::new(6, 7));
        assert!(shown.contains("max_retry: 5"), "{shown}");
        assert!(shown.contains("here"), "{shown}");
    }
}
