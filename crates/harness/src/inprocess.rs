//! The in-process driver: random workloads on the real core (`WatchCache` + `Dispatcher` +
//! `CatchUpWorker`) stepped on a virtual clock from one thread, recorded and handed to the
//! checker. Everything is derived from the seed: a failing seed reproduces with
//! `cargo run -p watchkeeper-harness -- inprocess --seed N`.
//!
//! A run draws a configuration (stall-resume or legacy mode, candidate order, a small history
//! so positions age out, small pass budgets, a trigger field or not), an initial state, and a
//! few hundred operations: multi-event revisions (puts, deletes, deletes of absent keys),
//! progress notifications, new watches (random selections; starts `Now`, `After(N)` in the
//! past or the near future, initial state with or without a minimum; bookmarks or not; small
//! queues; deadlines), consumers reading at random speeds, stalling, cancelling (with or
//! without the connection pulling what was queued), reconnecting from the last resource
//! version they saw (Resumable) or relisting after a 410, consistent GET/LIST and exact reads,
//! time advancing (passes, bookmarks, deadlines) and re-initialisations (revisions the cache
//! never sees, then `Dispatcher::handle_reset`, so every open watcher must get a 410).
//! At the end the system settles (everyone reads everything) and the checker gets the
//! history and the recording.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use watchkeeper_core::{
    CacheConfig, CandidateOrder, CatchUpWorker, Change, Dispatcher, EventType, FieldSelector,
    Instant, LabelSelector, Object, Pop, Revision, Watch, WatchCache, WatchEnd, WatchItem,
    WatchMode, WatchRequest, WatchStart,
};

use crate::checker::{
    self, EType, End, History, Item, Obj, Read, ReadKind, Recording, Report, Req, Selection,
    Session, Start,
};
use crate::rng::Rng;

/// What one seed did.
#[derive(Debug)]
pub struct Outcome {
    /// The seed.
    pub seed: u64,
    /// A one-line description of the configuration drawn.
    pub config: String,
    /// The checker's report.
    pub report: Report,
    /// Revisions committed.
    pub revisions: u64,
    /// Sessions by how they ended (and resumed ones), for coverage.
    pub ends: BTreeMap<&'static str, u64>,
}

impl Outcome {
    /// The command that reproduces this run.
    #[must_use]
    pub fn command(&self) -> String {
        format!(
            "cargo run -p watchkeeper-harness -- inprocess --seed {}",
            self.seed
        )
    }
}

const NAMESPACES: [&str; 3] = ["ns0", "ns1", "ns2"];
const NODES: [&str; 3] = ["n0", "n1", "n2"];

struct Client {
    session: usize,
    watch: Option<Watch>,
    speed: u64,
    stalled_for: u32,
    /// The end was queued; the floor observed around the step that queued it.
    observed_floor: Option<(Revision, Revision)>,
    epoch_ended: bool,
    done: bool,
}

struct Driver {
    rng: Rng,
    cache: WatchCache,
    dispatcher: Dispatcher,
    worker: CatchUpWorker,
    now: Instant,
    config: CacheConfig,
    history: History,
    recording: Recording,
    clients: Vec<Client>,
    tokens: u64,
    next_id: u64,
}

fn to_obj(object: &Object) -> Obj {
    let mut fields = object.fields().to_map();
    fields.remove("metadata.name");
    fields.remove("metadata.namespace");
    Obj {
        namespace: object.namespace().to_owned(),
        name: object.name().to_owned(),
        labels: object.labels().to_map(),
        fields,
        rv: object.resource_version(),
        token: token_of(object),
    }
}

fn token_of(object: &Object) -> String {
    object
        .body()
        .pointer("/data/w")
        .and_then(|v| v.as_str())
        .unwrap_or_default()
        .to_owned()
}

fn item_of(item: &WatchItem) -> Item {
    match item {
        WatchItem::Event { event_type, event } => {
            let (etype, carried) = match event_type {
                EventType::Added => (EType::Added, event.object()),
                EventType::Modified => (EType::Modified, event.object()),
                EventType::Deleted => (EType::Deleted, event.prev()),
            };
            Item::Event {
                etype,
                key: event.key().to_string(),
                rv: event.revision(),
                token: carried.map(|o| token_of(o)).unwrap_or_default(),
            }
        }
        WatchItem::Initial(object) => Item::Initial {
            key: object.key().to_string(),
            rv: object.resource_version(),
            token: token_of(object),
        },
        WatchItem::Bookmark {
            revision,
            initial_events_end,
        } => Item::Bookmark {
            rv: *revision,
            initial_end: *initial_events_end,
        },
    }
}

fn random_selection(rng: &mut Rng) -> Selection {
    let ns = |rng: &mut Rng| (*rng.pick(&NAMESPACES)).to_owned();
    let s = |v: &str| v.to_owned();
    match rng.below(12) {
        0 | 1 => Selection::all(),
        2 => Selection {
            namespace: Some(ns(rng)),
            reqs: vec![],
        },
        3 => Selection {
            namespace: None,
            reqs: vec![Req::LabelEq(s("app"), s("web"))],
        },
        4 => Selection {
            namespace: None,
            reqs: vec![Req::LabelIn(s("app"), vec![s("web"), s("db")])],
        },
        5 => Selection {
            namespace: None,
            reqs: vec![Req::LabelNotEq(s("app"), s("web"))],
        },
        6 => Selection {
            namespace: None,
            reqs: vec![if rng.chance(50) {
                Req::LabelExists(s("tier"))
            } else {
                Req::LabelNotExists(s("tier"))
            }],
        },
        7 | 8 => Selection {
            namespace: if rng.chance(30) { Some(ns(rng)) } else { None },
            reqs: vec![Req::FieldEq(
                s("spec.nodeName"),
                (*rng.pick(&NODES)).to_owned(),
            )],
        },
        9 => Selection {
            namespace: None,
            reqs: vec![Req::FieldEq(
                s("metadata.name"),
                format!("p{}", rng.below(4)),
            )],
        },
        10 => Selection {
            namespace: None,
            reqs: vec![
                Req::FieldEq(s("metadata.namespace"), ns(rng)),
                Req::LabelEq(s("app"), s("web")),
            ],
        },
        _ => Selection {
            namespace: None,
            reqs: vec![
                Req::FieldNotEq(s("spec.nodeName"), s("n0")),
                Req::LabelNotIn(s("app"), vec![s("db")]),
            ],
        },
    }
}

fn make_object(
    rng: &mut Rng,
    tokens: &mut u64,
    namespace: &str,
    name: &str,
    rv: Revision,
) -> Arc<Object> {
    *tokens += 1;
    let token = format!("w{tokens}");
    let mut labels = BTreeMap::new();
    match rng.below(3) {
        0 => {
            labels.insert("app".to_owned(), "web".to_owned());
        }
        1 => {
            labels.insert("app".to_owned(), "db".to_owned());
        }
        _ => {}
    }
    if rng.chance(40) {
        labels.insert("tier".to_owned(), "front".to_owned());
    }
    let node = (*rng.pick(&NODES)).to_owned();
    let mut fields = BTreeMap::new();
    fields.insert("spec.nodeName".to_owned(), node.clone());
    Arc::new(Object::new(
        namespace,
        name,
        labels.clone(),
        fields,
        rv,
        json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": name, "namespace": namespace, "labels": labels},
               "spec": {"nodeName": node}, "data": {"w": token}}),
    ))
}

fn request_for(selection: &Selection, start: WatchStart) -> WatchRequest {
    let mut request = WatchRequest::new(start);
    request.namespace = selection.namespace.clone();
    request.labels = LabelSelector::parse(&selection.label_selector()).expect("label selector");
    request.fields = FieldSelector::parse(&selection.field_selector()).expect("field selector");
    request
}

impl Driver {
    fn new(seed: u64) -> (Driver, String) {
        let mut rng = Rng::new(seed);
        let mode = if rng.chance(20) {
            WatchMode::Legacy
        } else {
            WatchMode::StallResume
        };
        let order = *rng.pick(&[
            CandidateOrder::FreeShareThenRotation,
            CandidateOrder::RotationOnly,
            CandidateOrder::OldestFirst,
        ]);
        let history_min = rng.range(2, 24) as usize;
        let config = CacheConfig {
            mode,
            candidate_order: order,
            trigger_field: if rng.chance(70) {
                Some("spec.nodeName".to_owned())
            } else {
                None
            },
            history_capacity_min: history_min,
            history_capacity_max: history_min * (1 << rng.below(3)),
            event_fresh_duration: Duration::from_millis(rng.range(500, 5000)),
            pass_members_max: rng.range(1, 8) as usize,
            pass_scan_units_max: 64 + rng.range(1, 40) as usize,
            pass_pushes_max: rng.range(1, 20) as usize,
            initial_no_progress_timeout: if rng.chance(15) {
                Duration::from_secs(rng.range(2, 8))
            } else {
                Duration::from_secs(3600)
            },
            bookmark_interval: Duration::from_millis(rng.range(200, 3000)),
            bookmark_before_deadline: Duration::from_millis(rng.range(10, 500)),
            fresh_wait_max: Duration::from_millis(rng.range(500, 4000)),
            ..CacheConfig::default()
        };
        let description = format!(
            "mode={} order={:?} history={}..{} trigger={} members={} pushes={}",
            mode.as_str(),
            order,
            config.history_capacity_min,
            config.history_capacity_max,
            config.trigger_field.is_some(),
            config.pass_members_max,
            config.pass_pushes_max
        );
        let base_rv = rng.range(1, 5);
        let mut tokens = 0;
        let mut objects: Vec<Arc<Object>> = Vec::new();
        for _ in 0..rng.below(7) {
            let namespace = *rng.pick(&NAMESPACES);
            let name = format!("p{}", rng.below(4));
            let object = make_object(&mut rng, &mut tokens, namespace, &name, base_rv);
            if objects.iter().all(|o| o.key() != object.key()) {
                objects.push(object);
            }
        }
        let history = History::new(base_rv, objects.iter().map(|o| to_obj(o)));
        let (cache, dispatcher, worker) =
            WatchCache::new(config.clone(), base_rv, objects).expect("valid config");
        let driver = Driver {
            rng,
            cache,
            dispatcher,
            worker,
            now: Instant::ZERO + Duration::from_secs(1),
            config,
            history,
            recording: Recording::default(),
            clients: Vec::new(),
            tokens,
            next_id: 0,
        };
        (driver, description)
    }

    fn object(&mut self, namespace: &str, name: &str, rv: Revision) -> Arc<Object> {
        make_object(&mut self.rng, &mut self.tokens, namespace, name, rv)
    }

    fn floor(&self) -> Revision {
        self.cache.history_info().oldest.saturating_sub(1)
    }

    /// Legacy mode: a blocked dispatcher takes no input; let its budget run out.
    fn unblock(&mut self) {
        while self.dispatcher.is_blocked() {
            let until = self
                .dispatcher
                .poll_timeout()
                .expect("a blocked dispatcher has a deadline");
            self.advance_to(until.max(self.now));
        }
    }

    fn advance_to(&mut self, until: Instant) {
        self.now = until;
        self.dispatcher.handle_timeout(self.now);
        if self.worker.handle_timeout(self.now).is_some() {
            let cost = Duration::from_micros(self.rng.below(3000));
            self.worker.record_pass_duration(cost);
        }
        self.dispatcher.handle_messages(self.now);
    }

    /// One revision of 1..4 changes (puts, deletes, deletes of absent keys).
    fn draw_revision(&mut self, rv: Revision) -> (Vec<Change>, Vec<(String, Option<Obj>)>) {
        let mut keys = std::collections::BTreeSet::new();
        let mut changes = Vec::new();
        let mut model = Vec::new();
        for _ in 0..self.rng.range(1, 4) {
            let namespace = *self.rng.pick(&NAMESPACES);
            let name = format!("p{}", self.rng.below(4));
            let key = checker::key_of(namespace, &name);
            if !keys.insert(key.clone()) {
                continue;
            }
            if self.rng.chance(22) {
                changes.push(Change::delete(key.clone()));
                model.push((key, None));
            } else {
                let object = self.object(namespace, &name, rv);
                model.push((key, Some(to_obj(&object))));
                changes.push(Change::put(object));
            }
        }
        (changes, model)
    }

    fn write(&mut self) {
        self.unblock();
        let rv = self.history.last_rv() + 1;
        let (changes, model) = self.draw_revision(rv);
        self.history.commit(rv, model);
        self.dispatcher.handle_revision(self.now, rv, changes);
    }

    fn progress(&mut self) {
        self.unblock();
        let rv = self.history.last_rv() + 1;
        self.history.advance(rv);
        self.dispatcher.handle_progress(self.now, rv);
    }

    /// A relist: some revisions the cache never sees, then a reset at the store's state.
    fn reset(&mut self) {
        self.unblock();
        for _ in 0..self.rng.below(4) {
            let rv = self.history.last_rv() + 1;
            let (_, model) = self.draw_revision(rv);
            self.history.commit(rv, model);
        }
        let rv = self.history.last_rv();
        let objects: Vec<Arc<Object>> = self
            .history
            .state()
            .values()
            .map(|o| {
                let mut fields = o.fields.clone();
                fields.remove("metadata.name");
                fields.remove("metadata.namespace");
                Arc::new(Object::new(
                    &o.namespace,
                    &o.name,
                    o.labels.clone(),
                    fields,
                    o.rv,
                    json!({"metadata": {"name": o.name, "namespace": o.namespace}, "data": {"w": o.token}}),
                ))
            })
            .collect();
        for client in &mut self.clients {
            if client.watch.is_some() && !client.done {
                client.epoch_ended = true;
            }
        }
        self.history.resets.push(rv);
        self.dispatcher.handle_reset(self.now, rv, objects);
    }

    fn open(&mut self, selection: Selection, start: Start, resumes: Option<u64>) {
        self.unblock();
        let dispatched = self.cache.dispatched();
        let bookmarks = self.rng.chance(60)
            || matches!(start, Start::InitialState { min: Some(m) } if m > dispatched);
        let core_start = match start {
            Start::Now => WatchStart::Now,
            Start::After(n) => WatchStart::After(n),
            Start::InitialState { min } => WatchStart::InitialState { min_revision: min },
        };
        let mut request = request_for(&selection, core_start);
        request.allow_bookmarks = bookmarks;
        request.queue_capacity = Some(self.rng.range(1, 8) as usize);
        if self.rng.chance(10) {
            request.deadline = Some(self.now + Duration::from_millis(self.rng.range(500, 10_000)));
        }
        let watch = self.cache.watch(request, self.now);
        self.dispatcher.handle_messages(self.now);
        let hi = self.cache.dispatched();
        let window = match start {
            Start::InitialState { min: Some(m) } if m > dispatched => (m, Revision::MAX),
            _ => (dispatched, hi),
        };
        self.next_id += 1;
        self.recording.sessions.push(Session {
            id: self.next_id,
            selection,
            start,
            bookmarks,
            window,
            items: Vec::new(),
            end: End::Open {
                complete_through: None,
            },
            resumes,
        });
        let speed = *self.rng.pick(&[1, 1, 2, 3, 5, 8, 64]);
        self.clients.push(Client {
            session: self.recording.sessions.len() - 1,
            watch: Some(watch),
            speed,
            stalled_for: 0,
            observed_floor: None,
            epoch_ended: false,
            done: false,
        });
    }

    fn new_watch(&mut self) {
        let selection = random_selection(&mut self.rng);
        let current = self.cache.dispatched();
        let start = match self.rng.below(10) {
            0..=2 => Start::Now,
            3..=5 => Start::After(current.saturating_sub(self.rng.below(30)).max(1)),
            6 => Start::After(current + self.rng.range(1, 2)),
            7 | 8 => Start::InitialState { min: None },
            _ => Start::InitialState {
                min: Some(
                    (current + self.rng.below(3))
                        .saturating_sub(self.rng.below(10))
                        .max(1),
                ),
            },
        };
        self.open(selection, start, None);
    }

    /// Pops up to `n` items of one client into its session.
    fn read(&mut self, index: usize, n: u64) {
        let client = &mut self.clients[index];
        let Some(watch) = &client.watch else {
            return;
        };
        let session = &mut self.recording.sessions[client.session];
        for _ in 0..n {
            match watch.try_pop() {
                Pop::Item(item) => session.items.push(item_of(&item)),
                Pop::End(end) => {
                    session.end = match end {
                        WatchEnd::Expired {
                            position, floor, ..
                        } => End::Gone {
                            claimed: Some((position, floor)),
                            observed_floor: client.observed_floor,
                            epoch_ended: client.epoch_ended,
                        },
                        WatchEnd::TooLargeResourceVersion { requested, current } => {
                            End::Error(format!("504 too large: {requested} > {current}"))
                        }
                        WatchEnd::Unresponsive
                        | WatchEnd::InitialNoProgress
                        | WatchEnd::Deadline
                        | WatchEnd::Shutdown => End::ServerClosed,
                    };
                    client.done = true;
                    client.watch = None;
                    break;
                }
                Pop::Empty => break,
            }
        }
    }

    /// Notes the floor around the step for every watch whose end was just queued.
    fn observe_ends(&mut self, floor_before: Revision) {
        let floor_after = self.floor();
        for client in &mut self.clients {
            if client.observed_floor.is_none()
                && let Some(watch) = &client.watch
                && watch.state() == watchkeeper_core::WatcherState::Ended
            {
                client.observed_floor = Some((floor_before, floor_after));
            }
        }
    }

    fn cancel(&mut self, index: usize) {
        // Half the time the connection pulled everything queued before it went away.
        if self.rng.chance(50) {
            self.read(index, u64::MAX);
        }
        let client = &mut self.clients[index];
        if client.done || client.watch.is_none() {
            return;
        }
        client.watch = None;
        client.done = true;
        self.recording.sessions[client.session].end = End::ClientClosed;
    }

    /// A finished client comes back: from the last resource version it saw (Resumable), or
    /// with a relist after a 410.
    fn reconnect(&mut self, index: usize) {
        let session = &self.recording.sessions[self.clients[index].session];
        let selection = session.selection.clone();
        let id = session.id;
        let gone = matches!(session.end, End::Gone { .. });
        let mut last: Revision = match session.start {
            Start::After(n) => n,
            _ => 0,
        };
        for item in &session.items {
            match item {
                Item::Event { rv, .. } | Item::Bookmark { rv, .. } => last = last.max(*rv),
                Item::Initial { .. } => {}
            }
        }
        // Resuming a cut initial phase is not a thing clients do: they relist.
        let cut_initial = matches!(session.start, Start::InitialState { .. })
            && !session.items.iter().any(|i| {
                matches!(
                    i,
                    Item::Bookmark {
                        initial_end: true,
                        ..
                    } | Item::Event { .. }
                )
            });
        self.clients[index].session = usize::MAX;
        if gone || last == 0 || cut_initial {
            self.open(selection, Start::InitialState { min: None }, None);
        } else {
            self.open(selection, Start::After(last), Some(id));
        }
    }

    fn read_state(&mut self) {
        if self.cache.dispatched() < self.history.last_rv() {
            return; // not fresh: a consistent read would wait
        }
        let window = (self.history.last_rv(), self.history.last_rv());
        self.next_id += 1;
        let id = self.next_id;
        match self.rng.below(3) {
            0 => {
                let namespace = NAMESPACES[self.rng.below(3) as usize];
                let key = checker::key_of(namespace, &format!("p{}", self.rng.below(4)));
                let (object, _) = self.cache.get(&key);
                self.recording.reads.push(Read {
                    id,
                    kind: ReadKind::Get {
                        key,
                        result: object.map(|o| (o.resource_version(), token_of(&o))),
                    },
                    window,
                    result_rv: None,
                });
            }
            1 => {
                let snapshot = self.cache.latest();
                let selection = random_selection(&mut self.rng);
                let result = snapshot
                    .range(None, None)
                    .map(|o| to_obj(o))
                    .filter(|o| selection.matches(o))
                    .map(|o| (o.key(), (o.rv, o.token)))
                    .collect();
                self.recording.reads.push(Read {
                    id,
                    kind: ReadKind::List { selection, result },
                    window,
                    result_rv: Some(snapshot.revision()),
                });
            }
            _ => {
                let rv = self
                    .history
                    .last_rv()
                    .saturating_sub(self.rng.below(20))
                    .max(1);
                if let Ok(snapshot) = self.cache.snapshot_at(rv) {
                    let result = snapshot
                        .range(None, None)
                        .map(|o| (o.key().to_string(), (o.resource_version(), token_of(o))))
                        .collect();
                    self.recording.reads.push(Read {
                        id,
                        kind: ReadKind::List {
                            selection: Selection::all(),
                            result,
                        },
                        window: (rv, rv),
                        result_rv: Some(snapshot.revision()),
                    });
                }
            }
        }
    }

    fn step(&mut self) {
        let floor_before = self.floor();
        let active: Vec<usize> = (0..self.clients.len())
            .filter(|i| self.clients[*i].watch.is_some())
            .collect();
        let finished: Vec<usize> = (0..self.clients.len())
            .filter(|i| self.clients[*i].done && self.clients[*i].session != usize::MAX)
            .collect();
        match self.rng.weighted(&[30, 3, 8, 30, 4, 3, 5, 12, 5, 5, 1]) {
            0 => self.write(),
            1 => self.progress(),
            2 => {
                if active.len() < 24 {
                    self.new_watch();
                }
            }
            3 => {
                for index in active {
                    let client = &mut self.clients[index];
                    if client.stalled_for > 0 {
                        client.stalled_for -= 1;
                        continue;
                    }
                    let n = self.rng.range(0, client.speed);
                    self.read(index, n);
                }
                if self.config.mode == WatchMode::Legacy && self.dispatcher.is_blocked() {
                    self.dispatcher.retry_blocked(self.now);
                }
            }
            4 => {
                if !active.is_empty() {
                    let index = *self.rng.pick(&active);
                    self.clients[index].stalled_for = self.rng.range(1, 40) as u32;
                }
            }
            5 => {
                if !active.is_empty() {
                    let index = *self.rng.pick(&active);
                    self.cancel(index);
                }
            }
            6 => {
                if !finished.is_empty() {
                    let index = *self.rng.pick(&finished);
                    self.reconnect(index);
                }
            }
            7 => {
                let by = Duration::from_millis(self.rng.range(1, 2500));
                let until = self.now + by;
                self.advance_to(until);
            }
            8 => {
                self.dispatcher.handle_messages(self.now);
                self.worker.run_pass(self.now);
                self.dispatcher.handle_messages(self.now);
            }
            9 => self.read_state(),
            _ => {
                if self.rng.chance(30) {
                    self.reset();
                }
            }
        }
        self.observe_ends(floor_before);
    }

    /// Everyone reads everything until nobody is behind; open sessions must then be complete.
    fn settle(&mut self) {
        for _ in 0..2000 {
            let floor_before = self.floor();
            for index in 0..self.clients.len() {
                self.clients[index].stalled_for = 0;
                self.read(index, u64::MAX);
            }
            if self.dispatcher.is_blocked() {
                self.dispatcher.retry_blocked(self.now);
            }
            self.observe_ends(floor_before);
            if self.worker.poll_timeout().is_none()
                && !self.dispatcher.has_messages()
                && !self.dispatcher.is_blocked()
            {
                break;
            }
            let until = self.now + self.config.pass_period_idle.min(Duration::from_millis(50));
            self.advance_to(until);
            self.observe_ends(floor_before);
        }
        for index in 0..self.clients.len() {
            self.read(index, u64::MAX);
        }
        let last = self.history.last_rv();
        for client in &self.clients {
            if client.watch.is_some() && !client.done {
                let session = &mut self.recording.sessions[client.session];
                session.end = End::Open {
                    complete_through: Some(last),
                };
                if session.window.1 == Revision::MAX {
                    session.window.1 = last;
                }
            }
        }
        for session in &mut self.recording.sessions {
            if session.window.1 == Revision::MAX {
                session.window.1 = last;
            }
        }
    }
}

/// Runs one seed and checks it.
#[must_use]
pub fn run_seed(seed: u64) -> Outcome {
    let (mut driver, config) = Driver::new(seed);
    let steps = driver.rng.range(50, 400);
    for _ in 0..steps {
        driver.step();
    }
    driver.settle();
    let mut report = checker::check(&driver.history, &driver.recording);
    // The core's own safety net must never fire, and nobody may stay stalled.
    let metrics = driver.cache.metrics();
    if metrics.watcher_skipped_events.get() != 0 {
        report.violations.push(checker::Violation {
            guarantee: checker::Guarantee::Reliable,
            subject: "core".to_owned(),
            message: format!(
                "watcher_skipped_events = {}",
                metrics.watcher_skipped_events.get()
            ),
        });
    }
    let stalled = metrics.stalled_watchers.get();
    if stalled != 0 {
        report.violations.push(checker::Violation {
            guarantee: checker::Guarantee::Reliable,
            subject: "core".to_owned(),
            message: format!("{stalled} watcher(s) still stalled after settling"),
        });
    }
    let mut ends = BTreeMap::new();
    for session in &driver.recording.sessions {
        let kind = match &session.end {
            End::Open { .. } => "open",
            End::ClientClosed => "client-closed",
            End::Gone {
                epoch_ended: true, ..
            } => "410-relist",
            End::Gone { .. } => "410",
            End::ServerClosed => "server-closed",
            End::Error(_) => "error",
        };
        *ends.entry(kind).or_insert(0) += 1;
        if session.resumes.is_some() {
            *ends.entry("resumed").or_insert(0) += 1;
        }
        if matches!(session.start, Start::InitialState { .. }) {
            *ends.entry("initial-state").or_insert(0) += 1;
        }
    }
    ends.insert("resets", driver.history.resets.len() as u64);
    Outcome {
        seed,
        config,
        revisions: driver.history.last_rv(),
        report,
        ends,
    }
}

/// Runs seeds `first..first + count`, stopping at the first violation if `stop_at_first`.
pub fn run_seeds(
    first: u64,
    count: u64,
    stop_at_first: bool,
    mut each: impl FnMut(&Outcome),
) -> Report {
    let mut total = Report::default();
    for seed in first..first + count {
        let outcome = run_seed(seed);
        each(&outcome);
        let failed = !outcome.report.violations.is_empty();
        total.merge(outcome.report);
        if failed && stop_at_first {
            break;
        }
    }
    total
}
