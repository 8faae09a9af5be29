//! Model-based tests: random sequences of multi-op transactions, compactions, ranges at
//! random revisions and watches from random revisions, run against the memory and embedded
//! backends and compared with a naive reference (a full snapshot per revision).

use std::collections::BTreeMap;

use bytes::Bytes;
use proptest::prelude::*;
use watchkeeper_store::{
    CompactError, Compare, EmbeddedConfig, EmbeddedStore, Event, EventKind, KeySelector, KeyValue,
    MemoryConfig, MemoryStore, RangeError, RangeRequest, RangeResponse, StartKey, Store, TxnError,
    TxnOp, TxnRequest, TxnResponse, WatchItem,
};

use crate::common::next_item;

const KEYS: &[&str] = &["a", "ab", "b", "b/c", "c"];

#[derive(Clone, Debug)]
enum RevPick {
    Latest,
    Back(u64),
    Ahead(u64),
}

#[derive(Clone, Debug)]
enum Cmp {
    ModCurrent(usize),
    ModAt(usize, RevPick),
    Absent(usize),
    Present(usize),
}

#[derive(Clone, Debug)]
enum Op {
    Txn {
        compares: Vec<Cmp>,
        ops: Vec<(usize, Option<u8>)>,
    },
    Compact(RevPick),
    Range {
        sel: Sel,
        rev: RevPick,
        limit: usize,
        start: Option<(bool, usize)>,
    },
    Watch {
        sel: Sel,
        from: RevPick,
    },
}

#[derive(Clone, Debug)]
enum Sel {
    Key(usize),
    Prefix(&'static str),
}

fn rev_pick() -> impl Strategy<Value = RevPick> {
    prop_oneof![
        1 => Just(RevPick::Latest),
        4 => (0u64..12).prop_map(RevPick::Back),
        1 => (1u64..3).prop_map(RevPick::Ahead),
    ]
}

fn key() -> impl Strategy<Value = usize> {
    0..KEYS.len()
}

fn sel() -> impl Strategy<Value = Sel> {
    prop_oneof![
        key().prop_map(Sel::Key),
        prop::sample::select(vec!["", "a", "b", "b/"]).prop_map(Sel::Prefix),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    let cmp = prop_oneof![
        3 => key().prop_map(Cmp::ModCurrent),
        1 => (key(), rev_pick()).prop_map(|(k, r)| Cmp::ModAt(k, r)),
        1 => key().prop_map(Cmp::Absent),
        1 => key().prop_map(Cmp::Present),
    ];
    let wop = (key(), prop::option::weighted(0.7, 0u8..10));
    prop_oneof![
        6 => (prop::collection::vec(cmp, 0..3), prop::collection::vec(wop, 0..4))
            .prop_map(|(compares, ops)| Op::Txn { compares, ops }),
        1 => rev_pick().prop_map(Op::Compact),
        2 => (sel(), rev_pick(), 0usize..4, prop::option::of((any::<bool>(), key())))
            .prop_map(|(sel, rev, limit, start)| Op::Range { sel, rev, limit, start }),
        2 => (sel(), rev_pick()).prop_map(|(sel, from)| Op::Watch { sel, from }),
    ]
}

/// The reference: one full snapshot per retained revision.
struct Model {
    current: u64,
    compacted: u64,
    snaps: BTreeMap<u64, BTreeMap<Bytes, KeyValue>>,
    log: BTreeMap<u64, Vec<Event>>,
    /// (retain, every) automatic compaction, as the embedded store does it.
    auto: Option<(u64, u64)>,
}

impl Model {
    fn new(auto: Option<(u64, u64)>) -> Self {
        Self {
            current: 1,
            compacted: 0,
            snaps: BTreeMap::from([(1, BTreeMap::new())]),
            log: BTreeMap::new(),
            auto,
        }
    }

    fn latest(&self) -> &BTreeMap<Bytes, KeyValue> {
        &self.snaps[&self.current]
    }

    fn resolve(&self, r: &RevPick) -> u64 {
        match r {
            RevPick::Latest => self.current,
            RevPick::Back(n) => self.current.saturating_sub(*n).max(1),
            RevPick::Ahead(n) => self.current + n,
        }
    }

    fn txn(&mut self, req: &TxnRequest) -> Result<TxnResponse, TxnError> {
        let mut keys: Vec<&Bytes> = req.success.iter().map(|o| o.key()).collect();
        keys.sort();
        if let Some(w) = keys.windows(2).find(|w| w[0] == w[1]) {
            return Err(TxnError::DuplicateKey(w[0].clone()));
        }
        let snap = self.latest().clone();
        let holds = req.compares.iter().all(|c| match c {
            Compare::ModRevision { key, revision } => {
                snap.get(key).is_some_and(|kv| kv.mod_revision == *revision)
            }
            Compare::Absent { key } => !snap.contains_key(key),
            Compare::Present { key } => snap.contains_key(key),
        });
        if !holds {
            return Ok(TxnResponse {
                succeeded: false,
                revision: self.current,
                events: vec![],
                current: req
                    .compares
                    .iter()
                    .map(|c| (c.key().clone(), snap.get(c.key()).cloned()))
                    .collect(),
            });
        }
        let rev = self.current + 1;
        let mut next = snap.clone();
        let mut events = Vec::new();
        for op in &req.success {
            match op {
                TxnOp::Put { key, value } => {
                    let prev = snap.get(key).cloned();
                    let kv = KeyValue {
                        key: key.clone(),
                        value: value.clone(),
                        create_revision: prev.as_ref().map_or(rev, |p| p.create_revision),
                        mod_revision: rev,
                        version: prev.as_ref().map_or(1, |p| p.version + 1),
                    };
                    next.insert(key.clone(), kv.clone());
                    events.push(Event {
                        kind: EventKind::Put,
                        kv,
                        prev_kv: prev,
                    });
                }
                TxnOp::Delete { key } => {
                    if let Some(prev) = next.remove(key) {
                        let kv = KeyValue {
                            key: key.clone(),
                            value: Bytes::new(),
                            create_revision: 0,
                            mod_revision: rev,
                            version: 0,
                        };
                        events.push(Event {
                            kind: EventKind::Delete,
                            kv,
                            prev_kv: Some(prev),
                        });
                    }
                }
            }
        }
        if events.is_empty() {
            return Ok(TxnResponse {
                succeeded: true,
                revision: self.current,
                events,
                current: vec![],
            });
        }
        self.current = rev;
        self.snaps.insert(rev, next);
        self.log.insert(rev, events.clone());
        if let Some((retain, every)) = self.auto
            && rev.is_multiple_of(every)
            && rev > retain
            && rev - retain > self.compacted
        {
            let _ = self.compact(rev - retain);
        }
        Ok(TxnResponse {
            succeeded: true,
            revision: rev,
            events,
            current: vec![],
        })
    }

    fn compact(&mut self, c: u64) -> Result<(), CompactError> {
        if c <= self.compacted {
            return Err(CompactError::AlreadyCompacted {
                requested: c,
                compact_revision: self.compacted,
            });
        }
        if c > self.current {
            return Err(CompactError::FutureRevision {
                requested: c,
                current: self.current,
            });
        }
        self.compacted = c;
        self.snaps = self.snaps.split_off(&c);
        self.log = self.log.split_off(&c);
        Ok(())
    }

    fn range(&self, req: &RangeRequest) -> Result<RangeResponse, RangeError> {
        let rev = if req.revision == 0 {
            self.current
        } else {
            req.revision
        };
        if rev < self.compacted {
            return Err(RangeError::Compacted {
                requested: rev,
                compact_revision: self.compacted,
            });
        }
        if rev > self.current {
            return Err(RangeError::FutureRevision {
                requested: rev,
                current: self.current,
            });
        }
        let mut kvs: Vec<KeyValue> = self.snaps[&rev]
            .values()
            .filter(|kv| selects(&req.keys, &kv.key))
            .filter(|kv| match &req.start {
                None => true,
                Some(StartKey::Inclusive(s)) => kv.key >= s,
                Some(StartKey::Exclusive(s)) => kv.key > s,
            })
            .cloned()
            .collect();
        let more = req.limit > 0 && kvs.len() > req.limit;
        if more {
            kvs.truncate(req.limit);
        }
        Ok(RangeResponse {
            kvs,
            more,
            revision: rev,
        })
    }
}

fn selects(sel: &KeySelector, key: &[u8]) -> bool {
    match sel {
        KeySelector::Key(k) => key == k.as_ref(),
        KeySelector::Prefix(p) => key.starts_with(p),
    }
}

fn to_sel(s: &Sel) -> KeySelector {
    match s {
        Sel::Key(i) => KeySelector::key(KEYS[*i]),
        Sel::Prefix(p) => KeySelector::prefix(*p),
    }
}

async fn run<S: Store>(store: &S, model: &mut Model, ops: &[Op]) -> Result<(), TestCaseError> {
    for op in ops {
        match op {
            Op::Txn { compares, ops } => {
                let mut req = TxnRequest::default();
                for c in compares {
                    req.compares.push(match c {
                        Cmp::ModCurrent(k) => Compare::ModRevision {
                            key: KEYS[*k].into(),
                            revision: model
                                .latest()
                                .get(KEYS[*k].as_bytes())
                                .map_or(0, |kv| kv.mod_revision),
                        },
                        Cmp::ModAt(k, r) => Compare::ModRevision {
                            key: KEYS[*k].into(),
                            revision: model.resolve(r),
                        },
                        Cmp::Absent(k) => Compare::Absent {
                            key: KEYS[*k].into(),
                        },
                        Cmp::Present(k) => Compare::Present {
                            key: KEYS[*k].into(),
                        },
                    });
                }
                for (k, v) in ops {
                    req.success.push(match v {
                        Some(v) => TxnOp::Put {
                            key: KEYS[*k].into(),
                            value: format!("v{v}").into(),
                        },
                        None => TxnOp::Delete {
                            key: KEYS[*k].into(),
                        },
                    });
                }
                let want = model.txn(&req);
                let got = store.txn(req).await;
                prop_assert_eq!(got, want);
            }
            Op::Compact(r) => {
                let c = model.resolve(r);
                let want = model.compact(c);
                prop_assert_eq!(store.compact(c).await, want);
            }
            Op::Range {
                sel,
                rev,
                limit,
                start,
            } => {
                let mut req = RangeRequest::new(to_sel(sel)).with_limit(*limit);
                req.revision = match rev {
                    RevPick::Latest => 0,
                    r => model.resolve(r),
                };
                if let Some((incl, k)) = start {
                    let k = Bytes::from(KEYS[*k]);
                    req.start = Some(if *incl {
                        StartKey::Inclusive(k)
                    } else {
                        StartKey::Exclusive(k)
                    });
                }
                let want = model.range(&req);
                prop_assert_eq!(store.range(req).await, want);
            }
            Op::Watch { sel, from } => {
                let from = model.resolve(from);
                let keys = to_sel(sel);
                let mut w = store.watch(keys.clone(), from).await.unwrap();
                if from < model.compacted {
                    let item = next_item(&mut w).await;
                    prop_assert_eq!(
                        item,
                        WatchItem::Compacted {
                            requested: from,
                            compact_revision: model.compacted
                        }
                    );
                    continue;
                }
                for (rev, events) in model.log.range(from..) {
                    let events: Vec<Event> = events
                        .iter()
                        .filter(|e| selects(&keys, &e.kv.key))
                        .cloned()
                        .collect();
                    if events.is_empty() {
                        continue;
                    }
                    let item = next_item(&mut w).await;
                    prop_assert_eq!(
                        item,
                        WatchItem::Revision {
                            revision: *rev,
                            events
                        }
                    );
                }
            }
        }
        prop_assert_eq!(store.current_revision().await.unwrap(), model.current);
    }
    Ok(())
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn memory_matches_model(ops in prop::collection::vec(op(), 1..60)) {
        let config = MemoryConfig { progress_interval: None, ..MemoryConfig::default() };
        let store = MemoryStore::new(config).unwrap();
        let mut model = Model::new(None);
        runtime().block_on(run(&store, &mut model, &ops))?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn embedded_matches_model(ops in prop::collection::vec(op(), 1..60)) {
        let dir = tempfile::tempdir().unwrap();
        let mut config = EmbeddedConfig::new(dir.path());
        // Semantics do not depend on fsync; small retention exercises auto-compaction.
        config.durable_commits = false;
        config.progress_interval = None;
        config.retain_revisions = 6;
        config.auto_compact_every = 4;
        config.watch_batch_revisions = 3;
        let store = EmbeddedStore::open(config).unwrap();
        let mut model = Model::new(Some((6, 4)));
        runtime().block_on(run(&store, &mut model, &ops))?;
        store.check_integrity().map_err(|e| TestCaseError::fail(e.to_string()))?;
    }
}
