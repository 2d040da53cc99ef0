//! What `decide`, `explain` and `POST /v1/decide` say of the budget and the breakers a failure
//! falls under (not their live state: that is the runtime's).

use rebound_engine::{CompiledSet, FailureContext};
use serde_json::{Value, json};

/// The budget and breakers of `ctx` in `set`, as the JSON keys `budget` (an id or null) and
/// `breakers` (`[{"id", "key"?}]`); a key only when the set defines budgets, or breakers.
pub fn keys(set: &CompiledSet, ctx: &FailureContext<'_>) -> Vec<(&'static str, Value)> {
    let mut out = Vec::new();
    if !set.budgets().is_empty() {
        out.push(("budget", json!(set.budget_for(ctx).map(|b| b.id.as_str()))));
    }
    if !set.breakers().is_empty() {
        let breakers: Vec<Value> = set
            .breakers_for(ctx)
            .map(|b| match &b.per {
                None => json!({ "id": b.id }),
                Some(per) => json!({
                    "id": b.id,
                    "per": per.to_string(),
                    "key": per.key(ctx),
                }),
            })
            .collect();
        out.push(("breakers", Value::Array(breakers)));
    }
    out
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
        .map(|b| match &b.per {
            None => b.id.clone(),
            Some(per) => format!("{} ({per} = {})", b.id, per.key(ctx)),
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
