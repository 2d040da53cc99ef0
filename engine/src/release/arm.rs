//! Who is in a canary: a message whose biz the canary names (every biz when it names none) and
//! whose ordering key (its id when it has none) hashes under the canary's percent. The hash is
//! FNV-1a over the key's bytes: the same on every node and in every build, so a message's
//! every retry, wherever it fires, is decided by the same arm.

use serde::{Deserialize, Serialize};

/// One of a canary's two arms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Arm {
    /// The current set decides.
    Stable,
    /// The candidate decides.
    Canary,
}

impl Arm {
    /// `stable` or `canary`: the metrics' `arm` label and the JSON keys.
    pub fn as_str(self) -> &'static str {
        match self {
            Arm::Stable => "stable",
            Arm::Canary => "canary",
        }
    }
}

/// FNV-1a, 64 bits: a hash that never changes between builds, platforms or processes.
pub fn stable_hash(bytes: &[u8]) -> u64 {
    fnv1a(FNV_OFFSET, bytes)
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

/// FNV-1a of `bytes` continued from `h` (a hash of several parts without joining them).
pub(crate) fn fnv1a(mut h: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// FNV-1a of the parts one after the other, as if joined.
pub(crate) fn stable_hash_of(parts: &[&[u8]]) -> u64 {
    parts.iter().fold(FNV_OFFSET, |h, p| fnv1a(h, p))
}

/// The messages a canary takes: `percent` of the ordering keys (ids for messages without one)
/// of the named biz types (all when `biz` is empty).
#[derive(Debug, Clone, PartialEq)]
pub struct Slice {
    /// 0–100, in steps of 0.01.
    percent: f64,
    /// The biz types, or empty for all.
    biz: Vec<String>,
    /// `percent` in hundredths: a hash falls in when `hash % 10_000 < cut`.
    cut: u64,
}

impl Slice {
    /// `percent` of the keys of `biz` (all biz types when empty). `percent` is clamped to
    /// 0–100.
    pub fn new(percent: f64, biz: Vec<String>) -> Slice {
        let percent = if percent.is_finite() {
            percent.clamp(0.0, 100.0)
        } else {
            0.0
        };
        Slice {
            percent,
            biz,
            cut: (percent * 100.0).round() as u64,
        }
    }

    /// The percent.
    pub fn percent(&self) -> f64 {
        self.percent
    }

    /// The biz types it names (empty: all).
    pub fn biz(&self) -> &[String] {
        &self.biz
    }

    /// The arm of a message of `biz` whose ordering key is `key` (its id when it has none).
    pub fn arm(&self, biz: &str, key: &str) -> Arm {
        if !self.biz.is_empty() && !self.biz.iter().any(|b| b == biz) {
            return Arm::Stable;
        }
        if stable_hash(key.as_bytes()) % 10_000 < self.cut {
            Arm::Canary
        } else {
            Arm::Stable
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hash_is_fnv1a() {
        // The published FNV-1a 64 test vectors.
        assert_eq!(stable_hash(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(stable_hash(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(stable_hash(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn a_slice_takes_about_its_percent_of_keys_and_only_its_biz() {
        let slice = Slice::new(10.0, vec!["PAYMENT".into()]);
        let keys: Vec<String> = (0..20_000).map(|i| format!("order-{i}")).collect();
        let canary = keys
            .iter()
            .filter(|k| slice.arm("PAYMENT", k) == Arm::Canary)
            .count();
        assert!((1_800..2_200).contains(&canary), "{canary} of 20000");
        assert!(keys.iter().all(|k| slice.arm("STOCK", k) == Arm::Stable));
        let all = Slice::new(100.0, vec![]);
        assert!(keys.iter().all(|k| all.arm("ANY", k) == Arm::Canary));
        let none = Slice::new(0.0, vec![]);
        assert!(keys.iter().all(|k| none.arm("ANY", k) == Arm::Stable));
    }

    #[test]
    fn a_key_is_always_in_the_same_arm() {
        let slice = Slice::new(50.0, vec![]);
        for i in 0..1000 {
            let key = format!("k{i}");
            let arm = slice.arm("X", &key);
            assert!((0..5).all(|_| slice.arm("X", &key) == arm));
        }
    }
}
