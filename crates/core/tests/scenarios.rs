//! Scenario tests for KEP-6268's invariants and the core's watch semantics, on the step/drive
//! harness (real dispatcher and catch-up worker, virtual clock).

mod common;

use std::time::Duration;

use common::*;
use watchkeeper_core::{
    CacheConfig, CandidateOrder, CatchUpDesign, Change, Encoding, EventType, FieldSelector,
    LabelSelector, Revision, TerminationReason, Watch, WatchEnd, WatchMode, WatchRequest,
    WatchStart, WatcherState,
};

/// The cohort design: most scenarios here check the passes' own mechanics (cohorts, budgets,
/// order). The consumer-driven design has its own scenarios below, and the model proptests
/// run both.
fn config() -> CacheConfig {
    CacheConfig {
        trigger_field: Some("spec.nodeName".to_owned()),
        catchup_design: CatchUpDesign::Cohort,
        ..CacheConfig::default()
    }
}

fn consumer_config() -> CacheConfig {
    CacheConfig {
        catchup_design: CatchUpDesign::ConsumerDriven,
        ..config()
    }
}

fn assert_no_skips(h: &Harness) {
    assert_eq!(
        h.cache.metrics().watcher_skipped_events.get(),
        0,
        "the live path skipped events"
    );
}

/// Goal: a watcher whose queue fills becomes unsynced (never closed), a healthy watcher is
/// unaffected, and once the slow one reads it receives every event exactly once, in order,
/// and rejoins the live stream. Method: queue of 2, five writes, then drain and pass.
#[test]
fn stall_records_position_and_resumes_without_loss() {
    let mut h = Harness::new(config());
    let slow = h.watch_from(WatchStart::Now, 2);
    let healthy = h.watch_from(WatchStart::Now, 100);
    let mut written = Vec::new();
    for i in 0..5 {
        written.push(h.put("ns", &format!("p{i}"), &[], "n1"));
    }
    assert_eq!(slow.state(), WatcherState::Unsynced);
    assert_eq!(h.cache.metrics().watcher_stalls.get(), 1);
    assert_eq!(h.cache.metrics().stalled_watchers.get(), 1);
    assert_eq!(
        revisions(&drain(&healthy)),
        written,
        "healthy watcher got everything live"
    );
    let mut seen = vec![Vec::new()];
    h.settle(&[&slow], &mut seen, 20);
    assert_eq!(revisions(&seen[0]), written, "every event once, in order");
    assert_eq!(
        slow.state(),
        WatcherState::Synced,
        "back on the live stream"
    );
    assert_eq!(h.cache.metrics().stalled_watchers.get(), 0);
    assert_eq!(h.cache.metrics().watcher_catchup_rounds.get(), 1);
    assert_eq!(h.cache.metrics().watcher_catchup_events.count(), 1);
    assert_eq!(
        h.cache.metrics().watcher_catchup_events.snapshot().1,
        3,
        "the three events it was owed were pushed by passes"
    );
    // Live again: the next write arrives without a pass.
    let rv = h.put("ns", "after", &[], "n1");
    assert_eq!(revisions(&drain(&slow)), [rv]);
    assert!(end_of(&slow).is_none(), "never closed");
    assert_no_skips(&h);
}

/// Goal: order and single delivery across repeated stalls and partial reads while writes
/// continue. Method: a reader that takes one item per write, a queue of 3, 200 writes.
#[test]
fn order_and_single_delivery_across_repeated_stalls() {
    let mut h = Harness::new(config());
    let watch = h.watch_from(WatchStart::Now, 3);
    let mut got = Vec::new();
    let mut written = Vec::new();
    for i in 0..200 {
        written.push(h.put("ns", &format!("p{}", i % 7), &[], "n1"));
        // Alternate slow phases (one read per two writes) with fast ones (a pass and a full
        // read after every write).
        if (i / 20) % 2 == 1 {
            h.advance(Duration::from_millis(10));
            got.extend(drain(&watch));
        } else {
            if i % 2 == 0 {
                got.extend(take(&watch, 1));
            }
            if i % 5 == 0 {
                h.advance(Duration::from_millis(10));
            }
        }
    }
    let mut seen = vec![got];
    h.settle(&[&watch], &mut seen, 200);
    assert_eq!(revisions(&seen[0]), written);
    assert!(
        h.cache.metrics().watcher_stalls.get() > 1,
        "the scenario must stall repeatedly"
    );
    assert_no_skips(&h);
}

/// Goal: bookmarks go only to synced watchers, only when the revision advanced, never below
/// what the client has; none while unsynced. Method: two watchers allowing bookmarks, one
/// stalled, advance past the bookmark interval.
#[test]
fn bookmarks_only_when_synced_and_never_backwards() {
    let mut h = Harness::new(config());
    let synced = h.watch_from(WatchStart::Now, 100);
    let stalled = h.watch_from(WatchStart::Now, 1);
    h.put("ns", "a", &[], "n1");
    h.put("ns", "b", &[], "n1");
    assert_eq!(stalled.state(), WatcherState::Unsynced);
    let before = drain(&synced);
    h.dispatcher.handle_progress(h.now, 10);
    h.advance(Duration::from_secs(61));
    let after = drain(&synced);
    assert_eq!(after, [Seen::Bookmark(10, false)], "{before:?}");
    // The stalled watcher got no bookmark while unsynced: only its one queued event.
    let queued = take(&stalled, 10);
    assert_eq!(queued.len(), 1);
    assert!(matches!(queued[0], Seen::Event(..)));
    // Catch up; after resync the next bookmark is at or above everything it saw.
    let mut seen = vec![queued];
    h.settle(&[&stalled], &mut seen, 20);
    h.advance(Duration::from_secs(61));
    seen[0].extend(drain(&stalled));
    let mut last = 0;
    for item in &seen[0] {
        let rv = match item {
            Seen::Event(_, _, rv) | Seen::Bookmark(rv, _) => *rv,
            Seen::Initial(..) => continue,
        };
        assert!(rv >= last, "resource version went backwards: {:?}", seen[0]);
        last = rv;
    }
    assert!(
        seen[0].contains(&Seen::Bookmark(10, false)),
        "{:?}",
        seen[0]
    );
    // Nothing advanced since: no new bookmark for either.
    h.advance(Duration::from_secs(61));
    assert!(drain(&synced).is_empty());
    assert_no_skips(&h);
}

/// Goal: a pass selects exactly what the live path selects (KEP invariant 4): ADDED on
/// entering a label selection, MODIFIED inside, DELETED with the previous object on leaving.
/// Method: the same selector on a live watcher and on one that stalls at the start.
#[test]
fn selection_parity_between_live_path_and_passes() {
    let mut h = Harness::new(config());
    let mut request = WatchRequest::new(WatchStart::Now);
    request.labels = LabelSelector::parse("app=web").unwrap();
    request.queue_capacity = Some(100);
    let live = h.watch(request.clone());
    request.queue_capacity = Some(1);
    let slow = h.watch(request);
    h.put("ns", "x", &[("app", "db")], "n1");
    h.put("ns", "x", &[("app", "web")], "n1");
    h.put("ns", "x", &[("app", "web"), ("v", "2")], "n1");
    h.put("ns", "x", &[("app", "db")], "n1");
    h.put("ns", "x", &[("app", "web")], "n1");
    h.delete("ns", "x");
    let expected = vec![
        Seen::Event(EventType::Added, "ns/x".into(), 3),
        Seen::Event(EventType::Modified, "ns/x".into(), 4),
        Seen::Event(EventType::Deleted, "ns/x".into(), 5),
        Seen::Event(EventType::Added, "ns/x".into(), 6),
        Seen::Event(EventType::Deleted, "ns/x".into(), 7),
    ];
    assert_eq!(drain(&live), expected);
    let mut seen = vec![Vec::new()];
    h.settle(&[&slow], &mut seen, 50);
    assert_eq!(seen[0], expected);
    assert!(h.cache.metrics().watcher_stalls.get() >= 1);
    assert_no_skips(&h);
}

/// Goal: a DELETED on leaving the selection carries the previous object at the event's
/// resource version. Method: encode the item and parse it.
#[test]
fn leaving_the_selection_carries_the_previous_object_at_the_event_revision() {
    let mut h = Harness::new(config());
    let mut request = WatchRequest::new(WatchStart::Now);
    request.labels = LabelSelector::parse("app=web").unwrap();
    let watch = h.watch(request);
    h.put("ns", "x", &[("app", "web")], "n1");
    let rv = h.put("ns", "x", &[("app", "db")], "n1");
    let _added = watch.try_pop();
    let watchkeeper_core::Pop::Item(item) = watch.try_pop() else {
        panic!("expected the DELETED event");
    };
    let (event_type, bytes) = item
        .encoded(Encoding::Json, &h.cache.metrics().encode)
        .unwrap();
    assert_eq!(event_type, EventType::Deleted);
    let object: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(object["metadata"]["resourceVersion"], rv.to_string());
    assert_eq!(
        object["metadata"]["labels"]["app"], "web",
        "the previous object"
    );
}

/// Goal: the candidate order is free share, then new-or-drained, then rotation from the cursor.
/// Method: one member per pass; watchers with different free shares.
#[test]
fn candidate_order_prefers_free_share_then_drained_then_rotation() {
    let config = CacheConfig {
        pass_members_max: 1,
        ..config()
    };
    let mut h = Harness::new(config);
    let a = h.watch_from(WatchStart::Now, 4);
    let b = h.watch_from(WatchStart::Now, 4);
    let c = h.watch_from(WatchStart::Now, 4);
    for i in 0..5 {
        h.put("ns", &format!("p{i}"), &[], "n1");
    }
    // All three are unsynced with full queues. Free one slot in a, all of b, two of c.
    take(&a, 1);
    take(&b, 4);
    take(&c, 2);
    let report = h.pass();
    assert_eq!(report.candidates, 3);
    assert_eq!(report.members, 1);
    assert_eq!(report.served[0].0, b.id(), "largest free share first");
    assert_eq!(report.waited, 2);
    let report = h.pass();
    assert_eq!(report.served[0].0, c.id());
    let report = h.pass();
    assert_eq!(report.served[0].0, a.id());
    assert_eq!(report.served[0].1, 2, "a waited two passes with room");
}

/// Goal: what operators read about an unsynced watcher (`WatchQueue::progress`, the history
/// lag at its position) is what the actors did, in virtual time. Method: the candidate-order
/// setup; read the published progress after the stall and after each pass.
#[test]
fn published_progress_tracks_stall_time_position_and_passes_waited() {
    let config = CacheConfig {
        pass_members_max: 1,
        ..config()
    };
    let mut h = Harness::new(config);
    let a = h.watch_from(WatchStart::Now, 4);
    let b = h.watch_from(WatchStart::Now, 4);
    assert_eq!(a.queue().progress().unsynced_since, None, "never unsynced");
    let mut written = Vec::new();
    for i in 0..6 {
        written.push(h.put("ns", &format!("p{i}"), &[], "n1"));
    }
    let stalled_at = h.now;
    for watch in [&a, &b] {
        let progress = watch.queue().progress();
        assert_eq!(watch.state(), WatcherState::Unsynced);
        assert_eq!(progress.unsynced_since, Some(stalled_at));
        // It holds the first four events; the fifth failed to push.
        assert_eq!(progress.position, written[3]);
        assert_eq!(progress.passes_waited, 0);
        let lag = h.cache.history_lag(&[progress.position])[0];
        assert_eq!(lag.events, 2, "two events above its position");
        assert_eq!(lag.oldest_owed, Some(stalled_at));
    }
    // Room in both, one member per pass: b (more room) is served, a waits.
    take(&a, 1);
    take(&b, 4);
    let report = h.pass();
    assert_eq!(report.served[0].0, b.id());
    assert_eq!(a.queue().progress().passes_waited, 1);
    assert_eq!(a.queue().progress().position, written[3]);
    assert_eq!(a.queue().progress().unsynced_since, Some(stalled_at));
    let report = h.pass();
    assert_eq!(report.served[0].0, a.id());
    assert_eq!(a.queue().progress().passes_waited, 0, "served");
    assert_eq!(
        a.queue().progress().position,
        written[4],
        "room for one more"
    );
    assert_eq!(h.cache.history_lag(&[written[4]])[0].events, 1);
}

/// Goal: rotation-only order serves every candidate within (candidates / member cap) passes.
/// Method: ten laggards with room, a member cap of 3, count passes until all were served.
#[test]
fn rotation_serves_every_candidate_within_a_bounded_number_of_passes() {
    let config = CacheConfig {
        pass_members_max: 3,
        candidate_order: CandidateOrder::RotationOnly,
        ..config()
    };
    let mut h = Harness::new(config);
    let watches: Vec<_> = (0..10).map(|_| h.watch_from(WatchStart::Now, 2)).collect();
    for i in 0..3 {
        h.put(&format!("ns{i}"), "p", &[], "n1");
    }
    for w in &watches {
        take(w, 2);
    }
    let mut served = std::collections::BTreeSet::new();
    for _ in 0..4 {
        let report = h.pass();
        assert!(report.members <= 3);
        served.extend(report.served.iter().map(|(id, _)| *id));
    }
    assert_eq!(
        served.len(),
        10,
        "every laggard served within ceil(10/3) = 4 passes"
    );
}

/// Goal: watchers at the same position form one cohort: one history read and one
/// serialization per event, however many members. Method: 100 watchers stall together, one
/// pass, then encode everything every watcher received.
#[test]
fn one_cohort_one_read_and_one_serialization_per_event() {
    let mut h = Harness::new(config());
    let watches: Vec<_> = (0..100).map(|_| h.watch_from(WatchStart::Now, 1)).collect();
    let mut written = Vec::new();
    for i in 0..20 {
        written.push(h.put("ns", &format!("p{i}"), &[], "n1"));
    }
    for w in &watches {
        assert_eq!(w.state(), WatcherState::Unsynced);
        take(w, 1);
    }
    let cache = h.cache.clone();
    let stats = &cache.metrics().encode;
    let before = stats.serializations();
    let report = h.pass();
    assert_eq!(report.cohorts, 1, "one history read for all members");
    assert_eq!(report.members, 100);
    assert_eq!(report.events_scanned, 19);
    // Everyone now holds event 2 (rv of p1); encode what they all hold.
    for w in &watches {
        while let watchkeeper_core::Pop::Item(item) = w.try_pop() {
            item.encoded(Encoding::Json, stats);
        }
    }
    let mut seen: Vec<Vec<Seen>> = vec![Vec::new(); watches.len()];
    let refs: Vec<&_> = watches.iter().collect();
    h.settle(&refs, &mut seen, 100);
    for w in &watches {
        while let watchkeeper_core::Pop::Item(item) = w.try_pop() {
            item.encoded(Encoding::Json, stats);
        }
    }
    let serializations = stats.serializations() - before;
    assert!(
        serializations <= 20,
        "{serializations} serializations for 20 events x 100 watchers"
    );
    assert_no_skips(&h);
}

/// Goal: a pass respects its scan budget, its push budget and its member cap.
/// Method: tiny budgets, many watchers and events.
#[test]
fn pass_budgets_and_member_cap_hold() {
    let config = CacheConfig {
        pass_members_max: 5,
        pass_scan_units_max: 64 + 10,
        pass_pushes_max: 7,
        ..config()
    };
    let mut h = Harness::new(config);
    let watches: Vec<_> = (0..8).map(|_| h.watch_from(WatchStart::Now, 50)).collect();
    // Stall them all at rv 1 by filling their queues with one oversized revision.
    h.write(|rv| {
        (0..50)
            .map(|i| Change::put(pod("ns", &format!("big{i}"), rv, &[], "n1")))
            .collect()
    });
    h.put("ns", "x", &[], "n1");
    for i in 0..30 {
        h.put("ns", &format!("p{i}"), &[], "n1");
    }
    for w in &watches {
        assert_eq!(w.state(), WatcherState::Unsynced);
        take(w, 50);
    }
    let report = h.pass();
    assert_eq!(report.candidates, 8);
    assert!(report.members <= 5);
    assert!(report.events_scanned <= 10, "scan budget: {report:?}");
    assert!(report.pushes <= 7, "push budget: {report:?}");
    assert!(
        report.busy,
        "a spent budget makes the next pass come sooner"
    );
    assert!(
        h.worker.ready_len() >= 8 - report.members,
        "candidates left out by the member cap stay ready: {report:?}"
    );
    let mut seen: Vec<Vec<Seen>> = vec![Vec::new(); watches.len()];
    let refs: Vec<&_> = watches.iter().collect();
    h.settle(&refs, &mut seen, 500);
    for s in &seen {
        assert_eq!(revisions(s), (3..=33).collect::<Vec<_>>());
    }
    assert_no_skips(&h);
}

/// Goal: a member that cannot take everything keeps its position and is owed the rest, which
/// a later pass delivers with nothing lost or repeated. Method: a queue of 2 behind 10 events.
#[test]
fn owed_events_are_offered_again() {
    let mut h = Harness::new(config());
    let watch = h.watch_from(WatchStart::Now, 2);
    let written: Vec<_> = (0..10)
        .map(|i| h.put("ns", &format!("p{i}"), &[], "n1"))
        .collect();
    let mut got = take(&watch, 2);
    let report = h.pass();
    assert_eq!(report.pushes, 2);
    assert!(report.busy);
    // A busy pass sets the busy period: the last pass's duration times `pass_busy_factor`,
    // within [`pass_period_busy_min`, `pass_period_busy_max`], and never sooner than that
    // duration times the factor after the pass (the worker's share of a core).
    let config = h.cache.config().clone();
    let factor = config.pass_busy_factor;
    assert_eq!(
        h.worker.period(),
        config.pass_period_busy_min,
        "no duration yet"
    );
    assert_eq!(
        h.worker.poll_timeout(),
        Some(h.now + config.pass_period_busy_min)
    );
    let took = config.pass_period_busy_min * 3 / factor;
    h.worker.record_pass_duration(took);
    assert_eq!(h.worker.period(), took * factor);
    assert_eq!(h.worker.poll_timeout(), Some(h.now + took * factor));
    let long = config.pass_period_busy_max * 2 / factor;
    h.worker.record_pass_duration(long);
    assert_eq!(h.worker.period(), config.pass_period_busy_max, "clamped");
    let due = h.now + long * factor;
    assert_eq!(h.worker.poll_timeout(), Some(due), "the CPU share's floor");
    let passes = h.passes.len();
    h.advance(long * factor - Duration::from_micros(1));
    assert_eq!(h.passes.len(), passes, "no pass before it is due");
    h.advance(Duration::from_micros(1));
    assert_eq!(h.passes.len(), passes + 1, "a pass when due");
    got.extend(take(&watch, 2));
    let report = h.pass();
    assert_eq!(report.pushes, 2);
    let mut seen = vec![got];
    h.settle(&[&watch], &mut seen, 50);
    assert_eq!(revisions(&seen[0]), written);
}

/// Goal: a namespace-scoped and a trigger-indexed watcher that stall cross unrelated churn in
/// one scan (position follows the scan), and get exactly their events. Method: stall them, then
/// 500 writes elsewhere, then one pass.
#[test]
fn scoped_and_trigger_watchers_cross_unrelated_churn() {
    let mut h = Harness::new(config());
    let mut request = WatchRequest::new(WatchStart::Now);
    request.namespace = Some("a".to_owned());
    request.queue_capacity = Some(1);
    let scoped = h.watch(request);
    let mut request = WatchRequest::new(WatchStart::Now);
    request.fields = FieldSelector::parse("spec.nodeName=n1").unwrap();
    request.queue_capacity = Some(1);
    let node = h.watch(request);
    let a1 = h.put("a", "p", &[], "n1");
    let a2 = h.put("a", "p", &[], "n2");
    assert_eq!(scoped.state(), WatcherState::Unsynced);
    for i in 0..500 {
        h.put("b", &format!("q{i}"), &[], "n3");
    }
    assert_eq!(
        drain(&scoped),
        [Seen::Event(EventType::Added, "a/p".into(), a1)]
    );
    assert_eq!(
        drain(&node),
        [Seen::Event(EventType::Added, "a/p".into(), a1)]
    );
    let report = h.pass();
    assert_eq!(report.resynced, 2, "{report:?}");
    // The pod moved from n1 to n2: the node watcher sees it leave.
    assert_eq!(
        drain(&scoped),
        [Seen::Event(EventType::Modified, "a/p".into(), a2)]
    );
    assert_eq!(
        drain(&node),
        [Seen::Event(EventType::Deleted, "a/p".into(), a2)]
    );
    assert_eq!(scoped.state(), WatcherState::Synced);
    assert_eq!(node.state(), WatcherState::Synced);
    // Live trigger routing: a pod on n1 reaches the node watcher, one on n3 does not.
    let on_n1 = h.put("c", "r", &[], "n1");
    h.put("c", "s", &[], "n3");
    assert_eq!(
        drain(&node),
        [Seen::Event(EventType::Added, "c/r".into(), on_n1)]
    );
    assert!(drain(&scoped).is_empty());
    assert_no_skips(&h);
}

/// Goal: a stalled watcher whose position ages out gets its queued backlog, then one 410
/// (resource_expired, it had reached the live stream); a watch started far behind that never
/// reached the live stream gets resource_expired_initial. Method: a tiny history.
#[test]
fn expiry_delivers_the_backlog_then_one_410_with_the_right_reason() {
    let config = CacheConfig {
        history_capacity_min: 10,
        history_capacity_max: 10,
        event_fresh_duration: Duration::from_secs(1),
        ..config()
    };
    let mut h = Harness::new(config);
    let live = h.watch_from(WatchStart::Now, 2);
    let first = h.put("ns", "a", &[], "n1");
    let second = h.put("ns", "b", &[], "n1");
    h.put("ns", "b2", &[], "n1");
    // Starts behind; the first pass fills its queue and leaves it owed, short of the live stream.
    let behind = h.watch_from(WatchStart::After(first), 1);
    h.pass();
    for i in 0..30 {
        h.put("ns", &format!("c{i}"), &[], "n1");
    }
    let report = h.pass();
    assert_eq!(report.expired, 2, "{report:?}");
    assert_eq!(
        drain(&live),
        [
            Seen::Event(EventType::Added, "ns/a".into(), first),
            Seen::Event(EventType::Added, "ns/b".into(), second),
        ]
    );
    match end_of(&live) {
        Some(WatchEnd::Expired {
            reason, position, ..
        }) => {
            assert_eq!(reason, TerminationReason::ResourceExpired);
            assert_eq!(position, second);
        }
        other => panic!("expected a 410, got {other:?}"),
    }
    assert_eq!(
        drain(&behind),
        [Seen::Event(EventType::Added, "ns/b".into(), second)]
    );
    match end_of(&behind) {
        Some(WatchEnd::Expired { reason, .. }) => {
            assert_eq!(reason, TerminationReason::ResourceExpiredInitial)
        }
        other => panic!("expected a 410, got {other:?}"),
    }
    let metrics = h.cache.metrics();
    assert_eq!(metrics.terminations(TerminationReason::ResourceExpired), 1);
    assert_eq!(
        metrics.terminations(TerminationReason::ResourceExpiredInitial),
        1
    );
    assert_eq!(metrics.stalled_watchers.get(), 0);
    assert_eq!(metrics.watchers.get(), 0);
}

/// Goal: a watch from a revision already evicted gets an immediate in-stream 410 with
/// Kubernetes' message inputs; one above the cache waits, then starts there.
#[test]
fn too_old_fails_and_future_waits() {
    let config = CacheConfig {
        history_capacity_min: 5,
        history_capacity_max: 5,
        ..config()
    };
    let mut h = Harness::new(config);
    for i in 0..20 {
        h.put("ns", &format!("p{i}"), &[], "n1");
    }
    let old = h.watch_from(WatchStart::After(3), 10);
    match end_of(&old) {
        Some(WatchEnd::Expired {
            position, floor, ..
        }) => {
            assert_eq!(position, 3);
            assert_eq!(floor, h.cache.history_info().oldest - 1);
        }
        other => panic!("expected 410, got {other:?}"),
    }
    let future = h.watch_from(WatchStart::After(h.revision + 2), 10);
    assert_eq!(future.state(), WatcherState::Pending);
    h.put("ns", "x", &[], "n1");
    h.put("ns", "y", &[], "n1");
    assert!(
        drain(&future).is_empty(),
        "events at or below the start are not sent"
    );
    let rv = h.put("ns", "z", &[], "n1");
    assert_eq!(revisions(&drain(&future)), [rv]);
}

/// Goal: a client that cancels between its stall and the next pass is dropped cleanly.
#[test]
fn cancel_between_stall_and_pass() {
    let mut h = Harness::new(config());
    let watch = h.watch_from(WatchStart::Now, 1);
    h.put("ns", "a", &[], "n1");
    h.put("ns", "b", &[], "n1");
    assert_eq!(watch.state(), WatcherState::Unsynced);
    drop(watch);
    let report = h.pass();
    assert_eq!(report.dropped, 1);
    let metrics = h.cache.metrics();
    assert_eq!(metrics.stalled_watchers.get(), 0);
    assert_eq!(metrics.watchers.get(), 0);
    assert_eq!(h.worker.poll_timeout(), None, "nothing left to serve");
}

/// Goal: sendInitialEvents streams the state as ADDED in key order, then the
/// initial-events-end bookmark, then changes; with a selector only matching objects.
#[test]
fn initial_state_then_end_bookmark_then_changes() {
    let objects = vec![
        pod("b", "2", 1, &[("app", "web")], "n1"),
        pod("a", "1", 1, &[("app", "web")], "n1"),
        pod("a", "3", 1, &[("app", "db")], "n1"),
    ];
    let mut h = Harness::with_objects(config(), 1, objects);
    let mut request = WatchRequest::new(WatchStart::InitialState { min_revision: None });
    request.labels = LabelSelector::parse("app=web").unwrap();
    request.queue_capacity = Some(1);
    let watch = h.watch(request);
    assert_eq!(watch.state(), WatcherState::Initial);
    let rv = h.put("c", "4", &[("app", "web")], "n1");
    let mut seen = vec![Vec::new()];
    h.settle(&[&watch], &mut seen, 50);
    assert_eq!(
        seen[0],
        [
            Seen::Initial("a/1".into(), 1),
            Seen::Initial("b/2".into(), 1),
            Seen::Bookmark(1, true),
            Seen::Event(EventType::Added, "c/4".into(), rv),
        ]
    );
    assert_eq!(watch.state(), WatcherState::Synced);
    assert_no_skips(&h);
}

/// Goal: sendInitialEvents with a minimum revision above the cache waits for it, and gives up
/// with 504 "Too large resource version" after fresh_wait_max.
#[test]
fn initial_state_waits_for_min_revision_then_times_out() {
    let mut h = Harness::new(config());
    let waits = h.watch_from(
        WatchStart::InitialState {
            min_revision: Some(3),
        },
        10,
    );
    let gives_up = h.watch_from(
        WatchStart::InitialState {
            min_revision: Some(100),
        },
        10,
    );
    h.put("ns", "a", &[], "n1");
    h.put("ns", "b", &[], "n1");
    assert!(drain(&waits).is_empty());
    h.advance(Duration::from_millis(1));
    h.pass();
    assert_eq!(
        drain(&waits),
        [
            Seen::Initial("ns/a".into(), 2),
            Seen::Initial("ns/b".into(), 3),
            Seen::Bookmark(3, true),
        ]
    );
    // It gives up at `fresh_wait_max` after registration: not a moment before, and then.
    let wait = h.cache.config().fresh_wait_max;
    h.advance(wait - Duration::from_millis(1) - Duration::from_micros(1));
    assert_eq!(end_of(&gives_up), None);
    h.advance(Duration::from_micros(1));
    assert_eq!(
        end_of(&gives_up),
        Some(WatchEnd::TooLargeResourceVersion {
            requested: 100,
            current: 3
        })
    );
}

/// Goal: the initial-phase no-progress timeout ends a watch that accepts nothing for 30 s and
/// releases it; a slow watch that accepts something at least every 20 s is never ended.
#[test]
fn initial_phase_timeout_only_without_progress() {
    let objects: Vec<_> = (0..10)
        .map(|i| pod("ns", &format!("p{i}"), 1, &[], "n1"))
        .collect();
    let mut h = Harness::with_objects(config(), 1, objects);
    let stuck = h.watch_from(WatchStart::InitialState { min_revision: None }, 1);
    let slow = h.watch_from(WatchStart::InitialState { min_revision: None }, 1);
    let mut slow_seen = Vec::new();
    for _ in 0..15 {
        for _ in 0..200 {
            h.advance(Duration::from_millis(100));
        }
        slow_seen.extend(take(&slow, 1));
    }
    assert_eq!(end_of(&stuck), None, "queued item first");
    assert_eq!(take(&stuck, 1).len(), 1);
    assert_eq!(end_of(&stuck), Some(WatchEnd::InitialNoProgress));
    assert_eq!(
        h.cache
            .metrics()
            .terminations(TerminationReason::InitialNoProgress),
        1
    );
    let mut seen = vec![slow_seen];
    h.settle(&[&slow], &mut seen, 50);
    assert_eq!(
        seen[0].len(),
        11,
        "ten objects and the end bookmark: {:?}",
        seen[0]
    );
    assert_eq!(slow.state(), WatcherState::Synced);
}

/// Goal: legacy mode reproduces Kubernetes before KEP-6268: an overflowing watcher is waited
/// for on the budget, then force-closed as unresponsive; a healthy one is unaffected.
#[test]
fn legacy_mode_force_closes_an_overflowing_watcher() {
    let config = CacheConfig {
        mode: WatchMode::Legacy,
        ..config()
    };
    let mut h = Harness::new(config);
    let slow = h.watch_from(WatchStart::Now, 1);
    let healthy = h.watch_from(WatchStart::Now, 100);
    h.put("ns", "a", &[], "n1");
    h.put("ns", "b", &[], "n1");
    assert!(
        h.dispatcher.is_blocked(),
        "the dispatcher waits on the budget"
    );
    let deadline = h.dispatcher.poll_timeout().unwrap();
    assert!(deadline > h.now);
    h.advance(deadline - h.now);
    assert!(!h.dispatcher.is_blocked());
    assert_eq!(take(&slow, 5).len(), 1);
    assert_eq!(end_of(&slow), Some(WatchEnd::Unresponsive));
    assert_eq!(
        h.cache
            .metrics()
            .terminations(TerminationReason::Unresponsive),
        1
    );
    assert_eq!(drain(&healthy).len(), 2);
    // A blocked watcher that makes room in time is not closed.
    let slow2 = h.watch_from(WatchStart::Now, 1);
    h.put("ns", "c", &[], "n1");
    h.put("ns", "d", &[], "n1");
    assert!(h.dispatcher.is_blocked());
    take(&slow2, 1);
    h.dispatcher.retry_blocked(h.now);
    assert!(!h.dispatcher.is_blocked());
    assert_eq!(take(&slow2, 5).len(), 1);
    assert_eq!(end_of(&slow2), None);
}

/// Goal: a multi-event revision is delivered whole, even when it is larger than the queue,
/// and a stall never splits it. Method: a queue of 2, a revision of 5 events.
#[test]
fn revisions_are_never_split() {
    let mut h = Harness::new(config());
    let watch = h.watch_from(WatchStart::Now, 2);
    let one = h.put("ns", "a", &[], "n1");
    let big = h.write(|rv| {
        (0..5)
            .map(|i| Change::put(pod("ns", &format!("b{i}"), rv, &[], "n1")))
            .collect()
    });
    assert_eq!(watch.state(), WatcherState::Unsynced);
    assert_eq!(revisions(&drain(&watch)), [one]);
    h.pass();
    assert_eq!(
        revisions(&drain(&watch)),
        [big; 5],
        "the whole revision at once"
    );
}

/// Goal: a relist tells every watcher the truth with a 410 after its backlog.
#[test]
fn reset_ends_every_watcher_with_410() {
    let mut h = Harness::new(config());
    let synced = h.watch_from(WatchStart::Now, 10);
    let unsynced = h.watch_from(WatchStart::Now, 1);
    h.put("ns", "a", &[], "n1");
    h.put("ns", "b", &[], "n1");
    h.dispatcher
        .handle_reset(h.now, 100, vec![pod("ns", "z", 90, &[], "n1")]);
    h.pass();
    assert_eq!(drain(&synced).len(), 2);
    assert!(matches!(end_of(&synced), Some(WatchEnd::Expired { .. })));
    assert_eq!(drain(&unsynced).len(), 1);
    assert!(matches!(end_of(&unsynced), Some(WatchEnd::Expired { .. })));
    assert_eq!(h.cache.latest().len(), 1);
    assert_eq!(h.cache.revision(), 100);
    assert_eq!(h.cache.metrics().watchers.get(), 0);
}

/// Goal: snapshots serve reads at exact revisions inside the window and refuse others.
#[test]
fn snapshots_serve_exact_revisions() {
    let config = CacheConfig {
        history_capacity_min: 5,
        history_capacity_max: 5,
        ..config()
    };
    let mut h = Harness::new(config);
    let r1 = h.put("ns", "a", &[], "n1");
    let r2 = h.put("ns", "b", &[], "n1");
    assert_eq!(h.cache.snapshot_at(r1).unwrap().len(), 1);
    assert_eq!(h.cache.snapshot_at(r2).unwrap().len(), 2);
    assert!(matches!(
        h.cache.snapshot_at(r2 + 1),
        Err(watchkeeper_core::ReadError::TooLarge { .. })
    ));
    for i in 0..10 {
        h.put("ns", &format!("c{i}"), &[], "n1");
    }
    assert!(matches!(
        h.cache.snapshot_at(r1),
        Err(watchkeeper_core::ReadError::TooOld { .. })
    ));
    let latest = h.cache.latest();
    assert_eq!(latest.len(), 12);
    assert_eq!(latest.range(Some("ns/c"), None).count(), 10);
}

/// Goal: the request deadline ends a watch cleanly, synced or not, with a bookmark shortly
/// before it for synced watchers that allow bookmarks.
#[test]
fn deadlines_end_watches_with_a_bookmark_before() {
    let mut h = Harness::new(config());
    let mut request = WatchRequest::new(WatchStart::Now);
    request.deadline = Some(h.now + Duration::from_secs(10));
    let synced = h.watch(request.clone());
    request.queue_capacity = Some(1);
    let unsynced = h.watch(request);
    h.put("ns", "a", &[], "n1");
    h.put("ns", "b", &[], "n1");
    assert_eq!(drain(&synced).len(), 2);
    h.dispatcher.handle_progress(h.now, 5);
    let micro = Duration::from_micros(1);
    h.advance(Duration::from_secs(8) - micro);
    assert_eq!(drain(&synced), [], "not a moment early");
    h.advance(micro);
    assert_eq!(
        drain(&synced),
        [Seen::Bookmark(5, false)],
        "a bookmark 2 s before the deadline"
    );
    assert_eq!(end_of(&synced), None);
    h.advance(Duration::from_secs(2) - micro);
    assert_eq!(end_of(&synced), None);
    h.advance(Duration::from_micros(1));
    assert_eq!(end_of(&synced), Some(WatchEnd::Deadline), "at the deadline");
    // The worker ends its own at its next pass (within a pass period).
    h.advance(h.cache.config().pass_period_idle);
    take(&unsynced, 5);
    assert_eq!(end_of(&unsynced), Some(WatchEnd::Deadline));
    let ended: usize = h.passes.iter().map(|p| p.ended).sum();
    assert_eq!(ended, 1, "the unsynced one was ended by a pass");
}

/// Goal: a revision with changes proves the cache is at the revision before it, even when
/// the store's progress over the revisions between (other resources' writes) was not applied
/// (the server applies the mark lazily): a watch waiting for that revision starts its initial
/// state there, never at the older dispatched revision (the harness's etcd fault run found an
/// initial state labelled 1 for a watch that asked for at least 9).
#[test]
fn a_revision_with_changes_starts_waiting_watches_at_the_revision_before_it() {
    let mut h = Harness::new(config());
    let first = h.put("ns", "a", &[], "n1");
    let mut request = WatchRequest::new(WatchStart::InitialState {
        min_revision: Some(first + 4),
    });
    request.allow_bookmarks = true;
    let watch = h.watch(request);
    assert_eq!(
        h.dispatcher.waiting_len(),
        1,
        "waits for revision {}",
        first + 4
    );
    // Revisions first + 1 ..= first + 4 carried nothing for this cache, and their progress was
    // never applied; first + 5 has a change.
    h.revision += 4;
    let fifth = h.put("ns", "b", &[], "n1");
    assert_eq!(h.dispatcher.waiting_len(), 0);
    h.pass();
    h.pass();
    let seen = drain(&watch);
    assert!(
        seen.contains(&Seen::Bookmark(first + 4, true)),
        "the initial state is at the revision asked for: {seen:?}"
    );
    assert_eq!(
        revisions(
            &seen
                .iter()
                .filter(|s| matches!(s, Seen::Event(..)))
                .cloned()
                .collect::<Vec<_>>()
        ),
        vec![fifth],
        "{seen:?}"
    );
}

/// Goal: bookmarks before a deadline follow Kubernetes' `cacheWatcher.nextBookmarkTime`: a
/// watch registered exactly `bookmark_before_deadline` before its deadline is due its bookmark
/// at once and gets it once; one registered later than that instant gets none.
#[test]
fn a_watch_registered_at_its_pre_deadline_instant_gets_that_bookmark_once() {
    let mut h = Harness::new(config());
    let before = h.cache.config().bookmark_before_deadline;
    let micro = Duration::from_micros(1);
    let mut request = WatchRequest::new(WatchStart::Now);
    request.deadline = Some(h.now + before);
    let at_instant = h.watch(request.clone());
    request.deadline = Some(h.now + (before - micro));
    let later = h.watch(request);
    h.put("ns", "a", &[], "n1");
    assert_eq!(drain(&at_instant).len(), 1);
    assert_eq!(drain(&later).len(), 1);
    h.dispatcher.handle_progress(h.now, 5);
    h.advance(micro);
    assert_eq!(
        drain(&at_instant),
        [Seen::Bookmark(5, false)],
        "due at registration"
    );
    assert_eq!(drain(&later), [], "registered after its bookmark instant");
    h.dispatcher.handle_progress(h.now, 6);
    h.advance(before - micro - micro);
    assert_eq!(drain(&at_instant), [], "once");
    assert_eq!(drain(&later), []);
    assert_eq!(end_of(&later), Some(WatchEnd::Deadline));
    h.advance(micro);
    assert_eq!(end_of(&at_instant), Some(WatchEnd::Deadline));
}

/// Goal: a reader that empties its queue while unsynced is served at once, as soon as the
/// worker's share of a core allows and never later than the normal pass period; it is not
/// held to the idle period (which would cap it at one queue per idle period: the resync
/// benchmark measured readers faster than the writes that never caught up). A synced reader
/// that empties its queue does not wake the worker. Method: queue of 2, a stall, a pass that
/// finds the queue full (idle period next), then the reader drains.
#[test]
fn an_unsynced_reader_that_drains_is_served_as_soon_as_the_cpu_share_allows() {
    let mut h = Harness::new(config());
    let normal = h.cache.config().pass_period_normal;
    let idle = h.cache.config().pass_period_idle;
    assert!(idle > normal);
    let slow = h.watch_from(WatchStart::Now, 2);
    let healthy = h.watch_from(WatchStart::Now, 100);
    let mut written = Vec::new();
    for i in 0..10 {
        written.push(h.put("ns", &format!("p{i}"), &[], "n1"));
    }
    assert_eq!(slow.state(), WatcherState::Unsynced);
    // The stall's first pass, then one that finds the queue still full: idle period.
    h.pass();
    let report = h.pass();
    assert_eq!(report.members, 0, "{report:?}");
    assert_eq!(h.worker.poll_timeout(), Some(h.now + idle));
    // A synced reader emptying its queue changes nothing.
    assert_eq!(revisions(&drain(&healthy)), written);
    assert_eq!(h.worker.poll_timeout(), Some(h.now + idle));
    // The unsynced reader empties its queue: the next pass is due at once, held back only by
    // the worker's share of a core (the last pass's duration times `pass_busy_factor`), and
    // never later than the normal period.
    let mut seen = drain(&slow);
    assert_eq!(seen.len(), 2);
    assert_eq!(
        h.worker.poll_timeout(),
        Some(h.now),
        "no pass duration recorded yet"
    );
    let factor = h.cache.config().pass_busy_factor;
    let took = normal / (2 * factor);
    h.worker.record_pass_duration(normal);
    assert_eq!(h.worker.poll_timeout(), Some(h.now + normal), "a long pass");
    h.worker.record_pass_duration(took);
    assert_eq!(h.worker.poll_timeout(), Some(h.now + took * factor));
    let passes = h.passes.len();
    h.advance(took * factor);
    assert_eq!(
        h.passes.len(),
        passes + 1,
        "one pass ran when its CPU share allowed"
    );
    let served = h.passes.last().expect("a pass ran");
    assert_eq!(served.members, 1, "{served:?}");
    seen.extend(drain(&slow));
    assert_eq!(seen.len(), 4);
    let mut rest = vec![seen];
    h.settle(&[&slow], &mut rest, 50);
    assert_eq!(revisions(&rest[0]), written, "every event once, in order");
    assert_eq!(slow.state(), WatcherState::Synced);
    assert_no_skips(&h);
}

/// Goal (issue 14): a pass costs nothing for unsynced watchers that cannot take an event, and
/// a watcher that drains is served at the next pass whatever the number of such laggards.
/// Method: 300 never-reading watchers stall with full queues (more than `pass_members_max`);
/// after the pass that finds them full, passes look at no candidate; one of them drains and
/// the next pass serves it, alone, first.
#[test]
fn never_reading_laggards_cost_a_pass_nothing_and_a_drained_one_goes_first() {
    let mut h = Harness::new(CacheConfig {
        pass_members_max: 64,
        ..config()
    });
    let laggards: Vec<_> = (0..300).map(|_| h.watch_from(WatchStart::Now, 2)).collect();
    let mut written = Vec::new();
    for i in 0..6 {
        written.push(h.put("ns", &format!("p{i}"), &[], "n1"));
    }
    assert_eq!(h.worker.unsynced_len(), 0, "still in the worker's mailbox");
    let first = h.pass();
    assert_eq!(first.unsynced_before, 300);
    // New stalls are candidates once; found full, they leave the ready set.
    assert_eq!(h.worker.ready_len(), 0, "{first:?}");
    let quiet = h.pass();
    assert_eq!(
        (quiet.candidates, quiet.members, quiet.waited),
        (0, 0, 0),
        "{quiet:?}"
    );
    // Writes go on; the laggards still cost nothing.
    for i in 0..3 {
        written.push(h.put("ns", &format!("q{i}"), &[], "n1"));
    }
    assert_eq!(h.pass().candidates, 0);
    // One drains: it is the only candidate of the next pass, and it is served.
    let reader = &laggards[150];
    let mut seen = drain(reader);
    assert_eq!(seen.len(), 2);
    assert_eq!(h.worker.ready_len(), 0, "raised, taken at the next pass");
    let report = h.pass();
    assert_eq!((report.candidates, report.members), (1, 1), "{report:?}");
    assert_eq!(report.served[0], (reader.id(), 0));
    let mut rest = vec![std::mem::take(&mut seen)];
    rest[0].extend(drain(reader));
    h.settle(&[reader], &mut rest, 50);
    assert_eq!(revisions(&rest[0]), written, "every event once, in order");
    assert_eq!(reader.state(), WatcherState::Synced);
    assert_eq!(h.worker.unsynced_len(), 299);
    // A laggard that goes away is dropped without any walk of the others.
    drop(laggards);
    let report = h.pass();
    assert_eq!(report.dropped, 299, "{report:?}");
    assert_eq!(h.worker.unsynced_len(), 0);
    assert_no_skips(&h);
}

/// Goal (issue 14, consumer-driven design): an unsynced watcher whose consumer reads fast is
/// caught up as fast as it reads, not one queue capacity per pass, from the very events of the
/// history (one serialization per event); the worker then hands it off and it is live again.
/// Method: a queue of 10 stalls 1,000 events behind; its consumer reads everything with no
/// pass in between; one pass hands it back.
#[test]
fn a_fast_consumer_catches_up_without_passes() {
    let mut h = Harness::new(consumer_config());
    let fast = h.watch_from(WatchStart::Now, 10);
    let healthy = h.watch_from(WatchStart::Now, 2_000);
    let mut written = Vec::new();
    for i in 0..1_000 {
        written.push(h.put("ns", &format!("p{}", i % 50), &[], "n1"));
    }
    assert_eq!(fast.state(), WatcherState::Unsynced);
    let adopt = h.pass();
    assert_eq!(
        (adopt.candidates, adopt.handed_to_consumers),
        (0, 1),
        "found full, handed to its consumer: {adopt:?}"
    );
    assert_eq!(h.worker.ready_len(), 0);
    let passes = h.passes.len();
    let seen = drain(&fast);
    assert_eq!(h.passes.len(), passes, "no pass ran");
    assert_eq!(revisions(&seen), written, "every event once, in order");
    assert_eq!(fast.state(), WatcherState::Unsynced, "not live yet");
    // Stuck at the end of the history: the next pass (at the normal period) hands it off.
    let normal = h.cache.config().pass_period_normal;
    assert!(h.worker.poll_timeout().is_some_and(|t| t <= h.now + normal));
    h.advance(normal);
    assert_eq!(fast.state(), WatcherState::Synced);
    assert_eq!(
        h.cache.metrics().watcher_catchup_events.snapshot().1,
        990,
        "what its consumer refilled counts as caught up"
    );
    let rv = h.put("ns", "after", &[], "n1");
    assert_eq!(revisions(&drain(&fast)), [rv]);
    assert_eq!(drain(&healthy).len(), 1_001);
    assert_no_skips(&h);
}

/// Goal (consumer-driven design): a consumer that falls below the history's floor while it
/// refills its own queue gets its backlog, then one 410 (never a gap); laggards that never
/// read cost a pass nothing.
#[test]
fn a_consumer_that_ages_out_gets_its_backlog_then_a_410() {
    let config = CacheConfig {
        history_capacity_min: 10,
        history_capacity_max: 10,
        event_fresh_duration: Duration::from_secs(1),
        ..consumer_config()
    };
    let mut h = Harness::new(config);
    let slow = h.watch_from(WatchStart::Now, 2);
    let first = h.put("ns", "a", &[], "n1");
    let second = h.put("ns", "b", &[], "n1");
    let third = h.put("ns", "c", &[], "n1");
    h.pass();
    // It reads two, refills one (the third), and the history moves on past it.
    assert_eq!(revisions(&take(&slow, 3)), [first, second, third]);
    for i in 0..30 {
        h.put("ns", &format!("d{i}"), &[], "n1");
    }
    let quiet = h.pass();
    assert_eq!(quiet.candidates, 0, "{quiet:?}");
    assert_eq!(drain(&slow), [], "nothing past the floor is read");
    h.advance(h.cache.config().pass_period_normal);
    match end_of(&slow) {
        Some(WatchEnd::Expired {
            reason, position, ..
        }) => {
            assert_eq!(reason, TerminationReason::ResourceExpired);
            assert_eq!(position, third);
        }
        other => panic!("expected a 410, got {other:?}"),
    }
    assert_eq!(h.cache.metrics().stalled_watchers.get(), 0);
    assert_eq!(h.cache.metrics().watchers.get(), 0);
}

/// Goal (consumer-driven design): a watch that starts behind and reads slowly through its
/// consumer is making progress, so the initial no-progress timeout does not end it; one that
/// reads nothing is ended.
#[test]
fn a_consumer_making_progress_is_not_ended_for_no_progress() {
    let config = CacheConfig {
        initial_no_progress_timeout: Duration::from_secs(3),
        ..consumer_config()
    };
    let mut h = Harness::new(config);
    let mut written = Vec::new();
    for i in 0..40 {
        written.push(h.put("ns", &format!("p{i}"), &[], "n1"));
    }
    let reader = h.watch_from(WatchStart::After(1), 1);
    let idle = h.watch_from(WatchStart::After(1), 1);
    let mut seen = Vec::new();
    for _ in 0..39 {
        h.advance(Duration::from_secs(1));
        seen.extend(take(&reader, 1));
    }
    assert_eq!(end_of(&reader), None);
    assert_eq!(
        take(&idle, 2).len(),
        1,
        "what its first pass queued, then the end"
    );
    assert_eq!(end_of(&idle), Some(WatchEnd::InitialNoProgress));
    let mut rest = vec![seen];
    h.settle(&[&reader], &mut rest, 50);
    assert_eq!(revisions(&rest[0]), written);
    assert_eq!(reader.state(), WatcherState::Synced);
    assert_no_skips(&h);
}

/// Goal (consumer-driven design): never-reading laggards cost a pass nothing, and one whose
/// client goes away is dropped at the next pass. Method: 200 stalled watchers that never read.
#[test]
fn consumer_driven_laggards_cost_a_pass_nothing() {
    let mut h = Harness::new(consumer_config());
    let laggards: Vec<_> = (0..200).map(|_| h.watch_from(WatchStart::Now, 2)).collect();
    for i in 0..5 {
        h.put("ns", &format!("p{i}"), &[], "n1");
    }
    let first = h.pass();
    assert_eq!(first.unsynced_before, 200);
    // New stalls are looked at once (their queues are full), then handed to their consumers.
    assert_eq!(first.handed_to_consumers, 200, "{first:?}");
    for i in 0..5 {
        h.put("ns", &format!("q{i}"), &[], "n1");
    }
    let quiet = h.pass();
    assert_eq!((quiet.candidates, quiet.examined), (0, 0), "{quiet:?}");
    let mut laggards = laggards;
    laggards.truncate(1);
    let report = h.pass();
    assert_eq!(report.dropped, 199, "{report:?}");
    assert_eq!(h.worker.unsynced_len(), 1);
}

/// Goal: the hand-off catches up on revisions dispatched after the worker's last scan (a
/// thread race the deterministic driver reproduces by holding the hand-off until the next
/// revision is dispatched): the dispatcher pushes them itself, first one included, then the
/// watcher is live; nothing is skipped or repeated. For both designs.
#[test]
fn the_hand_off_pushes_revisions_dispatched_after_the_last_scan() {
    for config in [config(), consumer_config()] {
        let mut h = Harness::new(config);
        h.hold_handoffs();
        let slow = h.watch_from(WatchStart::Now, 2);
        let mut written = Vec::new();
        for i in 0..6 {
            written.push(h.put("ns", &format!("p{i}"), &[], "n1"));
        }
        let mut seen = drain(&slow);
        let report = h.pass();
        seen.extend(drain(&slow));
        let report = if report.resynced == 0 {
            let again = h.pass();
            seen.extend(drain(&slow));
            again
        } else {
            report
        };
        assert_eq!(report.resynced, 1, "{report:?}");
        assert_eq!(h.worker.held_len(), 1);
        // Two revisions are dispatched before the dispatcher takes the hand-off.
        written.push(h.put("ns", "late1", &[], "n1"));
        h.dispatcher.handle_progress(h.now, h.revision + 1);
        h.revision += 1;
        written.push(h.put("ns", "late2", &[], "n1"));
        h.dispatcher.handle_messages(h.now);
        h.check();
        assert_eq!(slow.state(), WatcherState::Synced);
        seen.extend(drain(&slow));
        assert_eq!(
            revisions(&seen),
            written,
            "the late revisions once, in order"
        );
        // Caught up while unsynced: all but the two queued before the stall and `late2`
        // (the hand-off was taken with `late1`'s progress, so `late2` went out live).
        assert_eq!(
            h.cache.metrics().watcher_catchup_events.snapshot().1,
            written.len() as u64 - 3,
            "{:?}",
            h.cache.config().catchup_design
        );
        let rv = h.put("ns", "live", &[], "n1");
        assert_eq!(revisions(&drain(&slow)), [rv]);
        assert_no_skips(&h);
    }
}

/// The work both actors did over a stretch of writes and timer steps, counted in operations.
#[derive(Debug, Default, PartialEq, Eq)]
struct Work {
    /// Dispatcher: watchers evaluated against events, items pushed, stalls.
    evaluated: usize,
    pushed: usize,
    stalled: usize,
    /// Worker: passes, watchers they looked at, candidates, members, events scanned, pushes.
    passes: usize,
    examined: usize,
    candidates: usize,
    members: usize,
    events_scanned: usize,
    pushes: usize,
}

/// 3 reading watchers next to `never` never-reading ones: the work of the 100 writes
/// (1 ms apart, every due timer run) after the never-reading ones went unsynced, and what the
/// healthy ones received.
fn steady_work(never: usize) -> (Work, Vec<Vec<Revision>>) {
    let mut h = Harness::new(CacheConfig::default());
    assert_eq!(
        h.cache.config().catchup_design,
        CatchUpDesign::ConsumerDriven
    );
    let healthy: Vec<_> = (0..3).map(|_| h.watch_from(WatchStart::Now, 10)).collect();
    let idle: Vec<_> = (0..never)
        .map(|_| h.watch_from(WatchStart::Now, 10))
        .collect();
    let mut received = vec![Vec::new(); healthy.len()];
    let step = |h: &mut Harness, i: usize, work: &mut Work, received: &mut Vec<Vec<Revision>>| {
        h.revision += 1;
        let rv = h.revision;
        let change = Change::put(pod("ns", &format!("p{}", i % 20), rv, &[], "n1"));
        let report = h.dispatcher.handle_revision(h.now, rv, vec![change]);
        h.worker.release_handoffs();
        h.check();
        work.evaluated += report.evaluated;
        work.pushed += report.pushed;
        work.stalled += report.stalled;
        for (watch, seen) in healthy.iter().zip(received.iter_mut()) {
            seen.extend(revisions(&drain(watch)));
        }
        let passes = h.passes.len();
        h.advance(Duration::from_millis(1));
        for pass in &h.passes[passes..] {
            work.passes += 1;
            work.examined += pass.examined;
            work.candidates += pass.candidates;
            work.members += pass.members;
            work.events_scanned += pass.events_scanned;
            work.pushes += pass.pushes + pass.retry_pushes;
        }
    };
    // The never-reading watchers fill their queues, stall, and are adopted by a pass.
    let mut warm_up = Work::default();
    for i in 0..20 {
        step(&mut h, i, &mut warm_up, &mut received);
    }
    h.advance(h.cache.config().pass_period_idle);
    assert_eq!(warm_up.stalled, never, "{warm_up:?}");
    assert_eq!(h.worker.unsynced_len(), never);
    assert!(idle.iter().all(|w| w.state() == WatcherState::Unsynced));
    for seen in &mut received {
        seen.clear();
    }
    let mut work = Work::default();
    for i in 20..120 {
        step(&mut h, i, &mut work, &mut received);
    }
    assert_eq!(h.worker.unsynced_len(), never, "nobody ended");
    assert!(healthy.iter().all(|w| w.state() == WatcherState::Synced));
    assert_no_skips(&h);
    drop(idle);
    (work, received)
}

/// Goal (issue 14): a never-reading watcher costs nothing per event once it is unsynced — the
/// dispatcher's per-event work and the worker's passes over the same writes are the same with
/// 5 or 500 of them, and the healthy watchers receive the same events. Method: count
/// operations (not time) over 100 writes and every due timer, after the never-reading
/// watchers stalled and were handed to their consumers.
#[test]
fn never_reading_watchers_cost_no_work_per_event_once_unsynced() {
    let (few, few_received) = steady_work(5);
    let (many, many_received) = steady_work(500);
    assert_eq!(few, many, "work grew with never-reading watchers");
    assert_eq!(few_received, many_received);
    // What is left is the healthy watchers' own: 3 evaluations and pushes per event.
    assert_eq!((few.evaluated, few.pushed), (300, 300), "{few:?}");
    assert_eq!(
        (few.candidates, few.members, few.pushes),
        (0, 0, 0),
        "{few:?}"
    );
    assert!(few_received.iter().all(|r| r.len() == 100));
}

/// Goal: a cache-sized queue grows for a consumer that reads everything in bursts, so it
/// keeps its place on the live path, and not for one that never reads (whose memory stays its
/// first capacity) nor past one growth for one that reads slower than the writes; every
/// reader still gets every event once, in order. Method: queues sized by the cache (10 on a
/// new cache), 100 writes; one reader takes everything after writes 0, 15, 30, 60 and 90
/// (bursts of 15 and 30: each at most twice the capacity it meets, so each growth is enough),
/// one takes one item every other write, three never read; then everyone drains and settles.
#[test]
fn a_queue_grows_for_a_reader_late_for_bursts_and_not_for_one_that_cannot_keep_up() {
    let mut h = Harness::new(consumer_config());
    let request = || WatchRequest::new(WatchStart::Now);
    let bursty = h.watch(request());
    let slow = h.watch(request());
    let never: Vec<Watch> = (0..3).map(|_| h.watch(request())).collect();
    assert_eq!(
        bursty.queue().capacity(),
        10,
        "Kubernetes' size on a new cache"
    );
    let mut written = Vec::new();
    let (mut bursty_seen, mut slow_seen) = (Vec::new(), Vec::new());
    for i in 0..100 {
        written.push(h.put("ns", &format!("p{}", i % 7), &[], "n1"));
        if [0, 15, 30, 60, 90].contains(&i) {
            bursty_seen.extend(drain(&bursty));
        }
        if i % 2 == 0 {
            slow_seen.extend(take(&slow, 1));
        }
    }
    let metrics = h.cache.metrics();
    assert_eq!(
        bursty.state(),
        WatcherState::Synced,
        "never left the live path"
    );
    assert_eq!(
        bursty.queue().capacity(),
        40,
        "10, 20 at write 11, 40 at write 51"
    );
    assert_eq!(slow.state(), WatcherState::Unsynced);
    assert_eq!(slow.queue().capacity(), 20, "one growth, then it stalled");
    for watch in &never {
        assert_eq!(
            watch.queue().capacity(),
            10,
            "a never-reading watcher does not grow"
        );
        assert_eq!(watch.state(), WatcherState::Unsynced);
    }
    assert_eq!(metrics.watch_queue_growths.get(), 3);
    assert_eq!(
        metrics.watcher_stalls.get(),
        4,
        "the slow reader and the three never-readers"
    );
    let mut seen = vec![bursty_seen, slow_seen, Vec::new(), Vec::new(), Vec::new()];
    let all: Vec<&Watch> = [&bursty, &slow].into_iter().chain(never.iter()).collect();
    h.settle(&all, &mut seen, 100);
    for got in &seen {
        assert_eq!(
            revisions(&events(got)),
            written,
            "every event once, in order"
        );
    }
    assert_no_skips(&h);
}

/// Goal: legacy mode keeps Kubernetes' fixed channel: a queue sized by the cache never grows.
#[test]
fn legacy_mode_queues_do_not_grow() {
    let mut h = Harness::new(CacheConfig {
        mode: WatchMode::Legacy,
        ..config()
    });
    let watch = h.watch(WatchRequest::new(WatchStart::Now));
    let rv = h.put("ns", "a", &[], "n1");
    assert_eq!(revisions(&drain(&watch)), [rv]);
    assert_eq!(watch.queue().grow_after_drain(), None);
    assert_eq!(watch.queue().capacity(), 10);
}

/// Goal: shutdown ends every watcher after what it was owed, those that allow bookmarks with
/// one final bookmark at the dispatched revision (a resume point with no gap and no
/// duplicate): a synced watcher at once, an unsynced one once the worker has caught it up, one
/// without bookmarks and one waiting for a future revision with the end alone; a watch
/// registered afterwards ends at once; writes are still applied. Method: four watchers, two
/// writes, progress beyond them, shutdown, then the stalled one is read.
#[test]
fn shutdown_ends_watchers_after_a_final_bookmark_at_the_dispatched_revision() {
    let mut h = Harness::new(consumer_config());
    let synced = h.watch_from(WatchStart::Now, 100);
    let mut request = WatchRequest::new(WatchStart::Now);
    request.allow_bookmarks = false;
    request.queue_capacity = Some(100);
    let quiet = h.watch(request);
    let stalled = h.watch_from(WatchStart::Now, 1);
    let future = h.watch_from(WatchStart::After(1_000), 100);
    let a = h.put("ns", "a", &[], "n1");
    let b = h.put("ns", "b", &[], "n1");
    assert_eq!(stalled.state(), WatcherState::Unsynced);
    h.dispatcher.handle_progress(h.now, b + 5);
    h.revision = b + 5;
    assert!(!h.dispatcher.is_shutting_down());
    h.dispatcher.handle_shutdown(h.now);
    h.check();
    assert!(h.dispatcher.is_shutting_down());
    let seen = drain(&synced);
    assert_eq!(revisions(&seen), [a, b]);
    assert_eq!(seen.last(), Some(&Seen::Bookmark(b + 5, false)), "{seen:?}");
    assert_eq!(end_of(&synced), Some(WatchEnd::Shutdown));
    let seen = drain(&quiet);
    assert_eq!(revisions(&seen), [a, b]);
    assert!(!seen.iter().any(|s| matches!(s, Seen::Bookmark(..))));
    assert_eq!(end_of(&quiet), Some(WatchEnd::Shutdown));
    assert!(drain(&future).is_empty());
    assert_eq!(end_of(&future), Some(WatchEnd::Shutdown));
    // Writes go on (in-flight requests wait for them); nobody synced is left to get them.
    let c = h.put("ns", "c", &[], "n1");
    let mut seen = vec![Vec::new()];
    h.settle(&[&stalled], &mut seen, 50);
    assert_eq!(revisions(&seen[0]), [a, b, c], "{seen:?}");
    assert_eq!(seen[0].last(), Some(&Seen::Bookmark(c, false)), "{seen:?}");
    assert_eq!(end_of(&stalled), Some(WatchEnd::Shutdown));
    let late = h.watch_from(WatchStart::Now, 10);
    assert!(drain(&late).is_empty());
    assert_eq!(end_of(&late), Some(WatchEnd::Shutdown));
    assert_eq!(
        h.cache.metrics().terminations(TerminationReason::Shutdown),
        5
    );
    assert_no_skips(&h);
}

/// Goal: the driver hooks do what threads rely on. The notify hook runs when a watcher is
/// handed to the worker and when a consumer empties an unsynced queue (a parked worker thread
/// wakes); held hand-offs (deterministic drivers) stay with the worker until released, and
/// turning the hold off releases them to the dispatcher.
#[test]
fn the_worker_notify_hook_and_held_hand_offs() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let mut h = Harness::new(consumer_config());
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = calls.clone();
    h.worker.set_notify(Box::new(move || {
        counted.fetch_add(1, Ordering::SeqCst);
    }));
    h.hold_handoffs();
    assert_eq!(h.worker.held_len(), 0);
    let watch = h.watch_from(WatchStart::Now, 2);
    let mut written = Vec::new();
    for i in 0..4 {
        written.push(h.put("ns", &format!("p{i}"), &[], "n1"));
    }
    assert_eq!(watch.state(), WatcherState::Unsynced);
    let handed = calls.load(Ordering::SeqCst);
    assert!(handed >= 1, "the stall woke the worker");
    h.pass();
    let mut seen = drain(&watch);
    assert!(
        calls.load(Ordering::SeqCst) > handed,
        "emptying an unsynced queue woke the worker"
    );
    // The consumer reads the rest of the history itself; the pass that finds it caught up
    // holds its hand-off.
    seen.extend(drain(&watch));
    h.pass();
    assert_eq!(h.worker.held_len(), 1, "the hand-off is held");
    assert_eq!(watch.state(), WatcherState::Unsynced);
    h.worker.set_hold_handoffs(false);
    assert_eq!(h.worker.held_len(), 0, "turning the hold off releases it");
    h.dispatcher.handle_messages(h.now);
    assert_eq!(watch.state(), WatcherState::Synced);
    written.push(h.put("ns", "after", &[], "n1"));
    seen.extend(drain(&watch));
    assert_eq!(revisions(&seen), written, "every event once, in order");
}

/// A namespace-scoped watch of at most `capacity` items.
fn scoped(h: &mut Harness, namespace: &str, start: WatchStart, capacity: usize) -> Watch {
    let mut request = WatchRequest::new(start);
    request.namespace = Some(namespace.to_owned());
    request.queue_capacity = Some(capacity);
    h.watch(request)
}

/// Goal (consumer-driven design): a consumer that refilled its queue past unrelated churn,
/// taking nothing, has moved on: when the history's floor later passes where the worker last
/// saw it, it is not expired for it, and as a drained watcher it is served at the next pass
/// and rejoins the live stream. Method: a tiny history and scan budget; a watch scoped to a
/// quiet namespace starts behind churn elsewhere; its consumer crosses the churn, more churn
/// moves the floor above its old position.
#[test]
fn a_consumer_that_crossed_unrelated_churn_is_not_expired_for_it() {
    let config = CacheConfig {
        history_capacity_min: 10,
        history_capacity_max: 10,
        event_fresh_duration: Duration::from_secs(1),
        pass_scan_units_max: 64 + 3,
        ..consumer_config()
    };
    let mut h = Harness::new(config);
    for i in 0..6 {
        h.put("b", &format!("q{i}"), &[], "n1");
    }
    let quiet = scoped(&mut h, "a", WatchStart::After(1), 2);
    // The first pass crosses three revisions (the scan budget), then hands it to its consumer.
    let first = h.pass();
    assert_eq!(
        (first.members, first.resynced, first.handed_to_consumers),
        (1, 0, 1),
        "{first:?}"
    );
    // Its consumer crosses the rest of the churn, takes nothing, and is stuck at the end.
    assert_eq!(drain(&quiet), []);
    for i in 6..14 {
        h.put("b", &format!("q{i}"), &[], "n1");
    }
    // The floor is now above where the last pass left it, below where its consumer got to.
    let report = h.pass();
    assert_eq!((report.expired, report.ended), (0, 0), "{report:?}");
    assert_eq!(end_of(&quiet), None, "not expired");
    assert!(
        report.served.iter().any(|(id, _)| *id == quiet.id()),
        "a drained watcher is served at the next pass: {report:?}"
    );
    let mut seen = vec![Vec::new()];
    h.settle(&[&quiet], &mut seen, 20);
    assert_eq!(seen[0], []);
    assert_eq!(quiet.state(), WatcherState::Synced);
    let rv = h.put("a", "p", &[], "n1");
    assert_eq!(revisions(&drain(&quiet)), [rv]);
}

/// Goal: the period after a pass follows what it did: a pass that served a member (neither
/// busy nor after a new stall) is followed by a normal period, a pass that found nothing to do
/// by an idle one. Method: a scan budget of three events, a queue of three behind ten.
#[test]
fn a_pass_that_served_someone_is_followed_by_the_normal_period() {
    let config = CacheConfig {
        pass_scan_units_max: 64 + 3,
        ..config()
    };
    let mut h = Harness::new(config);
    let normal = h.cache.config().pass_period_normal;
    let idle = h.cache.config().pass_period_idle;
    let slow = h.watch_from(WatchStart::Now, 3);
    let written: Vec<_> = (0..10)
        .map(|i| h.put("ns", &format!("p{i}"), &[], "n1"))
        .collect();
    assert_eq!(slow.state(), WatcherState::Unsynced);
    // The stall's pass finds its queue full.
    assert_eq!(h.pass().members, 0);
    let mut seen = take(&slow, 3);
    let report = h.pass();
    assert_eq!(report.members, 1, "{report:?}");
    assert!(!report.busy && report.expired == 0 && report.ended == 0);
    assert_eq!(h.worker.period(), normal);
    assert_eq!(h.worker.poll_timeout(), Some(h.now + normal));
    // Nothing read since: the next pass finds the queue full and serves nobody.
    assert_eq!(h.pass().members, 0);
    assert_eq!(h.worker.period(), idle);
    seen.extend(take(&slow, 3));
    let mut rest = vec![seen];
    h.settle(&[&slow], &mut rest, 50);
    assert_eq!(revisions(&rest[0]), written);
}

/// Goal: a relist ends the watchers of the old cache epoch, even one whose position is not
/// below the new history's floor (a relist at the revision the cache had reached), and never a
/// watcher registered after the relist. Method: an initial-state watch owned by the worker at
/// the dispatched revision, a relist at that revision, then a new watch that stalls before the
/// next pass.
#[test]
fn a_relist_ends_the_old_epoch_only() {
    let mut h = Harness::with_objects(config(), 1, vec![pod("ns", "x", 1, &[], "n1")]);
    h.put("ns", "y", &[], "n1");
    let relisted_at = h.put("ns", "z", &[], "n1");
    let mut request = WatchRequest::new(WatchStart::InitialState { min_revision: None });
    request.queue_capacity = Some(1);
    let old = h.watch(request);
    assert_eq!(old.state(), WatcherState::Initial);
    h.dispatcher.handle_reset(
        h.now,
        relisted_at,
        vec![
            pod("ns", "x", 1, &[], "n1"),
            pod("ns", "w", relisted_at, &[], "n1"),
        ],
    );
    let fresh = h.watch_from(WatchStart::Now, 1);
    let written = vec![h.put("ns", "a", &[], "n1"), h.put("ns", "b", &[], "n1")];
    assert_eq!(fresh.state(), WatcherState::Unsynced);
    let report = h.pass();
    assert_eq!(report.expired, 1, "{report:?}");
    assert_eq!(drain(&old), [], "nothing of the old epoch after the relist");
    assert!(
        matches!(end_of(&old), Some(WatchEnd::Expired { .. })),
        "the old epoch's watcher gets its 410"
    );
    let mut seen = vec![Vec::new()];
    h.settle(&[&fresh], &mut seen, 20);
    assert_eq!(revisions(&seen[0]), written);
    assert_eq!(end_of(&fresh), None, "the new epoch's watcher is not ended");
    assert_eq!(fresh.state(), WatcherState::Synced);
}

/// Goal: candidates are ordered by the free *share* of their queue, so a small queue with half
/// its room free goes before a large one with more free slots but a smaller share. Method:
/// queues of 2 and 20, one free slot in the first (50 %), five in the second (25 %).
#[test]
fn free_share_compares_small_and_large_queues_fairly() {
    let config = CacheConfig {
        pass_members_max: 1,
        ..config()
    };
    let mut h = Harness::new(config);
    let small = h.watch_from(WatchStart::Now, 2);
    let large = h.watch_from(WatchStart::Now, 20);
    for i in 0..22 {
        h.put("ns", &format!("p{i}"), &[], "n1");
    }
    assert_eq!(small.state(), WatcherState::Unsynced);
    assert_eq!(large.state(), WatcherState::Unsynced);
    take(&small, 1);
    take(&large, 5);
    let report = h.pass();
    assert_eq!(report.served[0].0, small.id(), "{report:?}");
    let report = h.pass();
    assert_eq!(report.served[0].0, large.id(), "{report:?}");
}

/// Goal: rotation order continues from the cursor the last cohort left (its last scanned
/// revision): positions at or above it first, in order, then those below it. Method: rotation
/// only, one member per pass and a scan budget of three; three laggards at 4, 8 and 12 (20
/// written); the third pass finds them at 7, 11 and 12 with the cursor at 11.
#[test]
fn rotation_continues_from_the_cursor_at_or_above_it_first() {
    let config = CacheConfig {
        pass_members_max: 1,
        pass_scan_units_max: 64 + 3,
        candidate_order: CandidateOrder::RotationOnly,
        ..config()
    };
    let mut h = Harness::new(config);
    let mut watches = Vec::new();
    for _ in 0..3 {
        watches.push(h.watch_from(WatchStart::Now, 3));
        for _ in 0..4 {
            h.put("ns", "p", &[], "n1");
        }
    }
    while h.revision < 20 {
        h.put("ns", "p", &[], "n1");
    }
    let positions: Vec<Revision> = watches
        .iter()
        .map(|w| *revisions(&take(w, 3)).last().unwrap())
        .collect();
    assert_eq!(positions, [4, 8, 12]);
    let (a, b, c) = (&watches[0], &watches[1], &watches[2]);
    // Cursor 0: the lowest position; it scans 5..=7 and leaves the cursor at 7.
    assert_eq!(h.pass().served[0].0, a.id());
    // a is full; b (8) is above the cursor; it scans 9..=11.
    assert_eq!(h.pass().served[0].0, b.id());
    take(a, 3);
    take(b, 3);
    // Cursor 11: b (at it) and c (above) before a (below), in position order.
    let report = h.pass();
    assert_eq!(report.served[0].0, b.id(), "{report:?}");
    assert_eq!(report.candidates, 3);
    assert_eq!(c.queue().progress().passes_waited, 3, "c waited every pass");
    // Cursor 14: both below it, in position order.
    let report = h.pass();
    assert_eq!(report.served[0].0, a.id(), "{report:?}");
}

/// Goal: a pass stops serving once its push budget is spent: a later candidate waits (its
/// published passes-waited count says so) rather than being counted served with nothing;
/// a member owed events with room in its queue is offered them again from the retry budget
/// before the pass ends. Method: a push budget of 2; a, with all its room free, goes first.
#[test]
fn a_spent_push_budget_leaves_later_candidates_waiting_and_retries_the_owed() {
    let config = CacheConfig {
        pass_pushes_max: 2,
        ..config()
    };
    let mut h = Harness::new(config);
    let b = h.watch_from(WatchStart::Now, 4);
    for _ in 0..5 {
        h.put("ns", "p", &[], "n1");
    }
    let a = h.watch_from(WatchStart::Now, 3);
    let mut written = Vec::new();
    for _ in 0..8 {
        written.push(h.put("ns", "p", &[], "n1"));
    }
    assert_eq!(revisions(&take(&a, 3)), written[..3]);
    take(&b, 2);
    let report = h.pass();
    assert_eq!(report.served, [(a.id(), 0)], "{report:?}");
    assert_eq!((report.candidates, report.waited), (2, 1));
    assert_eq!(b.queue().progress().passes_waited, 1, "b waited with room");
    assert!(report.busy, "the budget ran out");
    // Two from the main budget, then one more (all the room a had left) in a retry round.
    assert_eq!((report.pushes, report.retry_pushes), (2, 1), "{report:?}");
    assert_eq!(revisions(&take(&a, 3)), written[3..6]);
}

/// Goal: a candidate whose position is where the cohort's scan stopped short of the end gets
/// nothing from that scan, so it is not a member: it waits for a pass that scans from its
/// position. Method: a scan budget of three; a at 4 leads and scans 5..=7; b sits at 7.
#[test]
fn a_candidate_where_the_scan_stopped_waits_for_its_own_scan() {
    let config = CacheConfig {
        pass_scan_units_max: 64 + 3,
        ..config()
    };
    let mut h = Harness::new(config);
    let a = h.watch_from(WatchStart::Now, 3);
    for _ in 0..4 {
        h.put("ns", "p", &[], "n1");
    }
    let b = h.watch_from(WatchStart::Now, 2);
    for _ in 0..7 {
        h.put("ns", "p", &[], "n1");
    }
    assert_eq!(*revisions(&take(&a, 3)).last().unwrap(), 4);
    assert_eq!(*revisions(&take(&b, 2)).last().unwrap(), 7);
    let report = h.pass();
    assert_eq!(report.served, [(a.id(), 0)], "{report:?}");
    assert_eq!(b.queue().progress().passes_waited, 1);
    let report = h.pass();
    assert!(report.served.iter().any(|(id, _)| *id == b.id()));
    assert_eq!(revisions(&take(&b, 2)), [8, 9]);
}

/// Goal: streaming initial states, a pass that runs out of its push budget ends busy (the
/// next pass comes after the busy period), and one stopped by a full queue does not (its
/// consumer's drain brings the next pass forward). Method: five objects; a push budget of 2
/// with a large queue, then the default budget with a queue of 2.
#[test]
fn an_initial_state_cut_by_the_push_budget_makes_the_pass_busy() {
    let objects: Vec<_> = (0..5)
        .map(|i| pod("ns", &format!("o{i}"), 1, &[], "n1"))
        .collect();
    let initial = || {
        let mut request = WatchRequest::new(WatchStart::InitialState { min_revision: None });
        request.queue_capacity = Some(2);
        request
    };
    let budget = CacheConfig {
        pass_pushes_max: 2,
        ..config()
    };
    let mut h = Harness::with_objects(budget, 1, objects.clone());
    let mut request = initial();
    request.queue_capacity = Some(100);
    let watch = h.watch(request);
    let report = h.pass();
    assert_eq!(report.pushes, 2);
    assert!(report.busy, "{report:?}");
    let busy_min = h.cache.config().pass_period_busy_min;
    assert_eq!(h.worker.period(), busy_min);
    assert_eq!(drain(&watch).len(), 2);

    let mut h = Harness::with_objects(config(), 1, objects);
    let watch = h.watch(initial());
    let report = h.pass();
    assert_eq!(report.pushes, 2);
    assert!(!report.busy, "{report:?}");
    let normal = h.cache.config().pass_period_normal;
    assert_eq!(h.worker.period(), normal);
    let mut seen = vec![Vec::new()];
    h.settle(&[&watch], &mut seen, 20);
    assert_eq!(
        seen[0]
            .iter()
            .filter(|s| matches!(s, Seen::Initial(..)))
            .count(),
        5
    );
    assert_eq!(watch.state(), WatcherState::Synced);
}

/// Goal: a watch from the cache's current resource version (`resourceVersion=N`, N the cache's
/// revision) is live at once: synced, with the next write pushed by the dispatcher and no
/// catch-up pass. Method: register at the current revision, write, read without a pass.
#[test]
fn a_watch_from_the_current_revision_is_live_at_once() {
    let mut h = Harness::new(config());
    let current = h.put("ns", "a", &[], "n1");
    let watch = h.watch_from(WatchStart::After(current), 10);
    assert_eq!(watch.state(), WatcherState::Synced);
    assert_eq!(h.worker.unsynced_len(), 0);
    let rv = h.put("ns", "b", &[], "n1");
    assert_eq!(revisions(&drain(&watch)), [rv]);
    assert!(h.passes.is_empty(), "no pass ran");
}

/// Goal: legacy mode reproduces Kubernetes before KEP-6268 for a watch that starts behind: it
/// replays the history on its own at registration, outside the queue's bound, and is live at
/// once (no catch-up worker). Method: five writes, a watch from the first revision with a
/// queue of 2.
#[test]
fn legacy_mode_replays_a_watch_from_behind_at_registration() {
    let config = CacheConfig {
        mode: WatchMode::Legacy,
        ..config()
    };
    let mut h = Harness::new(config);
    let written: Vec<_> = (0..5)
        .map(|i| h.put("ns", &format!("p{i}"), &[], "n1"))
        .collect();
    let watch = h.watch_from(WatchStart::After(1), 2);
    assert_eq!(watch.state(), WatcherState::Synced);
    assert_eq!(h.worker.unsynced_len(), 0);
    assert_eq!(
        revisions(&drain(&watch)),
        written,
        "all of it, past the bound"
    );
    assert!(h.passes.is_empty(), "no pass ran");
}

/// Goal: sendInitialEvents with a minimum revision the cache has already reached starts at
/// once (nothing to wait for): the next pass streams the state, with no write in between.
#[test]
fn an_initial_state_whose_minimum_is_reached_starts_at_once() {
    let mut h = Harness::with_objects(config(), 1, vec![pod("ns", "a", 1, &[], "n1")]);
    let current = h.put("ns", "b", &[], "n1");
    let mut request = WatchRequest::new(WatchStart::InitialState {
        min_revision: Some(current),
    });
    request.queue_capacity = Some(10);
    let watch = h.watch(request);
    assert_eq!(h.dispatcher.waiting_len(), 0);
    assert_eq!(watch.state(), WatcherState::Initial);
    h.pass();
    assert_eq!(
        drain(&watch),
        [
            Seen::Initial("ns/a".into(), 1),
            Seen::Initial("ns/b".into(), current)
        ]
    );
}

/// Goal: streaming initial states spends the pass's scan budget too (one unit per snapshot
/// object looked at, whether or not selected): a large initial state is streamed across passes
/// and the pass reports what it scanned. Method: 100 objects, a scan budget of 65 units.
#[test]
fn an_initial_state_is_streamed_within_the_scan_budget() {
    let config = CacheConfig {
        pass_scan_units_max: 65,
        ..config()
    };
    let objects: Vec<_> = (0..100)
        .map(|i| pod("ns", &format!("o{i:03}"), 1, &[], "n1"))
        .collect();
    let mut h = Harness::with_objects(config, 1, objects);
    let mut request = WatchRequest::new(WatchStart::InitialState { min_revision: None });
    request.queue_capacity = Some(200);
    let watch = h.watch(request);
    let report = h.pass();
    assert_eq!(
        (report.objects_scanned, report.pushes),
        (65, 65),
        "{report:?}"
    );
    assert_eq!(drain(&watch).len(), 65);
    let report = h.pass();
    assert_eq!(report.objects_scanned, 35, "{report:?}");
    let mut seen = vec![drain(&watch)];
    assert_eq!(seen[0].len(), 35);
    h.settle(&[&watch], &mut seen, 10);
    assert_eq!(watch.state(), WatcherState::Synced);
}

/// Goal: a hand-off in flight across a relist ends with a 410 after its backlog, even when its
/// position is not below the new history's floor (a relist at the revision the cache had
/// reached): the dispatcher checks the epoch, not only the floor. Method: hold the hand-off of
/// a caught-up watcher, relist at the dispatched revision, then deliver the hand-off.
#[test]
fn a_hand_off_in_flight_across_a_relist_ends_with_410() {
    let mut h = Harness::new(config());
    h.hold_handoffs();
    let slow = h.watch_from(WatchStart::Now, 1);
    let written = [h.put("ns", "a", &[], "n1"), h.put("ns", "b", &[], "n1")];
    assert_eq!(revisions(&drain(&slow)), written[..1]);
    let report = h.pass();
    assert_eq!(report.resynced, 1, "caught up, hand-off held: {report:?}");
    assert_eq!(h.worker.held_len(), 1);
    let relisted_at = h.revision;
    h.dispatcher
        .handle_reset(h.now, relisted_at, vec![pod("ns", "a", 2, &[], "n1")]);
    h.worker.release_handoffs();
    h.dispatcher.handle_messages(h.now);
    h.check();
    assert_eq!(revisions(&drain(&slow)), written[1..]);
    assert!(
        matches!(end_of(&slow), Some(WatchEnd::Expired { .. })),
        "the old epoch's watcher gets its 410"
    );
    assert_eq!(h.dispatcher.synced_len(), 0);
    assert_eq!(
        h.cache.metrics().stalled_watchers.get(),
        0,
        "not stalled any more"
    );
    assert_eq!(h.cache.metrics().watchers.get(), 0);
}

/// Goal (legacy mode): the store's progress that arrives while a revision is blocked is not
/// lost: once the revision is done (here, its budget ran out), the cache moves to it.
#[test]
fn legacy_mode_applies_progress_held_during_a_blocked_revision() {
    let config = CacheConfig {
        mode: WatchMode::Legacy,
        ..config()
    };
    let mut h = Harness::new(config);
    let _slow = h.watch_from(WatchStart::Now, 1);
    h.put("ns", "a", &[], "n1");
    let blocked_at = h.put("ns", "b", &[], "n1");
    assert!(h.dispatcher.is_blocked());
    h.dispatcher.handle_progress(h.now, blocked_at + 5);
    assert_eq!(h.cache.revision(), blocked_at, "held while blocked");
    h.unblock();
    assert_eq!(h.cache.revision(), blocked_at + 5);
}
