//! The server's integration tests, one binary (each file below was a binary of its own,
//! linking the whole server: 59 copies of ~117 MB and as many links; one now). A module per
//! area; `common` and `kubectl_support` are the shared helpers. Run one area with
//! `cargo test -p watchkeeper --test integration writes::`.

mod common;
mod kubectl_support;

mod admission_plugins;
mod admission_policy;
mod apf;
mod api;
mod apiservices;
mod audit;
mod auth;
mod authz_webhook;
mod builtin_validation;
mod builtin_validation_apps;
mod builtin_validation_core;
mod builtin_validation_storage;
mod cache_memory;
mod consistency;
mod controllers;
mod conversion_webhook;
mod crd_read_defaults;
mod defaults;
mod deletes;
mod discovery_hashes;
mod encryption;
mod etcd_progress;
mod etcd_tls;
mod gateway_api_corpus;
mod go_struct_json;
mod h2c;
mod hostile;
mod hostile_amplification;
mod hostile_audit;
mod hostile_inputs;
mod hostile_watches;
mod jwt_auth;
mod kinds;
mod kube_rs;
mod kubectl;
mod kubectl_verbs;
mod label_selectors;
mod limit_ranger;
mod limits;
mod metrics_format;
mod numbers;
mod pod_gc;
mod pod_resize;
mod pod_security;
mod pod_validation;
mod pod_warnings;
mod proxy;
mod proxy_subresources;
mod python_client;
mod query_props;
mod quota;
mod rbac;
mod request_deadline;
mod resource_quota;
mod service_cidrs;
mod slow_reader;
mod tls;
mod ui;
mod webhooks;
mod writes;
