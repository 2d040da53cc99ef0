//! Fairness between retries and new data: the [`Mixer`] (at most N retries per new message,
//! and never more than one new message ahead of a due retry). The retry fuse, which holds
//! retries back while the failure rate is too high, is the breaker for everything
//! (`adaptive/fuse.rs`).

use crate::topology::RetryMix;

/// Where the next delivery should come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Turn {
    /// A due retry.
    Retry,
    /// A new message from the spout.
    New,
}

/// Decides whose turn it is when both due retries and new messages are available.
///
/// The spout task tries `first()` and falls back to the other source when the first has
/// nothing, so with both available the pattern is `N` retries, one new message, `N` retries…
/// and with only one available it flows at full speed.
#[derive(Clone, Debug)]
pub struct Mixer {
    retries_per_new: u32,
    since_new: u32,
}

impl Mixer {
    /// A mixer for `mix`.
    pub fn new(mix: RetryMix) -> Mixer {
        Mixer {
            retries_per_new: mix.retries_per_new,
            since_new: 0,
        }
    }

    /// The source to try first, then the other.
    pub fn order(&self) -> [Turn; 2] {
        if self.since_new < self.retries_per_new {
            [Turn::Retry, Turn::New]
        } else {
            [Turn::New, Turn::Retry]
        }
    }

    /// Records a delivery from `turn`.
    pub fn took(&mut self, turn: Turn) {
        match turn {
            Turn::Retry => self.since_new = self.since_new.saturating_add(1),
            Turn::New => self.since_new = 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mixer_alternates_by_ratio() {
        let mut m = Mixer::new(RetryMix { retries_per_new: 3 });
        let mut seq = String::new();
        for _ in 0..8 {
            let t = m.order()[0];
            m.took(t);
            seq.push(if t == Turn::Retry { 'R' } else { 'N' });
        }
        assert_eq!(seq, "RRRNRRRN");
        let mut zero = Mixer::new(RetryMix { retries_per_new: 0 });
        assert_eq!(zero.order()[0], Turn::New);
        zero.took(Turn::Retry);
        assert_eq!(zero.order()[0], Turn::New);
    }
}
