//! The `receivers:` section: where `alert:` labels send their dead letters
//! (`docs/spec/operations.md`, "Dead-letter levels that act").

use super::parse::{self, HeaderName, HeaderValue};
use serde::{Deserialize, Deserializer};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// One receiver: a webhook that takes `POST {"dead_letters": [ … ]}`, or a Prometheus
/// Alertmanager that takes its `POST /api/v2/alerts`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Receiver {
    /// Its name, as `alert: NAME` labels name it (the key under `receivers:`).
    pub name: String,
    /// An `http://` or `https://` URL (checked to parse): the webhook's, or the Alertmanager's
    /// (its base URL; `/api/v2/alerts` is added unless the path already ends so).
    pub webhook: String,
    /// What the receiver speaks (`webhook:` or `alertmanager:` in the file).
    pub kind: ReceiverKind,
    /// Send each letter's payload too (`include_payload: true`): base64, at most
    /// [`PAYLOAD_AT_MOST`] bytes of it. Off by default: payloads may hold personal data.
    pub include_payload: bool,
    /// `ca_file`: the PEM file of the CA certificates an `https://` webhook's certificate is
    /// checked against (checked to hold one); `None`: the system's roots.
    pub ca_file: Option<PathBuf>,
    /// Headers added to every request (`X-Team: payments`), checked to be valid HTTP.
    pub headers: BTreeMap<String, String>,
}

/// What a receiver speaks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ReceiverKind {
    /// `POST {"dead_letters": [ … ]}` (`webhook: URL`).
    #[default]
    Webhook,
    /// A Prometheus Alertmanager (`alertmanager: URL`): `POST /api/v2/alerts`, one alert per
    /// letter.
    Alertmanager,
}

/// The most bytes of a payload a receiver with `include_payload` is sent.
pub const PAYLOAD_AT_MOST: usize = 4096;

/// Every receiver a configuration defines, by name. Empty when the file has none (or there is
/// no file).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Receivers(BTreeMap<String, Receiver>);

impl Receivers {
    /// Receivers from a list (a later one of the same name replaces an earlier one).
    pub fn new(receivers: impl IntoIterator<Item = Receiver>) -> Receivers {
        Receivers(receivers.into_iter().map(|r| (r.name.clone(), r)).collect())
    }

    /// The receiver called `name`.
    pub fn get(&self, name: &str) -> Option<&Receiver> {
        self.0.get(name)
    }

    /// Whether a receiver called `name` is defined (what a label's `alert:` must name).
    pub fn contains(&self, name: &str) -> bool {
        self.0.contains_key(name)
    }

    /// Every receiver, in name order.
    pub fn iter(&self) -> impl Iterator<Item = &Receiver> {
        self.0.values()
    }

    /// How many there are.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// A receiver as the file writes it, under its name.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    #[serde(default, deserialize_with = "webhook")]
    webhook: Option<String>,
    #[serde(default, deserialize_with = "webhook")]
    alertmanager: Option<String>,
    #[serde(default)]
    headers: BTreeMap<HeaderName, HeaderValue>,
    #[serde(default, deserialize_with = "parse::ca_file")]
    ca_file: Option<PathBuf>,
    #[serde(default)]
    include_payload: bool,
}

fn webhook<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    parse::webhook(d).map(Some)
}

/// A receiver's name: the key under `receivers:`.
#[derive(PartialEq, Eq, PartialOrd, Ord)]
struct Name(String);

impl<'de> Deserialize<'de> for Name {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Name, D::Error> {
        parse::checked_str(d, "a receiver name", |s| {
            if s.trim().is_empty() || s.contains(char::is_whitespace) {
                return Err(format!(
                    "bad receiver name {s:?}; expected a name without spaces, e.g. oncall"
                ));
            }
            Ok(Name(s.to_owned()))
        })
    }
}

impl<'de> Deserialize<'de> for Receivers {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Receivers, D::Error> {
        let entries = Option::<BTreeMap<Name, Entry>>::deserialize(d)?.unwrap_or_default();
        let mut receivers = Vec::with_capacity(entries.len());
        for (name, e) in entries {
            let (webhook, kind) = match (e.webhook, e.alertmanager) {
                (Some(url), None) => (url, ReceiverKind::Webhook),
                (None, Some(url)) => (url, ReceiverKind::Alertmanager),
                (Some(_), Some(_)) => {
                    return Err(serde::de::Error::custom(format!(
                        "receiver '{}' has both webhook: and alertmanager:; give one",
                        name.0
                    )));
                }
                (None, None) => {
                    return Err(serde::de::Error::custom(format!(
                        "receiver '{}' needs webhook: URL or alertmanager: URL",
                        name.0
                    )));
                }
            };
            receivers.push(Receiver {
                name: name.0,
                webhook,
                kind,
                include_payload: e.include_payload,
                ca_file: e.ca_file,
                headers: e.headers.into_iter().map(|(k, v)| (k.0, v.0)).collect(),
            });
        }
        Ok(Receivers::new(receivers))
    }
}

/// The errors of a rule set whose `alert:` labels name receivers `receivers` does not define,
/// each at the label's `alert` value, with the nearest defined name as help.
pub fn undefined_receivers(
    set: &rebound_engine::CompiledSet,
    receivers: &Receivers,
) -> Vec<rebound_engine::Diagnostic> {
    set.labels()
        .iter()
        .filter_map(|p| {
            let name = p.alert.as_deref()?;
            if receivers.contains(name) {
                return None;
            }
            let defined: Vec<&str> = receivers.iter().map(|r| r.name.as_str()).collect();
            let message = format!(
                "label '{}' alerts receiver '{name}', which the configuration does not define ({})",
                p.label,
                match defined.len() {
                    0 => "it defines no receivers: add one under `receivers:` in --config".to_owned(),
                    _ => format!("it defines {}", defined.join(", ")),
                }
            );
            let d = rebound_engine::Diagnostic::error(p.file.clone(), p.alert_pos.or(Some(p.pos)), message);
            Some(match defined.iter().min_by_key(|d| strsim::levenshtein(d, name)) {
                Some(near) if strsim::levenshtein(near, name) <= 3 => {
                    d.with_help(format!("did you mean '{near}'?"))
                }
                _ => d,
            })
        })
        .collect()
}
