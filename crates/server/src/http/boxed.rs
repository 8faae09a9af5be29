//! A future boxed where it is made, not copied into its box.
//!
//! ## Guarantees
//! - [`pinned_in_place`] returns the future `make` returns, pinned in a box, exactly as
//!   `Box::pin(make())` would: same value, same output when polled, dropped unpolled without
//!   running.
//! - The box is allocated before `make` runs, so the compiler can write the future straight
//!   into it. `Box::pin(make())` makes the future on the stack first and then copies all of
//!   it into the box: an `async fn`'s future is as large as its largest state (the request
//!   handler's was ~21 KB, a PATCH's write path), so that copy was ~21 KB per request whatever
//!   the request (callgrind: ~23 k of a PATCH's ~325 k instructions, issue 15; the release
//!   build's code for `pinned_in_place` calls no `memcpy`). Only the size of what is copied
//!   depends on the compiler; the result does not.
//! - Awaiting a future inline makes the awaiting future hold its whole state, and the await
//!   copies it in (`memcpy` of its size, at each level up). A state of a few KB that a path
//!   awaits only sometimes (a rare wait, one branch of many) is therefore made here, when it
//!   runs: one allocation on the path that takes it instead of bytes copied on every path.

use std::pin::Pin;

/// `Box::pin(make())` without making the future on the stack first (see the module docs).
#[inline(always)]
pub fn pinned_in_place<F>(make: impl FnOnce() -> F) -> Pin<Box<F>> {
    let slot = Box::<F>::new_uninit();
    Box::into_pin(Box::write(slot, make()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::Future as _;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::{Context, Poll, Waker};

    /// Goal: the boxed future is the one `make` returned: polled, it gives that future's
    /// output, after the awaits inside it, holding the state it captured.
    #[test]
    fn the_boxed_future_gives_the_made_futures_output() {
        let captured = vec![3_u64; 4096];
        let mut boxed = pinned_in_place(|| async move {
            let mut total = 0;
            for value in &captured {
                total += value;
                tokio::task::yield_now().await;
            }
            total
        });
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime");
        assert_eq!(runtime.block_on(&mut boxed), 3 * 4096);
    }

    /// Goal: nothing of the future runs before it is polled, and dropping it unpolled drops
    /// what it captured (once).
    #[test]
    fn an_unpolled_future_runs_nothing_and_drops_its_captures() {
        let started = Arc::new(AtomicUsize::new(0));
        let held = Arc::new(());
        let future = {
            let started = Arc::clone(&started);
            let held = Arc::clone(&held);
            pinned_in_place(move || async move {
                started.fetch_add(1, Ordering::SeqCst);
                drop(held);
            })
        };
        assert_eq!(Arc::strong_count(&held), 2);
        drop(future);
        assert_eq!(started.load(Ordering::SeqCst), 0);
        assert_eq!(Arc::strong_count(&held), 1);
    }

    /// Goal: a future polled once, pending, and polled again resumes where it was (its box
    /// does not move it).
    #[test]
    fn a_pending_future_resumes_in_its_box() {
        let mut polled_once = false;
        let mut future = pinned_in_place(|| {
            std::future::poll_fn(move |_| {
                if polled_once {
                    Poll::Ready(7)
                } else {
                    polled_once = true;
                    Poll::Pending
                }
            })
        });
        let mut context = Context::from_waker(Waker::noop());
        assert_eq!(future.as_mut().poll(&mut context), Poll::Pending);
        assert_eq!(future.as_mut().poll(&mut context), Poll::Ready(7));
    }
}
