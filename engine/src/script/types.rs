//! Type inference over an expression, to catch a comparison or arithmetic between a string
//! and a number at load: rhai compares values of different types as unequal and unordered
//! (`code > 5` is always false, `attempt != "3"` always true) and has no `-`, `*`, `/`, `%`
//! or `**` between them (an error at run time), so such a guard silently never matches.
//!
//! Only what is certain is inferred: literals, the known variables (`biz`, `code` strings;
//! `attempt`, `elapsed`, `last_delay`, `now`, `redrives` integers; `signals.*` floats; `attrs.*`,
//! `headers.*` strings; `hour_of_day(..)` and `day_of_week(..)` integers) and operators over those. Anything else is unknown and never warned
//! about. `+` between a string and a number concatenates in rhai, so it is fine.

use super::Expr;
use rhai::{ASTNode, Position};

/// What an operand certainly is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ty {
    Str,
    Int,
    Float,
    Unknown,
}

impl Ty {
    fn is_number(self) -> bool {
        matches!(self, Ty::Int | Ty::Float)
    }

    fn name(self) -> &'static str {
        match self {
            Ty::Str => "a string",
            Ty::Int => "an integer",
            Ty::Float => "a float",
            Ty::Unknown => "a value",
        }
    }
}

/// A string meeting a number: what is wrong, and where inside the expression.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Mismatch {
    /// What is wrong and what to write instead.
    pub message: String,
    /// 1-based line and column of the operator inside the expression.
    pub at: Option<(usize, usize)>,
}

const COMPARISONS: [&str; 6] = ["==", "!=", "<", "<=", ">", ">="];
const ARITHMETIC: [&str; 5] = ["-", "*", "/", "%", "**"];

/// Every comparison or arithmetic between a string and a number in `expr`, in source order.
pub(crate) fn mismatches(expr: &Expr) -> Vec<Mismatch> {
    let mut out = Vec::new();
    expr.ast.walk(&mut |path: &[ASTNode]| {
        // An expression's outermost call is a statement; the calls inside it are expressions.
        if let Some(
            ASTNode::Expr(rhai::Expr::FnCall(call, pos))
            | ASTNode::Stmt(rhai::Stmt::FnCall(call, pos)),
        ) = path.last()
            && call.is_operator_call()
            && let [a, b] = call.args.as_slice()
            && let Some(m) = mismatch(call.name.as_str(), a, b, *pos)
        {
            out.push(m);
        }
        true
    });
    out.sort_by_key(|m| m.at);
    out
}

fn mismatch(op: &str, a: &rhai::Expr, b: &rhai::Expr, pos: Position) -> Option<Mismatch> {
    let (ta, tb) = (infer(a), infer(b));
    let mixed = (ta == Ty::Str && tb.is_number()) || (ta.is_number() && tb == Ty::Str);
    if !mixed {
        return None;
    }
    let sides = format!(
        "{} ({}) and {} ({})",
        describe(a),
        ta.name(),
        describe(b),
        tb.name()
    );
    let fix = "compare like with like: quote the number, or convert with parse_int / parse_float / to_string";
    let message = if COMPARISONS.contains(&op) {
        let always = if op == "!=" { "true" } else { "false" };
        format!(
            "'{op}' between {sides} is always {always}: rhai never finds a string and a number equal or ordered; {fix}"
        )
    } else if ARITHMETIC.contains(&op) {
        format!(
            "'{op}' between {sides} fails at run time: rhai has no '{op}' for a string and a number, so the rule never decides; {fix}"
        )
    } else {
        return None;
    };
    Some(Mismatch {
        message,
        at: super::position(pos),
    })
}

/// The variable `e` names, if it is one.
fn variable(e: &rhai::Expr) -> Option<&str> {
    match e {
        rhai::Expr::Variable(v, ..) => Some(v.1.as_str()),
        _ => None,
    }
}

/// The map a plain `map.key` or `map[key]` reads, and the key when it is written out; `None`
/// for anything longer (`attrs.n.len()` is not a string).
fn member(e: &rhai::Expr) -> Option<(&str, Option<String>)> {
    match e {
        rhai::Expr::Dot(x, ..) => match &x.rhs {
            rhai::Expr::Property(p, _) => Some((variable(&x.lhs)?, Some(p.2.to_string()))),
            _ => None,
        },
        rhai::Expr::Index(x, ..) => match &x.rhs {
            rhai::Expr::StringConstant(s, _) => Some((variable(&x.lhs)?, Some(format!("[{s:?}]")))),
            rhai::Expr::Variable(..) => Some((variable(&x.lhs)?, None)),
            _ => None,
        },
        _ => None,
    }
}

fn infer(e: &rhai::Expr) -> Ty {
    match e {
        rhai::Expr::StringConstant(..) | rhai::Expr::InterpolatedString(..) => Ty::Str,
        rhai::Expr::IntegerConstant(..) => Ty::Int,
        rhai::Expr::FloatConstant(..) => Ty::Float,
        rhai::Expr::Variable(..) => match variable(e) {
            Some("biz" | "code") => Ty::Str,
            Some("attempt" | "elapsed" | "last_delay" | "now" | "redrives") => Ty::Int,
            _ => Ty::Unknown,
        },
        rhai::Expr::Dot(..) | rhai::Expr::Index(..) => match member(e) {
            Some(("attrs" | "headers", _)) => Ty::Str,
            Some(("signals", _)) => Ty::Float,
            _ => Ty::Unknown,
        },
        rhai::Expr::FnCall(call, _)
            if matches!(call.name.as_str(), "hour_of_day" | "day_of_week") =>
        {
            Ty::Int
        }
        rhai::Expr::FnCall(call, _) if call.is_operator_call() => match call.args.as_slice() {
            [a, b] => operator_result(call.name.as_str(), infer(a), infer(b)),
            _ => Ty::Unknown,
        },
        _ => Ty::Unknown,
    }
}

/// What an operator yields from operands of these types, when that is certain.
fn operator_result(op: &str, a: Ty, b: Ty) -> Ty {
    let numeric = |a: Ty, b: Ty| match (a, b) {
        (Ty::Int, Ty::Int) => Ty::Int,
        _ if a.is_number() && b.is_number() => Ty::Float,
        _ => Ty::Unknown,
    };
    match op {
        "+" if a == Ty::Str || b == Ty::Str => {
            if a == Ty::Unknown || b == Ty::Unknown {
                Ty::Unknown
            } else {
                Ty::Str
            }
        }
        // `**` of two integers may be a float in rhai only for negative powers: an integer
        // power errors instead, so integer it is.
        "+" | "-" | "*" | "/" | "%" | "**" => numeric(a, b),
        _ => Ty::Unknown,
    }
}

/// The operand as a reader would name it.
fn describe(e: &rhai::Expr) -> String {
    match e {
        rhai::Expr::StringConstant(s, _) => format!("{s:?}"),
        rhai::Expr::IntegerConstant(i, _) => i.to_string(),
        rhai::Expr::FloatConstant(f, _) => f.to_string(),
        rhai::Expr::Variable(..) => variable(e).unwrap_or("a variable").to_string(),
        rhai::Expr::Dot(..) | rhai::Expr::Index(..) => match member(e) {
            Some((map, Some(key))) if key.starts_with('[') => format!("{map}{key}"),
            Some((map, Some(key))) => format!("{map}.{key}"),
            Some((map, None)) => format!("a member of {map}"),
            None => "an expression".into(),
        },
        _ => "an expression".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::script::ScriptEngine;

    fn found(source: &str) -> Vec<(String, Option<(usize, usize)>)> {
        let expr = ScriptEngine::new().compile(source).unwrap();
        mismatches(&expr)
            .into_iter()
            .map(|m| (m.message, m.at))
            .collect()
    }

    #[test]
    fn a_string_variable_against_a_number_is_found_at_the_operator() {
        let m = found("code > 5");
        assert_eq!(m.len(), 1, "{m:?}");
        assert_eq!(m[0].1, Some((1, 6)));
        assert!(
            m[0].0
                .starts_with("'>' between code (a string) and 5 (an integer) is always false"),
            "{m:?}"
        );
        let m = found(r#"biz == "PAY" && attempt != "3""#);
        assert_eq!(m.len(), 1, "{m:?}");
        assert_eq!(m[0].1, Some((1, 25)));
        assert!(
            m[0].0
                .contains("attempt (an integer) and \"3\" (a string) is always true"),
            "{m:?}"
        );
    }

    #[test]
    fn members_and_operator_results_are_typed() {
        assert_eq!(found("attrs.tenant < signals.fail_rate").len(), 1);
        assert_eq!(found(r#"signals["x"] == attrs["y"]"#).len(), 1);
        assert_eq!(found("(attempt + 1) * 2 > code").len(), 1);
        assert_eq!(found(r#"hour_of_day(now, 1) < "9""#).len(), 1);
        assert_eq!(found(r#"headers.tenant > now"#).len(), 1);
        let m = found("code - 1 > 0");
        assert_eq!(m.len(), 1, "{m:?}");
        assert!(
            m[0].0
                .starts_with("'-' between code (a string) and 1 (an integer) fails at run time"),
            "{m:?}"
        );
    }

    #[test]
    fn like_with_like_and_unknowns_are_quiet() {
        for ok in [
            "code == \"5\"",
            "attempt > 3 && signals.fail_rate > 0.5",
            "attempt > 0.5",
            "\"attempt \" + attempt != \"\"",
            "parse_int(attrs.n) > 3",
            "retry_after == ()",
            "attrs.n.len() > 3",
            "hour_of_day(now, -5) < 9 && day_of_week(now, 1) <= 5",
        ] {
            assert!(found(ok).is_empty(), "{ok}: {:?}", found(ok));
        }
    }
}
