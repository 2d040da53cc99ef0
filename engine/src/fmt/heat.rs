//! The formatter's edit of `heat.weights`: each entry becomes the one-line flow map the spec
//! writes, `- { code: "NET_*", weight: 3 }`, code first. (The keys of `heat:` itself are put
//! in order by the line edits, as every other section's are.)
//!
//! An entry is rewritten only when it holds exactly `code` and `weight` as plain values (no
//! comment, anchor, nested collection or block scalar) and the line fits in the width; like
//! every edit, it is kept only when the file still parses to the same value.

use super::lines::{WIDTH, body_end, indent, is_blank, is_comment, key_at, same_value, top_level};
use serde_yaml::Value;

/// Rewrites every entry of a top-level `heat.weights` block sequence as a flow map.
pub(super) fn weights_as_flow_maps(lines: &mut Vec<String>, original: &Value) {
    let Some(heat) = top_level(lines, "heat") else {
        return;
    };
    let heat_end = body_end(lines, heat, 0);
    let Some(w) = (heat + 1..heat_end).find(|&j| {
        let k = indent(&lines[j]);
        k > 0 && key_at(&lines[j][k..]) == Some("weights") && lines[j].trim_end().ends_with(':')
    }) else {
        return;
    };
    let wk = indent(&lines[w]);
    let end = body_end(lines, w, wk);
    let starts: Vec<usize> = (w + 1..end)
        .filter(|&j| indent(&lines[j]) > wk && lines[j][indent(&lines[j])..].starts_with("- "))
        .collect();
    let Some(&first) = starts.first() else {
        return;
    };
    let dash = indent(&lines[first]);
    // Last to first, so that an edit leaves the earlier entries' line numbers as they were.
    for (n, &start) in starts.iter().enumerate().rev() {
        if indent(&lines[start]) != dash {
            continue;
        }
        let limit = starts.get(n + 1).copied().unwrap_or(end);
        // The entry's own lines: its first, then the deeper ones up to a blank or comment
        // line (which belongs to the next entry, or stops the edit if more follows).
        let mut stop = start + 1;
        while stop < limit && !is_blank(&lines[stop]) && !is_comment(&lines[stop]) {
            if indent(&lines[stop]) <= dash {
                break;
            }
            stop += 1;
        }
        if (stop..limit).any(|j| !is_blank(&lines[j]) && !is_comment(&lines[j])) {
            continue;
        }
        let Some(entries) = entries(&lines[start..stop], dash) else {
            continue;
        };
        let [(k1, code), (k2, weight)] = entries.as_slice() else {
            continue;
        };
        let (code, weight) = match (k1.as_str(), k2.as_str()) {
            ("code", "weight") => (code, weight),
            ("weight", "code") => (weight, code),
            _ => continue,
        };
        let one = format!(
            "{}- {{ code: {code}, weight: {weight} }}",
            &lines[start][..dash]
        );
        if one.len() > WIDTH || one == lines[start] && stop == start + 1 {
            continue;
        }
        let mut next = lines.clone();
        next.splice(start..stop, [one]);
        if same_value(&next, original) {
            *lines = next;
        }
    }
}

/// The `key: value` pairs of one entry, written as a block map (`- code: X` then `weight: 3`
/// one column past the dash) or as a one-line flow map (`- { weight: 3, code: X }`); `None`
/// for anything else.
fn entries(item: &[String], dash: usize) -> Option<Vec<(String, String)>> {
    let head = item.first()?[dash + 2..].trim_end();
    if let Some(inner) = head.strip_prefix('{').and_then(|r| r.strip_suffix('}')) {
        if item.len() != 1 {
            return None;
        }
        return split_flow(inner)?.iter().map(|part| pair(part)).collect();
    }
    let col = dash + 2;
    let mut out = vec![pair(head)?];
    for line in &item[1..] {
        if indent(line) != col {
            return None;
        }
        out.push(pair(&line[col..])?);
    }
    Some(out)
}

/// `key: value` with a plain key and a plain or quoted scalar value.
fn pair(text: &str) -> Option<(String, String)> {
    let text = text.trim();
    let key = key_at(text)?;
    let value = text[key.len() + 1..].trim();
    let quoted = (value.starts_with('"') && value.ends_with('"') && value.len() >= 2)
        || (value.starts_with('\'') && value.ends_with('\'') && value.len() >= 2);
    let plain = !value.is_empty()
        && !value.contains('#')
        && !value.starts_with(['|', '>', '&', '*', '!', '-', '[', '{', '"', '\''])
        && !value.contains([',', '[', ']', '{', '}']);
    // A negative weight is plain too; the compiler is the one to refuse it.
    let number = value.parse::<f64>().is_ok();
    (quoted || plain || number).then(|| (key.to_string(), value.to_string()))
}

/// The parts of a flow map's inside, split at the commas outside quotes.
fn split_flow(inner: &str) -> Option<Vec<String>> {
    let mut parts = Vec::new();
    let mut current = String::new();
    let mut quote: Option<char> = None;
    for c in inner.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => {
                quote = None;
                current.push(c);
            }
            (Some(_), c) => current.push(c),
            (None, '"' | '\'') => {
                quote = Some(c);
                current.push(c);
            }
            (None, '{' | '}' | '[' | ']' | '#') => return None,
            (None, ',') => parts.push(std::mem::take(&mut current)),
            (None, c) => current.push(c),
        }
    }
    if quote.is_some() {
        return None;
    }
    if !current.trim().is_empty() {
        parts.push(current);
    }
    Some(parts)
}

#[cfg(test)]
mod tests {
    use crate::fmt::{FileKind, format};

    fn fmt(text: &str) -> String {
        format(text, FileKind::Rules).unwrap()
    }

    #[test]
    fn the_spec_example_is_kept_as_it_is() {
        let tidy = "version: 1\nheat:\n  half_life: 30s                      # default 30s\n  weights:                            # first matching code pattern wins; unmatched codes weigh 1\n    - { code: \"NET_*\", weight: 3 }\n    - { code: \"DB_*\", weight: 2 }\n";
        assert_eq!(fmt(tidy), tidy);
    }

    #[test]
    fn keys_go_in_order_and_weights_become_flow_maps() {
        let messy = "version: 1\nheat:\n  weights:\n    - weight: 3\n      code: \"NET_*\"\n    # databases\n    - code: DB_*\n      weight: 2.5\n    - { weight: 0, code: 'A, B' }\n  half_life: 1m\nrules: []\n";
        let want = "version: 1\nrules: []\nheat:\n  half_life: 1m\n  weights:\n    - { code: \"NET_*\", weight: 3 }\n    # databases\n    - { code: DB_*, weight: 2.5 }\n    - { code: 'A, B', weight: 0 }\n";
        assert_eq!(fmt(messy), want);
        assert_eq!(fmt(want), want);
    }

    #[test]
    fn an_entry_with_a_comment_inside_or_another_key_stays_as_written() {
        let kept = "version: 1\nheat:\n  weights:\n    - code: \"NET_*\"\n      # three times as bad\n      weight: 3\n    - code: X\n      weight: 1\n      extra: 2\n";
        assert_eq!(fmt(kept), kept);
    }
}
