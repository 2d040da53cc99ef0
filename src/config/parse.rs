//! The values of a configuration file, checked while serde reads them.
//!
//! Each checker is a `deserialize_with` function (or a `Deserialize` impl) that raises a
//! serde error on a bad value from inside its visitor: serde_yaml marks such an error with
//! the place of the scalar it is visiting, so the engine's YAML diagnostics
//! ([`deserialize_yaml`]) report it as `FILE:LINE:COL: error: …` with no second pass over
//! positions. (An error raised after the visitor returned would be marked at the enclosing
//! mapping instead, hence [`checked_str`] rather than `String::deserialize` and a check.)
//!
//! [`deserialize_yaml`]: rebound_engine::load::deserialize_yaml

use serde::Deserialize;
use serde::de::{self, Deserializer, Visitor};
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

/// A scalar read as text and checked by `check` inside the visitor (so the error is marked at
/// the scalar). `expecting` says what was expected when the value is not a scalar.
pub(super) fn checked_str<'de, D, T>(
    d: D,
    expecting: &'static str,
    check: impl FnOnce(&str) -> Result<T, String>,
) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
{
    struct Checked<F>(&'static str, F);
    impl<T, F: FnOnce(&str) -> Result<T, String>> Visitor<'_> for Checked<F> {
        type Value = T;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str(self.0)
        }
        fn visit_str<E: de::Error>(self, s: &str) -> Result<T, E> {
            (self.1)(s).map_err(E::custom)
        }
    }
    d.deserialize_str(Checked(expecting, check))
}

/// A number read by `check` inside the visitor: `Ok` for a whole number, `Err` for one with a
/// fraction (`check` decides what either may be).
fn checked_number<'de, D, T>(
    d: D,
    expecting: &'static str,
    check: impl FnOnce(Number) -> Result<T, String>,
) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
{
    struct Checked<F>(&'static str, F);
    impl<T, F: FnOnce(Number) -> Result<T, String>> Visitor<'_> for Checked<F> {
        type Value = T;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str(self.0)
        }
        fn visit_u64<E: de::Error>(self, n: u64) -> Result<T, E> {
            (self.1)(Number::Whole(n)).map_err(E::custom)
        }
        fn visit_i64<E: de::Error>(self, n: i64) -> Result<T, E> {
            match u64::try_from(n) {
                Ok(n) => (self.1)(Number::Whole(n)).map_err(E::custom),
                Err(_) => (self.1)(Number::Real(n as f64)).map_err(E::custom),
            }
        }
        fn visit_f64<E: de::Error>(self, x: f64) -> Result<T, E> {
            (self.1)(Number::Real(x)).map_err(E::custom)
        }
        fn visit_str<E: de::Error>(self, s: &str) -> Result<T, E> {
            (self.1)(Number::Text(s)).map_err(E::custom)
        }
    }
    d.deserialize_any(Checked(expecting, check))
}

/// A scalar as YAML typed it.
enum Number<'a> {
    /// A whole number, 0 or more.
    Whole(u64),
    /// A negative or fractional number.
    Real(f64),
    /// Text.
    Text(&'a str),
}

/// A section that may be left empty (`admin:` with nothing under it): its defaults.
pub(super) fn section<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// A duration written as rule files write them (`250ms`, `1.5s`, `2m`, a bare number of
/// milliseconds), longer than zero.
pub(super) fn duration<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    const EXPECTED: &str = "a duration such as '250ms', '30s', '1h30m'";
    checked_number(d, EXPECTED, |n| {
        let value = match n {
            Number::Whole(ms) => Duration::from_millis(ms),
            Number::Text(s) => {
                rebound_engine::duration::parse_duration(s).map_err(|e| e.to_string())?
            }
            Number::Real(x) => return Err(format!("bad duration {x}; expected {EXPECTED}")),
        };
        if value.is_zero() {
            return Err(format!("a duration of zero; expected {EXPECTED}"));
        }
        Ok(Some(value))
    })
}

/// A whole number of at least 1 (a count of tasks, a capacity).
pub(super) fn at_least_one<'de, D: Deserializer<'de>>(d: D) -> Result<Option<usize>, D::Error> {
    checked_number(d, "a whole number of at least 1", |n| {
        let n = whole_at_least_one(n)?;
        usize::try_from(n)
            .map(Some)
            .map_err(|_| format!("{n} is too large"))
    })
}

/// A size in bytes of at least 1: a whole number of bytes, or a number with a unit (`512KiB`,
/// `1MiB`, `2MB`; `B`, `KiB`, `MiB`, `GiB`, and the decimal `KB`, `MB`, `GB`).
pub(super) fn bytes<'de, D: Deserializer<'de>>(d: D) -> Result<Option<usize>, D::Error> {
    const EXPECTED: &str = "a size such as '1MiB', '512KiB' or a whole number of bytes";
    checked_number(d, EXPECTED, |n| {
        let n = match n {
            Number::Whole(n) => n,
            Number::Real(x) => return Err(format!("bad size {x}; expected {EXPECTED}")),
            Number::Text(s) => {
                size_of(s).ok_or_else(|| format!("bad size {s:?}; expected {EXPECTED}"))?
            }
        };
        if n == 0 {
            return Err(format!("a size of zero; expected {EXPECTED}"));
        }
        usize::try_from(n)
            .map(Some)
            .map_err(|_| format!("{n} bytes is too large"))
    })
}

/// `s` (`1MiB`, `512 KiB`, `2MB`, `100B`) in bytes, if it is a size.
fn size_of(s: &str) -> Option<u64> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (number, unit) = s.split_at(split);
    let unit: u64 = match unit.trim() {
        "" | "B" => 1,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        "KB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        _ => return None,
    };
    number.parse::<u64>().ok()?.checked_mul(unit)
}

/// A count of at least 1 (`messages`).
pub(super) fn count<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    checked_number(d, "a whole number of at least 1", |n| {
        whole_at_least_one(n).map(Some)
    })
}

fn whole_at_least_one(n: Number) -> Result<u64, String> {
    match n {
        Number::Whole(n) if n >= 1 => Ok(n),
        Number::Whole(n) => Err(format!("expected a whole number of at least 1, got {n}")),
        Number::Real(x) => Err(format!("expected a whole number of at least 1, got {x}")),
        Number::Text(s) => Err(format!("expected a whole number of at least 1, got '{s}'")),
    }
}

/// A positive finite number (`time_scale`, `rate`).
pub(super) fn positive<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    checked_number(d, "a number greater than zero", |n| {
        let x = match n {
            Number::Whole(n) => n as f64,
            Number::Real(x) => x,
            Number::Text(s) => {
                return Err(format!("expected a number greater than zero, got '{s}'"));
            }
        };
        if !(x.is_finite() && x > 0.0) {
            return Err(format!("expected a number greater than zero, got {x}"));
        }
        Ok(Some(x))
    })
}

/// A share of finished trees: `50%` or `0.5`, above 0 and at most 100%.
pub(super) fn share<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    portion(
        d,
        "share",
        "a share above 0% and at most 100%, such as '50%' or 0.5",
        false,
    )
}

/// A sample of decisions: `10%` or 0.1, from 0% (none) to 100%.
pub(super) fn sample<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    portion(
        d,
        "sample",
        "a share from 0% to 100%, such as '10%' or 0.1",
        true,
    )
}

/// A portion of a whole, written `50%` or `0.5`, at most 100% (0 only when `zero` allows it);
/// `what` names it in the errors.
fn portion<'de, D: Deserializer<'de>>(
    d: D,
    what: &'static str,
    expected: &'static str,
    zero: bool,
) -> Result<Option<f64>, D::Error> {
    checked_number(d, expected, |n| {
        let x = match n {
            Number::Whole(n) => n as f64,
            Number::Real(x) => x,
            Number::Text(s) => {
                let percent = s.trim().strip_suffix('%');
                match percent.and_then(|p| p.trim().parse::<f64>().ok()) {
                    Some(p) => p / 100.0,
                    None => return Err(format!("bad {what} '{s}'; expected {expected}")),
                }
            }
        };
        let low_ok = if zero { x >= 0.0 } else { x > 0.0 };
        if !(low_ok && x <= 1.0) {
            return Err(format!("a {what} of {}%; expected {expected}", x * 100.0));
        }
        Ok(Some(x))
    })
}

/// `--store`: `sqlite`, or a `redis://` URL that parses (never echoed: it may hold a
/// password).
pub(super) fn store<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<super::StoreSetting>, D::Error> {
    /// `store: URL` or `store: { url: URL, password_file: FILE }`.
    struct Store;
    impl<'de> Visitor<'de> for Store {
        type Value = super::StoreSetting;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("`sqlite`, a `redis://` URL, or a mapping { url, password_file }")
        }
        fn visit_str<E: de::Error>(self, s: &str) -> Result<Self::Value, E> {
            Ok(super::StoreSetting {
                url: store_url(s).map_err(E::custom)?,
                password_file: None,
            })
        }
        fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut url = None;
            let mut password_file = None;
            while let Some(key) = map.next_key::<StoreKey>()? {
                match key {
                    StoreKey::Url => url = Some(map.next_value::<StoreUrl>()?.0),
                    StoreKey::PasswordFile => password_file = Some(map.next_value()?),
                }
            }
            let url = url.ok_or_else(|| de::Error::missing_field("url"))?;
            Ok(super::StoreSetting { url, password_file })
        }
    }
    d.deserialize_any(Store).map(Some)
}

/// A key of the `store:` mapping, refused inside its visitor when unknown (so the error is
/// marked at the key).
enum StoreKey {
    Url,
    PasswordFile,
}

impl<'de> Deserialize<'de> for StoreKey {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Key;
        impl Visitor<'_> for Key {
            type Value = StoreKey;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("`url` or `password_file`")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<StoreKey, E> {
                match s {
                    "url" => Ok(StoreKey::Url),
                    "password_file" => Ok(StoreKey::PasswordFile),
                    other => Err(E::unknown_field(other, &["url", "password_file"])),
                }
            }
        }
        d.deserialize_identifier(Key)
    }
}

/// A store URL, checked inside its visitor.
struct StoreUrl(String);

impl<'de> Deserialize<'de> for StoreUrl {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        checked_str(d, STORE_EXPECTED, store_url).map(StoreUrl)
    }
}

const STORE_EXPECTED: &str = "expected `sqlite` or `redis://[USER:PASSWORD@]HOST:PORT[/DB]`";

/// `sqlite`, or a `redis://` URL that parses.
fn store_url(url: &str) -> Result<String, String> {
    let url = url.trim();
    if url == "sqlite" {
        return Ok(url.to_owned());
    }
    if !(url.starts_with("redis://") || url.starts_with("rediss://")) {
        return Err(STORE_EXPECTED.to_owned());
    }
    rebound_store_redis::check_url(url)?;
    Ok(url.to_owned())
}

/// `--namespace`: a name without braces or spaces.
pub(super) fn namespace<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    checked_str(d, "a name without braces or spaces", |ns| {
        let trimmed = ns.trim();
        if trimmed.is_empty()
            || trimmed.contains(['{', '}'])
            || trimmed.contains(char::is_whitespace)
        {
            return Err(format!(
                "bad namespace {ns:?}; expected a name without braces or spaces"
            ));
        }
        Ok(Some(trimmed.to_owned()))
    })
}

/// A name that is not blank (`node`).
pub(super) fn name<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    checked_str(d, "a name, e.g. pay-worker-1", |s| {
        if s.trim().is_empty() {
            return Err("a blank name; expected e.g. pay-worker-1".to_owned());
        }
        Ok(Some(s.trim().to_owned()))
    })
}

/// `admin.addr`: `HOST:PORT` (resolved at start, not here: checking a file starts nothing).
pub(super) fn host_port<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    checked_str(d, "HOST:PORT, e.g. 127.0.0.1:8080", |s| {
        let ok = s
            .rsplit_once(':')
            .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok());
        if !ok {
            return Err(format!(
                "bad address {s:?}; expected HOST:PORT, e.g. 127.0.0.1:8080"
            ));
        }
        Ok(Some(s.to_owned()))
    })
}

/// A webhook: an `http://` or `https://` URL with a host.
pub(super) fn webhook<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    checked_str(d, "an http:// or https:// URL", |s| {
        let uri: http::Uri = s.parse().map_err(|e| {
            format!("bad webhook URL {s:?}: {e}; expected e.g. http://127.0.0.1:9093/rebound")
        })?;
        if !matches!(uri.scheme_str(), Some("http" | "https")) {
            return Err(format!(
                "bad webhook URL {s:?}; expected http://HOST[:PORT]/PATH or https://HOST[:PORT]/PATH"
            ));
        }
        if uri.host().is_none_or(str::is_empty) {
            return Err(format!(
                "bad webhook URL {s:?}: no host; expected http://HOST[:PORT]/PATH"
            ));
        }
        Ok(s.to_owned())
    })
}

/// A CA file: a PEM file of certificates, read and checked here (an error names the file and
/// what is wrong with it).
pub(super) fn ca_file<'de, D: Deserializer<'de>>(d: D) -> Result<Option<PathBuf>, D::Error> {
    checked_str(d, "the path of a PEM file of CA certificates", |s| {
        let path = PathBuf::from(s);
        crate::outbound::roots_from_file(&path).map_err(|e| e.to_string())?;
        Ok(Some(path))
    })
}

/// An HTTP header name, checked where it is written.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct HeaderName(pub String);

impl<'de> Deserialize<'de> for HeaderName {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        checked_str(d, "a header name", |s| {
            http::HeaderName::from_bytes(s.as_bytes())
                .map(|_| HeaderName(s.to_owned()))
                .map_err(|_| {
                    format!("bad header name {s:?}; expected letters, digits and '-', e.g. X-Team")
                })
        })
    }
}

/// An HTTP header value, checked where it is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct HeaderValue(pub String);

impl<'de> Deserialize<'de> for HeaderValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        checked_str(d, "a header value", |s| {
            http::HeaderValue::from_str(s)
                .map(|_| HeaderValue(s.to_owned()))
                .map_err(|_| {
                    format!("bad header value {s:?}; expected visible characters, no line breaks")
                })
        })
    }
}

/// A host name of `admin.hosts`: a DNS name or an address, without a port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostName(pub String);

impl<'de> Deserialize<'de> for HostName {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        checked_str(d, "a host name, e.g. rebound.internal", |s| {
            let name = s.trim();
            let plain = !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'));
            let ipv6 = name.starts_with('[') && name.ends_with(']');
            if !(plain || ipv6) {
                return Err(format!(
                    "bad host name {s:?}; expected a name such as rebound.internal (no port, no \
                     scheme)"
                ));
            }
            Ok(HostName(name.to_ascii_lowercase()))
        })
    }
}
