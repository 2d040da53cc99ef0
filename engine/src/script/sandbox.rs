//! The sandbox every expression runs in: which functions exist, and the bounds.
//!
//! The engine starts raw (`Engine::new_raw`: no functions at all) and gets only pure packages:
//! arithmetic, logic, strings, maths, arrays, maps, iterators and bit fields. rhai's
//! `LanguageCorePackage` is left out on purpose: it holds `sleep` (which blocks the thread),
//! `exit`, `parse_json` and the reflection functions; `BasicTimePackage` (the clock) is compiled
//! out (`no_time`). What the sandbox offers is pinned by `functions.txt`, a reviewed list that a
//! unit test compares with what the engine reports, so an upgrade of rhai that adds a function
//! fails a test instead of reaching rule authors unseen.
//!
//! A call to a function the sandbox does not have is an error at load, with its position
//! ([`check_calls`]): rhai itself would only notice when the call runs, and a guard such as
//! `attempt > 9 && sleep(10)` may not run on the sample failure.
//!
//! Bounds: operations, expression and call depth, string, array and map sizes, and wall time.
//! Operations and wall time are enforced by rhai's progress callback, which runs on every
//! operation: it counts them (all of them: see [`on_progress`]), and every [`CHECK_EVERY`]
//! operations it compares the clock with the deadline that [`Deadline::start`] set for the
//! evaluation running on this thread.

use rhai::packages::{
    ArithmeticPackage, BasicArrayPackage, BasicIteratorPackage, BasicMapPackage, BasicMathPackage,
    BasicStringPackage, BitFieldPackage, LogicPackage, MoreStringPackage, Package,
};

rhai::def_package! {
    /// The pure packages, in one module: a call is resolved in one lookup, not one per package.
    SandboxPackage(_lib):
        ArithmeticPackage,
        LogicPackage,
        BasicStringPackage,
        MoreStringPackage,
        BasicMathPackage,
        BasicArrayPackage,
        BasicMapPackage,
        BasicIteratorPackage,
        BitFieldPackage
    {}
}
use rhai::{AST, ASTNode, Dynamic, Engine, Position};
use std::cell::Cell;
use std::collections::HashSet;
use std::time::{Duration, Instant};

/// Bounds of the sandbox. Generous for a guard, far below anything that would hurt.
pub(crate) const MAX_OPERATIONS: u64 = 100_000;
const MAX_EXPR_DEPTH: usize = 64;
const MAX_FN_EXPR_DEPTH: usize = 32;
const MAX_CALL_LEVELS: usize = 16;
const MAX_STRING: usize = 16 * 1024;
const MAX_ARRAY: usize = 1_024;
const MAX_MAP: usize = 1_024;

/// The longest an expression may run, at load (the sample evaluation) and at decision time.
pub(crate) const WALL_LIMIT: Duration = Duration::from_millis(10);

/// How many operations pass between two looks at the clock.
const CHECK_EVERY: u64 = 32;

/// The values a stopped evaluation terminates with (see [`stop_of`]).
const WALL_STOP: &str = "rebound: wall-time bound";
const OPERATIONS_STOP: &str = "rebound: operations bound";

/// Names rhai handles as keywords rather than as functions; none of them reaches outside.
/// (`print` and `debug` are silenced, `eval` is disabled.)
const KEYWORDS: [&str; 9] = [
    "Fn",
    "call",
    "curry",
    "type_of",
    "is_def_var",
    "is_def_fn",
    "is_shared",
    "print",
    "debug",
];

thread_local! {
    /// The bounds of the evaluation running on this thread.
    static BUDGET: Cell<Budget> = const {
        Cell::new(Budget { operations: 0, limit: WALL_LIMIT, deadline: None })
    };
}

/// What an evaluation has used, and when it must stop.
#[derive(Clone, Copy)]
struct Budget {
    /// Operations so far, closures called by native functions (`map`, `filter`, …) included.
    operations: u64,
    /// How long it may run.
    limit: Duration,
    /// When it must stop: set at the first look at the clock, so that the many guards that
    /// finish within [`CHECK_EVERY`] operations never read it. (The bound then counts from
    /// that operation: [`CHECK_EVERY`] operations late, a few microseconds.)
    deadline: Option<Instant>,
}

/// The bounds of one evaluation on this thread; the previous ones come back on drop.
pub(super) struct Deadline(Budget);

impl Deadline {
    /// Starts counting for an evaluation that may run for `limit`.
    pub(super) fn start(limit: Duration) -> Deadline {
        let fresh = Budget {
            operations: 0,
            limit,
            deadline: None,
        };
        Deadline(BUDGET.with(|b| b.replace(fresh)))
    }
}

impl Drop for Deadline {
    fn drop(&mut self) {
        BUDGET.with(|b| b.set(self.0));
    }
}

/// Why an evaluation was stopped by [`on_progress`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stop {
    Operations,
    WallTime,
}

/// Which bound `token` (of rhai's `ErrorTerminated`) stands for.
pub(super) fn stop_of(token: &Dynamic) -> Option<Stop> {
    let token = token.read_lock::<rhai::ImmutableString>()?;
    match token.as_str() {
        OPERATIONS_STOP => Some(Stop::Operations),
        WALL_STOP => Some(Stop::WallTime),
        _ => None,
    }
}

/// rhai calls this on every operation. Its own operation count starts again at zero in each
/// closure that a native function calls (`map`, `filter`, `reduce` …), so nested closures
/// would escape `set_max_operations`: this one counts every operation of the evaluation.
fn on_progress(_: u64) -> Option<Dynamic> {
    let stop = BUDGET.with(|b| {
        let mut budget = b.get();
        budget.operations += 1;
        let stop = if budget.operations > MAX_OPERATIONS {
            Some(OPERATIONS_STOP)
        } else if budget.operations.is_multiple_of(CHECK_EVERY) {
            let now = Instant::now();
            match budget.deadline {
                None => {
                    budget.deadline = now.checked_add(budget.limit);
                    None
                }
                Some(at) => (now >= at).then_some(WALL_STOP),
            }
        } else {
            None
        };
        b.set(budget);
        stop
    });
    stop.map(|token| Dynamic::from(rhai::ImmutableString::from(token)))
}

/// A raw engine with the pure packages, the calendar helpers and every bound set.
pub(super) fn engine() -> Engine {
    let mut engine = Engine::new_raw();
    SandboxPackage::new().register_into_engine(&mut engine);
    register_calendar(&mut engine);
    engine
        // rhai's own bound, a backstop: `on_progress` counts what rhai does not.
        .set_max_operations(MAX_OPERATIONS)
        .set_max_expr_depths(MAX_EXPR_DEPTH, MAX_FN_EXPR_DEPTH)
        .set_max_call_levels(MAX_CALL_LEVELS)
        .set_max_string_size(MAX_STRING)
        .set_max_array_size(MAX_ARRAY)
        .set_max_map_size(MAX_MAP)
        .set_max_variables(64)
        .set_strict_variables(true)
        .set_fail_on_invalid_map_property(false)
        .disable_symbol("eval")
        .on_progress(on_progress)
        .on_print(|_| {})
        .on_debug(|_, _, _| {});
    engine
}

/// `hour_of_day(now, OFFSET_HOURS)` and `day_of_week(now, OFFSET_HOURS)`: pure functions of
/// their arguments (the clock is `now`, which the caller supplies), so they belong here.
fn register_calendar(engine: &mut Engine) {
    fn helper(
        f: fn(i64, i64) -> Result<i64, crate::wall_time::OffsetError>,
    ) -> impl Fn(i64, i64) -> Result<i64, Box<rhai::EvalAltResult>> {
        move |now, offset_hours| f(now, offset_hours).map_err(|e| e.to_string().into())
    }
    for (name, f) in [
        (
            "hour_of_day",
            crate::wall_time::hour_of_day as fn(i64, i64) -> _,
        ),
        ("day_of_week", crate::wall_time::day_of_week),
    ] {
        rhai::FuncRegistration::new(name)
            .with_params_info([
                "now: i64",
                "offset_hours: i64",
                "Result<i64, Box<EvalAltResult>>",
            ])
            .register_into_engine(engine, helper(f));
    }
}

/// Every function signature `engine` offers, sorted (the form of `functions.txt`).
pub(super) fn signatures(engine: &Engine) -> Vec<String> {
    let mut all = engine.gen_fn_signatures(true);
    all.sort();
    all.dedup();
    all
}

/// The names of the functions an expression may call on `engine`.
pub(super) fn callable_names(engine: &Engine) -> HashSet<String> {
    signatures(engine)
        .iter()
        .filter_map(|s| s.split_once('(').map(|(name, _)| name.to_string()))
        .chain(KEYWORDS.iter().map(|k| k.to_string()))
        .collect()
}

/// The first call in `ast` to a function that `known` does not hold: its name and position.
pub(super) fn check_calls(ast: &AST, known: &HashSet<String>) -> Option<(String, Position)> {
    // Closures become script functions of the AST; calling one by name is fine.
    let own: HashSet<&str> = ast.iter_functions().map(|f| f.name).collect();
    let mut unknown = None;
    ast.walk(&mut |path: &[ASTNode]| {
        let call = match path.last() {
            Some(ASTNode::Expr(
                rhai::Expr::FnCall(call, pos) | rhai::Expr::MethodCall(call, pos),
            ))
            | Some(ASTNode::Stmt(rhai::Stmt::FnCall(call, pos))) => Some((call, pos)),
            _ => None,
        };
        if let Some((call, pos)) = call {
            let name = call.name.as_str();
            if !call.is_operator_call() && !known.contains(name) && !own.contains(name) {
                unknown = Some((name.to_string(), *pos));
                return false;
            }
        }
        true
    });
    unknown
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reviewed list of every function signature the sandbox offers, one per line.
    const REVIEWED_FUNCTIONS: &str = include_str!("functions.txt");

    /// The allowlist: what the sandbox offers is exactly the reviewed list. When this fails
    /// after a rhai upgrade, read the new signatures: anything that blocks, sleeps, reads the
    /// clock or touches the outside world must be left out of [`engine`]; then update
    /// `functions.txt` with what remains.
    #[test]
    fn the_sandbox_offers_exactly_the_reviewed_functions() {
        let offered = signatures(&engine());
        if std::env::var_os("REBOUND_BLESS_FUNCTIONS").is_some() {
            let header: String = REVIEWED_FUNCTIONS
                .lines()
                .take_while(|l| l.starts_with('#'))
                .map(|l| format!("{l}\n"))
                .collect();
            let path = concat!(env!("CARGO_MANIFEST_DIR"), "/src/script/functions.txt");
            std::fs::write(path, format!("{header}{}\n", offered.join("\n"))).unwrap();
            return;
        }
        let reviewed: Vec<&str> = REVIEWED_FUNCTIONS
            .lines()
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .collect();
        let new: Vec<&String> = offered
            .iter()
            .filter(|s| !reviewed.contains(&s.as_str()))
            .collect();
        let gone: Vec<&&str> = reviewed
            .iter()
            .filter(|s| !offered.iter().any(|o| o == **s))
            .collect();
        assert!(
            new.is_empty() && gone.is_empty(),
            "the sandbox's functions changed:\nnot reviewed: {new:#?}\nno longer offered: {gone:#?}"
        );
    }

    #[test]
    fn nothing_that_blocks_reads_the_clock_or_leaves_the_process_is_offered() {
        let names = callable_names(&engine());
        for banned in [
            "sleep",
            "timestamp",
            "elapsed",
            "exit",
            "parse_json",
            "eval",
            "get_fn_metadata_list",
            "import",
        ] {
            assert!(!names.contains(banned), "{banned} is offered");
        }
        // The calendar helpers read no clock: `now` is an argument.
        assert!(names.contains("hour_of_day") && names.contains("day_of_week"));
    }
}
