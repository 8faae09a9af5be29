//! The checker's own tests: a correct recording passes, and each deliberately broken delivery
//! is caught under the right guarantee's name.

use std::collections::BTreeMap;

use watchkeeper_harness::checker::{
    EType, End, Guarantee, History, Item, Obj, Read, ReadKind, Recording, Req, Selection, Session,
    Start, check,
};

fn obj(ns: &str, name: &str, app: &str, rv: u64, token: &str) -> Obj {
    let mut labels = BTreeMap::new();
    labels.insert("app".to_owned(), app.to_owned());
    Obj {
        namespace: ns.to_owned(),
        name: name.to_owned(),
        labels,
        fields: BTreeMap::new(),
        rv,
        token: token.to_owned(),
    }
}

/// rv 2: a (web), b (web) — one revision, two events
/// rv 3: a → db (leaves app=web)
/// rv 4: progress only
/// rv 5: c (web), b deleted — one revision, two events
/// rv 6: a → web again
fn history() -> History {
    let mut h = History::new(1, Vec::new());
    h.commit(
        2,
        vec![
            ("ns/a".into(), Some(obj("ns", "a", "web", 2, "a1"))),
            ("ns/b".into(), Some(obj("ns", "b", "web", 2, "b1"))),
        ],
    );
    h.commit(
        3,
        vec![("ns/a".into(), Some(obj("ns", "a", "db", 3, "a2")))],
    );
    h.advance(4);
    h.commit(
        5,
        vec![
            ("ns/c".into(), Some(obj("ns", "c", "web", 5, "c1"))),
            ("ns/b".into(), None),
        ],
    );
    h.commit(
        6,
        vec![("ns/a".into(), Some(obj("ns", "a", "web", 6, "a3")))],
    );
    h
}

fn ev(etype: EType, key: &str, rv: u64, token: &str) -> Item {
    Item::Event {
        etype,
        key: key.to_owned(),
        rv,
        token: token.to_owned(),
    }
}

fn bm(rv: u64) -> Item {
    Item::Bookmark {
        rv,
        initial_end: false,
    }
}

fn web() -> Selection {
    Selection {
        namespace: None,
        reqs: vec![Req::LabelEq("app".into(), "web".into())],
    }
}

/// Everything app=web sees after 1, complete.
fn good_items() -> Vec<Item> {
    vec![
        ev(EType::Added, "ns/a", 2, "a1"),
        ev(EType::Added, "ns/b", 2, "b1"),
        ev(EType::Deleted, "ns/a", 3, "a1"),
        bm(4),
        ev(EType::Added, "ns/c", 5, "c1"),
        ev(EType::Deleted, "ns/b", 5, "b1"),
        ev(EType::Added, "ns/a", 6, "a3"),
    ]
}

fn session(items: Vec<Item>, end: End) -> Session {
    Session {
        id: 1,
        selection: web(),
        start: Start::After(1),
        bookmarks: true,
        window: (1, 1),
        items,
        end,
        resumes: None,
    }
}

fn settled() -> End {
    End::Open {
        complete_through: Some(6),
    }
}

fn run(sessions: Vec<Session>) -> watchkeeper_harness::checker::Report {
    check(
        &history(),
        &Recording {
            sessions,
            ..Recording::default()
        },
    )
}

fn assert_caught(report: &watchkeeper_harness::checker::Report, guarantee: Guarantee) {
    assert!(
        report.has(guarantee),
        "expected a {guarantee} violation, got {:#?}",
        report.violations
    );
    let first = report.violations[0].to_string();
    assert!(
        report.violations.iter().any(|v| v
            .to_string()
            .starts_with(&format!("[{}]", guarantee.name()))),
        "message names the guarantee: {first}"
    );
}

#[test]
fn a_correct_recording_passes() {
    let report = run(vec![session(good_items(), settled())]);
    assert!(report.violations.is_empty(), "{:#?}", report.violations);
    assert_eq!(report.sessions, 1);
    assert_eq!(report.events, 6);
}

#[test]
fn a_dropped_event_is_reliable() {
    let mut items = good_items();
    items.remove(2); // DELETED a@3
    assert_caught(&run(vec![session(items, settled())]), Guarantee::Reliable);
    // Dropped at the tail of a settled session too.
    let mut items = good_items();
    items.pop();
    assert_caught(&run(vec![session(items, settled())]), Guarantee::Reliable);
}

#[test]
fn a_duplicate_is_unique() {
    let mut items = good_items();
    items.insert(3, ev(EType::Deleted, "ns/a", 3, "a1"));
    assert_caught(&run(vec![session(items, settled())]), Guarantee::Unique);
}

#[test]
fn a_split_revision_is_atomic() {
    let mut items = good_items();
    items.remove(1); // b@2 missing while a@2 arrived
    assert_caught(&run(vec![session(items, settled())]), Guarantee::Atomic);
    // A server-ended stream that stops inside a revision.
    let items = good_items()[..5].to_vec(); // c@5 without b@5
    assert_caught(
        &run(vec![session(items, End::ServerClosed)]),
        Guarantee::Atomic,
    );
}

#[test]
fn reordering_is_ordered() {
    let mut items = good_items();
    items.swap(2, 4); // c@5 before a@3
    assert_caught(&run(vec![session(items, settled())]), Guarantee::Ordered);
    // Within a revision, the store's order.
    let mut items = good_items();
    items.swap(0, 1);
    assert_caught(&run(vec![session(items, settled())]), Guarantee::Ordered);
}

#[test]
fn a_backwards_bookmark_is_bookmarkable() {
    let mut items = good_items();
    items.insert(5, bm(2)); // after c@5
    assert_caught(
        &run(vec![session(items, settled())]),
        Guarantee::Bookmarkable,
    );
    // A bookmark that promises an event not yet delivered.
    let mut items = good_items();
    items.insert(1, bm(3));
    assert_caught(
        &run(vec![session(items, settled())]),
        Guarantee::Bookmarkable,
    );
    // An event at the bookmark's revision after it.
    let items = vec![
        ev(EType::Added, "ns/a", 2, "a1"),
        ev(EType::Added, "ns/b", 2, "b1"),
        bm(3),
        ev(EType::Deleted, "ns/a", 3, "a1"),
    ];
    assert_caught(
        &run(vec![session(items, End::ClientClosed)]),
        Guarantee::Bookmarkable,
    );
}

#[test]
fn a_premature_410_is_dishonest() {
    // Position 3 is servable (floor 2), so a 410 there is a lie.
    let items = good_items()[..3].to_vec();
    let end = End::Gone {
        claimed: Some((3, 2)),
        observed_floor: Some((2, 2)),
        epoch_ended: false,
    };
    assert_caught(&run(vec![session(items, end)]), Guarantee::Honest410);
    // A 410 before the backlog: position 5 claimed, events at 5 never delivered.
    let items = good_items()[..3].to_vec();
    let end = End::Gone {
        claimed: Some((5, 6)),
        observed_floor: Some((6, 6)),
        epoch_ended: false,
    };
    assert_caught(&run(vec![session(items, end)]), Guarantee::Honest410);
    // A claimed floor the history never had.
    let items = good_items()[..3].to_vec();
    let end = End::Gone {
        claimed: Some((3, 6)),
        observed_floor: Some((2, 2)),
        epoch_ended: false,
    };
    assert_caught(&run(vec![session(items, end)]), Guarantee::Honest410);
    // An honest one passes.
    let items = good_items()[..3].to_vec();
    let end = End::Gone {
        claimed: Some((3, 5)),
        observed_floor: Some((4, 5)),
        epoch_ended: false,
    };
    let report = run(vec![session(items, end)]);
    assert!(report.violations.is_empty(), "{:#?}", report.violations);
}

#[test]
fn a_wrong_initial_state_is_caught() {
    let initial = |key: &str, rv, token: &str| Item::Initial {
        key: key.to_owned(),
        rv,
        token: token.to_owned(),
    };
    let end = Item::Bookmark {
        rv: 4,
        initial_end: true,
    };
    // At 4, app=web holds b@2 only.
    let good = vec![
        initial("ns/b", 2, "b1"),
        end.clone(),
        ev(EType::Added, "ns/c", 5, "c1"),
        ev(EType::Deleted, "ns/b", 5, "b1"),
        ev(EType::Added, "ns/a", 6, "a3"),
    ];
    let mut s = session(good.clone(), settled());
    s.start = Start::InitialState { min: Some(3) };
    s.window = (3, 4);
    let report = run(vec![s.clone()]);
    assert!(report.violations.is_empty(), "{:#?}", report.violations);
    // a@2 was no longer in the selection at 4.
    let mut bad = s.clone();
    bad.items.insert(0, initial("ns/a", 2, "a1"));
    assert_caught(&run(vec![bad]), Guarantee::InitialState);
    // Missing b.
    let mut bad = s.clone();
    bad.items.remove(0);
    assert_caught(&run(vec![bad]), Guarantee::InitialState);
    // Below the requested minimum.
    let mut bad = s;
    bad.start = Start::InitialState { min: Some(5) };
    assert_caught(&run(vec![bad]), Guarantee::InitialState);
}

#[test]
fn wrong_types_and_objects_are_selection() {
    let mut items = good_items();
    items[2] = ev(EType::Modified, "ns/a", 3, "a2"); // a left app=web: DELETED expected
    assert_caught(&run(vec![session(items, settled())]), Guarantee::Selection);
    let mut items = good_items();
    items[2] = ev(EType::Deleted, "ns/a", 3, "a2"); // DELETED carries the previous object
    assert_caught(&run(vec![session(items, settled())]), Guarantee::Selection);
    // An event the selection does not see (app=db watcher gets a web event).
    let mut s = session(vec![ev(EType::Added, "ns/b", 2, "b1")], End::ClientClosed);
    s.selection.reqs = vec![Req::LabelEq("app".into(), "db".into())];
    assert_caught(&run(vec![s]), Guarantee::Selection);
}

#[test]
fn a_resume_that_skips_or_repeats_is_resumable() {
    let first = session(good_items()[..3].to_vec(), End::ClientClosed);
    // Correct resume from 3.
    let mut second = session(good_items()[3..].to_vec(), settled());
    second.id = 2;
    second.start = Start::After(3);
    second.resumes = Some(1);
    let report = run(vec![first.clone(), second.clone()]);
    assert!(report.violations.is_empty(), "{:#?}", report.violations);
    // The new watch repeats an event the old one delivered.
    let mut repeat = second.clone();
    repeat.items.insert(0, ev(EType::Deleted, "ns/a", 3, "a1"));
    assert_caught(&run(vec![first.clone(), repeat]), Guarantee::Resumable);
    // The new watch skips the first events after the resume point.
    let mut skip = second.clone();
    skip.items
        .retain(|i| !matches!(i, Item::Event { rv: 5, .. }));
    assert_caught(&run(vec![first.clone(), skip]), Guarantee::Resumable);
    // Resumed from the wrong resource version.
    let mut wrong = second;
    wrong.start = Start::After(4);
    wrong.items.remove(0);
    assert_caught(&run(vec![first, wrong]), Guarantee::Resumable);
}

#[test]
fn a_stale_read_is_not_linearizable() {
    let history = history();
    let read = |kind, window, result_rv| Read {
        id: 1,
        kind,
        window,
        result_rv,
    };
    // GET a in window [5, 6]: a2 (db, rv 3) or a3 (rv 6) are fine; a1 is stale.
    let ok = Recording {
        reads: vec![
            read(
                ReadKind::Get {
                    key: "ns/a".into(),
                    result: Some((3, "a2".into())),
                },
                (5, 6),
                None,
            ),
            read(
                ReadKind::Get {
                    key: "ns/a".into(),
                    result: Some((6, "a3".into())),
                },
                (5, 6),
                None,
            ),
        ],
        ..Recording::default()
    };
    let report = check(&history, &ok);
    assert!(report.violations.is_empty(), "{:#?}", report.violations);
    let stale = Recording {
        reads: vec![read(
            ReadKind::Get {
                key: "ns/a".into(),
                result: Some((2, "a1".into())),
            },
            (5, 6),
            None,
        )],
        ..Recording::default()
    };
    assert_caught(&check(&history, &stale), Guarantee::LinearizableReads);
    // A LIST at a resource version below its window.
    let mut at3 = BTreeMap::new();
    at3.insert("ns/b".to_owned(), (2, "b1".to_owned()));
    let stale_list = Recording {
        reads: vec![read(
            ReadKind::List {
                selection: web(),
                result: at3.clone(),
            },
            (5, 6),
            Some(3),
        )],
        ..Recording::default()
    };
    assert_caught(&check(&history, &stale_list), Guarantee::LinearizableReads);
    // The same LIST claiming 5 (where b is gone) is wrong too.
    let wrong_list = Recording {
        reads: vec![read(
            ReadKind::List {
                selection: web(),
                result: at3,
            },
            (5, 6),
            Some(5),
        )],
        ..Recording::default()
    };
    assert_caught(&check(&history, &wrong_list), Guarantee::LinearizableReads);
}

#[test]
fn a_lost_acknowledged_write_is_not_durable() {
    let recording = Recording {
        acked: vec![
            watchkeeper_harness::checker::AckedWrite {
                key: "ns/a".into(),
                rv: 6,
                token: Some("a3".into()),
            },
            watchkeeper_harness::checker::AckedWrite {
                key: "ns/b".into(),
                rv: 5,
                token: None,
            },
        ],
        ..Recording::default()
    };
    assert!(check(&history(), &recording).violations.is_empty());
    let lost = Recording {
        acked: vec![watchkeeper_harness::checker::AckedWrite {
            key: "ns/a".into(),
            rv: 7,
            token: Some("a4".into()),
        }],
        ..Recording::default()
    };
    assert_caught(&check(&history(), &lost), Guarantee::Durable);
}

#[test]
fn a_now_start_anywhere_in_the_window_is_accepted() {
    // Requested at 2, established at 5: starting at 3 (first event c@5...) is fine.
    let mut s = session(good_items()[3..].to_vec(), settled());
    s.start = Start::Now;
    s.window = (2, 5);
    s.items.remove(0); // no bookmark
    let report = run(vec![s.clone()]);
    assert!(report.violations.is_empty(), "{:#?}", report.violations);
    // But a gap right after the window's end is not.
    let mut late = s;
    late.window = (2, 3);
    late.items
        .retain(|i| !matches!(i, Item::Event { rv: 5, .. }));
    assert_caught(&run(vec![late]), Guarantee::Reliable);
}
