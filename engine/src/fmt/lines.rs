//! The formatter's line edits. Each edit is tried on its own and kept only when the file
//! still means what the original meant (`same_value`), so an edit that the line model gets
//! wrong is dropped rather than written.

use super::{FileKind, FmtError};
use serde_yaml::Value;

/// Flow maps are written only when their line fits in this many columns.
pub(super) const WIDTH: usize = 100;

/// The top-level keys, in the order of the spec.
const RULES_TOP: &[&str] = &[
    "version", "defaults", "rules", "labels", "heat", "budgets", "breakers",
];
const DEFAULTS: &[&str] = &["retry", "dead_letter"];
const RULE: &[&str] = &[
    "id",
    "description",
    "match",
    "if",
    "retry",
    "give_up",
    "dead_letter",
];
const RETRY: &[&str] = &[
    "max_retries",
    "max_elapsed",
    "backoff",
    "respect_retry_after",
];
const LABEL: &[&str] = &["description", "redrive", "alert", "sla", "expire"];
const REDRIVE: &[&str] = &["after", "max"];
const HEAT: &[&str] = &["half_life", "weights"];
const MATCH: &[&str] = &[
    "biz", "code", "attempt", "redrives", "elapsed", "attrs", "headers",
];
const TESTS_TOP: &[&str] = &["version", "cases", "paths"];
const CASE: &[&str] = &["name", "given", "expect"];
const PATH: &[&str] = &["name", "given", "processing", "expect"];

/// Keys whose block maps become flow maps when short. `exponential` and `linear` only occur
/// inside a `backoff`.
const FLOW_KEYS: &[&str] = &[
    "backoff",
    "exponential",
    "linear",
    "redrive",
    "given",
    "expect",
];

pub(super) fn format(text: &str, kind: FileKind) -> Result<String, FmtError> {
    let original = parse(text).ok_or_else(|| FmtError::NotYaml(yaml_error(text)))?;
    let mut current = text.to_string();
    // Each pass is idempotent on its own, but one pass can enable another (a flow map makes
    // a body short enough to move); a few rounds reach the fixed point.
    for _ in 0..4 {
        let next = round(&current, kind, &original);
        if next == current {
            break;
        }
        current = next;
    }
    // Every edit was checked; this is the last line of defence should one slip through.
    if parse(&current).is_none_or(|v| v != original) {
        return Ok(text.to_string());
    }
    Ok(current)
}

fn parse(text: &str) -> Option<Value> {
    serde_yaml::from_str::<Value>(text).ok()
}

fn yaml_error(text: &str) -> String {
    match serde_yaml::from_str::<Value>(text) {
        Err(e) => e.to_string(),
        Ok(_) => "unreadable".to_string(),
    }
}

pub(super) fn same_value(lines: &[String], original: &Value) -> bool {
    parse(&join(lines)).is_some_and(|v| v == *original)
}

fn join(lines: &[String]) -> String {
    let mut out = lines.join("\n");
    out.push('\n');
    out
}

/// One round of every edit, each kept only when the meaning holds.
fn round(text: &str, kind: FileKind, original: &Value) -> String {
    let mut lines = split(&text.replace("\r\n", "\n"));
    if !same_value(&lines, original) {
        lines = split(text);
    }
    try_lines(&mut lines, original, |s| s.trim_end().to_string());
    try_lines(&mut lines, original, one_space_after_colon);
    try_edit(&mut lines, original, blank_lines);
    reorder_all(&mut lines, kind, original);
    flow_maps(&mut lines, original);
    if kind == FileKind::Rules {
        super::heat::weights_as_flow_maps(&mut lines, original);
    }
    join(&lines)
}

/// The lines of `text`, without the newline that ends the last one.
fn split(text: &str) -> Vec<String> {
    let mut lines: Vec<String> = text.split('\n').map(str::to_string).collect();
    if lines.last().is_some_and(String::is_empty) {
        lines.pop();
    }
    lines
}

/// Applies `edit` to every line at once, or, when that changes the meaning (a line of a
/// block scalar), to each line on its own.
fn try_lines(lines: &mut Vec<String>, original: &Value, edit: impl Fn(&str) -> String) {
    let next: Vec<String> = lines.iter().map(|l| edit(l)).collect();
    if next == *lines {
        return;
    }
    if same_value(&next, original) {
        *lines = next;
        return;
    }
    for (i, line) in next.into_iter().enumerate() {
        if line != lines[i] {
            let old = std::mem::replace(&mut lines[i], line);
            if !same_value(lines, original) {
                lines[i] = old;
            }
        }
    }
}

fn try_edit(
    lines: &mut Vec<String>,
    original: &Value,
    edit: impl FnOnce(&[String]) -> Vec<String>,
) {
    let next = edit(lines);
    if next != *lines && same_value(&next, original) {
        *lines = next;
    }
}

/// No leading or trailing blank lines, and at most one blank line in a row.
fn blank_lines(lines: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(lines.len());
    for line in lines {
        let blank = line.trim().is_empty();
        if blank && out.last().is_none_or(|l: &String| l.trim().is_empty()) {
            continue;
        }
        out.push(line.clone());
    }
    while out.last().is_some_and(|l| l.trim().is_empty()) {
        out.pop();
    }
    out
}

pub(super) fn indent(line: &str) -> usize {
    line.len() - line.trim_start_matches(' ').len()
}

pub(super) fn is_blank(line: &str) -> bool {
    line.trim().is_empty()
}

pub(super) fn is_comment(line: &str) -> bool {
    line.trim_start().starts_with('#')
}

/// `key` when `rest` starts with `key:` followed by a space or the end of the line.
pub(super) fn key_at(rest: &str) -> Option<&str> {
    // Label names may hold `-` and `.` too (`payment-dlq`).
    let end = rest
        .find(|c: char| !(c.is_ascii_alphanumeric() || "_-.".contains(c)))
        .unwrap_or(rest.len());
    let key = &rest[..end];
    let after = &rest[end..];
    let ok = !key.is_empty()
        && !key.starts_with(|c: char| c.is_ascii_digit() || c == '-' || c == '.')
        && (after == ":" || after.starts_with(": "));
    ok.then_some(key)
}

/// The key of a line whose key sits at column `k`, written either `key:` at `k` or, for the
/// first key of a sequence item, `- key:` with the dash at `k - 2`.
fn key_of(line: &str, k: usize) -> Option<&str> {
    if indent(line) == k {
        return key_at(&line[k..]);
    }
    if k >= 2 && indent(line) == k - 2 && line[k - 2..].starts_with("- ") {
        return key_at(&line[k..]);
    }
    None
}

/// `key:   value` → `key: value` (also after `- `); a lone key, a comment, and a lone key's
/// aligned comment (`weights:     # first match wins`) stay.
fn one_space_after_colon(line: &str) -> String {
    let k = indent(line);
    let mut start = k;
    if line[k..].starts_with("- ") {
        start += 2;
    }
    let Some(key) = key_at(&line[start..]) else {
        return line.to_string();
    };
    let value_at = start + key.len() + 1;
    let value = line[value_at..].trim_start();
    if value.is_empty() || value.starts_with('#') || line[value_at..].len() - value.len() <= 1 {
        return line.to_string();
    }
    format!("{} {value}", &line[..value_at])
}

/// The end (exclusive) of the body of the key on line `i`, whose key sits at column `k`:
/// the lines after it that are deeper, with blank and comment lines between them.
pub(super) fn body_end(lines: &[String], i: usize, k: usize) -> usize {
    let mut last = i;
    for (j, line) in lines.iter().enumerate().skip(i + 1) {
        if is_blank(line) || is_comment(line) {
            continue;
        }
        if indent(line) > k {
            last = j;
        } else {
            break;
        }
    }
    last + 1
}

/// The line of a top-level `key:` with an empty value, if the file has one.
pub(super) fn top_level(lines: &[String], key: &str) -> Option<usize> {
    lines
        .iter()
        .position(|l| key_of(l, 0) == Some(key) && l.trim_end() == format!("{key}:"))
}

/// The column of the first content line of the body of line `i`, and the body's end.
fn body(lines: &[String], i: usize, k: usize) -> Option<(usize, usize, usize)> {
    let end = body_end(lines, i, k);
    let first = (i + 1..end).find(|&j| !is_blank(&lines[j]) && !is_comment(&lines[j]))?;
    Some((first, end, indent(&lines[first])))
}

/// One mapping to put in order: its lines `start..end`, its keys at column `k`, and whether
/// it is a sequence item (its first key follows `- `).
struct Target {
    start: usize,
    end: usize,
    k: usize,
    item: bool,
    order: &'static [&'static str],
}

fn reorder_all(lines: &mut Vec<String>, kind: FileKind, original: &Value) {
    let (top, sections): (&[&str], &[(&str, &[&str])]) = match kind {
        FileKind::Rules => (RULES_TOP, &[("rules", RULE)]),
        FileKind::Tests => (TESTS_TOP, &[("cases", CASE), ("paths", PATH)]),
    };
    // Top level first, then the sections' items, then what nests in them: each pass finds
    // its targets afresh, because the one before moved lines around.
    if let Some(start) = lines.iter().position(|l| key_of(l, 0).is_some()) {
        let end = lines.len();
        apply(
            lines,
            original,
            vec![Target {
                start,
                end,
                k: 0,
                item: false,
                order: top,
            }],
        );
    }
    let mut targets = Vec::new();
    if kind == FileKind::Rules {
        targets.extend(mapping_under(lines, "defaults", DEFAULTS));
        targets.extend(mapping_under(lines, "heat", HEAT));
    }
    for (section, order) in sections {
        targets.extend(items_under(lines, section, order));
    }
    apply(lines, original, targets);
    if kind == FileKind::Rules {
        let mut nested = Vec::new();
        if let Some(d) = mapping_under(lines, "defaults", DEFAULTS) {
            nested.extend(children(lines, &d, &[("retry", RETRY)]));
        }
        for item in items_under(lines, "rules", RULE) {
            nested.extend(children(
                lines,
                &item,
                &[("retry", RETRY), ("match", MATCH)],
            ));
        }
        // Each label's keys; the label names keep the order they were written in.
        if let Some(labels) = mapping_under(lines, "labels", &[]) {
            nested.extend(every_child(lines, &labels, LABEL));
        }
        apply(lines, original, nested);
        let mut redrives = Vec::new();
        if let Some(labels) = mapping_under(lines, "labels", &[]) {
            for label in every_child(lines, &labels, LABEL) {
                redrives.extend(children(lines, &label, &[("redrive", REDRIVE)]));
            }
        }
        apply(lines, original, redrives);
    }
}

/// The block mappings under every key of the mapping `parent`, each put in `order`.
fn every_child(lines: &[String], parent: &Target, order: &'static [&'static str]) -> Vec<Target> {
    block_mappings(lines, parent, |_| Some(order))
}

/// The block mapping under a top-level `key:`.
fn mapping_under(lines: &[String], key: &str, order: &'static [&'static str]) -> Option<Target> {
    let i = top_level(lines, key)?;
    let (start, end, k) = body(lines, i, 0)?;
    Some(Target {
        start,
        end,
        k,
        item: false,
        order,
    })
}

/// The items of the block sequence under a top-level `key:`.
fn items_under(lines: &[String], key: &str, order: &'static [&'static str]) -> Vec<Target> {
    let Some(i) = top_level(lines, key) else {
        return Vec::new();
    };
    let Some((first, end, dash)) = body(lines, i, 0) else {
        return Vec::new();
    };
    let starts: Vec<usize> = (first..end)
        .filter(|&j| indent(&lines[j]) == dash && lines[j][dash..].starts_with("- "))
        .collect();
    starts
        .iter()
        .enumerate()
        .map(|(n, &start)| Target {
            start,
            end: starts.get(n + 1).copied().unwrap_or(end),
            k: dash + 2,
            item: true,
            order,
        })
        .collect()
}

/// The block mappings under the keys `which` of the mapping `parent`.
fn children(
    lines: &[String],
    parent: &Target,
    which: &[(&str, &'static [&'static str])],
) -> Vec<Target> {
    block_mappings(lines, parent, |key| {
        which
            .iter()
            .find(|(w, _)| *w == key)
            .map(|(_, order)| *order)
    })
}

/// The block mappings under the keys of `parent` that `order_of` gives a key order.
fn block_mappings(
    lines: &[String],
    parent: &Target,
    order_of: impl Fn(&str) -> Option<&'static [&'static str]>,
) -> Vec<Target> {
    let mut out = Vec::new();
    for i in parent.start..parent.end {
        let Some(key) = key_of(&lines[i], parent.k) else {
            continue;
        };
        if lines[i].trim_end().ends_with(&format!("{key}:"))
            && let Some(order) = order_of(key)
            && let Some((start, end, k)) = body(lines, i, parent.k)
            && k > parent.k
        {
            out.push(Target {
                start,
                end,
                k,
                item: false,
                order,
            });
        }
    }
    out
}

/// Applies targets from the last to the first, so that each one's lines are where they were
/// found (a reorder only permutes lines inside its own target).
fn apply(lines: &mut Vec<String>, original: &Value, mut targets: Vec<Target>) {
    targets.sort_by_key(|t| std::cmp::Reverse(t.start));
    for t in targets {
        if let Some(range) = reorder(&lines[t.start..t.end], &t) {
            let mut next = lines.clone();
            next.splice(t.start..t.end, range);
            if same_value(&next, original) {
                *lines = next;
            }
        }
    }
}

/// The lines of one mapping with its entries in `t.order`, or `None` when they already are
/// or when the mapping is not one this line model can move safely.
fn reorder(range: &[String], t: &Target) -> Option<Vec<String>> {
    let k = t.k;
    // Where each entry's key line is.
    let mut keys: Vec<(usize, usize)> = Vec::new(); // (line, rank)
    for (j, line) in range.iter().enumerate() {
        if is_blank(line) || is_comment(line) {
            continue;
        }
        if let Some(key) = key_of(line, k) {
            if indent(line) != k && !(t.item && j == 0) {
                return None; // a `- ` that does not start this item
            }
            let rank = t.order.iter().position(|o| *o == key)?;
            keys.push((j, rank));
        } else if indent(line) <= k {
            return None;
        }
    }
    if keys.is_empty() || (t.item && keys[0].0 != 0) {
        return None;
    }
    if keys.windows(2).all(|w| w[0].1 < w[1].1) {
        return None;
    }
    if keys.windows(2).any(|w| w[0].1 == w[1].1) {
        return None;
    }
    // The trailing blank lines and shallower comments stay at the end.
    let mut tail = range.len();
    while tail > 0
        && (is_blank(&range[tail - 1])
            || is_comment(&range[tail - 1]) && indent(&range[tail - 1]) < k)
    {
        tail -= 1;
    }
    // Each entry starts at the comment lines at its own column directly above its key.
    let prefix_end = keys[0].0;
    let mut starts: Vec<usize> = keys.iter().map(|&(j, _)| j).collect();
    for n in 1..starts.len() {
        let floor = keys[n - 1].0 + 1;
        while starts[n] > floor
            && is_comment(&range[starts[n] - 1])
            && indent(&range[starts[n] - 1]) == k
        {
            starts[n] -= 1;
        }
    }
    if tail <= keys.last()?.0 {
        return None;
    }
    let mut entries: Vec<(usize, usize, Vec<String>)> = Vec::new(); // (rank, key line, lines)
    for n in 0..starts.len() {
        let end = if n + 1 < starts.len() {
            starts[n + 1]
        } else {
            tail
        };
        let mut entry: Vec<String> = range[starts[n]..end].to_vec();
        // An entry that ends in blank lines moves without them.
        while entry.last().is_some_and(|l| is_blank(l)) {
            entry.pop();
        }
        entries.push((keys[n].1, keys[n].0 - starts[n], entry));
    }
    entries.sort_by_key(|(rank, _, _)| *rank);
    let mut out: Vec<String> = range[..prefix_end].to_vec();
    for (n, (_, key_line, entry)) in entries.into_iter().enumerate() {
        for (m, mut line) in entry.into_iter().enumerate() {
            if t.item && m == key_line {
                // The dash goes with the first entry, wherever it came from.
                let dash = if n == 0 { "- " } else { "  " };
                line = format!("{}{dash}{}", &line[..k - 2], &line[k..]);
            } else if t.item && n == 0 && m < key_line {
                // Its comments now sit above the dash, at the dash's column.
                line = format!("{}{}", " ".repeat(k - 2), line.trim_start());
            }
            out.push(line);
        }
    }
    out.extend(range[tail..].iter().cloned());
    Some(out)
}

/// Short block maps under [`FLOW_KEYS`] become one-line flow maps, innermost first.
fn flow_maps(lines: &mut Vec<String>, original: &Value) {
    let mut i = lines.len();
    while i > 0 {
        i -= 1;
        let line = &lines[i];
        let k = indent(line);
        let key_col = if line[k..].starts_with("- ") {
            k + 2
        } else {
            k
        };
        let Some(key) = key_at(&line[key_col..]) else {
            continue;
        };
        if !FLOW_KEYS.contains(&key) || line.trim_end() != format!("{}{key}:", &line[..key_col]) {
            continue;
        }
        let end = body_end(lines, i, key_col);
        let Some(flow) = flow_of(&lines[i + 1..end], key_col) else {
            continue;
        };
        let one = format!("{}{key}: {flow}", &line[..key_col]);
        if one.len() > WIDTH {
            continue;
        }
        let mut next = lines.clone();
        next.splice(i..end, [one]);
        if same_value(&next, original) {
            *lines = next;
        }
    }
}

/// `{ a: 1, b: { c: 2 } }` for the body lines of a block map deeper than `k`, when each is
/// a plain `key: value` or a nested map of them, with no comment, blank line or block scalar.
fn flow_of(body: &[String], k: usize) -> Option<String> {
    let first = body.first()?;
    let col = indent(first);
    if col <= k {
        return None;
    }
    let mut parts = Vec::new();
    let mut j = 0;
    while j < body.len() {
        let line = &body[j];
        if is_blank(line) || is_comment(line) || indent(line) != col {
            return None;
        }
        let key = key_at(&line[col..])?;
        let value = line[col + key.len() + 1..].trim();
        let deeper = body[j + 1..]
            .iter()
            .take_while(|l| !is_blank(l) && indent(l) > col)
            .count();
        if value.is_empty() {
            parts.push(format!(
                "{key}: {}",
                flow_of(&body[j + 1..j + 1 + deeper], col)?
            ));
        } else {
            let simple = deeper == 0
                && !value.contains('#')
                && !value.starts_with(['|', '>', '&', '*', '!', '-'])
                && (value.starts_with(['[', '{', '"', '\''])
                    || !value.contains([',', '[', ']', '{', '}']));
            if !simple {
                return None;
            }
            parts.push(format!("{key}: {value}"));
        }
        j += 1 + deeper;
    }
    Some(format!("{{ {} }}", parts.join(", ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fmt(text: &str) -> String {
        format(text, FileKind::Rules).unwrap()
    }

    #[test]
    fn fmt_keeps_a_formatted_file() {
        let tidy = "# head\nversion: 1\nrules:\n  - id: a\n    # why\n    match: { code: X }\n    retry:\n      max_retries: 2\n      backoff: { fixed: 1s }\n    dead_letter: L1\n\n  - id: b\n    give_up: true\n";
        assert_eq!(fmt(tidy), tidy);
    }

    #[test]
    fn fmt_reorders_rule_keys_with_their_comments() {
        let messy = "version: 1\nrules:\n  - dead_letter: L1\n    # the id\n    id: a\n    match:\n      code: X\n      biz: P\n\n  - id: b\n";
        let want = "version: 1\nrules:\n  # the id\n  - id: a\n    match:\n      biz: P\n      code: X\n    dead_letter: L1\n\n  - id: b\n";
        assert_eq!(fmt(messy), want);
        assert_eq!(fmt(want), want);
    }

    #[test]
    fn fmt_reorders_the_top_level_and_retry() {
        let messy = "rules:\n  - id: a\n    retry:\n      backoff: { fixed: 1s }\n      max_retries: 1\nversion: 1\n";
        let want = "version: 1\nrules:\n  - id: a\n    retry:\n      max_retries: 1\n      backoff: { fixed: 1s }\n";
        assert_eq!(fmt(messy), want);
    }

    #[test]
    fn fmt_writes_short_backoffs_as_flow_maps_but_not_commented_ones() {
        let messy = "version: 1\ndefaults:\n  retry:\n    backoff:\n      exponential:\n        base: 1s\n        max: 1m\n      jitter: full\n";
        let want = "version: 1\ndefaults:\n  retry:\n    backoff: { exponential: { base: 1s, max: 1m }, jitter: full }\n";
        assert_eq!(fmt(messy), want);
        let commented =
            "version: 1\ndefaults:\n  retry:\n    backoff:\n      # fast\n      fixed: 1s\n";
        assert_eq!(fmt(commented), commented);
    }

    #[test]
    fn fmt_strips_trailing_space_extra_blank_lines_and_spaces_after_colons() {
        let messy = "\n\nversion:    1   \n\n\n\nrules:\n  - id:   a\n\n\n";
        assert_eq!(fmt(messy), "version: 1\n\nrules:\n  - id: a\n");
    }

    #[test]
    fn fmt_leaves_block_scalars_and_anchors_alone() {
        let text = "version: 1\nrules:\n  - description: |\n      keep   \n      # not a comment\n    id: a\n";
        let out = fmt(text);
        assert_eq!(parse(&out), parse(text));
        let anchors = "version: 1\nrules:\n  - retry: &r { max_retries: 1 }\n    id: a\n  - retry: *r\n    id: b\n";
        assert_eq!(parse(&fmt(anchors)), parse(anchors));
    }

    #[test]
    fn fmt_orders_test_cases_and_flows_given() {
        let messy = "version: 1\ncases:\n  - expect: { action: retry }\n    name: n\n    given:\n      code: X\n      attempt: 2\n";
        let want = "version: 1\ncases:\n  - name: n\n    given: { code: X, attempt: 2 }\n    expect: { action: retry }\n";
        assert_eq!(format(messy, FileKind::Tests).unwrap(), want);
    }

    #[test]
    fn fmt_trims_other_lines_when_a_block_scalar_keeps_its_spaces() {
        let text = "version: 1\nrules:\n  - id:   a   \n    description: |\n      two  \n";
        let want = "version: 1\nrules:\n  - id: a\n    description: |\n      two  \n";
        assert_eq!(fmt(text), want);
    }

    #[test]
    fn fmt_reads_crlf_and_a_missing_final_newline() {
        let text = "rules:\r\n  - id: a\r\nversion: 1";
        assert_eq!(fmt(text), "version: 1\nrules:\n  - id: a\n");
    }

    #[test]
    fn fmt_refuses_what_is_not_yaml() {
        assert!(format("a: [\n", FileKind::Rules).is_err());
    }
}
