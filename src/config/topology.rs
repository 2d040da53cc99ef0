//! The `topology:` section: every knob of the runtime's topology [`Config`], each optional.

use super::parse;
use rebound_runtime::topology::{Config, OnDeadLetter, Ordered};
use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, Visitor};
use std::fmt;
use std::time::Duration;

/// What `topology:` sets; `None` keeps the runtime's default ([`Config::default`]).
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Topology {
    /// A tuple tree not completed within this time fails with `TIMEOUT` (in the rules' time:
    /// `--time-scale` divides it).
    #[serde(default, deserialize_with = "parse::duration")]
    pub message_timeout: Option<Duration>,
    /// At most this many trees in flight per spout task.
    #[serde(default, deserialize_with = "parse::at_least_one")]
    pub max_spout_pending: Option<usize>,
    /// Acker tasks.
    #[serde(default, deserialize_with = "parse::at_least_one")]
    pub ackers: Option<usize>,
    /// At most this many due retries per new message (0: new messages always go first).
    #[serde(default)]
    pub retry_mix: Option<u32>,
    /// The retry fuse, or `off`.
    #[serde(default)]
    pub fuse: Option<Fuse>,
    /// Capacity of each task's input channel, in batches.
    #[serde(default, deserialize_with = "parse::at_least_one")]
    pub channel_capacity: Option<usize>,
    /// Most tuples sent to one task in one batch.
    #[serde(default, deserialize_with = "parse::at_least_one")]
    pub batch_size: Option<usize>,
    /// How long a spout task waits after its spout was idle before asking again.
    #[serde(default, deserialize_with = "parse::duration")]
    pub spout_idle_wait: Option<Duration>,
    /// Ordered keys: the biz types whose keys keep their order through retries, or `all`.
    #[serde(default)]
    pub ordered: Option<OrderedSetting>,
    /// What a dead letter does to its key's later messages: `continue` or `block`.
    #[serde(default)]
    pub on_dead_letter: Option<OnDeadLetterSetting>,
    /// At most this many messages held behind their keys, per spout task.
    #[serde(default, deserialize_with = "parse::at_least_one")]
    pub max_held: Option<usize>,
    /// The largest payload a message may have (default 1 MiB); a larger one is a dead letter
    /// with code `PAYLOAD_TOO_LARGE`.
    #[serde(default, deserialize_with = "parse::bytes")]
    pub max_payload: Option<usize>,
}

/// `ordered:`: `all`, or a list of biz types (`[]`: none).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OrderedSetting(pub Ordered);

/// `on_dead_letter:` as the file writes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnDeadLetterSetting {
    /// The next message of the key goes on once the letter is stored.
    Continue,
    /// The key stays blocked until an operator replays or skips the letter.
    Block,
}

/// `fuse:`: `off`, or the settings that differ from the defaults.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Fuse {
    /// `fuse: off`: retries are never held back.
    Off,
    /// `fuse: { window, threshold, min_samples }`, each optional.
    On {
        /// The sliding window the failure rate is measured over (in the rules' time).
        window: Option<Duration>,
        /// The failed share (`0.5` for `50%`) at which the fuse opens.
        threshold: Option<f64>,
        /// Fewer finished trees than this in the window never open the fuse.
        min_samples: Option<u64>,
    },
}

impl Topology {
    /// `config` with what this section sets.
    pub fn apply(&self, mut config: Config) -> Config {
        set(&mut config.message_timeout, self.message_timeout);
        set(&mut config.max_spout_pending, self.max_spout_pending);
        set(&mut config.ackers, self.ackers);
        set(&mut config.channel_capacity, self.channel_capacity);
        set(&mut config.batch_size, self.batch_size);
        set(&mut config.spout_idle_wait, self.spout_idle_wait);
        if let Some(n) = self.retry_mix {
            config.retry_mix.retries_per_new = n;
        }
        if let Some(OrderedSetting(ordered)) = &self.ordered {
            config.ordering.ordered = ordered.clone();
        }
        if let Some(on) = self.on_dead_letter {
            config.ordering.on_dead_letter = match on {
                OnDeadLetterSetting::Continue => OnDeadLetter::Continue,
                OnDeadLetterSetting::Block => OnDeadLetter::Block,
            };
        }
        set(&mut config.ordering.max_held, self.max_held);
        set(&mut config.max_payload, self.max_payload);
        match self.fuse {
            None => {}
            Some(Fuse::Off) => config.fuse.enabled = false,
            Some(Fuse::On {
                window,
                threshold,
                min_samples,
            }) => {
                config.fuse.enabled = true;
                set(&mut config.fuse.window, window);
                set(&mut config.fuse.threshold, threshold);
                set(&mut config.fuse.min_samples, min_samples);
            }
        }
        config
    }
}

/// `slot` becomes `value`, if there is one.
fn set<T>(slot: &mut T, value: Option<T>) {
    if let Some(v) = value {
        *slot = v;
    }
}

/// The fields of `fuse: { … }`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FuseFields {
    #[serde(default, deserialize_with = "parse::duration")]
    window: Option<Duration>,
    #[serde(default, deserialize_with = "parse::share")]
    threshold: Option<f64>,
    #[serde(default)]
    min_samples: Option<u64>,
}

impl<'de> Deserialize<'de> for Fuse {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Fuse, D::Error> {
        struct FuseVisitor;
        impl<'de> Visitor<'de> for FuseVisitor {
            type Value = Fuse;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("'off' or a mapping { window, threshold, min_samples }")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Fuse, E> {
                match s.trim() {
                    "off" => Ok(Fuse::Off),
                    other => Err(E::invalid_value(de::Unexpected::Str(other), &self)),
                }
            }
            fn visit_bool<E: de::Error>(self, on: bool) -> Result<Fuse, E> {
                if on {
                    return Err(E::invalid_value(de::Unexpected::Bool(true), &self));
                }
                Ok(Fuse::Off)
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Fuse, A::Error> {
                let fields = FuseFields::deserialize(de::value::MapAccessDeserializer::new(map))?;
                Ok(Fuse::On {
                    window: fields.window,
                    threshold: fields.threshold,
                    min_samples: fields.min_samples,
                })
            }
        }
        d.deserialize_any(FuseVisitor)
    }
}

impl<'de> Deserialize<'de> for OrderedSetting {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<OrderedSetting, D::Error> {
        struct OrderedVisitor;
        impl<'de> Visitor<'de> for OrderedVisitor {
            type Value = OrderedSetting;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("'all' or a list of biz types, e.g. [ORDER, PAYMENT]")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<OrderedSetting, E> {
                match s.trim() {
                    "all" => Ok(OrderedSetting(Ordered::All)),
                    other => Err(E::invalid_value(de::Unexpected::Str(other), &self)),
                }
            }
            fn visit_seq<A: de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<OrderedSetting, A::Error> {
                let mut biz: Vec<std::sync::Arc<str>> = Vec::new();
                while let Some(name) = seq.next_element::<BizName>()? {
                    biz.push(name.0.into());
                }
                Ok(OrderedSetting(if biz.is_empty() {
                    Ordered::None
                } else {
                    Ordered::Biz(biz)
                }))
            }
        }
        d.deserialize_any(OrderedVisitor)
    }
}

/// One biz type of `ordered: [...]`: a name without spaces.
struct BizName(String);

impl<'de> Deserialize<'de> for BizName {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<BizName, D::Error> {
        parse::checked_str(d, "a biz type, e.g. ORDER", |s| {
            if s.is_empty() || s.chars().any(char::is_whitespace) {
                Err(format!("'{s}' is not a biz type (a name without spaces)"))
            } else {
                Ok(BizName(s.to_owned()))
            }
        })
    }
}
