//! `/healthz`, `/livez`, `/readyz` and their individual checks, served as kube-apiserver's
//! `k8s.io/apiserver/pkg/server/healthz` serves them, so probes, load balancers and
//! `kubectl get --raw '/readyz?verbose'` read what they expect.
//!
//! ## Checks
//! | check | on | fails when |
//! |---|---|---|
//! | `ping` | all three | never (the server answers) |
//! | `log` | all three | never (logging does not block here) |
//! | `etcd` (etcd store) or `store` (memory, embedded) | all three | the store's current revision cannot be read within 2 s ([`crate::source::probe`]) |
//! | `etcd-readiness` / `store-readiness` | `/readyz` | as above (kube-apiserver's separate readiness probe of etcd) |
//! | `informer-sync` | `/readyz` | a cache has not loaded its first list (requests get 429 meanwhile) |
//!
//! kube-apiserver's `shutdown` readiness check is not served: it fails during
//! `--shutdown-delay-duration`, while the listener still accepts; here shutdown closes the
//! listener first (see `Server::shutdown`), so no request could see it fail.
//!
//! Caching-proxy mode has no store check (the upstream is probed by its own reflector;
//! `informer-sync` reports it).
//!
//! ## Answers (kube-apiserver's wording)
//! - All checks pass: 200 `ok`; with `?verbose`, one `[+]<check> ok` line per check and
//!   `<endpoint> check passed`.
//! - A check fails: 500 with every check's line (`[-]<check> failed: reason withheld`: the
//!   endpoints are open to anonymous users, the reason is logged, not sent) and `<endpoint> check
//!   failed`.
//! - `?exclude=<check>` (repeatable) skips a check (`[+]<check> excluded: ok`); names that match
//!   no check are listed in a `warn: some health checks cannot be excluded: no matches for ...`
//!   line.
//! - `/<endpoint>/<check>`: 200 `ok`, or 500 `internal server error: <reason>` (these paths need
//!   authorization, as kube-apiserver's, which opens only the three roots to everyone); an
//!   unknown check is 404.
//!
//! ## Overload
//! A store probe runs at most once a second ([`crate::source::probe`]): requests in between get the last result,
//! and concurrent requests wait for the one probe in flight, so probing clients cannot turn
//! into store load (kube-apiserver rate-limits its etcd probe the same way).

use axum::http::StatusCode;
use axum::response::Response;

use crate::http::state::App;
use crate::respond::{error_response, text_response};

/// The three health endpoints.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Endpoint {
    /// `/healthz` (deprecated in Kubernetes, still served).
    Healthz,
    /// `/livez`.
    Livez,
    /// `/readyz`.
    Readyz,
}

impl Endpoint {
    /// The endpoint named by a path's first segment.
    #[must_use]
    pub fn from_segment(segment: &str) -> Option<Endpoint> {
        match segment {
            "healthz" => Some(Endpoint::Healthz),
            "livez" => Some(Endpoint::Livez),
            "readyz" => Some(Endpoint::Readyz),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Endpoint::Healthz => "healthz",
            Endpoint::Livez => "livez",
            Endpoint::Readyz => "readyz",
        }
    }
}

/// One check, by what it looks at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Check {
    Ping,
    Log,
    Store,
    StoreReadiness,
    InformerSync,
}

/// The checks of `endpoint`, with their names, in kube-apiserver's order.
fn checks(app: &App, endpoint: Endpoint) -> Vec<(&'static str, Check)> {
    let mut checks = vec![("ping", Check::Ping), ("log", Check::Log)];
    let store = app.source.as_store().map(|store| {
        if store.kind() == watchkeeper_store::StoreKind::Etcd {
            ("etcd", "etcd-readiness")
        } else {
            ("store", "store-readiness")
        }
    });
    if let Some((live, _)) = store {
        checks.push((live, Check::Store));
    }
    if endpoint == Endpoint::Readyz {
        if let Some((_, ready)) = store {
            checks.push((ready, Check::StoreReadiness));
        }
        checks.push(("informer-sync", Check::InformerSync));
    }
    checks
}

async fn run(app: &App, check: Check) -> Result<(), String> {
    match check {
        Check::Ping | Check::Log => Ok(()),
        Check::Store | Check::StoreReadiness => app.source.store_health().await,
        Check::InformerSync => app
            .ensure_ready()
            .map_err(|_| "the caches have not loaded their first lists".to_owned()),
    }
}

/// `/<endpoint>` with its query (`verbose`, `exclude`).
pub async fn root(app: &App, endpoint: Endpoint, query: Option<&str>) -> Response {
    let pairs: Vec<(String, String)> = query
        .and_then(|q| serde_urlencoded::from_str(q).ok())
        .unwrap_or_default();
    let verbose = pairs.iter().any(|(key, _)| key == "verbose");
    let mut excluded: Vec<String> = pairs
        .into_iter()
        .filter(|(key, _)| key == "exclude")
        .map(|(_, value)| value)
        .collect();
    let mut lines = String::new();
    let mut failed = Vec::new();
    for (name, check) in checks(app, endpoint) {
        if let Some(at) = excluded.iter().position(|e| e == name) {
            excluded.remove(at);
            lines.push_str(&format!("[+]{name} excluded: ok\n"));
            continue;
        }
        match run(app, check).await {
            Ok(()) => lines.push_str(&format!("[+]{name} ok\n")),
            Err(reason) => {
                lines.push_str(&format!("[-]{name} failed: reason withheld\n"));
                failed.push(format!("[-]{name} failed: {reason}"));
            }
        }
    }
    if !excluded.is_empty() {
        excluded.sort();
        excluded.dedup();
        let quoted: Vec<String> = excluded.iter().map(|e| format!("{e:?}")).collect();
        lines.push_str(&format!(
            "warn: some health checks cannot be excluded: no matches for {}\n",
            quoted.join(",")
        ));
    }
    let name = endpoint.name();
    if !failed.is_empty() {
        tracing::info!(endpoint = name, failed = %failed.join("; "), "health check failed");
        return text_response(
            StatusCode::INTERNAL_SERVER_ERROR,
            &format!("{lines}{name} check failed\n"),
        );
    }
    if verbose {
        text_response(StatusCode::OK, &format!("{lines}{name} check passed\n"))
    } else {
        text_response(StatusCode::OK, "ok")
    }
}

/// `/<endpoint>/<check>`.
pub async fn single(app: &App, endpoint: Endpoint, name: &str) -> Response {
    let Some((_, check)) = checks(app, endpoint).into_iter().find(|(n, _)| *n == name) else {
        return error_response(&watchkeeper_api::ApiError::path_not_found());
    };
    match run(app, check).await {
        Ok(()) => text_response(StatusCode::OK, "ok"),
        Err(reason) => text_response(
            StatusCode::INTERNAL_SERVER_ERROR,
            &format!("internal server error: {reason}\n"),
        ),
    }
}
