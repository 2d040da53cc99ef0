//! The shared vocabulary of a decision, which the runtime uses as it is: rule ids and
//! labels (interned names), the set's [`Version`], what decided ([`RuleRef`]), why a message
//! was not retried ([`GiveUpReason`]), and the answer ([`Decision`], [`Decided`]).
//!
//! Everything here is small and `Copy` or nearly so, and imports nothing from the rest of
//! the engine.

use serde::Serialize;
use std::fmt;
use std::time::Duration;

/// Interns `s`: every distinct rule id and label is stored once for the life of the
/// process, so the names a decision carries are plain `Copy` pointers, with no reference
/// count to touch on the hot path. The set of names is small and only grows when a rule
/// set with new names is loaded.
fn intern(s: &str) -> &'static str {
    static NAMES: std::sync::OnceLock<std::sync::Mutex<std::collections::HashSet<&'static str>>> =
        std::sync::OnceLock::new();
    let mut names = NAMES
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(known) = names.get(s) {
        return known;
    }
    let leaked: &'static str = Box::leak(s.to_owned().into_boxed_str());
    names.insert(leaked);
    leaked
}

/// The methods of an interned name.
macro_rules! interned_name {
    ($name:ident) => {
        impl $name {
            /// The text.
            pub fn as_str(&self) -> &'static str {
                self.0
            }
        }

        impl From<&str> for $name {
            fn from(s: &str) -> Self {
                $name(intern(s))
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.0)
            }
        }
    };
}

/// A rule's `id`, unique in its set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct RuleId(&'static str);
interned_name!(RuleId);

/// A dead-letter label (`L1`, `default`, …).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct Label(&'static str);
interned_name!(Label);
/// A rule set's version: a hash of its file names and bytes, as 16 lowercase hex digits.
///
/// It is `Copy` and holds no pointer, so carrying it with every decision costs nothing.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Version([u8; 16]);

impl Version {
    /// The version of a 64-bit content hash (a rule set's; a runtime's own decisions, such as
    /// a fixed policy's, use a constant one).
    pub fn from_hash(hash: u64) -> Version {
        let mut hex = [0u8; 16];
        for (i, b) in hex.iter_mut().enumerate() {
            let nibble = (hash >> (60 - 4 * i)) & 0xf;
            *b = b"0123456789abcdef"[nibble as usize];
        }
        Version(hex)
    }

    /// The 16 hex digits.
    pub fn as_str(&self) -> &str {
        std::str::from_utf8(&self.0).unwrap_or_default()
    }
}

/// A text that is not a rule-set version.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("'{0}' is not a rule-set version (16 lowercase hex digits)")]
pub struct NotAVersion(pub String);

impl std::str::FromStr for Version {
    type Err = NotAVersion;

    /// Parses 16 hex digits, as printed.
    fn from_str(s: &str) -> Result<Self, NotAVersion> {
        let ok = s.len() == 16
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        let hash = u64::from_str_radix(s, 16).ok().filter(|_| ok);
        hash.map(Version::from_hash)
            .ok_or_else(|| NotAVersion(s.to_owned()))
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Version({})", self.as_str())
    }
}

impl Serialize for Version {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// What decided: a rule, or the set's defaults.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum RuleRef {
    /// The first rule that matched.
    Rule(RuleId),
    /// No rule matched.
    Defaults,
}

impl RuleRef {
    /// The rule's id, or `"defaults"`.
    pub fn as_str(&self) -> &str {
        match self {
            RuleRef::Rule(id) => id.as_str(),
            RuleRef::Defaults => "defaults",
        }
    }
}

impl fmt::Display for RuleRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a message was not retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GiveUpReason {
    /// The rule says `give_up: true`.
    GiveUp,
    /// `attempt > max_retries`.
    MaxRetries,
    /// The retry would start after `max_elapsed`.
    MaxElapsed,
    /// The runtime's own: the failure policy itself failed (it panicked), so the message is
    /// kept as a dead letter to replay once the policy is fixed. `decide` never returns it.
    PolicyError,
    /// The runtime's own, on a shared store: the message's claim ran out again and again (a
    /// poison message that kills every node it lands on), so it is kept as a dead letter
    /// instead of being claimed once more. `decide` never returns it.
    CrashLoop,
    /// The runtime's own: an operator killed the scheduled retry (`POST /v1/retries/{id}/kill`),
    /// so it was dead-lettered at once with its rule's label. `decide` never returns it.
    Killed,
    /// The runtime's own: the rules would retry, but the failure's retry budget had no room
    /// and says `exhausted: dead_letter`. `decide` never returns it.
    Budget,
    /// The runtime's own: the source refused the message before its first delivery (a
    /// spout's `NextMessage::Refused`: a RabbitMQ message without a `message-id`), so it was
    /// dead-lettered at once, undelivered, with its rule's label. `decide` never returns it.
    Refused,
}

impl GiveUpReason {
    /// `give_up`, `max_retries`, `max_elapsed`, `policy_error`, `crash_loop`, `killed`,
    /// `budget` or `refused`.
    pub fn as_str(self) -> &'static str {
        match self {
            GiveUpReason::GiveUp => "give_up",
            GiveUpReason::MaxRetries => "max_retries",
            GiveUpReason::MaxElapsed => "max_elapsed",
            GiveUpReason::PolicyError => "policy_error",
            GiveUpReason::CrashLoop => "crash_loop",
            GiveUpReason::Killed => "killed",
            GiveUpReason::Budget => "budget",
            GiveUpReason::Refused => "refused",
        }
    }
}

impl fmt::Display for GiveUpReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The engine's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Deliver again after `delay`.
    Retry {
        /// How long to wait.
        delay: Duration,
        /// What decided.
        rule: RuleRef,
    },
    /// Stop and store the message under `label`.
    DeadLetter {
        /// Where it goes.
        label: Label,
        /// Why it was not retried.
        reason: GiveUpReason,
        /// What decided.
        rule: RuleRef,
    },
}

impl Decision {
    /// What decided.
    pub fn rule(&self) -> &RuleRef {
        match self {
            Decision::Retry { rule, .. } | Decision::DeadLetter { rule, .. } => rule,
        }
    }
}

/// A decision together with the version of the set that made it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decided {
    /// The answer.
    pub decision: Decision,
    /// The set that gave it.
    pub version: Version,
}
