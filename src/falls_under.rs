//! What `decide`, `explain` and `POST /v1/decide` say of the budget and the breakers a failure
//! falls under (not their live state: that is the runtime's).

use rebound_engine::{CompiledSet, FailureContext};
use serde_json::{Value, json};

/// The budget and breakers of `ctx` in `set`, as the JSON keys `budget` (an id or null) and
/// `breakers` (`[{"id", "per"?, "key"?, "open_on_heat"?, "heat_opens"?}]`: a breaker that
/// opens on heat says at which, and whether the failure's `signals.heat` reaches it); a key
/// only when the set defines budgets, or breakers.
pub fn keys(set: &CompiledSet, ctx: &FailureContext<'_>) -> Vec<(&'static str, Value)> {
    let mut out = Vec::new();
    if !set.budgets().is_empty() {
        out.push(("budget", json!(set.budget_for(ctx).map(|b| b.id.as_str()))));
    }
    if !set.breakers().is_empty() {
        let breakers: Vec<Value> = set
            .breakers_for(ctx)
            .map(|b| {
                let mut one = json!({ "id": b.id });
                if let Some(per) = &b.per {
                    one["per"] = json!(per.to_string());
                    one["key"] = json!(per.key(ctx));
                }
                if let Some(at) = b.open_on_heat {
                    one["open_on_heat"] = json!(at);
                    one["heat_opens"] = json!(heat_of(ctx) >= at);
                }
                one
            })
            .collect();
        out.push(("breakers", Value::Array(breakers)));
    }
    out
}

/// The failure's `signals.heat` (0 when not given).
fn heat_of(ctx: &FailureContext<'_>) -> f64 {
    ctx.signals.get("heat").unwrap_or(0.0)
}

/// What a breaker that opens on heat says of it: `opens at heat ≥ 5`, and, when the failure's
/// heat reaches it, that it opens.
fn heat_note(at: f64, ctx: &FailureContext<'_>) -> String {
    let heat = heat_of(ctx);
    if heat >= at {
        format!("opens at heat ≥ {at}: heat {heat} opens it")
    } else {
        format!("opens at heat ≥ {at}")
    }
}

/// One line for people, or `None` when the set defines neither: `falls under: budget
/// payment-retries; breakers payment-gateway (attrs.downstream = pg-1)`.
pub fn line(set: &CompiledSet, ctx: &FailureContext<'_>) -> Option<String> {
    if set.budgets().is_empty() && set.breakers().is_empty() {
        return None;
    }
    let budget = set
        .budget_for(ctx)
        .map_or("no budget".to_owned(), |b| format!("budget {}", b.id));
    let breakers: Vec<String> = set
        .breakers_for(ctx)
        .map(|b| {
            let per = b
                .per
                .as_ref()
                .map(|per| format!("{per} = {}", per.key(ctx)));
            let heat = b.open_on_heat.map(|at| heat_note(at, ctx));
            let notes: Vec<String> = per.into_iter().chain(heat).collect();
            if notes.is_empty() {
                b.id.clone()
            } else {
                format!("{} ({})", b.id, notes.join(", "))
            }
        })
        .collect();
    let breakers = match breakers.len() {
        0 => "no breaker".to_owned(),
        1 => format!("breaker {}", breakers[0]),
        _ => format!("breakers {}", breakers.join(", ")),
    };
    Some(format!("falls under: {budget}; {breakers}"))
}

/// `report`'s JSON (its keys in their order) with `keys` appended.
pub fn with_keys(report: &impl serde::Serialize, keys: Vec<(&'static str, Value)>) -> String {
    let mut text = serde_json::to_string(report).unwrap_or_default();
    if keys.is_empty() || !text.ends_with('}') {
        return text;
    }
    text.pop();
    for (key, value) in keys {
        text.push_str(&format!(",{}:{value}", Value::from(key)));
    }
    text.push('}');
    text
}
