//! The end-to-end driver: the running server (in-process `watchkeeper::start`) over HTTP, with
//! concurrent writers (POST, PATCH, PUT with a resourceVersion precondition, DELETE; 409s and
//! 404s are fine), consistent readers, and many watchers over raw TCP: normal, slow (small
//! receive buffer, paced by the writers), stalling (stop reading until the writers have moved
//! on), reconnecting (disconnect mid-stream, resume from the last resource version seen) and
//! streaming lists (`sendInitialEvents=true&resourceVersionMatch=NotOlderThan&
//! allowWatchBookmarks=true`). Every watcher relists after a 410.
//!
//! No wall-clock pacing: slow and stalling watchers wait on the writers' progress counter.
//! The run ends with *fences*: one write per (namespace, app) that every selection used here
//! sees, so each watcher knows the revision it must reach.
//!
//! The committed history comes from the store itself (`Store::watch` over the configmaps
//! prefix from revision 1, or from the compaction floor with a range read there), so the
//! checker compares the clients' view with the store's truth, not with the server's.
//!
//! 410s: the server states `too old resource version: {position} ({floor})`; the driver reads
//! the cache's `history_info()` when the 410 arrives (an upper bound of the floor at the time
//! it was produced) and its reset counter (a relist ends every watch: `epoch_ended`).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use watchkeeper::Server;
use watchkeeper::config::ServeArgs;
use watchkeeper_core::WatchCache;
use watchkeeper_store::{AnyStore, EventKind, KeySelector, RangeRequest, Store, WatchItem};
use watchkeeper_testkit::RawWatch;

use crate::checker::{
    self, AckedWrite, EType, End, History, Item, Obj, Read, ReadKind, Recording, Report, Req, Rev,
    Selection, Session, Start,
};
use crate::rng::Rng;

/// A hang guard on every network wait: exceeding it is a bug (reported), not slowness.
pub const HANG_GUARD: Duration = Duration::from_secs(45);

/// Namespaces written (they exist on every server: bootstrap creates them).
pub const NAMESPACES: [&str; 3] = ["default", "kube-system", "kube-public"];
const APPS: [&str; 2] = ["web", "db"];

/// Which store the server runs on.
#[derive(Clone, Debug)]
pub enum StoreChoice {
    /// In memory.
    Memory,
    /// Embedded (redb) in this directory.
    Embedded(PathBuf),
    /// etcd at this endpoint, under this key prefix.
    Etcd {
        /// Client URL.
        endpoint: String,
        /// Unique key prefix (e.g. `/harness-1234`).
        prefix: String,
    },
}

/// One end-to-end run.
#[derive(Clone, Debug)]
pub struct E2eConfig {
    /// Seed for every random choice (the interleaving itself is not deterministic).
    pub seed: u64,
    /// The store.
    pub store: StoreChoice,
    /// Concurrent watchers.
    pub watchers: usize,
    /// Concurrent writers.
    pub writers: usize,
    /// Writes per writer.
    pub writes_per_writer: usize,
    /// Consistent reads done by the reader task.
    pub reads: usize,
    /// Fault: compact the store at its current revision every this many writes (the server
    /// relists when its watch is compacted; every open watch must then get an honest 410) —
    /// at most at the revision the history's recorder has reached, which must never lose a
    /// revision (after an outage it watches again from there).
    pub compact_every: Option<u64>,
}

/// A fault injected after a number of writes.
pub type FaultHook = Box<dyn FnMut(u64) + Send>;

/// What a run did.
#[derive(Debug, Default)]
pub struct E2eOutcome {
    /// The checker's report.
    pub report: Report,
    /// Acknowledged writes.
    pub acked: u64,
    /// 409s and 404s seen by writers.
    pub rejected: u64,
    /// Writes not acknowledged, by HTTP status (0: no answer).
    pub refusals: BTreeMap<u16, u64>,
    /// 410s received by watchers.
    pub gone: u64,
    /// Client-side disconnects.
    pub disconnects: u64,
    /// Last store revision.
    pub revision: Rev,
    /// Resumed sessions opened on another server than the session they resume (the sibling,
    /// or a restarted instance), with the same resource version.
    pub failovers: u64,
    /// Of those, the ones answered with a 410 before any event or bookmark.
    pub failover_gone: u64,
    /// Each of those: (the position resumed from, the store's revision when the 410 came,
    /// the floor the 410 stated).
    pub failover_gone_details: Vec<(Rev, Rev, Option<Rev>)>,
    /// Cache resets (relists after a compacted store watch, or a repair) on every instance
    /// during the run.
    pub relists: u64,
}

/// The server arguments used by the harness: a small history (100 events, 1 s fresh window)
/// and small queues (10), so stalls, catch-up and 410s happen within a short run.
#[must_use]
pub fn serve_args(store: &StoreChoice) -> ServeArgs {
    let mut args = ServeArgs {
        listen: Some("127.0.0.1:0".parse().expect("address")),
        event_fresh_seconds: Some(1),
        history_capacity_max: Some(100),
        queue_capacity_max: Some(10),
        // The model holds what the harness writes; the root CA publisher would add a
        // ConfigMap to each namespace.
        enable_root_ca_cert_publisher: Some(false),
        ..ServeArgs::default()
    };
    match store {
        StoreChoice::Memory => args.store = Some("memory".to_owned()),
        StoreChoice::Embedded(dir) => {
            args.store = Some("embedded".to_owned());
            args.data_dir = Some(dir.clone());
            args.durable_commits = Some(true);
        }
        StoreChoice::Etcd { endpoint, prefix } => {
            args.store = Some("etcd".to_owned());
            args.etcd_endpoints = Some(vec![endpoint.clone()]);
            args.etcd_prefix = Some(prefix.clone());
        }
    }
    args
}

/// Starts a server and waits until it is ready.
///
/// # Errors
/// It cannot start.
pub async fn start_server(args: ServeArgs) -> Result<Server, String> {
    watchkeeper_testkit::start_server(args).await
}

fn configmaps(server: &Server) -> WatchCache {
    server
        .app
        .resource("", "v1", "configmaps")
        .expect("configmaps are served")
        .cache()
        .clone()
}

/// One HTTP/1.1 request with `Connection: close` (and `Content-Type` unless empty): status
/// and body.
///
/// # Errors
/// Connection errors or a hang.
pub async fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    content_type: &str,
    body: &str,
) -> Result<(u16, String), String> {
    let headers: &[(&str, &str)] = if content_type.is_empty() {
        &[]
    } else {
        &[("Content-Type", content_type)]
    };
    let response = tokio::time::timeout(
        HANG_GUARD,
        watchkeeper_testkit::request(addr, method, path, headers, body.as_bytes()),
    )
    .await
    .map_err(|_| format!("{method} {path}: hang"))?
    .map_err(|e| e.to_string())?;
    Ok((response.status, response.text()))
}

async fn send(addr: SocketAddr, method: &str, path: &str, ct: &str, body: &Value) -> (u16, Value) {
    match request(addr, method, path, ct, &body.to_string()).await {
        Ok((status, text)) => (status, serde_json::from_str(&text).unwrap_or(Value::Null)),
        Err(_) => (0, Value::Null),
    }
}

fn rv_of(v: &Value) -> Rev {
    v.pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

fn token_of(v: &Value) -> String {
    v.pointer("/data/w")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

fn key_of_json(v: &Value) -> String {
    let ns = v
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let name = v
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    checker::key_of(ns, name)
}

fn obj_of_json(v: &Value, rv: Rev) -> Obj {
    let labels = v
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_owned())))
                .collect()
        })
        .unwrap_or_default();
    Obj {
        namespace: v
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        name: v
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        labels,
        fields: BTreeMap::new(),
        rv,
        token: token_of(v),
    }
}

/// Reads the committed history of configmaps from the store, up to revision `up_to`.
///
/// # Errors
/// The store cannot be read.
pub async fn read_history(store: &AnyStore, prefix: &str, up_to: Rev) -> Result<History, String> {
    let key_prefix = format!("{prefix}/configmaps/");
    let parse_key = |key: &[u8]| -> Option<(String, String)> {
        let key = std::str::from_utf8(key).ok()?;
        let rest = key.strip_prefix(&key_prefix)?;
        let (ns, name) = rest.split_once('/')?;
        Some((ns.to_owned(), name.to_owned()))
    };
    let mut from = 1;
    let mut history = History::new(0, Vec::new());
    loop {
        let mut watch = store
            .watch(KeySelector::prefix(key_prefix.clone()), from)
            .await
            .map_err(|e| format!("store watch: {e}"))?;
        let mut restart = None;
        while history.last_rv() < up_to {
            let item = tokio::time::timeout(HANG_GUARD, watch.next())
                .await
                .map_err(|_| "store watch hang".to_owned())?;
            match item {
                Some(WatchItem::Revision { revision, events }) => {
                    let writes = events
                        .iter()
                        .filter_map(|e| {
                            let (ns, name) = parse_key(&e.kv.key)?;
                            let key = checker::key_of(&ns, &name);
                            match e.kind {
                                EventKind::Delete => Some((key, None)),
                                EventKind::Put => {
                                    let v: Value = serde_json::from_slice(&e.kv.value).ok()?;
                                    let mut o = obj_of_json(&v, revision);
                                    o.namespace = ns;
                                    o.name = name;
                                    Some((key, Some(o)))
                                }
                            }
                        })
                        .collect();
                    history.commit(revision, writes);
                }
                Some(WatchItem::Progress { revision }) => history.advance(revision),
                Some(WatchItem::Compacted {
                    compact_revision, ..
                }) => {
                    restart = Some(compact_revision);
                    break;
                }
                Some(WatchItem::Failed(e)) => return Err(format!("store watch failed: {e}")),
                None => return Err("store watch ended".to_owned()),
            }
        }
        let Some(compact) = restart else {
            return Ok(history);
        };
        // Start from the state at the compaction floor.
        let response = store
            .range(RangeRequest::prefix(key_prefix.clone()).at_revision(compact))
            .await
            .map_err(|e| format!("store range: {e}"))?;
        let objects = response.kvs.iter().filter_map(|kv| {
            let (ns, name) = parse_key(&kv.key)?;
            let v: Value = serde_json::from_slice(&kv.value).ok()?;
            let mut o = obj_of_json(&v, kv.mod_revision);
            o.namespace = ns;
            o.name = name;
            Some(o)
        });
        history = History::new(compact, objects.collect::<Vec<_>>());
        from = compact + 1;
    }
}

/// Shared progress of the writers.
#[derive(Debug)]
struct Progress {
    writes: tokio::sync::watch::Sender<u64>,
    /// Per selection-relevant fence: set when the fences are written.
    fences: tokio::sync::watch::Sender<Option<Vec<Obj>>>,
}

fn random_selection(rng: &mut Rng) -> Selection {
    let ns = (*rng.pick(&NAMESPACES)).to_owned();
    let s = |v: &str| v.to_owned();
    match rng.below(7) {
        0 | 1 => Selection::all(),
        2 => Selection {
            namespace: Some(ns),
            reqs: vec![],
        },
        3 => Selection {
            namespace: None,
            reqs: vec![Req::LabelEq(s("app"), s("web"))],
        },
        4 => Selection {
            namespace: None,
            reqs: vec![Req::LabelNotEq(s("app"), s("web"))],
        },
        5 => Selection {
            namespace: Some(ns),
            reqs: vec![Req::LabelIn(s("app"), vec![s("web"), s("db")])],
        },
        _ => Selection {
            namespace: None,
            reqs: vec![
                Req::FieldEq(s("metadata.namespace"), ns),
                Req::LabelEq(s("app"), s("db")),
            ],
        },
    }
}

fn enc(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' => out.push(b as char),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

fn collection_path(selection: &Selection) -> String {
    match &selection.namespace {
        Some(ns) => format!("/api/v1/namespaces/{ns}/configmaps"),
        None => "/api/v1/configmaps".to_owned(),
    }
}

fn selector_query(selection: &Selection) -> String {
    let mut q = String::new();
    let labels = selection.label_selector();
    if !labels.is_empty() {
        q.push_str(&format!("&labelSelector={}", enc(&labels)));
    }
    let fields = selection.field_selector();
    if !fields.is_empty() {
        q.push_str(&format!("&fieldSelector={}", enc(&fields)));
    }
    q
}

/// A raw watch connection (the kit's, under this driver's hang guard).
struct WatchConn(RawWatch);

impl WatchConn {
    async fn open(
        addr: SocketAddr,
        path: &str,
        recv_buffer: Option<u32>,
    ) -> Result<WatchConn, String> {
        tokio::time::timeout(HANG_GUARD, RawWatch::open(addr, path, recv_buffer, &[]))
            .await
            .map_err(|_| "watch headers hang".to_owned())?
            .map(WatchConn)
            .map_err(|e| e.to_string())
    }

    /// The next frame; `Ok(None)` at the end of the stream.
    async fn next(&mut self) -> Result<Option<Value>, String> {
        tokio::time::timeout(HANG_GUARD, self.0.next_json())
            .await
            .map_err(|_| "watch hang".to_owned())?
            .map_err(|e| e.to_string())
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    Normal,
    Slow,
    Staller,
    Reconnector,
    Streamer,
}

/// One watchkeeper instance the run talks to.
#[derive(Clone)]
struct Instance {
    addr: SocketAddr,
    cache: WatchCache,
    /// Its configmaps cache's resets when it joined the run.
    resets_at_start: u64,
}

impl Instance {
    fn of(server: &Server) -> Instance {
        let cache = configmaps(server);
        Instance {
            addr: server.addr,
            resets_at_start: cache.metrics().cache_resets.get(),
            cache,
        }
    }

    fn relists(&self) -> u64 {
        self.cache.metrics().cache_resets.get() - self.resets_at_start
    }
}

/// The instances a run talks to (siblings sharing one store), which a fault may replace (a
/// rolling restart: the old one shut down gracefully, a new one started on the same store).
#[derive(Default)]
pub struct Instances {
    list: std::sync::RwLock<Vec<Instance>>,
    /// Relists of the instances replaced so far.
    retired_relists: AtomicU64,
}

impl Instances {
    /// These servers.
    #[must_use]
    pub fn new(servers: &[&Server]) -> Instances {
        Instances {
            list: std::sync::RwLock::new(servers.iter().map(|s| Instance::of(s)).collect()),
            retired_relists: AtomicU64::new(0),
        }
    }

    /// Replaces instance `i` by `server`: requests and sessions opened from now on go to it.
    pub fn replace(&self, i: usize, server: &Server) {
        let mut list = self.list.write().expect("lock");
        self.retired_relists
            .fetch_add(list[i].relists(), Ordering::Relaxed);
        list[i] = Instance::of(server);
    }

    /// The lowest revision the instances' configmaps caches have dispatched.
    #[must_use]
    pub fn min_dispatched(&self) -> Rev {
        let list = self.list.read().expect("lock");
        list.iter().map(|i| i.cache.dispatched()).min().unwrap_or(0)
    }

    fn get(&self, i: usize) -> Instance {
        self.list.read().expect("lock")[i].clone()
    }

    fn len(&self) -> usize {
        self.list.read().expect("lock").len()
    }

    fn relists(&self) -> u64 {
        let list = self.list.read().expect("lock");
        self.retired_relists.load(Ordering::Relaxed)
            + list.iter().map(Instance::relists).sum::<u64>()
    }
}

struct Ctx {
    /// The instances (one, or siblings sharing one store): writers and readers pick one per
    /// request, watchers one per session.
    instances: Arc<Instances>,
    store: AnyStore,
    progress: Progress,
    sessions: Mutex<Vec<Session>>,
    next_id: AtomicU64,
    gone: AtomicU64,
    disconnects: AtomicU64,
    hangs: Mutex<Vec<String>>,
    /// The first revision of the recorded history: watches start at or after it.
    base: Rev,
    /// Resumed sessions opened on another server than the session they resume.
    failovers: AtomicU64,
    /// Of those, the ones answered with a 410 before any event or bookmark.
    failover_gone: AtomicU64,
    failover_gone_details: Mutex<Vec<(Rev, Rev, Option<Rev>)>>,
}

impl Ctx {
    /// The store's current revision, retried while the store is unavailable (an etcd member
    /// killed or paused, an election under way), bounded by [`HANG_GUARD`]; 0 only if it
    /// never answers.
    async fn store_revision(&self) -> Rev {
        let retry = async {
            loop {
                if let Ok(revision) = self.store.current_revision().await {
                    return revision;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        };
        tokio::time::timeout(HANG_GUARD, retry).await.unwrap_or(0)
    }

    /// A random instance (no random draw when there is one).
    fn any_instance(&self, rng: &mut Rng) -> usize {
        match self.instances.len() {
            1 => 0,
            n => rng.below(n as u64) as usize,
        }
    }

    /// A random instance's address.
    fn any_addr(&self, rng: &mut Rng) -> SocketAddr {
        self.instances.get(self.any_instance(rng)).addr
    }

    fn target(&self, selection: &Selection) -> Option<Rev> {
        let fences = self.progress.fences.borrow();
        let fences = fences.as_ref()?;
        fences
            .iter()
            .filter(|f| selection.matches(f))
            .map(|f| f.rv)
            .max()
    }

    async fn wait_writes(&self, at_least: u64) {
        let mut rx = self.progress.writes.subscribe();
        let _ = rx
            .wait_for(|w| *w >= at_least || self.progress.fences.borrow().is_some())
            .await;
    }
}

/// One watch session from opening to its end (or the fence). Returns the session.
async fn run_session(
    ctx: &Ctx,
    instance: usize,
    rng: &mut Rng,
    role: Role,
    selection: &Selection,
    start: Start,
    resumes: Option<u64>,
) -> Session {
    let id = ctx.next_id.fetch_add(1, Ordering::Relaxed);
    let lo_store = ctx.store_revision().await;
    let Instance { addr, cache, .. } = &ctx.instances.get(instance);
    let lo_cache = cache.dispatched();
    // `resourceVersion` unset or `0` without `sendInitialEvents` implies the initial state
    // (Kubernetes' legacy synthetic ADDED events); bookmarks are asked for with every initial
    // state, so the end of the initial events is marked.
    let bookmarks = matches!(start, Start::InitialState { .. }) || rng.chance(50);
    let mut query = String::from("?watch=1");
    let (start, consistent_now) = match start {
        Start::After(n) => {
            query.push_str(&format!("&resourceVersion={n}"));
            (Start::After(n), false)
        }
        Start::Now | Start::InitialState { .. } => match rng.below(3) {
            0 => {
                query.push_str("&resourceVersion=0");
                (Start::InitialState { min: None }, false)
            }
            1 => (
                Start::InitialState {
                    min: Some(lo_store),
                },
                true,
            ),
            _ => {
                query.push_str("&sendInitialEvents=true&resourceVersionMatch=NotOlderThan");
                (
                    Start::InitialState {
                        min: Some(lo_store),
                    },
                    true,
                )
            }
        },
    };
    let bookmarks = bookmarks || matches!(start, Start::InitialState { .. });
    if bookmarks {
        query.push_str("&allowWatchBookmarks=true");
    }
    query.push_str(&selector_query(selection));
    let path = format!("{}{query}", collection_path(selection));
    let recv = matches!(role, Role::Slow | Role::Staller).then_some(4096);
    let resets_before = cache.metrics().cache_resets.get();
    let mut session = Session {
        id,
        selection: selection.clone(),
        start,
        bookmarks,
        window: (if consistent_now { lo_store } else { lo_cache }, lo_store),
        items: Vec::new(),
        end: End::ClientClosed,
        resumes,
    };
    let mut conn = match WatchConn::open(*addr, &path, recv).await {
        Ok(conn) => conn,
        Err(e) => {
            session.end = End::Error(e);
            return session;
        }
    };
    session.window.1 = ctx.store_revision().await.max(session.window.0);
    let initial_phase = matches!(start, Start::InitialState { .. });
    let mut in_initial = initial_phase;
    let mut seen: Rev = match start {
        Start::After(n) => n,
        _ => 0,
    };
    let cut_after = (role == Role::Reconnector).then(|| rng.range(1, 40) as usize);
    let mut stall_at = (role == Role::Staller).then(|| rng.range(0, 20) as usize);
    loop {
        // Done once the fence this selection sees has arrived.
        if let Some(target) = ctx.target(selection)
            && seen >= target
            && !in_initial
        {
            session.end = End::Open {
                complete_through: Some(seen),
            };
            return session;
        }
        if let Some(cut) = cut_after
            && session.items.len() >= cut
            && ctx.progress.fences.borrow().is_none()
        {
            ctx.disconnects.fetch_add(1, Ordering::Relaxed);
            session.end = End::ClientClosed;
            return session;
        }
        if let Some(at) = stall_at
            && session.items.len() >= at
        {
            let writes = *ctx.progress.writes.borrow();
            ctx.wait_writes(writes + rng.range(20, 150)).await;
            stall_at = Some(at + rng.range(5, 60) as usize);
        }
        if role == Role::Slow && session.items.len().is_multiple_of(2) {
            let writes = *ctx.progress.writes.borrow();
            ctx.wait_writes(writes + 1).await;
        }
        let frame = match conn.next().await {
            Ok(Some(frame)) => frame,
            Ok(None) => {
                session.end = End::ServerClosed;
                return session;
            }
            Err(e) => {
                if e.contains("hang") {
                    ctx.hangs
                        .lock()
                        .expect("lock")
                        .push(format!("session {id} ({path}): {e} after {seen}"));
                }
                session.end = End::Error(e);
                return session;
            }
        };
        let object = &frame["object"];
        let kind = frame["type"].as_str().unwrap_or_default();
        match kind {
            "ADDED" | "MODIFIED" | "DELETED" => {
                let rv = rv_of(object);
                let key = key_of_json(object);
                if in_initial && kind == "ADDED" {
                    session.items.push(Item::Initial {
                        key,
                        rv,
                        token: token_of(object),
                    });
                    continue;
                }
                in_initial = false;
                let etype = match kind {
                    "ADDED" => EType::Added,
                    "MODIFIED" => EType::Modified,
                    _ => EType::Deleted,
                };
                session.items.push(Item::Event {
                    etype,
                    key,
                    rv,
                    token: token_of(object),
                });
                seen = seen.max(rv);
            }
            "BOOKMARK" => {
                let rv = rv_of(object);
                let initial_end = object
                    .pointer("/metadata/annotations/k8s.io~1initial-events-end")
                    .and_then(Value::as_str)
                    == Some("true");
                if initial_end {
                    in_initial = false;
                }
                session.items.push(Item::Bookmark { rv, initial_end });
                seen = seen.max(rv);
            }
            "ERROR" => {
                let code = object["code"].as_u64().unwrap_or(0);
                let message = object["message"].as_str().unwrap_or_default().to_owned();
                session.end = if code == 410 {
                    ctx.gone.fetch_add(1, Ordering::Relaxed);
                    let claimed =
                        message
                            .strip_prefix("too old resource version: ")
                            .and_then(|rest| {
                                let (p, f) = rest.split_once(" (")?;
                                Some((p.parse().ok()?, f.trim_end_matches(')').parse().ok()?))
                            });
                    let floor_now = cache.history_info().oldest.saturating_sub(1);
                    End::Gone {
                        claimed,
                        observed_floor: Some((0, floor_now)),
                        epoch_ended: cache.metrics().cache_resets.get() != resets_before,
                    }
                } else {
                    End::Error(format!("{code}: {message}"))
                };
                return session;
            }
            other => {
                session.end = End::Error(format!("unknown frame type {other}"));
                return session;
            }
        }
    }
}

/// One watcher: sessions until its fence, reconnecting and relisting as clients do.
async fn watcher(ctx: Arc<Ctx>, seed: u64) {
    let mut rng = Rng::new(seed);
    let role = *rng.pick(&[
        Role::Normal,
        Role::Slow,
        Role::Staller,
        Role::Reconnector,
        Role::Streamer,
        Role::Reconnector,
    ]);
    let selection = random_selection(&mut rng);
    let mut start = match role {
        Role::Streamer => Start::InitialState { min: None },
        _ => match rng.below(3) {
            0 => {
                // List, then watch from the list's resource version (a reflector).
                let path = format!(
                    "{}?x=1{}",
                    collection_path(&selection),
                    selector_query(&selection)
                );
                let addr = ctx.any_addr(&mut rng);
                let (status, body) =
                    send(addr, "GET", &path, "application/json", &Value::Null).await;
                if status == 200 {
                    Start::After(rv_of(&body))
                } else {
                    Start::Now
                }
            }
            1 => Start::InitialState { min: None },
            _ => {
                let current = ctx.store_revision().await;
                Start::After(current.saturating_sub(rng.below(20)).max(ctx.base))
            }
        },
    };
    let mut resumes = None;
    let mut instance = ctx.any_instance(&mut rng);
    let mut last_addr = None;
    for _ in 0..200 {
        // A resumed session moves to a sibling instance half of the time (with the same
        // resource version: a client failing over).
        if resumes.is_some() && ctx.instances.len() > 1 && rng.chance(50) {
            instance = (instance + 1) % ctx.instances.len();
        }
        // A failover: a resumed session on another server than the one it resumes (the
        // sibling, or a restarted instance in the same place).
        let addr = ctx.instances.get(instance).addr;
        let failover = resumes.is_some() && last_addr != Some(addr);
        last_addr = Some(addr);
        if failover {
            ctx.failovers.fetch_add(1, Ordering::Relaxed);
        }
        let session = run_session(&ctx, instance, &mut rng, role, &selection, start, resumes).await;
        if failover
            && matches!(session.end, End::Gone { .. })
            && !session
                .items
                .iter()
                .any(|i| matches!(i, Item::Event { .. } | Item::Bookmark { .. }))
        {
            ctx.failover_gone.fetch_add(1, Ordering::Relaxed);
            let position = match start {
                Start::After(n) => n,
                _ => 0,
            };
            let floor = match &session.end {
                End::Gone { claimed, .. } => claimed.map(|(_, floor)| floor),
                _ => None,
            };
            let now = ctx.store_revision().await;
            ctx.failover_gone_details
                .lock()
                .expect("lock")
                .push((position, now, floor));
        }
        let end = session.end.clone();
        let id = session.id;
        let last = session
            .items
            .iter()
            .filter_map(|i| match i {
                Item::Event { rv, .. } | Item::Bookmark { rv, .. } => Some(*rv),
                Item::Initial { .. } => None,
            })
            .max()
            .or(match session.start {
                Start::After(n) => Some(n),
                _ => None,
            });
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
        let refused = matches!(end, End::Error(_)) && session.items.is_empty();
        ctx.sessions.lock().expect("lock").push(session);
        if refused {
            // The instance did not answer (restarting): try again after the next write
            // rather than at once.
            let writes = *ctx.progress.writes.borrow();
            ctx.wait_writes(writes + 1).await;
        }
        match end {
            End::Open { .. } => return,
            End::Error(_) if ctx.progress.fences.borrow().is_some() => return,
            End::Gone { .. } => {
                start = Start::InitialState { min: None };
                resumes = None;
            }
            _ => match last {
                Some(rv) if !cut_initial => {
                    start = Start::After(rv);
                    resumes = Some(id);
                }
                _ => {
                    start = Start::InitialState { min: None };
                    resumes = None;
                }
            },
        }
    }
}

async fn writer(
    ctx: Arc<Ctx>,
    seed: u64,
    writes: usize,
    acked: Arc<Mutex<Vec<AckedWrite>>>,
    rejected: Arc<AtomicU64>,
    refusals: Arc<Mutex<BTreeMap<u16, u64>>>,
) {
    let mut rng = Rng::new(seed);
    for i in 0..writes {
        let ns = *rng.pick(&NAMESPACES);
        let name = format!("cm{}", rng.below(8));
        let token = format!("s{seed}-{i}");
        let app = *rng.pick(&APPS);
        let item = format!("/api/v1/namespaces/{ns}/configmaps/{name}");
        let addr = ctx.any_addr(&mut rng);
        let (status, body) = match rng.below(10) {
            0..=2 => {
                send(
                    addr,
                    "POST",
                    &format!("/api/v1/namespaces/{ns}/configmaps"),
                    "application/json",
                    &json!({"apiVersion": "v1", "kind": "ConfigMap",
                            "metadata": {"name": name, "labels": {"app": app}},
                            "data": {"w": token}}),
                )
                .await
            }
            3..=5 => {
                send(
                    addr,
                    "PATCH",
                    &item,
                    "application/merge-patch+json",
                    &json!({"metadata": {"labels": {"app": app}}, "data": {"w": token}}),
                )
                .await
            }
            6 | 7 => {
                let (status, mut current) =
                    send(addr, "GET", &item, "application/json", &Value::Null).await;
                if status != 200 {
                    (status, current)
                } else {
                    current["metadata"]["labels"] = json!({"app": app});
                    current["data"] = json!({"w": token});
                    send(addr, "PUT", &item, "application/json", &current).await
                }
            }
            _ => {
                // No body (a JSON `null` body is refused as not an object).
                let status = request(addr, "DELETE", &item, "", "")
                    .await
                    .map_or(0, |(status, _)| status);
                (status, Value::Null)
            }
        };
        match status {
            200 | 201 if !body.is_null() && token_of(&body) == token => {
                acked.lock().expect("lock").push(AckedWrite {
                    key: checker::key_of(ns, &name),
                    rv: rv_of(&body),
                    token: Some(token),
                });
            }
            200 | 201 => {}
            _ => {
                rejected.fetch_add(1, Ordering::Relaxed);
                *refusals.lock().expect("lock").entry(status).or_default() += 1;
            }
        }
        ctx.progress.writes.send_modify(|w| *w += 1);
    }
}

async fn reader(ctx: Arc<Ctx>, seed: u64, reads: usize, out: Arc<Mutex<Vec<Read>>>) {
    let mut rng = Rng::new(seed);
    for i in 0..reads {
        let lo = ctx.store_revision().await;
        let addr = ctx.any_addr(&mut rng);
        let kind = if rng.chance(50) {
            let ns = *rng.pick(&NAMESPACES);
            let name = format!("cm{}", rng.below(8));
            let (status, body) = send(
                addr,
                "GET",
                &format!("/api/v1/namespaces/{ns}/configmaps/{name}"),
                "application/json",
                &Value::Null,
            )
            .await;
            let result = match status {
                200 => Some((rv_of(&body), token_of(&body))),
                404 => None,
                _ => continue,
            };
            (
                ReadKind::Get {
                    key: checker::key_of(ns, &name),
                    result,
                },
                None,
            )
        } else {
            let selection = random_selection(&mut rng);
            let path = format!(
                "{}?x=1{}",
                collection_path(&selection),
                selector_query(&selection)
            );
            let (status, body) = send(addr, "GET", &path, "application/json", &Value::Null).await;
            if status != 200 {
                continue;
            }
            let result = body["items"]
                .as_array()
                .map(|items| {
                    items
                        .iter()
                        .map(|o| (key_of_json(o), (rv_of(o), token_of(o))))
                        .collect()
                })
                .unwrap_or_default();
            (ReadKind::List { selection, result }, Some(rv_of(&body)))
        };
        let hi = ctx.store_revision().await;
        out.lock().expect("lock").push(Read {
            id: 1_000_000 + i as u64,
            kind: kind.0,
            window: (lo, hi),
            result_rv: kind.1,
        });
        let writes = *ctx.progress.writes.borrow();
        ctx.wait_writes(writes + rng.range(1, 10)).await;
    }
}

async fn write_fence(
    addr: SocketAddr,
    ns: &str,
    name: &str,
    app: &str,
    token: &str,
) -> Result<Obj, String> {
    let body = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": ns, "labels": {"app": app}},
        "data": {"w": token}});
    let (mut status, mut response) = send(
        addr,
        "POST",
        &format!("/api/v1/namespaces/{ns}/configmaps"),
        "application/json",
        &body,
    )
    .await;
    if status == 409 {
        (status, response) = send(
            addr,
            "PATCH",
            &format!("/api/v1/namespaces/{ns}/configmaps/{name}"),
            "application/merge-patch+json",
            &json!({"metadata": {"labels": {"app": app}}, "data": {"w": token}}),
        )
        .await;
    }
    if status != 200 && status != 201 {
        return Err(format!("fence {ns}/{name}: {status} {response}"));
    }
    let rv = rv_of(&response);
    Ok(obj_of_json(&response, rv))
}

/// Records the committed history of configmaps from the store while the run goes on: the
/// state at the current revision, then a store watch from the next one. The revision it has
/// recorded up to is published (the `Arc<AtomicU64>`): a compaction at most there leaves the
/// history complete, even when the watch has to be opened again after an outage (a watch
/// behind a compaction, or opened from below it, is compacted).
async fn start_recorder(
    store: &AnyStore,
    prefix: &str,
) -> Result<
    (
        Rev,
        Arc<AtomicU64>,
        tokio::sync::watch::Sender<Rev>,
        tokio::task::JoinHandle<Result<History, String>>,
    ),
    String,
> {
    let key_prefix = format!("{prefix}/configmaps/");
    let base = store
        .current_revision()
        .await
        .map_err(|e| format!("store revision: {e}"))?;
    let response = store
        .range(RangeRequest::prefix(key_prefix.clone()).at_revision(base))
        .await
        .map_err(|e| format!("store range: {e}"))?;
    let parse_key = {
        let key_prefix = key_prefix.clone();
        move |key: &[u8]| -> Option<(String, String)> {
            let key = std::str::from_utf8(key).ok()?;
            let (ns, name) = key.strip_prefix(&key_prefix)?.split_once('/')?;
            Some((ns.to_owned(), name.to_owned()))
        }
    };
    let objects: Vec<Obj> = response
        .kvs
        .iter()
        .filter_map(|kv| {
            let (ns, name) = parse_key(&kv.key)?;
            let v: Value = serde_json::from_slice(&kv.value).ok()?;
            let mut o = obj_of_json(&v, kv.mod_revision);
            o.namespace = ns;
            o.name = name;
            Some(o)
        })
        .collect();
    let mut history = History::new(base, objects);
    let mut watch = store
        .watch(KeySelector::prefix(key_prefix.clone()), base + 1)
        .await
        .map_err(|e| format!("store watch: {e}"))?;
    let (until_tx, mut until_rx) = tokio::sync::watch::channel(Rev::MAX);
    let store = store.clone();
    let recorded = Arc::new(AtomicU64::new(base));
    let reached = recorded.clone();
    let task = tokio::spawn(async move {
        loop {
            reached.store(history.last_rv(), Ordering::Relaxed);
            if history.last_rv() >= *until_rx.borrow() {
                return Ok(history);
            }
            let item = tokio::select! {
                item = watch.next() => item,
                _ = until_rx.changed() => continue,
            };
            match item {
                Some(WatchItem::Revision { revision, events }) => {
                    let writes = events
                        .iter()
                        .filter_map(|e| {
                            let (ns, name) = parse_key(&e.kv.key)?;
                            let key = checker::key_of(&ns, &name);
                            match e.kind {
                                EventKind::Delete => Some((key, None)),
                                EventKind::Put => {
                                    let v: Value = serde_json::from_slice(&e.kv.value).ok()?;
                                    let mut o = obj_of_json(&v, revision);
                                    o.namespace = ns;
                                    o.name = name;
                                    Some((key, Some(o)))
                                }
                            }
                        })
                        .collect();
                    history.commit(revision, writes);
                }
                Some(WatchItem::Progress { revision }) => history.advance(revision),
                Some(WatchItem::Compacted { .. }) => {
                    return Err("the history's store watch was compacted".to_owned());
                }
                Some(WatchItem::Failed(_)) | None => {
                    // The store went away (an etcd restart): watch again from the next
                    // revision, polling for it to come back (bounded).
                    let mut again = None;
                    for _ in 0..400 {
                        if let Ok(w) = store
                            .watch(
                                KeySelector::prefix(key_prefix.clone()),
                                history.last_rv() + 1,
                            )
                            .await
                        {
                            again = Some(w);
                            break;
                        }
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                    watch = again.ok_or("the store did not come back")?;
                }
            }
        }
    });
    Ok((base, recorded, until_tx, task))
}

/// Writes to the server at `addr` until `stop` is set or `max` writes were made, recording
/// every acknowledged write (for the kill-and-restart test).
pub async fn write_until(
    addr: SocketAddr,
    seed: u64,
    max: usize,
    acked: Arc<Mutex<Vec<AckedWrite>>>,
    stop: Arc<std::sync::atomic::AtomicBool>,
) {
    let mut rng = Rng::new(seed);
    for i in 0..max {
        if stop.load(Ordering::Relaxed) {
            return;
        }
        let ns = *rng.pick(&NAMESPACES);
        let name = format!("cm{}", rng.below(8));
        let token = format!("k{seed}-{i}");
        let (status, body) = send(
            addr,
            "PATCH",
            &format!("/api/v1/namespaces/{ns}/configmaps/{name}"),
            "application/merge-patch+json",
            &json!({"data": {"w": token}}),
        )
        .await;
        let (status, body) = if status == 404 {
            send(
                addr,
                "POST",
                &format!("/api/v1/namespaces/{ns}/configmaps"),
                "application/json",
                &json!({"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": name, "labels": {"app": "web"}},
                        "data": {"w": token}}),
            )
            .await
        } else {
            (status, body)
        };
        if (status == 200 || status == 201) && token_of(&body) == token {
            acked.lock().expect("lock").push(AckedWrite {
                key: checker::key_of(ns, &name),
                rv: rv_of(&body),
                token: Some(token),
            });
        }
        if status == 0 {
            return; // the server is gone
        }
    }
}

/// Runs one end-to-end workload against a started server and checks it.
///
/// # Errors
/// Setup failures (the store cannot be read, a task panicked).
pub async fn run_against(server: &Server, config: &E2eConfig) -> Result<E2eOutcome, String> {
    run_with_faults(server, config, None).await
}

/// [`run_against`] with `fault(n)` called from a task after every `every` writes (n = 1, 2,
/// ...), until the fences.
///
/// # Errors
/// Setup failures.
pub async fn run_with_faults(
    server: &Server,
    config: &E2eConfig,
    faults: Option<(u64, FaultHook)>,
) -> Result<E2eOutcome, String> {
    run_on_instances(&[server], config, faults).await
}

/// [`run_with_faults`] on sibling instances sharing one store (the first one's store is read
/// for the history): writers and readers pick an instance per request, watchers one per
/// session, and a resumed session moves to another instance half of the time.
///
/// # Errors
/// Setup failures.
pub async fn run_on_instances(
    servers: &[&Server],
    config: &E2eConfig,
    faults: Option<(u64, FaultHook)>,
) -> Result<E2eOutcome, String> {
    let server = servers.first().ok_or("no instance")?;
    let prefix = server.app.config.prefix.clone();
    let store = server
        .store()
        .ok_or_else(|| "the end-to-end check needs a store, not an upstream".to_owned())?
        .clone();
    run_shared(
        Arc::new(Instances::new(servers)),
        store,
        &prefix,
        config,
        faults,
    )
    .await
}

/// [`run_on_instances`] on instances the faults may replace; `store` (the instances' store,
/// under `prefix`) is read for the history.
///
/// # Errors
/// Setup failures.
pub async fn run_shared(
    instances: Arc<Instances>,
    store: AnyStore,
    prefix: &str,
    config: &E2eConfig,
    faults: Option<(u64, FaultHook)>,
) -> Result<E2eOutcome, String> {
    let (base, recorded, until, recorder) = start_recorder(&store, prefix).await?;
    let ctx = Arc::new(Ctx {
        base,
        instances,
        failovers: AtomicU64::new(0),
        failover_gone: AtomicU64::new(0),
        failover_gone_details: Mutex::new(Vec::new()),
        store,
        progress: Progress {
            writes: tokio::sync::watch::channel(0).0,
            fences: tokio::sync::watch::channel(None).0,
        },
        sessions: Mutex::new(Vec::new()),
        next_id: AtomicU64::new(1),
        gone: AtomicU64::new(0),
        disconnects: AtomicU64::new(0),
        hangs: Mutex::new(Vec::new()),
    });
    let mut rng = Rng::new(config.seed);
    let acked = Arc::new(Mutex::new(Vec::new()));
    let rejected = Arc::new(AtomicU64::new(0));
    let refusals = Arc::new(Mutex::new(BTreeMap::new()));
    let reads = Arc::new(Mutex::new(Vec::new()));
    let mut watchers = Vec::new();
    for _ in 0..config.watchers {
        watchers.push(tokio::spawn(watcher(ctx.clone(), rng.next_u64())));
    }
    let mut writers = Vec::new();
    for _ in 0..config.writers {
        writers.push(tokio::spawn(writer(
            ctx.clone(),
            rng.next_u64() % 1_000_000,
            config.writes_per_writer,
            acked.clone(),
            rejected.clone(),
            refusals.clone(),
        )));
    }
    let compactor = config.compact_every.map(|every| {
        let ctx = ctx.clone();
        tokio::spawn(async move {
            let mut next = every;
            loop {
                ctx.wait_writes(next).await;
                if ctx.progress.fences.borrow().is_some() {
                    return;
                }
                if let Ok(revision) = ctx.store.current_revision().await {
                    let floor = revision.min(recorded.load(Ordering::Relaxed));
                    let _ = ctx.store.compact(floor).await;
                }
                next += every;
            }
        })
    });
    let fault_task = faults.map(|(every, mut fault)| {
        let ctx = ctx.clone();
        tokio::spawn(async move {
            let mut n = 1;
            loop {
                ctx.wait_writes(every * n).await;
                if ctx.progress.fences.borrow().is_some() {
                    return;
                }
                // Faults block (signals, process restarts): off the async workers.
                fault = tokio::task::spawn_blocking(move || {
                    fault(n);
                    fault
                })
                .await
                .expect("fault");
                n += 1;
            }
        })
    });
    let reader_task = tokio::spawn(reader(
        ctx.clone(),
        rng.next_u64(),
        config.reads,
        reads.clone(),
    ));
    for w in writers {
        w.await.map_err(|e| format!("writer: {e}"))?;
    }
    // Fences: one write per (namespace, app), so every selection sees at least one, in two
    // rounds. The first round's revisions are published before the second round is written,
    // so a watcher that receives a second-round event knows its target (it was published
    // before that write) and has passed it: no watcher waits on a stream that has nothing
    // more to send.
    let mut last = 0;
    for round in 0..2 {
        let mut fences = Vec::new();
        for ns in NAMESPACES {
            for app in APPS {
                let name = format!("fence-{app}");
                // Instance 0 may be restarting, or its store recovering (a fault still under
                // way: no answer, or 503 — etcd's "request timed out, possibly due to previous
                // leader failure", whose write may or may not have happened): retry, bounded,
                // re-reading its address. Each attempt writes its own token, so one that did
                // happen is an unacknowledged write like any other.
                let mut attempts = 0;
                let (fence, token) = loop {
                    let addr = ctx.instances.get(0).addr;
                    let token = format!("fence{round}-{ns}-{app}-{}-{attempts}", config.seed);
                    match write_fence(addr, ns, &name, app, &token).await {
                        Err(e)
                            if (e.contains(": 0 ") || e.contains(": 503 ")) && attempts < 400 =>
                        {
                            attempts += 1;
                            tokio::time::sleep(Duration::from_millis(50)).await;
                        }
                        result => break (result?, token),
                    }
                };
                acked.lock().expect("lock").push(AckedWrite {
                    key: checker::key_of(ns, &name),
                    rv: fence.rv,
                    token: Some(token),
                });
                last = last.max(fence.rv);
                fences.push(fence);
            }
        }
        if round == 0 {
            ctx.progress.fences.send_replace(Some(fences));
            ctx.progress.writes.send_modify(|w| *w += 1);
        }
    }
    reader_task.await.map_err(|e| format!("reader: {e}"))?;
    if let Some(task) = fault_task {
        task.await.map_err(|e| format!("faults: {e}"))?;
    }
    if let Some(compactor) = compactor {
        compactor.await.map_err(|e| format!("compactor: {e}"))?;
    }
    for w in watchers {
        w.await.map_err(|e| format!("watcher: {e}"))?;
    }
    until.send_replace(last);
    let history = tokio::time::timeout(HANG_GUARD, recorder)
        .await
        .map_err(|_| "history recorder hang".to_owned())?
        .map_err(|e| format!("recorder: {e}"))??;
    let recording = Recording {
        sessions: std::mem::take(&mut *ctx.sessions.lock().expect("lock")),
        reads: std::mem::take(&mut *reads.lock().expect("lock")),
        acked: std::mem::take(&mut *acked.lock().expect("lock")),
    };
    let mut report = checker::check(&history, &recording);
    for hang in ctx.hangs.lock().expect("lock").iter() {
        report.violations.push(checker::Violation {
            guarantee: checker::Guarantee::Reliable,
            subject: "hang".to_owned(),
            message: hang.clone(),
        });
    }
    Ok(E2eOutcome {
        failovers: ctx.failovers.load(Ordering::Relaxed),
        failover_gone: ctx.failover_gone.load(Ordering::Relaxed),
        failover_gone_details: std::mem::take(
            &mut *ctx.failover_gone_details.lock().expect("lock"),
        ),
        relists: ctx.instances.relists(),
        acked: recording.acked.len() as u64,
        rejected: rejected.load(Ordering::Relaxed),
        refusals: std::mem::take(&mut *refusals.lock().expect("lock")),
        gone: ctx.gone.load(Ordering::Relaxed),
        disconnects: ctx.disconnects.load(Ordering::Relaxed),
        revision: last,
        report,
    })
}

/// Starts a server on `config.store`, runs the workload, shuts it down.
///
/// # Errors
/// Setup failures.
pub async fn run(config: &E2eConfig) -> Result<E2eOutcome, String> {
    let server = start_server(serve_args(&config.store)).await?;
    let outcome = run_against(&server, config).await;
    server.shutdown().await;
    outcome
}
