//! The `topology:` section: every knob of the runtime's topology [`Config`], each optional.

use super::parse;
use rebound_runtime::topology::Config;
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
