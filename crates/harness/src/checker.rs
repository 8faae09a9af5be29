//! The checker: a pure function from a committed write history and a recording of what clients
//! saw (watch sessions, reads, acknowledged writes) to a list of violations, each naming the
//! guarantee it breaks.
//!
//! It knows nothing of the core or the server: it has its own object model, its own selector
//! semantics (Kubernetes' label and field selector rules) and computes what every session
//! should have received from the history alone.
//!
//! ## What a session is checked against
//! A session's *start point* `s` is the revision after which it must see every change:
//! `After(N)` → `N`; `Now` → somewhere in the request's revision window (the checker picks the
//! point that explains the first event, so a start anywhere in the window is accepted);
//! `InitialState` → the revision of its initial state (the initial-events-end bookmark's, or,
//! without bookmarks, the revision in the window whose state equals the initial set).
//! The expected stream is every change in `(s, last]` that the selection sees: ADDED when the
//! object enters (or is created inside) it, MODIFIED when it stays, DELETED when it leaves (or
//! is deleted), carrying the previous object.
//!
//! How much of the expected stream must have arrived depends on how the session ended:
//! a settled open session everything up to its `complete_through`; a 410 everything up to the
//! position the server claims; a client-cut session any prefix (the final revision may be
//! partial: the client cut the connection, not the server).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;

/// A store revision, also the resource version of objects and events.
pub type Rev = u64;

/// The guarantees, one vocabulary with the simulator's oracle and the core's model test.
pub use watchkeeper_core::Guarantee;

/// One object version, as the checker models it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Obj {
    /// Namespace (empty for cluster-scoped objects).
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Labels.
    pub labels: BTreeMap<String, String>,
    /// Selectable fields besides `metadata.name` and `metadata.namespace`.
    pub fields: BTreeMap<String, String>,
    /// The revision that wrote this version.
    pub rv: Rev,
    /// A token unique to the write that produced this content (identity of the content).
    pub token: String,
}

impl Obj {
    /// `namespace/name`, or `name` for cluster-scoped objects.
    #[must_use]
    pub fn key(&self) -> String {
        key_of(&self.namespace, &self.name)
    }

    /// A selectable field's value; absent fields read as empty.
    #[must_use]
    pub fn field(&self, field: &str) -> &str {
        match field {
            "metadata.name" => &self.name,
            "metadata.namespace" => &self.namespace,
            other => self.fields.get(other).map_or("", String::as_str),
        }
    }
}

/// The key of an object.
#[must_use]
pub fn key_of(namespace: &str, name: &str) -> String {
    if namespace.is_empty() {
        name.to_owned()
    } else {
        format!("{namespace}/{name}")
    }
}

/// One requirement of a selection (Kubernetes semantics: `!=` and `notin` match absent labels).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Req {
    /// `k=v`.
    LabelEq(String, String),
    /// `k!=v`.
    LabelNotEq(String, String),
    /// `k in (a,b)`.
    LabelIn(String, Vec<String>),
    /// `k notin (a,b)`.
    LabelNotIn(String, Vec<String>),
    /// `k`.
    LabelExists(String),
    /// `!k`.
    LabelNotExists(String),
    /// Field `f=v`.
    FieldEq(String, String),
    /// Field `f!=v`.
    FieldNotEq(String, String),
}

/// What a watch or list selects.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Selection {
    /// The namespace of the request path.
    pub namespace: Option<String>,
    /// Label and field requirements, ANDed.
    pub reqs: Vec<Req>,
}

impl Selection {
    /// Everything.
    #[must_use]
    pub fn all() -> Selection {
        Selection::default()
    }

    /// Whether the object is selected.
    #[must_use]
    pub fn matches(&self, o: &Obj) -> bool {
        if let Some(ns) = &self.namespace
            && &o.namespace != ns
        {
            return false;
        }
        self.reqs.iter().all(|r| match r {
            Req::LabelEq(k, v) => o.labels.get(k) == Some(v),
            Req::LabelNotEq(k, v) => o.labels.get(k) != Some(v),
            Req::LabelIn(k, vs) => o.labels.get(k).is_some_and(|x| vs.contains(x)),
            Req::LabelNotIn(k, vs) => o.labels.get(k).is_none_or(|x| !vs.contains(x)),
            Req::LabelExists(k) => o.labels.contains_key(k),
            Req::LabelNotExists(k) => !o.labels.contains_key(k),
            Req::FieldEq(f, v) => o.field(f) == v,
            Req::FieldNotEq(f, v) => o.field(f) != v,
        })
    }

    /// The `labelSelector` query value.
    #[must_use]
    pub fn label_selector(&self) -> String {
        let parts: Vec<String> = self
            .reqs
            .iter()
            .filter_map(|r| match r {
                Req::LabelEq(k, v) => Some(format!("{k}={v}")),
                Req::LabelNotEq(k, v) => Some(format!("{k}!={v}")),
                Req::LabelIn(k, vs) => Some(format!("{k} in ({})", vs.join(","))),
                Req::LabelNotIn(k, vs) => Some(format!("{k} notin ({})", vs.join(","))),
                Req::LabelExists(k) => Some(k.clone()),
                Req::LabelNotExists(k) => Some(format!("!{k}")),
                _ => None,
            })
            .collect();
        parts.join(",")
    }

    /// The `fieldSelector` query value.
    #[must_use]
    pub fn field_selector(&self) -> String {
        let parts: Vec<String> = self
            .reqs
            .iter()
            .filter_map(|r| match r {
                Req::FieldEq(f, v) => Some(format!("{f}={v}")),
                Req::FieldNotEq(f, v) => Some(format!("{f}!={v}")),
                _ => None,
            })
            .collect();
        parts.join(",")
    }
}

/// One committed change.
#[derive(Clone, Debug)]
pub struct Change {
    /// The key.
    pub key: String,
    /// The object after the change (`None`: deleted).
    pub new: Option<Obj>,
    /// The object before the change (`None`: created).
    pub prev: Option<Obj>,
}

/// The committed write history: an initial state and every revision with its changes.
#[derive(Clone, Debug, Default)]
pub struct History {
    base_rv: Rev,
    revisions: BTreeMap<Rev, Vec<Change>>,
    /// Per key: (revision, version) in revision order; the base state at `base_rv`.
    versions: HashMap<String, Vec<(Rev, Option<Obj>)>>,
    state: BTreeMap<String, Obj>,
    last_rv: Rev,
    /// Revisions at which the cache was re-listed (informational).
    pub resets: Vec<Rev>,
}

impl History {
    /// A history starting from `objects` at revision `base_rv`.
    #[must_use]
    pub fn new(base_rv: Rev, objects: impl IntoIterator<Item = Obj>) -> History {
        let mut h = History {
            base_rv,
            last_rv: base_rv,
            ..History::default()
        };
        for o in objects {
            let key = o.key();
            h.versions
                .entry(key.clone())
                .or_default()
                .push((base_rv, Some(o.clone())));
            h.state.insert(key, o);
        }
        h
    }

    /// Commits one revision: each `(key, new object or None)` in store order. Deleting an
    /// absent key changes nothing and is dropped. Returns the changes recorded.
    ///
    /// # Panics
    /// If `rv` is not above the last revision.
    pub fn commit(&mut self, rv: Rev, writes: Vec<(String, Option<Obj>)>) -> &[Change] {
        assert!(
            rv > self.last_rv,
            "revision {rv} not above {}",
            self.last_rv
        );
        self.last_rv = rv;
        let mut changes = Vec::new();
        for (key, new) in writes {
            let prev = self.state.get(&key).cloned();
            if new.is_none() && prev.is_none() {
                continue;
            }
            match &new {
                Some(o) => {
                    self.state.insert(key.clone(), o.clone());
                }
                None => {
                    self.state.remove(&key);
                }
            }
            self.versions
                .entry(key.clone())
                .or_default()
                .push((rv, new.clone()));
            changes.push(Change { key, new, prev });
        }
        if changes.is_empty() {
            return &[];
        }
        self.revisions.entry(rv).or_insert(changes)
    }

    /// The store's revision advanced without changes here (progress).
    pub fn advance(&mut self, rv: Rev) {
        self.last_rv = self.last_rv.max(rv);
    }

    /// The newest committed revision.
    #[must_use]
    pub fn last_rv(&self) -> Rev {
        self.last_rv
    }

    /// The first revision of the history.
    #[must_use]
    pub fn base_rv(&self) -> Rev {
        self.base_rv
    }

    /// The current state.
    #[must_use]
    pub fn state(&self) -> &BTreeMap<String, Obj> {
        &self.state
    }

    /// Revisions with changes.
    #[must_use]
    pub fn revisions(&self) -> &BTreeMap<Rev, Vec<Change>> {
        &self.revisions
    }

    /// The object under `key` at revision `rv`.
    #[must_use]
    pub fn value_at(&self, key: &str, rv: Rev) -> Option<&Obj> {
        let versions = self.versions.get(key)?;
        let index = versions.partition_point(|(r, _)| *r <= rv);
        if index == 0 {
            return None;
        }
        versions[index - 1].1.as_ref()
    }

    /// The selected state at revision `rv`: key → (rv, token).
    #[must_use]
    pub fn state_at(&self, rv: Rev, selection: &Selection) -> BTreeMap<String, (Rev, String)> {
        let mut out = BTreeMap::new();
        for key in self.versions.keys() {
            if let Some(o) = self.value_at(key, rv)
                && selection.matches(o)
            {
                out.insert(key.clone(), (o.rv, o.token.clone()));
            }
        }
        out
    }

    /// Every change a selection sees in `(after, up_to]`, typed as the watcher sees it.
    #[must_use]
    pub fn expected(&self, selection: &Selection, after: Rev, up_to: Rev) -> Vec<Expected> {
        let mut out = Vec::new();
        if up_to <= after {
            return out;
        }
        for (rv, changes) in self.revisions.range(after + 1..=up_to) {
            for (index, c) in changes.iter().enumerate() {
                let now = c.new.as_ref().is_some_and(|o| selection.matches(o));
                let before = c.prev.as_ref().is_some_and(|o| selection.matches(o));
                let (etype, token) = match (now, before) {
                    (true, false) => (EType::Added, c.new.as_ref().map(|o| o.token.clone())),
                    (true, true) => (EType::Modified, c.new.as_ref().map(|o| o.token.clone())),
                    (false, true) => (EType::Deleted, c.prev.as_ref().map(|o| o.token.clone())),
                    (false, false) => continue,
                };
                out.push(Expected {
                    etype,
                    key: c.key.clone(),
                    rv: *rv,
                    index,
                    token: token.unwrap_or_default(),
                });
            }
        }
        out
    }

    /// The position of `key`'s change within revision `rv` (store order).
    fn index_of(&self, rv: Rev, key: &str) -> Option<usize> {
        self.revisions.get(&rv)?.iter().position(|c| c.key == key)
    }

    /// Change revisions in `(lo, hi]`, with `lo` first: the candidate points of a window.
    fn points(&self, lo: Rev, hi: Rev) -> Vec<Rev> {
        let mut out = vec![lo];
        if hi > lo {
            out.extend(self.revisions.range(lo + 1..=hi).map(|(rv, _)| *rv));
        }
        out
    }
}

/// A watch event type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EType {
    /// ADDED.
    Added,
    /// MODIFIED.
    Modified,
    /// DELETED.
    Deleted,
}

/// One event the checker expects.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expected {
    /// Its type for this selection.
    pub etype: EType,
    /// The key.
    pub key: String,
    /// The revision.
    pub rv: Rev,
    /// Its index in the revision (store order).
    pub index: usize,
    /// The token of the object it carries (the previous object for DELETED).
    pub token: String,
}

/// One item a client received.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Item {
    /// A watch event. `rv` is the event's resource version; `token` identifies the content
    /// carried (for DELETED, the previous object's).
    Event {
        /// Type.
        etype: EType,
        /// Key.
        key: String,
        /// Resource version.
        rv: Rev,
        /// Content token.
        token: String,
    },
    /// One object of the initial state (ADDED before the initial-events-end bookmark).
    Initial {
        /// Key.
        key: String,
        /// The object's resource version.
        rv: Rev,
        /// Content token.
        token: String,
    },
    /// A bookmark.
    Bookmark {
        /// Its resource version.
        rv: Rev,
        /// Whether it ends the initial events.
        initial_end: bool,
    },
}

/// Where a session started.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Start {
    /// From the present (`resourceVersion=0` without initial events).
    Now,
    /// After revision N.
    After(Rev),
    /// Initial state first (`sendInitialEvents=true`), at a revision of at least `min`.
    InitialState {
        /// The lowest acceptable revision of the initial state.
        min: Option<Rev>,
    },
}

/// How a session ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum End {
    /// Still open when recording stopped. With `complete_through: Some(r)` the system had
    /// settled: every selected change up to `r` must have arrived.
    Open {
        /// The revision everything must have arrived up to, if settled.
        complete_through: Option<Rev>,
    },
    /// The client closed it (any prefix is fine; the final revision may be partial).
    ClientClosed,
    /// 410 Gone.
    Gone {
        /// `(position, floor)` as the server stated them, if it did.
        claimed: Option<(Rev, Rev)>,
        /// The lowest servable position observed around the 410 (`oldest - 1` before and
        /// after the step that produced it), if the driver could observe it.
        observed_floor: Option<(Rev, Rev)>,
        /// The cache was re-listed while this session was open (every watcher gets a 410).
        epoch_ended: bool,
    },
    /// The server ended it cleanly (deadline, shutdown, legacy force-close, no progress).
    ServerClosed,
    /// Another error (not 410).
    Error(String),
}

/// One recorded watch session.
#[derive(Clone, Debug)]
pub struct Session {
    /// Unique id in the recording.
    pub id: u64,
    /// What it selects.
    pub selection: Selection,
    /// Where it starts.
    pub start: Start,
    /// Whether it asked for bookmarks.
    pub bookmarks: bool,
    /// The committed revision when it was requested and when it was established.
    pub window: (Rev, Rev),
    /// Everything received, in order.
    pub items: Vec<Item>,
    /// How it ended.
    pub end: End,
    /// The session whose last seen resource version this one resumes from.
    pub resumes: Option<u64>,
}

/// A read's result.
#[derive(Clone, Debug)]
pub enum ReadKind {
    /// GET of one key: `(object rv, token)` or not found.
    Get {
        /// Key.
        key: String,
        /// Result.
        result: Option<(Rev, String)>,
    },
    /// LIST: key → (rv, token).
    List {
        /// Selection.
        selection: Selection,
        /// Result.
        result: BTreeMap<String, (Rev, String)>,
    },
}

/// One recorded read.
#[derive(Clone, Debug)]
pub struct Read {
    /// Id.
    pub id: u64,
    /// What was read and what came back.
    pub kind: ReadKind,
    /// `[revision committed at request start, revision committed at response]`.
    pub window: (Rev, Rev),
    /// The resource version the result claims (a LIST's), if any.
    pub result_rv: Option<Rev>,
}

/// An acknowledged write (2xx): the key, the revision the response carried, and its token.
#[derive(Clone, Debug)]
pub struct AckedWrite {
    /// Key.
    pub key: String,
    /// The revision of the write.
    pub rv: Rev,
    /// The token written (`None` for deletes).
    pub token: Option<String>,
}

/// Everything clients saw.
#[derive(Clone, Debug, Default)]
pub struct Recording {
    /// Watch sessions.
    pub sessions: Vec<Session>,
    /// Reads.
    pub reads: Vec<Read>,
    /// Acknowledged writes.
    pub acked: Vec<AckedWrite>,
}

/// One violation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// The guarantee broken.
    pub guarantee: Guarantee,
    /// The session or read id.
    pub subject: String,
    /// What happened.
    pub message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}] {}: {}", self.guarantee, self.subject, self.message)
    }
}

/// What a check found.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// Sessions checked.
    pub sessions: u64,
    /// Events (and initial objects) checked.
    pub events: u64,
    /// Reads checked.
    pub reads: u64,
    /// Violations.
    pub violations: Vec<Violation>,
}

impl Report {
    /// Whether a guarantee was reported broken.
    #[must_use]
    pub fn has(&self, guarantee: Guarantee) -> bool {
        self.violations.iter().any(|v| v.guarantee == guarantee)
    }

    /// Adds another report's figures.
    pub fn merge(&mut self, other: Report) {
        self.sessions += other.sessions;
        self.events += other.events;
        self.reads += other.reads;
        self.violations.extend(other.violations);
    }
}

/// Checks a recording against a history.
#[must_use]
pub fn check(history: &History, recording: &Recording) -> Report {
    let mut report = Report::default();
    let mut last_seen: HashMap<u64, Rev> = HashMap::new();
    for session in &recording.sessions {
        let summary = check_session(history, session, &mut report);
        last_seen.insert(session.id, summary);
    }
    for session in &recording.sessions {
        if let Some(previous) = session.resumes {
            let subject = format!("session {}", session.id);
            match (last_seen.get(&previous), session.start) {
                (Some(seen), Start::After(n)) if n != *seen => report.violations.push(Violation {
                    guarantee: Guarantee::Resumable,
                    subject,
                    message: format!(
                        "resumes session {previous} from {n}, but the last resource version it saw was {seen}"
                    ),
                }),
                (None, _) => report.violations.push(Violation {
                    guarantee: Guarantee::Resumable,
                    subject,
                    message: format!("resumes unknown session {previous}"),
                }),
                _ => {}
            }
        }
    }
    for read in &recording.reads {
        check_read(history, read, &mut report);
    }
    for write in &recording.acked {
        check_acked(history, write, &mut report);
    }
    report
}

fn check_acked(history: &History, write: &AckedWrite, report: &mut Report) {
    let found = history
        .revisions
        .get(&write.rv)
        .and_then(|changes| changes.iter().find(|c| c.key == write.key));
    let ok = match (found, &write.token) {
        (Some(c), Some(token)) => c.new.as_ref().is_some_and(|o| &o.token == token),
        (Some(c), None) => c.new.is_none(),
        (None, _) => false,
    };
    if !ok {
        report.violations.push(Violation {
            guarantee: Guarantee::Durable,
            subject: format!("write {}@{}", write.key, write.rv),
            message: format!(
                "acknowledged write ({}) is not in the committed history",
                write.token.as_deref().unwrap_or("delete")
            ),
        });
    }
}

fn check_read(history: &History, read: &Read, report: &mut Report) {
    report.reads += 1;
    let subject = format!("read {}", read.id);
    let (lo, hi) = read.window;
    let mut fail = |message: String| {
        report.violations.push(Violation {
            guarantee: Guarantee::LinearizableReads,
            subject: subject.clone(),
            message,
        });
    };
    match &read.kind {
        ReadKind::Get { key, result } => {
            let value = |rv: Rev| history.value_at(key, rv).map(|o| (o.rv, o.token.clone()));
            let points = history.points(lo, hi);
            if !points.iter().any(|p| value(*p) == *result) {
                fail(format!(
                    "GET {key} returned {result:?}, but its value in the window [{lo}, {hi}] was {:?} (stale or never committed)",
                    points.iter().map(|p| value(*p)).collect::<Vec<_>>()
                ));
            }
        }
        ReadKind::List { selection, result } => match read.result_rv {
            Some(rv) => {
                if rv < lo || rv > hi {
                    fail(format!(
                        "LIST at resource version {rv} outside its window [{lo}, {hi}] (stale read)"
                    ));
                } else if history.state_at(rv, selection) != *result {
                    fail(format!(
                        "LIST at resource version {rv} differs from the state at {rv}: {}",
                        diff(&history.state_at(rv, selection), result)
                    ));
                }
            }
            None => {
                if !history
                    .points(lo, hi)
                    .iter()
                    .any(|p| history.state_at(*p, selection) == *result)
                {
                    fail(format!(
                        "LIST equals no state in the window [{lo}, {hi}]: {}",
                        diff(&history.state_at(lo, selection), result)
                    ));
                }
            }
        },
    }
}

fn diff(
    expected: &BTreeMap<String, (Rev, String)>,
    got: &BTreeMap<String, (Rev, String)>,
) -> String {
    let missing: Vec<_> = expected
        .iter()
        .filter(|(k, v)| got.get(*k) != Some(v))
        .map(|(k, (rv, _))| format!("{k}@{rv}"))
        .collect();
    let extra: Vec<_> = got
        .iter()
        .filter(|(k, v)| expected.get(*k) != Some(v))
        .map(|(k, (rv, _))| format!("{k}@{rv}"))
        .collect();
    format!("missing {missing:?}, unexpected {extra:?}")
}

/// Checks one session; returns the last resource version the client saw (its resume point:
/// the newest event or bookmark, or `N` of `After(N)`; 0 when it has none).
fn check_session(history: &History, session: &Session, report: &mut Report) -> Rev {
    report.sessions += 1;
    let subject = format!("session {}", session.id);
    let mut violations: Vec<Violation> = Vec::new();
    let mut push = |guarantee: Guarantee, message: String| {
        violations.push(Violation {
            guarantee,
            subject: subject.clone(),
            message,
        });
    };
    let sel = &session.selection;
    let resumed = session.resumes.is_some();

    // The initial phase: Initial items, then (with bookmarks) the initial-events-end bookmark.
    let initial_end_at = session.items.iter().position(|i| {
        matches!(
            i,
            Item::Bookmark {
                initial_end: true,
                ..
            }
        )
    });
    let initial: Vec<(usize, &String, Rev, &String)> = session
        .items
        .iter()
        .enumerate()
        .filter_map(|(index, i)| match i {
            Item::Initial { key, rv, token } => Some((index, key, *rv, token)),
            _ => None,
        })
        .collect();
    report.events += initial.len() as u64;
    let is_initial = matches!(session.start, Start::InitialState { .. });
    if !is_initial && (!initial.is_empty() || initial_end_at.is_some()) {
        push(
            Guarantee::InitialState,
            "initial events in a watch that did not ask for them".to_owned(),
        );
    }
    let mut initial_set: BTreeMap<String, (Rev, String)> = BTreeMap::new();
    for (index, key, rv, token) in &initial {
        if let Some(end) = initial_end_at
            && *index > end
        {
            push(
                Guarantee::InitialState,
                format!("initial object {key}@{rv} after the initial-events-end bookmark"),
            );
        }
        if initial_set
            .insert((*key).clone(), (*rv, (*token).clone()))
            .is_some()
        {
            push(Guarantee::Unique, format!("initial object {key} twice"));
        }
    }
    // Is the initial phase complete (so the state can be compared)?
    let events_before_end = session.items[..initial_end_at.unwrap_or(session.items.len())]
        .iter()
        .any(|i| matches!(i, Item::Event { .. }));
    let initial_complete = if session.bookmarks {
        initial_end_at.is_some()
    } else {
        // Without bookmarks the initial phase ends at the first event, or is complete when
        // the session settled.
        session
            .items
            .iter()
            .any(|i| matches!(i, Item::Event { .. }))
            || matches!(
                session.end,
                End::Open {
                    complete_through: Some(_)
                }
            )
    };
    if is_initial && session.bookmarks && initial_end_at.is_some() && events_before_end {
        push(
            Guarantee::InitialState,
            "watch events before the initial-events-end bookmark".to_owned(),
        );
    }

    // The start point.
    let first_event_rv = session.items.iter().find_map(|i| match i {
        Item::Event { rv, .. } => Some(*rv),
        _ => None,
    });
    let (lo, hi) = session.window;
    let start: Option<Rev> = match session.start {
        Start::After(n) => Some(n),
        Start::Now => Some(match first_event_rv {
            Some(r) => r.saturating_sub(1).clamp(lo, hi.max(lo)),
            None => hi.max(lo),
        }),
        Start::InitialState { min } => {
            if !initial_complete {
                None
            } else {
                let s = match initial_end_at.map(|i| &session.items[i]) {
                    Some(Item::Bookmark { rv, .. }) => {
                        let want = history.state_at(*rv, sel);
                        if want != initial_set {
                            push(
                                Guarantee::InitialState,
                                format!(
                                    "initial events differ from the state at the end bookmark's {rv}: {}",
                                    diff(&want, &initial_set)
                                ),
                            );
                        }
                        *rv
                    }
                    _ => {
                        let points = history.points(lo, hi.max(lo));
                        match points
                            .iter()
                            .find(|p| history.state_at(**p, sel) == initial_set)
                        {
                            Some(p) => *p,
                            None => {
                                push(
                                    Guarantee::InitialState,
                                    format!(
                                        "initial events equal no state in the window [{lo}, {hi}]: {}",
                                        diff(&history.state_at(hi, sel), &initial_set)
                                    ),
                                );
                                hi
                            }
                        }
                    }
                };
                if let Some(min) = min
                    && s < min
                {
                    push(
                        Guarantee::InitialState,
                        format!("initial state at {s}, below the requested minimum {min}"),
                    );
                }
                if s > history.last_rv {
                    push(
                        Guarantee::InitialState,
                        format!(
                            "initial state at {s}, beyond the last committed revision {}",
                            history.last_rv
                        ),
                    );
                }
                Some(s)
            }
        }
    };

    // Ordered, Unique, Bookmarkable over the stream.
    let mut seen: HashSet<(Rev, &str)> = HashSet::new();
    let mut last_rv: Rev = 0;
    let mut last_event: Option<(Rev, Option<usize>)> = None;
    let mut last_bookmark: Option<Rev> = None;
    let mut max_seen: Rev = start.unwrap_or(0);
    let mut client_seen: Rev = match session.start {
        Start::After(n) => n,
        _ => 0,
    };
    for item in &session.items {
        match item {
            Item::Event { key, rv, .. } => {
                report.events += 1;
                if !seen.insert((*rv, key.as_str())) {
                    push(
                        if resumed && start.is_some_and(|s| *rv <= s) {
                            Guarantee::Resumable
                        } else {
                            Guarantee::Unique
                        },
                        format!("event {key}@{rv} delivered twice"),
                    );
                    continue;
                }
                if *rv < last_rv {
                    push(
                        Guarantee::Ordered,
                        format!("event {key}@{rv} after resource version {last_rv}"),
                    );
                }
                let index = history.index_of(*rv, key);
                if let Some((prev_rv, prev_index)) = last_event
                    && prev_rv == *rv
                    && let (Some(a), Some(b)) = (prev_index, index)
                    && b < a
                {
                    push(
                        Guarantee::Ordered,
                        format!(
                            "event {key}@{rv} before an event the store ordered earlier in revision {rv}"
                        ),
                    );
                }
                if let Some(b) = last_bookmark.take()
                    && *rv <= b
                {
                    push(
                        Guarantee::Bookmarkable,
                        format!("event {key}@{rv} after a bookmark at {b}"),
                    );
                }
                last_event = Some((*rv, index));
                last_rv = last_rv.max(*rv);
                max_seen = max_seen.max(*rv);
                client_seen = client_seen.max(*rv);
            }
            Item::Bookmark { rv, initial_end } => {
                if *rv < last_rv {
                    push(
                        Guarantee::Bookmarkable,
                        format!(
                            "bookmark at {rv} after resource version {last_rv} (moves the client backwards)"
                        ),
                    );
                }
                if !initial_end {
                    last_bookmark = Some(*rv);
                }
                last_rv = last_rv.max(*rv);
                max_seen = max_seen.max(*rv);
                client_seen = client_seen.max(*rv);
            }
            Item::Initial { .. } => {}
        }
    }

    // Compare the events with what the history says.
    if let Some(s) = start {
        let expected = history.expected(sel, s, history.last_rv);
        let position: HashMap<(Rev, &str), usize> = expected
            .iter()
            .enumerate()
            .map(|(i, e)| ((e.rv, e.key.as_str()), i))
            .collect();
        let delivered_revs: HashSet<Rev> = session
            .items
            .iter()
            .filter_map(|i| match i {
                Item::Event { rv, .. } => Some(*rv),
                _ => None,
            })
            .collect();
        let mut next = 0usize;
        let mut reported_gap = false;
        let mut delivered: HashSet<(Rev, &str)> = HashSet::new();
        let missing_name = |e: &Expected, before_first: bool| {
            if delivered_revs.contains(&e.rv) {
                Guarantee::Atomic
            } else if resumed && before_first {
                Guarantee::Resumable
            } else {
                Guarantee::Reliable
            }
        };
        let mut any_delivered = false;
        for item in &session.items {
            match item {
                Item::Event {
                    etype,
                    key,
                    rv,
                    token,
                } => {
                    if !delivered.insert((*rv, key.as_str())) {
                        continue;
                    }
                    match position.get(&(*rv, key.as_str())) {
                        None => {
                            let in_history = history.index_of(*rv, key).is_some();
                            if *rv <= s {
                                push(
                                    if resumed {
                                        Guarantee::Resumable
                                    } else {
                                        Guarantee::Reliable
                                    },
                                    format!("event {key}@{rv} at or before the start point {s}"),
                                );
                            } else if in_history {
                                push(
                                    Guarantee::Selection,
                                    format!(
                                        "event {key}@{rv} for a change the selection does not see"
                                    ),
                                );
                            } else {
                                push(
                                    Guarantee::Selection,
                                    format!(
                                        "event {key}@{rv} that is not in the committed history"
                                    ),
                                );
                            }
                        }
                        Some(&i) => {
                            if i > next && !reported_gap {
                                let missing = &expected[next..i];
                                let e = &missing[0];
                                push(
                                    missing_name(e, !any_delivered),
                                    format!(
                                        "{} event(s) missing before {key}@{rv}, first {}@{} ({:?})",
                                        missing.len(),
                                        e.key,
                                        e.rv,
                                        e.etype
                                    ),
                                );
                                reported_gap = true;
                            }
                            let e = &expected[i];
                            if e.etype != *etype {
                                push(
                                    Guarantee::Selection,
                                    format!(
                                        "event {key}@{rv} typed {etype:?}, expected {:?}",
                                        e.etype
                                    ),
                                );
                            } else if e.token != *token {
                                push(
                                    Guarantee::Selection,
                                    format!(
                                        "event {key}@{rv} carries object {token:?}, expected {:?}",
                                        e.token
                                    ),
                                );
                            }
                            next = next.max(i + 1);
                            any_delivered = true;
                        }
                    }
                }
                Item::Bookmark {
                    rv,
                    initial_end: false,
                } => {
                    if let Some(e) = expected[next..]
                        .iter()
                        .find(|e| e.rv <= *rv && !delivered.contains(&(e.rv, e.key.as_str())))
                    {
                        push(
                            Guarantee::Bookmarkable,
                            format!(
                                "bookmark at {rv} before event {}@{} was delivered",
                                e.key, e.rv
                            ),
                        );
                    }
                }
                _ => {}
            }
        }
        let last_delivered = session.items.iter().rev().find_map(|i| match i {
            Item::Event { rv, .. } => Some(*rv),
            _ => None,
        });
        let owed: Vec<&Expected> = expected[next..]
            .iter()
            .filter(|e| !delivered.contains(&(e.rv, e.key.as_str())))
            .collect();
        // Server-ended streams deliver whole revisions.
        let server_ended = !matches!(session.end, End::ClientClosed | End::Open { .. });
        if server_ended
            && let Some(last) = last_delivered
            && let Some(e) = owed.iter().find(|e| e.rv == last)
        {
            push(
                Guarantee::Atomic,
                format!(
                    "revision {last} delivered in part before the stream ended: {} missing",
                    e.key
                ),
            );
        }
        match &session.end {
            End::Open {
                complete_through: Some(t),
            } => {
                if let Some(e) = owed.iter().find(|e| e.rv <= *t)
                    && !reported_gap
                {
                    push(
                        missing_name(e, !any_delivered),
                        format!(
                            "settled session lacks {} event(s) up to {t}, first {}@{} ({:?})",
                            owed.iter().filter(|e| e.rv <= *t).count(),
                            e.key,
                            e.rv,
                            e.etype
                        ),
                    );
                }
            }
            End::Gone {
                claimed,
                observed_floor,
                epoch_ended,
            } => {
                let client = max_seen;
                if let Some((position, floor)) = claimed {
                    if let Some(e) = owed.iter().find(|e| e.rv <= *position) {
                        push(
                            Guarantee::Honest410,
                            format!(
                                "410 at position {position} before its backlog: {}@{} never delivered",
                                e.key, e.rv
                            ),
                        );
                    }
                    if *position < client {
                        push(
                            Guarantee::Honest410,
                            format!(
                                "410 claims position {position}, below the {client} the client already saw"
                            ),
                        );
                    }
                    if !epoch_ended {
                        if position >= floor {
                            push(
                                Guarantee::Honest410,
                                format!("410 at position {position}, not below the floor {floor}"),
                            );
                        }
                        if let Some((before, after)) = observed_floor
                            && (floor < before || floor > after)
                        {
                            push(
                                Guarantee::Honest410,
                                format!(
                                    "410 claims floor {floor}, but the history's floor was [{before}, {after}]"
                                ),
                            );
                        }
                    }
                } else if !epoch_ended
                    && let Some((_, after)) = observed_floor
                    && client >= *after
                {
                    push(
                        Guarantee::Honest410,
                        format!("410 at position {client}, servable (floor {after})"),
                    );
                }
            }
            _ => {}
        }
    }
    report.violations.extend(violations);
    client_seen
}
