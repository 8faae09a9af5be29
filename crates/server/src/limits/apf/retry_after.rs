//! The `Retry-After` of a priority level's refusals, as kube-apiserver's
//! `droppedRequestsTracker` (`util/flowcontrol/dropped_requests_tracker.go`) computes it.
//!
//! ## Guarantees
//! - It starts at 1 s. When the refusals of the `retryAfter` seconds before the current one
//!   are at least three times `retryAfter`, and the last increase is at least `retryAfter`
//!   seconds old, it doubles (at most 32 s); when they are fewer than `retryAfter`, it
//!   decreases by one (at least 1). It is reconsidered only at the first refusal of a new
//!   second, from the counts of the seconds before (as TCP's congestion window: doubled on
//!   loss, decreased linearly).
//! - Pure: the caller passes the Unix second, so the schedule is tested without waiting.
//!
//! ## Bounds
//! The counts of at most `min(2 × retryAfter, 32)` seconds.

use std::collections::VecDeque;

/// The longest `Retry-After`, seconds.
const MAX_RETRY_AFTER: i64 = 32;

/// One level's refusals per second and its current `Retry-After`.
#[derive(Debug)]
pub struct Dropped {
    /// (second, refusals) of past seconds, oldest first.
    history: VecDeque<(i64, i64)>,
    /// The second being counted and its refusals so far.
    current: (i64, i64),
    retry_after: i64,
    /// When `retry_after` was last increased.
    increased_at: i64,
}

impl Default for Dropped {
    fn default() -> Dropped {
        Dropped {
            history: VecDeque::new(),
            current: (0, 0),
            retry_after: 1,
            increased_at: 0,
        }
    }
}

impl Dropped {
    /// The `Retry-After` to answer now, seconds.
    #[must_use]
    pub fn retry_after(&self) -> i64 {
        self.retry_after
    }

    /// Counts a refusal in the Unix second `now`.
    pub fn record(&mut self, now: i64) {
        if self.current.0 == now {
            self.current.1 += 1;
            return;
        }
        // A new second: the one counted so far goes to the history.
        self.history.push_back(self.current);
        let keep = (2 * self.retry_after).min(MAX_RETRY_AFTER);
        while self
            .history
            .front()
            .is_some_and(|&(second, _)| self.current.0 - second > keep)
        {
            self.history.pop_front();
        }
        self.current = (now, 1);
        self.reconsider(now);
    }

    /// Doubles or decreases `retry_after` from the refusals of `[now - retry_after, now)`.
    fn reconsider(&mut self, now: i64) {
        let dropped: i64 = self
            .history
            .iter()
            .rev()
            .take_while(|&&(second, _)| now - second <= self.retry_after)
            .filter(|&&(second, _)| second < now)
            .map(|&(_, count)| count)
            .sum();
        if now - self.increased_at >= self.retry_after && dropped >= 3 * self.retry_after {
            self.retry_after = (self.retry_after * 2).min(MAX_RETRY_AFTER);
            self.increased_at = now;
        } else if dropped < self.retry_after && self.retry_after > 1 {
            self.retry_after -= 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(dropped: &mut Dropped, second: i64, times: usize) {
        for _ in 0..times {
            dropped.record(second);
        }
    }

    #[test]
    fn a_burst_doubles_it_and_quiet_seconds_bring_it_down() {
        let mut dropped = Dropped::default();
        record(&mut dropped, 100, 3);
        assert_eq!(dropped.retry_after(), 1);
        // The first refusal of the next second sees three in the second before: doubled.
        dropped.record(101);
        assert_eq!(dropped.retry_after(), 2);
        // Not doubled again within 2 s of the increase, however many.
        record(&mut dropped, 101, 20);
        dropped.record(102);
        assert_eq!(dropped.retry_after(), 2);
        // 2 s after it, with at least 6 in the 2 s before: doubled.
        record(&mut dropped, 102, 10);
        dropped.record(103);
        assert_eq!(dropped.retry_after(), 4);
        // Fewer refusals than Retry-After seconds in the window: down by one per second.
        dropped.record(110);
        assert_eq!(dropped.retry_after(), 3);
        dropped.record(120);
        assert_eq!(dropped.retry_after(), 2);
        dropped.record(130);
        dropped.record(140);
        assert_eq!(dropped.retry_after(), 1);
    }

    #[test]
    fn it_never_passes_32_seconds() {
        let mut dropped = Dropped::default();
        for second in 0..2000 {
            record(&mut dropped, second, 200);
        }
        assert_eq!(dropped.retry_after(), MAX_RETRY_AFTER);
        assert!(dropped.history.len() <= MAX_RETRY_AFTER as usize + 1);
    }
}
