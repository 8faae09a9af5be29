//! What an operator looks at: the debug API and page (`/debug/*`, `/ui/`) and `/metrics`.

pub mod debug;
pub mod metrics;
