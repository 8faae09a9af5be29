//! The answers of a webhook kept for a while: kube's `LRUExpireCache` as its `GenericWebhook`
//! users keep them (ImagePolicyWebhook's reviews, the token and authorization webhooks'
//! decisions).
//!
//! ## Guarantees
//! - **Bounded**: at most the capacity given at creation; adding past it drops the least
//!   recently used answer first.
//! - **Expiry**: an answer is returned until its expiry (`now < expires`), never after; an
//!   expired answer found by a look-up is dropped then. Time is the caller's (a `Duration`
//!   since its own origin), so tests move it by hand.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

#[derive(Debug)]
struct Kept<V> {
    answer: V,
    expires: Duration,
    used: u64,
}

/// Answers by key, at most `capacity` of them, each until its expiry.
#[derive(Debug)]
pub struct Answers<V> {
    capacity: usize,
    by_key: HashMap<String, Kept<V>>,
    by_use: BTreeMap<u64, String>,
    uses: u64,
}

impl<V: Clone> Answers<V> {
    /// No answers, at most `capacity` (at least one) kept.
    #[must_use]
    pub fn new(capacity: usize) -> Answers<V> {
        Answers {
            capacity: capacity.max(1),
            by_key: HashMap::new(),
            by_use: BTreeMap::new(),
            uses: 0,
        }
    }

    /// The answer kept for `key` if it has not expired at `now` (then the most recently used).
    pub fn get(&mut self, key: &str, now: Duration) -> Option<V> {
        let kept = self.by_key.get_mut(key)?;
        if kept.expires <= now {
            let used = kept.used;
            self.by_key.remove(key);
            self.by_use.remove(&used);
            return None;
        }
        self.uses += 1;
        self.by_use.remove(&kept.used);
        kept.used = self.uses;
        self.by_use.insert(self.uses, key.to_owned());
        Some(kept.answer.clone())
    }

    /// Keeps `answer` for `key` until `expires`, dropping the least recently used past the
    /// capacity.
    pub fn add(&mut self, key: String, answer: V, expires: Duration) {
        if let Some(old) = self.by_key.remove(&key) {
            self.by_use.remove(&old.used);
        }
        while self.by_key.len() >= self.capacity {
            let Some((_, oldest)) = self.by_use.pop_first() else {
                break;
            };
            self.by_key.remove(&oldest);
        }
        self.uses += 1;
        self.by_use.insert(self.uses, key.clone());
        self.by_key.insert(
            key,
            Kept {
                answer,
                expires,
                used: self.uses,
            },
        );
    }

    /// How many answers are kept (expired ones not looked up since included).
    #[must_use]
    pub fn len(&self) -> usize {
        self.by_key.len()
    }

    /// Whether none is kept.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_expire_and_the_least_recently_used_goes_first() {
        let s = Duration::from_secs;
        let mut answers = Answers::new(2);
        answers.add("a".to_owned(), 1, s(10));
        answers.add("b".to_owned(), 2, s(10));
        assert_eq!(answers.get("a", s(1)), Some(1)); // a is now the most recently used
        answers.add("c".to_owned(), 3, s(10)); // drops b
        assert_eq!(answers.get("b", s(1)), None);
        assert_eq!(answers.get("a", s(1)), Some(1));
        assert_eq!(answers.get("c", s(9)), Some(3));
        assert_eq!(answers.get("c", s(10)), None, "expired at its expiry");
        assert_eq!(answers.len(), 1);
        answers.add("a".to_owned(), 4, s(20)); // replaced, not added
        assert_eq!(answers.len(), 1);
        assert_eq!(answers.get("a", s(15)), Some(4));
    }
}
