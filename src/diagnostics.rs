//! Printing diagnostics for people: the one-line `FILE:LINE:COL: severity: message` form,
//! then on a terminal the offending source line with a marker under it, then a hint line.
//!
//! The one-line form already says what is wrong and where, so the excerpt under it repeats
//! neither: it is the line before for context, the line itself and the marker. A tab shows
//! as `→`, one column like any character, so the marker stands under the column the
//! diagnostic names even where the fault is invisible whitespace.

use rebound_engine::{Diagnostic, SourceFile};
use std::io::{IsTerminal, Write};

/// Prints `diags` to stderr; `sources` supply the text for source snippets.
pub fn print(diags: &[Diagnostic], sources: &[SourceFile]) {
    let fancy = std::io::stderr().is_terminal();
    let mut err = std::io::stderr().lock();
    for d in diags {
        // Nothing sensible is left to do when stderr itself fails.
        let _ = err.write_all(render(d, sources, fancy).as_bytes());
    }
}

/// What [`print`] writes for one diagnostic: the one-line form, the source excerpt when
/// `fancy` (a terminal) and the file is known, and the hint.
fn render(d: &Diagnostic, sources: &[SourceFile], fancy: bool) -> String {
    let mut out = format!("{d}\n");
    if let Some(excerpt) = fancy.then(|| snippet(d, sources)).flatten() {
        out.push_str(&excerpt);
    }
    if let Some(help) = &d.help {
        out.push_str(&format!("  help: {help}\n"));
    }
    out
}

fn snippet(d: &Diagnostic, sources: &[SourceFile]) -> Option<String> {
    let source = sources.iter().find(|s| s.path == d.file)?;
    // A file that is not UTF-8 still has an offending line to show: its first bad byte, which
    // the lossy text shows as U+FFFD at the same line and column.
    let text = String::from_utf8_lossy(&source.bytes);
    // Positions do not count the byte-order marks a file starts with.
    let text = rebound_engine::load::without_leading_byte_order_marks(&text);
    let pos = d.pos()?;
    let line_at = |n: usize| {
        let start = rebound_engine::diag::offset_of_pos(text, rebound_engine::Pos::new(n, 1))?;
        let rest = &text[start..];
        let end = rest
            .find(['\n', '\r', '\u{85}', '\u{2028}', '\u{2029}'])
            .unwrap_or(rest.len());
        Some(&rest[..end])
    };
    let line = line_at(pos.line)?;
    // A column past the line's end (a file's last byte) marks the end of the line.
    let skip = pos.column.saturating_sub(1);
    let before = line.chars().take(skip).count();
    // Underline the token that starts there: up to a space, a colon or the line's end.
    let token = line
        .chars()
        .skip(skip)
        .take_while(|c| !(c.is_whitespace() || *c == ':' || *c == ','))
        .count()
        .max(1);
    let width = pos.line.to_string().len();
    let mut out = format!("{:width$} |\n", "");
    if pos.line > 1
        && let Some(prev) = line_at(pos.line - 1)
        && !prev.trim().is_empty()
    {
        out.push_str(&format!("{:>width$} | {}\n", pos.line - 1, visible(prev)));
    }
    out.push_str(&format!("{:>width$} | {}\n", pos.line, visible(line)));
    out.push_str(&format!(
        "{:width$} | {}{} here\n",
        "",
        " ".repeat(before),
        "^".repeat(token)
    ));
    Some(out)
}

/// A source line as the excerpt shows it: each tab as `→`, so that every character is one
/// column wide and invisible whitespace is seen.
fn visible(line: &str) -> String {
    line.chars()
        .map(|c| if c == '\t' { '→' } else { c })
        .collect()
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

    /// What a terminal shows for the first error of loading the fixture set `name`.
    fn on_a_terminal(name: &str) -> (Diagnostic, String) {
        let dir = format!("tests/fixtures/errors/{name}");
        let sources = rebound_engine::load::read_dir(std::path::Path::new(&dir)).unwrap();
        let rejected = rebound_engine::compile(sources.clone()).expect_err("the set is rejected");
        let first = rejected.0[0].clone();
        let shown = render(&first, &sources, true);
        (first, shown)
    }

    #[test]
    fn a_terminal_shows_each_message_once() {
        for name in ["yaml-tab", "unknown-key", "duplicate-id"] {
            let (d, shown) = on_a_terminal(name);
            assert_eq!(shown.matches(&d.message).count(), 1, "{shown}");
            assert!(shown.starts_with(&format!("{d}\n")), "{shown}");
            if let Some(help) = &d.help {
                assert_eq!(shown.matches(help.as_str()).count(), 1, "{shown}");
            }
        }
    }

    #[test]
    fn a_tab_is_shown_and_the_marker_stands_under_it() {
        let (_, shown) = on_a_terminal("yaml-tab");
        let excerpt: Vec<&str> = shown.lines().skip(1).collect();
        assert_eq!(
            excerpt,
            ["  |", "5 |     retry:", "6 | →max_retries: 5", "  | ^ here"],
            "{shown}"
        );
    }

    #[test]
    fn the_marker_underlines_the_token_at_the_column() {
        let (_, shown) = on_a_terminal("unknown-key");
        let line = shown.lines().find(|l| l.contains("max_retry: 5")).unwrap();
        let marker = shown.lines().find(|l| l.contains("here")).unwrap();
        let at = line.find("max_retry").unwrap();
        assert_eq!(marker.find('^'), Some(at), "{shown}");
        assert!(marker[at..].starts_with("^^^^^^^^^ here"), "{shown}");
    }

    #[test]
    fn without_a_terminal_only_the_line_and_the_hint_are_printed() {
        let (d, _) = on_a_terminal("unknown-key");
        let sources = rebound_engine::load::read_dir(std::path::Path::new(
            "tests/fixtures/errors/unknown-key",
        ))
        .unwrap();
        assert_eq!(
            render(&d, &sources, false),
            format!("{d}\n  help: did you mean 'max_retries'?\n")
        );
    }
}
