//! [`TopologyBuilder`]: declare spouts and bolts with their parallelism and groupings, then
//! [`build`](TopologyBuilder::build) a validated [`Topology`].

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use super::config::Config;
use super::grouping::Grouping;
use super::message::ROOT_FIELDS;
use super::tuple::{Fields, intern};
use super::{Bolt, DeferredBolt, Spout, TaskInfo};

/// Makes a spout task's spout. (The builder erases the user's types, so that the topology,
/// a description, knows nothing of the executor that runs it.)
pub(crate) type SpoutFactory = Arc<dyn Fn(&TaskInfo) -> Box<dyn Spout> + Send + Sync>;

/// Makes a bolt task's [`Bolt`].
pub(crate) type MakeBolt = Arc<dyn Fn(&TaskInfo) -> Box<dyn Bolt> + Send + Sync>;
/// Makes a bolt task's [`DeferredBolt`].
pub(crate) type MakeDeferred = Arc<dyn Fn(&TaskInfo) -> Box<dyn DeferredBolt> + Send + Sync>;

/// Makes a bolt task's bolt, on the simple or the deferred path.
#[derive(Clone)]
pub(crate) enum BoltFactory {
    /// A [`Bolt`].
    Simple(MakeBolt),
    /// A [`DeferredBolt`].
    Deferred(MakeDeferred),
}

/// Why a topology could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BuildError {
    /// A topology needs at least one spout.
    #[error("the topology has no spout")]
    NoSpout,
    /// Component names must be non-empty.
    #[error("a component has an empty name")]
    EmptyName,
    /// Two components share a name.
    #[error("component `{0}` is declared twice")]
    DuplicateName(String),
    /// Parallelism must be at least 1.
    #[error("component `{0}` has parallelism 0; it needs at least 1 task")]
    ZeroParallelism(String),
    /// A bolt with no input would never run.
    #[error("bolt `{0}` has no input; add a grouping such as `.shuffle(\"source\")`")]
    NoInput(String),
    /// A grouping names a component that does not exist.
    #[error("bolt `{bolt}` reads from `{source_name}`, which is not declared")]
    UnknownSource {
        /// The bolt.
        bolt: String,
        /// The missing source.
        source_name: String,
    },
    /// A fields grouping names a field its source does not declare.
    #[error(
        "bolt `{bolt}` groups `{source_name}` by field `{field}`, but `{source_name}` declares only {declared:?}"
    )]
    UnknownField {
        /// The bolt.
        bolt: String,
        /// The source.
        source_name: String,
        /// The missing field.
        field: String,
        /// The source's fields.
        declared: Vec<String>,
    },
    /// A fields grouping with no fields.
    #[error("bolt `{bolt}` has a fields grouping on `{source_name}` with no fields")]
    EmptyFieldsGrouping {
        /// The bolt.
        bolt: String,
        /// The source.
        source_name: String,
    },
    /// A component declares the same output field twice.
    #[error("component `{component}` declares output field `{field}` twice")]
    DuplicateField {
        /// The component.
        component: String,
        /// The field.
        field: String,
    },
    /// Bolts feed each other in a cycle; with bounded channels a cycle can deadlock.
    #[error("bolts form a cycle through `{0}`; a topology must be acyclic")]
    Cycle(String),
    /// A config value is out of range.
    #[error("invalid config: {0}")]
    InvalidConfig(String),
}

pub(crate) struct SpoutDecl {
    pub(crate) name: &'static str,
    pub(crate) parallelism: usize,
    pub(crate) factory: SpoutFactory,
}

/// A bolt being declared: set its output fields, inputs and tick interval.
pub struct BoltDeclarer {
    pub(crate) name: String,
    pub(crate) parallelism: usize,
    pub(crate) output: Vec<String>,
    pub(crate) inputs: Vec<(String, Grouping)>,
    pub(crate) tick: Option<Duration>,
    pub(crate) factory: BoltFactory,
}

impl BoltDeclarer {
    /// Declares the names of the fields this bolt emits (default: none — a sink).
    pub fn output<I, S>(&mut self, fields: I) -> &mut Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.output = fields.into_iter().map(Into::into).collect();
        self
    }
    /// Reads `source` with any grouping.
    pub fn grouping(&mut self, source: &str, grouping: Grouping) -> &mut Self {
        self.inputs.push((source.to_owned(), grouping));
        self
    }
    /// Reads `source`, spread evenly over this bolt's tasks.
    pub fn shuffle(&mut self, source: &str) -> &mut Self {
        self.grouping(source, Grouping::Shuffle)
    }
    /// Reads `source`; tuples with equal `keys` go to the same task.
    pub fn fields<I, S>(&mut self, source: &str, keys: I) -> &mut Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let keys = keys.into_iter().map(Into::into).collect();
        self.grouping(source, Grouping::Fields(keys))
    }
    /// Reads `source`; every task gets every tuple.
    pub fn all(&mut self, source: &str) -> &mut Self {
        self.grouping(source, Grouping::All)
    }
    /// Reads `source`; one task gets everything.
    pub fn global(&mut self, source: &str) -> &mut Self {
        self.grouping(source, Grouping::Global)
    }
    /// Calls [`DeferredBolt::tick`] this often (ignored for simple bolts).
    pub fn tick(&mut self, every: Duration) -> &mut Self {
        self.tick = Some(every);
        self
    }
}

/// Declares a topology.
///
/// ```
/// use rebound_runtime::topology::*;
/// # struct Numbers(u64);
/// # impl Spout for Numbers {
/// #     fn next(&mut self) -> NextMessage { NextMessage::Exhausted }
/// #     fn ack(&mut self, _: &MessageId) {}
/// #     fn dead_lettered(&mut self, _: &MessageId) {}
/// # }
/// # struct Parse;
/// # impl Bolt for Parse {
/// #     fn execute(&mut self, _: &Tuple, _: &mut Emitter<'_>) -> Result<(), Failure> { Ok(()) }
/// # }
/// let mut b = TopologyBuilder::new("orders");
/// b.spout("source", 1, |_| Numbers(0));
/// b.bolt("parse", 2, |_| Parse).output(["order", "amount"]).shuffle("source");
/// b.bolt("store", 2, |_| Parse).fields("parse", ["order"]);
/// let topology = b.build().expect("a valid topology");
/// ```
pub struct TopologyBuilder {
    name: String,
    config: Config,
    spouts: Vec<SpoutDecl>,
    spout_names: Vec<String>,
    bolts: Vec<BoltDeclarer>,
}

impl TopologyBuilder {
    /// A new, empty topology with the default [`Config`].
    pub fn new(name: &str) -> TopologyBuilder {
        TopologyBuilder {
            name: name.to_owned(),
            config: Config::default(),
            spouts: Vec::new(),
            spout_names: Vec::new(),
            bolts: Vec::new(),
        }
    }

    /// Sets the runtime config.
    pub fn config(&mut self, config: Config) -> &mut Self {
        self.config = config;
        self
    }

    /// Declares a spout with `parallelism` tasks; `factory` makes one instance per task. Its
    /// root tuples have the fields [`ROOT_FIELDS`]: `id`, `biz`, `payload`, `headers`,
    /// `attempt`, `key`, `first_delivery`.
    pub fn spout<S, F>(&mut self, name: &str, parallelism: usize, factory: F) -> &mut Self
    where
        S: Spout,
        F: Fn(&TaskInfo) -> S + Send + Sync + 'static,
    {
        let factory: SpoutFactory = Arc::new(move |info: &TaskInfo| Box::new(factory(info)));
        self.spout_names.push(name.to_owned());
        self.spouts.push(SpoutDecl {
            name: intern(name),
            parallelism,
            factory,
        });
        self
    }

    /// Declares a simple-path [`Bolt`] with `parallelism` tasks; `factory` makes one instance
    /// per task, and a new one after a panic.
    pub fn bolt<B, F>(&mut self, name: &str, parallelism: usize, factory: F) -> &mut BoltDeclarer
    where
        B: Bolt,
        F: Fn(&TaskInfo) -> B + Send + Sync + 'static,
    {
        let factory = BoltFactory::Simple(Arc::new(move |info: &TaskInfo| Box::new(factory(info))));
        self.declare_bolt(name, parallelism, factory)
    }

    /// Declares a [`DeferredBolt`] (handles acked or failed later) with `parallelism` tasks.
    pub fn deferred_bolt<B, F>(
        &mut self,
        name: &str,
        parallelism: usize,
        factory: F,
    ) -> &mut BoltDeclarer
    where
        B: DeferredBolt,
        F: Fn(&TaskInfo) -> B + Send + Sync + 'static,
    {
        let factory =
            BoltFactory::Deferred(Arc::new(move |info: &TaskInfo| Box::new(factory(info))));
        self.declare_bolt(name, parallelism, factory)
    }

    fn declare_bolt(
        &mut self,
        name: &str,
        parallelism: usize,
        factory: BoltFactory,
    ) -> &mut BoltDeclarer {
        self.bolts.push(BoltDeclarer {
            name: name.to_owned(),
            parallelism,
            output: Vec::new(),
            inputs: Vec::new(),
            tick: None,
            factory,
        });
        let last = self.bolts.len() - 1;
        &mut self.bolts[last]
    }

    /// Checks the declarations and the config.
    pub fn build(self) -> Result<Topology, BuildError> {
        let cfg = &self.config;
        let bad = |m: &str| Err(BuildError::InvalidConfig(m.to_owned()));
        if cfg.message_timeout.is_zero() {
            return bad("message_timeout must be positive");
        }
        if cfg.max_spout_pending == 0 || cfg.max_spout_pending >= 1 << 24 {
            return bad("max_spout_pending must be between 1 and 16777215");
        }
        if cfg.ackers == 0 {
            return bad("ackers must be at least 1");
        }
        if cfg.channel_capacity == 0 || cfg.batch_size == 0 {
            return bad("channel_capacity and batch_size must be at least 1");
        }
        if !(cfg.fuse.threshold > 0.0 && cfg.fuse.threshold <= 1.0) || cfg.fuse.window.is_zero() {
            return bad("fuse.threshold must be in (0, 1] and fuse.window positive");
        }
        if self.spouts.is_empty() {
            return Err(BuildError::NoSpout);
        }
        // Output fields of every component, by name.
        let mut outputs: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        let root_fields: Vec<String> = ROOT_FIELDS.iter().map(|s| s.to_string()).collect();
        let names = self
            .spout_names
            .iter()
            .map(|n| (n, root_fields.clone()))
            .chain(self.bolts.iter().map(|b| (&b.name, b.output.clone())));
        for (name, fields) in names {
            if name.is_empty() {
                return Err(BuildError::EmptyName);
            }
            if outputs.insert(name, fields.clone()).is_some() {
                return Err(BuildError::DuplicateName(name.clone()));
            }
            let mut seen = BTreeSet::new();
            for f in &fields {
                if !seen.insert(f) {
                    return Err(BuildError::DuplicateField {
                        component: name.clone(),
                        field: f.clone(),
                    });
                }
            }
        }
        for (name, par) in self
            .spout_names
            .iter()
            .zip(self.spouts.iter().map(|s| s.parallelism))
            .chain(self.bolts.iter().map(|b| (&b.name, b.parallelism)))
        {
            if par == 0 {
                return Err(BuildError::ZeroParallelism(name.clone()));
            }
        }
        for b in &self.bolts {
            if b.inputs.is_empty() {
                return Err(BuildError::NoInput(b.name.clone()));
            }
            for (source, grouping) in &b.inputs {
                let Some(fields) = outputs.get(source.as_str()) else {
                    return Err(BuildError::UnknownSource {
                        bolt: b.name.clone(),
                        source_name: source.clone(),
                    });
                };
                if let Grouping::Fields(keys) = grouping {
                    if keys.is_empty() {
                        return Err(BuildError::EmptyFieldsGrouping {
                            bolt: b.name.clone(),
                            source_name: source.clone(),
                        });
                    }
                    for k in keys {
                        if !fields.contains(k) {
                            return Err(BuildError::UnknownField {
                                bolt: b.name.clone(),
                                source_name: source.clone(),
                                field: k.clone(),
                                declared: fields.clone(),
                            });
                        }
                    }
                }
            }
        }
        // Cycle check: depth-first over bolt → its bolt inputs.
        let index: BTreeMap<&str, usize> = self
            .bolts
            .iter()
            .enumerate()
            .map(|(i, b)| (b.name.as_str(), i))
            .collect();
        let mut state = vec![0u8; self.bolts.len()]; // 0 new, 1 on stack, 2 done
        fn visit(
            i: usize,
            bolts: &[BoltDeclarer],
            index: &BTreeMap<&str, usize>,
            state: &mut [u8],
        ) -> Result<(), BuildError> {
            match state[i] {
                1 => return Err(BuildError::Cycle(bolts[i].name.clone())),
                2 => return Ok(()),
                _ => {}
            }
            state[i] = 1;
            for (source, _) in &bolts[i].inputs {
                if let Some(&j) = index.get(source.as_str()) {
                    visit(j, bolts, index, state)?;
                }
            }
            state[i] = 2;
            Ok(())
        }
        for i in 0..self.bolts.len() {
            visit(i, &self.bolts, &index, &mut state)?;
        }
        let bolts = self
            .bolts
            .into_iter()
            .map(|b| BoltDecl {
                name: intern(&b.name),
                parallelism: b.parallelism,
                fields: Fields::new(&b.output),
                inputs: b.inputs,
                tick: b.tick,
                factory: b.factory,
            })
            .collect();
        Ok(Topology {
            name: self.name,
            config: self.config,
            spouts: self.spouts,
            bolts,
        })
    }
}

pub(crate) struct BoltDecl {
    pub(crate) name: &'static str,
    pub(crate) parallelism: usize,
    pub(crate) fields: Fields,
    pub(crate) inputs: Vec<(String, Grouping)>,
    pub(crate) tick: Option<Duration>,
    pub(crate) factory: BoltFactory,
}

/// A validated topology, ready to [`start`](Topology::start).
pub struct Topology {
    pub(crate) name: String,
    pub(crate) config: Config,
    pub(crate) spouts: Vec<SpoutDecl>,
    pub(crate) bolts: Vec<BoltDecl>,
}

impl Topology {
    /// The topology's name.
    pub fn name(&self) -> &str {
        &self.name
    }
    /// Its config.
    pub fn config(&self) -> &Config {
        &self.config
    }
}
