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
    let text = source.text()?;
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

/// The byte offset of a 1-based line and column (in characters).
fn byte_offset(text: &str, line: usize, column: usize) -> Option<usize> {
    let start: usize = text
        .split_inclusive('\n')
        .take(line - 1)
        .map(str::len)
        .sum();
    let rest = text.get(start..)?;
    let within = rest
        .char_indices()
        .nth(column.saturating_sub(1))
        .map_or(rest.len(), |(i, _)| i);
    Some((start + within).min(text.len().saturating_sub(1)))
}
