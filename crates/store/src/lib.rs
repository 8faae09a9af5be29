//! MVCC key-value stores for watchkeeper, in etcd's terms, behind one interface.
//!
//! Three backends implement [`Store`] and pass one conformance suite
//! (`tests/store/conformance.rs`):
//!
//! - [`MemoryStore`]: `BTreeMap`s in memory, deterministic; for tests and the simulator.
//! - [`EmbeddedStore`]: durable on disk with [redb](https://docs.rs/redb); the server's
//!   default.
//! - [`EtcdStore`]: a real etcd (v3 API) through the `etcd-client` crate.
//!
//! [`AnyStore`] picks one at run time (`--store embedded|memory|etcd`), and can wrap it in a
//! [`Transformed`] store whose values pass through a [`ValueTransformer`] (encryption at rest,
//! [`transform`]).
//!
//! # The model
//!
//! - **Revisions.** One global revision counter (`u64`), starting at 1 for an empty store
//!   as in etcd. A transaction that changes at least one key creates exactly one new
//!   revision shared by all of its events. A transaction that changes nothing (its compares
//!   fail, or its only ops delete missing keys) creates no revision — this is what etcd
//!   does (`storeTxnWrite.End` bumps the revision only when there are changes).
//! - **Keys** are raw bytes; the layout (`/registry/...`) is the caller's business.
//! - **Reads** ([`Store::range`]) see one revision: the latest, or a past one not below
//!   the compaction floor. They page with `limit` + a [`StartKey`].
//! - **Transactions** ([`Store::txn`]) are etcd's `Txn` restricted to what Kubernetes
//!   uses: compares on `mod_revision`, absence or presence, ANDed; then puts and deletes.
//!   On failure the response carries the current version of every compared key.
//! - **Watches** ([`Store::watch`]) deliver every change with revision `>=` the start, in
//!   revision order, each with its previous value, **grouped by revision**: one
//!   [`WatchItem::Revision`] holds all selected events of one revision and a revision is
//!   never split across items (etcd's "atomic" guarantee; splitting is kubernetes#110210).
//!   Progress items say "everything up to here was delivered". A watch that needs a
//!   compacted revision ends with [`WatchItem::Compacted`].
//! - **Compaction** ([`Store::compact`]) at revision `c` keeps revision `c` and later
//!   readable: reads and watches from `c` work, below `c` they get a `Compacted` error or
//!   item. The embedded backend also compacts automatically by a retention setting.
//! - **Quota.** The memory and embedded backends refuse a put that would take the bytes they
//!   hold above a quota ([`TxnError::NoSpace`], etcd's `database space exceeded`); deletes and
//!   compaction always work. See [`quota`]; etcd applies its own `--quota-backend-bytes`.
//! - **Errors** are values: one enum per operation ([`RangeError`], [`TxnError`],
//!   [`WatchError`], [`CompactError`], [`OpenError`]), all convertible into
//!   [`StoreError`]. Operating errors never panic.
//!
//! # Why a trait with `impl Future` plus an enum
//!
//! [`Store`] uses return-position `impl Future + Send`, so generic code (the conformance
//! suite, the benchmark) gets static dispatch and no allocation per call. Such a trait is
//! not dyn-compatible; run-time selection is the closed enum [`AnyStore`], which
//! dispatches with a `match` (the set of backends is fixed at compile time, and a `match`
//! is cheaper and simpler than boxing every future).

mod any;
mod embedded;
mod error;
mod etcd;
mod memory;
mod mvcc;
pub mod quota;
pub mod transform;
mod types;
mod watch;

pub use any::{AnyStore, StoreConfig, StoreKind};
pub use embedded::{EmbeddedConfig, EmbeddedStore, IntegrityReport};
pub use error::{
    BackendError, CompactError, OpenError, RangeError, StoreError, TxnError, WatchError,
};
pub use etcd::{EtcdConfig, EtcdStore, EtcdTls};
pub use memory::{MemoryConfig, MemoryStore};
pub use quota::{DEFAULT_QUOTA_BYTES, QuotaUsage};
pub use transform::{Transformed, ValueTransformer};
pub use types::{
    Compare, CounterSnapshot, Event, EventKind, KeySelector, KeyValue, RangeRequest, RangeResponse,
    StartKey, StoreCounters, TxnOp, TxnRequest, TxnResponse, WatchItem,
};
pub use watch::Watch;

use bytes::Bytes;

/// An MVCC key-value store. See the [crate docs](crate) for the guarantees every
/// implementation gives.
pub trait Store: Send + Sync {
    /// The latest revision. For etcd this is a linearizable (quorum) read.
    fn current_revision(&self) -> impl Future<Output = Result<u64, RangeError>> + Send;

    /// Reads keys at one revision.
    fn range(
        &self,
        req: RangeRequest,
    ) -> impl Future<Output = Result<RangeResponse, RangeError>> + Send;

    /// Runs a transaction; all its changes share one new revision.
    fn txn(&self, req: TxnRequest) -> impl Future<Output = Result<TxnResponse, TxnError>> + Send;

    /// Watches the selected keys from `from_revision` (`0` = changes after the current
    /// revision). A start below the compaction floor yields a stream whose only item is
    /// [`WatchItem::Compacted`]; a future start waits for that revision.
    fn watch(
        &self,
        keys: KeySelector,
        from_revision: u64,
    ) -> impl Future<Output = Result<Watch, WatchError>> + Send;

    /// Discards history below `revision`; `revision` itself stays readable.
    fn compact(&self, revision: u64) -> impl Future<Output = Result<(), CompactError>> + Send;

    /// Operation counters.
    fn counters(&self) -> &StoreCounters;

    /// The quota and the bytes it accounts (see [`quota`]); `None` for a backend that keeps
    /// no account (etcd, which applies its own quota).
    fn quota_usage(&self) -> Option<QuotaUsage> {
        None
    }

    /// Reads one key at the latest revision.
    fn get(
        &self,
        key: impl Into<Bytes>,
    ) -> impl Future<Output = Result<Option<KeyValue>, RangeError>> + Send {
        let req = RangeRequest::key(key);
        async move { Ok(self.range(req).await?.kvs.into_iter().next()) }
    }

    /// Puts one key unconditionally; returns the new revision.
    fn put(
        &self,
        key: impl Into<Bytes>,
        value: impl Into<Bytes>,
    ) -> impl Future<Output = Result<u64, TxnError>> + Send {
        let req = TxnRequest::put(key, value);
        async move { Ok(self.txn(req).await?.revision) }
    }

    /// Deletes one key unconditionally; returns the revision after it (unchanged when the
    /// key was missing).
    fn delete(&self, key: impl Into<Bytes>) -> impl Future<Output = Result<u64, TxnError>> + Send {
        let req = TxnRequest::delete(key);
        async move { Ok(self.txn(req).await?.revision) }
    }
}
