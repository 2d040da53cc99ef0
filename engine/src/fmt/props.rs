//! Property test of the formatter: random rule files, written messily (keys in any order,
//! block or flow maps, comments, stray spaces), format to files that compile to a set that
//! decides exactly as the original does, keep every comment, and format to themselves.

use super::{FileKind, format, same_decisions};
use crate::{SourceFile, compile};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

const PATTERNS: [&str; 8] = [
    "PAYMENT",
    "PAY*",
    "ORDER",
    "*",
    "DB_LOCK*",
    "NET_TIMEOUT",
    "X",
    "*ENT",
];
const OPS: [&str; 4] = ["<", ">=", "==", "!="];

#[derive(Debug, Clone)]
struct GenRule {
    biz: Option<Vec<&'static str>>,
    code: Option<Vec<&'static str>>,
    attempt: Option<(usize, u32)>,
    give_up: bool,
    max_retries: Option<u32>,
    backoff: Option<(u8, u64, u64, u8)>,
    dead_letter: Option<u8>,
    comment: bool,
    block: bool,
    messy: bool,
    order: Vec<usize>,
}

fn rule() -> impl Strategy<Value = GenRule> {
    let names = || {
        prop::option::weighted(
            0.6,
            prop::collection::vec(prop::sample::select(&PATTERNS[..]), 1..3),
        )
    };
    (
        (names(), names(), prop::option::of((0..4usize, 1..6u32))),
        (any::<bool>(), prop::option::of(0..6u32)),
        prop::option::of((0..3u8, 1..5_000u64, 5_000..60_000u64, 0..4u8)),
        prop::option::of(0..3u8),
        (any::<bool>(), any::<bool>(), any::<bool>()),
        Just((0..5).collect::<Vec<usize>>()).prop_shuffle(),
    )
        .prop_map(
            |(
                (biz, code, attempt),
                (give_up, max_retries),
                backoff,
                dead_letter,
                (comment, block, messy),
                order,
            )| GenRule {
                biz,
                code,
                attempt,
                give_up,
                max_retries,
                backoff,
                dead_letter,
                comment,
                block,
                messy,
                order,
            },
        )
}

fn list(items: &[&str]) -> String {
    let quoted: Vec<String> = items.iter().map(|s| format!("\"{s}\"")).collect();
    format!("[{}]", quoted.join(", "))
}

fn backoff(b: (u8, u64, u64, u8)) -> (String, Vec<String>) {
    let jitter = ["none", "full", "equal", "decorrelated"][b.3 as usize];
    match b.0 {
        0 => (
            format!("{{ fixed: {}ms }}", b.1),
            vec![format!("fixed: {}ms", b.1)],
        ),
        1 => (
            format!(
                "{{ exponential: {{ base: {}ms, max: {}ms }}, jitter: {jitter} }}",
                b.1, b.2
            ),
            vec![
                "exponential:".into(),
                format!("  base: {}ms", b.1),
                format!("  max: {}ms", b.2),
                format!("jitter: {jitter}"),
            ],
        ),
        _ => (
            format!("{{ schedule: [{}ms, {}ms], jitter: {jitter} }}", b.1, b.2),
            vec![
                format!("schedule: [{}ms, {}ms]", b.1, b.2),
                format!("jitter: {jitter}"),
            ],
        ),
    }
}

/// The rule as YAML at 2 spaces under `rules:`, its keys in `r.order`.
fn render(r: &GenRule, n: usize) -> String {
    let colon = if r.messy { ":   " } else { ": " };
    let mut entries: Vec<Vec<String>> = vec![vec![format!("id{colon}r{n}")]];
    let mut conditions = Vec::new();
    if let Some(b) = &r.biz {
        conditions.push(format!("biz: {}", list(b)));
    }
    if let Some(c) = &r.code {
        conditions.push(format!("code: {}", list(c)));
    }
    if let Some((op, a)) = r.attempt {
        conditions.push(format!("attempt: \"{} {a}\"", OPS[op]));
    }
    entries.push(match (conditions.is_empty(), r.block) {
        (true, _) => vec![],
        (false, true) => std::iter::once("match:".to_string())
            .chain(conditions.iter().map(|c| format!("  {c}")))
            .collect(),
        (false, false) => vec![format!("match: {{ {} }}", conditions.join(", "))],
    });
    let mut retry = Vec::new();
    if let Some(m) = r.max_retries {
        retry.push(format!("  max_retries{colon}{m}"));
    }
    if let Some(b) = r.backoff {
        let (flow, block) = backoff(b);
        if r.block {
            retry.push("  backoff:".into());
            retry.extend(block.into_iter().map(|l| format!("    {l}")));
        } else {
            retry.push(format!("  backoff: {flow}"));
        }
    }
    entries.push(match (r.give_up, retry.is_empty()) {
        (true, _) => vec!["give_up: true".into()],
        (false, true) => vec![],
        (false, false) => std::iter::once("retry:".to_string()).chain(retry).collect(),
    });
    entries.push(
        r.dead_letter
            .map(|d| vec![format!("dead_letter: L{d}")])
            .unwrap_or_default(),
    );
    entries.push(if r.comment {
        vec!["description: a rule".into()]
    } else {
        vec![]
    });
    let mut out = String::new();
    let mut first = true;
    for &i in &r.order {
        for (m, line) in entries[i].iter().enumerate() {
            if m == 0 && r.comment {
                out.push_str(&format!(
                    "    # before {}\n",
                    line.split(':').next().unwrap_or("")
                ));
            }
            let lead = if first { "  - " } else { "    " };
            first = false;
            let trail = if r.messy { "  " } else { "" };
            out.push_str(&format!("{lead}{line}{trail}\n"));
        }
    }
    out
}

fn render_file(rules: &[GenRule], defaults: Option<(u32, u8)>) -> String {
    let mut y = String::from("# a generated file\n");
    if !rules.is_empty() {
        y.push_str("rules:\n");
        for (n, r) in rules.iter().enumerate() {
            y.push_str(&render(r, n));
            y.push('\n');
        }
    }
    if let Some((m, d)) = defaults {
        y.push_str(&format!(
            "defaults:\n  dead_letter: L{d}\n  retry:\n    max_retries: {m}\n"
        ));
    }
    y.push_str("version: 1\n");
    y
}

fn comments(text: &str) -> Vec<String> {
    let mut c: Vec<String> = text
        .lines()
        .filter(|l| l.trim_start().starts_with('#'))
        .map(|l| l.trim().to_string())
        .collect();
    c.sort();
    c
}

#[test]
fn formatted_set_decides_like_the_original_keeps_comments_and_is_a_fixed_point() {
    let config = Config {
        cases: 96,
        failure_persistence: None,
        ..Config::default()
    };
    let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &[7; 32]);
    let mut runner = TestRunner::new_with_rng(config, rng);
    let files = (
        prop::collection::vec(rule(), 0..5),
        prop::option::of((0..5u32, 0..3u8)),
    );
    let compiled = std::cell::Cell::new(0);
    runner
        .run(&files, |(rules, defaults)| {
            let text = render_file(&rules, defaults);
            let Ok(before) = compile(vec![SourceFile::new("a.yaml", "a.yaml", text.clone())])
            else {
                return Ok(()); // a set the compiler rejects (a shadowed catch-all is only a warning)
            };
            compiled.set(compiled.get() + 1);
            let tidy =
                format(&text, FileKind::Rules).map_err(|e| TestCaseError::fail(e.to_string()))?;
            let after = compile(vec![SourceFile::new("a.yaml", "a.yaml", tidy.clone())])
                .map_err(|e| TestCaseError::fail(format!("{e:?}\n{tidy}")))?;
            same_decisions(&before, &after)
                .map_err(|e| TestCaseError::fail(format!("{e}\n{text}\n{tidy}")))?;
            prop_assert_eq!(comments(&text), comments(&tidy));
            prop_assert_eq!(
                &format(&tidy, FileKind::Rules).unwrap(),
                &tidy,
                "not a fixed point:\n{}",
                text
            );
            prop_assert!(
                tidy.starts_with("# a generated file\nversion: 1\n"),
                "{}",
                tidy
            );
            Ok(())
        })
        .unwrap();
    assert!(
        compiled.get() >= 48,
        "only {} generated files compiled",
        compiled.get()
    );
}
