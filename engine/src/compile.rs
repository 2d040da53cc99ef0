//! Parsed files → a [`CompiledSet`]: every semantic check of the spec, each pointing at the
//! value it is about, then the index. All-or-nothing: one error rejects the whole set.

use crate::backoff::{Backoff, BackoffKind, Jitter, RetryPolicy};
use crate::context::FailureContext;
use crate::diag::{Diagnostic, Pos, Rejected};
use crate::index::RuleIndex;
use crate::lint;
use crate::load::{SourceFile, parse_rule_file, version_of};
use crate::model::{BackoffSpec, OneOrMany, RetrySpec, RuleFile, RuleSpec, Scalar};
use crate::pattern::{NameMatcher, NamePattern, parse_count_cmp, parse_elapsed_cmp};
use crate::positions::PositionIndex;
use crate::rule::{CompiledRule, Conditions, Outcome};
use crate::script::{Expr, ScriptEngine};
use crate::set::{CompiledSet, Defaults};
use crate::types::{Label, RuleId};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

mod adaptive;
mod heat;
mod ids;
mod labels;

/// Loads, validates and compiles a set from its files.
///
/// On success the set carries its warnings; on failure every error and warning found.
pub fn compile(files: Vec<SourceFile>) -> Result<CompiledSet, Rejected> {
    compile_with(files, ScriptEngine::new())
}

/// [`compile`] on a given script engine (tests give it a smaller wall-time bound).
pub(crate) fn compile_with(
    files: Vec<SourceFile>,
    scripts: ScriptEngine,
) -> Result<CompiledSet, Rejected> {
    let mut diags = Vec::new();
    let mut parsed = Vec::new();
    for file in &files {
        match parse_rule_file(file) {
            Ok((model, text)) => parsed.push(FileCx {
                file: Arc::from(file.path.as_str()),
                text,
                positions: PositionIndex::build(text),
                model,
            }),
            Err(d) => diags.extend(d),
        }
    }
    let mut cx = Compiler {
        scripts: &scripts,
        diags,
        written: Vec::new(),
    };
    let (defaults, partial) = cx.defaults(&parsed);
    let rules = cx.rules(&parsed, &defaults, &partial);
    let labels = cx.labels(&parsed);
    let budgets = cx.budgets(&parsed);
    let breakers = cx.breakers(&parsed);
    cx.check_dead_letters(&labels);
    let heat = cx.heat(&parsed);
    let Compiler { mut diags, .. } = cx;
    if diags.iter().any(Diagnostic::is_error) {
        // Errors first; each kind in file order, then by position (a file's errors are
        // found check by check, not top to bottom).
        let rank: HashMap<&str, usize> = files
            .iter()
            .enumerate()
            .map(|(i, f)| (f.path.as_str(), i))
            .collect();
        diags.sort_by_key(|d| {
            let file = rank.get(d.file.as_str()).copied().unwrap_or(usize::MAX);
            (!d.is_error(), file, d.line, d.column)
        });
        return Err(Rejected(diags));
    }
    let index = RuleIndex::build(&rules);
    diags.extend(lint::run(&rules, &index, &defaults, &scripts));
    let scripts = scripts.with_signal_getters();
    Ok(CompiledSet {
        version: version_of(&files),
        files,
        rules,
        defaults,
        labels,
        budgets,
        breakers,
        heat,
        index,
        scripts,
        warnings: diags,
        defaults_errors: AtomicU64::new(0),
    })
}

/// One parsed file with what is needed to point into it.
struct FileCx<'a> {
    file: Arc<str>,
    text: &'a str,
    positions: PositionIndex,
    model: RuleFile,
}

struct Compiler<'s> {
    scripts: &'s ScriptEngine,
    diags: Vec<Diagnostic>,
    /// Every `dead_letter` written, checked against the labels once all are known.
    written: Vec<labels::WrittenLabel>,
}

/// The `defaults.retry` fields as given, before the built-ins fill the gaps.
#[derive(Default)]
struct PartialRetry {
    max_retries: Option<u32>,
    max_elapsed: Option<Duration>,
    backoff: Option<Backoff>,
    respect_retry_after: Option<bool>,
}

impl PartialRetry {
    /// This over `under`, over the built-ins.
    fn resolve(&self, under: &PartialRetry) -> RetryPolicy {
        let builtin = RetryPolicy::default();
        RetryPolicy {
            max_retries: self
                .max_retries
                .or(under.max_retries)
                .unwrap_or(builtin.max_retries),
            max_elapsed: self.max_elapsed.or(under.max_elapsed),
            backoff: self
                .backoff
                .clone()
                .or_else(|| under.backoff.clone())
                .unwrap_or(builtin.backoff),
            respect_retry_after: self
                .respect_retry_after
                .or(under.respect_retry_after)
                .unwrap_or(builtin.respect_retry_after),
        }
    }
}

impl Compiler<'_> {
    fn error(&mut self, file: &FileCx, pos: Option<Pos>, message: impl Into<String>) {
        self.diags
            .push(Diagnostic::error(&*file.file, pos, message));
    }

    fn warn(&mut self, file: &FileCx, pos: Option<Pos>, message: impl Into<String>) {
        self.diags
            .push(Diagnostic::warning(&*file.file, pos, message));
    }

    fn defaults(&mut self, files: &[FileCx]) -> (Defaults, PartialRetry) {
        let mut found: Option<(&FileCx, Pos)> = None;
        let mut partial = PartialRetry::default();
        let mut label = Label::from("default");
        for f in files {
            if f.model.version != 1 {
                let pos = f.positions.value("version");
                let v = f.model.version;
                self.error(
                    f,
                    pos,
                    format!("unsupported version {v}: only version 1 exists"),
                );
            }
            let Some(spec) = &f.model.defaults else {
                continue;
            };
            let here = f.positions.entry("defaults").unwrap_or(Pos::new(1, 1));
            if let Some((first, at)) = found {
                let msg = format!(
                    "defaults are declared twice: here and at {}:{at}; only one file of a set may have them",
                    first.file
                );
                self.error(f, Some(here), msg);
                continue;
            }
            found = Some((f, here));
            if let Some(retry) = &spec.retry {
                partial = self.partial_retry(f, "defaults.retry", retry);
            }
            if let Some(l) = &spec.dead_letter {
                label = self.label(f, "defaults.dead_letter", l);
            }
        }
        let defaults = Defaults {
            policy: Arc::new(partial.resolve(&PartialRetry::default())),
            dead_letter: label,
            file: found.map(|(f, _)| f.file.clone()),
            pos: found.map(|(_, p)| p),
        };
        (defaults, partial)
    }

    fn rules(
        &mut self,
        files: &[FileCx],
        defaults: &Defaults,
        partial: &PartialRetry,
    ) -> Vec<CompiledRule> {
        let mut seen = ids::Seen::new();
        let mut out = Vec::new();
        for f in files {
            for (i, spec) in f.model.rules.iter().enumerate() {
                let path = format!("rules.{i}");
                if let Some(rule) = self.rule(f, &path, spec, defaults, partial, &mut seen) {
                    out.push(rule);
                }
            }
        }
        out
    }

    fn rule(
        &mut self,
        f: &FileCx,
        path: &str,
        spec: &RuleSpec,
        defaults: &Defaults,
        partial: &PartialRetry,
        seen: &mut ids::Seen,
    ) -> Option<CompiledRule> {
        let id_pos = f.positions.value(&format!("{path}.id"));
        let errors_before = self.error_count();
        self.check_id(f, id_pos, &spec.id, seen);
        let conditions = spec
            .conditions
            .as_ref()
            .map(|m| {
                let mp = format!("{path}.match");
                Conditions {
                    biz: self.optional_names(f, &format!("{mp}.biz"), m.biz.as_ref()),
                    code: self.optional_names(f, &format!("{mp}.code"), m.code.as_ref()),
                    attempt: m
                        .attempt
                        .as_ref()
                        .map(|v| self.count(f, &format!("{mp}.attempt"), v, "an attempt number"))
                        .unwrap_or_default(),
                    redrives: m
                        .redrives
                        .as_ref()
                        .map(|v| {
                            self.count(f, &format!("{mp}.redrives"), v, "a number of redrives")
                        })
                        .unwrap_or_default(),
                    elapsed: m
                        .elapsed
                        .as_ref()
                        .map(|v| self.elapsed(f, &format!("{mp}.elapsed"), v))
                        .unwrap_or_default(),
                    attrs: self.keyed_names(f, &format!("{mp}.attrs"), m.attrs.as_ref()),
                    headers: self.keyed_names(f, &format!("{mp}.headers"), m.headers.as_ref()),
                }
            })
            .unwrap_or_default();
        let guard = spec
            .guard
            .as_ref()
            .and_then(|g| self.expr(f, &format!("{path}.if"), g, ExprKind::Guard));
        let give_up = spec.give_up.unwrap_or(false);
        let outcome = match (&spec.retry, give_up) {
            (Some(_), true) => {
                let pos = f.positions.entry(&format!("{path}.give_up"));
                self.error(f, pos, format!(
                    "rule '{}' has both 'retry' and 'give_up: true'; a rule either retries or gives up",
                    spec.id
                ));
                Outcome::GiveUp
            }
            (_, true) => Outcome::GiveUp,
            (Some(retry), false) => {
                let own = self.partial_retry(f, &format!("{path}.retry"), retry);
                Outcome::Retry(Arc::new(own.resolve(partial)))
            }
            (None, false) => Outcome::Retry(defaults.policy.clone()),
        };
        let dead_letter = match &spec.dead_letter {
            Some(l) => self.label(f, &format!("{path}.dead_letter"), l),
            None => defaults.dead_letter,
        };
        if self.error_count() > errors_before {
            return None;
        }
        Some(CompiledRule {
            id: RuleId::from(spec.id.as_str()),
            description: spec.description.clone(),
            file: f.file.clone(),
            pos: f.positions.entry(path),
            conditions,
            guard,
            outcome,
            dead_letter,
            errors: AtomicU64::new(0),
        })
    }

    fn error_count(&self) -> usize {
        self.diags.iter().filter(|d| d.is_error()).count()
    }

    fn label(&mut self, f: &FileCx, path: &str, label: &str) -> Label {
        if label.trim().is_empty() {
            let pos = f.positions.value(path);
            self.error(
                f,
                pos,
                "the dead-letter label is empty; write a label such as 'L1'",
            );
        }
        let label = Label::from(label);
        self.written.push(labels::WrittenLabel {
            file: f.file.clone(),
            pos: f.positions.value(path),
            label,
        });
        label
    }

    fn names(&mut self, f: &FileCx, path: &str, value: &OneOrMany) -> NameMatcher {
        if matches!(value, OneOrMany::Many(v) if v.is_empty()) {
            let pos = f.positions.value(path);
            self.error(
                f,
                pos,
                "an empty list matches nothing; give at least one name",
            );
        }
        let mut patterns = Vec::new();
        for (i, item) in value.items() {
            let item_path = i.map_or(path.to_string(), |i| format!("{path}.{i}"));
            let text = match item {
                Scalar::Str(s) => s.clone(),
                Scalar::Int(n) => n.to_string(),
                Scalar::Float(x) => {
                    let pos = f.positions.value(&item_path);
                    self.error(
                        f,
                        pos,
                        format!("expected a name or a glob, found the number {x}"),
                    );
                    continue;
                }
            };
            match NamePattern::parse(&text) {
                Ok(p) => patterns.push(p),
                Err(e) => {
                    let pos = f.positions.value(&item_path);
                    self.error(f, pos, e);
                }
            }
        }
        NameMatcher::new(patterns)
    }

    /// A `biz:` or `code:` condition at `path`, when it is written.
    fn optional_names(
        &mut self,
        f: &FileCx,
        path: &str,
        value: Option<&OneOrMany>,
    ) -> Option<NameMatcher> {
        value.map(|v| self.names(f, path, v))
    }

    /// An `attrs:` or `headers:` condition at `path`: each key with its matcher, in key
    /// order; none when it is not written.
    fn keyed_names(
        &mut self,
        f: &FileCx,
        path: &str,
        value: Option<&BTreeMap<String, OneOrMany>>,
    ) -> Vec<(String, NameMatcher)> {
        value
            .into_iter()
            .flatten()
            .map(|(k, v)| (k.clone(), self.names(f, &format!("{path}.{k}"), v)))
            .collect()
    }

    fn count(
        &mut self,
        f: &FileCx,
        path: &str,
        value: &OneOrMany,
        what: &str,
    ) -> Vec<crate::pattern::Cmp<u64>> {
        let mut out = Vec::new();
        for (i, item) in value.items() {
            let item_path = i.map_or(path.to_string(), |i| format!("{path}.{i}"));
            match parse_count_cmp(&item.to_string(), what) {
                Ok(c) => out.push(c),
                Err(e) => {
                    let pos = f.positions.value(&item_path);
                    self.error(f, pos, e);
                }
            }
        }
        out
    }

    fn elapsed(
        &mut self,
        f: &FileCx,
        path: &str,
        value: &OneOrMany,
    ) -> Vec<crate::pattern::Cmp<Duration>> {
        let mut out = Vec::new();
        for (i, item) in value.items() {
            let item_path = i.map_or(path.to_string(), |i| format!("{path}.{i}"));
            match parse_elapsed_cmp(&item.to_string()) {
                Ok(c) => out.push(c),
                Err(e) => {
                    let pos = f.positions.value(&item_path);
                    self.error(f, pos, e);
                }
            }
        }
        out
    }

    fn duration(&mut self, f: &FileCx, path: &str, value: &Scalar) -> Duration {
        let parsed = match value {
            Scalar::Str(s) => crate::duration::parse_duration(s).map_err(|e| e.to_string()),
            Scalar::Int(n) => u64::try_from(*n)
                .map(Duration::from_millis)
                .map_err(|_| format!("bad duration '{n}': a duration cannot be negative")),
            Scalar::Float(x) => Err(format!(
                "bad duration '{x}': write a unit, e.g. '{x}s', or whole milliseconds"
            )),
        };
        parsed.unwrap_or_else(|e| {
            let pos = f.positions.value(path);
            self.error(f, pos, e);
            Duration::ZERO
        })
    }

    fn partial_retry(&mut self, f: &FileCx, path: &str, spec: &RetrySpec) -> PartialRetry {
        PartialRetry {
            max_retries: spec.max_retries,
            max_elapsed: spec
                .max_elapsed
                .as_ref()
                .map(|v| self.duration(f, &format!("{path}.max_elapsed"), v)),
            backoff: spec
                .backoff
                .as_ref()
                .map(|b| self.backoff(f, &format!("{path}.backoff"), b)),
            respect_retry_after: spec.respect_retry_after,
        }
    }

    fn backoff(&mut self, f: &FileCx, path: &str, spec: &BackoffSpec) -> Backoff {
        let given: Vec<&str> = [
            ("fixed", spec.fixed.is_some()),
            ("linear", spec.linear.is_some()),
            ("exponential", spec.exponential.is_some()),
            ("schedule", spec.schedule.is_some()),
            ("script", spec.script.is_some()),
        ]
        .into_iter()
        .filter_map(|(k, on)| on.then_some(k))
        .collect();
        let pos = f.positions.value(path);
        match given.as_slice() {
            [] => self.error(f, pos, "the backoff has no kind; give exactly one of fixed, linear, exponential, schedule or script"),
            [_] => {}
            many => self.error(f, pos, format!(
                "the backoff has {} kinds ({}); give exactly one",
                many.len(),
                many.join(", ")
            )),
        }
        let sub = |k: &str| format!("{path}.{k}");
        let kind = if let Some(v) = &spec.fixed {
            BackoffKind::Fixed(self.duration(f, &sub("fixed"), v))
        } else if let Some(l) = &spec.linear {
            let base = self.duration(f, &sub("linear.base"), &l.base);
            BackoffKind::Linear {
                base,
                step: l
                    .step
                    .as_ref()
                    .map_or(base, |s| self.duration(f, &sub("linear.step"), s)),
                max: l
                    .max
                    .as_ref()
                    .map(|m| self.duration(f, &sub("linear.max"), m)),
            }
        } else if let Some(e) = &spec.exponential {
            let factor = e.factor.unwrap_or(2.0);
            if !(factor.is_finite() && factor > 0.0) {
                let pos = f.positions.value(&sub("exponential.factor"));
                self.error(
                    f,
                    pos,
                    format!("bad factor {factor}: it must be a positive number"),
                );
            }
            BackoffKind::Exponential {
                base: self.duration(f, &sub("exponential.base"), &e.base),
                factor,
                max: e
                    .max
                    .as_ref()
                    .map(|m| self.duration(f, &sub("exponential.max"), m)),
            }
        } else if let Some(entries) = &spec.schedule {
            if entries.is_empty() {
                let pos = f.positions.value(&sub("schedule"));
                self.error(f, pos, "the schedule is empty; list at least one delay");
            }
            let list = entries
                .iter()
                .enumerate()
                .map(|(i, v)| self.duration(f, &format!("{path}.schedule.{i}"), v))
                .collect();
            BackoffKind::Schedule(list)
        } else if let Some(source) = &spec.script {
            match self.expr(f, &sub("script"), source, ExprKind::Delay) {
                Some(expr) => BackoffKind::Script(expr),
                None => BackoffKind::Fixed(Duration::ZERO),
            }
        } else {
            BackoffKind::Fixed(Duration::ZERO)
        };
        let jitter = spec
            .jitter
            .as_ref()
            .map_or(Jitter::None, |j| self.jitter(f, &sub("jitter"), j));
        Backoff { kind, jitter }
    }

    fn jitter(&mut self, f: &FileCx, path: &str, value: &Scalar) -> Jitter {
        let text = value.to_string();
        match text.as_str() {
            "none" => return Jitter::None,
            "full" => return Jitter::Full,
            "equal" => return Jitter::Equal,
            "decorrelated" => return Jitter::Decorrelated,
            _ => {}
        }
        if let Some(pct) = text.strip_suffix('%') {
            return match pct.trim().parse::<f64>() {
                Ok(p) if (0.0..=100.0).contains(&p) => Jitter::Proportional(p / 100.0),
                _ => {
                    let pos = f.positions.value(path);
                    self.error(
                        f,
                        pos,
                        format!("bad jitter '{text}': a percentage is between 0% and 100%"),
                    );
                    Jitter::None
                }
            };
        }
        if matches!(value, Scalar::Int(_))
            || text.starts_with(|c: char| c.is_ascii_digit() || c == '.')
        {
            return Jitter::Additive(self.duration(f, path, value));
        }
        let pos = f.positions.value(path);
        self.error(f, pos, format!(
            "bad jitter '{text}': expected none, full, equal, decorrelated, a percentage such as \"20%\" or a duration such as \"100ms\""
        ));
        Jitter::None
    }

    fn expr(&mut self, f: &FileCx, path: &str, source: &str, kind: ExprKind) -> Option<Expr> {
        let what = kind.name();
        let expr = match self.scripts.compile(source) {
            Ok(expr) => expr,
            Err(e) => {
                let pos = expr_pos(f, path, source, e.at);
                self.error(f, pos, format!("{what}: {}", e.message));
                return None;
            }
        };
        for m in crate::script::mismatches(&expr) {
            let pos = expr_pos(f, path, source, m.at);
            self.warn(f, pos, format!("{what}: {}", m.message));
        }
        let pos = f.positions.value(path);
        match self.scripts.eval(&expr, &FailureContext::sample()) {
            Ok(v) if kind.accepts(&v) => Some(expr),
            Ok(v) => {
                let ty = friendly_type(v.type_name());
                self.error(
                    f,
                    pos,
                    format!(
                        "{what} yields {ty} on the sample failure, expected {}",
                        kind.expected()
                    ),
                );
                None
            }
            Err(e) => {
                self.warn(
                    f,
                    pos,
                    format!("{what} fails on the sample failure (it may work at run time): {e}"),
                );
                Some(expr)
            }
        }
    }
}

#[derive(Clone, Copy)]
enum ExprKind {
    Guard,
    Delay,
}

impl ExprKind {
    fn name(self) -> &'static str {
        match self {
            ExprKind::Guard => "the 'if' guard",
            ExprKind::Delay => "the backoff script",
        }
    }

    fn expected(self) -> &'static str {
        match self {
            ExprKind::Guard => "a boolean",
            ExprKind::Delay => "a number of milliseconds",
        }
    }

    fn accepts(self, v: &rhai::Dynamic) -> bool {
        match self {
            ExprKind::Guard => v.is_bool(),
            ExprKind::Delay => v.is_int() || v.is_float(),
        }
    }
}

/// A rhai type name as a rule author would say it.
fn friendly_type(rhai_name: &str) -> &str {
    match rhai_name {
        "i64" | "i32" => "an integer",
        "f64" | "f32" => "a float",
        "bool" => "a boolean",
        "string" | "ImmutableString" => "a string",
        "()" => "nothing (unit)",
        "array" => "an array",
        "map" => "a map",
        other => other,
    }
}

/// The file position of a place inside an expression written at `path`, whose text (as YAML
/// parsed it) is `source`; `at` is rhai's 1-based line and column inside that text.
fn expr_pos(f: &FileCx, path: &str, source: &str, at: Option<(usize, usize)>) -> Option<Pos> {
    let info = f.positions.value_info(path)?;
    let Some((line, col)) = at else {
        return Some(info.pos);
    };
    let offset = source
        .split('\n')
        .take(line.saturating_sub(1))
        .map(|l| l.chars().count() + 1)
        .sum::<usize>()
        + col.saturating_sub(1);
    Some(crate::positions::place_in_value(f.text, info, source, offset).unwrap_or(info.pos))
}
