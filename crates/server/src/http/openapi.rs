//! The OpenAPI documents: `/openapi/v3` (its index and one document per group/version) and
//! `/openapi/v2` (one Swagger 2.0 document, as JSON or as gnostic's protobuf, negotiated on
//! `Accept` as kube-apiserver does); see `watchkeeper_api::openapi`.
//!
//! ## Guarantees
//! - Each document is built at most once per set of served resources (the set changes only
//!   when a CustomResourceDefinition comes or goes) and then shared by every request: a client
//!   asking again and again — kubectl reads the v3 index on most commands — costs a copy-free
//!   answer, not a rebuild of every schema (kube-apiserver likewise builds them lazily and
//!   caches them). Requests that want a document being built wait for that build (without
//!   holding a thread); a request for a group/version nobody serves builds nothing and caches
//!   nothing.
//! - A build (every served kind's schema, a few hundred ms for the built-ins in a debug build,
//!   more with large CRDs) runs on the heavy-request pool (`offload`, `--max-heavy-requests`
//!   at once), not on a runtime worker: a client that makes CRDs come and go and asks for the
//!   documents after each change delays no other request's worker.
//! - `/openapi/v2` answers carry an `ETag` (quoted, of the JSON document) and `Vary: Accept`;
//!   a request whose `If-None-Match` names the current tag (or `*`) gets `304 Not Modified`.
//!   An `Accept` with nothing it is served in gets `406` with a Status naming its two media
//!   types.
//!
//! ## Bounds
//! The documents of one set of served resources are held with that set
//! ([`crate::cache::Served::derived`]): dropped when the set changes and the last request that
//! read it finishes (a few MiB for every built-in kind; a CRD's schema appears in its group
//! version's v3 document and in v2's JSON and protobuf, about half its decoded size again).
//! Over a store their bytes count against `--cache-memory-bytes` with the live objects
//! (`source::cache_memory`), from when each is built until its set is dropped, so a client
//! cannot make CRDs that hold more than the bound through their documents.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;
use bytes::Bytes;
use tokio::sync::OnceCell;
use watchkeeper_api::ApiError;
use watchkeeper_api::openapi::gnostic::openapi_v2_protobuf;
use watchkeeper_api::openapi::v2::{
    OpenApiV2Format, PROTOBUF_CONTENT_TYPE, entity_tag, negotiate_v2, openapi_v2,
};
use watchkeeper_api::openapi::{group_versions, openapi_v3_group_version, openapi_v3_index};

use crate::cache::Served;
use crate::offload::Offload;
use crate::respond::{error_response, json_response};
use crate::source::cache_memory::{CacheMemory, Held};

/// The `/openapi/v2` document's encodings.
#[derive(Debug)]
struct V2 {
    json: Bytes,
    protobuf: Bytes,
    etag: HeaderValue,
}

/// A v3 document: its JSON text, `None` when nothing is served at its group/version.
type V3 = Arc<OnceCell<Option<Bytes>>>;

/// The documents of one set of served resources, each built on first use, held in the set's
/// [`Served::derived`].
#[derive(Debug)]
struct Documents {
    /// Where the documents' bytes count (`None`: caching-proxy mode, nothing bounded).
    memory: Option<Arc<CacheMemory>>,
    /// What each built document counts there, until the documents are dropped.
    held: Mutex<Vec<Held>>,
    v2: OnceCell<V2>,
    v3_index: OnceCell<Bytes>,
    /// Each served group/version's v3 document.
    v3: Mutex<HashMap<(String, String), V3>>,
}

impl Documents {
    /// Counts `bytes` more of built documents.
    fn count(&self, bytes: usize) {
        if let Some(memory) = &self.memory {
            let held = memory.hold(bytes);
            self.held
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(held);
        }
    }

    /// The JSON text of the v3 document of `group`/`version`, `None` when nothing is served
    /// there.
    async fn v3(
        &self,
        offload: &Offload,
        served: &Arc<Served>,
        group: &str,
        version: &str,
    ) -> Result<Option<Bytes>, ApiError> {
        let key = (group.to_owned(), version.to_owned());
        let cell = {
            let mut built = self.v3.lock().unwrap_or_else(PoisonError::into_inner);
            match built.get(&key) {
                Some(cell) => Arc::clone(cell),
                None if !serves(served, group, version) => return Ok(None),
                None => Arc::clone(built.entry(key).or_default()),
            }
        };
        let text = cell
            .get_or_try_init(|| async {
                let served = Arc::clone(served);
                let (group, version) = (group.to_owned(), version.to_owned());
                let text = offload
                    .compute(usize::MAX, move || {
                        let custom = custom_schemas(&served, Some((&group, &version)));
                        openapi_v3_group_version(&served.defs, &custom, &group, &version)
                            .map(|document| Bytes::from(document.to_string()))
                    })
                    .await?;
                if let Some(text) = &text {
                    self.count(text.len());
                }
                Ok::<_, ApiError>(text)
            })
            .await?;
        Ok(text.clone())
    }
}

/// Whether a v3 document may exist at `group`/`version`: a resource is served there, or one
/// of the kinds only created there (reviews, bindings) is.
fn serves(served: &Served, group: &str, version: &str) -> bool {
    group_versions(&served.defs)
        .iter()
        .any(|(g, v)| g == group && v == version)
}

/// The declared `openAPIV3Schema` of every served custom kind (each served version's own), or
/// only of those served at `at` (a group and version).
fn custom_schemas(served: &Served, at: Option<(&str, &str)>) -> watchkeeper_api::CustomSchemas {
    let mut schemas = watchkeeper_api::CustomSchemas::new();
    for resource in served.iter() {
        let Some(custom) = resource.custom() else {
            continue;
        };
        for version in std::iter::once(custom.as_ref()).chain(&custom.other_versions) {
            let def = &version.def;
            if at.is_some_and(|(group, at_version)| def.group != group || def.version != at_version)
            {
                continue;
            }
            if let Some(schema) = &version.schema {
                schemas.insert(
                    (def.group.clone(), def.version.clone(), def.kind.clone()),
                    serde_json::Value::clone(schema),
                );
            }
        }
    }
    schemas
}

/// Where the documents' bytes count, for every set of served resources.
#[derive(Debug, Default)]
pub struct OpenApiCache {
    memory: Option<Arc<CacheMemory>>,
}

impl OpenApiCache {
    /// Documents whose bytes count in `memory` (`None`: not counted).
    #[must_use]
    pub fn new(memory: Option<Arc<CacheMemory>>) -> OpenApiCache {
        OpenApiCache { memory }
    }

    /// The documents of `served`: those built so far for it, a new empty set the first time.
    fn documents<'a>(&self, served: &'a Served) -> &'a Documents {
        let derived = served.derived.get_or_init(|| {
            Box::new(Documents {
                memory: self.memory.clone(),
                held: Mutex::default(),
                v2: OnceCell::new(),
                v3_index: OnceCell::new(),
                v3: Mutex::default(),
            })
        });
        derived
            .downcast_ref::<Documents>()
            .expect("only the OpenAPI documents derive from the served set")
    }
}

/// `/openapi/v3`: the index, each group/version's URL carrying its document's hash.
pub async fn v3_index(cache: &OpenApiCache, offload: &Offload, served: &Arc<Served>) -> Response {
    let documents = cache.documents(served);
    let index = documents
        .v3_index
        .get_or_try_init(|| async {
            let mut texts = HashMap::new();
            for (group, version) in group_versions(&served.defs) {
                let text = documents.v3(offload, served, &group, &version).await?;
                texts.insert((group, version), text);
            }
            let index = openapi_v3_index(&served.defs, |group, version| {
                texts
                    .get(&(group.to_owned(), version.to_owned()))
                    .cloned()
                    .flatten()
            });
            let text = Bytes::from(index.to_string());
            documents.count(text.len());
            Ok::<_, ApiError>(text)
        })
        .await;
    match index {
        Ok(index) => json_response(StatusCode::OK, index.clone()),
        Err(error) => error_response(&error),
    }
}

/// `/openapi/v3/api/v1`, `/openapi/v3/apis/{group}/{version}`.
pub async fn v3(
    cache: &OpenApiCache,
    offload: &Offload,
    served: &Arc<Served>,
    group: &str,
    version: &str,
) -> Response {
    let documents = cache.documents(served);
    match documents.v3(offload, served, group, version).await {
        Ok(Some(text)) => json_response(StatusCode::OK, text),
        Ok(None) => error_response(&ApiError::path_not_found()),
        Err(error) => error_response(&error),
    }
}

/// `/openapi/v2`.
pub async fn v2(
    cache: &OpenApiCache,
    offload: &Offload,
    served: &Arc<Served>,
    headers: &HeaderMap,
) -> Response {
    let accept = headers
        .get(header::ACCEPT)
        .and_then(|value| value.to_str().ok());
    let Some(format) = negotiate_v2(accept) else {
        return error_response(&ApiError::not_acceptable(
            "only the following media types are accepted: application/json, application/com.github.proto-openapi.spec.v2@v1.0+protobuf",
        ));
    };
    let documents = cache.documents(served);
    let built = documents
        .v2
        .get_or_try_init(|| async {
            let served = Arc::clone(served);
            let built = offload
                .compute(usize::MAX, move || {
                    let document = openapi_v2(&served.defs, &custom_schemas(&served, None));
                    let json = document.to_string();
                    V2 {
                        protobuf: openapi_v2_protobuf(&document).into(),
                        etag: HeaderValue::from_str(&entity_tag(&json))
                            .unwrap_or(HeaderValue::from_static("\"\"")),
                        json: json.into(),
                    }
                })
                .await?;
            documents.count(built.json.len() + built.protobuf.len());
            Ok::<_, ApiError>(built)
        })
        .await;
    let built = match built {
        Ok(built) => built,
        Err(error) => return error_response(&error),
    };
    let not_modified = headers
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|tags| tags.split(','))
        .map(str::trim)
        .any(|tag| tag == "*" || tag.as_bytes() == built.etag.as_bytes());
    let (content_type, body) = match format {
        OpenApiV2Format::Json => ("application/json", built.json.clone()),
        OpenApiV2Format::Protobuf => (PROTOBUF_CONTENT_TYPE, built.protobuf.clone()),
    };
    let mut response = if not_modified {
        let mut response = Response::new(Body::empty());
        *response.status_mut() = StatusCode::NOT_MODIFIED;
        response
    } else {
        Response::new(Body::from(body))
    };
    let out = response.headers_mut();
    out.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    out.insert(header::ETAG, built.etag.clone());
    out.insert(header::VARY, HeaderValue::from_static("Accept"));
    response
}
