//! Progress notifications of the log-based backends, on tokio's paused clock (no waiting
//! on wall time).

use watchkeeper_store::{KeySelector, Store, WatchItem};

use crate::common::{embedded, memory, next_item};

async fn progress_after_filtered_writes<S: Store>(s: &S) {
    let mut w = s.watch(KeySelector::prefix("/watched/"), 0).await.unwrap();
    let r = s.put("/elsewhere/x", "x").await.unwrap();
    // The filtered-out revision yields no item; the idle tick reports it as progress.
    match next_item(&mut w).await {
        WatchItem::Progress { revision } => assert_eq!(revision, r),
        other => panic!("expected progress, got {other:?}"),
    }
    let r2 = s.put("/watched/a", "a").await.unwrap();
    match next_item(&mut w).await {
        WatchItem::Revision { revision, .. } => assert_eq!(revision, r2),
        other => panic!("expected a revision, got {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn memory_progress() {
    let (s, _g) = memory().await;
    progress_after_filtered_writes(&s).await;
}

#[tokio::test(start_paused = true)]
async fn embedded_progress() {
    let (s, _g) = embedded().await;
    progress_after_filtered_writes(&s).await;
}
