//! Test files → a validated [`Suite`]: every case and path with its durations parsed, its
//! place in the file, and each problem reported as a diagnostic with file:line:col, the way
//! rule files are.

use super::model::{ActionSpec, CaseExpectSpec, GivenSpec, PathExpectSpec, ReasonSpec, TestFile};
use crate::context::OwnedFailure;
use crate::diag::{Diagnostic, Pos, did_you_mean};
use crate::load::{SourceFile, parse_yaml, utf8_text};
use crate::model::Scalar;
use crate::positions::PositionIndex;
use crate::set::CompiledSet;
use crate::types::GiveUpReason;
use std::collections::HashSet;
use std::io;
use std::path::Path;
use std::time::Duration;

/// A test's `now` when its `given` does not say: `2026-01-01T00:00:00Z`, in ms since the
/// epoch, so that tests do not depend on the day they run.
pub const DEFAULT_NOW: u64 = 1_767_225_600_000;

/// Every test of a set, in file order, cases of a file before its paths.
#[derive(Debug, Clone, Default)]
pub struct Suite {
    /// The tests.
    pub tests: Vec<RuleTest>,
    /// Test files that did not load ([`load_suite_each`] only): none of their tests is in
    /// `tests`, and each counts as one failure.
    pub broken: Vec<BrokenFile>,
}

/// A test file that did not load, with every problem found in it.
#[derive(Debug, Clone, PartialEq)]
pub struct BrokenFile {
    /// The file, as the user named it.
    pub file: String,
    /// Its errors, in file order (at least one).
    pub diagnostics: Vec<Diagnostic>,
}

impl BrokenFile {
    /// `FILE:LINE:COL` of its first error, or the file alone when that has no place.
    pub fn at(&self) -> String {
        match self.diagnostics.first() {
            Some(Diagnostic {
                line: Some(line),
                column,
                ..
            }) => match column {
                Some(col) => format!("{}:{line}:{col}", self.file),
                None => format!("{}:{line}", self.file),
            },
            _ => self.file.clone(),
        }
    }
}

/// One case or path, with where it is written.
#[derive(Debug, Clone)]
pub struct RuleTest {
    /// Its `name`.
    pub name: String,
    /// The test file, as the user named it (`rules/tests/payment.yaml`).
    pub file: String,
    /// Where its entry starts.
    pub pos: Option<Pos>,
    /// What it checks.
    pub kind: TestKind,
}

impl RuleTest {
    /// `FILE:LINE:COL`, or the file alone when the position is unknown.
    pub fn at(&self) -> String {
        match self.pos {
            Some(p) => format!("{}:{p}", self.file),
            None => self.file.clone(),
        }
    }
}

/// A case or a path.
#[derive(Debug, Clone)]
pub enum TestKind {
    /// One decision.
    Case(CaseTest),
    /// A replayed failure.
    Path(PathTest),
}

/// A failure with every default filled in, and the seed a test may pin.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Given {
    /// The failure (a path's first).
    pub failure: OwnedFailure,
    /// A pinned seed.
    pub seed: Option<u64>,
}

impl std::ops::Deref for Given {
    type Target = OwnedFailure;

    fn deref(&self) -> &OwnedFailure {
        &self.failure
    }
}

/// `retry` or `dead_letter`.
pub use crate::ruletest::model::ActionSpec as Action;

/// A case: one decision and what it must be.
#[derive(Debug, Clone)]
pub struct CaseTest {
    /// The failure.
    pub given: Given,
    /// What must hold.
    pub expect: CaseExpect,
}

/// What a decision must be; `None` means "not checked".
#[derive(Debug, Clone, Default)]
pub struct CaseExpect {
    /// Retry or dead letter.
    pub action: Option<Action>,
    /// The exact delay.
    pub delay: Option<Duration>,
    /// The delay's inclusive range.
    pub delay_between: Option<(Duration, Duration)>,
    /// The deciding rule (or `defaults`).
    pub rule: Option<String>,
    /// The dead-letter label.
    pub dead_letter: Option<String>,
    /// Why it was not retried.
    pub reason: Option<GiveUpReason>,
}

/// A path: a failure replayed until dead-lettered, and what the whole path must do.
#[derive(Debug, Clone)]
pub struct PathTest {
    /// The failure that keeps happening, and where the path starts.
    pub given: Given,
    /// Time each attempt takes before it fails.
    pub processing: Duration,
    /// What must hold.
    pub expect: PathExpect,
}

/// What a path must do; `None` means "not checked".
#[derive(Debug, Clone, Default)]
pub struct PathExpect {
    /// Retries before the dead letter.
    pub retries: Option<u32>,
    /// The final label.
    pub dead_letter: Option<String>,
    /// The final reason.
    pub reason: Option<GiveUpReason>,
    /// The rule of the final decision.
    pub rule: Option<String>,
    /// Upper bound of the total delay.
    pub total_delay_at_most: Option<Duration>,
    /// Lower bound of the total delay.
    pub total_delay_at_least: Option<Duration>,
}

/// Reads the test files of the set in `set_dir`: `tests/*.yaml` (and `*.yml`), in byte-wise
/// order of their names. A set without `tests/` has no tests.
pub fn read_test_files(set_dir: &Path) -> io::Result<Vec<SourceFile>> {
    let dir = set_dir.join("tests");
    if !dir.is_dir() {
        return Ok(Vec::new());
    }
    crate::load::read_dir(&dir)
}

/// Parses and validates test files against `set` (whose rule ids an `expect.rule` may name).
///
/// All-or-nothing like a rule set: any error returns every diagnostic found.
pub fn load_suite(set: &CompiledSet, files: &[SourceFile]) -> Result<Suite, Vec<Diagnostic>> {
    let suite = load_suite_each(set, files);
    if suite.broken.is_empty() {
        Ok(suite)
    } else {
        Err(suite
            .broken
            .into_iter()
            .flat_map(|b| b.diagnostics)
            .collect())
    }
}

/// Parses and validates each test file on its own: a file with an error lands in
/// [`Suite::broken`] and the tests of the others still run (`rebound test`).
///
/// ```
/// # #[cfg(feature = "testing")] {
/// use rebound_engine::ruletest::load_suite_each;
/// use rebound_engine::{SourceFile, compile};
///
/// let rules = "version: 1\nrules:\n  - id: fast\n    retry: { backoff: { fixed: 100ms } }\n";
/// let set = compile(vec![SourceFile::new("r.yaml", "r.yaml", rules)]).unwrap();
/// let good = "version: 1\ncases:\n  - name: a\n    expect: { rule: fast }\n";
/// let bad = "version: 1\ncases:\n  - name: b\n    expekt: { rule: fast }\n";
/// let suite = load_suite_each(
///     &set,
///     &[SourceFile::new("a.yaml", "tests/a.yaml", good), SourceFile::new("b.yaml", "tests/b.yaml", bad)],
/// );
/// assert_eq!(suite.tests.len(), 1);
/// assert_eq!(suite.broken[0].at(), "tests/b.yaml:4:5");
/// # }
/// ```
pub fn load_suite_each(set: &CompiledSet, files: &[SourceFile]) -> Suite {
    let mut ids: Vec<&str> = set.rules().map(|r| r.id().as_str()).collect();
    ids.push("defaults");
    let mut suite = Suite::default();
    for file in files {
        let mut cx = Loader {
            ids: ids.clone(),
            diags: Vec::new(),
            tests: Vec::new(),
        };
        cx.file(file);
        if cx.diags.is_empty() {
            suite.tests.extend(cx.tests);
        } else {
            suite.broken.push(BrokenFile {
                file: file.path.clone(),
                diagnostics: cx.diags,
            });
        }
    }
    suite
}

struct Loader<'a> {
    ids: Vec<&'a str>,
    diags: Vec<Diagnostic>,
    tests: Vec<RuleTest>,
}

/// One test file being read: its name and positions.
struct FileCx<'f> {
    path: &'f str,
    positions: PositionIndex,
}

impl FileCx<'_> {
    fn error(&self, at: Option<Pos>, message: impl Into<String>) -> Diagnostic {
        Diagnostic::error(self.path, at, message)
    }
}

impl Loader<'_> {
    fn file(&mut self, file: &SourceFile) {
        let text = match utf8_text(file) {
            Ok(t) => t,
            Err(d) => return self.diags.push(d),
        };
        if text
            .lines()
            .all(|l| l.trim().is_empty() || l.trim_start().starts_with('#'))
        {
            return self.diags.push(Diagnostic::error(
                &file.path,
                Some(Pos::new(1, 1)),
                "the test file is empty; a test file starts with 'version: 1', then 'cases:' and/or 'paths:'",
            ));
        }
        let model: TestFile = match parse_yaml(&file.path, text) {
            Ok(m) => m,
            Err(d) => return self.diags.extend(d),
        };
        let f = FileCx {
            path: &file.path,
            positions: PositionIndex::build(text),
        };
        if model.version != 1 {
            let v = model.version;
            self.diags.push(f.error(
                f.positions.value("version"),
                format!("unsupported version {v}: only version 1 exists"),
            ));
        }
        let mut names = HashSet::new();
        for (i, case) in model.cases.iter().enumerate() {
            let path = format!("cases.{i}");
            self.name(&f, &path, &case.name, &mut names);
            let given = self.given(&f, &format!("{path}.given"), &case.given);
            let expect = self.case_expect(&f, &format!("{path}.expect"), &case.expect);
            self.tests.push(RuleTest {
                name: case.name.clone(),
                file: file.path.clone(),
                pos: f.positions.entry(&path),
                kind: TestKind::Case(CaseTest { given, expect }),
            });
        }
        for (i, spec) in model.paths.iter().enumerate() {
            let path = format!("paths.{i}");
            self.name(&f, &path, &spec.name, &mut names);
            let given = self.given(&f, &format!("{path}.given"), &spec.given);
            let processing = spec.processing.as_ref().map_or(Duration::ZERO, |p| {
                self.duration(&f, &format!("{path}.processing"), p)
            });
            let expect = self.path_expect(&f, &format!("{path}.expect"), &spec.expect);
            self.tests.push(RuleTest {
                name: spec.name.clone(),
                file: file.path.clone(),
                pos: f.positions.entry(&path),
                kind: TestKind::Path(PathTest {
                    given,
                    processing,
                    expect,
                }),
            });
        }
    }

    fn name(&mut self, f: &FileCx, path: &str, name: &str, seen: &mut HashSet<String>) {
        let at = f.positions.value(&format!("{path}.name"));
        if name.trim().is_empty() {
            self.diags.push(f.error(
                at,
                "the name is empty; say in a few words what the test checks",
            ));
        } else if !seen.insert(name.to_string()) {
            self.diags.push(f.error(
                at,
                format!("the name '{name}' is used twice in this file; failures are reported by name, so make it unique"),
            ));
        }
    }

    fn given(&mut self, f: &FileCx, path: &str, spec: &GivenSpec) -> Given {
        let attempt = spec.attempt.unwrap_or(1);
        if attempt == 0 {
            self.diags.push(f.error(
                f.positions.value(&format!("{path}.attempt")),
                "attempt 0 does not exist: the first delivery is attempt 1",
            ));
        }
        let mut dur = |key: &str, v: &Option<Scalar>| {
            v.as_ref()
                .map(|v| self.duration(f, &format!("{path}.{key}"), v))
        };
        let failure = OwnedFailure {
            biz: spec.biz.clone().unwrap_or_default(),
            code: spec.code.clone().unwrap_or_default(),
            attempt: attempt.max(1),
            redrives: spec.redrives.unwrap_or(0),
            elapsed: dur("elapsed", &spec.elapsed).unwrap_or_default(),
            retry_after: dur("retry_after", &spec.retry_after),
            last_delay: dur("last_delay", &spec.last_delay).unwrap_or_default(),
            attrs: spec.attrs.clone().unwrap_or_default(),
            headers: spec.headers.clone().unwrap_or_default(),
            now: spec.now.as_ref().map_or(DEFAULT_NOW, |text| {
                crate::wall_time::parse_rfc3339(text).unwrap_or_else(|e| {
                    let at = f.positions.value(&format!("{path}.now"));
                    self.diags.push(f.error(at, format!("now: {e}")));
                    DEFAULT_NOW
                })
            }),
            signals: spec.signals.clone().unwrap_or_default(),
        };
        Given {
            failure,
            seed: spec.seed,
        }
    }

    fn case_expect(&mut self, f: &FileCx, path: &str, spec: &CaseExpectSpec) -> CaseExpect {
        let sub = |k: &str| format!("{path}.{k}");
        let delay = spec
            .delay
            .as_ref()
            .map(|d| self.duration(f, &sub("delay"), d));
        let delay_between = spec.delay_between.as_ref().and_then(|list| {
            let at = f.positions.value(&sub("delay_between"));
            let [lo, hi] = list.as_slice() else {
                self.diags.push(f.error(
                    at,
                    format!(
                        "delay_between takes two durations, [min, max], e.g. [1s, 2s]; found {} value(s)",
                        list.len()
                    ),
                ));
                return None;
            };
            let lo = self.duration(f, &sub("delay_between.0"), lo);
            let hi = self.duration(f, &sub("delay_between.1"), hi);
            if lo > hi {
                self.diags.push(f.error(
                    at,
                    "delay_between is [min, max]: the first duration must not exceed the second",
                ));
            }
            Some((lo, hi))
        });
        let rule = spec.rule.as_ref().map(|r| self.rule_id(f, &sub("rule"), r));
        let expect = CaseExpect {
            action: spec.action,
            delay,
            delay_between,
            rule,
            dead_letter: spec.dead_letter.clone(),
            reason: spec.reason.map(reason),
        };
        let wants_retry = expect.delay.is_some() || expect.delay_between.is_some();
        let wants_dead = expect.dead_letter.is_some() || expect.reason.is_some();
        let contradiction = match expect.action {
            Some(ActionSpec::Retry) if wants_dead => {
                Some("'action: retry' with 'dead_letter' or 'reason', which only a dead letter has")
            }
            Some(ActionSpec::DeadLetter) if wants_retry => Some(
                "'action: dead_letter' with 'delay' or 'delay_between', which only a retry has",
            ),
            None if wants_retry && wants_dead => {
                Some("a delay together with 'dead_letter' or 'reason': no decision has both")
            }
            _ => None,
        };
        let at = f.positions.value(path);
        if let Some(what) = contradiction {
            self.diags
                .push(f.error(at, format!("this expectation can never hold: {what}")));
        }
        if spec.action.is_none()
            && spec.delay.is_none()
            && spec.delay_between.is_none()
            && spec.rule.is_none()
            && spec.dead_letter.is_none()
            && spec.reason.is_none()
        {
            self.diags.push(f.error(
                at,
                "expect is empty; give at least one of action, delay, delay_between, rule, dead_letter, reason",
            ));
        }
        expect
    }

    fn path_expect(&mut self, f: &FileCx, path: &str, spec: &PathExpectSpec) -> PathExpect {
        let sub = |k: &str| format!("{path}.{k}");
        let mut dur =
            |key: &str, v: &Option<Scalar>| v.as_ref().map(|v| self.duration(f, &sub(key), v));
        let at_most = dur("total_delay_at_most", &spec.total_delay_at_most);
        let at_least = dur("total_delay_at_least", &spec.total_delay_at_least);
        let rule = spec.rule.as_ref().map(|r| self.rule_id(f, &sub("rule"), r));
        let at = f.positions.value(path);
        if let (Some(lo), Some(hi)) = (at_least, at_most)
            && lo > hi
        {
            self.diags.push(f.error(
                at,
                "total_delay_at_least is more than total_delay_at_most: no path can hold both",
            ));
        }
        let expect = PathExpect {
            retries: spec.retries,
            dead_letter: spec.dead_letter.clone(),
            reason: spec.reason.map(reason),
            rule,
            total_delay_at_most: at_most,
            total_delay_at_least: at_least,
        };
        if expect.retries.is_none()
            && expect.dead_letter.is_none()
            && expect.reason.is_none()
            && expect.rule.is_none()
            && at_most.is_none()
            && at_least.is_none()
        {
            self.diags.push(f.error(
                at,
                "expect is empty; give at least one of retries, dead_letter, reason, rule, total_delay_at_most, total_delay_at_least",
            ));
        }
        expect
    }

    /// A rule id an expectation names: it must exist in the set (or be `defaults`).
    fn rule_id(&mut self, f: &FileCx, path: &str, id: &str) -> String {
        if !self.ids.contains(&id) {
            let mut d = f.error(
                f.positions.value(path),
                format!(
                    "no rule '{id}' in the set (a rule id, or 'defaults' when no rule matches)"
                ),
            );
            if let Some(best) = did_you_mean(id, &self.ids) {
                d = d.with_help(format!("did you mean '{best}'?"));
            }
            self.diags.push(d);
        }
        id.to_string()
    }

    fn duration(&mut self, f: &FileCx, path: &str, value: &Scalar) -> Duration {
        match scalar_duration(value) {
            Ok(d) => d,
            Err(e) => {
                self.diags.push(f.error(f.positions.value(path), e));
                Duration::ZERO
            }
        }
    }
}

fn reason(r: ReasonSpec) -> GiveUpReason {
    match r {
        ReasonSpec::GiveUp => GiveUpReason::GiveUp,
        ReasonSpec::MaxRetries => GiveUpReason::MaxRetries,
        ReasonSpec::MaxElapsed => GiveUpReason::MaxElapsed,
    }
}

/// A duration as rule files write it: a string with units, or whole milliseconds.
fn scalar_duration(value: &Scalar) -> Result<Duration, String> {
    match value {
        Scalar::Str(s) => crate::duration::parse_duration(s).map_err(|e| e.to_string()),
        Scalar::Int(n) => u64::try_from(*n)
            .map(Duration::from_millis)
            .map_err(|_| format!("bad duration '{n}': a duration cannot be negative")),
        Scalar::Float(x) => Err(format!(
            "bad duration '{x}': write a unit, e.g. '{x}s', or whole milliseconds"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compile;

    fn set() -> CompiledSet {
        let yaml = "version: 1\nrules:\n  - id: fast\n    match: { code: X }\n    retry: { backoff: { fixed: 100ms } }\n";
        compile(vec![SourceFile::new("r.yaml", "r.yaml", yaml)]).unwrap()
    }

    fn errors(tests: &str) -> Vec<String> {
        let file = SourceFile::new("t.yaml", "tests/t.yaml", tests);
        match load_suite(&set(), &[file]) {
            Ok(_) => Vec::new(),
            Err(diags) => diags.iter().map(ToString::to_string).collect(),
        }
    }

    #[test]
    fn omitted_given_keys_take_the_spec_defaults() {
        let file = SourceFile::new(
            "t.yaml",
            "tests/t.yaml",
            "version: 1\ncases:\n  - name: a\n    expect: { rule: defaults }\npaths:\n  - name: b\n    given: { code: X, elapsed: 1500, retry_after: 2s }\n    processing: 20ms\n    expect: { retries: 3 }\n",
        );
        let suite = load_suite(&set(), &[file]).unwrap();
        let TestKind::Case(case) = &suite.tests[0].kind else {
            panic!("a case first")
        };
        assert_eq!(
            case.given,
            Given {
                failure: OwnedFailure {
                    attempt: 1,
                    now: DEFAULT_NOW,
                    ..OwnedFailure::default()
                },
                seed: None,
            }
        );
        assert_eq!(suite.tests[0].at(), "tests/t.yaml:3:5");
        let TestKind::Path(path) = &suite.tests[1].kind else {
            panic!("then a path")
        };
        assert_eq!(path.given.elapsed, Duration::from_millis(1_500));
        assert_eq!(path.given.retry_after, Some(Duration::from_secs(2)));
        assert_eq!(path.processing, Duration::from_millis(20));
        assert_eq!(suite.tests[1].at(), "tests/t.yaml:6:5");
    }

    #[test]
    fn impossible_or_empty_expectations_are_errors_at_their_place() {
        assert_eq!(
            errors(
                "version: 1\ncases:\n  - name: a\n    expect: { action: dead_letter, delay: 1s }\n"
            ),
            [
                "tests/t.yaml:4:13: error: this expectation can never hold: 'action: dead_letter' with 'delay' or 'delay_between', which only a retry has"
            ]
        );
        assert_eq!(
            errors("version: 1\ncases:\n  - name: a\n    expect: { delay_between: [1s] }\n"),
            [
                "tests/t.yaml:4:30: error: delay_between takes two durations, [min, max], e.g. [1s, 2s]; found 1 value(s)"
            ]
        );
        assert_eq!(
            errors(
                "version: 2\ncases:\n  - name: a\n    given: { attempt: 0 }\n    expect: { rule: fast }\n  - name: a\n    expect: { rule: fast }\n"
            ),
            [
                "tests/t.yaml:1:10: error: unsupported version 2: only version 1 exists",
                "tests/t.yaml:4:23: error: attempt 0 does not exist: the first delivery is attempt 1",
                "tests/t.yaml:6:11: error: the name 'a' is used twice in this file; failures are reported by name, so make it unique"
            ]
        );
    }

    #[test]
    fn given_takes_headers_and_now_as_rfc3339() {
        let file = SourceFile::new(
            "t.yaml",
            "tests/t.yaml",
            "version: 1\ncases:\n  - name: a\n    given: { headers: { tenant: vip }, now: \"2026-03-02T08:30:00+01:00\" }\n    expect: { rule: defaults }\n",
        );
        let suite = load_suite(&set(), &[file]).unwrap();
        let TestKind::Case(case) = &suite.tests[0].kind else {
            panic!("a case")
        };
        assert_eq!(case.given.headers["tenant"], "vip");
        assert_eq!(
            case.given.now,
            crate::wall_time::parse_rfc3339("2026-03-02T07:30:00Z").unwrap()
        );
        assert_eq!(
            errors(
                "version: 1\ncases:\n  - name: a\n    given: { now: yesterday }\n    expect: { rule: fast }\n"
            ),
            [
                "tests/t.yaml:4:19: error: now: 'yesterday' is not an RFC 3339 time like 2026-01-01T09:30:00Z or 2026-01-01T10:30:00+01:00: too short"
            ]
        );
    }

    #[test]
    fn an_unknown_rule_gets_a_suggestion() {
        let file = SourceFile::new(
            "t.yaml",
            "tests/t.yaml",
            "version: 1\ncases:\n  - name: a\n    expect: { rule: fats }\n",
        );
        let diags = load_suite(&set(), &[file]).unwrap_err();
        assert_eq!(diags[0].help.as_deref(), Some("did you mean 'fast'?"));
    }

    #[test]
    fn an_empty_test_file_is_an_error() {
        assert_eq!(
            errors("# nothing yet\n"),
            [
                "tests/t.yaml:1:1: error: the test file is empty; a test file starts with 'version: 1', then 'cases:' and/or 'paths:'"
            ]
        );
    }
}
