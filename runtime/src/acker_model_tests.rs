//! Unit tests: the XOR ledger against a plain model that keeps the set of created and acked edges.
//!
//! Random tuple trees are turned into the acker messages the runtime would send (the spout's
//! init, each tuple's ack carrying its children, fails), delivered in a random interleaving
//! across roots — so acks and fails often arrive before the init — with random duplicates and
//! late messages. At every step the ledger must decide a root exactly when the model says the
//! tree is decided, and each root gets exactly one terminal, timeouts included.

use std::collections::{BTreeMap, BTreeSet};

use super::{BUCKETS, Ledger, Terminal};
use crate::topology::{Failure, codes};
use proptest::prelude::*;
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{RngExt, SeedableRng};

#[derive(Clone, Debug)]
enum Msg {
    Init { edges: Vec<u64> },
    Ack { own: u64, children: Vec<u64> },
    Fail,
}

#[derive(Clone, Debug)]
struct Delivery {
    root: u64,
    msg: Msg,
    /// A repeat of a message already generated for this root.
    duplicate: bool,
}

#[derive(Default, Debug)]
struct Model {
    init: bool,
    failed: bool,
    created: BTreeSet<u64>,
    acked: BTreeSet<u64>,
    duplicated_ack: bool,
    terminals: usize,
}

impl Model {
    fn complete(&self) -> bool {
        self.init && !self.failed && self.created == self.acked
    }
}

fn xor(ids: &[u64]) -> u64 {
    ids.iter().fold(0, |a, b| a ^ b)
}

/// Generates one tree's messages in causal order.
fn tree(rng: &mut SmallRng, fail_p: f64, ids: &mut BTreeSet<u64>) -> Vec<Msg> {
    let mut fresh = |rng: &mut SmallRng| loop {
        let id: u64 = rng.random();
        if id != 0 && ids.insert(id) {
            return id;
        }
    };
    let roots: Vec<u64> = (0..rng.random_range(1..=3)).map(|_| fresh(rng)).collect();
    let mut msgs = vec![Msg::Init {
        edges: roots.clone(),
    }];
    let mut live: Vec<(u64, u32)> = roots.into_iter().map(|e| (e, 0)).collect();
    let mut budget: usize = 30;
    while let Some((edge, depth)) = live.pop() {
        if rng.random_bool(fail_p) {
            msgs.push(Msg::Fail);
            continue;
        }
        let n = if depth >= 3 || budget == 0 {
            0
        } else {
            rng.random_range(0..=3)
        };
        budget = budget.saturating_sub(n);
        let children: Vec<u64> = (0..n).map(|_| fresh(rng)).collect();
        live.extend(children.iter().map(|c| (*c, depth + 1)));
        msgs.push(Msg::Ack {
            own: edge,
            children,
        });
    }
    msgs
}

fn apply(ledger: &mut Ledger, root: u64, msg: &Msg) -> Option<Terminal> {
    match msg {
        Msg::Init { edges } => ledger.init(root, xor(edges), (root % 7) as u32),
        Msg::Ack { own, children } => ledger.ack(root, own ^ xor(children)),
        Msg::Fail => ledger.fail(root, Box::new(Failure::new("BOOM", "injected"))),
    }
}

fn run(seed: u64, roots: usize, fail_p: f64, dup_p: f64, lost_init_p: f64) {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut ids = BTreeSet::new();
    let mut deliveries = Vec::new();
    let mut lost_init = BTreeSet::new();
    for r in 0..roots as u64 {
        let root = 1000 + r;
        let msgs = tree(&mut rng, fail_p, &mut ids);
        // A lost init stands for a spout that died before registering the tree.
        let drop_init = rng.random_bool(lost_init_p);
        if drop_init {
            lost_init.insert(root);
        }
        for m in &msgs {
            if matches!(m, Msg::Init { .. }) && drop_init {
                continue;
            }
            deliveries.push(Delivery {
                root,
                msg: m.clone(),
                duplicate: false,
            });
            // Duplicates of acks and fails (never of the init: the spout sends it once).
            if !matches!(m, Msg::Init { .. }) && rng.random_bool(dup_p) {
                deliveries.push(Delivery {
                    root,
                    msg: m.clone(),
                    duplicate: true,
                });
            }
        }
    }
    deliveries.shuffle(&mut rng);

    let mut ledger = Ledger::new();
    let mut model: BTreeMap<u64, Model> = BTreeMap::new();
    for d in &deliveries {
        let m = model.entry(d.root).or_default();
        let decided_before = m.terminals > 0;
        match &d.msg {
            Msg::Init { edges } => {
                m.init = true;
                m.created.extend(edges);
            }
            Msg::Ack { own, children } => {
                if d.duplicate {
                    m.duplicated_ack = true;
                }
                m.acked.insert(*own);
                m.created.extend(children);
            }
            Msg::Fail => m.failed = true,
        }
        let got = apply(&mut ledger, d.root, &d.msg);
        if decided_before {
            assert_eq!(got, None, "a decided root is decided again: {d:?}");
            continue;
        }
        match got {
            Some(Terminal::Acked { root, .. }) => {
                assert_eq!(root, d.root);
                assert!(
                    m.complete(),
                    "acked while the model has outstanding edges: {m:?}"
                );
                m.terminals += 1;
            }
            Some(Terminal::Failed { root, failure, .. }) => {
                assert_eq!(root, d.root);
                assert!(m.init && m.failed, "failed without init and fail: {m:?}");
                assert_eq!(failure.code, "BOOM");
                m.terminals += 1;
            }
            None => {
                assert!(!(m.init && m.failed), "init and fail seen but not decided");
                // A duplicated ack cancels itself in the XOR: such a tree never completes
                // (it times out below), which is safe. Without duplicates, the ledger must
                // complete exactly when the model does.
                if !m.duplicated_ack {
                    assert!(!m.complete(), "model complete but the ledger is not: {m:?}");
                }
            }
        }
    }

    // Late acks and fails for decided roots are ignored.
    for (root, m) in &model {
        if m.terminals > 0 {
            assert_eq!(ledger.ack(*root, 0xDEAD), None);
            assert_eq!(ledger.fail(*root, Box::new(Failure::new("LATE", ""))), None);
        }
    }

    // Everything undecided times out, once; entries without an init never produce anything.
    let mut expired = Vec::new();
    for _ in 0..BUCKETS {
        ledger.rotate(&mut expired);
    }
    for t in &expired {
        let Terminal::Failed { root, failure, .. } = t else {
            panic!("rotation produced {t:?}")
        };
        assert_eq!(failure.code, codes::TIMEOUT);
        let m = model.get_mut(root).expect("known root");
        assert!(m.init, "timed out a root whose init never came");
        m.terminals += 1;
    }
    for (root, m) in &model {
        let expected = usize::from(!lost_init.contains(root));
        assert_eq!(m.terminals, expected, "root {root}: {m:?}");
    }
    assert!(ledger.is_empty(), "rotation leaves nothing behind");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn ledger_decides_exactly_when_the_model_does(
        seed in any::<u64>(),
        roots in 1usize..8,
        fail_p in prop_oneof![Just(0.0), 0.0f64..0.3],
        dup_p in prop_oneof![Just(0.0), 0.0f64..0.2],
        lost_init_p in prop_oneof![Just(0.0), Just(0.2)],
    ) {
        run(seed, roots, fail_p, dup_p, lost_init_p);
    }
}

#[test]
fn many_large_interleavings_without_faults_all_complete() {
    for seed in 0..200 {
        run(seed, 12, 0.0, 0.0, 0.0);
    }
}
