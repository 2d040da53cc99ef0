//! Running a [`Suite`]: each case and path under many RNG seeds, searched with proptest so a
//! failure shrinks to a small seed that reproduces it.

use super::coverage::{self, Coverage, Outcome, Seen};
use super::suite::{Action, CaseExpect, Given, PathExpect, RuleTest, Suite, TestKind};
use crate::diag::Diagnostic;
use crate::duration::DurationDisplay;
use crate::set::CompiledSet;
use crate::testing::{MAX_PATH_ATTEMPTS, Path, simulate_path};
use crate::types::{Decision, GiveUpReason};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed, TestCaseError, TestError, TestRunner};
use serde::Serialize;
use std::cell::RefCell;
use std::fmt;
use std::time::Duration;

/// The fewest seeds a path is run under.
pub const MIN_SEEDS: u32 = 64;

/// How to run a suite.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunOptions {
    /// Seeds each case and path is run under (at least [`MIN_SEEDS`]).
    pub seeds: u32,
    /// The rules directory as the user named it: a failure's `rebound decide` command passes
    /// it as `--rules`, so that it decides on the same set from where the user ran the tests.
    pub rules: Option<String>,
    /// Run only the cases and paths whose name contains this.
    pub filter: Option<String>,
    /// Work out which rules and outcomes the tests exercised ([`Report::coverage`]).
    pub coverage: bool,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            seeds: 256,
            rules: None,
            filter: None,
            coverage: false,
        }
    }
}

/// The outcome of a whole suite.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// Cases and paths that held under every seed.
    pub passed: usize,
    /// Cases and paths that failed under some seed, and test files that did not load.
    pub failed: usize,
    /// One result per case and path run, in suite order.
    pub results: Vec<TestResult>,
    /// Cases and paths left out by [`RunOptions::filter`].
    pub filtered_out: usize,
    /// Test files that did not load (each counted once in `failed`; their tests did not run).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub broken_files: Vec<BrokenFileReport>,
    /// Every error of those files, in file order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<Diagnostic>,
    /// Which rules and outcomes the tests exercised, when [`RunOptions::coverage`] asks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub coverage: Option<Coverage>,
}

/// A test file that did not load.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BrokenFileReport {
    /// The file.
    pub file: String,
    /// Its first error, as `FILE:LINE:COL`.
    pub at: String,
    /// That error's message.
    pub message: String,
    /// How many errors it has.
    pub errors: usize,
}

/// A rule that decided while a test ran, and what it decided.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Exercised {
    /// The deciding rule, or `defaults`.
    pub rule: String,
    /// What the decision came to.
    pub outcome: Outcome,
}

/// The outcome of one case or path.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TestResult {
    /// `case` or `path`.
    pub kind: &'static str,
    /// Its name.
    pub name: String,
    /// Where it is written, as `FILE:LINE:COL`.
    pub at: String,
    /// Whether it held under every seed tried.
    pub passed: bool,
    /// How many seeds it ran under.
    pub seeds: u32,
    /// Why it failed, with the seed that shows it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<Failure>,
    /// Every (rule, outcome) its decisions came to, under all seeds tried, sorted.
    pub outcomes: Vec<Exercised>,
}

/// A failing seed and what it did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Failure {
    /// The seed (shrunk by proptest to a small one that still fails).
    pub seed: u64,
    /// Each expectation that did not hold.
    pub problems: Vec<String>,
    /// The decisions under that seed: one for a case, the whole path for a path.
    pub path: Vec<StepReport>,
    /// The whole path as a table, for people.
    #[serde(skip)]
    pub table: String,
    /// How to replay it: a `rebound decide` command for a case, a `seed:` for a path.
    pub reproduce: String,
}

/// One decision of a failing case or path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StepReport {
    /// The attempt that failed.
    pub attempt: u32,
    /// Time since the first delivery began, in ms.
    pub elapsed_ms: u64,
    /// `retry` or `dead_letter`.
    pub action: &'static str,
    /// The delay, for a retry.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delay_ms: Option<u64>,
    /// The label, for a dead letter.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dead_letter: Option<String>,
    /// The reason, for a dead letter.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<&'static str>,
    /// The deciding rule, or `defaults`.
    pub rule: String,
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl Report {
    /// True when nothing failed.
    pub fn ok(&self) -> bool {
        self.failed == 0
    }
}

/// Runs every test of `suite` against `set`.
///
/// A test's search seed comes from its place in the whole suite, so `filter` leaves the
/// seeds of the tests it keeps as they were.
pub fn run_suite(set: &CompiledSet, suite: &Suite, options: RunOptions) -> Report {
    let seeds = options.seeds.max(MIN_SEEDS);
    let mut seen = Seen::new();
    let mut filtered_out = 0;
    let mut results = Vec::new();
    for (i, t) in suite.tests.iter().enumerate() {
        if let Some(want) = &options.filter
            && !t.name.contains(want.as_str())
        {
            filtered_out += 1;
            continue;
        }
        let (result, test_seen) = run_test(set, t, seeds, i as u64, options.rules.as_deref());
        seen.extend(test_seen);
        results.push(result);
    }
    let passed = results.iter().filter(|r| r.passed).count();
    let broken_files: Vec<BrokenFileReport> = suite
        .broken
        .iter()
        .map(|b| BrokenFileReport {
            file: b.file.clone(),
            at: b.at(),
            message: b
                .diagnostics
                .first()
                .map(|d| d.message.clone())
                .unwrap_or_default(),
            errors: b.diagnostics.len(),
        })
        .collect();
    Report {
        failed: results.len() - passed + broken_files.len(),
        passed,
        results,
        filtered_out,
        broken_files,
        errors: suite
            .broken
            .iter()
            .flat_map(|b| b.diagnostics.iter().cloned())
            .collect(),
        coverage: options.coverage.then(|| coverage::coverage(set, &seen)),
    }
}

/// A fixed search seed per test, so a run is reproducible and tests do not share seeds.
fn search_seed(index: u64) -> u64 {
    0x5eed_0f7e_57a1_u64 ^ index.wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

fn runner(cases: u32, index: u64) -> TestRunner {
    TestRunner::new(Config {
        cases,
        failure_persistence: None,
        rng_seed: RngSeed::Fixed(search_seed(index)),
        max_shrink_iters: 512,
        ..Config::default()
    })
}

fn run_test(
    set: &CompiledSet,
    test: &RuleTest,
    seeds: u32,
    index: u64,
    rules: Option<&str>,
) -> (TestResult, Seen) {
    // Every decision made under every seed tried, shrinking included.
    let seen = RefCell::new(Seen::new());
    let record = |path: &Path| {
        coverage::record(
            &mut seen.borrow_mut(),
            path.passes()
                .flat_map(|p| p.steps.iter().map(|s| &s.decision)),
        );
    };
    let (kind, outcome, tried) = match &test.kind {
        TestKind::Case(case) => {
            let ctx = case.given.context();
            let check = |seed: u64| {
                let path = one_decision(set, ctx, seed);
                record(&path);
                case_problems(&case.expect, &path)
            };
            match case.given.seed {
                // A pinned seed decides the case alone, as `rebound decide --seed` would.
                Some(seed) => ("case", failing(seed, &check).map(|p| (seed, p)), 1),
                None => ("case", search(seeds, index, &check), seeds),
            }
        }
        TestKind::Path(p) => {
            let ctx = p.given.context();
            let check = |seed: u64| {
                let path = simulate_path(set, ctx, p.processing, seed);
                record(&path);
                path_problems(&p.expect, &path)
            };
            let pinned = p
                .given
                .seed
                .and_then(|seed| failing(seed, &check).map(|problems| (seed, problems)));
            let tried = seeds + u32::from(p.given.seed.is_some());
            (
                "path",
                pinned.or_else(|| search(seeds, index, &check)),
                tried,
            )
        }
    };
    let failure = outcome.map(|(seed, problems)| {
        let path = match &test.kind {
            TestKind::Case(case) => one_decision(set, case.given.context(), seed),
            TestKind::Path(p) => simulate_path(set, p.given.context(), p.processing, seed),
        };
        let reproduce = match &test.kind {
            TestKind::Case(case) => format!(
                "rebound decide {}{} --seed {seed}   (or add 'seed: {seed}' to its 'given')",
                rules.map_or(String::new(), |dir| format!("--rules {} ", quote(dir))),
                decide_flags(&case.given)
            ),
            TestKind::Path(_) => format!("add 'seed: {seed}' to its 'given'"),
        };
        Failure {
            seed,
            problems,
            path: path.steps.iter().map(step_report).collect(),
            table: path.to_string(),
            reproduce,
        }
    });
    let seen = seen.into_inner();
    let mut outcomes: Vec<Exercised> = seen
        .iter()
        .map(|(rule, outcome)| Exercised {
            rule: rule.to_string(),
            outcome: *outcome,
        })
        .collect();
    outcomes.sort();
    let result = TestResult {
        kind,
        name: test.name.clone(),
        at: test.at(),
        passed: failure.is_none(),
        seeds: tried,
        failure,
        outcomes,
    };
    (result, seen)
}

/// The problems under `seed`, or `None` when everything held.
fn failing(seed: u64, check: &impl Fn(u64) -> Vec<String>) -> Option<Vec<String>> {
    let problems = check(seed);
    (!problems.is_empty()).then_some(problems)
}

/// Searches `cases` seeds with proptest; on a failure, proptest shrinks the seed and this
/// returns the smallest failing one with its problems.
fn search(
    cases: u32,
    index: u64,
    check: &impl Fn(u64) -> Vec<String>,
) -> Option<(u64, Vec<String>)> {
    let result = runner(cases, index).run(&any::<u64>(), |seed| match failing(seed, check) {
        None => Ok(()),
        Some(problems) => Err(TestCaseError::fail(problems.join("; "))),
    });
    match result {
        Ok(()) => None,
        Err(TestError::Fail(_, seed)) => Some((seed, check(seed))),
        Err(TestError::Abort(why)) => Some((0, vec![format!("the seed search stopped: {why}")])),
    }
}

/// A case as a one-step path, so that it prints like one.
fn one_decision(set: &CompiledSet, ctx: crate::FailureContext<'_>, seed: u64) -> Path {
    let mut rng = crate::backoff::jitter_rng(seed);
    let decision = set.decide(&ctx, &mut rng).decision;
    Path {
        seed,
        processing: Duration::ZERO,
        retry_after: ctx.retry_after,
        steps: vec![crate::testing::Step {
            attempt: ctx.attempt,
            elapsed: ctx.elapsed,
            last_delay: ctx.last_delay,
            decision,
        }],
        redrives: Vec::new(),
    }
}

fn action_name(d: &Decision) -> &'static str {
    match d {
        Decision::Retry { .. } => "retry",
        Decision::DeadLetter { .. } => "dead_letter",
    }
}

fn case_problems(expect: &CaseExpect, path: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let Some(step) = path.steps.first() else {
        return vec!["no decision was made".into()];
    };
    let d = &step.decision;
    if let Some(want) = expect.action {
        let want = match want {
            Action::Retry => "retry",
            Action::DeadLetter => "dead_letter",
        };
        if action_name(d) != want {
            out.push(format!("expected action {want}, got {}", action_name(d)));
        }
    }
    let delay = match d {
        Decision::Retry { delay, .. } => Some(*delay),
        Decision::DeadLetter { .. } => None,
    };
    if let Some(want) = expect.delay {
        match delay {
            Some(got) if got == want => {}
            Some(got) => out.push(format!(
                "expected delay {}, got {}",
                DurationDisplay(want),
                DurationDisplay(got)
            )),
            None => out.push(format!(
                "expected a retry after {}, got a dead letter",
                DurationDisplay(want)
            )),
        }
    }
    if let Some((lo, hi)) = expect.delay_between {
        let range = format!("[{}, {}]", DurationDisplay(lo), DurationDisplay(hi));
        match delay {
            Some(got) if (lo..=hi).contains(&got) => {}
            Some(got) => out.push(format!(
                "expected a delay in {range}, got {}",
                DurationDisplay(got)
            )),
            None => out.push(format!(
                "expected a retry with a delay in {range}, got a dead letter"
            )),
        }
    }
    if let Some(want) = &expect.rule
        && d.rule().as_str() != want
    {
        out.push(format!("expected rule {want}, got {}", d.rule()));
    }
    let (label, reason) = match d {
        Decision::DeadLetter { label, reason, .. } => (Some(label.as_str()), Some(*reason)),
        Decision::Retry { .. } => (None, None),
    };
    if let Some(want) = &expect.dead_letter
        && label != Some(want.as_str())
    {
        out.push(match label {
            Some(got) => format!("expected dead_letter {want}, got {got}"),
            None => format!("expected dead_letter {want}, got a retry"),
        });
    }
    if let Some(want) = expect.reason
        && reason != Some(want)
    {
        out.push(match reason {
            Some(got) => format!("expected reason {want}, got {got}"),
            None => format!("expected reason {want}, got a retry"),
        });
    }
    out
}

fn path_problems(expect: &PathExpect, path: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let Some(end) = path.end() else {
        return vec![format!(
            "the path does not terminate: no dead letter after {MAX_PATH_ATTEMPTS} attempts (the hard cap)"
        )];
    };
    if let Some(want) = expect.retries
        && path.retries() != want
    {
        out.push(format!("expected {want} retries, got {}", path.retries()));
    }
    if let Some(want) = &expect.dead_letter
        && end.label.as_str() != want
    {
        out.push(format!("expected dead_letter {want}, got {}", end.label));
    }
    if let Some(want) = expect.reason
        && end.reason != want
    {
        out.push(format!("expected reason {want}, got {}", end.reason));
    }
    if let Some(want) = &expect.rule
        && end.rule.as_str() != want
    {
        out.push(format!(
            "expected the path to end by rule {want}, got {}",
            end.rule
        ));
    }
    let total = path.total_delay();
    if let Some(most) = expect.total_delay_at_most
        && total > most
    {
        out.push(format!(
            "total delay {} is more than total_delay_at_most {}",
            DurationDisplay(total),
            DurationDisplay(most)
        ));
    }
    if let Some(least) = expect.total_delay_at_least
        && total < least
    {
        out.push(format!(
            "total delay {} is less than total_delay_at_least {}",
            DurationDisplay(total),
            DurationDisplay(least)
        ));
    }
    out
}

fn step_report(step: &crate::testing::Step) -> StepReport {
    let (delay_ms, dead_letter, reason) = match &step.decision {
        Decision::Retry { delay, .. } => (Some(ms(*delay)), None, None),
        Decision::DeadLetter { label, reason, .. } => {
            (None, Some(label.to_string()), Some(reason_str(*reason)))
        }
    };
    StepReport {
        attempt: step.attempt,
        elapsed_ms: ms(step.elapsed),
        action: action_name(&step.decision),
        delay_ms,
        dead_letter,
        reason,
        rule: step.decision.rule().to_string(),
    }
}

/// `s` quoted for a POSIX shell where needed.
fn quote(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-.=:/".contains(c));
    if plain {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// The `rebound decide` flags of a failure, quoted for a POSIX shell where needed.
fn decide_flags(g: &Given) -> String {
    let d = |v: Duration| DurationDisplay(v).to_string();
    let mut out = format!(
        "--biz {} --code {} --attempt {}",
        quote(&g.biz),
        quote(&g.code),
        g.attempt
    );
    if !g.elapsed.is_zero() {
        out += &format!(" --elapsed {}", d(g.elapsed));
    }
    if let Some(r) = g.retry_after {
        out += &format!(" --retry-after {}", d(r));
    }
    if !g.last_delay.is_zero() {
        out += &format!(" --last-delay {}", d(g.last_delay));
    }
    for (k, v) in &g.attrs {
        out += &format!(" --attr {}", quote(&format!("{k}={v}")));
    }
    for (k, v) in &g.headers {
        out += &format!(" --header {}", quote(&format!("{k}={v}")));
    }
    for (k, v) in &g.signals {
        out += &format!(" --signal {}", quote(&format!("{k}={v}")));
    }
    out += &format!(" --now {}", crate::wall_time::Rfc3339(g.now));
    out
}

fn reason_str(r: GiveUpReason) -> &'static str {
    r.as_str()
}

impl Report {
    /// The report for people: with `verbose`, every case and path with its result and the
    /// rules and outcomes it exercised; else the failures alone. Then the files that did not
    /// load, the coverage when it was asked for, and the closing `N passed, M failed` line.
    pub fn render(&self, verbose: bool) -> String {
        Text {
            report: self,
            verbose,
        }
        .to_string()
    }
}

/// A report as text; [`Report::render`].
struct Text<'a> {
    report: &'a Report,
    verbose: bool,
}

/// `payment-processing: retry, max_retries; defaults: max_retries`.
fn exercised(outcomes: &[Exercised]) -> String {
    let mut out = String::new();
    let mut last: Option<&str> = None;
    for e in outcomes {
        if last == Some(e.rule.as_str()) {
            out += ", ";
        } else {
            if last.is_some() {
                out += "; ";
            }
            out += &format!("{}: ", e.rule);
            last = Some(&e.rule);
        }
        out += e.outcome.as_str();
    }
    out
}

/// The failures (or, verbose, every result), then the closing `N passed, M failed` line.
impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        Text {
            report: self,
            verbose: false,
        }
        .fmt(f)
    }
}

impl fmt::Display for Text<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let report = self.report;
        for r in report.results.iter() {
            let Some(fail) = &r.failure else {
                if self.verbose {
                    writeln!(
                        f,
                        "ok   {} '{}' ({}) under {} seed(s); decided {}",
                        r.kind,
                        r.name,
                        r.at,
                        r.seeds,
                        exercised(&r.outcomes)
                    )?;
                }
                continue;
            };
            writeln!(
                f,
                "FAIL {} '{}' ({}) with seed {}",
                r.kind, r.name, r.at, fail.seed
            )?;
            for p in &fail.problems {
                writeln!(f, "  {p}")?;
            }
            for line in fail.table.lines() {
                writeln!(f, "  {line}")?;
            }
            if self.verbose {
                writeln!(f, "  decided: {}", exercised(&r.outcomes))?;
            }
            writeln!(f, "  reproduce: {}\n", fail.reproduce)?;
        }
        for b in &report.broken_files {
            writeln!(
                f,
                "FAIL file {}: {}{}; none of its tests ran\n",
                b.at,
                b.message,
                match b.errors {
                    1 => String::new(),
                    n => format!(" (and {} more error(s))", n - 1),
                }
            )?;
        }
        if let Some(coverage) = &report.coverage {
            writeln!(f, "{coverage}")?;
        }
        if report.filtered_out > 0 {
            writeln!(f, "{} filtered out", report.filtered_out)?;
        }
        writeln!(f, "{} passed, {} failed", report.passed, report.failed)
    }
}
