//! Bolts: the [`Bolt`] trait for the simple path (return `Ok` or `Err(Failure)`), and the
//! [`DeferredBolt`] trait with [`PendingTuple`] handles for batching and async work.

use std::cell::Cell;
use std::fmt;

use tokio::sync::mpsc::UnboundedSender;

use super::failure::{Failure, codes};
use super::tuple::{Anchors, Tuple, Values};

/// A bolt on the simple path: handle one tuple, return `Ok(())` to ack it or `Err(Failure)`
/// to fail it.
///
/// Tuples emitted through `out` are anchored to `input` and are sent only when `execute`
/// returns `Ok` — exactly as if the bolt returned `Ok(emits)`. There is no way to emit an
/// un-anchored tuple or to forget the ack. A panic fails `input` with code
/// [`PANIC`](codes::PANIC) and the task continues with a fresh instance from the factory.
///
/// ```
/// use rebound_runtime::topology::{Bolt, Emitter, Failure, Tuple};
/// struct Split;
/// impl Bolt for Split {
///     fn execute(&mut self, input: &Tuple, out: &mut Emitter<'_>) -> Result<(), Failure> {
///         let line = input.str("line").ok_or_else(|| Failure::new("BAD_INPUT", "no line"))?;
///         for word in line.split_whitespace() {
///             out.emit((word,));
///         }
///         Ok(())
///     }
/// }
/// ```
pub trait Bolt: Send + 'static {
    /// Handles one tuple.
    fn execute(&mut self, input: &Tuple, out: &mut Emitter<'_>) -> Result<(), Failure>;

    /// Called once when the task stops.
    fn cleanup(&mut self) {}
}

/// Collects the tuples a [`Bolt`] emits for one input. They are anchored to that input and
/// sent if, and only if, `execute` returns `Ok`.
pub struct Emitter<'a> {
    buf: &'a mut Vec<Values>,
    arity: usize,
}

impl<'a> Emitter<'a> {
    pub(crate) fn new(buf: &'a mut Vec<Values>, arity: usize) -> Emitter<'a> {
        Emitter { buf, arity }
    }

    /// Emits one tuple, anchored to the input.
    ///
    /// # Panics
    /// If the number of values differs from the component's declared output fields (a
    /// programming error; the panic fails the input with code `PANIC`).
    pub fn emit(&mut self, values: impl Into<Values>) {
        let values = values.into();
        check_arity(values.len(), self.arity);
        self.buf.push(values);
    }
}

fn check_arity(got: usize, declared: usize) {
    assert!(
        got == declared,
        "emitted {got} values but the component declares {declared} output fields"
    );
}

/// A bolt that takes ownership of each input as a [`PendingTuple`] and acks or fails it later:
/// when a batch is written, when async work finishes, when a window closes.
///
/// `tick` is called every `tick` interval set on the declarer (if any), so a batching bolt
/// can flush on time as well as on size. Keep the batch window well under `message_timeout`,
/// or the trees time out while they wait.
///
/// A handle that is dropped without `ack`/`fail` fails its tree at once with code
/// [`UNACKED`](codes::UNACKED), rather than leaving it to time out. A panic fails the input,
/// and every handle the old instance still held, with code [`PANIC`](codes::PANIC), and the
/// task continues with a fresh instance.
pub trait DeferredBolt: Send + 'static {
    /// Takes one tuple. Ack or fail the handle now or later, from this task or any other.
    fn execute(&mut self, input: PendingTuple);

    /// Called periodically if the bolt was declared with a tick interval.
    fn tick(&mut self) {}

    /// Called once when the task stops; handles still held are then dropped (and fail).
    fn cleanup(&mut self) {}
}

/// How a batch of handles ended, sent back to the bolt task that owns them.
pub(crate) struct Completion {
    pub(crate) parents: Vec<Anchors>,
    pub(crate) outcome: Result<Vec<Values>, Failure>,
}

thread_local! {
    /// Set while a task drops a bolt instance after a panic, so handles it held fail as PANIC.
    static RESTARTING: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f` (dropping a bolt instance after a panic) with handles failing as `PANIC`.
/// A boxed bolt is a bolt (the executor runs the bolts a topology declared this way).
impl Bolt for Box<dyn Bolt> {
    fn execute(&mut self, input: &Tuple, out: &mut Emitter<'_>) -> Result<(), Failure> {
        (**self).execute(input, out)
    }
    fn cleanup(&mut self) {
        (**self).cleanup()
    }
}

/// A boxed deferred bolt is a deferred bolt.
impl DeferredBolt for Box<dyn DeferredBolt> {
    fn execute(&mut self, input: PendingTuple) {
        (**self).execute(input)
    }
    fn tick(&mut self) {
        (**self).tick()
    }
    fn cleanup(&mut self) {
        (**self).cleanup()
    }
}

pub(crate) fn while_restarting<R>(f: impl FnOnce() -> R) -> R {
    RESTARTING.with(|r| r.set(true));
    let out = f();
    RESTARTING.with(|r| r.set(false));
    out
}

/// A tuple whose ack or fail is owed. It is `Send`, so it can move into a spawned task.
///
/// Consuming methods make a second ack impossible. Dropping it un-acked fails the tree with
/// code [`UNACKED`](codes::UNACKED) (or [`PANIC`](codes::PANIC) while unwinding from a panic),
/// so a forgotten ack shows up at once, with a clear code, instead of as a timeout.
///
/// Emit children *with* the ack ([`PendingTuple::ack_emitting`]): the ack and the children's
/// anchors are registered together, so async work cannot ack its input before its outputs
/// exist.
pub struct PendingTuple {
    tuple: Tuple,
    done: bool,
    arity: usize,
    tx: UnboundedSender<Completion>,
}

impl PendingTuple {
    pub(crate) fn new(tuple: Tuple, arity: usize, tx: UnboundedSender<Completion>) -> Self {
        PendingTuple {
            tuple,
            done: false,
            arity,
            tx,
        }
    }

    /// The tuple.
    pub fn tuple(&self) -> &Tuple {
        &self.tuple
    }

    /// Acks the tuple.
    pub fn ack(self) {
        self.ack_emitting(std::iter::empty::<Values>());
    }

    /// Acks the tuple and emits `emits`, each anchored to it.
    ///
    /// # Panics
    /// If a tuple's arity differs from the declared output fields.
    pub fn ack_emitting<V: Into<Values>>(mut self, emits: impl IntoIterator<Item = V>) {
        let emits = self.collect(emits);
        let parents = vec![self.take_anchors()];
        self.send(parents, Ok(emits));
    }

    /// Fails the tuple (and so its whole tree).
    pub fn fail(mut self, failure: Failure) {
        let parents = vec![self.take_anchors()];
        self.send(parents, Err(failure));
    }

    /// Acks several handles together and emits `emits`, each anchored to *all* of them (an
    /// aggregate: the output's tree completes only when every input's tree does). All handles
    /// must come from the same bolt component.
    ///
    /// # Panics
    /// If a tuple's arity differs from the declared output fields.
    pub fn ack_batch<V: Into<Values>>(
        handles: impl IntoIterator<Item = PendingTuple>,
        emits: impl IntoIterator<Item = V>,
    ) {
        let mut handles: Vec<PendingTuple> = handles.into_iter().collect();
        let Some(first) = handles.first() else {
            return;
        };
        let emits = first.collect(emits);
        let parents = handles.iter_mut().map(|h| h.take_anchors()).collect();
        handles[0].send(parents, Ok(emits));
    }

    /// Fails several handles with the same failure.
    pub fn fail_batch(handles: impl IntoIterator<Item = PendingTuple>, failure: Failure) {
        let mut handles: Vec<PendingTuple> = handles.into_iter().collect();
        if handles.is_empty() {
            return;
        }
        let parents = handles.iter_mut().map(|h| h.take_anchors()).collect();
        handles[0].send(parents, Err(failure));
    }

    fn collect<V: Into<Values>>(&self, emits: impl IntoIterator<Item = V>) -> Vec<Values> {
        emits
            .into_iter()
            .map(|v| {
                let v = v.into();
                check_arity(v.len(), self.arity);
                v
            })
            .collect()
    }

    fn take_anchors(&mut self) -> Anchors {
        self.done = true;
        std::mem::replace(&mut self.tuple.anchors, Anchors::empty())
    }

    fn send(&self, parents: Vec<Anchors>, outcome: Result<Vec<Values>, Failure>) {
        // The owning task is gone only during shutdown; the tree then times out, which is safe.
        let _ = self.tx.send(Completion { parents, outcome });
    }
}

impl Drop for PendingTuple {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let failure = if std::thread::panicking() || RESTARTING.with(Cell::get) {
            Failure::new(codes::PANIC, "the bolt panicked while it held this tuple")
        } else {
            Failure::new(
                codes::UNACKED,
                "the tuple handle was dropped without ack or fail",
            )
        };
        let parents = vec![self.take_anchors()];
        self.send(parents, Err(failure));
    }
}

impl fmt::Debug for PendingTuple {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PendingTuple")
            .field("tuple", &self.tuple)
            .finish_non_exhaustive()
    }
}
