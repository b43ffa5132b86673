//! Token buckets (AWS's throttling and GitHub's points) and GitHub's hourly window, on
//! tokio's clock so that paused time drives them.

use std::time::Duration;
use tokio::time::Instant;

/// A bucket's size and refill rate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BucketSpec {
    pub capacity: f64,
    pub per_second: f64,
}

/// A token bucket that starts full.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    spec: BucketSpec,
    tokens: f64,
    at: Instant,
}

impl TokenBucket {
    pub fn new(spec: BucketSpec) -> TokenBucket {
        TokenBucket {
            spec,
            tokens: spec.capacity,
            at: Instant::now(),
        }
    }

    /// Takes `cost` tokens, or says how long until they are there (nothing taken).
    pub fn take(&mut self, cost: f64) -> Result<(), Duration> {
        let now = Instant::now();
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.spec.per_second).min(self.spec.capacity);
        self.at = now;
        if self.tokens >= cost {
            self.tokens -= cost;
            return Ok(());
        }
        let missing = cost - self.tokens;
        Err(Duration::from_secs_f64(missing / self.spec.per_second))
    }
}

/// A budget of calls per fixed hour, reset an hour after the window's first call (how
/// GitHub's primary rate limit behaves: `x-ratelimit-reset`).
#[derive(Debug, Clone)]
pub struct HourlyWindow {
    limit: u32,
    used: u32,
    resets_at: Option<Instant>,
}

const HOUR: Duration = Duration::from_secs(3600);

impl HourlyWindow {
    pub fn new(limit: u32) -> HourlyWindow {
        HourlyWindow {
            limit,
            used: 0,
            resets_at: None,
        }
    }

    /// Spends one call, or says how long until the window resets.
    pub fn spend(&mut self) -> Result<(), Duration> {
        let now = Instant::now();
        match self.resets_at {
            Some(at) if at <= now => {
                self.used = 0;
                self.resets_at = Some(now + HOUR);
            }
            None => self.resets_at = Some(now + HOUR),
            Some(_) => {}
        }
        if self.used >= self.limit {
            let at = self.resets_at.unwrap_or(now);
            return Err(at.saturating_duration_since(now));
        }
        self.used += 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_bucket_refills_at_its_rate_up_to_its_size() {
        let mut bucket = TokenBucket::new(BucketSpec {
            capacity: 2.0,
            per_second: 1.0,
        });
        assert_eq!(bucket.take(2.0), Ok(()));
        assert_eq!(bucket.take(1.0), Err(Duration::from_secs(1)));
        tokio::time::advance(Duration::from_secs(10)).await;
        assert_eq!(bucket.take(2.0), Ok(()));
        assert!(bucket.take(1.0).is_err(), "never above its size");
    }

    #[tokio::test(start_paused = true)]
    async fn the_hourly_window_resets_an_hour_after_its_first_call() {
        let mut window = HourlyWindow::new(2);
        assert_eq!(window.spend(), Ok(()));
        tokio::time::advance(Duration::from_secs(600)).await;
        assert_eq!(window.spend(), Ok(()));
        assert_eq!(window.spend(), Err(Duration::from_secs(3000)));
        tokio::time::advance(Duration::from_secs(3000)).await;
        assert_eq!(window.spend(), Ok(()));
    }
}
