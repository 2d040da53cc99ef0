//! Guards that need no interpreter: comparisons of the failure's fields with literals,
//! joined by `&&`, `||` and `!`, read straight from the [`FailureContext`].
//!
//! Most guards are like `signals.fail_rate > 0.5 && attempt < 10`. rhai evaluates one in
//! about 3,000 instructions (a tree walk, a function lookup per operator, a property getter
//! for `signals`), ten times what the rest of a decision costs. At load, a guard whose whole
//! AST is in the small language below is also compiled to a [`Fast`] tree, which a decision
//! evaluates instead, in a few dozen instructions and with no allocation:
//!
//! - literals: integers, floats, strings, booleans, `()`;
//! - the variables `biz`, `code`, `attempt`, `elapsed`, `retry_after`, `last_delay`, `now`,
//!   `redrives`;
//! - `signals.NAME`, `signals["NAME"]`, `attrs.NAME`, `attrs["NAME"]`, `headers.NAME`,
//!   `headers["NAME"]`;
//! - `==`, `!=`, `<`, `<=`, `>`, `>=` between those, and `&&`, `||`, `!` over booleans.
//!
//! rhai stays the reference: the comparisons copy its built-in operators exactly (floats are
//! compared with its relative epsilon, integers meet floats as floats, values of different
//! kinds are unequal and unordered, `()` equals only `()`), and whenever the tree would have
//! to report an error (`&&` over a string, a guard that yields no boolean) it gives up and
//! the guard runs in rhai, so every error and its message is rhai's own. A property test
//! (`fast_guards_agree_with_rhai`) compares the two on random guards and failures.
//! Nothing in this language can loop, so the sandbox's bounds have nothing to stop here.

use super::scope::{epoch_millis, millis};
use crate::context::{Attrs, FailureContext};
use rhai::{AST, ASTFlags, Expr, ImmutableString, Stmt, Token};

/// A guard compiled to read the failure directly.
#[derive(Debug, Clone)]
pub(super) struct Fast(Node);

#[derive(Debug, Clone)]
enum Node {
    Int(i64),
    Float(f64),
    Str(ImmutableString),
    Bool(bool),
    Unit,
    Var(Var),
    Signal(ImmutableString),
    Attr(ImmutableString),
    Header(ImmutableString),
    Compare(Op, Box<[Node; 2]>),
    And(Box<[Node]>),
    Or(Box<[Node]>),
    Not(Box<Node>),
}

#[derive(Debug, Clone, Copy)]
enum Var {
    Biz,
    Code,
    Attempt,
    Elapsed,
    RetryAfter,
    LastDelay,
    Now,
    Redrives,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

/// A value while the tree runs, borrowed from the tree or the failure.
#[derive(Debug, Clone, Copy)]
enum Value<'a> {
    Int(i64),
    Float(f64),
    Str(&'a str),
    Bool(bool),
    Unit,
}

impl Fast {
    /// The tree of `ast`, if all of it is in the language this module evaluates.
    pub(super) fn of(ast: &AST) -> Option<Fast> {
        if ast.iter_functions().next().is_some() {
            return None;
        }
        let [stmt] = ast.statements() else {
            return None;
        };
        let node = match stmt {
            Stmt::Expr(e) => node(e)?,
            Stmt::FnCall(call, _) => call_node(call)?,
            _ => return None,
        };
        Some(Fast(node))
    }

    /// The guard's value, or `None` when only rhai can say (the guard then runs there).
    pub(super) fn guard(&self, ctx: &FailureContext<'_>) -> Option<bool> {
        match eval(&self.0, ctx)? {
            Value::Bool(b) => Some(b),
            _ => None,
        }
    }
}

fn node(e: &Expr) -> Option<Node> {
    Some(match e {
        Expr::IntegerConstant(i, _) => Node::Int(*i),
        Expr::FloatConstant(f, _) => Node::Float(**f),
        Expr::StringConstant(s, _) => Node::Str(s.clone()),
        Expr::BoolConstant(b, _) => Node::Bool(*b),
        Expr::Unit(_) => Node::Unit,
        Expr::Variable(v, ..) => Node::Var(match v.1.as_str() {
            "biz" => Var::Biz,
            "code" => Var::Code,
            "attempt" => Var::Attempt,
            "elapsed" => Var::Elapsed,
            "retry_after" => Var::RetryAfter,
            "last_delay" => Var::LastDelay,
            "now" => Var::Now,
            "redrives" => Var::Redrives,
            _ => return None,
        }),
        Expr::Dot(x, flags, _) if !flags.intersects(ASTFlags::NEGATED) => match &x.rhs {
            Expr::Property(p, _) => member(&x.lhs, p.2.clone())?,
            _ => return None,
        },
        Expr::Index(x, flags, _) if !flags.intersects(ASTFlags::NEGATED) => match &x.rhs {
            Expr::StringConstant(key, _) => member(&x.lhs, key.clone())?,
            _ => return None,
        },
        Expr::And(list, _) => Node::And(list.iter().map(node).collect::<Option<_>>()?),
        Expr::Or(list, _) => Node::Or(list.iter().map(node).collect::<Option<_>>()?),
        Expr::FnCall(call, _) => call_node(call)?,
        _ => return None,
    })
}

/// `map.key` or `map["key"]` on one of the three maps.
fn member(map: &Expr, key: ImmutableString) -> Option<Node> {
    let Expr::Variable(v, ..) = map else {
        return None;
    };
    Some(match v.1.as_str() {
        "signals" => Node::Signal(key),
        "attrs" => Node::Attr(key),
        "headers" => Node::Header(key),
        _ => return None,
    })
}

fn call_node(call: &rhai::FnCallExpr) -> Option<Node> {
    if !call.is_operator_call() {
        return None;
    }
    let op = match call.op_token.as_ref()? {
        Token::EqualsTo => Op::Eq,
        Token::NotEqualsTo => Op::Ne,
        Token::LessThan => Op::Lt,
        Token::LessThanEqualsTo => Op::Le,
        Token::GreaterThan => Op::Gt,
        Token::GreaterThanEqualsTo => Op::Ge,
        Token::Bang => {
            let [x] = call.args.as_slice() else {
                return None;
            };
            return Some(Node::Not(Box::new(node(x)?)));
        }
        _ => return None,
    };
    let [a, b] = call.args.as_slice() else {
        return None;
    };
    Some(Node::Compare(op, Box::new([node(a)?, node(b)?])))
}

fn eval<'a>(n: &'a Node, ctx: &FailureContext<'a>) -> Option<Value<'a>> {
    Some(match n {
        Node::Int(i) => Value::Int(*i),
        Node::Float(f) => Value::Float(*f),
        Node::Str(s) => Value::Str(s.as_str()),
        Node::Bool(b) => Value::Bool(*b),
        Node::Unit => Value::Unit,
        Node::Var(v) => match v {
            Var::Biz => Value::Str(ctx.biz),
            Var::Code => Value::Str(ctx.code),
            Var::Attempt => Value::Int(i64::from(ctx.attempt)),
            Var::Elapsed => Value::Int(millis(ctx.elapsed)),
            Var::RetryAfter => ctx
                .retry_after
                .map_or(Value::Unit, |d| Value::Int(millis(d))),
            Var::LastDelay => Value::Int(millis(ctx.last_delay)),
            Var::Now => Value::Int(epoch_millis(ctx.now)),
            Var::Redrives => Value::Int(i64::from(ctx.redrives)),
        },
        // The scope's `signals`: a missing one reads as 0.0.
        Node::Signal(name) => Value::Float(ctx.signals.get(name).unwrap_or(0.0)),
        // A rhai map without the key reads as `()` (`fail_on_invalid_map_property` is off).
        Node::Attr(name) => string(ctx.attrs, name),
        Node::Header(name) => string(ctx.headers, name),
        Node::Compare(op, sides) => {
            let [a, b] = &**sides;
            Value::Bool(compare(*op, eval(a, ctx)?, eval(b, ctx)?))
        }
        // rhai's `&&` and `||` stop at the first operand that decides; any operand they reach
        // that is not a boolean is an error, which is rhai's to report.
        Node::And(list) => {
            for x in list {
                if !boolean(x, ctx)? {
                    return Some(Value::Bool(false));
                }
            }
            Value::Bool(true)
        }
        Node::Or(list) => {
            for x in list {
                if boolean(x, ctx)? {
                    return Some(Value::Bool(true));
                }
            }
            Value::Bool(false)
        }
        Node::Not(x) => Value::Bool(!boolean(x, ctx)?),
    })
}

fn boolean(n: &Node, ctx: &FailureContext<'_>) -> Option<bool> {
    match eval(n, ctx)? {
        Value::Bool(b) => Some(b),
        _ => None,
    }
}

fn string<'a>(map: &'a Attrs, name: &str) -> Value<'a> {
    map.get(name).map_or(Value::Unit, |v| Value::Str(v))
}

/// rhai's built-in comparison of two values (`func/builtin.rs`, checked arithmetic).
fn compare(op: Op, a: Value<'_>, b: Value<'_>) -> bool {
    use Value::*;
    match (a, b) {
        (Int(x), Int(y)) => ordered(op, x.cmp(&y)),
        (Bool(x), Bool(y)) => ordered(op, x.cmp(&y)),
        (Str(x), Str(y)) => ordered(op, x.cmp(y)),
        (Unit, Unit) => op == Op::Eq,
        (Float(x), Float(y)) => floats(op, x, y),
        (Float(x), Int(y)) => floats(op, x, y as f64),
        (Int(x), Float(y)) => floats(op, x as f64, y),
        // Values of different kinds, not both numbers: unequal and unordered.
        _ => op == Op::Ne,
    }
}

fn ordered(op: Op, o: std::cmp::Ordering) -> bool {
    match op {
        Op::Eq => o.is_eq(),
        Op::Ne => o.is_ne(),
        Op::Lt => o.is_lt(),
        Op::Le => o.is_le(),
        Op::Gt => o.is_gt(),
        Op::Ge => o.is_ge(),
    }
}

/// rhai's float comparison: equal within a relative `EPSILON`, as its `impl_float!` has it.
fn floats(op: Op, x: f64, y: f64) -> bool {
    let max = if x * y == 0.0 {
        1.0
    } else {
        x.abs().max(y.abs())
    };
    if max == 0.0 {
        return matches!(op, Op::Eq | Op::Ge | Op::Le);
    }
    match op {
        Op::Eq => (x - y).abs() / max <= f64::EPSILON,
        Op::Ne => (x - y).abs() / max > f64::EPSILON,
        Op::Gt => (x - y) / max > f64::EPSILON,
        Op::Ge => (x - y) / max > -f64::EPSILON,
        Op::Lt => (y - x) / max > f64::EPSILON,
        Op::Le => (y - x) / max > -f64::EPSILON,
    }
}

#[cfg(test)]
#[path = "fast_tests.rs"]
mod tests;
