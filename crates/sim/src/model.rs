//! The simulated store: the object population, the write process, and the write log that the
//! oracle checks every watcher against ("you know what you wrote").

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::json;
use watchkeeper_core::{Change, Object, Revision};

use crate::rng::{Rng, Zipf};
use crate::scenario::{Objects, Process, Scenario, Writes};

/// No trigger value.
pub(crate) const NO_NODE: u32 = u32::MAX;

/// The selectable attributes of one version of an object.
#[derive(Clone, Debug)]
pub(crate) struct Attrs {
    pub(crate) node: u32,
    pub(crate) labels: Arc<BTreeMap<String, String>>,
    /// The version's resource version.
    pub(crate) rv: Revision,
}

/// One event the store committed.
#[derive(Clone, Debug)]
pub(crate) struct LogEntry {
    pub(crate) rv: Revision,
    pub(crate) slot: u32,
    pub(crate) ns: u32,
    pub(crate) new: Option<Attrs>,
    pub(crate) prev: Option<Attrs>,
}

#[derive(Debug)]
struct Slot {
    ns: u32,
    current: Option<Attrs>,
    size: usize,
}

/// What the store has: every object slot, its history of versions, and the write log with
/// indexes by namespace, slot and trigger value.
#[derive(Debug)]
pub(crate) struct Store {
    pub(crate) list_revision: Revision,
    pub(crate) revision: Revision,
    slots: Vec<Slot>,
    /// Per slot: (revision, attributes or deleted), oldest first.
    versions: Vec<Vec<(Revision, Option<Attrs>)>>,
    pub(crate) entries: Vec<LogEntry>,
    /// Commit time (ns) per revision, indexed by `rv - list_revision - 1`.
    pub(crate) commit_ns: Vec<u64>,
    pub(crate) by_ns: Vec<Vec<u32>>,
    pub(crate) by_slot: Vec<Vec<u32>>,
    pub(crate) by_node: Vec<Vec<u32>>,
    pub(crate) namespaces: Vec<String>,
    pub(crate) hot_slot: Option<u32>,
    label_dims: Vec<(String, Zipf)>,
    node_zipf: Option<Zipf>,
    object_zipf: Zipf,
    objects: Objects,
    writes: Writes,
    process: Process,
    rng: Rng,
}

fn body(
    ns: &str,
    name: &str,
    labels: &BTreeMap<String, String>,
    node: Option<&str>,
    size: usize,
) -> serde_json::Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": labels},
        "spec": {"nodeName": node.unwrap_or("")},
        "data": "x".repeat(size),
    })
}

impl Store {
    pub(crate) fn new(scenario: &Scenario, seed: u64) -> Store {
        let objects = scenario.objects.clone();
        let mut rng = Rng::new(seed, 1);
        let namespaces: Vec<String> = (0..objects.namespaces)
            .map(|i| format!("ns-{i}"))
            .chain(std::iter::once("hot".to_owned()))
            .collect();
        let ns_zipf = Zipf::new(objects.namespaces, objects.namespace_skew);
        let label_dims: Vec<(String, Zipf)> = objects
            .labels
            .iter()
            .map(|d| (d.key.clone(), Zipf::new(d.values.max(1), d.skew)))
            .collect();
        let node_zipf = (objects.nodes > 0).then(|| Zipf::new(objects.nodes, objects.node_skew));
        let mut store = Store {
            list_revision: 1,
            revision: 1,
            slots: Vec::new(),
            versions: Vec::new(),
            entries: Vec::new(),
            commit_ns: Vec::new(),
            by_ns: vec![Vec::new(); namespaces.len()],
            by_slot: Vec::new(),
            by_node: vec![Vec::new(); objects.nodes],
            namespaces,
            hot_slot: None,
            label_dims,
            node_zipf,
            object_zipf: Zipf::new(objects.count, scenario.writes.object_skew),
            objects: objects.clone(),
            writes: scenario.writes.clone(),
            process: scenario.writes.process,
            rng: Rng::new(seed, 2),
        };
        for _ in 0..objects.count {
            let ns = ns_zipf.sample(&mut rng) as u32;
            let size = store.draw_size(&mut rng, objects.size_bytes);
            let attrs = Attrs {
                node: store.draw_node(&mut rng),
                labels: Arc::new(store.draw_labels(&mut rng)),
                rv: 1,
            };
            store.push_slot(ns, size, attrs);
        }
        if let Some(size) = objects.hot_size_bytes {
            let hot = store.slots.len() as u32;
            let attrs = Attrs {
                node: NO_NODE,
                labels: Arc::new(store.draw_labels(&mut rng)),
                rv: 1,
            };
            store.push_slot(store.namespaces.len() as u32 - 1, size, attrs);
            store.hot_slot = Some(hot);
        }
        store
    }

    fn push_slot(&mut self, ns: u32, size: usize, attrs: Attrs) {
        self.versions.push(vec![(1, Some(attrs.clone()))]);
        self.slots.push(Slot {
            ns,
            current: Some(attrs),
            size,
        });
        self.by_slot.push(Vec::new());
    }

    fn draw_size(&self, rng: &mut Rng, mean: usize) -> usize {
        let jitter = self.objects.size_jitter.clamp(0.0, 1.0);
        ((mean as f64) * (1.0 + jitter * rng.symmetric())).max(0.0) as usize
    }

    fn draw_node(&self, rng: &mut Rng) -> u32 {
        self.node_zipf
            .as_ref()
            .map_or(NO_NODE, |z| z.sample(rng) as u32)
    }

    fn draw_labels(&self, rng: &mut Rng) -> BTreeMap<String, String> {
        self.label_dims
            .iter()
            .map(|(key, zipf)| (key.clone(), format!("{key}-{}", zipf.sample(rng))))
            .collect()
    }

    pub(crate) fn slot_count(&self) -> usize {
        self.slots.len()
    }

    pub(crate) fn slot_ns(&self, slot: u32) -> u32 {
        self.slots[slot as usize].ns
    }

    pub(crate) fn slot_name(slot: u32, hot: bool) -> String {
        if hot {
            "hot-0".to_owned()
        } else {
            format!("o-{slot}")
        }
    }

    /// The slot of a cache key (`ns-3/o-17` or `hot/hot-0`).
    pub(crate) fn slot_of_key(&self, key: &str) -> Option<u32> {
        let name = key.rsplit('/').next()?;
        if name == "hot-0" {
            return self.hot_slot;
        }
        name.strip_prefix("o-")?.parse().ok()
    }

    pub(crate) fn node_name(node: u32) -> String {
        format!("node-{node}")
    }

    fn object(&self, slot: u32, attrs: &Attrs) -> Arc<Object> {
        let s = &self.slots[slot as usize];
        let ns = &self.namespaces[s.ns as usize];
        let name = Store::slot_name(slot, Some(slot) == self.hot_slot);
        let node = (attrs.node != NO_NODE).then(|| Store::node_name(attrs.node));
        let mut fields = BTreeMap::new();
        if let Some(node) = &node {
            fields.insert("spec.nodeName".to_owned(), node.clone());
        }
        Arc::new(Object::new(
            ns,
            &name,
            (*attrs.labels).clone(),
            fields,
            attrs.rv,
            body(ns, &name, &attrs.labels, node.as_deref(), s.size),
        ))
    }

    /// The objects listed at the start (the cache is built from them).
    pub(crate) fn initial_objects(&self) -> Vec<Arc<Object>> {
        (0..self.slots.len() as u32)
            .filter_map(|slot| {
                self.slots[slot as usize]
                    .current
                    .as_ref()
                    .map(|a| self.object(slot, a))
            })
            .collect()
    }

    /// The write rate at `t` seconds and whether writes then go to the hot object.
    pub(crate) fn rate_at(&self, t: f64) -> (f64, bool) {
        for b in &self.writes.bursts {
            let mut start = b.at_s;
            loop {
                if t >= start && t < start + b.duration_s {
                    return (b.rate, b.hot);
                }
                match b.every_s {
                    Some(every) if every > 0.0 && start + every <= t => start += every,
                    _ => break,
                }
            }
        }
        for r in &self.writes.ramps {
            if t >= r.from_s && t < r.to_s && r.to_s > r.from_s {
                let f = (t - r.from_s) / (r.to_s - r.from_s);
                return (r.rate_from + (r.rate_to - r.rate_from) * f, false);
            }
        }
        (self.writes.rate, false)
    }

    /// Seconds until the next write after one at `t`.
    pub(crate) fn next_gap_s(&mut self, t: f64) -> f64 {
        let (rate, _) = self.rate_at(t);
        if rate <= 0.0 {
            return 0.01;
        }
        match self.process {
            Process::Constant => 1.0 / rate,
            Process::Poisson => self.rng.exponential(rate),
        }
    }

    /// Commits one revision at `now_ns` (`t` seconds) and returns its changes.
    pub(crate) fn write(&mut self, now_ns: u64, t: f64) -> (Revision, Vec<Change>) {
        let (_, hot) = self.rate_at(t);
        self.revision += 1;
        let rv = self.revision;
        let mut changes = Vec::new();
        let mut used: Vec<u32> = Vec::new();
        let n = if hot {
            1
        } else {
            self.writes.events_per_revision
        };
        let slots = self.objects.count;
        for _ in 0..n {
            let (slot, op) = match self.hot_slot {
                Some(h) if hot => (h, Op::Update),
                _ => self.pick(&used, slots),
            };
            used.push(slot);
            changes.push(self.apply(rv, slot, op));
        }
        self.commit_ns.push(now_ns);
        (rv, changes)
    }

    fn pick(&mut self, used: &[u32], slots: usize) -> (u32, Op) {
        let w = &self.writes;
        let r = self.rng.unit();
        let (create, delete) = (w.create_fraction, w.delete_fraction);
        for _ in 0..64 {
            let slot = if r < create + delete {
                self.rng.below(slots) as u32
            } else {
                self.object_zipf.sample(&mut self.rng) as u32
            };
            if used.contains(&slot) {
                continue;
            }
            let live = self.slots[slot as usize].current.is_some();
            let op = match (r < create, r < create + delete, live) {
                (true, _, false) => Op::Create,
                (true, _, true) => continue,
                (false, true, true) => Op::Delete,
                (false, true, false) => continue,
                (false, false, true) => Op::Update,
                (false, false, false) => Op::Create,
            };
            return (slot, op);
        }
        // Dense corner (tiny populations): take the first free slot and update or create it.
        let slot = (0..slots as u32)
            .find(|s| !used.contains(s))
            .expect("events_per_revision <= objects.count");
        let op = if self.slots[slot as usize].current.is_some() {
            Op::Update
        } else {
            Op::Create
        };
        (slot, op)
    }

    fn apply(&mut self, rv: Revision, slot: u32, op: Op) -> Change {
        let prev = self.slots[slot as usize].current.clone();
        let new = match op {
            Op::Delete => None,
            Op::Create => {
                let mut rng = self.rng.clone();
                let attrs = Attrs {
                    node: self.draw_node(&mut rng),
                    labels: Arc::new(self.draw_labels(&mut rng)),
                    rv,
                };
                self.rng = rng;
                Some(attrs)
            }
            Op::Update => {
                let prev = prev.as_ref().expect("updates hit live objects");
                let mut rng = self.rng.clone();
                let labels = if rng.chance(self.writes.relabel_fraction) {
                    Arc::new(self.draw_labels(&mut rng))
                } else {
                    prev.labels.clone()
                };
                let node = if prev.node != NO_NODE && rng.chance(self.writes.move_fraction) {
                    self.draw_node(&mut rng)
                } else {
                    prev.node
                };
                self.rng = rng;
                Some(Attrs { node, labels, rv })
            }
        };
        let ns = self.slots[slot as usize].ns;
        let index = self.entries.len() as u32;
        self.by_ns[ns as usize].push(index);
        self.by_slot[slot as usize].push(index);
        let mut nodes: Vec<u32> = [new.as_ref(), prev.as_ref()]
            .into_iter()
            .flatten()
            .map(|a| a.node)
            .filter(|n| *n != NO_NODE)
            .collect();
        nodes.dedup();
        for n in nodes {
            self.by_node[n as usize].push(index);
        }
        self.entries.push(LogEntry {
            rv,
            slot,
            ns,
            new: new.clone(),
            prev: prev.clone(),
        });
        self.versions[slot as usize].push((rv, new.clone()));
        self.slots[slot as usize].current = new.clone();
        match &new {
            Some(attrs) => Change::put(self.object(slot, attrs)),
            None => {
                let key = format!(
                    "{}/{}",
                    self.namespaces[ns as usize],
                    Store::slot_name(slot, Some(slot) == self.hot_slot)
                );
                Change::delete(key)
            }
        }
    }

    /// The version of `slot` at revision `rv`.
    pub(crate) fn version_at(&self, slot: u32, rv: Revision) -> Option<&Attrs> {
        let versions = &self.versions[slot as usize];
        let i = versions.partition_point(|(r, _)| *r <= rv);
        versions[..i].last().and_then(|(_, a)| a.as_ref())
    }

    /// Commit time of a revision, in ns.
    pub(crate) fn commit_time(&self, rv: Revision) -> u64 {
        let i = (rv - self.list_revision - 1) as usize;
        self.commit_ns[i]
    }
}

#[derive(Clone, Copy, Debug)]
enum Op {
    Create,
    Update,
    Delete,
}
