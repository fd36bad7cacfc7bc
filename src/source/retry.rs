//! When to restart a failed watch: the retry policy as a pure function of what the failed
//! attempt cost and a jitter draw, so that it is tested without a cluster or a clock.
//!
//! The backoff is client-go's reflector's: 800 ms, doubling, jittered, up to 30 s, and
//! forgiven after two minutes of health. On top of it, a list that cost much waits a
//! multiple of its cost, and the server's Retry-After is a floor.

use std::time::Duration;

/// The first retry's delay, before jitter.
pub const MIN_DELAY: Duration = Duration::from_millis(800);
/// The longest backoff, jitter included: a failure of any kind repeated (a proxy that cuts
/// every stream, a watch denied, an API server down) costs at most one attempt per 30 s.
pub const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// A retry waits at least this many times what the failed attempt spent listing, so that
/// relists take at most a fifth of the time however large the cluster (a relist of
/// 2,600,000 pods takes tens of seconds).
pub const LIST_COST_FACTOR: u32 = 4;
/// The longest delay of all, whatever the list cost or the server asks.
pub const MAX_DELAY: Duration = Duration::from_secs(600);
/// A watch that ran this long after its list completed, without an error, proves the
/// failures before it over: the next one starts again at `MIN_DELAY`. Counted from the end
/// of the list, since at scale the list alone takes longer than this.
pub const HEALTHY_RESETS_AFTER: Duration = Duration::from_secs(120);
/// A watch that ran this long after its list before it expired (410 Gone) expired as
/// routine: it relists at once.
pub const ROUTINE_EXPIRY_AFTER: Duration = Duration::from_secs(30);

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
    pub fn proved_healthy(&self) -> bool {
        self.watched.is_some_and(|w| w >= HEALTHY_RESETS_AFTER)
    }

    /// The watch ran long enough after its list for an expiry to be routine.
    pub fn proved_clean(&self) -> bool {
        self.watched.is_some_and(|w| w >= ROUTINE_EXPIRY_AFTER)
    }
}

/// The backoff of one watch: consecutive failures double the delay.
#[derive(Clone, Debug)]
pub struct Retry {
    failures: u32,
    /// A draw in [0, 1) per delay: retries of many exporters (or of one exporter's four
    /// watches) after one outage spread out instead of arriving together.
    jitter: fn() -> f64,
}

impl Default for Retry {
    fn default() -> Self {
        Self { failures: 0, jitter: fastrand::f64 }
    }
}

impl Retry {
    /// The delay before the next attempt after `attempt` failed.
    pub fn after_failure(&mut self, attempt: Attempt) -> Duration {
        if attempt.proved_healthy() {
            self.failures = 0;
        }
        let backoff = backoff(self.failures, (self.jitter)());
        self.failures = self.failures.saturating_add(1);
        let asked = attempt.retry_after.unwrap_or_default();
        backoff.max(attempt.listing.saturating_mul(LIST_COST_FACTOR)).max(asked).min(MAX_DELAY)
    }

    /// The delay after a watch expired (410 Gone). Routine after a long watch: relist at
    /// once. Right after a list it is not (a cache that lists an already compacted
    /// version would expire every watch): back off as after a failure.
    pub fn after_expiry(&mut self, attempt: Attempt) -> Duration {
        if !attempt.proved_clean() {
            return self.after_failure(attempt);
        }
        if attempt.proved_healthy() {
            self.failures = 0;
        }
        Duration::ZERO
    }
}

/// The `failures`-th delay in a row: `MIN_DELAY` doubled that many times, stretched by up
/// to as much again by the draw `jitter` in [0, 1) (client-go's jitter factor 1.0), and
/// at most `MAX_BACKOFF`.
pub fn backoff(failures: u32, jitter: f64) -> Duration {
    let jitter = if jitter.is_finite() { jitter.clamp(0.0, 1.0) } else { 0.0 };
    doubled(MIN_DELAY, failures).mul_f64(1.0 + jitter).min(MAX_BACKOFF)
}

/// `first` doubled `times` times, at most `MAX_BACKOFF`: every pause that grows with
/// failures in a row (retries here, short watch calls in `progress`).
pub fn doubled(first: Duration, times: u32) -> Duration {
    first.saturating_mul(1 << times.min(16)).min(MAX_BACKOFF)
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

    /// The backoff without jitter (every draw 0), so that delays are exact.
    fn steady() -> Retry {
        Retry { failures: 0, jitter: || 0.0 }
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
    fn failures_of_any_kind_double_up_to_the_cap() {
        let want = [ms(800), ms(1600), ms(3200), ms(6400), ms(12800), ms(25600), secs(30), secs(30)];
        // The list refused, a watch cut right after its list, a watch cut mid-way.
        for attempt in [list_failed(ms(1)), watch_failed(ms(20), ms(5)), watch_failed(ms(20), secs(100))] {
            assert_eq!(delays(&mut steady(), attempt, 8), want, "{attempt:?}");
        }
    }

    #[test]
    fn jitter_stretches_each_delay_by_up_to_as_much_again_never_past_the_cap() {
        for failures in [0, 1, 3, 5, 6, 40] {
            let (low, high) = (backoff(failures, 0.0), backoff(failures, 0.999_999));
            assert!(high <= MAX_BACKOFF, "{failures}");
            assert!(high >= low && high <= low * 2, "{failures}: {low:?}..{high:?}");
        }
        assert_eq!(backoff(0, 0.5), ms(1200));
        // Draws the real source cannot make change nothing.
        assert_eq!(backoff(0, -1.0), ms(800));
        assert_eq!(backoff(0, f64::NAN), ms(800));
        // The real source: always within the bounds.
        let mut retry = Retry::default();
        for n in 0..20 {
            let got = retry.after_failure(list_failed(ms(1)));
            assert!(got >= backoff(n, 0.0) && got <= backoff(n, 1.0), "{n}: {got:?}");
        }
    }

    #[test]
    fn sixty_seconds_of_failures_cost_a_handful_of_attempts() {
        // A proxy cutting every stream for a minute, the worst draws (the shortest delays).
        let mut retry = steady();
        let (mut at, mut attempts) = (Duration::ZERO, 0);
        while at < secs(60) {
            attempts += 1;
            at += retry.after_failure(watch_failed(ms(5), ms(5)));
        }
        assert_eq!(attempts, 7);
    }

    #[test]
    fn an_expensive_list_waits_a_multiple_of_its_cost() {
        let mut retry = steady();
        // 40 s to list 2,600,000 pods, then the watch is refused: 160 s, not 0.8 s.
        assert_eq!(retry.after_failure(watch_failed(secs(40), ms(10))), secs(160));
        // A list that failed half way, after 20 s of pages, cost as much.
        assert_eq!(retry.after_failure(list_failed(secs(20))), secs(80));
        // Never beyond the overall cap.
        assert_eq!(retry.after_failure(list_failed(secs(3600))), MAX_DELAY);
        // Cheap attempts keep the doubling.
        assert_eq!(retry.after_failure(list_failed(ms(1))), ms(6400));
    }

    #[test]
    fn two_minutes_of_health_after_the_list_forgive_earlier_failures() {
        let mut retry = steady();
        delays(&mut retry, list_failed(ms(1)), 4);
        // A watch cut after a minute proves nothing: a load balancer that cuts every minute
        // is a failure repeated.
        assert_eq!(retry.after_failure(watch_failed(secs(1), secs(60))), ms(12800));
        // Two minutes clean after the list do, however long the list took.
        assert_eq!(retry.after_failure(watch_failed(ms(1), HEALTHY_RESETS_AFTER)), MIN_DELAY);
        assert_eq!(retry.after_failure(list_failed(ms(1))), ms(1600));
    }

    #[test]
    fn an_expiry_after_a_long_watch_relists_at_once() {
        let mut retry = steady();
        delays(&mut retry, list_failed(ms(1)), 3);
        assert_eq!(retry.after_expiry(watch_failed(secs(2), secs(60))), Duration::ZERO);
        // Routine, but not yet health: the failures before it still count.
        assert_eq!(retry.after_failure(list_failed(ms(1))), ms(6400));
        assert_eq!(retry.after_expiry(watch_failed(secs(2), secs(290))), Duration::ZERO);
        // And now they are forgiven.
        assert_eq!(retry.after_failure(list_failed(ms(1))), MIN_DELAY);
    }

    #[test]
    fn an_expiry_right_after_a_list_backs_off() {
        let mut retry = steady();
        let attempt = watch_failed(ms(10), ms(100));
        let got: Vec<_> = (0..4).map(|_| retry.after_expiry(attempt)).collect();
        assert_eq!(got, [ms(800), ms(1600), ms(3200), ms(6400)]);
        assert!(!attempt.proved_clean() && watch_failed(ms(10), ROUTINE_EXPIRY_AFTER).proved_clean());
    }

    #[test]
    fn the_server_s_retry_after_is_a_floor_never_a_ceiling() {
        let mut retry = steady();
        let throttled = |seconds| Attempt { retry_after: Some(secs(seconds)), ..list_failed(ms(1)) };
        // 429 with Retry-After: 3 on the first failure: 3 s, not 0.8 s.
        assert_eq!(retry.after_failure(throttled(3)), secs(3));
        // The doubling goes on underneath, and wins once it is longer.
        assert_eq!(retry.after_failure(throttled(1)), ms(1600));
        assert_eq!(retry.after_failure(throttled(1)), ms(3200));
        // A server asking for more than the backoff's cap gets it, up to the overall cap.
        assert_eq!(retry.after_failure(throttled(45)), secs(45));
        assert_eq!(retry.after_failure(throttled(3600)), MAX_DELAY);
    }

    #[test]
    fn no_overflow_after_any_number_of_failures() {
        let mut retry = Retry { failures: u32::MAX - 1, ..steady() };
        for _ in 0..3 {
            assert_eq!(retry.after_failure(watch_failed(Duration::MAX, ms(1))), MAX_DELAY);
            assert_eq!(retry.after_failure(list_failed(ms(1))), MAX_BACKOFF);
        }
    }
}
