//! Property test: random writes (multi-event revisions included), random consumers that read,
//! stall and cancel, random selectors and starts, a small history so positions age out — and
//! every watcher must receive exactly what an independent reference model says, in order, or an
//! honest 410 after a prefix of it.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::*;
use proptest::prelude::*;
use watchkeeper_core::{
    CacheConfig, CandidateOrder, CatchUpDesign, Change, EventType, FieldSelector, Guarantee,
    LabelSelector, Revision, Watch, WatchEnd, WatchRequest, WatchStart, object_key,
};

/// The reference's view of an object.
#[derive(Clone, Debug, PartialEq)]
struct Obj {
    namespace: String,
    name: String,
    app: String,
    node: String,
}

#[derive(Clone, Copy, Debug)]
enum Sel {
    All,
    Namespace(u8),
    AppWeb,
    Node(u8),
    NamespaceAndApp(u8),
}

impl Sel {
    fn matches(self, o: &Obj) -> bool {
        match self {
            Sel::All => true,
            Sel::Namespace(n) => o.namespace == format!("ns{n}"),
            Sel::AppWeb => o.app == "web",
            Sel::Node(n) => o.node == format!("n{n}"),
            Sel::NamespaceAndApp(n) => o.namespace == format!("ns{n}") && o.app == "web",
        }
    }

    fn request(self, start: WatchStart, capacity: usize, bookmarks: bool) -> WatchRequest {
        let mut request = WatchRequest::new(start);
        request.queue_capacity = Some(capacity);
        request.allow_bookmarks = bookmarks;
        match self {
            Sel::All => {}
            Sel::Namespace(n) => request.namespace = Some(format!("ns{n}")),
            Sel::AppWeb => request.labels = LabelSelector::parse("app=web").unwrap(),
            Sel::Node(n) => {
                request.fields = FieldSelector::parse(&format!("spec.nodeName=n{n}")).unwrap()
            }
            Sel::NamespaceAndApp(n) => {
                request.fields =
                    FieldSelector::parse(&format!("metadata.namespace=ns{n}")).unwrap();
                request.labels = LabelSelector::parse("app in (web)").unwrap();
            }
        }
        request
    }
}

#[derive(Clone, Debug)]
enum StartKind {
    Now,
    /// Some revisions back from the current one.
    Back(u8),
    Initial,
}

/// One change: (namespace, name, Some((app is web, node)) or None for a delete).
type ChangeSpec = (u8, u8, Option<(bool, u8)>);

/// One committed change: key, new object, previous object.
type Logged = (String, Option<Obj>, Option<Obj>);

#[derive(Clone, Debug)]
enum Op {
    /// One revision.
    Write(Vec<ChangeSpec>),
    Read {
        watcher: u8,
        count: u8,
    },
    Advance(u16),
    Progress,
    Watch {
        sel: Sel,
        start: StartKind,
        capacity: u8,
        bookmarks: bool,
    },
    Cancel(u8),
}

fn sel_strategy() -> impl Strategy<Value = Sel> {
    prop_oneof![
        Just(Sel::All),
        (0u8..3).prop_map(Sel::Namespace),
        Just(Sel::AppWeb),
        (0u8..2).prop_map(Sel::Node),
        (0u8..3).prop_map(Sel::NamespaceAndApp),
    ]
}

fn op_strategy() -> impl Strategy<Value = Op> {
    let change = (
        0u8..3,
        0u8..4,
        prop::option::weighted(0.85, (any::<bool>(), 0u8..2)),
    );
    prop_oneof![
        8 => prop::collection::vec(change, 1..4).prop_map(Op::Write),
        6 => (0u8..8, 0u8..6).prop_map(|(watcher, count)| Op::Read { watcher, count }),
        3 => (1u16..3000).prop_map(Op::Advance),
        1 => Just(Op::Progress),
        2 => (
            sel_strategy(),
            prop_oneof![Just(StartKind::Now), (0u8..40).prop_map(StartKind::Back), Just(StartKind::Initial)],
            1u8..6,
            any::<bool>()
        )
            .prop_map(|(sel, start, capacity, bookmarks)| Op::Watch { sel, start, capacity, bookmarks }),
        1 => (0u8..8).prop_map(Op::Cancel),
    ]
}

/// One watcher under test and what the reference expects of it.
struct Client {
    watch: Option<Watch>,
    sel: Sel,
    /// The expected items (events and, for initial states, the initial objects and the end
    /// bookmark), in order, excluding periodic bookmarks.
    expected_from: Revision,
    initial: Vec<Seen>,
    seen: Vec<Seen>,
    end: Option<WatchEnd>,
    cancelled: bool,
}

struct Reference {
    state: BTreeMap<String, Obj>,
    /// Every committed revision: (revision, [(key, new, prev)]).
    log: Vec<(Revision, Vec<Logged>)>,
}

impl Reference {
    fn expected(&self, sel: Sel, after: Revision) -> Vec<Seen> {
        let mut out = Vec::new();
        for (revision, changes) in &self.log {
            if *revision <= after {
                continue;
            }
            for (key, new, prev) in changes {
                let now = new.as_ref().is_some_and(|o| sel.matches(o));
                let before = prev.as_ref().is_some_and(|o| sel.matches(o));
                let event_type = match (now, before) {
                    (true, false) => EventType::Added,
                    (true, true) => EventType::Modified,
                    (false, true) => EventType::Deleted,
                    (false, false) => continue,
                };
                out.push(Seen::Event(event_type, key.clone(), *revision));
            }
        }
        out
    }
}

fn run(ops: Vec<Op>, order: CandidateOrder) -> Result<(), TestCaseError> {
    run_mode(ops, order, watchkeeper_core::WatchMode::StallResume)
}

fn run_mode(
    ops: Vec<Op>,
    order: CandidateOrder,
    mode: watchkeeper_core::WatchMode,
) -> Result<(), TestCaseError> {
    run_design(ops, order, mode, CatchUpDesign::default())
}

fn run_design(
    ops: Vec<Op>,
    order: CandidateOrder,
    mode: watchkeeper_core::WatchMode,
    design: CatchUpDesign,
) -> Result<(), TestCaseError> {
    let config = CacheConfig {
        mode,
        catchup_design: design,
        trigger_field: Some("spec.nodeName".to_owned()),
        history_capacity_min: 16,
        history_capacity_max: 32,
        event_fresh_duration: Duration::from_secs(2),
        pass_members_max: 3,
        pass_scan_units_max: 64 + 12,
        pass_pushes_max: 10,
        initial_no_progress_timeout: Duration::from_secs(3600),
        bookmark_interval: Duration::from_millis(1500),
        candidate_order: order,
        ..CacheConfig::default()
    };
    let mut h = Harness::new(config);
    // Revisions land between a pass and the dispatcher's hand-off (the resync catch-up path).
    h.hold_handoffs();
    let mut reference = Reference {
        state: BTreeMap::new(),
        log: Vec::new(),
    };
    let mut clients: Vec<Client> = Vec::new();
    for op in ops {
        match op {
            Op::Write(changes) => {
                // One change per key per revision, as in a store transaction.
                let mut seen_keys = std::collections::BTreeSet::new();
                let changes: Vec<_> = changes
                    .into_iter()
                    .filter(|(ns, name, _)| seen_keys.insert((*ns, *name)))
                    .collect();
                let revision = h.revision + 1;
                let mut core_changes = Vec::new();
                let mut log = Vec::new();
                for (ns, name, what) in changes {
                    let namespace = format!("ns{ns}");
                    let name = format!("p{name}");
                    let key = object_key(&namespace, &name);
                    let prev = reference.state.get(&key).cloned();
                    match what {
                        Some((web, node)) => {
                            let obj = Obj {
                                namespace: namespace.clone(),
                                name: name.clone(),
                                app: if web { "web" } else { "db" }.to_owned(),
                                node: format!("n{node}"),
                            };
                            core_changes.push(Change::put(pod(
                                &namespace,
                                &name,
                                revision,
                                &[("app", &obj.app)],
                                &obj.node,
                            )));
                            reference.state.insert(key.clone(), obj.clone());
                            log.push((key, Some(obj), prev));
                        }
                        None => {
                            core_changes.push(Change::delete(key.clone()));
                            if prev.is_some() {
                                reference.state.remove(&key);
                                log.push((key, None, prev));
                            }
                        }
                    }
                }
                h.write(|_| core_changes);
                if !log.is_empty() {
                    reference.log.push((revision, log));
                }
            }
            Op::Read { watcher, count } => {
                if let Some(client) = clients.get_mut(watcher as usize)
                    && let Some(watch) = &client.watch
                {
                    client.seen.extend(take(watch, count as usize));
                    if client.end.is_none() {
                        client.end = end_of(watch);
                    }
                }
            }
            Op::Advance(ms) => h.advance(Duration::from_millis(u64::from(ms))),
            Op::Progress => {
                h.unblock();
                let revision = h.revision + 1;
                h.revision = revision;
                h.dispatcher.handle_progress(h.now, revision);
            }
            Op::Watch {
                sel,
                start,
                capacity,
                bookmarks,
            } => {
                let current = h.revision;
                let (start, expected_from) = match start {
                    StartKind::Now => (WatchStart::Now, current),
                    StartKind::Back(back) => {
                        let from = current.saturating_sub(u64::from(back)).max(1);
                        (WatchStart::After(from), from)
                    }
                    StartKind::Initial => {
                        (WatchStart::InitialState { min_revision: None }, current)
                    }
                };
                let mut initial = Vec::new();
                if matches!(start, WatchStart::InitialState { .. }) {
                    for (key, obj) in &reference.state {
                        if sel.matches(obj) {
                            let rv = reference
                                .log
                                .iter()
                                .rev()
                                .find(|(_, changes)| {
                                    changes.iter().any(|(k, n, _)| k == key && n.is_some())
                                })
                                .map(|(rv, _)| *rv)
                                .unwrap();
                            initial.push(Seen::Initial(key.clone(), rv));
                        }
                    }
                    if bookmarks {
                        initial.push(Seen::Bookmark(current, true));
                    }
                }
                let watch = h.watch(sel.request(start, capacity as usize, bookmarks));
                clients.push(Client {
                    watch: Some(watch),
                    sel,
                    expected_from,
                    initial,
                    seen: Vec::new(),
                    end: None,
                    cancelled: false,
                });
            }
            Op::Cancel(watcher) => {
                if let Some(client) = clients.get_mut(watcher as usize)
                    && client.end.is_none()
                {
                    client.watch = None;
                    client.cancelled = true;
                }
            }
        }
        h.check();
    }
    // Liveness: every remaining client reads everything until nobody is behind.
    for _ in 0..400 {
        for client in &mut clients {
            if let Some(watch) = &client.watch {
                client.seen.extend(drain(watch));
                if client.end.is_none() {
                    client.end = end_of(watch);
                }
            }
        }
        h.check();
        if h.worker.poll_timeout().is_none()
            && !h.dispatcher.has_messages()
            && !h.dispatcher.is_blocked()
        {
            break;
        }
        h.advance(Duration::from_millis(50));
    }
    for client in &mut clients {
        if let Some(watch) = &client.watch {
            client.seen.extend(drain(watch));
            if client.end.is_none() {
                client.end = end_of(watch);
            }
        }
    }
    prop_assert_eq!(h.cache.metrics().watcher_skipped_events.get(), 0);
    for (index, client) in clients.iter().enumerate() {
        let mut expected = client.initial.clone();
        expected.extend(reference.expected(client.sel, client.expected_from));
        // Periodic bookmarks: each is at or above every event before it and below every event
        // after it (Bookmarkable); then set aside for the comparison.
        let mut got = Vec::new();
        let mut last_event: Revision = 0;
        let mut pending_bookmark: Option<Revision> = None;
        for item in &client.seen {
            match item {
                Seen::Bookmark(rv, false) => {
                    prop_assert!(
                        *rv >= last_event,
                        "[{}] client {index}: bookmark {rv} below event {last_event}",
                        Guarantee::Bookmarkable
                    );
                    pending_bookmark = Some(*rv);
                }
                Seen::Event(_, _, rv) => {
                    if let Some(b) = pending_bookmark.take() {
                        prop_assert!(
                            *rv > b,
                            "[{}] client {index}: event {rv} at or below bookmark {b}",
                            Guarantee::Bookmarkable
                        );
                    }
                    prop_assert!(
                        *rv >= last_event,
                        "[{}] client {index}: out of order",
                        Guarantee::Ordered
                    );
                    last_event = *rv;
                    got.push(item.clone());
                }
                other => got.push(other.clone()),
            }
        }
        match (&client.end, client.cancelled) {
            (None, false) => prop_assert_eq!(
                &got,
                &expected,
                "[{}, {}] client {} ({:?}) incomplete or wrong",
                Guarantee::Reliable,
                Guarantee::Unique,
                index,
                client.sel
            ),
            (
                Some(WatchEnd::Expired {
                    position, floor, ..
                }),
                _,
            ) => {
                prop_assert!(
                    position < floor,
                    "[{}] client {index}: 410 at {position} with floor {floor}",
                    Guarantee::Honest410
                );
                prop_assert!(got.len() <= expected.len());
                prop_assert_eq!(
                    &got[..],
                    &expected[..got.len()],
                    "[{}] client {} prefix before 410",
                    Guarantee::Reliable,
                    index
                );
                prop_assert!(
                    last_event <= *position,
                    "[{}] client {index}: position below what it received",
                    Guarantee::Honest410
                );
                // Honest: everything up to its position was delivered before the 410.
                let owed: Vec<_> = expected[got.len()..]
                    .iter()
                    .filter(|s| matches!(s, Seen::Event(_, _, rv) if rv <= position))
                    .collect();
                prop_assert!(
                    owed.is_empty(),
                    "[{}] client {index}: 410 before its backlog: {owed:?}",
                    Guarantee::Honest410
                );
            }
            (Some(WatchEnd::Unresponsive), _) if mode == watchkeeper_core::WatchMode::Legacy => {
                prop_assert!(got.len() <= expected.len());
                prop_assert_eq!(
                    &got[..],
                    &expected[..got.len()],
                    "[{}] client {} prefix before force-close",
                    Guarantee::Reliable,
                    index
                );
            }
            (Some(other), _) => prop_assert!(false, "client {index}: unexpected end {other:?}"),
            (None, true) => {
                prop_assert!(got.len() <= expected.len());
                prop_assert_eq!(
                    &got[..],
                    &expected[..got.len()],
                    "[{}] client {} prefix before cancel",
                    Guarantee::Reliable,
                    index
                );
            }
        }
    }
    let metrics = h.cache.metrics();
    let open = clients
        .iter()
        .filter(|c| c.watch.is_some() && c.end.is_none())
        .count();
    prop_assert_eq!(metrics.watchers.get(), open as i64, "watcher gauge");
    prop_assert_eq!(
        metrics.stalled_watchers.get(),
        0,
        "everyone resynced or ended"
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn every_watcher_gets_exactly_the_reference_or_an_honest_410(
        ops in prop::collection::vec(op_strategy(), 1..160)
    ) {
        run(ops, CandidateOrder::FreeShareThenRotation)?;
    }

    #[test]
    fn legacy_mode_delivers_a_prefix_then_force_closes(
        ops in prop::collection::vec(op_strategy(), 1..120)
    ) {
        run_mode(ops, CandidateOrder::FreeShareThenRotation, watchkeeper_core::WatchMode::Legacy)?;
    }

    #[test]
    fn the_guarantees_hold_with_cohort_passes(
        ops in prop::collection::vec(op_strategy(), 1..160),
        order in prop_oneof![
            Just(CandidateOrder::FreeShareThenRotation),
            Just(CandidateOrder::RotationOnly),
            Just(CandidateOrder::OldestFirst)
        ],
    ) {
        run_design(ops, order, watchkeeper_core::WatchMode::StallResume, CatchUpDesign::Cohort)?;
    }

    #[test]
    fn the_guarantees_hold_for_every_candidate_order(
        ops in prop::collection::vec(op_strategy(), 1..120),
        order in prop_oneof![Just(CandidateOrder::RotationOnly), Just(CandidateOrder::OldestFirst)],
    ) {
        run(ops, order)?;
    }
}
