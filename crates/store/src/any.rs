//! Run-time backend selection by enum dispatch.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use crate::{
    CompactError, EmbeddedConfig, EmbeddedStore, EtcdConfig, EtcdStore, KeySelector, MemoryConfig,
    MemoryStore, OpenError, QuotaUsage, RangeError, RangeRequest, RangeResponse, Store,
    StoreCounters, TxnError, TxnRequest, TxnResponse, Watch, WatchError, transform::Transformed,
};

/// The backend names accepted by `--store`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StoreKind {
    /// [`EmbeddedStore`] (`embedded`).
    Embedded,
    /// [`MemoryStore`] (`memory`).
    Memory,
    /// [`EtcdStore`] (`etcd`).
    Etcd,
}

impl StoreKind {
    /// The lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            StoreKind::Embedded => "embedded",
            StoreKind::Memory => "memory",
            StoreKind::Etcd => "etcd",
        }
    }
}

impl fmt::Display for StoreKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for StoreKind {
    type Err = OpenError;

    fn from_str(s: &str) -> Result<Self, OpenError> {
        match s {
            "embedded" => Ok(StoreKind::Embedded),
            "memory" => Ok(StoreKind::Memory),
            "etcd" => Ok(StoreKind::Etcd),
            other => Err(OpenError::InvalidConfig(format!(
                "unknown store {other:?} (expected embedded, memory or etcd)"
            ))),
        }
    }
}

/// The configuration of any backend.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoreConfig {
    /// See [`MemoryConfig`].
    Memory(MemoryConfig),
    /// See [`EmbeddedConfig`].
    Embedded(EmbeddedConfig),
    /// See [`EtcdConfig`].
    Etcd(EtcdConfig),
}

impl StoreConfig {
    /// Which backend this configures.
    pub fn kind(&self) -> StoreKind {
        match self {
            StoreConfig::Memory(_) => StoreKind::Memory,
            StoreConfig::Embedded(_) => StoreKind::Embedded,
            StoreConfig::Etcd(_) => StoreKind::Etcd,
        }
    }

    /// Checks every value is in range.
    pub fn validate(&self) -> Result<(), OpenError> {
        match self {
            StoreConfig::Memory(c) => c.validate(),
            StoreConfig::Embedded(c) => c.validate(),
            StoreConfig::Etcd(c) => c.validate(),
        }
    }
}

/// Any backend, chosen at run time. Cloning shares the same store.
#[derive(Clone, Debug)]
pub enum AnyStore {
    /// An in-memory store.
    Memory(MemoryStore),
    /// An embedded redb store.
    Embedded(EmbeddedStore),
    /// An etcd-backed store.
    Etcd(EtcdStore),
    /// Another backend whose values are transformed (encryption at rest,
    /// [`crate::transform`]).
    Transformed(Arc<Transformed>),
}

impl AnyStore {
    /// Opens the configured backend (the embedded one on tokio's blocking pool).
    pub async fn open(config: StoreConfig) -> Result<Self, OpenError> {
        match config {
            StoreConfig::Memory(c) => Ok(AnyStore::Memory(MemoryStore::new(c)?)),
            StoreConfig::Embedded(c) => {
                match tokio::task::spawn_blocking(move || EmbeddedStore::open(c)).await {
                    Ok(r) => Ok(AnyStore::Embedded(r?)),
                    Err(e) => Err(OpenError::Backend(crate::BackendError::Storage(format!(
                        "open task failed: {e}"
                    )))),
                }
            }
            StoreConfig::Etcd(c) => Ok(AnyStore::Etcd(EtcdStore::connect(c).await?)),
        }
    }

    /// Which backend this is.
    pub fn kind(&self) -> StoreKind {
        match self {
            AnyStore::Memory(_) => StoreKind::Memory,
            AnyStore::Embedded(_) => StoreKind::Embedded,
            AnyStore::Etcd(_) => StoreKind::Etcd,
            AnyStore::Transformed(t) => t.inner().kind(),
        }
    }
}

macro_rules! dispatch {
    ($self:ident, $s:ident => $e:expr) => {
        match $self {
            AnyStore::Memory($s) => $e,
            AnyStore::Embedded($s) => $e,
            AnyStore::Etcd($s) => $e,
            AnyStore::Transformed($s) => $e,
        }
    };
}

impl Store for AnyStore {
    async fn current_revision(&self) -> Result<u64, RangeError> {
        dispatch!(self, s => s.current_revision().await)
    }

    async fn range(&self, req: RangeRequest) -> Result<RangeResponse, RangeError> {
        dispatch!(self, s => s.range(req).await)
    }

    async fn txn(&self, req: TxnRequest) -> Result<TxnResponse, TxnError> {
        dispatch!(self, s => s.txn(req).await)
    }

    async fn watch(&self, keys: KeySelector, from_revision: u64) -> Result<Watch, WatchError> {
        dispatch!(self, s => s.watch(keys, from_revision).await)
    }

    async fn compact(&self, revision: u64) -> Result<(), CompactError> {
        dispatch!(self, s => s.compact(revision).await)
    }

    fn counters(&self) -> &StoreCounters {
        dispatch!(self, s => s.counters())
    }

    fn quota_usage(&self) -> Option<QuotaUsage> {
        dispatch!(self, s => s.quota_usage())
    }
}
