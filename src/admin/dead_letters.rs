//! The dead-letter routes: list with filters and a total, and the two operator actions on one
//! letter, replay and skip. The bulk actions and the export are in `bulk.rs`; a message's
//! whole story in `messages.rs`; the scheduled retries in `retries.rs`; the audit log in
//! `audit.rs`.
//!
//! The routes talk to a [`DeadLetterDesk`] (`desks.rs`: over a plain store, or over the
//! durable layer of a running topology, which also acts on its live retry queues at once).

use super::AdminState;
use super::action::{Actor, OnOne};
use super::error::ApiError;
use crate::json::letter_json;
use axum::Json;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use rebound_runtime::fate::{BoxFuture, DeadLetter, Label, RuleRef};
use rebound_runtime::store::{
    self, DeadLetterFilter, DeadLetterId, DeadLetterStatus, MAX_PAGE, MessageId, ScheduledRetry,
    Store, StoreError, StoredDeadLetter,
};
use rebound_runtime::time::{TimeScale, Timestamp};
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Arc;

/// One answer per id of a bulk action: what was done, or why not.
pub type Each<T> = Vec<Result<T, StoreError>>;

/// What the operator's routes need: the store to read, and the actions.
pub trait DeadLetterDesk: Send + Sync + std::fmt::Debug {
    /// The store the reads go to.
    fn store(&self) -> Arc<dyn Store>;
    /// Completes once every decision made so far is in the store (the writes the runtime
    /// holds back), so that a read sees it.
    fn settle(&self) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }
    /// The time scale of the rules' time (label SLAs are in it).
    fn time_scale(&self) -> TimeScale {
        TimeScale::REAL
    }
    /// Since when the store refuses the runtime's writes, and the last cause, while it does
    /// (`/readyz`); `None` while it takes them, or for a desk that writes nothing itself.
    fn unwritable(&self) -> Option<(rebound_runtime::time::Timestamp, String)> {
        None
    }
    /// Sends dead-lettered messages back into the topology as fresh deliveries. Blocking.
    fn replay(&self, ids: &[MessageId], by: &Actor) -> store::Result<Each<ScheduledRetry>>;
    /// Marks dead letters handled without delivering them again. Blocking.
    fn skip(&self, ids: &[MessageId], by: &Actor) -> store::Result<Each<StoredDeadLetter>>;
    /// Fires a scheduled retry now, its attempt kept. Blocking.
    fn retry_now(&self, id: &MessageId, by: &Actor) -> store::Result<ScheduledRetry>;
    /// Dead-letters a scheduled retry now (reason `killed`, the label `labels` gives its
    /// rule). Blocking.
    fn kill(&self, id: &MessageId, by: &Actor, labels: &LabelOf<'_>) -> store::Result<DeadLetter>;
}

/// The label a message dead-lettered now gets, by the rule that decided it (for a kill: that
/// rule's label in the set in force).
pub type LabelOf<'a> = dyn Fn(&RuleRef) -> Label + 'a;

/// The filters of the dead-letter routes (`GET /v1/dead-letters`, the export, and a bulk
/// action's `filter`).
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FilterQuery {
    /// Exact label.
    pub label: Option<String>,
    /// Exact business type.
    pub biz: Option<String>,
    /// Exact last failure code.
    pub code: Option<String>,
    /// Exact deciding rule.
    pub rule: Option<String>,
    /// `dead`, `replayed`, `skipped` or `expired`.
    pub status: Option<String>,
    /// Dead-lettered at or after (RFC 3339).
    pub since: Option<String>,
    /// Dead-lettered before (RFC 3339).
    pub until: Option<String>,
    /// `true`: only open letters past their label's SLA.
    pub overdue: Option<String>,
    /// A substring of the message id or the last failure's message.
    pub q: Option<String>,
}

/// The query of `GET /v1/dead-letters`: the filters and the paging.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    /// The filters.
    #[serde(flatten)]
    pub filter: FilterQuery,
    /// Page size (default 100, at most [`MAX_PAGE`]).
    pub limit: Option<String>,
    /// Paging cursor: the previous page's `next`.
    pub before: Option<String>,
}

/// An RFC 3339 time of query field `field`.
pub fn time(field: &str, v: Option<&str>) -> Result<Option<Timestamp>, ApiError> {
    v.map(|v| {
        humantime::parse_rfc3339_weak(v)
            .map(Timestamp::from_system)
            .map_err(|e| {
                ApiError::bad_request(format!(
                    "'{field}' must be an RFC 3339 time like 2026-12-01T17:00:00Z: '{v}': {e}"
                ))
            })
    })
    .transpose()
}

/// A whole number of query field `field`.
pub fn number<T: std::str::FromStr>(field: &str, v: Option<&str>) -> Result<Option<T>, ApiError> {
    v.map(|v| {
        v.parse().map_err(|_| {
            ApiError::bad_request(format!("'{field}' must be a whole number, not '{v}'"))
        })
    })
    .transpose()
}

/// The page size of `limit`, 1 to `max` (default 100).
pub fn page_size(v: Option<&str>, max: usize) -> Result<usize, ApiError> {
    let limit = number::<usize>("limit", v)?.unwrap_or(100.min(max));
    if !(1..=max).contains(&limit) {
        return Err(ApiError::bad_request(format!(
            "limit must be between 1 and {max}"
        )));
    }
    Ok(limit)
}

impl FilterQuery {
    /// True if no filter is given (a bulk action on it needs `"all": true`).
    pub fn is_empty(&self) -> bool {
        let FilterQuery {
            label,
            biz,
            code,
            rule,
            status,
            since,
            until,
            overdue,
            q,
        } = self;
        [label, biz, code, rule, status, since, until, overdue, q]
            .iter()
            .all(|v| v.is_none())
    }

    /// The store's filter; `overdue` needs the set in force and the desk's time scale.
    pub fn to_filter(
        &self,
        state: &AdminState,
        desk: &dyn DeadLetterDesk,
    ) -> Result<DeadLetterFilter, ApiError> {
        let status = self
            .status
            .as_deref()
            .map(|s| {
                DeadLetterStatus::parse(s).ok_or_else(|| {
                    ApiError::bad_request(format!(
                        "status must be one of dead, replayed, skipped, expired, not '{s}'"
                    ))
                })
            })
            .transpose()?;
        let overdue = match self.overdue.as_deref() {
            None | Some("false") => false,
            Some("true") => true,
            Some(other) => {
                return Err(ApiError::bad_request(format!(
                    "overdue must be true or false, not '{other}'"
                )));
            }
        };
        let overdue = overdue.then(|| {
            rebound_runtime::durable::labels::overdue_cutoffs(
                &state.reloader.handle().current(),
                desk.time_scale(),
                Timestamp::now(),
            )
        });
        Ok(DeadLetterFilter {
            label: self.label.clone(),
            biz: self.biz.clone(),
            code: self.code.clone(),
            rule: self.rule.clone(),
            status,
            since: time("since", self.since.as_deref())?,
            until: time("until", self.until.as_deref())?,
            overdue,
            q: self.q.clone().filter(|q| !q.is_empty()),
            ..DeadLetterFilter::default()
        })
    }
}

/// The desk, or 503 when no store is open in this process.
pub fn desk(state: &AdminState) -> Result<Arc<dyn DeadLetterDesk>, ApiError> {
    state.dead_letters.clone().ok_or_else(|| {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "no store is open in this process, so there are no dead letters to show",
        )
    })
}

/// A store's refusal as the answer it means.
pub fn store_error(e: StoreError) -> ApiError {
    match e {
        StoreError::Blank { .. } => ApiError::bad_request(e.to_string()),
        StoreError::DeadLetterNotFound(_) | StoreError::RetryNotFound(_) => {
            ApiError::new(StatusCode::NOT_FOUND, e.to_string())
        }
        StoreError::AlreadyHandled { .. } => ApiError::new(StatusCode::CONFLICT, e.to_string()),
        other => ApiError::internal(other.to_string()),
    }
}

/// Runs store work on a blocking thread, within the bounds of
/// [`STORE_WORK`](super::limits::STORE_WORK) (503 with `Retry-After` past them).
pub async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
) -> Result<T, ApiError> {
    super::limits::STORE_WORK
        .run(work)
        .await?
        .map_err(store_error)
}

/// `GET /v1/dead-letters?label=&biz=&code=&rule=&status=&since=&until=&overdue=&q=&limit=&before=`:
/// each letter as [`letter_json`] shows it, with `"overdue"` (open and older than its label's
/// SLA), newest first.
pub async fn list(
    State(state): State<AdminState>,
    query: Result<Query<ListQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let Query(q) = query.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let desk = desk(&state)?;
    let mut filter = q.filter.to_filter(&state, desk.as_ref())?;
    filter.limit = page_size(q.limit.as_deref(), MAX_PAGE)?;
    filter.before = number::<i64>("before", q.before.as_deref())?.map(DeadLetterId);
    // Each letter says whether it is overdue: open, and older than its label's SLA.
    let overdue = DeadLetterFilter {
        overdue: Some(rebound_runtime::durable::labels::overdue_cutoffs(
            &state.reloader.handle().current(),
            desk.time_scale(),
            Timestamp::now(),
        )),
        ..DeadLetterFilter::default()
    };
    desk.settle().await;
    let store = desk.store();
    let (page, total) = blocking(move || {
        let total = store.dead_letter_count(&filter)?;
        Ok((store.dead_letters(&filter)?, total))
    })
    .await?;
    let letters = page.items.iter().map(|d| {
        let mut letter = letter_json(d);
        letter["overdue"] = overdue.matches(d).into();
        letter
    });
    Ok(Json(json!({
        "dead_letters": letters.collect::<Vec<_>>(),
        "next": page.next.map(|n| n.0),
        "total": total,
    })))
}

/// `POST /v1/dead-letters/{id}/replay` with `{operator, reason}`.
pub async fn replay(OnOne { id, by, desk }: OnOne) -> Result<Json<Value>, ApiError> {
    let message = id.clone();
    let retry = blocking(move || one(desk.replay(&[message], &by)?)).await?;
    Ok(Json(
        json!({ "id": id.as_str(), "status": "replayed", "due_ms": retry.due.as_millis() }),
    ))
}

/// `POST /v1/dead-letters/{id}/skip` with `{operator, reason}`.
pub async fn skip(OnOne { id, by, desk }: OnOne) -> Result<Json<Value>, ApiError> {
    let letter = blocking(move || one(desk.skip(&[id], &by)?)).await?;
    Ok(Json(letter_json(&letter)))
}

/// The one answer of a bulk action on one id.
fn one<T>(mut each: Each<T>) -> Result<T, StoreError> {
    each.pop().unwrap_or(Err(StoreError::WriterClosed))
}
