//! When to restart a failed watch: the retry policy as a pure function of what the failed
//! attempt cost, so that it is tested without a cluster or a clock.

use std::time::Duration;

/// The first retry's delay.
pub const MIN_DELAY: Duration = Duration::from_millis(500);
/// The longest delay while the list itself fails (API server down, list denied): such
/// calls are cheap, and a short cap resyncs within seconds of the API server's return.
pub const MAX_DELAY_LIST_FAILING: Duration = Duration::from_secs(5);
/// The longest delay once a list completed and the watch after it failed (watch denied,
/// list allowed): every retry costs a full relist, and the list's data is fresh anyway.
pub const MAX_DELAY_AFTER_LIST: Duration = Duration::from_secs(60);
/// A retry waits at least this many times what the failed attempt spent listing, so that
/// relists take at most a fifth of the time however large the cluster (a relist of
/// 2,600,000 pods takes tens of seconds).
pub const LIST_COST_FACTOR: u32 = 4;
/// The longest delay of all, whatever the list cost.
pub const MAX_DELAY: Duration = Duration::from_secs(600);
/// A watch that ran this long after its list completed, without an error, proves the
/// failure is over: the next failure starts again at `MIN_DELAY`. Counted from the end of
/// the list, since at scale the list alone takes longer than this.
pub const CLEAN_RESETS_AFTER: Duration = Duration::from_secs(30);

/// How one watch attempt ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Attempt {
    /// Time from the start of the attempt to the last list data it received: the list's
    /// end (`InitDone`) if it completed. Zero if no data came (the list was refused, or
    /// the server unreachable or slow to answer): such a failure costs nothing to retry.
    pub listing: Duration,
    /// Time the watch ran after the list completed; `None` if it did not complete.
    pub watched: Option<Duration>,
    /// How long the server asked the client to wait (Retry-After, or a 429's
    /// `retryAfterSeconds`): the delay is never shorter.
    pub retry_after: Option<Duration>,
}

impl Attempt {
    /// The watch ran long enough after its list to prove the failures before it over.
    pub fn proved_clean(&self) -> bool {
        self.watched.is_some_and(|w| w >= CLEAN_RESETS_AFTER)
    }
}

/// The backoff of one watch: consecutive failures double the delay.
#[derive(Clone, Debug, Default)]
pub struct Retry {
    failures: u32,
}

impl Retry {
    /// The delay before the next attempt after `attempt` failed.
    pub fn after_failure(&mut self, attempt: Attempt) -> Duration {
        if attempt.proved_clean() {
            self.failures = 0;
        }
        let cap = if attempt.watched.is_some() { MAX_DELAY_AFTER_LIST } else { MAX_DELAY_LIST_FAILING };
        let doubled = MIN_DELAY.saturating_mul(1 << self.failures.min(16)).min(cap);
        self.failures = self.failures.saturating_add(1);
        let asked = attempt.retry_after.unwrap_or_default();
        doubled.max(attempt.listing.saturating_mul(LIST_COST_FACTOR)).max(asked).min(MAX_DELAY)
    }

    /// The delay after a watch expired (410 Gone). Routine after a long watch: relist at
    /// once. Right after a list it is not (a cache that lists an already compacted
    /// version would expire every watch): back off as after a failure.
    pub fn after_expiry(&mut self, attempt: Attempt) -> Duration {
        if attempt.proved_clean() {
            self.failures = 0;
            Duration::ZERO
        } else {
            self.after_failure(attempt)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }
    const fn ms(ms: u64) -> Duration {
        Duration::from_millis(ms)
    }

    fn list_failed(listing: Duration) -> Attempt {
        Attempt { listing, watched: None, retry_after: None }
    }

    fn watch_failed(listing: Duration, watched: Duration) -> Attempt {
        Attempt { listing, watched: Some(watched), retry_after: None }
    }

    fn delays(retry: &mut Retry, attempt: Attempt, n: usize) -> Vec<Duration> {
        (0..n).map(|_| retry.after_failure(attempt)).collect()
    }

    #[test]
    fn failing_lists_double_up_to_the_short_cap() {
        let got = delays(&mut Retry::default(), list_failed(ms(1)), 7);
        assert_eq!(got, [ms(500), secs(1), secs(2), secs(4), secs(5), secs(5), secs(5)]);
    }

    #[test]
    fn a_watch_failing_after_each_completed_list_backs_off_to_the_long_cap() {
        // Watch denied, list allowed: each retry is a full relist.
        let got = delays(&mut Retry::default(), watch_failed(ms(20), ms(5)), 10);
        let want = [ms(500), secs(1), secs(2), secs(4), secs(8), secs(16), secs(32), secs(60), secs(60), secs(60)];
        assert_eq!(got, want);
    }

    #[test]
    fn an_expensive_list_waits_a_multiple_of_its_cost() {
        let mut retry = Retry::default();
        // 40 s to list 2,600,000 pods, then the watch is refused: 160 s, not 0.5 s.
        assert_eq!(retry.after_failure(watch_failed(secs(40), ms(10))), secs(160));
        // A list that failed half way, after 20 s of pages, cost as much.
        assert_eq!(retry.after_failure(list_failed(secs(20))), secs(80));
        // Never beyond the overall cap.
        assert_eq!(retry.after_failure(list_failed(secs(3600))), MAX_DELAY);
        // Cheap attempts keep the doubling.
        assert_eq!(retry.after_failure(list_failed(ms(1))), secs(4));
    }

    #[test]
    fn the_reset_counts_from_the_end_of_the_list() {
        let mut retry = Retry::default();
        delays(&mut retry, list_failed(ms(1)), 4);
        // A 21 s attempt, 20 s of it watching, proves nothing: the doubling goes on.
        assert_eq!(retry.after_failure(watch_failed(secs(1), secs(20))), secs(8));
        // A watch clean for 30 s after its list does, however long the list took.
        assert_eq!(retry.after_failure(watch_failed(ms(1), CLEAN_RESETS_AFTER)), MIN_DELAY);
        assert_eq!(retry.after_failure(list_failed(ms(1))), secs(1));
    }

    #[test]
    fn an_expiry_after_a_long_watch_relists_at_once() {
        let mut retry = Retry::default();
        delays(&mut retry, list_failed(ms(1)), 3);
        assert_eq!(retry.after_expiry(watch_failed(secs(2), secs(290))), Duration::ZERO);
        // And the failures before it are forgiven.
        assert_eq!(retry.after_failure(list_failed(ms(1))), MIN_DELAY);
    }

    #[test]
    fn an_expiry_right_after_a_list_backs_off() {
        let mut retry = Retry::default();
        let attempt = watch_failed(ms(10), ms(100));
        let got: Vec<_> = (0..4).map(|_| retry.after_expiry(attempt)).collect();
        assert_eq!(got, [ms(500), secs(1), secs(2), secs(4)]);
        assert!(!attempt.proved_clean() && watch_failed(ms(10), CLEAN_RESETS_AFTER).proved_clean());
    }

    #[test]
    fn the_server_s_retry_after_is_a_floor_never_a_ceiling() {
        let mut retry = Retry::default();
        let throttled = |seconds| Attempt { retry_after: Some(secs(seconds)), ..list_failed(ms(1)) };
        // 429 with Retry-After: 3 on the first failure: 3 s, not 0.5 s.
        assert_eq!(retry.after_failure(throttled(3)), secs(3));
        // The doubling goes on underneath, and wins once it is longer.
        assert_eq!(retry.after_failure(throttled(1)), secs(1));
        assert_eq!(retry.after_failure(throttled(1)), secs(2));
        // A server asking for an hour gets the overall cap.
        assert_eq!(retry.after_failure(throttled(3600)), MAX_DELAY);
    }

    #[test]
    fn no_overflow_after_any_number_of_failures() {
        let mut retry = Retry { failures: u32::MAX - 1 };
        for _ in 0..3 {
            assert_eq!(retry.after_failure(watch_failed(Duration::MAX, ms(1))), MAX_DELAY);
        }
    }
}
