//! The server's own controllers: what kube-controller-manager would do for objects no one
//! else acts on, for a server over a store (never in caching-proxy mode, where the upstream
//! cluster's controllers run). They read the caches and write through the ordinary write
//! path ([`crate::source::store::StoreSource`]), as a client would.

pub mod garbage_collector;
