//! The store as the alert dispatcher's backlog: the open letters of the labels that alert a
//! receiver, dead-lettered within a deferral's window, read back a page at a time (newest
//! first, as the store pages them), in the form the dispatcher is sent them.

use std::sync::Arc;

use rebound_engine::PolicyHandle;
use rebound_runtime::store::{DeadLetterFilter, DeadLetterId, DeadLetterStatus, Store};
use rebound_runtime::time::Timestamp;
use serde_json::Value;

use crate::alerts::{AlertBacklog, BacklogCursor, BacklogPage, Deferral};

/// Reads deferred letters from `store`, by the labels of the set in force in `rules`.
pub struct StoreBacklog {
    store: Arc<dyn Store>,
    rules: Arc<PolicyHandle>,
}

impl std::fmt::Debug for StoreBacklog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreBacklog")
            .field("store", &self.store.location())
            .finish_non_exhaustive()
    }
}

impl StoreBacklog {
    /// The backlog of the letters in `store`.
    pub fn new(store: Arc<dyn Store>, rules: Arc<PolicyHandle>) -> StoreBacklog {
        StoreBacklog { store, rules }
    }
}

impl AlertBacklog for StoreBacklog {
    /// The cursor's part is the label's place among the receiver's labels, and `from` the row
    /// to read below.
    fn page(
        &self,
        receiver: &str,
        window: &Deferral,
        cursor: Option<BacklogCursor>,
        limit: usize,
    ) -> Result<BacklogPage, String> {
        let set = self.rules.current();
        let labels: Vec<String> = set
            .labels()
            .iter()
            .filter(|p| p.alert.as_deref() == Some(receiver))
            .map(|p| p.label.as_str().to_owned())
            .collect();
        let (mut at, mut before) = cursor.map_or((0, None), |c| (c.part, c.from.map(DeadLetterId)));
        while let Some(label) = labels.get(at) {
            let page = self
                .store
                .dead_letters(&DeadLetterFilter {
                    label: Some(label.clone()),
                    status: Some(DeadLetterStatus::Dead),
                    since: Some(Timestamp::from_millis(window.from_ms)),
                    until: Some(Timestamp::from_millis(window.to_ms.saturating_add(1))),
                    before,
                    limit: limit.clamp(1, rebound_runtime::store::MAX_PAGE),
                    ..DeadLetterFilter::default()
                })
                .map_err(|e| e.to_string())?;
            let letters: Vec<Value> = page
                .items
                .iter()
                .map(|d| crate::json::stored_letter_json(d, false))
                .collect();
            match page.next {
                Some(next) => {
                    return Ok(BacklogPage {
                        letters,
                        next: Some(BacklogCursor {
                            part: at,
                            from: Some(next.0),
                        }),
                    });
                }
                None if !letters.is_empty() => {
                    let next = (at + 1 < labels.len()).then_some(BacklogCursor {
                        part: at + 1,
                        from: None,
                    });
                    return Ok(BacklogPage { letters, next });
                }
                None => {
                    at += 1;
                    before = None;
                }
            }
        }
        Ok(BacklogPage::default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rebound_engine::{SourceFile, compile};
    use rebound_runtime::fate::{DeadLetter, GiveUpReason, Label, RuleRef, Version};
    use rebound_runtime::store::{OperatorAction, SqliteStore, WriteOp};
    use rebound_runtime::topology::{Failure, Message, MessageId};

    fn letter(n: u64, label: &str) -> WriteOp {
        let mut message = Message::new(format!("order-{n:04}"), "ORDER", "{}");
        message.retry.attempt = 2;
        message.retry.first_delivery = Some(Timestamp::from_millis(1));
        WriteOp::DeadLetter(Box::new(DeadLetter {
            message,
            failure: Failure::new("DB_LOCK_WAIT", "locked"),
            label: Label::from(label),
            reason: GiveUpReason::MaxRetries,
            rule: RuleRef::Rule("db-lock".into()),
            version: Version::from_hash(0x0123_4567_89ab_cdef),
            at: Timestamp::from_millis(1_000 + n),
        }))
    }

    fn ids(page: &BacklogPage) -> Vec<String> {
        page.letters
            .iter()
            .map(|l| l["id"].as_str().unwrap().to_owned())
            .collect()
    }

    #[test]
    fn reads_the_open_letters_of_the_receivers_labels_within_the_window_page_by_page() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(SqliteStore::open(dir.path()).unwrap());
        // L1 and L2 alert oncall, L3 alerts no one; letters 0..30 over the three.
        let mut ops: Vec<WriteOp> = (0..30)
            .map(|n| letter(n, ["L1", "L2", "L3"][n as usize % 3]))
            .collect();
        // An operator handled order-0012 (L1) already: it is not sent again.
        ops.push(WriteOp::Skip(
            OperatorAction::new(
                MessageId::from("order-0012"),
                "ops",
                "handled",
                Timestamp::from_millis(2_000),
            )
            .unwrap(),
        ));
        store.apply(&ops).unwrap();
        let yaml = "version: 1\nlabels:\n  L1: { alert: oncall }\n  L2: { alert: oncall }\n  L3: { sla: 1h }\n";
        let set = compile(vec![SourceFile::new("l.yaml", "l.yaml", yaml)]).unwrap();
        let backlog = StoreBacklog::new(store, Arc::new(PolicyHandle::new(set)));
        // The window: letters 5 to 20.
        let window = Deferral {
            from_ms: 1_005,
            to_ms: 1_020,
            letters: 16,
        };
        let mut seen = Vec::new();
        let mut cursor = None;
        let mut pages = 0;
        loop {
            let page = backlog.page("oncall", &window, cursor, 4).unwrap();
            assert!(page.letters.len() <= 4);
            assert!(page.letters.iter().all(|l| l["status"] == "dead"));
            seen.extend(ids(&page));
            pages += 1;
            match page.next {
                Some(next) => cursor = Some(next),
                None => break,
            }
            assert!(pages < 20, "paging ends");
        }
        seen.sort();
        let expected: Vec<String> = (5..=20)
            .filter(|n| n % 3 != 2 && *n != 12)
            .map(|n| format!("order-{n:04}"))
            .collect();
        assert_eq!(seen, expected);
        // A receiver no label alerts has no backlog.
        let none = backlog.page("nobody", &window, None, 4).unwrap();
        assert!(none.letters.is_empty() && none.next.is_none());
    }
}
