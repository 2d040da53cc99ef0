//! A message's [`Failures`] as the store keeps them: one JSON text, `""` for a message that
//! never failed, else `{"dropped": N, "kept": [{"attempt", "at", "code", "message", "attrs",
//! "rule", "version", "delay_ms"?}, …]}`. Both stores keep the same text (a SQLite column, a
//! hash field), so either reads back what the other wrote.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Map, Value, json};

use super::Result;
use super::values::{corrupt, rule_from_sql, version_from_sql};
use crate::time::Timestamp;
use crate::topology::{FailureRecord, Failures};

/// The stored text of `failures`.
pub(super) fn failures_to_sql(failures: &Failures) -> Result<String> {
    if failures.is_empty() {
        return Ok(String::new());
    }
    let kept: Vec<Value> = failures.records().iter().map(record_json).collect();
    let doc = json!({ "dropped": failures.dropped(), "kept": kept });
    serde_json::to_string(&doc).map_err(|e| corrupt("failures", "failures", e))
}

/// One failure as JSON, as the store keeps it and as the operator's routes show it (those
/// add nothing and drop `version`).
pub fn record_json(r: &FailureRecord) -> Value {
    let mut o = Map::new();
    o.insert("attempt".into(), r.attempt.into());
    o.insert("at".into(), r.at.as_millis().into());
    o.insert("code".into(), r.code.clone().into());
    o.insert("message".into(), r.message.clone().into());
    o.insert(
        "attrs".into(),
        Value::Object(
            r.attrs
                .iter()
                .map(|(k, v)| (k.clone(), Value::from(v.clone())))
                .collect(),
        ),
    );
    o.insert("rule".into(), r.rule.as_str().into());
    o.insert("version".into(), r.version.to_string().into());
    if let Some(d) = r.delay {
        o.insert(
            "delay_ms".into(),
            u64::try_from(d.as_millis()).unwrap_or(u64::MAX).into(),
        );
    }
    Value::Object(o)
}

/// Reads back [`failures_to_sql`]'s text (of table `table`).
pub(super) fn failures_from_sql(table: &'static str, text: &str) -> Result<Failures> {
    if text.is_empty() {
        return Ok(Failures::default());
    }
    let bad = |detail: &dyn std::fmt::Display| corrupt(table, "failures", detail);
    let doc: Value = serde_json::from_str(text).map_err(|e| bad(&e))?;
    let dropped = doc["dropped"].as_u64().ok_or_else(|| bad(&"no dropped"))?;
    let kept = doc["kept"].as_array().ok_or_else(|| bad(&"no kept"))?;
    let records = kept
        .iter()
        .map(|r| record_from_json(table, r))
        .collect::<Result<Vec<_>>>()?;
    Ok(Failures::from_parts(records, dropped))
}

fn record_from_json(table: &'static str, r: &Value) -> Result<FailureRecord> {
    let bad = |what: &str| corrupt(table, "failures", format!("a failure without {what}"));
    let text = |k: &str| r[k].as_str().map(str::to_owned).ok_or_else(|| bad(k));
    let attrs: BTreeMap<String, String> = r["attrs"]
        .as_object()
        .ok_or_else(|| bad("attrs"))?
        .iter()
        .map(|(k, v)| {
            Ok((
                k.clone(),
                v.as_str().ok_or_else(|| bad("attrs"))?.to_owned(),
            ))
        })
        .collect::<Result<_>>()?;
    Ok(FailureRecord {
        attempt: r["attempt"]
            .as_u64()
            .and_then(|a| u32::try_from(a).ok())
            .ok_or_else(|| bad("attempt"))?,
        at: Timestamp::from_millis(r["at"].as_u64().ok_or_else(|| bad("at"))?),
        code: text("code")?,
        message: text("message")?,
        attrs,
        rule: rule_from_sql(&text("rule")?),
        version: version_from_sql(table, &text("version")?)?,
        delay: r
            .get("delay_ms")
            .and_then(Value::as_u64)
            .map(Duration::from_millis),
    })
}
