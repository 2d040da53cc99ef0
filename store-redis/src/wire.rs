//! What goes over the wire to the scripts and back: the journal's ops as the flat `ARGV` of
//! `apply.lua` (its header documents the layout), and the scripts' answers and hashes as
//! [`Applied`] answers and records. The records' fields are the runtime's (`rebound_runtime::store::fields`,
//! SQLite's columns by name); nothing here encodes a message or a letter of its own.
//!
//! Integers a script compares or uses as a sorted-set score (due times, positions) are Lua
//! numbers, doubles: they are exact up to 2^53 (year 285,000 in milliseconds), and larger ones
//! are refused here, before anything is sent ([`StoreError::OutOfRange`]).

use std::borrow::Cow;
use std::collections::HashMap;

use redis::Value;

use crate::StreamCustody;

use rebound_runtime::store::fields::{
    DeadLetterFields, MESSAGE_FIELDS, OPTIONAL_MESSAGE_FIELDS, RetryFields,
    dead_letter_from_fields, replayed_delivery, retry_from_fields,
};
use rebound_runtime::store::{
    Applied, DeadLetterStatus, Fate, Message, MessageId, Offset, OffsetOf, OperatorAction,
    PRUNE_AT_MOST, Result, ScheduledRetry, StoreError, StoredDeadLetter, WriteOp,
};
use rebound_runtime::time::Timestamp;

/// Ops per `apply.lua` call. A script runs alone on the server, so a call is kept to about a
/// millisecond; a larger batch is several calls, in order.
pub(super) const OPS_PER_CALL: usize = 500;

/// Logged decisions per `apply.lua` call: each costs the server a few microseconds (its entry
/// built and pushed), so a call of them stays about a millisecond too.
pub(super) const DECISIONS_PER_CALL: usize = 200;

/// One op of a call, and the index of the op of the batch it answers for.
pub(super) type CallOp<'a> = (usize, Cow<'a, WriteOp>);

/// `ops` as the `apply.lua` calls that apply them, in order: at most [`OPS_PER_CALL`] ops and
/// [`DECISIONS_PER_CALL`] logged decisions a call. A log of more decisions than a call takes
/// is split into logs of a call's share, each trimming to the same `keep` (which ends as the
/// one log would: the newest `keep`), all answering for the one op.
pub(super) fn calls(ops: &[WriteOp]) -> Vec<Vec<CallOp<'_>>> {
    let logged = |op: &WriteOp| match op {
        WriteOp::LogDecisions { decisions, .. } => decisions.len(),
        _ => 0,
    };
    let mut calls = Vec::new();
    let mut call: Vec<CallOp<'_>> = Vec::new();
    let mut in_call = 0;
    for (i, op) in ops.iter().enumerate() {
        let pieces = match op {
            WriteOp::LogDecisions { decisions, keep } if decisions.len() > DECISIONS_PER_CALL => {
                decisions
                    .chunks(DECISIONS_PER_CALL)
                    .into_iter()
                    .map(|share| {
                        Cow::Owned(WriteOp::LogDecisions {
                            decisions: share,
                            keep: *keep,
                        })
                    })
                    .collect()
            }
            _ => vec![Cow::Borrowed(op)],
        };
        for piece in pieces {
            let n = logged(&piece);
            if !call.is_empty() && (call.len() == OPS_PER_CALL || in_call + n > DECISIONS_PER_CALL)
            {
                calls.push(std::mem::take(&mut call));
                in_call = 0;
            }
            in_call += n;
            call.push((i, piece));
        }
    }
    if !call.is_empty() {
        calls.push(call);
    }
    calls
}

/// The largest integer a script compares exactly (a Lua number is a double).
pub(super) const MAX_EXACT: u64 = 1 << 53;

/// One `apply.lua` call's `ARGV`.
pub(super) type Args = Vec<Vec<u8>>;

/// Appends `op` to `args` in `apply.lua`'s layout; `offset_of` names a message's source and
/// position, for a schedule's and a dead letter's (an acked fate carries its own). Fails
/// (writing nothing) on a value the store cannot hold.
pub(super) fn encode_op(op: &WriteOp, offset_of: Option<&OffsetOf>, args: &mut Args) -> Result<()> {
    let offset = |m: &Message| offset_of.and_then(|f| f(m));
    match op {
        WriteOp::Schedule(retry) => {
            let row = RetryFields::encode(retry)?;
            let token = retry.claim.map(|t| t.get().to_string());
            args.push(b"S".to_vec());
            args.push(retry.message.id.as_str().as_bytes().to_vec());
            args.push(token.unwrap_or_default().into_bytes());
            args.push(exact("due", retry.due)?.into_bytes());
            push_offset(args, offset(&retry.message).as_ref())?;
            pairs(args, |put| row.for_each(put));
        }
        WriteOp::Acked { id, at, offset } => {
            args.push(b"A".to_vec());
            args.push(id.as_str().as_bytes().to_vec());
            push_offset(args, offset.as_ref())?;
            args.push(exact("at", *at)?.into_bytes());
        }
        WriteOp::PruneFates { before } => {
            args.push(b"F".to_vec());
            args.push(exact("before", *before)?.into_bytes());
            args.push(PRUNE_AT_MOST.to_string().into_bytes());
        }
        WriteOp::DeadLetter(dl) => {
            let row = DeadLetterFields::encode(dl)?;
            args.push(b"D".to_vec());
            args.push(dl.message.id.as_str().as_bytes().to_vec());
            push_offset(args, offset(&dl.message).as_ref())?;
            pairs(args, |put| row.for_each(put));
        }
        WriteOp::Position {
            source,
            position,
            at: _,
        } => {
            args.push(b"P".to_vec());
            args.push(source.as_bytes().to_vec());
            args.push(exact_int("position", *position)?.into_bytes());
        }
        WriteOp::Replay(action) | WriteOp::Redrive(action) => {
            // The fresh row but the message's content and its redrives, which the script
            // copies from the letter (a redrive adds one).
            let redrive = matches!(op, WriteOp::Redrive(_));
            let template =
                replayed_delivery(Message::new(action.id.clone(), "", ""), action.at, false);
            let row = RetryFields::encode(&template)?;
            action_args(b"R", action, args)?;
            args.push(if redrive {
                b"1".to_vec()
            } else {
                b"0".to_vec()
            });
            pairs(args, |put| {
                row.for_each(|field, value| {
                    if !MESSAGE_FIELDS.contains(&field) && field != "redrives" {
                        put(field, value)
                    }
                })
            });
            let copied = MESSAGE_FIELDS.len() + OPTIONAL_MESSAGE_FIELDS.len();
            args.push(copied.to_string().into_bytes());
            args.extend(MESSAGE_FIELDS.iter().map(|f| f.as_bytes().to_vec()));
            args.extend(
                OPTIONAL_MESSAGE_FIELDS
                    .iter()
                    .map(|f| format!("?{f}").into_bytes()),
            );
        }
        WriteOp::Skip(action) => action_args(b"K", action, args)?,
        WriteOp::Expire(action) => action_args(b"E", action, args)?,
        WriteOp::RetryNow(action) => action_args(b"N", action, args)?,
        WriteOp::Audit(kind, action) => {
            action_args(b"U", action, args)?;
            args.push(kind.as_str().as_bytes().to_vec());
        }
        WriteOp::LogDecisions { decisions, keep } => {
            args.push(b"L".to_vec());
            // XTRIM takes a signed 64-bit count; more than that keeps everything anyway.
            args.push(keep.min(&(i64::MAX as u64)).to_string().into_bytes());
            args.push(decisions.len().to_string().into_bytes());
            for (now_ms, text) in decisions.iter() {
                args.push(now_ms.to_string().into_bytes());
                args.push(text.as_bytes().to_vec());
            }
        }
    }
    Ok(())
}

/// Appends the custody acks of `ops` to `args` (`X group n entry…`, no answer of its own):
/// the entries of `custody.stream` whose message a schedule or a dead letter of `ops` takes
/// into the store's custody. None, nothing appended.
pub(super) fn encode_custody<'a>(
    custody: &StreamCustody,
    ops: impl IntoIterator<Item = &'a WriteOp>,
    args: &mut Args,
) {
    let entries: Vec<&[u8]> = ops
        .into_iter()
        .filter_map(|op| match op {
            WriteOp::Schedule(retry) => Some(&retry.message.id),
            WriteOp::DeadLetter(dl) => Some(&dl.message.id),
            _ => None,
        })
        .filter_map(|id| {
            let entry = id.as_str().strip_prefix(custody.stream.as_str())?;
            entry.strip_prefix('/').map(str::as_bytes)
        })
        .collect();
    if entries.is_empty() {
        return;
    }
    args.push(b"X".to_vec());
    args.push(custody.group.as_bytes().to_vec());
    args.push(entries.len().to_string().into_bytes());
    args.extend(entries.into_iter().map(<[u8]>::to_vec));
}

/// A message's source and position, or two empty arguments when it has no offset.
fn push_offset(args: &mut Args, offset: Option<&Offset>) -> Result<()> {
    match offset {
        Some(o) => {
            args.push(o.source.as_bytes().to_vec());
            args.push(exact_int("offset", o.position)?.into_bytes());
        }
        None => {
            args.push(Vec::new());
            args.push(Vec::new());
        }
    }
    Ok(())
}

fn action_args(tag: &[u8], a: &OperatorAction, args: &mut Args) -> Result<()> {
    args.push(tag.to_vec());
    args.push(a.id.as_str().as_bytes().to_vec());
    args.push(exact("now", a.at)?.into_bytes());
    args.push(a.operator.as_bytes().to_vec());
    args.push(a.reason.as_bytes().to_vec());
    Ok(())
}

/// Appends a count and the field/value pairs `each` hands out.
fn pairs(args: &mut Args, each: impl FnOnce(&mut dyn FnMut(&'static str, &[u8]))) {
    let count_at = args.len();
    args.push(Vec::new());
    let mut count = 0usize;
    each(&mut |field, value| {
        args.push(field.as_bytes().to_vec());
        args.push(value.to_vec());
        count += 1;
    });
    args[count_at] = count.to_string().into_bytes();
}

/// A time a script scores by, in decimal.
fn exact(what: &'static str, t: Timestamp) -> Result<String> {
    exact_int(what, t.as_millis())
}

/// An integer a script compares or scores by, in decimal.
fn exact_int(what: &'static str, v: u64) -> Result<String> {
    if v > MAX_EXACT {
        return Err(StoreError::OutOfRange {
            what,
            value: v.into(),
            max: MAX_EXACT,
        });
    }
    Ok(v.to_string())
}

// ---- answers -------------------------------------------------------------------------------

/// `apply.lua`'s answer to one op.
pub(super) fn applied(answer: Value) -> Result<Applied> {
    let mut items = array(answer)?.into_iter();
    let tag = text(items.next())?;
    Ok(match tag.as_str() {
        "done" => Applied::Done,
        "stale" => Applied::Stale,
        "known" => Applied::FateAlreadyKnown(fate(items.next())?),
        "nodl" => Applied::NoDeadLetter,
        "noretry" => Applied::NoRetry,
        "handled" => {
            let status = text(items.next())?;
            Applied::AlreadyHandled(
                DeadLetterStatus::parse(&status)
                    .ok_or_else(|| corrupt("dead_letters", "status", status))?,
            )
        }
        "replayed" => Applied::Replayed(Box::new(retry(&Fields::from_pairs(items)?)?)),
        "skipped" => {
            let n = int(items.next())?;
            Applied::Skipped(Box::new(dead_letter(n, &Fields::from_pairs(items)?)?))
        }
        "corrupt" => return Err(corrupt("dead_letters", "message", text(items.next())?)),
        other => return Err(bad_reply(format!("unknown answer {other:?}"))),
    })
}

/// A fate as a script or `GET` answers it.
pub(super) fn fate(v: Option<Value>) -> Result<Fate> {
    match text(v)?.as_str() {
        "acked" => Ok(Fate::Acked),
        "dead" => Ok(Fate::DeadLettered),
        other => Err(corrupt("fates", "fate", other)),
    }
}

/// A retry from its row's fields.
pub(super) fn retry(fields: &Fields) -> Result<ScheduledRetry> {
    retry_from_fields(|name| fields.get(name))
}

/// Dead letter `n` from its fields.
pub(super) fn dead_letter(n: i64, fields: &Fields) -> Result<StoredDeadLetter> {
    dead_letter_from_fields(n, |name| fields.get(name))
}

/// A hash's fields, as `HGETALL` (or a script) answers them.
#[derive(Debug, Default)]
pub(super) struct Fields(HashMap<String, Vec<u8>>);

impl Fields {
    /// The fields of a flat field/value array (RESP2) or a map (RESP3).
    pub(super) fn from_value(v: Value) -> Result<Fields> {
        match v {
            Value::Map(pairs) => pairs
                .into_iter()
                .map(|(k, v)| Ok((text(Some(k))?, bytes(Some(v))?)))
                .collect::<Result<_>>()
                .map(Fields),
            other => Fields::from_pairs(array(other)?.into_iter()),
        }
    }

    fn from_pairs(mut items: impl Iterator<Item = Value>) -> Result<Fields> {
        let mut map = HashMap::new();
        while let Some(field) = items.next() {
            let field = text(Some(field))?;
            let value = bytes(items.next())?;
            map.insert(field, value);
        }
        Ok(Fields(map))
    }

    /// True if the hash had no fields (it does not exist).
    pub(super) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The value of `field`.
    pub(super) fn get(&self, field: &str) -> Option<&[u8]> {
        self.0.get(field).map(Vec::as_slice)
    }
}

// ---- values --------------------------------------------------------------------------------

/// A value the store holds that does not decode: `what` in `table`.
/// [`StoreError::corrupt`], as the decoders here write it.
pub(crate) fn corrupt(
    table: &'static str,
    what: &'static str,
    detail: impl std::fmt::Display,
) -> StoreError {
    StoreError::corrupt(table, what, detail)
}

/// A reply the scripts or commands cannot have given.
pub(super) fn bad_reply(detail: impl std::fmt::Display) -> StoreError {
    corrupt("redis", "reply", detail)
}

pub(super) fn array(v: Value) -> Result<Vec<Value>> {
    match v {
        Value::Array(items) | Value::Set(items) => Ok(items),
        other => Err(bad_reply(format!("expected an array, got {other:?}"))),
    }
}

pub(super) fn bytes(v: Option<Value>) -> Result<Vec<u8>> {
    match v {
        Some(Value::BulkString(b)) => Ok(b),
        Some(Value::SimpleString(s)) => Ok(s.into_bytes()),
        Some(Value::Int(n)) => Ok(n.to_string().into_bytes()),
        other => Err(bad_reply(format!("expected a string, got {other:?}"))),
    }
}

pub(super) fn text(v: Option<Value>) -> Result<String> {
    String::from_utf8(bytes(v)?).map_err(bad_reply)
}

pub(super) fn int(v: Option<Value>) -> Result<i64> {
    match v {
        Some(Value::Int(n)) => Ok(n),
        other => {
            let t = text(other)?;
            t.parse()
                .map_err(|_| bad_reply(format!("expected an integer, got {t:?}")))
        }
    }
}

/// A millisecond time or score (`"1700000000000"`, or a score Redis printed as a double).
pub(super) fn millis(v: Option<Value>) -> Result<Timestamp> {
    let t = text(v)?;
    let ms = t
        .parse::<u64>()
        .ok()
        .or_else(|| {
            t.parse::<f64>()
                .ok()
                .filter(|f| *f >= 0.0)
                .map(|f| f as u64)
        })
        .ok_or_else(|| bad_reply(format!("expected milliseconds, got {t:?}")))?;
    Ok(Timestamp::from_millis(ms))
}

/// A message id as a script answers it.
pub(super) fn message_id(v: Option<Value>) -> Result<MessageId> {
    text(v).map(MessageId::from)
}
