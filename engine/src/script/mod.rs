//! rhai expressions: `if:` guards and `backoff.script` delays, compiled once, run sandboxed.
//!
//! One [`ScriptEngine`] is shared by a compiled set. It offers only pure functions (no
//! modules, no clock, no I/O, no `sleep`: see `script/sandbox.rs`), prints nothing, and bounds
//! operations, wall time ([`WALL_LIMIT`]), expression depth, call depth and the sizes of
//! strings, arrays and maps, so a guard can neither hang a decision nor exhaust memory.
//! Integer overflow is an error (rhai's checked arithmetic), never a wrap.
//!
//! What a decision pays for a guard: a guard of plain comparisons (`signals.fail_rate > 0.5
//! && attempt < 10`) is also compiled to a tree that reads the failure directly and runs no
//! rhai at all (`script/fast.rs`); any other expression runs in rhai over a scope kept per
//! thread, of which only the variables it reads are refreshed (`script/scope.rs`).

mod fast;
mod sandbox;
mod scope;
mod types;

pub(crate) use sandbox::{MAX_OPERATIONS, WALL_LIMIT};
pub(crate) use types::mismatches;

use crate::context::FailureContext;
use fast::Fast;
use rhai::{AST, Dynamic, Engine, EvalAltResult, ImmutableString, Position};
use scope::{Reads, ScopeSignals};
use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

/// The sandboxed engine shared by every expression of a set.
#[derive(Clone)]
pub(crate) struct ScriptEngine {
    engine: Arc<Engine>,
    /// The functions an expression may call.
    callable: Arc<HashSet<String>>,
    /// How long one evaluation may run.
    wall_limit: Duration,
    /// The names read as `signals.NAME` by the expressions compiled here, each to get a
    /// getter once the set is compiled ([`ScriptEngine::with_signal_getters`]).
    signal_names: Arc<Mutex<BTreeSet<String>>>,
}

impl std::fmt::Debug for ScriptEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ScriptEngine")
    }
}

/// A compiled expression and its source text.
#[derive(Clone)]
pub struct Expr {
    ast: Arc<AST>,
    source: Arc<str>,
    /// The variables it reads: the only ones an evaluation refreshes.
    reads: Reads,
    /// The same expression without rhai, when it is a plain comparison (see `fast.rs`).
    fast: Option<Arc<Fast>>,
}

impl std::fmt::Debug for Expr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Expr({:?})", self.source)
    }
}

impl Expr {
    /// The expression as written.
    pub fn source(&self) -> &str {
        &self.source
    }
}

/// Why an expression failed to compile, with its place inside the expression.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CompileError {
    /// What rhai said.
    pub message: String,
    /// 1-based line and column inside the expression, when rhai knows them.
    pub at: Option<(usize, usize)>,
}

/// An expression that failed or exceeded a bound while running.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RunError(pub String);

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// What a delay script yielded.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum ScriptDelay {
    /// Whole milliseconds (negative results already count as 0).
    Millis(u64),
    /// Larger than any representable delay: saturate.
    Huge,
}

fn position(pos: Position) -> Option<(usize, usize)> {
    Some((pos.line()?, pos.position().unwrap_or(1)))
}

fn run_error(err: Box<EvalAltResult>, wall_limit: Duration) -> RunError {
    if let EvalAltResult::ErrorTerminated(token, _) = err.unwrap_inner() {
        match sandbox::stop_of(token) {
            Some(sandbox::Stop::WallTime) => {
                return RunError(format!(
                    "stopped: it ran longer than the bound of {} ms",
                    wall_limit.as_millis()
                ));
            }
            Some(sandbox::Stop::Operations) => {
                return RunError(format!(
                    "stopped: it ran more than the bound of {MAX_OPERATIONS} operations"
                ));
            }
            None => {}
        }
    }
    let mut text = err.to_string();
    // rhai appends " (line L, position P)"; inside a one-line guard that is noise.
    if let Some(cut) = text.rfind(" (line ") {
        text.truncate(cut);
    }
    RunError(text)
}

impl Default for ScriptEngine {
    fn default() -> Self {
        Self::new()
    }
}

impl ScriptEngine {
    /// The sandboxed engine, with the wall-time bound [`WALL_LIMIT`].
    pub(crate) fn new() -> Self {
        Self::with_wall_limit(WALL_LIMIT)
    }

    /// The sandboxed engine, each evaluation bounded to `wall_limit` (tests use a small one).
    pub(crate) fn with_wall_limit(wall_limit: Duration) -> Self {
        let mut engine = sandbox::engine();
        engine
            .register_type_with_name::<ScopeSignals>("Signals")
            .register_indexer_get(|s: &mut ScopeSignals, key: ImmutableString| -> f64 {
                s.get(key.as_str())
            });
        // Every sandbox offers the same functions: list them once per process, not per set.
        static CALLABLE: std::sync::OnceLock<Arc<HashSet<String>>> = std::sync::OnceLock::new();
        let callable = CALLABLE.get_or_init(|| Arc::new(sandbox::callable_names(&engine)));
        ScriptEngine {
            callable: Arc::clone(callable),
            engine: Arc::new(engine),
            wall_limit,
            signal_names: Arc::default(),
        }
    }

    /// This engine with a getter for every `signals.NAME` its expressions read.
    ///
    /// rhai reads `signals.NAME` by looking for a getter first and, finding none, formats an
    /// error and falls back to the indexer: a quarter of a short guard's evaluation. A getter
    /// answers exactly what the indexer does (the signal, or `0.0`). Called once the whole
    /// set is compiled, while nothing else holds the engine; if something does, the indexer
    /// keeps answering.
    pub(crate) fn with_signal_getters(mut self) -> Self {
        let names = std::mem::take(
            &mut *self
                .signal_names
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        );
        if let Some(engine) = Arc::get_mut(&mut self.engine) {
            for name in names {
                let key = name.clone();
                engine.register_get(name, move |s: &mut ScopeSignals| -> f64 { s.get(&key) });
            }
        }
        self
    }

    /// Compiles `source` once; syntax errors, unknown variables and calls to functions the
    /// sandbox does not offer (`sleep`, for one) are reported here.
    pub(crate) fn compile(&self, source: &str) -> Result<Expr, CompileError> {
        let scope = scope::fresh(&FailureContext::sample());
        let ast = self
            .engine
            .compile_expression_with_scope(&scope, source)
            .map_err(|e| CompileError {
                message: e.0.to_string(),
                at: position(e.1),
            })?;
        if let Some((name, pos)) = sandbox::check_calls(&ast, &self.callable) {
            return Err(CompileError {
                message: format!(
                    "unknown function '{name}': expressions may use only pure functions \
                     (no clock, no sleep, no I/O)"
                ),
                at: position(pos),
            });
        }
        self.signal_names
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend(scope::signal_properties(&ast));
        Ok(Expr {
            reads: Reads::of(&ast),
            fast: Fast::of(&ast).map(Arc::new),
            ast: Arc::new(ast),
            source: source.into(),
        })
    }

    /// Evaluates `expr` against `ctx`, whatever type it yields.
    pub(crate) fn eval(&self, expr: &Expr, ctx: &FailureContext<'_>) -> Result<Dynamic, RunError> {
        scope::with_scope(ctx, expr.reads, |scope| {
            let _deadline = sandbox::Deadline::start(self.wall_limit);
            self.engine
                .eval_ast_with_scope::<Dynamic>(scope, &expr.ast)
                .map_err(|e| run_error(e, self.wall_limit))
        })
    }

    /// Runs a guard: `Ok(true)` when the rule may decide.
    pub(crate) fn guard(&self, expr: &Expr, ctx: &FailureContext<'_>) -> Result<bool, RunError> {
        if let Some(fast) = &expr.fast
            && let Some(value) = fast.guard(ctx)
        {
            return Ok(value);
        }
        let value = self.eval(expr, ctx)?;
        value
            .as_bool()
            .map_err(|ty| RunError(format!("the guard yielded {ty}, expected a boolean")))
    }

    /// Runs a delay script: its value in milliseconds.
    pub(crate) fn delay(
        &self,
        expr: &Expr,
        ctx: &FailureContext<'_>,
    ) -> Result<ScriptDelay, RunError> {
        let value = self.eval(expr, ctx)?;
        if let Ok(int) = value.as_int() {
            return Ok(ScriptDelay::Millis(u64::try_from(int).unwrap_or(0)));
        }
        if let Ok(float) = value.as_float() {
            if float.is_nan() {
                return Err(RunError(
                    "the script yielded NaN, expected milliseconds".into(),
                ));
            }
            if float <= 0.0 {
                return Ok(ScriptDelay::Millis(0));
            }
            if float >= u64::MAX as f64 {
                return Ok(ScriptDelay::Huge);
            }
            return Ok(ScriptDelay::Millis(float.floor() as u64));
        }
        Err(RunError(format!(
            "the script yielded {}, expected a number of milliseconds",
            value.type_name()
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::{Attrs, SignalView, Signals};

    fn ctx<'a>(attrs: &'a Attrs, signals: &'a Signals) -> FailureContext<'a> {
        FailureContext {
            attrs,
            signals: SignalView::Map(signals),
            ..FailureContext::new("PAYMENT", "NET_TIMEOUT", 3)
        }
    }

    #[test]
    fn guards_see_every_variable() {
        let e = ScriptEngine::new();
        let attrs = Attrs::from([("tenant".to_string(), "acme".to_string())]);
        let signals = Signals::from([("fail_rate".to_string(), 0.7)]);
        let c = ctx(&attrs, &signals);
        let g = e
            .compile(r#"biz == "PAYMENT" && attempt == 3 && attrs.tenant == "acme" && signals.fail_rate > 0.5 && signals.nothing == 0.0 && retry_after == ()"#)
            .unwrap();
        assert_eq!(e.guard(&g, &c), Ok(true));
    }

    #[test]
    fn guards_read_signals_given_as_pairs_like_a_map() {
        let e = ScriptEngine::new();
        let attrs = Attrs::new();
        let pairs = [("fail_rate", 0.7), ("pending", 3.0)];
        let c = FailureContext {
            attrs: &attrs,
            signals: SignalView::Pairs(&pairs),
            ..FailureContext::new("PAYMENT", "NET_TIMEOUT", 3)
        };
        let g = e
            .compile(
                r#"signals.fail_rate > 0.5 && signals["pending"] == 3.0 && signals.nothing == 0.0"#,
            )
            .unwrap();
        assert_eq!(e.guard(&g, &c), Ok(true));
    }

    #[test]
    fn signal_getters_answer_what_the_indexer_does() {
        let e = ScriptEngine::new();
        let source = "signals.fail_rate * 2.0 > 1.0 && signals.nothing + 1.0 == 1.0 \
                      && signals[\"fail_rate\"] == signals.fail_rate";
        let g = e.compile(source).unwrap();
        assert_eq!(
            e.signal_names.lock().unwrap().iter().collect::<Vec<_>>(),
            ["fail_rate", "nothing"]
        );
        let e = e.with_signal_getters();
        assert!(e.signal_names.lock().unwrap().is_empty());
        let attrs = Attrs::new();
        let pairs = [("fail_rate", 0.7)];
        let map = Signals::from([("fail_rate".to_string(), 0.7)]);
        for signals in [SignalView::Pairs(&pairs), SignalView::Map(&map)] {
            let c = FailureContext {
                attrs: &attrs,
                signals,
                ..FailureContext::new("PAYMENT", "NET_TIMEOUT", 3)
            };
            assert_eq!(e.guard(&g, &c), Ok(true));
        }
        let low = [("fail_rate", 0.2)];
        let c = FailureContext {
            signals: SignalView::Pairs(&low),
            ..FailureContext::new("PAYMENT", "NET_TIMEOUT", 3)
        };
        assert_eq!(e.guard(&g, &c), Ok(false));
    }

    #[test]
    fn guards_see_headers_now_and_the_calendar_helpers() {
        let e = ScriptEngine::new();
        let headers = crate::HeaderMap::from([("tenant".to_string(), "vip".to_string())]);
        // Sunday 2026-01-04 23:30 UTC: Monday 00:30 at +1.
        let now = crate::wall_time::parse_rfc3339("2026-01-04T23:30:00Z").unwrap();
        let c = FailureContext {
            headers: &headers,
            now,
            ..FailureContext::new("PAYMENT", "NET_TIMEOUT", 3)
        };
        let g = e
            .compile(
                r#"headers.tenant == "vip" && headers.absent == () && now > 0
                   && hour_of_day(now, 0) == 23 && day_of_week(now, 0) == 7
                   && hour_of_day(now, 1) == 0 && day_of_week(now, 1) == 1
                   && hour_of_day(now, -5) == 18"#,
            )
            .unwrap();
        assert_eq!(e.guard(&g, &c), Ok(true));
        let bad = e.compile("hour_of_day(now, 30) < 9").unwrap();
        let err = e.guard(&bad, &c).unwrap_err();
        assert!(err.0.contains("UTC offset"), "{err}");
        let sample = e.compile("now == 0 && headers.len() == 0").unwrap();
        assert_eq!(e.guard(&sample, &FailureContext::sample()), Ok(true));
    }

    #[test]
    fn unknown_variables_fail_to_compile() {
        let err = ScriptEngine::new().compile("atempt > 1").unwrap_err();
        assert!(err.message.contains("atempt"), "{err:?}");
        assert_eq!(err.at, Some((1, 1)));
    }

    /// 125,000 innermost calls: past the operation bound.
    const SPIN: &str = "[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49].map(|i| [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49].map(|j| [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49].map(|k| i * j * k).len()).len()).len() > 0";

    #[test]
    fn runaway_expressions_are_stopped() {
        // Room in wall time, so that the operation bound is what stops the spin.
        let e = ScriptEngine::with_wall_limit(std::time::Duration::from_secs(600));
        let (a, s) = (Attrs::new(), Signals::new());
        let c = ctx(&a, &s);
        let spin = e.compile(SPIN).unwrap();
        let err = e.guard(&spin, &c).unwrap_err();
        assert!(err.0.contains("operations"), "{err}");
        let huge = e.compile(r#""x".pad(100_000_000, "y") == "x""#).unwrap();
        assert!(e.guard(&huge, &c).is_err());
        let overflow = e.compile("9223372036854775807 + attempt > 0").unwrap();
        assert!(e.guard(&overflow, &c).is_err());
    }

    #[test]
    fn delay_scripts_yield_milliseconds() {
        let e = ScriptEngine::new();
        let (a, s) = (Attrs::new(), Signals::new());
        let c = ctx(&a, &s);
        let d = e.compile("min(500 * 2 ** attempt, 300_000)").unwrap();
        assert_eq!(e.delay(&d, &c), Ok(ScriptDelay::Millis(4_000)));
        let neg = e.compile("-5").unwrap();
        assert_eq!(e.delay(&neg, &c), Ok(ScriptDelay::Millis(0)));
        let float = e.compile("1.9").unwrap();
        assert_eq!(e.delay(&float, &c), Ok(ScriptDelay::Millis(1)));
        let text = e.compile(r#""soon""#).unwrap();
        assert!(e.delay(&text, &c).is_err());
    }
}

#[cfg(test)]
mod bounds_tests;
