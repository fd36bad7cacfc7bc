//! How fast Events may be written: a token bucket on the caller's clock. Pure.

/// `burst` Events at once, then `per_second`. Events over the limit wait for the next
/// round; a storm of transitions cannot become a storm of writes.
#[derive(Debug)]
pub struct RateLimit {
    burst: f64,
    per_second: f64,
    tokens: f64,
    /// Seconds, on the caller's clock.
    last: f64,
}

impl RateLimit {
    pub fn new(burst: u32, per_second: f64, now: f64) -> Self {
        Self { burst: f64::from(burst), per_second, tokens: f64::from(burst), last: now }
    }

    /// Take a token if one is left at `now`.
    pub fn try_take(&mut self, now: f64) -> bool {
        let elapsed = (now - self.last).max(0.0);
        self.tokens = (self.tokens + elapsed * self.per_second).min(self.burst);
        self.last = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_limit_allows_a_burst_then_the_rate() {
        let mut limit = RateLimit::new(3, 2.0, 0.0);
        assert_eq!((0..5).filter(|_| limit.try_take(0.0)).count(), 3);
        assert!(!limit.try_take(0.1));
        assert!(limit.try_take(0.6), "one token after half a second at 2/s");
        assert_eq!((0..10).filter(|_| limit.try_take(100.0)).count(), 3, "never more than the burst");
    }
}
