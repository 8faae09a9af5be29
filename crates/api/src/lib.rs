//! The Kubernetes REST API surface of watchkeeper, as pure functions: no I/O, no clock, no
//! threads and no randomness (the current time, UIDs and random name suffixes are parameters).
//!
//! The server calls into this crate to turn requests and stored objects into exactly what
//! kubectl, kube-rs and client-python expect:
//!
//! - [`resources`]: the served kinds ([`ResourceDef`], [`builtin_resources`], custom kinds from
//!   [`parse_resources_file`]), their selectable fields ([`field_values`]) and labels.
//! - [`crd`]: CustomResourceDefinitions: their validation, status and served resource.
//! - [`error`]: failures as `metav1.Status` ([`ApiError`]), with Kubernetes' codes, reasons
//!   and messages.
//! - [`meta`]: name rules and the metadata handling of create and update
//!   ([`prepare_create`], [`prepare_update`]).
//! - [`patch`]: merge, JSON and strategic merge patches ([`apply_patch`]).
//! - [`protobuf`]: Kubernetes protobuf request bodies decoded to JSON ([`decode_protobuf`]).
//! - [`table`]: `meta.k8s.io/v1` Table output for `kubectl get` ([`to_table`]).
//! - [`discovery`] and [`openapi`]: `/version`, `/api`, `/apis` (legacy and aggregated),
//!   resource lists, and the OpenAPI v3 documents `kubectl apply` and `kubectl explain` read.
//! - [`negotiate`]: `Accept` headers as ranges with Kubernetes' `g`/`v`/`as` parameters.
//! - [`time`]: RFC 3339 conversion and kubectl's age format.
//! - [`query`]: the query parameters of list, get and watch, and continue tokens.
//! - [`watch_frame`]: watch events as newline-delimited JSON frames.
//! - [`schema`]: write bodies of built-in kinds decoded against their published schemas, with
//!   kube-apiserver's 400/422 answers; [`structural`]: custom resources against their CRD's
//!   structural schema (with [`strfmt`]'s string formats), ratcheted on updates.
//! - [`ephemeral`] and [`resize`]: the `ephemeralcontainers` and `resize` subresources of
//!   pods (what they share: [`pod_subresources`]); [`certificates`]: the `approval`
//!   subresource of CertificateSigningRequests.
//! - [`defaults`]: the built-in kinds' defaults and create-time status, and which kinds keep
//!   `metadata.generation`.
//! - [`kinds`]: the strategies of the storage, node, admission-policy and flow-control kinds:
//!   their pointer-dependent defaults, `status` subresource rules and kube's validation.
//! - [`admission_policy`] and [`admission_webhook`]: ValidatingAdmissionPolicy evaluated, and
//!   which admission webhooks a write calls, with what review, and what their answers mean.
//! - [`apply`]: field ownership (`metadata.managedFields`) of every write and server-side
//!   apply, with structured-merge-diff's semantics ([`apply::update`], [`apply::apply`]).
//! - [`order`]: Status and object bodies in kube-apiserver's field order, newline-terminated
//!   ([`ApiError::to_status_body`], [`object_body`]).
//!
//! ## Order of calls for a write
//! Create: decode the body, [`prepare_create`] (schema check, metadata, defaults, create-time
//! status), store. Update: decode, [`prepare_update`]
//! against the stored object, compare `metadata.resourceVersion` with the stored one
//! ([`ApiError::conflict_modified`] on mismatch), store. Patch: [`apply_patch`] (or
//! [`apply_patch_with_limits`] with the server's [`PatchLimits`]) to the stored object — it
//! checks the patched object against the schema (422) — then [`prepare_update`] as for an
//! update. Refusals go out as [`ApiError::to_status_body`].

pub mod admission_policy;
pub mod admission_webhook;
pub mod apply;
pub mod cel_rules;
pub mod certificates;
pub mod componentstatus;
pub mod conversion_review;
pub mod crd;
mod crd_schema;
pub mod defaults;
pub mod discovery;
mod embedded;
pub mod ephemeral;
pub mod error;
pub mod field;
pub mod gc;
pub mod go_json;
mod go_url;
pub mod go_yaml;
pub mod graceful;
mod hash;
mod json_pointer;
pub mod kinds;
pub mod label_selector;
pub mod meta;
mod names;
pub mod negotiate;
pub mod openapi;
pub mod order;
pub mod patch;
pub mod pattern;
pub mod pod_security;
pub mod pod_subresources;
pub mod pod_warnings;
pub mod protobuf;
pub mod quantity;
pub mod query;
pub mod resize;
pub mod resources;
pub mod schema;
mod schema_node;
pub mod size;
pub mod strfmt;
pub mod structural;
pub mod table;
pub mod time;
pub mod versions;
pub mod watch_frame;
pub mod yaml;

pub use discovery::{
    AggregatedVersion, RemoteGroupVersion, aggregated_discovery, api_group, api_group_list,
    api_resource_list, api_versions, api_versions_with_address, discovery_etag,
    negotiate_discovery, serves_group_version, storage_version_hash, version_info,
};
pub use error::{ApiError, success_status};
pub use meta::{
    CreateContext, check_body_media_type, prepare_create, prepare_update, prepare_update_decoded,
    validate_name,
};
pub use names::{
    escape_path_segment, plain_in_path_segment, validate_dns1123_label, validate_dns1123_subdomain,
};
pub use openapi::{CustomSchemas, openapi_v3_group_version, openapi_v3_root};
pub use order::{object_body, status_body};
pub use patch::{
    JSON_PATCH_COPY_BYTES_MAX, PatchLimits, PatchType, apply_patch, apply_patch_checked,
    apply_patch_with_limits, unsupported_patch_type,
};
pub use protobuf::{PROTOBUF_MEDIA_TYPE, decode_protobuf, is_protobuf_media_type, protobuf_kinds};
pub use query::validate_field_selector;
pub use resources::{
    ResourceDef, builtin_resources, field_values, field_values_beside_name, find_resource,
    labels_of, parse_resources_file,
};
pub use table::{to_table, to_table_with};
pub use time::{human_duration, rfc3339_from_unix, rfc3339_micro_from_unix, unix_from_rfc3339};
