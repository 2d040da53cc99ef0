//! The decision: what a failure is, what the engine answers, and the spec's seven steps.

use crate::backoff::Policy;
use crate::script::{RunError, ScriptEngine};
use rand::Rng;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

/// String attributes a failure carries.
pub type Attrs = BTreeMap<String, String>;
/// Numeric signals the runtime supplies (`fail_rate`, `retry_queue_depth`, …).
pub type Signals = BTreeMap<String, f64>;

static NO_ATTRS: Attrs = BTreeMap::new();
static NO_SIGNALS: Signals = BTreeMap::new();

/// Everything a decision looks at.
#[derive(Debug, Clone, Copy)]
pub struct FailureContext<'a> {
    /// Business type of the failed message.
    pub biz: &'a str,
    /// Error code of the failure.
    pub code: &'a str,
    /// The attempt that just failed, 1 for the first delivery.
    pub attempt: u32,
    /// Time since the first delivery began.
    pub elapsed: Duration,
    /// A delay the failure itself asks for (HTTP 429 `Retry-After`).
    pub retry_after: Option<Duration>,
    /// The delay chosen before the previous attempt (zero on the first failure).
    pub last_delay: Duration,
    /// String attributes of the failure.
    pub attrs: &'a Attrs,
    /// Signals from the runtime.
    pub signals: &'a Signals,
}

impl<'a> FailureContext<'a> {
    /// A failure of `biz`/`code` at `attempt`, with nothing else known.
    pub fn new(biz: &'a str, code: &'a str, attempt: u32) -> Self {
        FailureContext {
            biz,
            code,
            attempt,
            elapsed: Duration::ZERO,
            retry_after: None,
            last_delay: Duration::ZERO,
            attrs: &NO_ATTRS,
            signals: &NO_SIGNALS,
        }
    }

    /// The sample failure every expression is evaluated against at load.
    pub fn sample() -> FailureContext<'static> {
        FailureContext::new("SAMPLE", "SAMPLE", 1)
    }
}

/// A failure that owns its names and maps; [`context`](Self::context) borrows it as a
/// [`FailureContext`]. Handy where a failure is built, stored or generated before deciding.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OwnedFailure {
    /// Business type.
    pub biz: String,
    /// Error code.
    pub code: String,
    /// The attempt that failed.
    pub attempt: u32,
    /// Time since the first delivery began.
    pub elapsed: Duration,
    /// A delay the failure asks for.
    pub retry_after: Option<Duration>,
    /// The delay chosen before the previous attempt.
    pub last_delay: Duration,
    /// String attributes.
    pub attrs: Attrs,
    /// Runtime signals.
    pub signals: Signals,
}

impl OwnedFailure {
    /// The failure as the engine takes it.
    pub fn context(&self) -> FailureContext<'_> {
        FailureContext {
            biz: &self.biz,
            code: &self.code,
            attempt: self.attempt,
            elapsed: self.elapsed,
            retry_after: self.retry_after,
            last_delay: self.last_delay,
            attrs: &self.attrs,
            signals: &self.signals,
        }
    }
}

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

macro_rules! name_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
        #[serde(transparent)]
        pub struct $name(&'static str);

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

name_type!(
    /// A rule's `id`, unique in its set.
    RuleId
);
name_type!(
    /// A dead-letter label (`L1`, `default`, …).
    Label
);
/// A rule set's version: a hash of its file names and bytes, as 16 lowercase hex digits.
///
/// It is `Copy` and holds no pointer, so carrying it with every decision costs nothing.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Version([u8; 16]);

impl Version {
    /// The version of a 64-bit content hash.
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

impl std::str::FromStr for Version {
    type Err = String;

    /// Parses 16 hex digits, as printed.
    fn from_str(s: &str) -> Result<Self, String> {
        let ok = s.len() == 16
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        let hash = u64::from_str_radix(s, 16).ok().filter(|_| ok);
        hash.map(Version::from_hash)
            .ok_or_else(|| format!("'{s}' is not a rule-set version (16 lowercase hex digits)"))
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
}

impl GiveUpReason {
    /// `give_up`, `max_retries`, `max_elapsed` or `policy_error`.
    pub fn as_str(self) -> &'static str {
        match self {
            GiveUpReason::GiveUp => "give_up",
            GiveUpReason::MaxRetries => "max_retries",
            GiveUpReason::MaxElapsed => "max_elapsed",
            GiveUpReason::PolicyError => "policy_error",
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

/// The JSON shape of `rebound decide --json` and `POST /v1/decide`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DecisionReport {
    /// `retry` or `dead_letter`.
    pub action: &'static str,
    /// Delay in whole milliseconds, for a retry.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delay_ms: Option<u64>,
    /// Dead-letter label, for a dead letter.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dead_letter: Option<String>,
    /// `give_up`, `max_retries` or `max_elapsed`, for a dead letter.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<&'static str>,
    /// The deciding rule's id, or `defaults`.
    pub rule: String,
    /// The attempt that failed.
    pub attempt: u32,
    /// The set's version.
    pub version: String,
}

impl Decided {
    /// The JSON report of this decision for a failure at `attempt`.
    pub fn report(&self, attempt: u32) -> DecisionReport {
        let (action, delay_ms, dead_letter, reason) = match &self.decision {
            Decision::Retry { delay, .. } => {
                let ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX);
                ("retry", Some(ms), None, None)
            }
            Decision::DeadLetter { label, reason, .. } => (
                "dead_letter",
                None,
                Some(label.to_string()),
                Some(reason.as_str()),
            ),
        };
        DecisionReport {
            action,
            delay_ms,
            dead_letter,
            reason,
            rule: self.decision.rule().to_string(),
            attempt,
            version: self.version.to_string(),
        }
    }
}

/// The outcome of steps 3–7 for a policy: retry after a delay, or give up for a reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Paced {
    Retry(Duration),
    Stop(GiveUpReason),
}

impl Policy {
    /// Steps 3–7 of the decision procedure. Fails only when a delay script fails.
    pub(crate) fn pace<R: Rng + ?Sized>(
        &self,
        ctx: &FailureContext<'_>,
        rng: &mut R,
        scripts: &ScriptEngine,
    ) -> Result<Paced, RunError> {
        let r = ctx.attempt;
        if r > self.max_retries {
            return Ok(Paced::Stop(GiveUpReason::MaxRetries));
        }
        let d = self.backoff.kind.base_delay_ms(r, ctx, scripts)?;
        let mut delay = Duration::from_millis(self.backoff.jittered_ms(d, ctx.last_delay, rng));
        if self.respect_retry_after
            && let Some(asked) = ctx.retry_after
        {
            delay = delay.max(asked);
        }
        if let Some(limit) = self.max_elapsed
            && ctx.elapsed.saturating_add(delay) > limit
        {
            return Ok(Paced::Stop(GiveUpReason::MaxElapsed));
        }
        Ok(Paced::Retry(delay))
    }
}
