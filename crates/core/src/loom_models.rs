//! Loom models of the core's cross-thread protocols (built only with
//! `RUSTFLAGS="--cfg watchkeeper_loom"`; `scripts/test` runs them). Each model runs the real
//! structures — their primitives come from loom then (see [`crate::sync`]) — under every
//! interleaving and memory-model outcome loom explores, and asserts that no wake-up and no
//! news is lost:
//! - a consumer that finds its queue empty and parks is woken by the next push;
//! - a consumer handed a refill while it runs makes it or is woken to;
//! - a consumer that empties the queue of a watcher the worker owns (after the worker found it
//!   full and dropped it from its candidates) always reaches the worker through the drain
//!   signal;
//! - a drain raised while the worker takes the signal is either taken or leaves the signal
//!   raised with a wake-up on its way (the worker never parks on it);
//! - the store's progress mark never falls behind a revision the dispatcher's driver was not
//!   woken for;
//! - a message to an actor is either taken or has woken the actor.

use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use loom::sync::atomic::{AtomicBool, Ordering};

use crate::cache::{Mailbox, ProgressMark};
use crate::event::WatchItem;
use crate::queue::DrainSignal;
use crate::queue::{Pop, PushResult, WatchQueue, WatcherState};

fn item(revision: u64) -> WatchItem {
    WatchItem::Bookmark {
        revision,
        initial_events_end: false,
    }
}

/// A waker (or a driver's unpark token) that remembers it was called.
struct Flag(AtomicBool);

impl Flag {
    fn new() -> Arc<Flag> {
        Arc::new(Flag(AtomicBool::new(false)))
    }

    fn is_set(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }

    fn set(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    /// The driver woke up and consumed the token.
    fn clear(&self) {
        self.0.store(false, Ordering::SeqCst);
    }
}

impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.set();
    }
}

#[test]
fn a_parked_consumer_is_woken_by_the_next_push() {
    loom::model(|| {
        let queue = Arc::new(WatchQueue::new(2));
        let producer = {
            let queue = queue.clone();
            loom::thread::spawn(move || assert_eq!(queue.push(item(1)), PushResult::Pushed))
        };
        let woken = Flag::new();
        let waker = Waker::from(woken.clone());
        let mut cx = Context::from_waker(&waker);
        let mut out = Vec::new();
        let polled = queue.poll_pop_many(&mut cx, 8, &mut out);
        producer.join().unwrap();
        match polled {
            Poll::Pending => assert!(woken.is_set(), "parked on an empty queue, never woken"),
            Poll::Ready(_) => assert_eq!(out.len(), 1),
        }
    });
}

#[test]
fn a_refill_handed_to_a_running_consumer_is_made() {
    loom::model(|| {
        let queue = Arc::new(WatchQueue::new(2));
        // The worker hands the watcher to its consumer, which is running (woken: its waker
        // is not registered).
        let worker = {
            let queue = queue.clone();
            loom::thread::spawn(move || {
                let refill = crate::queue::Refill {
                    position: 0,
                    selection: Arc::new(crate::request::Selection::new(
                        &crate::WatchRequest::new(crate::WatchStart::Now),
                        None,
                    )),
                    pushed: 0,
                    stuck: false,
                };
                assert!(queue.install_refill(refill).is_ok());
            })
        };
        let woken = Flag::new();
        let waker = Waker::from(woken.clone());
        let mut cx = Context::from_waker(&waker);
        let mut out = Vec::new();
        // Its refill (the history holds nothing more: stuck, which raises the drain signal
        // for the worker), then its pop.
        queue.refill_with(|items, _, _| items.is_empty());
        let (polled, _) = queue.poll_pop_many_parking(&mut cx, 8, &mut out);
        worker.join().unwrap();
        assert!(polled.is_pending());
        let stuck = queue.take_refill().is_some_and(|refill| refill.stuck);
        assert!(
            woken.is_set() || stuck,
            "handed a refill it never made, and never woken to make it"
        );
    });
}

#[test]
fn a_drained_queue_reaches_the_worker() {
    loom::model(|| {
        let drain = Arc::new(DrainSignal::default());
        let queue = Arc::new(WatchQueue::with_drain_signal(1, drain.clone(), 7));
        queue.set_state(WatcherState::Unsynced);
        assert_eq!(queue.push(item(1)), PushResult::Pushed);
        let consumer = {
            let queue = queue.clone();
            loom::thread::spawn(move || while let Pop::Item(_) = queue.try_pop() {})
        };
        // The worker's one look at the watcher in a pass, then its next take of the signal.
        let look = queue.inspect();
        consumer.join().unwrap();
        let mut raised = Vec::new();
        drain.take(&mut raised);
        if look.free == 0 && !look.drained {
            // Found full: it left the candidates, and only the signal brings it back.
            assert_eq!(raised, vec![7], "a drained watcher was forgotten");
        }
    });
}

#[test]
fn a_drain_raised_during_a_take_is_taken_or_wakes_the_worker() {
    loom::model(|| {
        let drain = Arc::new(DrainSignal::default());
        let token = Flag::new();
        {
            let token = token.clone();
            drain.set_notify(Arc::new(move || token.set()));
        }
        // An earlier raise the worker has not taken yet; its wake-up is what runs the take.
        drain.raise(1);
        token.clear();
        let consumer = {
            let drain = drain.clone();
            loom::thread::spawn(move || drain.raise(2))
        };
        let mut taken = Vec::new();
        drain.take(&mut taken);
        // The worker parks unless the signal is raised (its poll_timeout), and a park returns
        // at once when the notify hook ran since (an unpark token).
        let parks = !drain.is_raised();
        consumer.join().unwrap();
        if !taken.contains(&2) {
            assert!(
                !parks || token.is_set(),
                "raise(2) was neither taken nor able to wake the worker"
            );
            let mut later = Vec::new();
            drain.take(&mut later);
            assert!(later.contains(&2), "raise(2) was lost");
        }
    });
}

#[test]
fn the_progress_mark_never_hides_a_revision_from_the_driver() {
    loom::model(|| {
        let mark = Arc::new(ProgressMark::default());
        let token = Flag::new();
        {
            let token = token.clone();
            mark.set_notify(Box::new(move || token.set()));
        }
        // A reader waits for freshness (without demand the mark wakes nobody: the model
        // below). The reflector reached revision 3 and woke the driver, which is about to
        // take it.
        mark.set_demand(true);
        mark.advance(3);
        token.clear();
        let reflector = {
            let mark = mark.clone();
            loom::thread::spawn(move || mark.advance(5))
        };
        let seen = mark.take();
        // The driver waits for its next input unless the mark is pending.
        let waits = !mark.is_pending();
        reflector.join().unwrap();
        if seen < 5 {
            assert!(
                mark.is_pending() && (!waits || token.is_set()),
                "revision 5 reached the mark after the driver took {seen}, and nothing tells it"
            );
            assert_eq!(mark.take(), 5);
        }
    });
}

/// Demand and the mark meet Dekker-style: a reader that raises the demand while the
/// reflector raises the mark is never left waiting with nobody to wake the driver.
#[test]
fn demand_and_a_new_mark_always_wake_the_driver() {
    loom::model(|| {
        let mark = Arc::new(ProgressMark::default());
        let token = Flag::new();
        {
            let token = token.clone();
            mark.set_notify(Box::new(move || token.set()));
        }
        let reflector = {
            let mark = mark.clone();
            loom::thread::spawn(move || mark.advance(5))
        };
        // A reader registers (the driver is asleep, having taken everything before).
        mark.set_demand(true);
        reflector.join().unwrap();
        assert!(
            token.is_set(),
            "the mark rose while a reader wanted it, and the driver was not woken"
        );
    });
}

#[test]
fn a_message_is_taken_or_wakes_its_actor() {
    loom::model(|| {
        let mailbox: Arc<Mailbox<u32>> = Arc::new(Mailbox::default());
        let token = Flag::new();
        {
            let token = token.clone();
            mailbox.set_notify(Box::new(move || token.set()));
        }
        let sender = {
            let mailbox = mailbox.clone();
            loom::thread::spawn(move || mailbox.send(1))
        };
        let mut taken = std::collections::VecDeque::new();
        mailbox.take_all(&mut taken);
        let parks = mailbox.is_empty();
        sender.join().unwrap();
        if taken.is_empty() {
            assert!(
                !parks || token.is_set(),
                "a message arrived and nobody was woken"
            );
            mailbox.take_all(&mut taken);
            assert_eq!(taken, [1]);
        }
    });
}
