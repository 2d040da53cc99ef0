//! What operators (and the runtime on a label's behalf) do to one message beyond replay and
//! skip: fire a scheduled retry now, kill it into a dead letter, redrive a letter, expire one.
//!
//! On a store of one's own the live retry queues are the authority on what is scheduled: a
//! command goes to the spout task that holds the retry (through its [`Inbox`]), which carries
//! it out between deliveries and answers with the message; the store follows through the
//! journal. On a shared store, or with no topology running, the store is the authority.

use std::sync::mpsc;
use std::time::Duration;

use super::queue::Command;
use super::{Durable, Inbox};
use crate::fate::{DeadLetter, GiveUpReason, Label, RuleRef};
use crate::store::{
    Applied, AuditAction, OperatorAction, Result, ScheduledRetry, StoreError, WriteOp, bulk_actions,
};
use crate::topology::{Failure, Message, MessageId};

/// How long an operator's command waits for the spout task that holds the retry.
const COMMAND_WAIT: Duration = Duration::from_secs(5);

/// The operator named in the audit log for what the runtime does itself (redrives, expiries).
pub const RUNTIME_OPERATOR: &str = "rebound";

impl Durable {
    /// Fires `id`'s scheduled retry now, keeping its attempt count; audited. Blocking.
    /// Refused ([`StoreError::RetryNotFound`]) if it is not scheduled (none, or being
    /// delivered).
    pub fn retry_now(&self, id: &str, operator: &str, reason: &str) -> Result<ScheduledRetry> {
        let id = MessageId::from(id);
        let action = OperatorAction::new(id.clone(), operator, reason, self.shared.time.wall())?;
        let at = action.at;
        if let Some(inbox) = self.live_inbox(&id) {
            let message = command(&inbox, &id, Command::Now)?;
            self.act(WriteOp::Audit(AuditAction::RetryNow, action))?
                .into_done(&id)?;
            return Ok(ScheduledRetry::new(message, at));
        }
        let retry = self
            .shared
            .store
            .retries(std::slice::from_ref(&id))?
            .pop()
            .ok_or_else(|| StoreError::RetryNotFound(id.clone()))?;
        self.act(WriteOp::RetryNow(action))?.into_done(&id)?;
        Ok(ScheduledRetry::new(retry.message, at))
    }

    /// Dead-letters `id`'s scheduled retry now, with reason `killed` and the label
    /// `label_of` gives its rule; audited. Blocking. Refused
    /// ([`StoreError::RetryNotFound`]) if it is not scheduled.
    pub fn kill(
        &self,
        id: &str,
        operator: &str,
        reason: &str,
        label_of: &dyn Fn(&RuleRef) -> Label,
    ) -> Result<DeadLetter> {
        let id = MessageId::from(id);
        let action = OperatorAction::new(id.clone(), operator, reason, self.shared.time.wall())?;
        let message = match self.live_inbox(&id) {
            Some(inbox) => command(&inbox, &id, Command::Take)?,
            None => {
                self.shared
                    .store
                    .retries(std::slice::from_ref(&id))?
                    .pop()
                    .ok_or_else(|| StoreError::RetryNotFound(id.clone()))?
                    .message
            }
        };
        let letter = killed(message, label_of, action.at);
        let mut applied = self.shared.journal.commit_blocking(vec![
            WriteOp::DeadLetter(Box::new(letter.clone())),
            WriteOp::Audit(AuditAction::Kill, action),
        ])?;
        let audited = applied.pop().ok_or(StoreError::WriterClosed)?;
        let stored = applied.pop().ok_or(StoreError::WriterClosed)?;
        stored.into_done(&id)?;
        audited.into_done(&id)?;
        self.announce(std::slice::from_ref(&letter));
        Ok(letter)
    }

    /// An action of the runtime's own on `id` (operator [`RUNTIME_OPERATOR`]), now.
    fn runtime_action(&self, id: &MessageId, reason: &str) -> Result<OperatorAction> {
        OperatorAction::new(
            id.clone(),
            RUNTIME_OPERATOR,
            reason,
            self.shared.time.wall(),
        )
    }

    /// Redrives `id`'s open dead letter for its label (`reason`, e.g. `redrive 1/3 (label
    /// L1)`): replayed as a fresh delivery that counts one more redrive, audited with operator
    /// [`RUNTIME_OPERATOR`]. Refused if the letter is no longer open. Blocking.
    pub fn redrive(&self, id: &MessageId, reason: &str) -> Result<ScheduledRetry> {
        let action = self.runtime_action(id, reason)?;
        self.replay_op(WriteOp::Redrive(action), id.clone())
    }

    /// Marks `id`'s open dead letter `expired` (`reason`, e.g. `expired after 30d (label
    /// L4)`), audited with operator [`RUNTIME_OPERATOR`]. Blocking.
    pub fn expire(&self, id: &MessageId, reason: &str) -> Result<()> {
        let action = self.runtime_action(id, reason)?;
        self.act(WriteOp::Expire(action))?.into_done(id)
    }

    /// Replays the open letters of `ids` in one commit (a bulk replay), each audited with
    /// `operator` and `reason`; each fresh delivery goes to its live queue. One answer per id,
    /// in order: the retry, or why that letter was not replayed. Blocking.
    pub fn replay_many(
        &self,
        ids: &[MessageId],
        operator: &str,
        reason: &str,
    ) -> Result<Vec<Result<ScheduledRetry>>> {
        let applied = self.commit_each(ids, operator, reason, WriteOp::Replay)?;
        Ok(ids
            .iter()
            .zip(applied)
            .map(|(id, a)| {
                let retry = a.into_replayed(id)?;
                if let Some(inbox) = self.live_inbox(id) {
                    inbox.push(retry.message.clone());
                }
                Ok(retry)
            })
            .collect())
    }

    /// Skips the open letters of `ids` in one commit (a bulk skip), each audited. One answer
    /// per id, in order. Blocking.
    pub fn skip_many(
        &self,
        ids: &[MessageId],
        operator: &str,
        reason: &str,
    ) -> Result<Vec<Result<crate::store::StoredDeadLetter>>> {
        let applied = self.commit_each(ids, operator, reason, WriteOp::Skip)?;
        Ok(ids
            .iter()
            .zip(applied)
            .map(|(id, a)| a.into_skipped(id).inspect(|letter| self.skipped(letter)))
            .collect())
    }

    /// Commits `op` for each of `ids` in one batch (nothing for none).
    fn commit_each(
        &self,
        ids: &[MessageId],
        operator: &str,
        reason: &str,
        op: fn(OperatorAction) -> WriteOp,
    ) -> Result<Vec<Applied>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let ops = bulk_actions(ids, operator, reason, self.shared.time.wall(), op)?;
        self.shared.journal.commit_blocking(ops)
    }

    /// The inbox of the live queue that holds `id`'s retry: on a store of one's own with a
    /// topology running.
    fn live_inbox(&self, id: &MessageId) -> Option<std::sync::Arc<Inbox>> {
        if self.is_shared() {
            return None;
        }
        self.inbox_of(id)
    }
}

/// Sends `command` to the spout task behind `inbox` and waits for its answer.
fn command(inbox: &Inbox, id: &MessageId, command: Command) -> Result<Message> {
    let (reply, answer) = mpsc::sync_channel(1);
    inbox.command(id.clone(), command, reply);
    match answer.recv_timeout(COMMAND_WAIT) {
        Ok(Some(message)) => Ok(message),
        Ok(None) => Err(StoreError::RetryNotFound(id.clone())),
        Err(_) => Err(StoreError::WriterClosed),
    }
}

/// The dead letter of a killed retry (its message, as scheduled): the failure it was waiting
/// to retry becomes the one that ended it; the rest of its history stays with the message.
pub fn killed(
    mut message: Message,
    label_of: &dyn Fn(&RuleRef) -> Label,
    at: crate::time::Timestamp,
) -> DeadLetter {
    let last = message.retry.failures.take_last();
    let (failure, rule, version) = match last {
        Some(l) => (
            Failure {
                code: l.code,
                message: l.message,
                retry_after: None,
                attrs: l.attrs,
            },
            l.rule,
            l.version,
        ),
        // A replayed letter waiting for its fresh delivery: it never failed since.
        None => (
            Failure::new("KILLED", "killed before its delivery"),
            RuleRef::Defaults,
            crate::fate::Version::from_hash(0),
        ),
    };
    DeadLetter {
        label: label_of(&rule),
        message,
        failure,
        reason: GiveUpReason::Killed,
        rule,
        version,
        at,
    }
}
