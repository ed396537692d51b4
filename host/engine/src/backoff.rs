//! The one backoff of the engine: exponential from a base, doubling, with
//! jitter, never above a cap — used by the work queue (failed reconciles),
//! the status-fight pause ([`crate::status::StatusMemory`]) and the manager's
//! retries of a controller that cannot start.
//!
//! The sequence is `backon`'s exponential backoff (already a dependency of
//! kube-runtime): delay *n* is `base·2ⁿ⁻¹` plus a random part of up to the
//! same again, so parents that failed together in one outage spread out
//! instead of retrying in lockstep. The nominal delay stops doubling at half
//! the cap, so with jitter a delay stays below the cap and still varies there.

use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder};

/// Backoff settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// Nominal delay after the first failure (jitter adds up to as much again).
    pub base: Duration,
    /// Upper bound of any delay.
    pub cap: Duration,
}

impl Default for Backoff {
    /// 5 ms doubling to 5 minutes: fast retries for blips, bounded load for
    /// persistent failures.
    fn default() -> Self {
        Self {
            base: Duration::from_millis(5),
            cap: Duration::from_secs(300),
        }
    }
}

impl Backoff {
    /// Delay after the `failures`-th consecutive failure (1-based), jittered:
    /// between the nominal `base·2ⁿ⁻¹` (at most `cap/2`) and twice that,
    /// never above `cap`.
    pub fn delay(&self, failures: u32) -> Duration {
        let half = (self.cap / 2).max(self.base);
        let nth = failures.clamp(1, 64) as usize - 1;
        ExponentialBuilder::new()
            .with_min_delay(self.base)
            .with_max_delay(half)
            .with_factor(2.0)
            .with_jitter()
            .without_max_times()
            .build()
            .nth(nth)
            .unwrap_or(self.cap)
            .min(self.cap)
    }

    /// The nominal (un-jittered) delay after the `failures`-th failure: the
    /// lower bound of [`Backoff::delay`].
    pub fn nominal(&self, failures: u32) -> Duration {
        let half = (self.cap / 2).max(self.base);
        let shift = failures.saturating_sub(1).min(30);
        self.base.saturating_mul(1u32 << shift).min(half)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_double_from_the_base_with_jitter_and_stay_under_the_cap() {
        let b = Backoff::default();
        for (n, nominal) in [(1, 5), (2, 10), (3, 20), (4, 40)] {
            let nominal = Duration::from_millis(nominal);
            assert_eq!(b.nominal(n), nominal);
            for _ in 0..50 {
                let d = b.delay(n);
                assert!(d >= nominal && d <= nominal * 2, "{n}: {d:?}");
            }
        }
        for n in [30, 40, 1000] {
            let d = b.delay(n);
            assert!(d >= b.cap / 2 && d <= b.cap, "{n}: {d:?}");
        }
    }

    #[test]
    fn jitter_spreads_parents_that_failed_together() {
        let b = Backoff::default();
        let delays: std::collections::BTreeSet<Duration> = (0..20).map(|_| b.delay(5)).collect();
        assert!(delays.len() > 1, "20 equal delays: {delays:?}");
    }
}
