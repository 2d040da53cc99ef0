//! The two [`DeadLetterDesk`]s. Over a plain store ([`StoreDesk`]) an action is written to the
//! store, whose scheduled retry the runtime picks up. Over a running topology's durable layer
//! ([`DurableDesk`]: any topology's, the bundled pipeline's too) an action goes through the
//! journal and acts on the live retry queues at once, and a read waits for the journal first.

use std::sync::Arc;

use rebound_runtime::durable::Durable;
use rebound_runtime::fate::{BoxFuture, DeadLetter};
use rebound_runtime::store::{
    self, AuditAction, MessageId, OperatorAction, ScheduledRetry, Store, StoreError,
    StoredDeadLetter, WriteOp,
};
use rebound_runtime::time::{TimeScale, Timestamp};

use super::action::Actor;
use super::dead_letters::{DeadLetterDesk, Each, LabelOf};

/// A desk over a store alone: every action is written to the store.
#[derive(Clone)]
pub struct StoreDesk(pub Arc<dyn Store>);

impl std::fmt::Debug for StoreDesk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StoreDesk")
    }
}

impl StoreDesk {
    fn each<T>(
        &self,
        ids: &[MessageId],
        by: &Actor,
        op: fn(OperatorAction) -> WriteOp,
        answer: fn(store::Applied, &MessageId) -> Result<T, StoreError>,
    ) -> Result<Each<T>, StoreError> {
        let ops = store::bulk_actions(ids, &by.operator, &by.reason, Timestamp::now(), op)?;
        let applied = self.0.apply(&ops)?;
        Ok(ids
            .iter()
            .zip(applied)
            .map(|(id, a)| answer(a, id))
            .collect())
    }

    /// The action `by` takes on `id` now, and `id`'s scheduled retry (refused,
    /// [`StoreError::RetryNotFound`], when it has none).
    fn on_retry(
        &self,
        id: &MessageId,
        by: &Actor,
    ) -> Result<(OperatorAction, ScheduledRetry), StoreError> {
        let action = OperatorAction::new(id.clone(), &by.operator, &by.reason, Timestamp::now())?;
        let retry = self
            .0
            .retries(std::slice::from_ref(id))?
            .pop()
            .ok_or_else(|| StoreError::RetryNotFound(id.clone()))?;
        Ok((action, retry))
    }
}

impl DeadLetterDesk for StoreDesk {
    fn store(&self) -> Arc<dyn Store> {
        self.0.clone()
    }

    fn replay(&self, ids: &[MessageId], by: &Actor) -> store::Result<Each<ScheduledRetry>> {
        self.each(ids, by, WriteOp::Replay, |a, id| a.into_replayed(id))
    }

    fn skip(&self, ids: &[MessageId], by: &Actor) -> store::Result<Each<StoredDeadLetter>> {
        self.each(ids, by, WriteOp::Skip, |a, id| a.into_skipped(id))
    }

    fn retry_now(&self, id: &MessageId, by: &Actor) -> store::Result<ScheduledRetry> {
        let (action, mut retry) = self.on_retry(id, by)?;
        let at = action.at;
        let mut applied = self.0.apply(&[WriteOp::RetryNow(action)])?;
        applied
            .pop()
            .ok_or(StoreError::WriterClosed)?
            .into_done(id)?;
        retry.due = at;
        Ok(retry)
    }

    fn kill(&self, id: &MessageId, by: &Actor, labels: &LabelOf<'_>) -> store::Result<DeadLetter> {
        let (action, retry) = self.on_retry(id, by)?;
        let letter = rebound_runtime::durable::killed(retry.message, labels, action.at);
        let applied = self.0.apply(&[
            WriteOp::DeadLetter(Box::new(letter.clone())),
            WriteOp::Audit(AuditAction::Kill, action),
        ])?;
        for a in applied {
            a.into_done(id)?;
        }
        Ok(letter)
    }
}

/// A desk over a running topology's durable layer; see the [module docs](self).
#[derive(Clone, Debug)]
pub struct DurableDesk {
    durable: Durable,
    scale: TimeScale,
}

impl DurableDesk {
    /// The desk of the topology `durable` serves, whose rules run at `scale`.
    pub fn new(durable: Durable, scale: TimeScale) -> DurableDesk {
        DurableDesk { durable, scale }
    }
}

impl DeadLetterDesk for DurableDesk {
    fn store(&self) -> Arc<dyn Store> {
        self.durable.store().clone()
    }

    fn settle(&self) -> BoxFuture<'_, ()> {
        Box::pin(self.durable.journal().flush())
    }

    fn time_scale(&self) -> TimeScale {
        self.scale
    }

    fn unwritable(&self) -> Option<(rebound_runtime::time::Timestamp, String)> {
        self.durable.journal().failing()
    }

    fn replay(&self, ids: &[MessageId], by: &Actor) -> store::Result<Each<ScheduledRetry>> {
        self.durable.replay_many(ids, &by.operator, &by.reason)
    }

    fn skip(&self, ids: &[MessageId], by: &Actor) -> store::Result<Each<StoredDeadLetter>> {
        self.durable.skip_many(ids, &by.operator, &by.reason)
    }

    fn retry_now(&self, id: &MessageId, by: &Actor) -> store::Result<ScheduledRetry> {
        self.durable
            .retry_now(id.as_str(), &by.operator, &by.reason)
    }

    fn kill(&self, id: &MessageId, by: &Actor, labels: &LabelOf<'_>) -> store::Result<DeadLetter> {
        self.durable
            .kill(id.as_str(), &by.operator, &by.reason, labels)
    }
}
