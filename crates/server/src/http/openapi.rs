//! The OpenAPI documents: `/openapi/v3` (its index and one document per group/version) and
//! `/openapi/v2` (one Swagger 2.0 document, as JSON or as gnostic's protobuf, negotiated on
//! `Accept` as kube-apiserver does); see `watchkeeper_api::openapi`.
//!
//! ## Guarantees
//! - Each document is built at most once per set of served resources (the set changes only
//!   when a CustomResourceDefinition comes or goes) and then shared by every request: a client
//!   asking again and again — kubectl reads the v3 index on most commands — costs a copy-free
//!   answer, not a rebuild of every schema (kube-apiserver likewise builds them lazily and
//!   caches them). A request for a group/version nobody serves builds nothing and caches
//!   nothing.
//! - `/openapi/v2` answers carry an `ETag` (quoted, of the JSON document) and `Vary: Accept`;
//!   a request whose `If-None-Match` names the current tag (or `*`) gets `304 Not Modified`.
//!   An `Accept` with nothing it is served in gets `406` with a Status naming its two media
//!   types.
//!
//! ## Bounds
//! One set of documents is held: those of the served resources now (a few MiB for every
//! built-in kind), dropped when the set changes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;
use bytes::Bytes;
use watchkeeper_api::ApiError;
use watchkeeper_api::openapi::gnostic::openapi_v2_protobuf;
use watchkeeper_api::openapi::v2::{
    OpenApiV2Format, PROTOBUF_CONTENT_TYPE, entity_tag, negotiate_v2, openapi_v2,
};
use watchkeeper_api::openapi::{openapi_v3_group_version, openapi_v3_index};

use crate::cache::Served;
use crate::respond::{error_response, json_response};

/// The `/openapi/v2` document's encodings.
#[derive(Debug)]
struct V2 {
    json: Bytes,
    protobuf: Bytes,
    etag: HeaderValue,
}

/// The documents of one set of served resources, each built on first use.
#[derive(Debug)]
struct Documents {
    served: Weak<Served>,
    v2: OnceLock<V2>,
    v3_index: OnceLock<Bytes>,
    /// The JSON text of each served group/version's v3 document.
    v3: Mutex<HashMap<(String, String), Bytes>>,
}

impl Documents {
    /// The JSON text of the v3 document of `group`/`version`, `None` when nothing is served
    /// there.
    fn v3(&self, served: &Served, group: &str, version: &str) -> Option<Bytes> {
        let key = (group.to_owned(), version.to_owned());
        if let Some(text) = self
            .v3
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&key)
        {
            return Some(text.clone());
        }
        // Built outside the lock: two first requests may both build it, with the same result.
        let document =
            openapi_v3_group_version(&served.defs, &super::custom_schemas(served), group, version)?;
        let text = Bytes::from(document.to_string());
        self.v3
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key, text.clone());
        Some(text)
    }
}

/// The documents of the served resources now (see the module doc).
#[derive(Debug, Default)]
pub struct OpenApiCache {
    current: Mutex<Option<Arc<Documents>>>,
}

impl OpenApiCache {
    /// The documents of `served`: those built so far if they describe it, a new empty set
    /// otherwise.
    fn documents(&self, served: &Arc<Served>) -> Arc<Documents> {
        let mut current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(documents) = current.as_ref()
            && Weak::ptr_eq(&documents.served, &Arc::downgrade(served))
        {
            return Arc::clone(documents);
        }
        let documents = Arc::new(Documents {
            served: Arc::downgrade(served),
            v2: OnceLock::new(),
            v3_index: OnceLock::new(),
            v3: Mutex::default(),
        });
        *current = Some(Arc::clone(&documents));
        documents
    }
}

/// `/openapi/v3`: the index, each group/version's URL carrying its document's hash.
pub fn v3_index(cache: &OpenApiCache, served: &Arc<Served>) -> Response {
    let documents = cache.documents(served);
    let index = documents.v3_index.get_or_init(|| {
        let index = openapi_v3_index(&served.defs, |group, version| {
            documents.v3(served, group, version)
        });
        Bytes::from(index.to_string())
    });
    json_response(StatusCode::OK, index.clone())
}

/// `/openapi/v3/api/v1`, `/openapi/v3/apis/{group}/{version}`.
pub fn v3(cache: &OpenApiCache, served: &Arc<Served>, group: &str, version: &str) -> Response {
    let documents = cache.documents(served);
    documents.v3(served, group, version).map_or_else(
        || error_response(&ApiError::path_not_found()),
        |text| json_response(StatusCode::OK, text),
    )
}

/// `/openapi/v2`.
pub fn v2(cache: &OpenApiCache, served: &Arc<Served>, headers: &HeaderMap) -> Response {
    let accept = headers
        .get(header::ACCEPT)
        .and_then(|value| value.to_str().ok());
    let Some(format) = negotiate_v2(accept) else {
        return error_response(&ApiError::not_acceptable(
            "only the following media types are accepted: application/json, application/com.github.proto-openapi.spec.v2@v1.0+protobuf",
        ));
    };
    let documents = cache.documents(served);
    let built = documents.v2.get_or_init(|| {
        let document = openapi_v2(&served.defs, &super::custom_schemas(served));
        let json = document.to_string();
        V2 {
            protobuf: openapi_v2_protobuf(&document).into(),
            etag: HeaderValue::from_str(&entity_tag(&json))
                .unwrap_or(HeaderValue::from_static("\"\"")),
            json: json.into(),
        }
    });
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
