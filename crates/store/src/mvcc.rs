//! Transaction evaluation shared by the memory and embedded backends, so both implement
//! exactly the same etcd semantics.

use std::collections::HashSet;

use bytes::Bytes;

use crate::{Event, EventKind, KeyValue, TxnError, TxnOp, TxnRequest};

/// What a transaction will do, decided against the state before it.
pub(crate) enum Plan {
    /// A compare failed: the current version of each compared key.
    Failed(Vec<(Bytes, Option<KeyValue>)>),
    /// Every compare held: these events (possibly none) at the new revision.
    Apply(Vec<Event>),
}

/// Rejects a transaction that writes one key twice (etcd: "duplicate key given in txn
/// request").
pub(crate) fn check_duplicates(req: &TxnRequest) -> Result<(), TxnError> {
    let mut seen = HashSet::with_capacity(req.success.len());
    for op in &req.success {
        if !seen.insert(op.key()) {
            return Err(TxnError::DuplicateKey(op.key().clone()));
        }
    }
    Ok(())
}

/// Evaluates `req` against the latest state, read through `get`, for new revision `rev`.
pub(crate) fn plan<E>(
    req: &TxnRequest,
    rev: u64,
    mut get: impl FnMut(&Bytes) -> Result<Option<KeyValue>, E>,
) -> Result<Plan, E> {
    let mut current = Vec::with_capacity(req.compares.len());
    let mut ok = true;
    for c in &req.compares {
        let kv = get(c.key())?;
        ok &= c.holds(kv.as_ref());
        current.push((c.key().clone(), kv));
    }
    if !ok {
        return Ok(Plan::Failed(current));
    }
    let mut events = Vec::with_capacity(req.success.len());
    for op in &req.success {
        let prev = get(op.key())?;
        match op {
            TxnOp::Put { key, value } => {
                let (create_revision, version) = match &prev {
                    Some(p) => (p.create_revision, p.version + 1),
                    None => (rev, 1),
                };
                events.push(Event {
                    kind: EventKind::Put,
                    kv: KeyValue {
                        key: key.clone(),
                        value: value.clone(),
                        create_revision,
                        mod_revision: rev,
                        version,
                    },
                    prev_kv: prev,
                });
            }
            TxnOp::Delete { key } => {
                if prev.is_some() {
                    events.push(Event {
                        kind: EventKind::Delete,
                        kv: tombstone(key.clone(), rev),
                        prev_kv: prev,
                    });
                }
            }
        }
    }
    Ok(Plan::Apply(events))
}

/// etcd's representation of a deleted key in a delete event.
pub(crate) fn tombstone(key: Bytes, rev: u64) -> KeyValue {
    KeyValue {
        key,
        value: Bytes::new(),
        create_revision: 0,
        mod_revision: rev,
        version: 0,
    }
}
