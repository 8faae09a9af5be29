//! The `watchkeeper serve` configuration: command-line flags and the same keys in an optional
//! TOML file (flags win), validated into one [`ServeConfig`].

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use serde::Deserialize;
use watchkeeper_core::{CacheConfig, WatchMode};
use watchkeeper_store::StoreKind;

mod admission;
pub mod admission_plugins;
mod audit;
pub mod authn;
pub mod authz;
pub mod controllers;
mod encryption;
mod error;
mod etcd;
mod limits;
pub mod tls;

pub use admission::AdmissionConfig;
pub use audit::{AuditConfig, AuditMode, AuditWebhookConfig, Batching};
pub use authn::{
    ClaimMappings, ClaimOrExpression, ClaimValidationRule, ExtraMapping, Issuer, JwtAuthenticator,
    JwtConfig, PrefixedClaimOrExpression, UserValidationRule,
};
pub use controllers::PodGcConfig;
pub use error::ConfigError;
pub use limits::{LimitsConfig, REQUEST_BODY_MAX, go_duration_seconds};
pub(crate) use tls::pem_certificates;
pub use tls::{RequestHeaderConfig, TlsConfig};

/// Flags of `watchkeeper serve`. Every field is optional so that a flag given on the command
/// line can be told from a default; see [`ServeConfig`] for the defaults.
#[derive(Args, Debug, Default, Clone, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct ServeArgs {
    /// Address to listen on [default: 127.0.0.1:8080].
    #[arg(long)]
    pub listen: Option<SocketAddr>,
    /// Data directory of the embedded store [default: ./watchkeeper-data].
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// Store backend: embedded, memory or etcd [default: embedded].
    #[arg(long)]
    pub store: Option<String>,
    /// etcd endpoints, comma-separated (with --store etcd).
    #[arg(long, value_delimiter = ',')]
    pub etcd_endpoints: Option<Vec<String>>,
    /// Key prefix of every object in the store [default: /registry].
    #[arg(long)]
    pub etcd_prefix: Option<String>,
    /// kube-apiserver's `--etcd-cafile`: PEM CA bundle that verifies etcd's serving
    /// certificate (with --store etcd and https:// endpoints) [default: the system's roots].
    #[arg(long)]
    pub etcd_cafile: Option<PathBuf>,
    /// kube-apiserver's `--etcd-certfile`: PEM client certificate presented to etcd (with
    /// --etcd-keyfile) [default: none].
    #[arg(long)]
    pub etcd_certfile: Option<PathBuf>,
    /// kube-apiserver's `--etcd-keyfile`: the PEM private key of --etcd-certfile.
    #[arg(long)]
    pub etcd_keyfile: Option<PathBuf>,
    /// A TOML file of extra (custom) resource definitions.
    #[arg(long)]
    pub resources: Option<PathBuf>,
    /// stall-resume (default) or legacy (Kubernetes before KEP-6268, for comparison).
    #[arg(long)]
    pub watch_mode: Option<String>,
    /// A TOML file with these same keys; flags given on the command line win.
    #[arg(long)]
    #[serde(skip)]
    pub config: Option<PathBuf>,
    /// Serve consistent GETs from the cache after proving it fresh [default: true]; false
    /// reads them from the store (for comparison).
    #[arg(long)]
    pub consistent_get_from_cache: Option<bool>,
    /// Collect garbage as kube-controller-manager's garbage collector and kube-apiserver's
    /// `--enable-garbage-collector` do [default: true]: a DELETE gives an object the `orphan`
    /// or `foregroundDeletion` finalizer its propagation policy asks for, and objects whose
    /// owners are gone are deleted. Off, neither happens. Store modes only.
    #[arg(long)]
    pub enable_garbage_collector: Option<bool>,
    /// Admission plugins of kube-apiserver's default set not to run, comma-separated, as
    /// kube's flag names them (any of kube v1.33's plugins; see `config::admission_plugins`)
    /// [default: none]. Store modes only.
    #[arg(long, value_delimiter = ',')]
    pub disable_admission_plugins: Option<Vec<String>>,
    /// Admission plugins to run besides kube-apiserver's default set, comma-separated, as
    /// kube's flag names them: any of kube v1.33's plugins is understood; those this server
    /// does not run are refused at start (see `config::admission_plugins`) [default: none].
    /// Store modes only.
    #[arg(long, value_delimiter = ',')]
    pub enable_admission_plugins: Option<Vec<String>>,
    /// Deprecated (as in kube): exactly the admission plugins to run, comma-separated;
    /// exclusive with `--enable-admission-plugins` and `--disable-admission-plugins`
    /// [default: none: kube's default set]. Store modes only.
    #[arg(long, value_delimiter = ',')]
    pub admission_control: Option<Vec<String>>,
    /// kube-apiserver's admission configuration file (an `AdmissionConfiguration`, YAML or
    /// JSON): PodSecurity's `PodSecurityConfiguration` (defaults and exemptions), inline or by
    /// `path` [default: none: kube's defaults]. Store modes only.
    #[arg(long)]
    pub admission_control_config_file: Option<PathBuf>,
    /// kube-apiserver's encryption at rest: an `EncryptionConfiguration`
    /// (`apiserver.config.k8s.io/v1`, YAML or JSON) whose rules choose the providers
    /// (`aescbc`, `aesgcm`, `secretbox`, `identity`) that write and read each resource's stored
    /// values [default: none: values stored as they are]. Store modes only.
    #[arg(long)]
    pub encryption_provider_config: Option<PathBuf>,
    /// Read `--encryption-provider-config` again when its content changes, as kube-apiserver's
    /// flag does [default: false: read once, at start]. Needs `--encryption-provider-config`.
    #[arg(long)]
    pub encryption_provider_config_automatic_reload: Option<bool>,
    /// How often, in milliseconds, `--encryption-provider-config-automatic-reload` reads the
    /// file for a change, 100 to 3600000 [default: 60000, kube's one minute].
    #[arg(long)]
    pub encryption_provider_config_reload_interval_ms: Option<u64>,
    /// Give every namespace kube's `kube-root-ca.crt` ConfigMap, as kube-controller-manager's
    /// root-ca-cert-publisher does (its CA bundle: --root-ca-file) [default: true]. Store modes
    /// only.
    #[arg(long)]
    pub enable_root_ca_cert_publisher: Option<bool>,
    /// Run kube-controller-manager's pod garbage collector (its `pod-garbage-collector`
    /// controller) [default: true]: pods bound to a node that stays absent for
    /// --pod-gc-quarantine-ms are marked Failed (condition `DisruptionTarget`) and deleted with
    /// a grace period of 0, as are terminating pods not scheduled and terminating pods on a
    /// NotReady node tainted `node.kubernetes.io/out-of-service`, and terminated pods beyond
    /// --terminated-pod-gc-threshold (see `controllers::pod_gc`). Store modes only.
    #[arg(long)]
    pub enable_pod_gc: Option<bool>,
    /// kube-controller-manager's flag: terminated pods (Succeeded or Failed) kept before the
    /// pod garbage collector deletes the oldest; 0 or less keeps them all [default: 12500].
    #[arg(long, allow_negative_numbers = true)]
    pub terminated_pod_gc_threshold: Option<i64>,
    /// Time between two passes of the pod garbage collector, in milliseconds, 10 to 3600000
    /// (kube's gcCheckPeriod) [default: 20000].
    #[arg(long)]
    pub pod_gc_period_ms: Option<u64>,
    /// How long a node that pods are bound to must stay absent (seen absent, then again after
    /// this long) before the pod garbage collector deletes them, in milliseconds, 0 to 3600000
    /// (kube's quarantineTime) [default: 40000].
    #[arg(long)]
    pub pod_gc_quarantine_ms: Option<u64>,
    /// The most pods one pass of the pod garbage collector deletes, 1 to 100000; the rest wait
    /// for the next pass [default: 500].
    #[arg(long)]
    pub pod_gc_deletes_per_pass_max: Option<usize>,
    /// kube-controller-manager's flag: how often every ResourceQuota's `status.used` is
    /// recalculated (a pod terminating past its grace period stops counting), a Go duration
    /// from 10ms to 24h [default: 5m0s]. Store modes only.
    #[arg(long)]
    pub resource_quota_sync_period: Option<String>,
    /// Events younger than this stay in the history, in seconds [default: 75].
    #[arg(long)]
    pub event_fresh_seconds: Option<u64>,
    /// Largest history capacity in events [default: 102400].
    #[arg(long)]
    pub history_capacity_max: Option<usize>,
    /// Largest size of each resource's history in bytes, counted as the memory the objects its
    /// events carry take decoded (an estimate of their parsed bodies plus their JSON); past it
    /// the oldest revisions are evicted (watchers behind them get 410) [default: 1073741824,
    /// 1 GiB; at least 1024]
    #[arg(long)]
    pub history_bytes_max: Option<usize>,
    /// Largest per-watcher queue in events, also the bound of a queue that grows because its
    /// client emptied it and then was late for a burst [default: 1000].
    #[arg(long)]
    pub queue_capacity_max: Option<usize>,
    /// Smallest per-watcher queue in events, the size on a new cache [default: 10, as
    /// Kubernetes]. Every stalled watcher holds up to its queue's capacity of shared pointers.
    #[arg(long)]
    pub queue_capacity_min: Option<usize>,
    /// Watchers served per catch-up pass [default: 512].
    #[arg(long)]
    pub pass_members_max: Option<usize>,
    /// Scan units per catch-up pass [default: 2000].
    #[arg(long)]
    pub pass_scan_units_max: Option<usize>,
    /// Pushes per catch-up pass [default: 2000].
    #[arg(long)]
    pub pass_pushes_max: Option<usize>,
    /// Initial-phase no-progress timeout in seconds [default: 30].
    #[arg(long)]
    pub initial_no_progress_seconds: Option<u64>,
    /// Minimum request timeout for watches in seconds; a watch without timeoutSeconds gets a
    /// random deadline between this and twice this [default: 1800].
    #[arg(long)]
    pub min_request_timeout_seconds: Option<u64>,
    /// How long consistent reads wait for the cache, in milliseconds [default: 3000].
    #[arg(long)]
    pub fresh_wait_ms: Option<u64>,
    /// Over etcd, how long a wait for the cache to reach the store's revision lasts before
    /// it writes `<prefix>/freshness_key` so the watch reports that revision (etcd's revision
    /// moved on outside the prefix), in milliseconds; 0 = never, wait for etcd's progress
    /// notifications [default: 100].
    #[arg(long)]
    pub fresh_nudge_ms: Option<u64>,
    /// fsync every commit of the embedded store [default: true].
    #[arg(long)]
    pub durable_commits: Option<bool>,
    /// The most bytes the memory or embedded store may hold: live keys and values plus the
    /// history compaction has not freed yet; a write that would exceed it gets etcd's 500
    /// `database space exceeded`, deletes and compaction still work. 0 = no quota, else at
    /// least 1048576; not with --store etcd (etcd's --quota-backend-bytes applies)
    /// [default: 2147483648].
    #[arg(long)]
    pub store_quota_bytes: Option<u64>,
    /// The most memory, in bytes, the caches' live objects may take decoded (an estimate of
    /// each parsed body, which takes 10 to 130 times its JSON, plus its encoding; the gauge
    /// `watchkeeper_cache_memory_bytes`). A create or update that would take them above it is
    /// refused with 500 (kube-apiserver's shape for a full etcd, `database space exceeded`);
    /// deletes, and updates that do not grow their object, still work. The histories share
    /// half of it: past that, a history above its share trims its oldest revisions. 0 = no
    /// bound, else at least 67108864 (64 MiB); store modes only [default: a third of the memory
    /// the process may use: its cgroup's `memory.max`, else the machine's `MemTotal`].
    #[arg(long)]
    pub cache_memory_bytes: Option<u64>,
    /// The most custom resource versions the server serves for CustomResourceDefinitions
    /// (each served version of each established CRD counts one: a cache with its own
    /// dispatcher thread). A CRD create or update that would pass it is refused with 403
    /// Forbidden; CRDs the store holds beyond it are not served (1 to 100000)
    /// [default: 5000].
    #[arg(long)]
    pub max_custom_resource_versions: Option<usize>,
    /// Static bearer tokens, kube-apiserver's CSV `token,user,uid,"group1,group2"`; when set,
    /// requests need `Authorization: Bearer <token>` (see the `auth` module).
    #[arg(long)]
    pub token_auth_file: Option<PathBuf>,
    /// kube-apiserver's structured authentication configuration (`AuthenticationConfiguration`,
    /// `apiserver.config.k8s.io/v1beta1` or `v1alpha1`, YAML or JSON): JWT (OIDC)
    /// authenticators, read and validated at start; not with the `--oidc-*` flags (see
    /// `auth::jwt`) [default: none].
    #[arg(long)]
    pub authentication_config: Option<PathBuf>,
    /// kube-apiserver's `--oidc-issuer-url`: the https issuer of OIDC ID tokens accepted as
    /// bearer tokens; with `--oidc-client-id` [default: none].
    #[arg(long)]
    pub oidc_issuer_url: Option<String>,
    /// kube-apiserver's `--oidc-client-id`: the audience ID tokens must name [default: none].
    #[arg(long)]
    pub oidc_client_id: Option<String>,
    /// kube-apiserver's `--oidc-username-claim` [default: sub].
    #[arg(long)]
    pub oidc_username_claim: Option<String>,
    /// kube-apiserver's `--oidc-username-prefix`; `-` for none [default: the issuer URL and
    /// `#`, none for the claim `email`].
    #[arg(long)]
    pub oidc_username_prefix: Option<String>,
    /// kube-apiserver's `--oidc-groups-claim`: a string or an array of strings [default: none].
    #[arg(long)]
    pub oidc_groups_claim: Option<String>,
    /// kube-apiserver's `--oidc-groups-prefix` [default: none].
    #[arg(long)]
    pub oidc_groups_prefix: Option<String>,
    /// kube-apiserver's `--oidc-required-claim`: `key=value` pairs, comma-separated or
    /// repeated, each a claim the token must carry with that string value [default: none].
    #[arg(long, value_delimiter = ',')]
    pub oidc_required_claim: Option<Vec<String>>,
    /// kube-apiserver's `--oidc-ca-file`: PEM CA verifying the issuer [default: the system's
    /// roots].
    #[arg(long)]
    pub oidc_ca_file: Option<PathBuf>,
    /// kube-apiserver's `--oidc-signing-algs`, comma-separated, from RS256, RS384, RS512,
    /// ES256, ES384, PS256, PS384, PS512 [default: RS256].
    #[arg(long, value_delimiter = ',')]
    pub oidc_signing_algs: Option<Vec<String>>,
    /// The longest bearer token, in bytes, read as a JWT; a longer one is never parsed (and so
    /// refused, 401, unless the token file holds it) (1024 to 1048576) [default: 65536].
    #[arg(long)]
    pub jwt_token_bytes_max: Option<usize>,
    /// The least time, in milliseconds, between two fetches of a JWT issuer's keys asked for
    /// by tokens naming an unknown `kid` (or arriving before the keys loaded): a flood of such
    /// tokens makes at most one fetch per interval per issuer (1 to 86400000) [default: 10000].
    #[arg(long)]
    pub jwt_keys_refresh_interval_ms: Option<u64>,
    /// Milliseconds one fetch of a JWT issuer's discovery document or keys may take,
    /// connection included (100 to 600000) [default: 30000].
    #[arg(long)]
    pub jwt_issuer_timeout_ms: Option<u64>,
    /// The most bytes of a JWT issuer's discovery document or key set read; a longer answer is
    /// a failed fetch (1024 to 67108864) [default: 1048576].
    #[arg(long)]
    pub jwt_issuer_response_bytes_max: Option<usize>,
    /// kube-apiserver's `--authentication-token-webhook-config-file`: a kubeconfig naming the
    /// server that reviews bearer tokens no other authenticator knows (`TokenReview` POSTed to
    /// its URL; see `auth::token_webhook`) [default: none].
    #[arg(long)]
    pub authentication_token_webhook_config_file: Option<PathBuf>,
    /// kube-apiserver's `--authentication-token-webhook-version`: the `TokenReview` version
    /// sent, `v1beta1` or `v1` [default: v1beta1].
    #[arg(long)]
    pub authentication_token_webhook_version: Option<String>,
    /// kube-apiserver's `--authentication-token-webhook-cache-ttl`: how long the webhook's
    /// answers are kept, a Go duration (`2m0s`, `30s`; `0s` keeps none; at most a day)
    /// [default: 2m0s].
    #[arg(long)]
    pub authentication_token_webhook_cache_ttl: Option<String>,
    /// The most token webhook answers kept, the least recently used dropped first (1 to
    /// 1000000) [default: 4096].
    #[arg(long)]
    pub authentication_token_webhook_cache_entries: Option<usize>,
    /// Token webhook calls in flight at once, over all requests; a request waits for a slot
    /// within its own deadline (1 to 10000) [default: 64].
    #[arg(long)]
    pub authentication_token_webhook_calls_max: Option<usize>,
    /// kube-apiserver's ABAC policy file (one JSON policy per line); without it every
    /// authenticated request is allowed.
    #[arg(long)]
    pub authorization_policy_file: Option<PathBuf>,
    /// kube-apiserver's `--authorization-mode`: authorizers in order, comma-separated, from
    /// AlwaysAllow, AlwaysDeny, ABAC and RBAC (the first to allow decides) [default: ABAC
    /// with --authorization-policy-file, else AlwaysAllow].
    #[arg(long, value_delimiter = ',')]
    pub authorization_mode: Option<Vec<String>>,
    /// kube-apiserver's `--authorization-webhook-config-file`: a kubeconfig naming the
    /// webhook the `Webhook` mode POSTs `SubjectAccessReview`s to (its server URL, CA, client
    /// certificate or token); required with `--authorization-mode` Webhook, refused without
    /// it (see `auth::authz_webhook`) [default: none].
    #[arg(long)]
    pub authorization_webhook_config_file: Option<PathBuf>,
    /// kube-apiserver's `--authorization-webhook-version`: the `authorization.k8s.io`
    /// `SubjectAccessReview` version sent and read, `v1beta1` or `v1` [default: v1beta1].
    #[arg(long)]
    pub authorization_webhook_version: Option<String>,
    /// kube-apiserver's `--authorization-webhook-cache-authorized-ttl`: how long an allowing
    /// answer of the webhook is kept, a Go duration (`5m`, `30s`, `1h30m`), 0 (not kept) to
    /// 24h [default: 5m0s].
    #[arg(long)]
    pub authorization_webhook_cache_authorized_ttl: Option<String>,
    /// kube-apiserver's `--authorization-webhook-cache-unauthorized-ttl`: how long any other
    /// answer of the webhook is kept, a Go duration, 0 (not kept) to 24h [default: 30s].
    #[arg(long)]
    pub authorization_webhook_cache_unauthorized_ttl: Option<String>,
    /// The most webhook decisions kept (least recently used dropped first), 1 to 1000000
    /// decisions (kube's size) [default: 8192].
    #[arg(long)]
    pub authorization_webhook_cache_entries: Option<usize>,
    /// Calls to the authorization webhook in flight at once, over all requests; a call past it
    /// waits for a slot within its 30 s timeout (1 to 10000 calls) [default: 64].
    #[arg(long)]
    pub authorization_webhook_calls_max: Option<usize>,
    /// kube-apiserver's audit policy (`audit.k8s.io/v1` `Policy`, YAML or JSON): which
    /// requests are logged at which level; read and validated at start. Events are written only
    /// with `--audit-log-path` too.
    #[arg(long)]
    pub audit_policy_file: Option<PathBuf>,
    /// The audit log file (`-` = standard output), one `audit.k8s.io/v1` `Event` per line.
    #[arg(long)]
    pub audit_log_path: Option<PathBuf>,
    /// Days a rotated audit log file is kept (0 = no age limit) [default: 0].
    #[arg(long)]
    pub audit_log_maxage: Option<u64>,
    /// Rotated audit log files kept (0 = all) [default: 0].
    #[arg(long)]
    pub audit_log_maxbackup: Option<usize>,
    /// Megabytes an audit log file grows to before it is rotated (0 = 100) [default: 0].
    #[arg(long)]
    pub audit_log_maxsize: Option<u64>,
    /// The audit log's format: `json` (`legacy` is refused) [default: json].
    #[arg(long)]
    pub audit_log_format: Option<String>,
    /// How audit events are written: `blocking`, `blocking-strict` or `batch`
    /// [default: blocking].
    #[arg(long)]
    pub audit_log_mode: Option<String>,
    /// Audit events queued at most (every mode); in `batch` mode a full queue drops events
    /// [default: 10000].
    #[arg(long)]
    pub audit_log_batch_buffer_size: Option<usize>,
    /// Largest request or response body logged as an audit event's object (at least 1024);
    /// a larger one is left out and the event annotated `audit.k8s.io/truncated`
    /// [default: 10485760].
    #[arg(long)]
    pub audit_log_max_object_bytes: Option<usize>,
    /// Gzip rotated audit log files (`NAME-<time>.EXT.gz`, as lumberjack) [default: false].
    #[arg(long)]
    pub audit_log_compress: Option<bool>,
    /// Most audit events written to the log at once, one flush (at least 1; `batch` mode)
    /// [default: 1].
    #[arg(long)]
    pub audit_log_batch_max_size: Option<usize>,
    /// Longest a batch of audit log events waits for more after its first, a Go duration
    /// (`batch` mode) [default: 0s].
    #[arg(long)]
    pub audit_log_batch_max_wait: Option<String>,
    /// Throttle the audit log's batches (`batch` mode) [default: false].
    #[arg(long)]
    pub audit_log_batch_throttle_enable: Option<bool>,
    /// Batches a second the audit log writes at most, when throttled (positive) [default: 0].
    #[arg(long)]
    pub audit_log_batch_throttle_qps: Option<f64>,
    /// Batches the audit log writes at once after a pause, when throttled (positive)
    /// [default: 0].
    #[arg(long)]
    pub audit_log_batch_throttle_burst: Option<usize>,
    /// A kubeconfig naming the audit webhook (server URL, CA, client certificate and key or
    /// token): events are POSTed to it as `audit.k8s.io/v1` `EventList`s (with
    /// `--audit-policy-file`) [default: none].
    #[arg(long)]
    pub audit_webhook_config_file: Option<PathBuf>,
    /// How audit events reach the webhook: `batch`, `blocking` or `blocking-strict`
    /// [default: batch].
    #[arg(long)]
    pub audit_webhook_mode: Option<String>,
    /// Audit events queued for the webhook at most (at least 1); in `batch` mode a full queue
    /// drops events [default: 10000].
    #[arg(long)]
    pub audit_webhook_batch_buffer_size: Option<usize>,
    /// Most audit events in one webhook POST (at least 1; `batch` mode) [default: 400].
    #[arg(long)]
    pub audit_webhook_batch_max_size: Option<usize>,
    /// Longest a webhook batch waits for more events after its first, a Go duration
    /// (positive; `batch` mode) [default: 30s].
    #[arg(long)]
    pub audit_webhook_batch_max_wait: Option<String>,
    /// Wait before the first retry of a failed webhook POST, a Go duration (positive; then
    /// 1.5 times longer each retry, 5 attempts) [default: 10s].
    #[arg(long)]
    pub audit_webhook_initial_backoff: Option<String>,
    /// Throttle the audit webhook's batches (`batch` mode) [default: true].
    #[arg(long)]
    pub audit_webhook_batch_throttle_enable: Option<bool>,
    /// Batches a second sent to the audit webhook at most, when throttled (positive)
    /// [default: 10].
    #[arg(long)]
    pub audit_webhook_batch_throttle_qps: Option<f64>,
    /// Batches sent to the audit webhook at once after a pause, when throttled (positive)
    /// [default: 15].
    #[arg(long)]
    pub audit_webhook_batch_throttle_burst: Option<usize>,
    /// Caching-proxy mode: the URL of an upstream Kubernetes API server (or watchkeeper) to
    /// cache instead of a store; overrides the server of `--upstream-kubeconfig`.
    #[arg(long)]
    pub upstream: Option<String>,
    /// Credentials of the upstream (server, certificate authority, client certificate, bearer
    /// token of the current context, as kubectl reads them); enables caching-proxy mode.
    #[arg(long)]
    pub upstream_kubeconfig: Option<PathBuf>,
    /// Resources to cache from the upstream, comma-separated `plural` or `plural.group`
    /// [default: every resource the upstream's discovery lists with the list and watch verbs].
    #[arg(long, value_delimiter = ',')]
    pub upstream_resources: Option<Vec<String>>,
    /// Forward writes with `Impersonate-User`/`Impersonate-Group` headers of the authenticated
    /// caller (the upstream must allow the proxy's identity to impersonate) [default: false].
    #[arg(long)]
    pub upstream_impersonate: Option<bool>,
    /// Load the caches with streaming lists (`sendInitialEvents`) when the upstream is
    /// Kubernetes 1.27 or newer, falling back to paged lists if it refuses [default: true];
    /// false always uses paged lists.
    #[arg(long)]
    pub upstream_streaming_lists: Option<bool>,
    /// Objects per page when listing the upstream with paged lists [default: 500].
    #[arg(long)]
    pub upstream_list_page_size: Option<usize>,
    /// `timeoutSeconds` of each upstream watch; the upstream ends it then and the proxy resumes
    /// from the last version [default: 290].
    #[arg(long)]
    pub upstream_watch_timeout_seconds: Option<u64>,
    /// PEM certificate chain to serve TLS with (with --tls-private-key-file); see `tls`.
    #[arg(long)]
    pub tls_cert_file: Option<PathBuf>,
    /// PEM private key of --tls-cert-file.
    #[arg(long)]
    pub tls_private_key_file: Option<PathBuf>,
    /// PEM CA bundle for client certificates (user = CN, groups = O); needs TLS.
    #[arg(long)]
    pub client_ca_file: Option<PathBuf>,
    /// kube-apiserver's `--requestheader-client-ca-file`: PEM CA certificates of an
    /// authenticating front proxy; a client certificate they verify (with a CN of
    /// `--requestheader-allowed-names`) makes the request's identity that of its
    /// `--requestheader-*-headers` (TLS only) [default: none].
    #[arg(long)]
    pub requestheader_client_ca_file: Option<PathBuf>,
    /// kube-apiserver's `--requestheader-allowed-names`, comma-separated: the front proxy
    /// certificates' common names accepted [default: any the CA verifies].
    #[arg(long, value_delimiter = ',')]
    pub requestheader_allowed_names: Option<Vec<String>>,
    /// kube-apiserver's `--requestheader-username-headers`, comma-separated: the headers
    /// naming the user, the first with a value wins (usually X-Remote-User) [default: none].
    #[arg(long, value_delimiter = ',')]
    pub requestheader_username_headers: Option<Vec<String>>,
    /// kube-apiserver's `--requestheader-uid-headers`, comma-separated: the headers naming
    /// the user's UID, the first with a value wins (usually X-Remote-Uid) [default: none].
    #[arg(long, value_delimiter = ',')]
    pub requestheader_uid_headers: Option<Vec<String>>,
    /// kube-apiserver's `--requestheader-group-headers`, comma-separated: every value of
    /// these headers is a group (usually X-Remote-Group) [default: none].
    #[arg(long, value_delimiter = ',')]
    pub requestheader_group_headers: Option<Vec<String>>,
    /// kube-apiserver's `--requestheader-extra-headers-prefix`, comma-separated: headers with
    /// these prefixes carry the user's extra, the rest of the name its (percent-decoded,
    /// lowercase) key (usually X-Remote-Extra-) [default: none].
    #[arg(long, value_delimiter = ',')]
    pub requestheader_extra_headers_prefix: Option<Vec<String>>,
    /// PEM CA bundle published in every namespace's `kube-root-ca.crt` ConfigMap (as
    /// kube-controller-manager's flag) [default: the certificates of --tls-cert-file after its
    /// leaf, or the leaf when it is alone; empty without TLS].
    #[arg(long)]
    pub root_ca_file: Option<PathBuf>,
    /// Serve plain HTTP on a non-loopback address (refused otherwise) [default: false].
    #[arg(long, num_args = 0..=1, default_missing_value = "true")]
    pub insecure_allow_plain_http_on_non_loopback: Option<bool>,
    /// TLS handshake timeout in seconds [default: 10].
    #[arg(long)]
    pub tls_handshake_timeout_seconds: Option<u64>,
    /// Largest request body in bytes [default: 3145728]; larger gets 413.
    #[arg(long)]
    pub max_request_body_bytes: Option<usize>,
    /// Largest request line plus headers in bytes [default: 1048576]; larger gets 431.
    #[arg(long)]
    pub max_header_bytes: Option<usize>,
    /// Seconds for a request's body to arrive [default: 60]; a slower body gets 408.
    #[arg(long)]
    pub request_read_timeout_seconds: Option<u64>,
    /// The deadline of every request that is not long-running (watch, pods' log, exec,
    /// attach, portforward, proxy), from its arrival to its answer's last byte, as a Go
    /// duration (`60s`, `1m0s`, `500ms`) [default: 60s]: not answered by then, 504 Timeout;
    /// answer begun, its HTTP/2 stream is reset or its HTTP/1.1 connection closed.
    #[arg(long)]
    pub request_timeout: Option<String>,
    /// Milliseconds for a request's line and headers to arrive, from accept or from the
    /// request's first byte; the connection is closed otherwise [default: 32000].
    #[arg(long)]
    pub request_header_timeout_ms: Option<u64>,
    /// Milliseconds a connection with nothing in flight stays open (HTTP/1.1 between requests,
    /// HTTP/2 without streams) [default: 90000].
    #[arg(long)]
    pub idle_timeout_ms: Option<u64>,
    /// Milliseconds between HTTP/2 keep-alive pings, 0 = none [default: 30000].
    #[arg(long)]
    pub http2_keepalive_interval_ms: Option<u64>,
    /// Milliseconds to wait for a ping's acknowledgement before closing the HTTP/2 connection
    /// [default: 20000].
    #[arg(long)]
    pub http2_keepalive_timeout_ms: Option<u64>,
    /// Milliseconds a response write may make no progress (the client reads nothing) before the
    /// connection is closed [default: 60000].
    #[arg(long)]
    pub write_timeout_ms: Option<u64>,
    /// Response bytes buffered per HTTP/2 stream beyond the client's flow-control window
    /// [default: 409600].
    #[arg(long)]
    pub http2_max_send_buffer_bytes: Option<usize>,
    /// Request body bytes a client may send on one HTTP/2 stream before the server reads them
    /// (the stream's initial flow-control window) [default: 1048576].
    #[arg(long)]
    pub http2_initial_stream_window_bytes: Option<u32>,
    /// Request body bytes a client may send on one HTTP/2 connection before the server reads
    /// them (the connection's flow-control window) [default: 1048576].
    #[arg(long)]
    pub http2_initial_connection_window_bytes: Option<u32>,
    /// The kernel send buffer of every connection (SO_SNDBUF), bytes; 0 = the kernel's default
    /// and its autotuning (up to net.ipv4.tcp_wmem's maximum per connection) [default: 0].
    #[arg(long)]
    pub socket_send_buffer_bytes: Option<usize>,
    /// Non-mutating non-watch requests in flight, 0 = unlimited [default: 400]; more get 429.
    #[arg(long)]
    pub max_requests_inflight: Option<usize>,
    /// Mutating requests in flight, 0 = unlimited [default: 200]; more get 429.
    #[arg(long)]
    pub max_mutating_requests_inflight: Option<usize>,
    /// A request whose body has at least this many bytes is handled on the blocking pool,
    /// not a runtime worker; 0 = never, else at least 1024 [default: 65536].
    #[arg(long)]
    pub heavy_request_body_bytes: Option<usize>,
    /// Heavy requests (`--heavy-request-body-bytes`) handled at once, 1 to 512 [default:
    /// auto]: one per CPU; more wait for a slot within their deadline.
    #[arg(long)]
    pub max_heavy_requests: Option<usize>,
    /// After heavy requests, the memory they freed is given back to the system (glibc's
    /// malloc_trim, on a blocking thread) at most once per this many milliseconds; 0 = never,
    /// at most 3600000 [default: 1000].
    #[arg(long)]
    pub memory_release_interval_ms: Option<u64>,
    /// Causes a 422 Invalid answer carries at most, 1 to 1000000 [default: 1000]: the first
    /// ones, the message ending with how many more were found (kube-apiserver answers every
    /// one).
    #[arg(long)]
    pub max_invalid_causes: Option<usize>,
    /// Requests in flight (mutating or not, not watches) of one user — anonymous ones: of
    /// one client address — 0 = unlimited [default: 100]; more get 429.
    #[arg(long)]
    pub max_requests_inflight_per_user: Option<usize>,
    /// API Priority and Fairness [default: true]: requests are classified by the
    /// FlowSchemas and wait for a seat of their priority level, which share
    /// `--max-requests-inflight` + `--max-mutating-requests-inflight` seats (these two then
    /// are not separate pools).
    #[arg(long)]
    pub enable_priority_and_fairness: Option<bool>,
    /// How often API Priority and Fairness recomputes each priority level's current limit
    /// from its seat demand (borrowing; kube's fixed 10 s), milliseconds, 1 to 3600000
    /// [default: 10000].
    #[arg(long)]
    pub apf_borrowing_period_ms: Option<u64>,
    /// Open watches on the server, 0 = unlimited [default: 10000]; more get 429.
    #[arg(long)]
    pub max_watches: Option<usize>,
    /// Open watches per user, 0 = unlimited [default: 1000]; more get 429.
    #[arg(long)]
    pub max_watches_per_user: Option<usize>,
    /// Open watches per connection (HTTP/2), 0 = unlimited [default: 250]; more get 429.
    #[arg(long)]
    pub max_watches_per_connection: Option<usize>,
    /// Bytes of the query strings (selectors) of the server's open watches added up (64 MiB
    /// by default), 0 = unlimited, else at least 65536 [default: 67108864]; a watch past it
    /// gets 429.
    #[arg(long)]
    pub max_watch_query_bytes: Option<usize>,
    /// Bytes of the query strings (selectors) of one user's open watches added up (4 MiB by
    /// default), 0 = unlimited, else at least 65536 [default: 4194304]; a watch past it gets
    /// 429.
    #[arg(long)]
    pub max_watch_query_bytes_per_user: Option<usize>,
    /// Open connections, 0 = unlimited; at the bound a new connection takes the place of one
    /// with nothing in flight (the longest waiting), else it is closed unread. Unset: the
    /// process's descriptor limit less a tenth of it (32 to 1024 kept for the server's own
    /// files and store connections) [default: auto].
    #[arg(long)]
    pub max_connections: Option<usize>,
    /// Host names (without port) a plain-HTTP loopback listener answers besides localhost,
    /// 127.0.0.0/8 and [::1], comma-separated [default: none]; other Host headers get 403.
    #[arg(long, value_delimiter = ',')]
    pub allowed_hosts: Option<Vec<String>>,
    /// Seconds after a watch's deadline before a connection whose watch response is still
    /// unfinished (its client does not read) is closed [default: 5].
    #[arg(long)]
    pub watch_release_grace_seconds: Option<u64>,
    /// Worker threads of the async runtime that serves connections (HTTP, TLS, watch
    /// responses, the reflector), 0 = one per CPU, at most 1024 [default: 0]. The caches'
    /// dispatcher and catch-up threads are not among them. Fewer workers than CPUs leave
    /// those threads a core and save the workers' hand-offs between CPUs; one worker also
    /// serves every connection in turn, so one long request delays the others (see
    /// docs/ARCHITECTURE.md, "Runtime workers").
    #[arg(long)]
    pub runtime_workers: Option<usize>,
    /// Watch events encoded per body chunk at most [default: 64].
    #[arg(long)]
    pub watch_chunk_items: Option<usize>,
    /// Bytes of small LIST items copied into one piece of a streamed LIST body (larger items
    /// are sent as their shared cached encoding) [default: 65536].
    #[arg(long)]
    pub list_chunk_bytes: Option<usize>,
    /// Responses (not watches) larger than this many bytes are gzip-compressed when the
    /// request's Accept-Encoding lists gzip, as kube-apiserver does; 0 = never compress
    /// [default: 131072].
    #[arg(long)]
    pub gzip_min_response_bytes: Option<usize>,
    /// Objects per page of the reflector's store list [default: 1000].
    #[arg(long)]
    pub reflector_list_page_size: Option<usize>,
    /// The reflector's first retry back-off in milliseconds (doubling, with jitter) [default: 100].
    #[arg(long)]
    pub reflector_backoff_initial_ms: Option<u64>,
    /// The reflector's longest retry back-off in milliseconds [default: 5000].
    #[arg(long)]
    pub reflector_backoff_max_ms: Option<u64>,
    /// Longest wait of a cache's dispatcher thread for input while the cache has watchers, in
    /// milliseconds [default: 1000]; also the longest a store revision with nothing for the
    /// resource then waits to reach its resource version and bookmarks when no reader or watch
    /// waits for it (a cache without watchers waits for its next input).
    #[arg(long)]
    pub driver_dispatcher_idle_ms: Option<u64>,
    /// Longest park of a cache's catch-up worker thread while it owns unsynced watchers, in
    /// milliseconds (an idle worker parks until it is handed work) [default: 100].
    #[arg(long)]
    pub driver_worker_idle_ms: Option<u64>,
    /// A revision is dispatched on the reflector's own task (and a registration, cancel or
    /// hand-back on the thread that sends it), without waking the cache's dispatcher thread,
    /// while the cache has at most this many watchers (and nothing is queued for the
    /// thread); 0 always wakes the thread; at most 1000000 [default: 256].
    #[arg(long)]
    pub driver_inline_watchers_max: Option<usize>,
    /// Period of the cache consistency check (each resource's cache against the store at the
    /// same revision), in milliseconds; 0 disables it; 100 to 86400000 otherwise [default:
    /// 300000].
    #[arg(long)]
    pub consistency_check_interval_ms: Option<u64>,
    /// Period of the store's compaction rounds, in milliseconds, as kube-apiserver's
    /// --etcd-compaction-interval: each round compacts the store to the revision it had one
    /// round before (servers sharing a store take one round per period between them); 0
    /// disables it; 100 to 86400000 otherwise [default: 300000].
    #[arg(long)]
    pub compaction_interval_ms: Option<u64>,
    /// Milliseconds connections get after SIGTERM or SIGINT to finish (requests in flight
    /// complete, watch streams end after a final bookmark) before they are dropped and the
    /// process exits; 1 to 600000 [default: 5000].
    #[arg(long)]
    pub shutdown_grace_period_ms: Option<u64>,
    /// On start, rebuild each cache's history from the revisions the store still holds (at
    /// most --history-capacity-max revisions back, never below its compaction), so a client
    /// resumes with the last resource version it saw; false starts every history at the
    /// current revision, as kube-apiserver does [default: true].
    #[arg(long)]
    pub rebuild_history: Option<bool>,
    /// kube-apiserver's `--service-cluster-ip-range`: the CIDR Services' ClusterIPs are
    /// allocated from, or two comma-separated ones of different IP families (dual-stack, the
    /// first primary); the `default/kubernetes` Service created at start gets the first
    /// address of the (primary) CIDR [default: 10.0.0.0/24].
    #[arg(long)]
    pub service_cluster_ip_range: Option<String>,
    /// kube-apiserver's `--service-node-port-range`: the ports a NodePort or LoadBalancer
    /// Service's node ports are allocated from, `FIRST-LAST` [default: 30000-32767].
    #[arg(long)]
    pub service_node_port_range: Option<String>,
    /// PEM private key (RSA, or ECDSA P-256; PKCS#1 or PKCS#8) that signs service account
    /// tokens, as kube-apiserver's flag [default: none: a P-256 key generated at start, so
    /// tokens do not survive a restart and are not shared between instances].
    #[arg(long)]
    pub service_account_signing_key_file: Option<PathBuf>,
    /// The `iss` claim of the service account tokens this server issues and accepts; given
    /// more than once, the first issues and all are accepted (to change an issuer without
    /// refusing the old one's tokens) [default: https://kubernetes.default.svc.cluster.local].
    #[arg(long)]
    pub service_account_issuer: Option<Vec<String>>,
    /// PEM file of further keys that verify service account tokens (public keys, RSA public
    /// keys, certificates or private keys; RSA, ECDSA P-256 or P-384), repeatable; the
    /// signing key always verifies too [default: none].
    #[arg(long)]
    pub service_account_key_file: Option<Vec<PathBuf>>,
    /// The `jwks_uri` of the OIDC discovery document (`/.well-known/openid-configuration`),
    /// an https URL [default: https://<advertised address>/openid/v1/jwks].
    #[arg(long)]
    pub service_account_jwks_uri: Option<String>,
    /// Audiences of the API, comma-separated: a token request without audiences gets these,
    /// and a bearer service account token must name one [default: the issuer].
    #[arg(long, value_delimiter = ',')]
    pub api_audiences: Option<Vec<String>>,
    /// Longest lifetime of a requested service account token in seconds, 0 = no cap beyond
    /// kube-apiserver's 2^32; otherwise 600 to 4294967296 [default: 0].
    #[arg(long)]
    pub service_account_max_token_expiration_seconds: Option<u64>,
    /// Calls to admission webhooks in flight at once, over all requests; a call waits for a
    /// slot within its own `timeoutSeconds` (1 to 10000; store modes) [default: 64].
    #[arg(long)]
    pub webhook_calls_max: Option<usize>,
    /// Requests through the `pods/proxy`, `services/proxy` and `nodes/proxy` subresources in
    /// flight at once, over all clients; one past it gets 429 (1 to 10000) [default: 64].
    #[arg(long)]
    pub proxy_requests_max: Option<usize>,
    /// Milliseconds a proxied request (`pods/proxy`, `services/proxy`, `nodes/proxy`) may take
    /// to connect to its backend (kube's dial timeout), 100 to 600000 [default: 30000].
    #[arg(long)]
    pub proxy_connect_timeout_ms: Option<u64>,
}

impl ServeArgs {
    /// `self` with unset fields taken from `file`.
    #[must_use]
    pub fn or(self, file: ServeArgs) -> ServeArgs {
        macro_rules! pick {
            ($($field:ident),*) => { ServeArgs { $($field: self.$field.or(file.$field),)* config: self.config } };
        }
        pick!(
            listen,
            data_dir,
            store,
            etcd_endpoints,
            etcd_prefix,
            etcd_cafile,
            etcd_certfile,
            etcd_keyfile,
            resources,
            watch_mode,
            consistent_get_from_cache,
            enable_garbage_collector,
            enable_root_ca_cert_publisher,
            enable_pod_gc,
            terminated_pod_gc_threshold,
            pod_gc_period_ms,
            pod_gc_quarantine_ms,
            pod_gc_deletes_per_pass_max,
            resource_quota_sync_period,
            disable_admission_plugins,
            enable_admission_plugins,
            admission_control,
            admission_control_config_file,
            encryption_provider_config,
            encryption_provider_config_automatic_reload,
            encryption_provider_config_reload_interval_ms,
            event_fresh_seconds,
            history_capacity_max,
            history_bytes_max,
            queue_capacity_max,
            queue_capacity_min,
            pass_members_max,
            pass_scan_units_max,
            pass_pushes_max,
            initial_no_progress_seconds,
            min_request_timeout_seconds,
            fresh_wait_ms,
            fresh_nudge_ms,
            durable_commits,
            store_quota_bytes,
            cache_memory_bytes,
            max_custom_resource_versions,
            token_auth_file,
            authorization_policy_file,
            authorization_mode,
            authorization_webhook_config_file,
            authorization_webhook_version,
            authorization_webhook_cache_authorized_ttl,
            authorization_webhook_cache_unauthorized_ttl,
            authorization_webhook_cache_entries,
            authorization_webhook_calls_max,
            audit_policy_file,
            audit_log_path,
            audit_log_maxage,
            audit_log_maxbackup,
            audit_log_maxsize,
            audit_log_format,
            audit_log_mode,
            audit_log_batch_buffer_size,
            audit_log_max_object_bytes,
            audit_log_compress,
            audit_log_batch_max_size,
            audit_log_batch_max_wait,
            audit_log_batch_throttle_enable,
            audit_log_batch_throttle_qps,
            audit_log_batch_throttle_burst,
            audit_webhook_config_file,
            audit_webhook_mode,
            audit_webhook_batch_buffer_size,
            audit_webhook_batch_max_size,
            audit_webhook_batch_max_wait,
            audit_webhook_initial_backoff,
            audit_webhook_batch_throttle_enable,
            audit_webhook_batch_throttle_qps,
            audit_webhook_batch_throttle_burst,
            upstream,
            upstream_kubeconfig,
            upstream_resources,
            upstream_impersonate,
            upstream_streaming_lists,
            upstream_list_page_size,
            upstream_watch_timeout_seconds,
            tls_cert_file,
            tls_private_key_file,
            client_ca_file,
            requestheader_client_ca_file,
            requestheader_allowed_names,
            requestheader_username_headers,
            requestheader_uid_headers,
            requestheader_group_headers,
            requestheader_extra_headers_prefix,
            root_ca_file,
            insecure_allow_plain_http_on_non_loopback,
            tls_handshake_timeout_seconds,
            max_request_body_bytes,
            max_header_bytes,
            request_read_timeout_seconds,
            request_timeout,
            request_header_timeout_ms,
            idle_timeout_ms,
            http2_keepalive_interval_ms,
            http2_keepalive_timeout_ms,
            write_timeout_ms,
            http2_max_send_buffer_bytes,
            http2_initial_stream_window_bytes,
            http2_initial_connection_window_bytes,
            socket_send_buffer_bytes,
            max_requests_inflight,
            max_mutating_requests_inflight,
            heavy_request_body_bytes,
            max_heavy_requests,
            memory_release_interval_ms,
            max_invalid_causes,
            max_requests_inflight_per_user,
            enable_priority_and_fairness,
            apf_borrowing_period_ms,
            max_watches,
            max_watches_per_user,
            max_watches_per_connection,
            max_watch_query_bytes,
            max_watch_query_bytes_per_user,
            max_connections,
            watch_release_grace_seconds,
            allowed_hosts,
            runtime_workers,
            watch_chunk_items,
            list_chunk_bytes,
            gzip_min_response_bytes,
            reflector_list_page_size,
            reflector_backoff_initial_ms,
            reflector_backoff_max_ms,
            driver_dispatcher_idle_ms,
            driver_worker_idle_ms,
            driver_inline_watchers_max,
            consistency_check_interval_ms,
            compaction_interval_ms,
            shutdown_grace_period_ms,
            rebuild_history,
            service_cluster_ip_range,
            service_node_port_range,
            service_account_signing_key_file,
            service_account_issuer,
            service_account_key_file,
            service_account_jwks_uri,
            api_audiences,
            service_account_max_token_expiration_seconds,
            webhook_calls_max,
            proxy_requests_max,
            proxy_connect_timeout_ms,
            authentication_config,
            oidc_issuer_url,
            oidc_client_id,
            oidc_username_claim,
            oidc_username_prefix,
            oidc_groups_claim,
            oidc_groups_prefix,
            oidc_required_claim,
            oidc_ca_file,
            oidc_signing_algs,
            jwt_token_bytes_max,
            jwt_keys_refresh_interval_ms,
            jwt_issuer_timeout_ms,
            jwt_issuer_response_bytes_max,
            authentication_token_webhook_config_file,
            authentication_token_webhook_version,
            authentication_token_webhook_cache_ttl,
            authentication_token_webhook_cache_entries,
            authentication_token_webhook_calls_max
        )
    }
}

/// The validated configuration of a server.
#[derive(Clone, Debug)]
pub struct ServeConfig {
    /// Listen address.
    pub listen: SocketAddr,
    /// Which store.
    pub store: StoreKind,
    /// Embedded store directory.
    pub data_dir: PathBuf,
    /// etcd endpoints.
    pub etcd_endpoints: Vec<String>,
    /// `--etcd-cafile`, `--etcd-certfile`, `--etcd-keyfile`: TLS to etcd, the files' PEM
    /// text (read and checked at start); `None` without them.
    pub etcd_tls: Option<watchkeeper_store::EtcdTls>,
    /// Key prefix, without a trailing slash (e.g. `/registry`).
    pub prefix: String,
    /// Extra resources file.
    pub resources: Option<PathBuf>,
    /// Every cache's tunables (the trigger field is set per resource).
    pub cache: CacheConfig,
    /// Consistent GETs from the cache (true) or the store (false).
    pub consistent_get_from_cache: bool,
    /// `--enable-garbage-collector`: GC finalizers on DELETE and the garbage collector.
    pub enable_garbage_collector: bool,
    /// `--enable-root-ca-cert-publisher`: every namespace's `kube-root-ca.crt`.
    pub enable_root_ca_cert_publisher: bool,
    /// The pod garbage collector's flags (`--enable-pod-gc` and the others).
    pub pod_gc: PodGcConfig,
    /// `--resource-quota-sync-period`: how often every quota's usage is recalculated.
    pub resource_quota_sync_period: Duration,
    /// `--disable-admission-plugins`: which admission plugins run.
    pub admission: crate::source::pod_admission::AdmissionPlugins,
    /// `--admission-control-config-file`: the admission plugins' configuration.
    pub admission_config: AdmissionConfig,
    /// `--encryption-provider-config`: how stored values are encrypted; `None` stores them
    /// as they are.
    pub encryption: Option<std::sync::Arc<crate::source::encryption::Encryption>>,
    /// `--encryption-provider-config-automatic-reload`: the file `encryption` is reloaded from
    /// and how often it is read (`--encryption-provider-config-reload-interval-ms`); `None`
    /// when it is read once.
    pub encryption_reload: Option<(
        std::sync::Arc<crate::source::encryption_reload::Reloading>,
        Duration,
    )>,
    /// Watch deadline base (`--min-request-timeout`).
    pub min_request_timeout: Duration,
    /// Freshness wait bound for consistent reads.
    pub fresh_wait: Duration,
    /// `--fresh-nudge-ms`: over etcd, how long a freshness wait lasts before it nudges the
    /// store's watch (`source::nudge`); zero = never.
    pub fresh_nudge: Duration,
    /// `--runtime-workers`: the async runtime's worker threads, 0 = one per CPU.
    pub runtime_workers: usize,
    /// `--watch-chunk-items`: watch events encoded per body chunk at most.
    pub watch_chunk_items: usize,
    /// `--list-chunk-bytes`: bytes of small items copied into one piece of a LIST body.
    pub list_chunk_bytes: usize,
    /// `--gzip-min-response-bytes`: responses larger than this are gzipped when asked
    /// (`None`: never).
    pub gzip_min_response_bytes: Option<usize>,
    /// The reflector's tunables.
    pub reflector: ReflectorConfig,
    /// The cache threads' waits (`--driver-*-ms`).
    pub driver: crate::cache::DriverWaits,
    /// fsync every embedded commit.
    pub durable_commits: bool,
    /// `--store-quota-bytes`: the memory and embedded stores' quota (see
    /// `watchkeeper_store::quota`); 0 = none.
    pub store_quota_bytes: u64,
    /// `--cache-memory-bytes`: the bound on the caches' live objects' weight (see
    /// `crate::source::store`'s cache memory); 0 = none.
    pub cache_memory_bytes: u64,
    /// `--max-custom-resource-versions`: the most custom resource versions served for
    /// CustomResourceDefinitions (see [`crate::source::catalog`]).
    pub custom_resource_versions_max: usize,
    /// `--token-auth-file`.
    pub token_auth_file: Option<PathBuf>,
    /// `--authorization-policy-file`.
    pub authorization_policy_file: Option<PathBuf>,
    /// `--authorization-mode`: the authorization chain (see [`crate::auth`]).
    pub authorization_modes: Vec<authz::AuthorizationMode>,
    /// The `Webhook` mode's configuration (`--authorization-webhook-*`; see [`authz`]).
    pub authorization_webhook: Option<authz::AuthzWebhookConfig>,
    /// The audit log (`--audit-policy-file`, `--audit-log-*`; see [`crate::audit`]).
    pub audit: AuditConfig,
    /// Caching-proxy mode (`--upstream`, `--upstream-kubeconfig`); `None` in the store modes.
    pub upstream: Option<UpstreamConfig>,
    /// TLS and client certificates (see [`TlsConfig`]).
    pub tls: TlsConfig,
    /// Request limits (see [`LimitsConfig`]).
    pub limits: LimitsConfig,
    /// `--consistency-check-interval-ms`: the period of the cache consistency check; `None`
    /// when disabled.
    pub consistency_check_interval: Option<Duration>,
    /// `--compaction-interval-ms`: the period of the store's compaction rounds
    /// ([`crate::source::compaction`]); `None` when disabled.
    pub compaction_interval: Option<Duration>,
    /// `--shutdown-grace-period-ms`: how long connections get to finish once shutdown begins.
    pub shutdown_grace: Duration,
    /// `--rebuild-history`: rebuild the caches' history from the store on start.
    pub rebuild_history: bool,
    /// `--service-cluster-ip-range`: one range, or one of each IP family (the primary first);
    /// the ClusterIP of the `default/kubernetes` Service is the primary's first address.
    pub service_cluster_ip_ranges: Vec<IpRange>,
    /// `--service-node-port-range`: the first and last node port allocated to Services.
    pub service_node_port_range: (u16, u16),
    /// Service account tokens (`--service-account-*`, `--api-audiences`).
    pub service_accounts: ServiceAccountConfig,
    /// JWT (OIDC) authenticators (`--authentication-config`, `--oidc-*`, `--jwt-*`).
    pub jwt: JwtConfig,
    /// The token webhook (`--authentication-token-webhook-*`), if configured.
    pub token_webhook: Option<authn::TokenWebhookConfig>,
    /// `--webhook-calls-max`: admission webhook calls in flight at once (see
    /// `crate::source::webhook::client`).
    pub webhook_calls_max: usize,
    /// `--proxy-requests-max`: proxied requests (`pods/proxy`, `services/proxy`,
    /// `nodes/proxy`) in flight at once (see `crate::http::resource_proxy`).
    pub proxy_requests_max: usize,
    /// `--proxy-connect-timeout-ms`: how long a proxied request may take to connect.
    pub proxy_connect_timeout: Duration,
}

/// How service account tokens are issued and accepted (see `auth::serviceaccount`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServiceAccountConfig {
    /// `--service-account-signing-key-file`; `None`: a key generated at start.
    pub signing_key_file: Option<PathBuf>,
    /// `--service-account-issuer`, in order (never empty: the first issues).
    pub issuers: Vec<String>,
    /// `--service-account-key-file`.
    pub key_files: Vec<PathBuf>,
    /// `--service-account-jwks-uri`.
    pub jwks_uri: Option<String>,
    /// `--api-audiences` (the issuer when not given).
    pub api_audiences: Vec<String>,
    /// `--service-account-max-token-expiration-seconds`; `None`: no cap.
    pub max_token_expiration_seconds: Option<u64>,
}

impl ServiceAccountConfig {
    fn from_args(args: &ServeArgs) -> Result<ServiceAccountConfig, ConfigError> {
        let issuers = args
            .service_account_issuer
            .clone()
            .filter(|list| !list.is_empty())
            .unwrap_or_else(|| vec![defaults::SERVICE_ACCOUNT_ISSUER.to_owned()]);
        for issuer in &issuers {
            if issuer.is_empty() || issuer.chars().any(char::is_whitespace) {
                return Err(ConfigError::flag(
                    "--service-account-issuer",
                    format!(
                        "--service-account-issuer {issuer:?}: must be a non-empty identifier without spaces (a URL, as kube-apiserver's)"
                    ),
                ));
            }
        }
        let issuer = issuers[0].clone();
        if let Some(uri) = &args.service_account_jwks_uri {
            let https = uri
                .parse::<axum::http::Uri>()
                .ok()
                .is_some_and(|u| u.scheme_str() == Some("https") && u.host().is_some());
            if !https {
                return Err(ConfigError::flag(
                    "--service-account-jwks-uri",
                    format!("--service-account-jwks-uri {uri:?}: requires an https URL"),
                ));
            }
        }
        let api_audiences = match &args.api_audiences {
            None => vec![issuer.clone()],
            Some(list) => {
                let list: Vec<String> = list.iter().map(|a| a.trim().to_owned()).collect();
                if list.is_empty() || list.iter().any(String::is_empty) {
                    return Err(ConfigError::flag(
                        "--api-audiences",
                        "--api-audiences: every audience must be non-empty".to_owned(),
                    ));
                }
                list
            }
        };
        let max = args
            .service_account_max_token_expiration_seconds
            .unwrap_or(defaults::SERVICE_ACCOUNT_MAX_TOKEN_EXPIRATION_SECONDS);
        if max != 0 && !(600..=1 << 32).contains(&max) {
            return Err(ConfigError::flag(
                "--service-account-max-token-expiration-seconds",
                format!(
                    "--service-account-max-token-expiration-seconds {max}: must be 0 (no cap) or between 600 and 4294967296 seconds"
                ),
            ));
        }
        Ok(ServiceAccountConfig {
            signing_key_file: args.service_account_signing_key_file.clone(),
            issuers,
            key_files: args.service_account_key_file.clone().unwrap_or_default(),
            jwks_uri: args.service_account_jwks_uri.clone(),
            api_audiences,
            max_token_expiration_seconds: (max != 0).then_some(max),
        })
    }
}

/// The memory this process may use, in bytes: its cgroup's (v2) `memory.max` when it sets
/// one, else the machine's `MemTotal`; `None` when neither can be read.
#[must_use]
pub fn usable_memory() -> Option<u64> {
    let machine = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| parse_mem_total(&text));
    let cgroup = std::fs::read_to_string("/sys/fs/cgroup/memory.max")
        .ok()
        .and_then(|text| text.trim().parse::<u64>().ok());
    match (cgroup, machine) {
        (Some(limit), Some(total)) => Some(limit.min(total)),
        (limit, total) => limit.or(total),
    }
}

/// `MemTotal` of a `/proc/meminfo` text, in bytes.
fn parse_mem_total(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|line| line.starts_with("MemTotal:"))?;
    let kib = line
        .trim_start_matches("MemTotal:")
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse::<u64>()
        .ok()?;
    kib.checked_mul(1024)
}

/// Defaults written once: the flags' `[default: ...]` texts and the README's tables say the same
/// (checked by the config tests).
pub mod defaults {
    /// The largest `--runtime-workers`.
    pub const RUNTIME_WORKERS_MAX: usize = 1024;
    /// `--watch-chunk-items`.
    pub const WATCH_CHUNK_ITEMS: usize = 64;
    /// `--list-chunk-bytes`.
    pub const LIST_CHUNK_BYTES: usize = 64 * 1024;
    /// `--gzip-min-response-bytes` (kube-apiserver's `defaultGzipThresholdBytes`).
    pub const GZIP_MIN_RESPONSE_BYTES: usize = 128 * 1024;
    /// `--reflector-list-page-size`.
    pub const REFLECTOR_LIST_PAGE_SIZE: usize = 1000;
    /// `--reflector-backoff-initial-ms`.
    pub const REFLECTOR_BACKOFF_INITIAL_MS: u64 = 100;
    /// `--reflector-backoff-max-ms`.
    pub const REFLECTOR_BACKOFF_MAX_MS: u64 = 5000;
    /// `--driver-dispatcher-idle-ms`.
    pub const DRIVER_DISPATCHER_IDLE_MS: u64 = 1000;
    /// `--driver-worker-idle-ms`.
    pub const DRIVER_WORKER_IDLE_MS: u64 = 100;
    /// `--driver-inline-watchers-max`.
    pub const DRIVER_INLINE_WATCHERS_MAX: usize = crate::cache::INLINE_WATCHERS_MAX;
    /// The largest `--driver-inline-watchers-max`.
    pub const DRIVER_INLINE_WATCHERS_MAX_MAX: usize = 1_000_000;
    /// `--consistency-check-interval-ms` (5 minutes, as kube-apiserver).
    pub const CONSISTENCY_CHECK_INTERVAL_MS: u64 = 300_000;
    /// `--compaction-interval-ms` (5 minutes, as kube-apiserver's --etcd-compaction-interval).
    pub const COMPACTION_INTERVAL_MS: u64 = 300_000;
    /// `--store-quota-bytes` (2 GiB, etcd's default `--quota-backend-bytes`).
    pub const STORE_QUOTA_BYTES: u64 = watchkeeper_store::DEFAULT_QUOTA_BYTES;
    /// The smallest `--store-quota-bytes` other than 0 (1 MiB).
    pub const STORE_QUOTA_BYTES_MIN: u64 = 1 << 20;
    /// The smallest `--cache-memory-bytes` other than 0 (64 MiB: the server's own objects and
    /// a few thousand small ones).
    pub const CACHE_MEMORY_BYTES_MIN: u64 = 64 << 20;

    /// `--cache-memory-bytes`: a third of the memory the process may use, `memory` (see
    /// [`super::usable_memory`]), so that the live objects and the histories (at most about
    /// twice the bound together) stay within two thirds of it; 0 (no bound) when it is not
    /// known.
    #[must_use]
    pub fn cache_memory_bytes(memory: Option<u64>) -> u64 {
        memory.map_or(0, |bytes| (bytes / 3).max(CACHE_MEMORY_BYTES_MIN))
    }
    /// `--max-custom-resource-versions` (see docs/ARCHITECTURE.md, "CustomResourceDefinitions
    /// at run time", for the cost it bounds).
    pub const MAX_CUSTOM_RESOURCE_VERSIONS: usize = 5000;
    /// The largest `--max-custom-resource-versions`.
    pub const MAX_CUSTOM_RESOURCE_VERSIONS_LIMIT: usize = 100_000;
    /// `--shutdown-grace-period-ms`.
    pub const SHUTDOWN_GRACE_PERIOD_MS: u64 = 5000;
    /// `--rebuild-history`.
    pub const REBUILD_HISTORY: bool = true;
    /// `--service-cluster-ip-range` (kube-apiserver's default).
    pub const SERVICE_CLUSTER_IP_RANGE: &str = "10.0.0.0/24";
    /// `--service-node-port-range` (kube-apiserver's).
    pub const SERVICE_NODE_PORT_RANGE: &str = "30000-32767";
    /// `--service-account-issuer` (the issuer kubeadm and kind configure).
    pub const SERVICE_ACCOUNT_ISSUER: &str = "https://kubernetes.default.svc.cluster.local";
    /// `--service-account-max-token-expiration-seconds` (no cap).
    pub const SERVICE_ACCOUNT_MAX_TOKEN_EXPIRATION_SECONDS: u64 = 0;
    /// `--webhook-calls-max`.
    pub const WEBHOOK_CALLS_MAX: usize = 64;
    /// `--jwt-token-bytes-max`.
    pub const JWT_TOKEN_BYTES_MAX: usize = 65536;
    /// `--jwt-keys-refresh-interval-ms` (kube retries an issuer's discovery every 10 s).
    pub const JWT_KEYS_REFRESH_INTERVAL_MS: u64 = 10_000;
    /// `--jwt-issuer-timeout-ms` (kube's OIDC client timeout, 30 s).
    pub const JWT_ISSUER_TIMEOUT_MS: u64 = 30_000;
    /// `--jwt-issuer-response-bytes-max`.
    pub const JWT_ISSUER_RESPONSE_BYTES_MAX: usize = 1 << 20;
    /// `--authentication-token-webhook-cache-ttl` (kube's 2m).
    pub const TOKEN_WEBHOOK_CACHE_TTL: std::time::Duration = std::time::Duration::from_secs(120);
    /// `--authentication-token-webhook-cache-entries`.
    pub const TOKEN_WEBHOOK_CACHE_ENTRIES: usize = 4096;
    /// `--authentication-token-webhook-calls-max`.
    pub const TOKEN_WEBHOOK_CALLS_MAX: usize = 64;
    /// The largest `--webhook-calls-max`.
    pub const WEBHOOK_CALLS_MAX_LIMIT: usize = 10_000;
    /// `--proxy-requests-max`.
    pub const PROXY_REQUESTS_MAX: usize = 64;
    /// The largest `--proxy-requests-max`.
    pub const PROXY_REQUESTS_MAX_LIMIT: usize = 10_000;
    /// `--proxy-connect-timeout-ms` (kube-apiserver's proxy transport dials within 30 s).
    pub const PROXY_CONNECT_TIMEOUT_MS: u64 = 30_000;
}

/// A CIDR range such as `10.0.0.0/24` or `fd00::/108`, its address masked to the network.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IpRange {
    /// The network address (host bits zero).
    pub network: IpAddr,
    /// The prefix length.
    pub prefix: u8,
}

impl IpRange {
    /// Parses `text` as kube-apiserver's `--service-cluster-ip-range` takes it: one CIDR with
    /// at least one address after the network's own (an IPv4 prefix of 30 or less, an IPv6
    /// prefix of 126 or less).
    ///
    /// # Errors
    /// A message saying what is wrong.
    pub fn parse(text: &str) -> Result<IpRange, String> {
        let (address, prefix) = text
            .split_once('/')
            .ok_or_else(|| format!("{text:?} is not a CIDR (address/prefix)"))?;
        let address: IpAddr = address
            .parse()
            .map_err(|e| format!("{text:?} is not a CIDR: {e}"))?;
        let prefix: u8 = prefix
            .parse()
            .map_err(|_| format!("{text:?} is not a CIDR: bad prefix length"))?;
        let network = match address {
            IpAddr::V4(v4) => {
                if prefix > 30 {
                    return Err(format!(
                        "{text:?}: an IPv4 range needs a prefix length of 30 or less"
                    ));
                }
                let mask = u32::MAX.checked_shl(u32::from(32 - prefix)).unwrap_or(0);
                IpAddr::V4(Ipv4Addr::from(u32::from(v4) & mask))
            }
            IpAddr::V6(v6) => {
                if prefix > 126 {
                    return Err(format!(
                        "{text:?}: an IPv6 range needs a prefix length of 126 or less"
                    ));
                }
                let mask = u128::MAX.checked_shl(u32::from(128 - prefix)).unwrap_or(0);
                IpAddr::V6(Ipv6Addr::from(u128::from(v6) & mask))
            }
        };
        Ok(IpRange { network, prefix })
    }

    /// The first address after the network's own (kube-apiserver gives it to the
    /// `default/kubernetes` Service).
    #[must_use]
    pub fn first(&self) -> IpAddr {
        match self.network {
            IpAddr::V4(v4) => IpAddr::V4(Ipv4Addr::from(u32::from(v4) + 1)),
            IpAddr::V6(v6) => IpAddr::V6(Ipv6Addr::from(u128::from(v6) + 1)),
        }
    }
}

impl std::fmt::Display for IpRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.network, self.prefix)
    }
}

/// Parses `--service-cluster-ip-range` as kube-apiserver takes it: one CIDR, or two of
/// different IP families separated by a comma (the first is the primary).
///
/// # Errors
/// A message saying what is wrong, kube-apiserver's where it has one.
pub fn parse_ip_ranges(text: &str) -> Result<Vec<IpRange>, String> {
    let entries: Vec<&str> = text.split(',').map(str::trim).collect();
    if entries.len() > 2 {
        return Err("--service-cluster-ip-range must not contain more than two entries".to_owned());
    }
    let ranges = entries
        .iter()
        .enumerate()
        .map(|(i, entry)| {
            IpRange::parse(entry).map_err(|e| format!("--service-cluster-ip-range[{i}] {e}"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    if let [primary, secondary] = ranges.as_slice()
        && primary.network.is_ipv4() == secondary.network.is_ipv4()
    {
        return Err(
            "--service-cluster-ip-range[0] and --service-cluster-ip-range[1] must be of different IP family"
                .to_owned(),
        );
    }
    Ok(ranges)
}

/// Parses `FIRST-LAST` (or one port) as kube-apiserver's `--service-node-port-range` takes it.
///
/// # Errors
/// A message saying what is wrong.
pub fn parse_port_range(text: &str) -> Result<(u16, u16), String> {
    let (first, last) = text.split_once('-').unwrap_or((text, text));
    let port = |p: &str| {
        p.trim()
            .parse::<u16>()
            .ok()
            .filter(|p| *p > 0)
            .ok_or_else(|| format!("{text:?}: not a port range FIRST-LAST of ports 1 to 65535"))
    };
    let (first, last) = (port(first)?, port(last)?);
    if first > last {
        return Err(format!("{text:?}: the first port is above the last"));
    }
    Ok((first, last))
}

/// The reflector's tunables (`--reflector-*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReflectorConfig {
    /// Objects per page of the store list.
    pub list_page_size: usize,
    /// The first retry back-off (doubling, with jitter).
    pub backoff_initial: Duration,
    /// The longest retry back-off.
    pub backoff_max: Duration,
}

impl ReflectorConfig {
    /// Validates the reflector flags.
    fn from_args(args: &ServeArgs) -> Result<ReflectorConfig, ConfigError> {
        let list_page_size = args
            .reflector_list_page_size
            .unwrap_or(defaults::REFLECTOR_LIST_PAGE_SIZE);
        if !(1..=100_000).contains(&list_page_size) {
            return Err(ConfigError::flag(
                "--reflector-list-page-size",
                format!(
                    "--reflector-list-page-size {list_page_size}: must be between 1 and 100000 objects"
                ),
            ));
        }
        let initial = args
            .reflector_backoff_initial_ms
            .unwrap_or(defaults::REFLECTOR_BACKOFF_INITIAL_MS);
        let max = args
            .reflector_backoff_max_ms
            .unwrap_or(defaults::REFLECTOR_BACKOFF_MAX_MS);
        if initial == 0 || initial > max || max > 600_000 {
            return Err(ConfigError::combination(
                &[
                    "--reflector-backoff-initial-ms",
                    "--reflector-backoff-max-ms",
                ],
                format!(
                    "--reflector-backoff-initial-ms {initial} and --reflector-backoff-max-ms {max}: need 0 < initial <= max <= 600000 milliseconds"
                ),
            ));
        }
        Ok(ReflectorConfig {
            list_page_size,
            backoff_initial: Duration::from_millis(initial),
            backoff_max: Duration::from_millis(max),
        })
    }
}

/// The upstream of caching-proxy mode (see the `upstream` module).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UpstreamConfig {
    /// `--upstream`: overrides the kubeconfig's server.
    pub url: Option<String>,
    /// `--upstream-kubeconfig`.
    pub kubeconfig: Option<PathBuf>,
    /// `--upstream-resources`: `plural` or `plural.group`; empty means all.
    pub resources: Vec<String>,
    /// `--upstream-impersonate`.
    pub impersonate: bool,
    /// `--upstream-streaming-lists`.
    pub streaming_lists: bool,
    /// `--upstream-list-page-size`: objects per page of a paged upstream list.
    pub list_page_size: usize,
    /// `--upstream-watch-timeout-seconds`: `timeoutSeconds` of each upstream watch.
    pub watch_timeout_seconds: u64,
}

impl UpstreamConfig {
    /// The upstream settings of `args`, validated against the store settings.
    fn from_args(args: &ServeArgs) -> Result<Option<UpstreamConfig>, ConfigError> {
        if args.upstream.is_none() && args.upstream_kubeconfig.is_none() {
            if args.upstream_resources.is_some()
                || args.upstream_impersonate.is_some()
                || args.upstream_streaming_lists.is_some()
                || args.upstream_list_page_size.is_some()
                || args.upstream_watch_timeout_seconds.is_some()
            {
                return Err(ConfigError::combination(
                    &[
                        "--upstream-resources",
                        "--upstream-impersonate",
                        "--upstream-streaming-lists",
                        "--upstream-list-page-size",
                        "--upstream-watch-timeout-seconds",
                        "--upstream",
                        "--upstream-kubeconfig",
                    ],
                    "--upstream-resources, --upstream-impersonate, --upstream-streaming-lists, --upstream-list-page-size and --upstream-watch-timeout-seconds need --upstream or --upstream-kubeconfig (caching-proxy mode)",
                ));
            }
            return Ok(None);
        }
        for (given, flag) in [
            (args.store.is_some(), "--store"),
            (args.data_dir.is_some(), "--data-dir"),
            (args.etcd_endpoints.is_some(), "--etcd-endpoints"),
            (args.etcd_prefix.is_some(), "--etcd-prefix"),
            (args.etcd_cafile.is_some(), "--etcd-cafile"),
            (args.etcd_certfile.is_some(), "--etcd-certfile"),
            (args.etcd_keyfile.is_some(), "--etcd-keyfile"),
            (args.resources.is_some(), "--resources"),
            (args.durable_commits.is_some(), "--durable-commits"),
            (args.store_quota_bytes.is_some(), "--store-quota-bytes"),
            (args.cache_memory_bytes.is_some(), "--cache-memory-bytes"),
            (
                args.max_custom_resource_versions.is_some(),
                "--max-custom-resource-versions",
            ),
            (
                args.consistent_get_from_cache.is_some(),
                "--consistent-get-from-cache",
            ),
            (
                args.enable_garbage_collector.is_some(),
                "--enable-garbage-collector",
            ),
            (
                args.enable_root_ca_cert_publisher.is_some(),
                "--enable-root-ca-cert-publisher",
            ),
            (args.enable_pod_gc.is_some(), "--enable-pod-gc"),
            (
                args.terminated_pod_gc_threshold.is_some(),
                "--terminated-pod-gc-threshold",
            ),
            (args.pod_gc_period_ms.is_some(), "--pod-gc-period-ms"),
            (
                args.pod_gc_quarantine_ms.is_some(),
                "--pod-gc-quarantine-ms",
            ),
            (
                args.pod_gc_deletes_per_pass_max.is_some(),
                "--pod-gc-deletes-per-pass-max",
            ),
            (
                args.resource_quota_sync_period.is_some(),
                "--resource-quota-sync-period",
            ),
            (args.root_ca_file.is_some(), "--root-ca-file"),
            (
                args.disable_admission_plugins.is_some(),
                "--disable-admission-plugins",
            ),
            (
                args.enable_admission_plugins.is_some(),
                "--enable-admission-plugins",
            ),
            (args.admission_control.is_some(), "--admission-control"),
            (
                args.admission_control_config_file.is_some(),
                "--admission-control-config-file",
            ),
            (
                args.encryption_provider_config.is_some(),
                "--encryption-provider-config",
            ),
            (
                args.encryption_provider_config_automatic_reload.is_some(),
                "--encryption-provider-config-automatic-reload",
            ),
            (
                args.encryption_provider_config_reload_interval_ms.is_some(),
                "--encryption-provider-config-reload-interval-ms",
            ),
            (
                args.consistency_check_interval_ms.is_some(),
                "--consistency-check-interval-ms",
            ),
            (
                args.compaction_interval_ms.is_some(),
                "--compaction-interval-ms",
            ),
            (args.rebuild_history.is_some(), "--rebuild-history"),
            (
                args.service_cluster_ip_range.is_some(),
                "--service-cluster-ip-range",
            ),
            (
                args.service_node_port_range.is_some(),
                "--service-node-port-range",
            ),
            (
                args.service_account_signing_key_file.is_some(),
                "--service-account-signing-key-file",
            ),
            (
                args.service_account_issuer.is_some(),
                "--service-account-issuer",
            ),
            (
                args.service_account_key_file.is_some(),
                "--service-account-key-file",
            ),
            (
                args.service_account_jwks_uri.is_some(),
                "--service-account-jwks-uri",
            ),
            (args.api_audiences.is_some(), "--api-audiences"),
            (
                args.service_account_max_token_expiration_seconds.is_some(),
                "--service-account-max-token-expiration-seconds",
            ),
            (args.webhook_calls_max.is_some(), "--webhook-calls-max"),
        ] {
            if given {
                return Err(ConfigError::combination(
                    &[flag, "--upstream", "--upstream-kubeconfig"],
                    format!(
                        "{flag} cannot be combined with --upstream/--upstream-kubeconfig: in caching-proxy mode the upstream API server is the source of truth and its discovery decides the resources"
                    ),
                ));
            }
        }
        if let Some(url) = &args.upstream {
            let uri: axum::http::Uri = url.parse().map_err(|e| {
                ConfigError::flag("--upstream", format!("--upstream {url:?}: not a URL: {e}"))
            })?;
            if !matches!(uri.scheme_str(), Some("http" | "https")) || uri.host().is_none() {
                return Err(ConfigError::flag(
                    "--upstream",
                    format!("--upstream {url:?}: expected an http:// or https:// URL with a host"),
                ));
            }
        }
        let list_page_size = args.upstream_list_page_size.unwrap_or(500);
        if !(1..=10_000).contains(&list_page_size) {
            return Err(ConfigError::flag(
                "--upstream-list-page-size",
                format!(
                    "--upstream-list-page-size {list_page_size}: must be between 1 and 10000 objects"
                ),
            ));
        }
        let watch_timeout_seconds = args.upstream_watch_timeout_seconds.unwrap_or(290);
        if !(10..=3600).contains(&watch_timeout_seconds) {
            return Err(ConfigError::flag(
                "--upstream-watch-timeout-seconds",
                format!(
                    "--upstream-watch-timeout-seconds {watch_timeout_seconds}: must be between 10 and 3600 seconds"
                ),
            ));
        }
        let resources = args.upstream_resources.clone().unwrap_or_default();
        if let Some(bad) = resources
            .iter()
            .find(|r| r.trim().is_empty() || r.contains('/'))
        {
            return Err(ConfigError::flag(
                "--upstream-resources",
                format!("--upstream-resources: {bad:?} is not `plural` or `plural.group`"),
            ));
        }
        Ok(Some(UpstreamConfig {
            url: args.upstream.clone(),
            kubeconfig: args.upstream_kubeconfig.clone(),
            resources: resources.iter().map(|r| r.trim().to_owned()).collect(),
            impersonate: args.upstream_impersonate.unwrap_or(false),
            streaming_lists: args.upstream_streaming_lists.unwrap_or(true),
            list_page_size,
            watch_timeout_seconds,
        }))
    }
}

impl ServeConfig {
    /// Merges flags over the file named by `--config` (if any) over defaults, and validates.
    ///
    /// # Errors
    /// The file or the flag at fault.
    pub fn load(args: ServeArgs) -> Result<ServeConfig, ConfigError> {
        let args = match &args.config {
            Some(path) => {
                let text =
                    std::fs::read_to_string(path).map_err(|source| ConfigError::ReadFile {
                        path: path.clone(),
                        source,
                    })?;
                let file: ServeArgs =
                    toml::from_str(&text).map_err(|source| ConfigError::ParseFile {
                        path: path.clone(),
                        source: Box::new(source),
                    })?;
                args.or(file)
            }
            None => args,
        };
        ServeConfig::from_args(args)
    }

    /// Validates fully merged arguments.
    ///
    /// # Errors
    /// The flag or flags at fault.
    pub fn from_args(args: ServeArgs) -> Result<ServeConfig, ConfigError> {
        let upstream = UpstreamConfig::from_args(&args)?;
        let service_accounts = ServiceAccountConfig::from_args(&args)?;
        let jwt = authn::from_args(&args, &service_accounts.issuers)?;
        let token_webhook = authn::token_webhook_from_args(&args)?;
        let tls = TlsConfig::from_args(&args)?;
        let limits = LimitsConfig::from_args(&args)?;
        let (pod_gc, resource_quota_sync_period) = controllers::from_args(&args)?;
        let authorization_modes = match &args.authorization_mode {
            Some(list) => {
                authz::AuthorizationMode::parse_list(list, args.authorization_policy_file.is_some())
                    .map_err(|e| ConfigError::flag("--authorization-mode", e))?
            }
            None => authz::AuthorizationMode::defaults(args.authorization_policy_file.is_some()),
        };
        let authorization_webhook = authz::from_args(&args, &authorization_modes)?;
        let audit = AuditConfig::from_args(&args)?;
        let store: StoreKind = args
            .store
            .as_deref()
            .unwrap_or("embedded")
            .parse()
            .map_err(|e| ConfigError::flag("--store", format!("--store: {e}")))?;
        let mode: WatchMode = args
            .watch_mode
            .as_deref()
            .unwrap_or("stall-resume")
            .parse()
            .map_err(|e| ConfigError::flag("--watch-mode", format!("--watch-mode: {e}")))?;
        let mut cache = CacheConfig {
            mode,
            ..CacheConfig::default()
        };
        if let Some(seconds) = args.event_fresh_seconds {
            cache.event_fresh_duration = Duration::from_secs(seconds);
        }
        if let Some(v) = args.history_capacity_max {
            cache.history_capacity_max = v;
        }
        if let Some(v) = args.history_bytes_max {
            cache.history_bytes_max = v;
        }
        if let Some(v) = args.queue_capacity_max {
            cache.queue_capacity_max = v;
        }
        if let Some(v) = args.queue_capacity_min {
            cache.queue_capacity_min = v;
        }
        if let Some(v) = args.pass_members_max {
            cache.pass_members_max = v;
        }
        if let Some(v) = args.pass_scan_units_max {
            cache.pass_scan_units_max = v;
        }
        if let Some(v) = args.pass_pushes_max {
            cache.pass_pushes_max = v;
        }
        if let Some(v) = args.initial_no_progress_seconds {
            cache.initial_no_progress_timeout = Duration::from_secs(v);
        }
        let fresh_wait = Duration::from_millis(args.fresh_wait_ms.unwrap_or(3000));
        let service_cluster_ip_ranges = parse_ip_ranges(
            args.service_cluster_ip_range
                .as_deref()
                .unwrap_or(defaults::SERVICE_CLUSTER_IP_RANGE),
        )
        .map_err(|e| ConfigError::flag("--service-cluster-ip-range", e))?;
        let service_node_port_range = parse_port_range(
            args.service_node_port_range
                .as_deref()
                .unwrap_or(defaults::SERVICE_NODE_PORT_RANGE),
        )
        .map_err(|e| {
            ConfigError::flag(
                "--service-node-port-range",
                format!("--service-node-port-range {e}"),
            )
        })?;
        let runtime_workers = args.runtime_workers.unwrap_or(0);
        if runtime_workers > defaults::RUNTIME_WORKERS_MAX {
            return Err(ConfigError::flag(
                "--runtime-workers",
                format!(
                    "--runtime-workers {runtime_workers}: must be between 0 (one per CPU) and {}",
                    defaults::RUNTIME_WORKERS_MAX
                ),
            ));
        }
        let watch_chunk_items = args
            .watch_chunk_items
            .unwrap_or(defaults::WATCH_CHUNK_ITEMS);
        if !(1..=10_000).contains(&watch_chunk_items) {
            return Err(ConfigError::flag(
                "--watch-chunk-items",
                format!("--watch-chunk-items {watch_chunk_items}: must be between 1 and 10000"),
            ));
        }
        let list_chunk_bytes = args.list_chunk_bytes.unwrap_or(defaults::LIST_CHUNK_BYTES);
        if !(1024..=16 * 1024 * 1024).contains(&list_chunk_bytes) {
            return Err(ConfigError::flag(
                "--list-chunk-bytes",
                format!("--list-chunk-bytes {list_chunk_bytes}: must be between 1024 and 16777216"),
            ));
        }
        let gzip_min_response_bytes = match args
            .gzip_min_response_bytes
            .unwrap_or(defaults::GZIP_MIN_RESPONSE_BYTES)
        {
            0 => None,
            bytes => Some(bytes),
        };
        let reflector = ReflectorConfig::from_args(&args)?;
        let idle = |value: Option<u64>, default: u64, flag: &'static str| {
            let ms = value.unwrap_or(default);
            if (1..=60_000).contains(&ms) {
                Ok(Duration::from_millis(ms))
            } else {
                Err(ConfigError::flag(
                    flag,
                    format!("{flag} {ms}: must be between 1 and 60000 milliseconds"),
                ))
            }
        };
        let driver = crate::cache::DriverWaits {
            dispatcher_idle: idle(
                args.driver_dispatcher_idle_ms,
                defaults::DRIVER_DISPATCHER_IDLE_MS,
                "--driver-dispatcher-idle-ms",
            )?,
            worker_idle: idle(
                args.driver_worker_idle_ms,
                defaults::DRIVER_WORKER_IDLE_MS,
                "--driver-worker-idle-ms",
            )?,
            inline_watchers_max: match args.driver_inline_watchers_max {
                None => defaults::DRIVER_INLINE_WATCHERS_MAX,
                Some(n) if n <= defaults::DRIVER_INLINE_WATCHERS_MAX_MAX => n,
                Some(n) => {
                    return Err(ConfigError::flag(
                        "--driver-inline-watchers-max",
                        format!(
                            "--driver-inline-watchers-max {n}: must be between 0 and {}",
                            defaults::DRIVER_INLINE_WATCHERS_MAX_MAX
                        ),
                    ));
                }
            },
            ..crate::cache::DriverWaits::default()
        };
        cache.fresh_wait_max = fresh_wait;
        cache.validate()?;
        let prefix = args.etcd_prefix.unwrap_or_else(|| "/registry".to_owned());
        if !prefix.starts_with('/') || prefix.len() < 2 || prefix.ends_with('/') {
            return Err(ConfigError::flag(
                "--etcd-prefix",
                format!(
                    "--etcd-prefix {prefix:?}: must start with '/', not end with '/', and not be empty"
                ),
            ));
        }
        let etcd_endpoints = args.etcd_endpoints.unwrap_or_default();
        if store == StoreKind::Etcd && etcd_endpoints.is_empty() {
            return Err(ConfigError::combination(
                &["--etcd-endpoints", "--store"],
                "--store etcd needs --etcd-endpoints",
            ));
        }
        let etcd_tls = etcd::tls_from_flags(
            (
                args.etcd_cafile.as_deref(),
                args.etcd_certfile.as_deref(),
                args.etcd_keyfile.as_deref(),
            ),
            store,
            &etcd_endpoints,
        )?;
        if store == StoreKind::Etcd && args.store_quota_bytes.is_some() {
            return Err(ConfigError::combination(
                &["--store-quota-bytes", "--store"],
                "--store-quota-bytes applies to the memory and embedded stores; etcd applies its own quota (etcd's --quota-backend-bytes)",
            ));
        }
        let store_quota_bytes = args
            .store_quota_bytes
            .unwrap_or(defaults::STORE_QUOTA_BYTES);
        if store_quota_bytes != 0 && store_quota_bytes < defaults::STORE_QUOTA_BYTES_MIN {
            return Err(ConfigError::flag(
                "--store-quota-bytes",
                format!(
                    "--store-quota-bytes {store_quota_bytes}: must be 0 (no quota) or at least 1048576 bytes (1 MiB)"
                ),
            ));
        }
        let cache_memory_bytes = match args.cache_memory_bytes {
            Some(bytes) if bytes != 0 && bytes < defaults::CACHE_MEMORY_BYTES_MIN => {
                return Err(ConfigError::flag(
                    "--cache-memory-bytes",
                    format!(
                        "--cache-memory-bytes {bytes}: must be 0 (no bound) or at least 67108864 bytes (64 MiB)"
                    ),
                ));
            }
            Some(bytes) => bytes,
            None => defaults::cache_memory_bytes(usable_memory()),
        };
        let custom_resource_versions_max = args
            .max_custom_resource_versions
            .unwrap_or(defaults::MAX_CUSTOM_RESOURCE_VERSIONS);
        if !(1..=defaults::MAX_CUSTOM_RESOURCE_VERSIONS_LIMIT)
            .contains(&custom_resource_versions_max)
        {
            return Err(ConfigError::flag(
                "--max-custom-resource-versions",
                format!(
                    "--max-custom-resource-versions {custom_resource_versions_max}: must be between 1 and 100000 served custom resource versions"
                ),
            ));
        }
        let webhook_calls_max = args
            .webhook_calls_max
            .unwrap_or(defaults::WEBHOOK_CALLS_MAX);
        if !(1..=defaults::WEBHOOK_CALLS_MAX_LIMIT).contains(&webhook_calls_max) {
            return Err(ConfigError::flag(
                "--webhook-calls-max",
                format!(
                    "--webhook-calls-max {webhook_calls_max}: must be between 1 and 10000 calls"
                ),
            ));
        }
        let proxy_requests_max = bounded(
            "--proxy-requests-max",
            args.proxy_requests_max,
            defaults::PROXY_REQUESTS_MAX,
            1..=defaults::PROXY_REQUESTS_MAX_LIMIT,
            "requests",
        )?;
        let proxy_connect_timeout_ms = bounded(
            "--proxy-connect-timeout-ms",
            args.proxy_connect_timeout_ms,
            defaults::PROXY_CONNECT_TIMEOUT_MS,
            100..=600_000,
            "milliseconds",
        )?;
        let consistency_ms = args
            .consistency_check_interval_ms
            .unwrap_or(defaults::CONSISTENCY_CHECK_INTERVAL_MS);
        if consistency_ms != 0 && !(100..=86_400_000).contains(&consistency_ms) {
            return Err(ConfigError::flag(
                "--consistency-check-interval-ms",
                format!(
                    "--consistency-check-interval-ms {consistency_ms}: must be 0 (disabled) or between 100 and 86400000 milliseconds"
                ),
            ));
        }
        let compaction_ms = args
            .compaction_interval_ms
            .unwrap_or(defaults::COMPACTION_INTERVAL_MS);
        if compaction_ms != 0 && !(100..=86_400_000).contains(&compaction_ms) {
            return Err(ConfigError::flag(
                "--compaction-interval-ms",
                format!(
                    "--compaction-interval-ms {compaction_ms}: must be 0 (disabled) or between 100 and 86400000 milliseconds"
                ),
            ));
        }
        let shutdown_grace_ms = args
            .shutdown_grace_period_ms
            .unwrap_or(defaults::SHUTDOWN_GRACE_PERIOD_MS);
        if !(1..=600_000).contains(&shutdown_grace_ms) {
            return Err(ConfigError::flag(
                "--shutdown-grace-period-ms",
                format!(
                    "--shutdown-grace-period-ms {shutdown_grace_ms}: must be between 1 and 600000 milliseconds"
                ),
            ));
        }
        let (encryption, encryption_reload) = encryption::from_flags(
            (
                args.encryption_provider_config.as_deref(),
                args.encryption_provider_config_automatic_reload,
                args.encryption_provider_config_reload_interval_ms,
            ),
            &prefix,
        )?;
        let admission = admission_plugins::from_flags(admission_plugins::Flags {
            enable: args.enable_admission_plugins.as_deref(),
            disable: args.disable_admission_plugins.as_deref(),
            control: args.admission_control.as_deref(),
        })?;
        let min_request_timeout =
            Duration::from_secs(args.min_request_timeout_seconds.unwrap_or(1800));
        if min_request_timeout.is_zero() {
            return Err(ConfigError::flag(
                "--min-request-timeout-seconds",
                "--min-request-timeout-seconds must be positive",
            ));
        }
        Ok(ServeConfig {
            listen: args
                .listen
                .unwrap_or_else(|| "127.0.0.1:8080".parse().expect("a valid default")),
            store,
            data_dir: args
                .data_dir
                .unwrap_or_else(|| PathBuf::from("watchkeeper-data")),
            etcd_endpoints,
            etcd_tls,
            encryption,
            encryption_reload,
            prefix,
            resources: args.resources,
            cache,
            consistent_get_from_cache: args.consistent_get_from_cache.unwrap_or(true),
            enable_garbage_collector: args.enable_garbage_collector.unwrap_or(true),
            enable_root_ca_cert_publisher: args.enable_root_ca_cert_publisher.unwrap_or(true),
            pod_gc,
            resource_quota_sync_period,
            admission,
            admission_config: admission::from_flags(
                args.admission_control_config_file.as_deref(),
                &admission,
            )?,
            min_request_timeout,
            fresh_wait,
            fresh_nudge: Duration::from_millis(args.fresh_nudge_ms.unwrap_or(100)),
            runtime_workers,
            watch_chunk_items,
            list_chunk_bytes,
            gzip_min_response_bytes,
            reflector,
            driver,
            durable_commits: args.durable_commits.unwrap_or(true),
            store_quota_bytes,
            cache_memory_bytes,
            custom_resource_versions_max,
            token_auth_file: args.token_auth_file,
            authorization_modes,
            authorization_webhook,
            authorization_policy_file: args.authorization_policy_file,
            audit,
            upstream,
            tls,
            limits,
            consistency_check_interval: (consistency_ms != 0)
                .then(|| Duration::from_millis(consistency_ms)),
            compaction_interval: (compaction_ms != 0).then(|| Duration::from_millis(compaction_ms)),
            shutdown_grace: Duration::from_millis(shutdown_grace_ms),
            rebuild_history: args.rebuild_history.unwrap_or(defaults::REBUILD_HISTORY),
            service_cluster_ip_ranges,
            service_node_port_range,
            service_accounts,
            jwt,
            token_webhook,
            webhook_calls_max,
            proxy_requests_max,
            proxy_connect_timeout: Duration::from_millis(proxy_connect_timeout_ms),
        })
    }
}

/// `value` (`default` when not given), or the flag's refusal `FLAG VALUE: must be between A and
/// B UNIT` outside `range`.
pub(super) fn bounded<T: PartialOrd + Copy + std::fmt::Display>(
    flag: &'static str,
    value: Option<T>,
    default: T,
    range: std::ops::RangeInclusive<T>,
    unit: &str,
) -> Result<T, ConfigError> {
    let value = value.unwrap_or(default);
    if !range.contains(&value) {
        return Err(ConfigError::flag(
            flag,
            format!(
                "{flag} {value}: must be between {} and {} {unit}",
                range.start(),
                range.end()
            ),
        ));
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The default of `flag` as the README's tables and `serve --help` state it.
    fn documented_defaults(flag: &str) -> (Option<String>, Option<String>) {
        let readme = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md"));
        let cell = readme
            .lines()
            .find(|line| line.starts_with(&format!("| `--{flag}`")))
            .and_then(|line| line.split('|').nth(2))
            .and_then(|cell| cell.split_whitespace().next())
            .map(str::to_owned);
        let command = <ServeArgs as clap::Args>::augment_args(clap::Command::new("serve"));
        let help = command
            .get_arguments()
            .find(|arg| arg.get_long() == Some(flag))
            .and_then(|arg| arg.get_help().map(ToString::to_string))
            .and_then(|help| {
                let (_, rest) = help.split_once("[default: ")?;
                Some(rest.split(']').next()?.to_owned())
            });
        (cell, help)
    }

    #[test]
    fn readme_and_help_state_the_config_defaults() {
        let config = ServeConfig::from_args(ServeArgs::default()).unwrap();
        let limits = &config.limits;
        let secs = |d: Duration| d.as_secs().to_string();
        let millis = |d: Duration| d.as_millis().to_string();
        for (flag, value) in [
            (
                "max-request-body-bytes",
                limits.request_body_bytes_max.to_string(),
            ),
            ("max-header-bytes", limits.header_bytes_max.to_string()),
            (
                "jwt-token-bytes-max",
                config.jwt.token_bytes_max.to_string(),
            ),
            (
                "jwt-keys-refresh-interval-ms",
                millis(config.jwt.keys_refresh_interval),
            ),
            ("jwt-issuer-timeout-ms", millis(config.jwt.issuer_timeout)),
            (
                "jwt-issuer-response-bytes-max",
                config.jwt.issuer_response_bytes_max.to_string(),
            ),
            (
                "authentication-token-webhook-cache-ttl",
                watchkeeper_api::time::go_duration(
                    defaults::TOKEN_WEBHOOK_CACHE_TTL.as_nanos() as i128
                ),
            ),
            (
                "authentication-token-webhook-cache-entries",
                defaults::TOKEN_WEBHOOK_CACHE_ENTRIES.to_string(),
            ),
            (
                "authentication-token-webhook-calls-max",
                defaults::TOKEN_WEBHOOK_CALLS_MAX.to_string(),
            ),
            (
                "authorization-webhook-cache-authorized-ttl",
                watchkeeper_api::time::go_duration(authz::AUTHORIZED_TTL.as_nanos() as i128),
            ),
            (
                "authorization-webhook-cache-unauthorized-ttl",
                watchkeeper_api::time::go_duration(authz::UNAUTHORIZED_TTL.as_nanos() as i128),
            ),
            (
                "authorization-webhook-cache-entries",
                authz::CACHE_ENTRIES.to_string(),
            ),
            (
                "authorization-webhook-calls-max",
                authz::CALLS_MAX.to_string(),
            ),
            ("max-invalid-causes", limits.invalid_causes_max.to_string()),
            (
                "request-read-timeout-seconds",
                secs(limits.request_read_timeout),
            ),
            (
                "request-header-timeout-ms",
                millis(limits.request_header_timeout),
            ),
            ("idle-timeout-ms", millis(limits.idle_timeout)),
            (
                "http2-keepalive-interval-ms",
                millis(limits.http2_keepalive_interval),
            ),
            (
                "http2-keepalive-timeout-ms",
                millis(limits.http2_keepalive_timeout),
            ),
            ("write-timeout-ms", millis(limits.write_timeout)),
            (
                "http2-max-send-buffer-bytes",
                limits.http2_max_send_buffer_bytes.to_string(),
            ),
            (
                "http2-initial-stream-window-bytes",
                limits.http2_initial_stream_window_bytes.to_string(),
            ),
            (
                "http2-initial-connection-window-bytes",
                limits.http2_initial_connection_window_bytes.to_string(),
            ),
            (
                "socket-send-buffer-bytes",
                limits.socket_send_buffer_bytes.to_string(),
            ),
            (
                "max-requests-inflight",
                limits.requests_inflight_max.to_string(),
            ),
            (
                "max-mutating-requests-inflight",
                limits.mutating_requests_inflight_max.to_string(),
            ),
            ("max-watches", limits.watches_max.to_string()),
            (
                "max-watches-per-user",
                limits.watches_per_user_max.to_string(),
            ),
            (
                "max-requests-inflight-per-user",
                limits.requests_inflight_per_user_max.to_string(),
            ),
            (
                "enable-priority-and-fairness",
                limits.priority_and_fairness.to_string(),
            ),
            (
                "apf-borrowing-period-ms",
                millis(limits.apf_borrowing_period),
            ),
            (
                "request-timeout",
                format!("{}s", limits.request_timeout.as_secs()),
            ),
            (
                "max-watches-per-connection",
                limits.watches_per_connection_max.to_string(),
            ),
            (
                "max-watch-query-bytes",
                limits.watch_query_bytes_max.to_string(),
            ),
            (
                "max-watch-query-bytes-per-user",
                limits.watch_query_bytes_per_user_max.to_string(),
            ),
            (
                "heavy-request-body-bytes",
                limits.heavy_request_body_bytes.to_string(),
            ),
            (
                "max-heavy-requests",
                limits
                    .heavy_requests_max
                    .map_or_else(|| "auto".to_owned(), |n| n.to_string()),
            ),
            (
                "memory-release-interval-ms",
                millis(limits.memory_release_interval),
            ),
            (
                "max-connections",
                limits
                    .connections_max
                    .map_or_else(|| "auto".to_owned(), |n| n.to_string()),
            ),
            (
                "watch-release-grace-seconds",
                secs(limits.watch_release_grace),
            ),
            (
                "allowed-hosts",
                if limits.allowed_hosts.is_empty() {
                    "none".to_owned()
                } else {
                    limits.allowed_hosts.join(",")
                },
            ),
            (
                "tls-handshake-timeout-seconds",
                secs(config.tls.handshake_timeout),
            ),
            ("runtime-workers", config.runtime_workers.to_string()),
            ("watch-chunk-items", config.watch_chunk_items.to_string()),
            ("list-chunk-bytes", config.list_chunk_bytes.to_string()),
            (
                "gzip-min-response-bytes",
                config
                    .gzip_min_response_bytes
                    .map_or_else(|| "0".to_owned(), |b| b.to_string()),
            ),
            (
                "reflector-list-page-size",
                config.reflector.list_page_size.to_string(),
            ),
            (
                "reflector-backoff-initial-ms",
                millis(config.reflector.backoff_initial),
            ),
            (
                "reflector-backoff-max-ms",
                millis(config.reflector.backoff_max),
            ),
            (
                "driver-dispatcher-idle-ms",
                millis(config.driver.dispatcher_idle),
            ),
            ("driver-worker-idle-ms", millis(config.driver.worker_idle)),
            (
                "driver-inline-watchers-max",
                config.driver.inline_watchers_max.to_string(),
            ),
            (
                "consistency-check-interval-ms",
                config
                    .consistency_check_interval
                    .map_or_else(|| "0".to_owned(), millis),
            ),
            (
                "compaction-interval-ms",
                config
                    .compaction_interval
                    .map_or_else(|| "0".to_owned(), millis),
            ),
            ("shutdown-grace-period-ms", millis(config.shutdown_grace)),
            ("store-quota-bytes", config.store_quota_bytes.to_string()),
            (
                "max-custom-resource-versions",
                config.custom_resource_versions_max.to_string(),
            ),
            ("rebuild-history", config.rebuild_history.to_string()),
            (
                "service-cluster-ip-range",
                config
                    .service_cluster_ip_ranges
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(","),
            ),
            (
                "service-node-port-range",
                format!(
                    "{}-{}",
                    config.service_node_port_range.0, config.service_node_port_range.1
                ),
            ),
            (
                "service-account-issuer",
                config.service_accounts.issuers[0].clone(),
            ),
            (
                "service-account-max-token-expiration-seconds",
                config
                    .service_accounts
                    .max_token_expiration_seconds
                    .map_or_else(|| "0".to_owned(), |s| s.to_string()),
            ),
            ("webhook-calls-max", config.webhook_calls_max.to_string()),
            ("proxy-requests-max", config.proxy_requests_max.to_string()),
            (
                "proxy-connect-timeout-ms",
                config.proxy_connect_timeout.as_millis().to_string(),
            ),
            ("enable-pod-gc", config.pod_gc.enabled.to_string()),
            (
                "terminated-pod-gc-threshold",
                config
                    .pod_gc
                    .terminated_threshold
                    .map_or_else(|| "0".to_owned(), |t| t.to_string()),
            ),
            ("pod-gc-period-ms", millis(config.pod_gc.period)),
            ("pod-gc-quarantine-ms", millis(config.pod_gc.quarantine)),
            (
                "pod-gc-deletes-per-pass-max",
                config.pod_gc.deletes_per_pass_max.to_string(),
            ),
            (
                "resource-quota-sync-period",
                format!("{}m0s", config.resource_quota_sync_period.as_secs() / 60),
            ),
        ] {
            let (readme, help) = documented_defaults(flag);
            assert_eq!(readme.as_deref(), Some(value.as_str()), "README, --{flag}");
            assert_eq!(
                help.as_deref(),
                Some(value.as_str()),
                "serve --help, --{flag}"
            );
        }
    }

    #[test]
    fn service_account_flags_are_validated() {
        let config = ServeConfig::from_args(ServeArgs::default()).unwrap();
        assert_eq!(
            config.service_accounts.api_audiences,
            [defaults::SERVICE_ACCOUNT_ISSUER],
            "the API audiences default to the issuer"
        );
        let config = ServeConfig::from_args(ServeArgs {
            service_account_issuer: Some(vec![
                "https://wk.example".to_owned(),
                "https://old.example".to_owned(),
            ]),
            service_account_jwks_uri: Some("https://keys.example/jwks".to_owned()),
            api_audiences: Some(vec!["a".to_owned(), " b ".to_owned()]),
            service_account_max_token_expiration_seconds: Some(7200),
            ..ServeArgs::default()
        })
        .unwrap();
        assert_eq!(
            config.service_accounts.issuers,
            ["https://wk.example", "https://old.example"]
        );
        assert_eq!(
            config.service_accounts.jwks_uri.as_deref(),
            Some("https://keys.example/jwks")
        );
        assert_eq!(config.service_accounts.api_audiences, ["a", "b"]);
        assert_eq!(
            config.service_accounts.max_token_expiration_seconds,
            Some(7200)
        );
        for (args, flag) in [
            (
                ServeArgs {
                    service_account_issuer: Some(vec![String::new()]),
                    ..ServeArgs::default()
                },
                "--service-account-issuer",
            ),
            (
                ServeArgs {
                    service_account_issuer: Some(vec![
                        "https://ok.example".to_owned(),
                        "has space".to_owned(),
                    ]),
                    ..ServeArgs::default()
                },
                "--service-account-issuer",
            ),
            (
                ServeArgs {
                    service_account_jwks_uri: Some("http://keys.example/jwks".to_owned()),
                    ..ServeArgs::default()
                },
                "--service-account-jwks-uri",
            ),
            (
                ServeArgs {
                    api_audiences: Some(vec!["a".to_owned(), String::new()]),
                    ..ServeArgs::default()
                },
                "--api-audiences",
            ),
            (
                ServeArgs {
                    service_account_max_token_expiration_seconds: Some(599),
                    ..ServeArgs::default()
                },
                "--service-account-max-token-expiration-seconds",
            ),
            (
                ServeArgs {
                    service_account_max_token_expiration_seconds: Some((1 << 32) + 1),
                    ..ServeArgs::default()
                },
                "--service-account-max-token-expiration-seconds",
            ),
        ] {
            let error = ServeConfig::from_args(args).unwrap_err();
            assert!(
                matches!(&error, ConfigError::Flag { flag: f, .. } if *f == flag),
                "{error}"
            );
        }
        let error = ServeConfig::from_args(ServeArgs {
            upstream: Some("http://127.0.0.1:1".to_owned()),
            service_account_signing_key_file: Some("key.pem".into()),
            ..ServeArgs::default()
        })
        .unwrap_err();
        assert!(
            error
                .to_string()
                .contains("--service-account-signing-key-file"),
            "{error}"
        );
    }

    #[test]
    fn service_node_port_range_is_first_dash_last() {
        assert_eq!(parse_port_range("30000-32767"), Ok((30000, 32767)));
        assert_eq!(parse_port_range("30100"), Ok((30100, 30100)));
        for bad in ["", "0-10", "10-5", "30000-70000", "a-b", "30000-"] {
            assert!(parse_port_range(bad).is_err(), "{bad}");
        }
        let config = ServeConfig::from_args(ServeArgs::default()).unwrap();
        assert_eq!(config.service_node_port_range, (30000, 32767));
        let error = ServeConfig::from_args(ServeArgs {
            service_node_port_range: Some("9-1".to_owned()),
            ..ServeArgs::default()
        })
        .unwrap_err();
        assert!(
            error.to_string().contains("--service-node-port-range"),
            "{error}"
        );
    }

    #[test]
    fn service_cluster_ip_range_is_a_cidr_with_a_first_address() {
        let range = IpRange::parse("10.96.3.7/12").unwrap();
        assert_eq!(range.to_string(), "10.96.0.0/12");
        assert_eq!(range.first().to_string(), "10.96.0.1");
        let v6 = IpRange::parse("fd00::5/108").unwrap();
        assert_eq!(v6.first().to_string(), "fd00::1");
        for bad in [
            "10.0.0.0",
            "10.0.0.0/31",
            "fd00::/127",
            "ten/8",
            "10.0.0.0/x",
        ] {
            assert!(IpRange::parse(bad).is_err(), "{bad}");
        }
        let dual = parse_ip_ranges("10.0.0.0/24, fd00::/108").unwrap();
        assert_eq!(
            dual.iter().map(ToString::to_string).collect::<Vec<_>>(),
            ["10.0.0.0/24", "fd00::/108"]
        );
        assert_eq!(
            parse_ip_ranges("10.0.0.0/24,10.1.0.0/24").unwrap_err(),
            "--service-cluster-ip-range[0] and --service-cluster-ip-range[1] must be of different IP family"
        );
        assert_eq!(
            parse_ip_ranges("10.0.0.0/24,fd00::/108,10.1.0.0/24").unwrap_err(),
            "--service-cluster-ip-range must not contain more than two entries"
        );
        assert!(
            parse_ip_ranges("10.0.0.0/24,fd00::/127")
                .unwrap_err()
                .starts_with("--service-cluster-ip-range[1] ")
        );
        let error = ServeConfig::from_args(ServeArgs {
            service_cluster_ip_range: Some("10.0.0.0/32".to_owned()),
            ..ServeArgs::default()
        })
        .unwrap_err();
        assert!(
            matches!(
                error,
                ConfigError::Flag {
                    flag: "--service-cluster-ip-range",
                    ..
                }
            ),
            "{error}"
        );
    }

    #[test]
    fn errors_carry_the_flag_or_file_at_fault() {
        let error = ServeConfig::from_args(ServeArgs {
            max_header_bytes: Some(10),
            ..ServeArgs::default()
        })
        .unwrap_err();
        assert!(
            matches!(
                error,
                ConfigError::Flag {
                    flag: "--max-header-bytes",
                    ..
                }
            ),
            "{error:?}"
        );
        let error = ServeConfig::from_args(ServeArgs {
            store: Some("etcd".to_owned()),
            ..ServeArgs::default()
        })
        .unwrap_err();
        assert!(
            matches!(&error, ConfigError::Combination { flags, .. } if flags[0] == "--etcd-endpoints"),
            "{error:?}"
        );
        let missing = PathBuf::from("/nonexistent/watchkeeper.toml");
        let error = ServeConfig::load(ServeArgs {
            config: Some(missing.clone()),
            ..ServeArgs::default()
        })
        .unwrap_err();
        assert!(
            matches!(&error, ConfigError::ReadFile { path, .. } if *path == missing),
            "{error:?}"
        );
        assert!(
            error
                .to_string()
                .starts_with("cannot read config file /nonexistent/watchkeeper.toml: "),
            "{error}"
        );
    }

    #[test]
    fn tunables_are_validated() {
        for (args, flag) in [
            (
                ServeArgs {
                    watch_chunk_items: Some(0),
                    ..ServeArgs::default()
                },
                "--watch-chunk-items",
            ),
            (
                ServeArgs {
                    list_chunk_bytes: Some(100),
                    ..ServeArgs::default()
                },
                "--list-chunk-bytes",
            ),
            (
                ServeArgs {
                    http2_max_send_buffer_bytes: Some(100),
                    ..ServeArgs::default()
                },
                "--http2-max-send-buffer-bytes",
            ),
            (
                ServeArgs {
                    http2_initial_stream_window_bytes: Some(1000),
                    ..ServeArgs::default()
                },
                "--http2-initial-stream-window-bytes",
            ),
            (
                ServeArgs {
                    http2_initial_connection_window_bytes: Some(u32::MAX),
                    ..ServeArgs::default()
                },
                "--http2-initial-connection-window-bytes",
            ),
            (
                ServeArgs {
                    socket_send_buffer_bytes: Some(1000),
                    ..ServeArgs::default()
                },
                "--socket-send-buffer-bytes",
            ),
            (
                ServeArgs {
                    reflector_list_page_size: Some(0),
                    ..ServeArgs::default()
                },
                "--reflector-list-page-size",
            ),
            (
                ServeArgs {
                    shutdown_grace_period_ms: Some(0),
                    ..ServeArgs::default()
                },
                "--shutdown-grace-period-ms",
            ),
            (
                ServeArgs {
                    upstream: Some("http://127.0.0.1:1".into()),
                    rebuild_history: Some(false),
                    ..ServeArgs::default()
                },
                "--rebuild-history",
            ),
            (
                ServeArgs {
                    reflector_backoff_initial_ms: Some(10_000),
                    reflector_backoff_max_ms: Some(100),
                    ..ServeArgs::default()
                },
                "--reflector-backoff-initial-ms",
            ),
            (
                ServeArgs {
                    driver_inline_watchers_max: Some(1_000_001),
                    ..ServeArgs::default()
                },
                "--driver-inline-watchers-max",
            ),
        ] {
            let error = ServeConfig::from_args(args).unwrap_err().to_string();
            assert!(error.contains(flag), "{error}");
        }
        // 0 (never inline) and the largest are taken.
        for n in [0, defaults::DRIVER_INLINE_WATCHERS_MAX_MAX] {
            let config = ServeConfig::from_args(ServeArgs {
                driver_inline_watchers_max: Some(n),
                ..ServeArgs::default()
            })
            .unwrap();
            assert_eq!(config.driver.inline_watchers_max, n);
        }
    }

    /// Goal: `--runtime-workers` is 0 (one per CPU, the default) to 1024, with the same key
    /// in the config file; anything above is refused naming the flag.
    #[test]
    fn the_runtime_workers_are_validated() {
        let workers = |args: ServeArgs| ServeConfig::from_args(args).map(|c| c.runtime_workers);
        assert_eq!(workers(ServeArgs::default()).unwrap(), 0);
        for ok in [0, 1, 2, 1024] {
            let args = ServeArgs {
                runtime_workers: Some(ok),
                ..ServeArgs::default()
            };
            assert_eq!(workers(args).unwrap(), ok);
        }
        for bad in [1025, usize::MAX] {
            let error = workers(ServeArgs {
                runtime_workers: Some(bad),
                ..ServeArgs::default()
            })
            .unwrap_err()
            .to_string();
            assert!(
                error.contains("--runtime-workers")
                    && error.contains("between 0 (one per CPU) and 1024"),
                "{error}"
            );
        }
        let file: ServeArgs = toml::from_str("runtime-workers = 1").expect("config file");
        assert_eq!(workers(ServeArgs::default().or(file)).unwrap(), 1);
    }

    /// Goal: `--max-custom-resource-versions` is 1 to 100000 (5000 by default), with the same
    /// key in the config file; a store-mode flag, refused in caching-proxy mode (the
    /// upstream serves its own CRDs).
    #[test]
    fn the_custom_resource_versions_bound_is_validated() {
        let max =
            |args: ServeArgs| ServeConfig::from_args(args).map(|c| c.custom_resource_versions_max);
        assert_eq!(max(ServeArgs::default()).unwrap(), 5000);
        for ok in [1, 3, 100_000] {
            let args = ServeArgs {
                max_custom_resource_versions: Some(ok),
                ..ServeArgs::default()
            };
            assert_eq!(max(args).unwrap(), ok);
        }
        for bad in [0, 100_001, usize::MAX] {
            let error = max(ServeArgs {
                max_custom_resource_versions: Some(bad),
                ..ServeArgs::default()
            })
            .unwrap_err();
            assert!(
                matches!(
                    error,
                    ConfigError::Flag {
                        flag: "--max-custom-resource-versions",
                        ..
                    }
                ),
                "{error:?}"
            );
            assert_eq!(
                error.to_string(),
                format!(
                    "--max-custom-resource-versions {bad}: must be between 1 and 100000 served custom resource versions"
                )
            );
        }
        let file: ServeArgs = toml::from_str("max-custom-resource-versions = 7").unwrap();
        assert_eq!(max(ServeArgs::default().or(file)).unwrap(), 7);
        let error = max(ServeArgs {
            upstream: Some("http://127.0.0.1:1".into()),
            max_custom_resource_versions: Some(7),
            ..ServeArgs::default()
        })
        .unwrap_err();
        assert!(
            error.to_string().contains("--max-custom-resource-versions"),
            "{error}"
        );
    }

    /// Goal: `--max-watch-query-bytes` (64 MiB by default) and
    /// `--max-watch-query-bytes-per-user` (4 MiB) are 0 (unlimited) or at least 65536 (a
    /// watch of the longest URL fits), with the same keys in the config file.
    #[test]
    fn the_watch_query_bounds_are_validated() {
        let bounds = |args: ServeArgs| {
            ServeConfig::from_args(args).map(|c| {
                (
                    c.limits.watch_query_bytes_max,
                    c.limits.watch_query_bytes_per_user_max,
                )
            })
        };
        assert_eq!(bounds(ServeArgs::default()).unwrap(), (64 << 20, 4 << 20));
        for ok in [0, 65_536, usize::MAX] {
            let args = ServeArgs {
                max_watch_query_bytes: Some(ok),
                max_watch_query_bytes_per_user: Some(ok),
                ..ServeArgs::default()
            };
            assert_eq!(bounds(args).unwrap(), (ok, ok));
        }
        for bad in [1, 65_535] {
            for (flag, args) in [
                (
                    "--max-watch-query-bytes",
                    ServeArgs {
                        max_watch_query_bytes: Some(bad),
                        ..ServeArgs::default()
                    },
                ),
                (
                    "--max-watch-query-bytes-per-user",
                    ServeArgs {
                        max_watch_query_bytes_per_user: Some(bad),
                        ..ServeArgs::default()
                    },
                ),
            ] {
                let error = bounds(args).unwrap_err();
                assert!(
                    matches!(&error, ConfigError::Flag { flag: f, .. } if *f == flag),
                    "{error:?}"
                );
                assert_eq!(
                    error.to_string(),
                    format!("{flag} {bad}: must be 0 (unlimited) or at least 65536 bytes")
                );
            }
        }
        let file: ServeArgs = toml::from_str(
            "max-watch-query-bytes = 100000\nmax-watch-query-bytes-per-user = 70000",
        )
        .unwrap();
        assert_eq!(
            bounds(ServeArgs::default().or(file)).unwrap(),
            (100_000, 70_000)
        );
    }

    /// Goal: `--store-quota-bytes` is 0 (none) or at least 1 MiB, with the same key in the
    /// config file, and is refused with `--store etcd`, whose quota is etcd's.
    #[test]
    fn the_store_quota_is_validated() {
        let quota = |args: ServeArgs| ServeConfig::from_args(args).map(|c| c.store_quota_bytes);
        assert_eq!(quota(ServeArgs::default()).unwrap(), 2 << 30);
        for ok in [0, 1 << 20, u64::MAX] {
            let args = ServeArgs {
                store_quota_bytes: Some(ok),
                ..ServeArgs::default()
            };
            assert_eq!(quota(args).unwrap(), ok);
        }
        for bad in [1, (1 << 20) - 1] {
            let error = quota(ServeArgs {
                store_quota_bytes: Some(bad),
                ..ServeArgs::default()
            })
            .unwrap_err();
            assert!(
                matches!(
                    error,
                    ConfigError::Flag {
                        flag: "--store-quota-bytes",
                        ..
                    }
                ),
                "{error:?}"
            );
            assert_eq!(
                error.to_string(),
                format!(
                    "--store-quota-bytes {bad}: must be 0 (no quota) or at least 1048576 bytes (1 MiB)"
                )
            );
        }
        let file: ServeArgs = toml::from_str("store-quota-bytes = 4194304").unwrap();
        assert_eq!(quota(ServeArgs::default().or(file)).unwrap(), 4 << 20);
        let error = quota(ServeArgs {
            store: Some("etcd".into()),
            etcd_endpoints: Some(vec!["http://127.0.0.1:2379".into()]),
            store_quota_bytes: Some(4 << 20),
            ..ServeArgs::default()
        })
        .unwrap_err();
        assert!(
            matches!(&error, ConfigError::Combination { flags, .. } if flags[0] == "--store-quota-bytes"),
            "{error:?}"
        );
    }

    /// Goal: `--cache-memory-bytes` is 0 (none) or at least 64 MiB, with the same key in the
    /// config file; its default is a third of the usable memory, read from cgroup v2 or
    /// `/proc/meminfo`.
    #[test]
    fn the_cache_memory_bound_is_validated_and_defaults_to_a_third_of_the_memory() {
        let bound = |args: ServeArgs| ServeConfig::from_args(args).map(|c| c.cache_memory_bytes);
        assert_eq!(
            bound(ServeArgs::default()).unwrap(),
            defaults::cache_memory_bytes(usable_memory())
        );
        for ok in [0, 64 << 20, u64::MAX] {
            let args = ServeArgs {
                cache_memory_bytes: Some(ok),
                ..ServeArgs::default()
            };
            assert_eq!(bound(args).unwrap(), ok);
        }
        for bad in [1, (64 << 20) - 1] {
            let error = bound(ServeArgs {
                cache_memory_bytes: Some(bad),
                ..ServeArgs::default()
            })
            .unwrap_err();
            assert_eq!(
                error.to_string(),
                format!(
                    "--cache-memory-bytes {bad}: must be 0 (no bound) or at least 67108864 bytes (64 MiB)"
                )
            );
        }
        let file: ServeArgs = toml::from_str("cache-memory-bytes = 134217728").unwrap();
        assert_eq!(bound(ServeArgs::default().or(file)).unwrap(), 128 << 20);
        assert_eq!(defaults::cache_memory_bytes(Some(9 << 30)), 3 << 30);
        assert_eq!(defaults::cache_memory_bytes(Some(1 << 20)), 64 << 20);
        assert_eq!(defaults::cache_memory_bytes(None), 0);
        assert_eq!(
            parse_mem_total("MemTotal:       24582420 kB\nMemFree: 1 kB\n"),
            Some(24_582_420 * 1024)
        );
        assert_eq!(parse_mem_total("MemFree: 1 kB\n"), None);
        assert!(
            usable_memory().is_some_and(|bytes| bytes > 0),
            "Linux has /proc/meminfo"
        );
    }

    #[test]
    fn defaults_and_flags_over_file() {
        let config = ServeConfig::from_args(ServeArgs::default()).unwrap();
        assert_eq!(config.listen.to_string(), "127.0.0.1:8080");
        assert_eq!(config.store, StoreKind::Embedded);
        assert_eq!(config.prefix, "/registry");
        let file: ServeArgs =
            toml::from_str("store = \"memory\"\npass-members-max = 7\nlisten = \"127.0.0.1:9\"")
                .unwrap();
        let flags = ServeArgs {
            listen: Some("127.0.0.1:10".parse().unwrap()),
            ..ServeArgs::default()
        };
        let config = ServeConfig::from_args(flags.or(file)).unwrap();
        assert_eq!(config.store, StoreKind::Memory);
        assert_eq!(config.cache.pass_members_max, 7);
        assert_eq!(config.listen.port(), 10, "flags win");
        let file: ServeArgs = toml::from_str(
            "token-auth-file = \"/etc/tokens.csv\"\nauthorization-policy-file = \"/etc/abac.jsonl\"",
        )
        .unwrap();
        let flags = ServeArgs {
            token_auth_file: Some("/flag/tokens.csv".into()),
            ..ServeArgs::default()
        };
        let config = ServeConfig::from_args(flags.or(file)).unwrap();
        assert_eq!(
            config.token_auth_file,
            Some(PathBuf::from("/flag/tokens.csv"))
        );
        assert_eq!(
            config.authorization_policy_file,
            Some(PathBuf::from("/etc/abac.jsonl"))
        );
    }

    #[test]
    fn bad_values_are_named() {
        let err = ServeConfig::from_args(ServeArgs {
            store: Some("mysql".into()),
            ..ServeArgs::default()
        })
        .unwrap_err()
        .to_string();
        assert!(err.contains("--store"), "{err}");
        let err = ServeConfig::from_args(ServeArgs {
            pass_members_max: Some(0),
            ..ServeArgs::default()
        })
        .unwrap_err()
        .to_string();
        assert!(err.contains("pass_members_max"), "{err}");
        let err = ServeConfig::from_args(ServeArgs {
            queue_capacity_min: Some(2000),
            ..ServeArgs::default()
        })
        .unwrap_err()
        .to_string();
        assert!(err.contains("queue_capacity_max"), "{err}");
        let config = ServeConfig::from_args(ServeArgs {
            queue_capacity_min: Some(100),
            ..ServeArgs::default()
        })
        .unwrap();
        assert_eq!(config.cache.queue_capacity_min, 100);
        assert!(
            ServeConfig::from_args(ServeArgs {
                store: Some("etcd".into()),
                ..ServeArgs::default()
            })
            .is_err()
        );
        assert!(toml::from_str::<ServeArgs>("nonsense = 1").is_err());
    }

    #[test]
    fn upstream_mode_is_validated() {
        let file: ServeArgs = toml::from_str(
            "upstream = \"https://10.0.0.1:6443\"\nupstream-kubeconfig = \"/etc/kubeconfig\"\nupstream-resources = [\"pods\", \"deployments.apps\"]\nupstream-impersonate = true",
        )
        .unwrap();
        let config = ServeConfig::from_args(ServeArgs::default().or(file)).unwrap();
        assert_eq!(
            config.upstream,
            Some(UpstreamConfig {
                url: Some("https://10.0.0.1:6443".into()),
                kubeconfig: Some("/etc/kubeconfig".into()),
                resources: vec!["pods".into(), "deployments.apps".into()],
                impersonate: true,
                streaming_lists: true,
                list_page_size: 500,
                watch_timeout_seconds: 290,
            })
        );
        assert_eq!(
            ServeConfig::from_args(ServeArgs::default())
                .unwrap()
                .upstream,
            None
        );
        let err = ServeConfig::from_args(ServeArgs {
            upstream: Some("http://127.0.0.1:1".into()),
            upstream_list_page_size: Some(0),
            ..ServeArgs::default()
        })
        .unwrap_err()
        .to_string();
        assert!(err.contains("--upstream-list-page-size"), "{err}");
        let err = ServeConfig::from_args(ServeArgs {
            upstream_watch_timeout_seconds: Some(60),
            ..ServeArgs::default()
        })
        .unwrap_err()
        .to_string();
        assert!(err.contains("need --upstream"), "{err}");
        let err = ServeConfig::from_args(ServeArgs {
            upstream: Some("http://127.0.0.1:1".into()),
            store: Some("memory".into()),
            ..ServeArgs::default()
        })
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("--store cannot be combined with --upstream"),
            "{err}"
        );
        let err = ServeConfig::from_args(ServeArgs {
            upstream: Some("ftp://x".into()),
            ..ServeArgs::default()
        })
        .unwrap_err()
        .to_string();
        assert!(err.contains("--upstream"), "{err}");
        let err = ServeConfig::from_args(ServeArgs {
            upstream_impersonate: Some(true),
            ..ServeArgs::default()
        })
        .unwrap_err()
        .to_string();
        assert!(err.contains("need --upstream"), "{err}");
    }
}
