//! Random pieces of rule files: whole files, rules, rhai guards and scripts, durations, globs,
//! comparisons, huge numbers and deep nesting. Mostly plausible, sometimes not, so that both
//! the checks and the parsers get exercised.

use rand::RngExt;
use rand::rngs::SmallRng;
use rand::seq::IndexedRandom;

/// A whole rule file with a few random rules (and sometimes defaults).
pub fn rule_file(rng: &mut SmallRng) -> String {
    let mut out = String::from("version: 1\n");
    if rng.random_bool(0.3) {
        out.push_str("defaults:\n  retry:\n");
        out.push_str(&format!("    max_retries: {}\n", number(rng)));
        out.push_str(&format!("    backoff: {}\n", backoff(rng)));
        out.push_str(&format!("  dead_letter: {}\n", label(rng)));
    }
    out.push_str("rules:\n");
    for i in 0..rng.random_range(0..6) {
        out.push_str(&rule(rng, i));
    }
    out
}

/// One rule, as an entry of `rules:`.
pub fn rule(rng: &mut SmallRng, i: usize) -> String {
    let mut out = format!("  - id: r{i}-{}\n", rng.random_range(0..1000));
    if rng.random_bool(0.7) {
        out.push_str("    match:\n");
        if rng.random_bool(0.6) {
            out.push_str(&format!("      biz: {}\n", names(rng)));
        }
        if rng.random_bool(0.8) {
            out.push_str(&format!("      code: {}\n", names(rng)));
        }
        if rng.random_bool(0.3) {
            out.push_str(&format!("      attempt: \"{}\"\n", comparison(rng, false)));
        }
        if rng.random_bool(0.3) {
            out.push_str(&format!("      elapsed: \"{}\"\n", comparison(rng, true)));
        }
        if rng.random_bool(0.2) {
            out.push_str(&format!("      attrs: {{ tenant: {} }}\n", names(rng)));
        }
    }
    if rng.random_bool(0.4) {
        out.push_str(&format!("    if: {}\n", quoted(&guard(rng))));
    }
    if rng.random_bool(0.2) {
        out.push_str("    give_up: true\n");
    } else if rng.random_bool(0.8) {
        out.push_str(&format!(
            "    retry:\n      max_retries: {}\n      backoff: {}\n",
            number(rng),
            backoff(rng)
        ));
        if rng.random_bool(0.3) {
            out.push_str(&format!("      max_elapsed: {}\n", duration(rng)));
        }
    }
    if rng.random_bool(0.5) {
        out.push_str(&format!("    dead_letter: {}\n", label(rng)));
    }
    out
}

fn label(rng: &mut SmallRng) -> &'static str {
    ["L1", "L2", "L3", "default", "\"\"", "x y"]
        .choose(rng)
        .unwrap()
}

fn backoff(rng: &mut SmallRng) -> String {
    let kind = match rng.random_range(0..5) {
        0 => format!("fixed: {}", duration(rng)),
        1 => format!(
            "linear: {{ base: {}, step: {}, max: {} }}",
            duration(rng),
            duration(rng),
            duration(rng)
        ),
        2 => format!(
            "exponential: {{ base: {}, factor: {}, max: {} }}",
            duration(rng),
            number(rng),
            duration(rng)
        ),
        3 => {
            let n = rng.random_range(0..5);
            let entries: Vec<String> = (0..n).map(|_| duration(rng)).collect();
            format!("schedule: [{}]", entries.join(", "))
        }
        _ => format!("script: {}", quoted(&script(rng))),
    };
    let jitter = [
        "",
        ", jitter: full",
        ", jitter: equal",
        ", jitter: decorrelated",
    ];
    let jitter = match rng.random_range(0..6) {
        4 => format!(", jitter: \"{}%\"", number(rng)),
        5 => format!(", jitter: {}", duration(rng)),
        n => jitter[n].to_string(),
    };
    format!("{{ {kind}{jitter} }}")
}

/// `value` as a single-quoted YAML scalar.
pub fn quoted(value: &str) -> String {
    format!("'{}'", value.replace('\'', "''"))
}

/// A duration: valid (`1h30m`, `250ms`, bare ms) or not (`5q`, `1.5.5s`, `-1s`).
pub fn duration(rng: &mut SmallRng) -> String {
    let units = ["ms", "s", "m", "h", "d", "", "q", "us", "S", "1h30m"];
    match rng.random_range(0..10) {
        0 => huge_number(rng),
        1 => [
            "1h30m",
            "1.5s",
            "0",
            "-1s",
            "1.5.5s",
            "",
            "''",
            "5 parsecs",
            "1e3s",
            "ms",
        ]
        .choose(rng)
        .unwrap()
        .to_string(),
        _ => format!("{}{}", number(rng), units.choose(rng).unwrap()),
    }
}

fn number(rng: &mut SmallRng) -> String {
    match rng.random_range(0..8) {
        0 => huge_number(rng),
        1 => format!("-{}", rng.random_range(0..100)),
        2 => format!("{}.{}", rng.random_range(0..10), rng.random_range(0..100)),
        _ => rng.random_range(0..20).to_string(),
    }
}

/// A number at or past the edges of u32, u64, i64 and f64.
pub fn huge_number(rng: &mut SmallRng) -> String {
    [
        "4294967296",
        "18446744073709551615",
        "18446744073709551616",
        "9223372036854775807",
        "-9223372036854775808",
        "99999999999999999999999999999999",
        "1e309",
        "-1e309",
        ".nan",
        ".inf",
        "0x7fffffffffffffff",
        "1_000_000_000_000",
    ]
    .choose(rng)
    .unwrap()
    .to_string()
}

/// Names for `biz`/`code`: a name, a glob, or a list of them.
fn names(rng: &mut SmallRng) -> String {
    match rng.random_range(0..3) {
        0 => format!("\"{}\"", glob(rng)),
        1 => format!("[{}, \"{}\"]", glob(rng), glob(rng)),
        _ => ["PAYMENT", "NET_TIMEOUT", "DB_LOCK_WAIT", "ORDER"]
            .choose(rng)
            .unwrap()
            .to_string(),
    }
}

/// A glob, valid or not.
pub fn glob(rng: &mut SmallRng) -> String {
    [
        "PAY*",
        "*",
        "*_TIMEOUT",
        "DB_*",
        "**",
        "*X*",
        "PAY?",
        "[A-Z]",
        "a*b*c",
        "",
        "\\\\*",
        "*LOCK",
        "NET_*_X",
    ]
    .choose(rng)
    .unwrap()
    .to_string()
}

/// A comparison for `attempt` (numbers) or `elapsed` (durations), valid or not.
pub fn comparison(rng: &mut SmallRng, durations: bool) -> String {
    let op = ["<", "<=", ">", ">=", "==", "!=", "=>", "=", "<>", ""]
        .choose(rng)
        .unwrap();
    let value = if durations {
        duration(rng)
    } else {
        number(rng)
    };
    let space = if rng.random_bool(0.8) { " " } else { "" };
    format!("{op}{space}{value}")
}

/// A rhai boolean expression, often with calls to functions (some the sandbox does not
/// offer, such as `sleep`: those must be rejected at load, never run).
pub fn guard(rng: &mut SmallRng) -> String {
    if rng.random_bool(0.15) {
        return nasty_expr(rng);
    }
    let n = rng.random_range(1..4);
    let parts: Vec<String> = (0..n).map(|_| comparison_expr(rng)).collect();
    parts.join([" && ", " || "].choose(rng).unwrap())
}

/// A rhai expression meant to yield milliseconds.
pub fn script(rng: &mut SmallRng) -> String {
    if rng.random_bool(0.2) {
        return nasty_expr(rng);
    }
    [
        "min(500 * 2 ** attempt, 300_000)",
        "attempt * 1000",
        "max(last_delay * 3, 100)",
        "if attempt > 3 { 60_000 } else { 1_000 }",
        "2 ** 62 * 4",
        "elapsed / 0",
        "1.5 * attempt",
        "\"soon\"",
        "-5",
        "signals.fail_rate * 10_000.0",
        "hour_of_day(now, 1) * 1000",
    ]
    .choose(rng)
    .unwrap()
    .to_string()
}

fn comparison_expr(rng: &mut SmallRng) -> String {
    let lhs = [
        "attempt",
        "elapsed",
        "last_delay",
        "signals.fail_rate",
        "signals[\"retry_queue_depth\"]",
        "code.len()",
        "hour_of_day(now, 2)",
        "day_of_week(now, -5)",
        "abs(attempt - 5)",
        "min(attempt, 3)",
        "max(elapsed, last_delay)",
        "attrs.len()",
        "parse_int(\"12\")",
        "to_string(attempt).len()",
        "biz.index_of(\"A\")",
        "headers.len()",
    ];
    let bools = [
        "code.starts_with(\"NET\")",
        "attrs.contains(\"tenant\")",
        "biz == \"PAYMENT\"",
        "retry_after == ()",
        "attrs.tenant == \"acme\"",
        "code in [\"A\", \"B\"]",
        "true",
        "atempt > 1",
    ];
    if rng.random_bool(0.3) {
        return bools.choose(rng).unwrap().to_string();
    }
    let op = ["<", "<=", ">", ">=", "==", "!="].choose(rng).unwrap();
    let rhs = match rng.random_range(0..4) {
        0 => huge_number(rng),
        1 => format!("{}.5", rng.random_range(0..10)),
        _ => rng.random_range(0..100).to_string(),
    };
    format!("{} {op} {rhs}", lhs.choose(rng).unwrap())
}

/// Expressions that push the sandbox: deep nesting, long chains, loops, overflow, garbage.
fn nasty_expr(rng: &mut SmallRng) -> String {
    let depth = rng.random_range(10..400);
    match rng.random_range(0..12) {
        0 => format!("{}attempt > 1{}", "(".repeat(depth), ")".repeat(depth)),
        1 => format!("{} > 1", vec!["attempt"; depth].join(" + ")),
        2 => "{ let x = 0; while x < 100_000_000 { x += 1; } x > 1 }".into(),
        3 => "{ let s = \"a\"; loop { s += s; } }".into(),
        4 => "9223372036854775807 + attempt > 0".into(),
        5 => format!("{}true", "!".repeat(depth)),
        6 => "[1, 2, 3].map(|x| x * attempt).len() > 1".into(),
        7 => format!("\"{}\".len() > 1", "x".repeat(depth * 100)),
        8 => [
            "attempt > 1 && sleep(100000) == ()",
            "sleep(0.5) == ()",
            "timestamp() > 0",
            "exit()",
        ]
        .choose(rng)
        .unwrap()
        .to_string(),
        // Nested closures: rhai's own operation count restarts in each; the sandbox's does not.
        9 => {
            let a = format!(
                "[{}]",
                (0..40)
                    .map(|i| i.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            format!("{a}.map(|i| {a}.map(|j| {a}.map(|k| i * j * k).len()).len()).len() > 0")
        }
        10 => "Fn(\"sleep\").call(1) == ()".into(),
        _ => {
            let junk = [
                "(", ")", "{", "}", "&&", "||", "!", "attempt", "1", "\"", "fn", ".",
            ];
            (0..rng.random_range(1..20))
                .map(|_| *junk.choose(rng).unwrap())
                .collect::<Vec<_>>()
                .join(" ")
        }
    }
}

/// A deeply nested YAML value (flow or block), or an alias bomb.
pub fn nesting(rng: &mut SmallRng) -> String {
    let depth = rng.random_range(50..2000);
    match rng.random_range(0..3) {
        0 => format!("{}1{}", "[".repeat(depth), "]".repeat(depth)),
        1 => format!("{}1{}", "{a: ".repeat(depth), "}".repeat(depth)),
        _ => {
            let mut out = String::from("&a0 [x, x]\n");
            for i in 1..rng.random_range(2..12) {
                out.push_str(&format!("b{i}: &a{i} [*a{p}, *a{p}]\n", p = i - 1));
            }
            out
        }
    }
}
