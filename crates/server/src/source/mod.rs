//! Where the caches' contents come from: the store (the reflector over the registry prefix)
//! or, in caching-proxy mode, an upstream API server.

pub mod reflector;
pub mod upstream;
