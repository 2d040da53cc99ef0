//! The outbox of one task: routes emitted tuples through the groupings, gives every delivered
//! copy its edge id, and buffers tuples per target task and acker messages per acker, to send
//! them in batches.

use std::sync::Arc;

use rand::Rng;
use rand::rngs::SmallRng;
use tokio::sync::mpsc::Sender;

use crate::acker::{AckerMsg, acker_for};
use crate::topology::grouping::Route;
use crate::topology::tuple::{Anchors, Origin};
use crate::topology::{Failure, Fields, Tuple, Values};

pub(crate) struct Outbox {
    origin: &'static Origin,
    routes: Vec<Route>,
    /// Indexed by global bolt task; `Some` only for tasks this component feeds, so that a
    /// task's input closes once its own upstream tasks have stopped.
    senders: Vec<Option<Sender<Vec<Tuple>>>>,
    bufs: Vec<Vec<Tuple>>,
    /// Per target task, the size of its last batch: the next buffer is allocated at that size
    /// (a full `batch_size` buffer for a handful of tuples costs more than it saves).
    hints: Vec<usize>,
    dirty: Vec<usize>,
    ackers: Arc<[Sender<Vec<AckerMsg>>]>,
    acker_bufs: Vec<Vec<AckerMsg>>,
    acker_hints: Vec<usize>,
    buffered: usize,
    batch_size: usize,
    targets: Vec<usize>,
    rng: SmallRng,
}

impl Outbox {
    pub(crate) fn new(
        source: &'static str,
        fields: Fields,
        routes: Vec<Route>,
        senders: Vec<Option<Sender<Vec<Tuple>>>>,
        ackers: Arc<[Sender<Vec<AckerMsg>>]>,
        batch_size: usize,
    ) -> Outbox {
        Outbox {
            origin: Origin::new(source, fields),
            routes,
            bufs: senders.iter().map(|_| Vec::new()).collect(),
            hints: senders.iter().map(|_| 16).collect(),
            senders,
            dirty: Vec::new(),
            acker_bufs: ackers.iter().map(|_| Vec::new()).collect(),
            acker_hints: ackers.iter().map(|_| 16).collect(),
            ackers,
            buffered: 0,
            batch_size,
            targets: Vec::new(),
            rng: rand::make_rng(),
        }
    }

    /// A fresh random id (never 0, which would vanish from the XOR).
    pub(crate) fn random_id(&mut self) -> u64 {
        loop {
            let id = self.rng.next_u64();
            if id != 0 {
                return id;
            }
        }
    }

    /// Emits `values` anchored to every tree of every parent. For each delivered copy a new
    /// edge id per parent is XORed into that parent's `ack_vals` entry (it is reported with the
    /// parent's ack) and into the copy's anchors (reported with the copy's own ack).
    pub(crate) fn emit(&mut self, values: Values, parents: &[&Anchors], ack_vals: &mut [u64]) {
        // The common case — one subscriber, one task of it — without the target list.
        if let [route] = &mut self.routes[..]
            && let Some(task) = route.select_one(&values)
        {
            let anchors = self.anchor(parents, ack_vals);
            self.push(task, values, anchors);
            return;
        }
        self.targets.clear();
        for route in &mut self.routes {
            route.select(&values, &mut self.targets);
        }
        // Every target but the last gets a clone; the last gets `values` itself.
        let Some((&last, rest)) = self.targets.split_last() else {
            return;
        };
        for i in 0..rest.len() {
            let task = self.targets[i];
            let anchors = self.anchor(parents, ack_vals);
            self.push(task, values.clone(), anchors);
        }
        let anchors = self.anchor(parents, ack_vals);
        self.push(last, values, anchors);
    }

    /// The anchors of one delivered copy: a new edge id per parent, XORed into the parent's
    /// ack value and into the copy's entry for each of the parent's roots.
    #[inline(always)]
    fn anchor(&mut self, parents: &[&Anchors], ack_vals: &mut [u64]) -> Anchors {
        // The common case — one parent in one tree — without the general loop.
        if let ([Anchors::One { root, .. }], [ack_val]) = (parents, &mut *ack_vals) {
            let edge = self.random_id();
            *ack_val ^= edge;
            return Anchors::One {
                root: *root,
                val: edge,
            };
        }
        let mut anchors = Anchors::empty();
        for (parent, ack_val) in parents.iter().zip(ack_vals.iter_mut()) {
            let edge = self.random_id();
            *ack_val ^= edge;
            for root in parent.roots() {
                anchors.put_xor(root, edge);
            }
        }
        anchors
    }

    #[inline(always)]
    fn push(&mut self, task: usize, values: Values, anchors: Anchors) {
        let buf = &mut self.bufs[task];
        if buf.is_empty() {
            self.dirty.push(task);
            buf.reserve(self.hints[task]);
        }
        buf.push(Tuple {
            values,
            origin: self.origin,
            anchors,
        });
        self.buffered += 1;
    }

    /// Emits a spout's root tuple; returns the XOR of its edge ids (0 when no bolt subscribes).
    pub(crate) fn emit_root(&mut self, values: Values, root: u64) -> u64 {
        let mut xor = [0u64];
        self.emit(values, &[&Anchors::One { root, val: 0 }], &mut xor);
        xor[0]
    }

    /// Registers a spout's new tree with its acker.
    pub(crate) fn init(&mut self, root: u64, xor: u64, spout: u32) {
        self.push_acker(root, AckerMsg::Init { root, xor, spout });
    }

    /// Acks a tuple: for each of its trees, its own value XOR the edges it emitted.
    pub(crate) fn ack(&mut self, anchors: &Anchors, ack_val: u64) {
        // The common case — one tree — without the iterator.
        if let Anchors::One { root, val } = *anchors {
            self.push_acker(
                root,
                AckerMsg::Ack {
                    root,
                    xor: val ^ ack_val,
                },
            );
            return;
        }
        for (root, val) in anchors.iter() {
            self.push_acker(
                root,
                AckerMsg::Ack {
                    root,
                    xor: val ^ ack_val,
                },
            );
        }
    }

    /// Fails every tree of a tuple.
    pub(crate) fn fail(&mut self, anchors: &Anchors, failure: &Failure) {
        for root in anchors.roots() {
            self.push_acker(
                root,
                AckerMsg::Fail {
                    root,
                    failure: Box::new(failure.clone()),
                },
            );
        }
    }

    #[inline(always)]
    fn push_acker(&mut self, root: u64, msg: AckerMsg) {
        let i = acker_for(root, self.acker_bufs.len());
        let buf = &mut self.acker_bufs[i];
        if buf.capacity() == 0 {
            buf.reserve(self.acker_hints[i]);
        }
        buf.push(msg);
        self.buffered += 1;
    }

    /// True when a full batch is waiting.
    pub(crate) fn should_flush(&self) -> bool {
        self.buffered >= self.batch_size
    }

    /// Sends everything buffered. Waits while a target's channel is full: this is where
    /// backpressure reaches the task.
    pub(crate) async fn flush(&mut self) {
        for task in self.dirty.drain(..) {
            let buf = &mut self.bufs[task];
            self.hints[task] = buf.len();
            let batch = std::mem::take(buf);
            if let Some(tx) = &self.senders[task] {
                // A closed input means the topology is stopping; the tree then times out.
                let _ = tx.send(batch).await;
            }
        }
        for (i, buf) in self.acker_bufs.iter_mut().enumerate() {
            if buf.is_empty() {
                continue;
            }
            self.acker_hints[i] = buf.len();
            let batch = std::mem::take(buf);
            let _ = self.ackers[i].send(batch).await;
        }
        self.buffered = 0;
    }
}
