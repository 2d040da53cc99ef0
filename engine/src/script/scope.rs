//! The variables an expression runs with, kept in one rhai [`Scope`] per thread.
//!
//! rules.md gives every expression the same eleven variables. Building a fresh scope for each
//! evaluation cost more than the guard itself: every name and string is a new allocation,
//! attrs and headers become rhai maps, and all of it is freed again afterwards. So each
//! thread keeps one scope holding all eleven names, and an evaluation refreshes, in place, only
//! the variables its expression reads ([`Reads`], found by walking the AST once at load).
//! A variable the expression does not read may hold another failure's value; nothing in an
//! expression can see it (there is no `eval`, and `is_def_var` only asks whether a name
//! exists, which all eleven always do).
//!
//! A refresh never trusts what the scope holds: an expression may have changed a variable
//! through a method (`attrs.remove("x")`, `biz.make_upper()`) or shared it with a closure,
//! so every value it reads is compared with the failure and rewritten when it differs. An
//! unchanged string or map is kept as it is, and a changed one is rewritten in its own
//! allocation when that is large enough, so a steady stream of similar failures allocates
//! nothing.

use crate::context::{FailureContext, SignalView};
use rhai::{AST, ASTNode, Dynamic, DynamicWriteLock, ImmutableString, Map, Scope};
use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::BTreeMap;

/// The variables of rules.md, in the order of the scope.
const NAMES: [&str; 11] = [
    "biz",
    "code",
    "attempt",
    "elapsed",
    "retry_after",
    "last_delay",
    "attrs",
    "headers",
    "now",
    "redrives",
    "signals",
];

/// The runtime's signals as rhai sees them: a missing key reads as `0.0`.
///
/// A scope holds only `'static` values, so the borrowed [`SignalView`] is copied in here:
/// names the runtime gave as `'static` (its fixed set) are borrowed, names from a map are
/// copied, and a refresh keeps the names that did not change.
#[derive(Debug, Clone, Default)]
pub(super) struct ScopeSignals(Vec<(Cow<'static, str>, f64)>);

impl ScopeSignals {
    /// The value of `name`, or `0.0`.
    pub(super) fn get(&self, name: &str) -> f64 {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map_or(0.0, |&(_, v)| v)
    }

    /// Makes these the signals of `view`, reusing the vector and the names already there.
    fn refresh(&mut self, view: SignalView<'_>) {
        match view {
            SignalView::Pairs(pairs) => {
                self.0.truncate(pairs.len());
                for (i, &(name, value)) in pairs.iter().enumerate() {
                    self.put(i, name, value, Cow::Borrowed);
                }
            }
            SignalView::Map(map) => {
                self.0.truncate(map.len());
                for (i, (name, &value)) in map.iter().enumerate() {
                    self.put(i, name.as_str(), value, |n| Cow::Owned(n.to_string()));
                }
            }
        }
    }

    fn put<'n>(
        &mut self,
        i: usize,
        name: &'n str,
        value: f64,
        own: impl FnOnce(&'n str) -> Cow<'static, str>,
    ) {
        match self.0.get_mut(i) {
            Some((k, v)) if k == name => *v = value,
            Some(slot) => *slot = (own(name), value),
            None => self.0.push((own(name), value)),
        }
    }
}

/// Which of the eleven variables an expression reads: one bit per entry of [`NAMES`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Reads(u16);

impl Reads {
    /// Every variable: what an expression that could read any of them gets.
    const ALL: Reads = Reads((1 << NAMES.len()) - 1);

    /// The variables `ast` reads: every variable node, closures' bodies and captures
    /// included. A closure's parameter named like one of them counts too, which costs a
    /// refresh and nothing else.
    pub(super) fn of(ast: &AST) -> Reads {
        let mut bits = 0;
        ast.walk(&mut |path: &[ASTNode]| {
            if let Some(ASTNode::Expr(rhai::Expr::Variable(v, ..))) = path.last()
                && let Some(i) = NAMES.iter().position(|n| *n == v.1.as_str())
            {
                bits |= 1 << i;
            }
            true
        });
        Reads(bits)
    }

    fn has(self, i: usize) -> bool {
        self.0 & (1 << i) != 0
    }
}

/// The names `ast` reads as `signals.NAME`.
pub(super) fn signal_properties(ast: &AST) -> Vec<String> {
    let mut names = Vec::new();
    ast.walk(&mut |path: &[ASTNode]| {
        if let Some(ASTNode::Expr(rhai::Expr::Dot(x, ..))) = path.last()
            && let rhai::Expr::Variable(v, ..) = &x.lhs
            && v.1.as_str() == "signals"
            && let rhai::Expr::Property(p, _) = &x.rhs
        {
            names.push(p.2.to_string());
        }
        true
    });
    names
}

thread_local! {
    /// This thread's scope; `None` until its first evaluation.
    static SCOPE: RefCell<Option<Scope<'static>>> = const { RefCell::new(None) };
}

/// Runs `f` with a scope whose variables `reads` holds those of `ctx`.
pub(super) fn with_scope<R>(
    ctx: &FailureContext<'_>,
    reads: Reads,
    f: impl FnOnce(&mut Scope<'static>) -> R,
) -> R {
    SCOPE.with(|cell| match cell.try_borrow_mut() {
        Ok(mut kept) => {
            let scope = kept.get_or_insert_with(empty);
            // An expression cannot declare variables, but a scope that is not exactly the
            // eleven (whatever left it so) is rebuilt rather than trusted.
            if scope.len() != NAMES.len() {
                *scope = empty();
            }
            if refresh(scope, ctx, reads).is_none() {
                *scope = fresh(ctx);
            }
            f(scope)
        }
        // An evaluation inside an evaluation on this thread: nothing does that today, but a
        // scope of its own is correct whatever happens.
        Err(_) => f(&mut fresh(ctx)),
    })
}

/// A scope of the eleven variables of `ctx`, built anew (what `compile` checks names against).
pub(super) fn fresh(ctx: &FailureContext<'_>) -> Scope<'static> {
    let mut scope = empty();
    // A scope just made holds every name, writable.
    let _ = refresh(&mut scope, ctx, Reads::ALL);
    scope
}

/// The eleven names, each holding `()`.
fn empty() -> Scope<'static> {
    let mut scope = Scope::with_capacity(NAMES.len());
    for name in NAMES {
        scope.push_dynamic(name, Dynamic::UNIT);
    }
    scope
}

/// Refreshes the variables `reads` holds; `None` when one of them is missing or read-only
/// (then the caller rebuilds the scope: nothing should ever leave it so).
fn refresh(scope: &mut Scope<'static>, ctx: &FailureContext<'_>, reads: Reads) -> Option<()> {
    let ms = millis;
    for (i, name) in NAMES.iter().enumerate() {
        if !reads.has(i) {
            continue;
        }
        let slot = scope.get_mut(name)?;
        match i {
            0 => set_str(slot, ctx.biz),
            1 => set_str(slot, ctx.code),
            2 => set(slot, i64::from(ctx.attempt)),
            3 => set(slot, ms(ctx.elapsed)),
            4 => match ctx.retry_after {
                Some(d) => set(slot, ms(d)),
                None => *slot = Dynamic::UNIT,
            },
            5 => set(slot, ms(ctx.last_delay)),
            6 => set_map(slot, ctx.attrs),
            7 => set_map(slot, ctx.headers),
            8 => set(slot, epoch_millis(ctx.now)),
            9 => set(slot, i64::from(ctx.redrives)),
            _ => set_signals(slot, ctx.signals),
        }
    }
    Some(())
}

/// A duration as an expression sees it: whole milliseconds, saturating.
pub(super) fn millis(d: std::time::Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// `now` as an expression sees it.
pub(super) fn epoch_millis(now: u64) -> i64 {
    i64::try_from(now).unwrap_or(i64::MAX)
}

/// The value in `slot` for writing in place, if it is a `T` of its own: a value a closure
/// captured is shared, and is replaced rather than written through.
fn own<T: Clone + Send + Sync + 'static>(slot: &mut Dynamic) -> Option<DynamicWriteLock<'_, T>> {
    if slot.is_shared() {
        return None;
    }
    slot.write_lock::<T>()
}

fn set<T: Clone + Send + Sync + 'static>(slot: &mut Dynamic, value: T) {
    if let Some(mut held) = own::<T>(slot) {
        *held = value;
        return;
    }
    *slot = Dynamic::from(value);
}

fn set_str(slot: &mut Dynamic, value: &str) {
    if let Some(mut held) = own::<ImmutableString>(slot) {
        if held.as_str() != value {
            // In the string's own allocation when no one else holds it.
            let text = held.make_mut();
            text.clear();
            text.push_str(value);
        }
        return;
    }
    *slot = Dynamic::from(ImmutableString::from(value));
}

fn set_map(slot: &mut Dynamic, value: &BTreeMap<String, String>) {
    if let Some(mut held) = own::<Map>(slot)
        && held.len() == value.len()
        // Both maps order their keys byte-wise, so equal key sets pair up in order.
        && held.keys().zip(value.keys()).all(|(a, b)| a.as_str() == b)
    {
        for ((_, v), (_, want)) in held.iter_mut().zip(value) {
            set_str(v, want);
        }
        return;
    }
    let map: Map = value
        .iter()
        .map(|(k, v)| {
            (
                k.as_str().into(),
                Dynamic::from(ImmutableString::from(v.as_str())),
            )
        })
        .collect();
    *slot = Dynamic::from(map);
}

fn set_signals(slot: &mut Dynamic, view: SignalView<'_>) {
    if let Some(mut held) = own::<ScopeSignals>(slot) {
        held.refresh(view);
        return;
    }
    let mut signals = ScopeSignals::default();
    signals.refresh(view);
    *slot = Dynamic::from(signals);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::script::ScriptEngine;

    fn reads(source: &str) -> Vec<&'static str> {
        let expr = ScriptEngine::new().compile(source).unwrap();
        let reads = Reads::of(&expr.ast);
        NAMES
            .iter()
            .enumerate()
            .filter(|&(i, _)| reads.has(i))
            .map(|(_, n)| *n)
            .collect()
    }

    #[test]
    fn reads_finds_every_variable_an_expression_names() {
        assert_eq!(
            reads("signals.fail_rate > 0.5 && attempt < 10"),
            ["attempt", "signals"]
        );
        assert_eq!(reads("true"), [] as [&str; 0]);
        assert_eq!(
            reads(r#"attrs["tenant"] == code && hour_of_day(now, 1) < 9"#),
            ["code", "attrs", "now"]
        );
        // A closure's capture and body both count.
        assert_eq!(
            reads("[1, 2].map(|x| x * elapsed).reduce(|s, x| s + x + last_delay, 0) > 0"),
            ["elapsed", "last_delay"]
        );
        assert_eq!(
            reads("retry_after == () || headers.len() > 0 || biz.len() > 0"),
            ["biz", "retry_after", "headers"]
        );
    }

    #[test]
    fn a_refresh_restores_what_an_expression_changed() {
        let e = ScriptEngine::new();
        let attrs = crate::Attrs::from([("tenant".to_string(), "acme".to_string())]);
        let c = FailureContext {
            attrs: &attrs,
            ..FailureContext::new("PAYMENT", "NET_TIMEOUT", 3)
        };
        // Each guard changes what it reads, then the next evaluation must see the failure.
        for source in [
            r#"attrs.remove("tenant") == "acme" && attrs.len() == 0"#,
            r#"attrs.tenant.make_upper() == () && attrs.tenant == "ACME""#,
            r#"biz.make_lower() == () && biz == "payment""#,
            r#"attrs.mixin(#{ extra: "x" }) == () && attrs.len() == 2"#,
            // A closure captures `attempt`: the scope's value becomes shared.
            "[1].map(|x| x + attempt)[0] == 4 && attempt == 3",
        ] {
            let guard = e.compile(source).unwrap();
            assert_eq!(e.guard(&guard, &c), Ok(true), "{source}");
        }
        let clean = e
            .compile(
                r#"biz == "PAYMENT" && attrs.tenant == "acme" && attrs.len() == 1 && attempt == 3"#,
            )
            .unwrap();
        for _ in 0..3 {
            assert_eq!(e.guard(&clean, &c), Ok(true));
        }
    }

    #[test]
    fn a_refresh_follows_failures_that_differ() {
        let e = ScriptEngine::new();
        let g = e
            .compile(
                r#"biz + "/" + code + "/" + attempt + "/" + attrs.len() + "/" + signals.a + "/" + signals.b"#,
            )
            .unwrap();
        let one = crate::Attrs::from([("k".to_string(), "v".to_string())]);
        let two = crate::Attrs::from([
            ("k".to_string(), "w".to_string()),
            ("l".to_string(), "x".to_string()),
        ]);
        let map = crate::Signals::from([("b".to_string(), 2.0)]);
        let pairs = [("a", 1.0), ("b", 3.0)];
        let cases = [
            (
                FailureContext::new("PAYMENT", "X", 1),
                "PAYMENT/X/1/0/0.0/0.0",
            ),
            (
                FailureContext {
                    attrs: &one,
                    signals: SignalView::Pairs(&pairs),
                    ..FailureContext::new("A-much-longer-business-name", "Y", 2)
                },
                "A-much-longer-business-name/Y/2/1/1.0/3.0",
            ),
            (
                FailureContext {
                    attrs: &two,
                    signals: SignalView::Map(&map),
                    ..FailureContext::new("B", "Z", 3)
                },
                "B/Z/3/2/0.0/2.0",
            ),
            (FailureContext::new("C", "", 4), "C//4/0/0.0/0.0"),
        ];
        for _ in 0..2 {
            for (ctx, want) in &cases {
                let got = e.eval(&g, ctx).unwrap().into_string().unwrap();
                assert_eq!(got, *want);
            }
        }
    }
}
