//! `meta.k8s.io/v1` Table output, what `kubectl get` asks for with
//! `Accept: application/json;as=Table;v=v1;g=meta.k8s.io`.
//!
//! Columns and cells follow kubectl's printers (`pkg/printers/internalversion/printers.go`)
//! for the built-in kinds; the server always generates the wide columns too (priority 1), and
//! kubectl hides them unless `-o wide`. Other kinds get `Name` and `Age`. Rows carry the
//! object's metadata as a `PartialObjectMetadata` (`includeObject=Metadata`, the default),
//! from which kubectl prints the NAMESPACE column of `-A`. The current time is a parameter.

use serde_json::{Map, Value, json};

use crate::resources::{ResourceDef, lookup};
use crate::time::{human_duration, unix_from_rfc3339};

/// One column: name, type (`string`, `integer`, `date`), format (`name` for the name column),
/// priority (0 shown by default, 1 only with `-o wide`), description.
struct Column {
    name: &'static str,
    kind: &'static str,
    format: &'static str,
    priority: u8,
    description: &'static str,
}

const fn column(
    name: &'static str,
    kind: &'static str,
    priority: u8,
    description: &'static str,
) -> Column {
    Column {
        name,
        kind,
        format: "",
        priority,
        description,
    }
}

const NAME: Column = Column {
    name: "Name",
    kind: "string",
    format: "name",
    priority: 0,
    description: "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names",
};

const AGE: Column = column(
    "Age",
    "string",
    0,
    "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata",
);

const NONE: &str = "<none>";

fn columns(def: &ResourceDef) -> Vec<Column> {
    if !def.is_builtin() {
        return vec![NAME, AGE];
    }
    match def.plural.as_str() {
        "pods" => vec![
            NAME,
            column(
                "Ready",
                "string",
                0,
                "The aggregate readiness state of this pod for accepting traffic.",
            ),
            column(
                "Status",
                "string",
                0,
                "The aggregate status of the containers in this pod.",
            ),
            column(
                "Restarts",
                "string",
                0,
                "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.",
            ),
            AGE,
            column(
                "IP",
                "string",
                1,
                "IP address allocated to the pod. Routable at least within the cluster. Empty if not yet allocated.",
            ),
            column(
                "Node",
                "string",
                1,
                "NodeName is a request to schedule this pod onto a specific node.",
            ),
            column(
                "Nominated Node",
                "string",
                1,
                "nominatedNodeName is set when this pod preempts other pods on the node, but it cannot be scheduled right away as preemption victims receive their graceful termination periods.",
            ),
            column(
                "Readiness Gates",
                "string",
                1,
                "If specified, all readiness gates will be evaluated for pod readiness.",
            ),
        ],
        "deployments" => vec![
            NAME,
            column("Ready", "string", 0, "Number of the pod with ready state"),
            column(
                "Up-to-date",
                "integer",
                0,
                "Total number of non-terminated pods targeted by this deployment that have the desired template spec.",
            ),
            column(
                "Available",
                "integer",
                0,
                "Total number of available pods (ready for at least minReadySeconds) targeted by this deployment.",
            ),
            AGE,
            column(
                "Containers",
                "string",
                1,
                "Names of each container in the template.",
            ),
            column(
                "Images",
                "string",
                1,
                "Images referenced by each container in the template.",
            ),
            column(
                "Selector",
                "string",
                1,
                "Label selector for pods. Existing ReplicaSets whose pods are selected by this will be the ones affected by this deployment.",
            ),
        ],
        "replicasets" => vec![
            NAME,
            column(
                "Desired",
                "integer",
                0,
                "Replicas is the number of desired replicas.",
            ),
            column(
                "Current",
                "integer",
                0,
                "Replicas is the most recently observed number of replicas.",
            ),
            column(
                "Ready",
                "integer",
                0,
                "The number of ready replicas for this replica set.",
            ),
            AGE,
            column(
                "Containers",
                "string",
                1,
                "Names of each container in the template.",
            ),
            column(
                "Images",
                "string",
                1,
                "Images referenced by each container in the template.",
            ),
            column(
                "Selector",
                "string",
                1,
                "Selector is a label query over pods that should match the replica count.",
            ),
        ],
        "statefulsets" => vec![
            NAME,
            column("Ready", "string", 0, "Number of the pod with ready state"),
            AGE,
            column(
                "Containers",
                "string",
                1,
                "Names of each container in the template.",
            ),
            column(
                "Images",
                "string",
                1,
                "Images referenced by each container in the template.",
            ),
        ],
        "daemonsets" => vec![
            NAME,
            column(
                "Desired",
                "integer",
                0,
                "The total number of nodes that should be running the daemon pod.",
            ),
            column(
                "Current",
                "integer",
                0,
                "The number of nodes that are running at least 1 daemon pod and are supposed to run the daemon pod.",
            ),
            column(
                "Ready",
                "integer",
                0,
                "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and ready.",
            ),
            column(
                "Up-to-date",
                "integer",
                0,
                "The total number of nodes that are running updated daemon pod",
            ),
            column(
                "Available",
                "integer",
                0,
                "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and available (ready for at least spec.minReadySeconds)",
            ),
            column(
                "Node Selector",
                "string",
                0,
                "NodeSelector is a selector which must be true for the pod to fit on a node.",
            ),
            AGE,
            column(
                "Containers",
                "string",
                1,
                "Names of each container in the template.",
            ),
            column(
                "Images",
                "string",
                1,
                "Images referenced by each container in the template.",
            ),
            column(
                "Selector",
                "string",
                1,
                "A label query over pods that are managed by the daemon set.",
            ),
        ],
        "services" => vec![
            NAME,
            column(
                "Type",
                "string",
                0,
                "type determines how the Service is exposed.",
            ),
            column(
                "Cluster-IP",
                "string",
                0,
                "clusterIP is the IP address of the service and is usually assigned randomly.",
            ),
            column(
                "External-IP",
                "string",
                0,
                "externalIPs is a list of IP addresses for which nodes in the cluster will also accept traffic for this service.",
            ),
            column(
                "Port(s)",
                "string",
                0,
                "The list of ports that are exposed by this service.",
            ),
            AGE,
            column(
                "Selector",
                "string",
                1,
                "Route service traffic to pods with label keys and values matching this selector.",
            ),
        ],
        "nodes" => vec![
            NAME,
            column("Status", "string", 0, "The status of the node"),
            column("Roles", "string", 0, "The roles of the node"),
            AGE,
            column(
                "Version",
                "string",
                0,
                "Kubelet Version reported by the node.",
            ),
            column(
                "Internal-IP",
                "string",
                1,
                "List of addresses reachable to the node. Queried from cloud provider, if available.",
            ),
            column(
                "External-IP",
                "string",
                1,
                "List of addresses reachable to the node. Queried from cloud provider, if available.",
            ),
            column(
                "OS-Image",
                "string",
                1,
                "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy)).",
            ),
            column(
                "Kernel-Version",
                "string",
                1,
                "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64).",
            ),
            column(
                "Container-Runtime",
                "string",
                1,
                "ContainerRuntime Version reported by the node through runtime remote API (e.g. containerd://1.4.2).",
            ),
        ],
        "configmaps" => vec![
            NAME,
            column(
                "Data",
                "integer",
                0,
                "Data contains the configuration data.",
            ),
            AGE,
        ],
        "secrets" => vec![
            NAME,
            column(
                "Type",
                "string",
                0,
                "Used to facilitate programmatic handling of secret data.",
            ),
            column("Data", "integer", 0, "Data contains the secret data."),
            AGE,
        ],
        "namespaces" => vec![
            NAME,
            column("Status", "string", 0, "The status of the namespace"),
            AGE,
        ],
        "componentstatuses" => vec![
            NAME,
            column("Status", "string", 0, "Status of the component conditions"),
            column(
                "Message",
                "string",
                0,
                "Message of the component conditions",
            ),
            column("Error", "string", 0, "Error of the component conditions"),
        ],
        "serviceaccounts" => vec![
            NAME,
            column(
                "Secrets",
                "integer",
                0,
                "Secrets is a list of the secrets in the same namespace that pods running using this ServiceAccount are allowed to use.",
            ),
            AGE,
        ],
        "endpoints" => vec![
            NAME,
            column(
                "Endpoints",
                "string",
                0,
                "Endpoints is the list of endpoints in the service.",
            ),
            AGE,
        ],
        "leases" => vec![
            NAME,
            column(
                "Holder",
                "string",
                0,
                "holderIdentity contains the identity of the holder of a current lease.",
            ),
            AGE,
        ],
        "endpointslices" => vec![
            NAME,
            column(
                "AddressType",
                "string",
                0,
                "addressType specifies the type of address carried by this EndpointSlice.",
            ),
            column(
                "Ports",
                "string",
                0,
                "ports specifies the list of network ports exposed by each endpoint in this slice.",
            ),
            column(
                "Endpoints",
                "string",
                0,
                "endpoints is a list of unique endpoints in this slice.",
            ),
            AGE,
        ],
        "events" => vec![
            column(
                "Last Seen",
                "string",
                0,
                "Time when this event was last seen",
            ),
            column(
                "Type",
                "string",
                0,
                "Type of this event (Normal, Warning), new types could be added in the future.",
            ),
            column(
                "Reason",
                "string",
                0,
                "This should be a short, machine understandable string that gives the reason for the transition into the object's current status.",
            ),
            column(
                "Object",
                "string",
                0,
                "The object that this event is about.",
            ),
            column(
                "Subobject",
                "string",
                1,
                "The subobject that this event is about.",
            ),
            column("Source", "string", 1, "The component reporting this event."),
            column(
                "Message",
                "string",
                0,
                "A human-readable description of the status of this operation.",
            ),
            column(
                "First Seen",
                "string",
                1,
                "The time at which the event was first recorded.",
            ),
            column(
                "Count",
                "integer",
                1,
                "The number of times this event has occurred.",
            ),
            Column {
                priority: 1,
                ..NAME
            },
        ],
        _ => vec![NAME, AGE],
    }
}

fn text<'a>(object: &'a Value, path: &str) -> &'a str {
    lookup(object, path).and_then(Value::as_str).unwrap_or("")
}

fn int(object: &Value, path: &str) -> i64 {
    lookup(object, path).and_then(Value::as_i64).unwrap_or(0)
}

fn array<'a>(object: &'a Value, path: &str) -> &'a [Value] {
    lookup(object, path)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

fn or_none(s: &str) -> String {
    if s.is_empty() {
        NONE.to_owned()
    } else {
        s.to_owned()
    }
}

/// kubectl's `translateTimestampSince`.
fn age(timestamp: &str, now: i64) -> String {
    match unix_from_rfc3339(timestamp) {
        Some(then) => human_duration(now - then),
        None => "<unknown>".to_owned(),
    }
}

fn names_and_images(containers: &[Value]) -> (String, String) {
    let names: Vec<&str> = containers.iter().map(|c| text(c, "name")).collect();
    let images: Vec<&str> = containers.iter().map(|c| text(c, "image")).collect();
    (names.join(","), images.join(","))
}

/// A label selector (`matchLabels` only, plus `matchExpressions` summarised) as kubectl prints.
fn selector_string(selector: Option<&Value>) -> String {
    let Some(selector) = selector else {
        return NONE.to_owned();
    };
    let mut parts: Vec<String> = selector
        .get("matchLabels")
        .and_then(Value::as_object)
        .map(|labels| {
            labels
                .iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                .collect()
        })
        .unwrap_or_default();
    for expression in array(selector, "matchExpressions") {
        let key = text(expression, "key");
        let values: Vec<&str> = array(expression, "values")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        parts.push(match text(expression, "operator") {
            "In" => format!("{key} in ({})", values.join(",")),
            "NotIn" => format!("{key} notin ({})", values.join(",")),
            "Exists" => key.to_owned(),
            "DoesNotExist" => format!("!{key}"),
            other => format!("{key} {other}"),
        });
    }
    if parts.is_empty() {
        NONE.to_owned()
    } else {
        parts.join(",")
    }
}

fn map_selector_string(selector: Option<&Value>) -> String {
    match selector.and_then(Value::as_object) {
        Some(map) if !map.is_empty() => map
            .iter()
            .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
            .collect::<Vec<_>>()
            .join(","),
        _ => NONE.to_owned(),
    }
}

/// The cells of one row, in column order.
#[allow(clippy::too_many_lines)]
fn cells(def: &ResourceDef, object: &Value, now: i64) -> Vec<Value> {
    let name = Value::String(text(object, "metadata.name").to_owned());
    let created = Value::String(age(text(object, "metadata.creationTimestamp"), now));
    if !def.is_builtin() {
        return vec![name, created];
    }
    match def.plural.as_str() {
        "pods" => pod_cells(object, name, created, now),
        "deployments" => {
            let (containers, images) =
                names_and_images(array(object, "spec.template.spec.containers"));
            let desired = lookup(object, "spec.replicas")
                .and_then(Value::as_i64)
                .unwrap_or(1);
            vec![
                name,
                json!(format!("{}/{desired}", int(object, "status.readyReplicas"))),
                json!(int(object, "status.updatedReplicas")),
                json!(int(object, "status.availableReplicas")),
                created,
                json!(containers),
                json!(images),
                json!(selector_string(lookup(object, "spec.selector"))),
            ]
        }
        "replicasets" => {
            let (containers, images) =
                names_and_images(array(object, "spec.template.spec.containers"));
            let desired = lookup(object, "spec.replicas")
                .and_then(Value::as_i64)
                .unwrap_or(1);
            vec![
                name,
                json!(desired),
                json!(int(object, "status.replicas")),
                json!(int(object, "status.readyReplicas")),
                created,
                json!(containers),
                json!(images),
                json!(selector_string(lookup(object, "spec.selector"))),
            ]
        }
        "statefulsets" => {
            let (containers, images) =
                names_and_images(array(object, "spec.template.spec.containers"));
            let desired = lookup(object, "spec.replicas")
                .and_then(Value::as_i64)
                .unwrap_or(1);
            vec![
                name,
                json!(format!("{}/{desired}", int(object, "status.readyReplicas"))),
                created,
                json!(containers),
                json!(images),
            ]
        }
        "daemonsets" => {
            let (containers, images) =
                names_and_images(array(object, "spec.template.spec.containers"));
            vec![
                name,
                json!(int(object, "status.desiredNumberScheduled")),
                json!(int(object, "status.currentNumberScheduled")),
                json!(int(object, "status.numberReady")),
                json!(int(object, "status.updatedNumberScheduled")),
                json!(int(object, "status.numberAvailable")),
                json!(map_selector_string(lookup(
                    object,
                    "spec.template.spec.nodeSelector"
                ))),
                created,
                json!(containers),
                json!(images),
                json!(selector_string(lookup(object, "spec.selector"))),
            ]
        }
        "services" => service_cells(object, name, created),
        "nodes" => node_cells(object, name, created),
        "configmaps" => {
            let data = count_keys(object, "data") + count_keys(object, "binaryData");
            vec![name, json!(data), created]
        }
        "secrets" => {
            let data = count_keys(object, "data") + count_keys(object, "stringData");
            let kind = match text(object, "type") {
                "" => "Opaque",
                other => other,
            };
            vec![name, json!(kind), json!(data), created]
        }
        "namespaces" => vec![name, json!(text(object, "status.phase")), created],
        "componentstatuses" => {
            let (status, message, error) = crate::componentstatus::table_cells(object);
            vec![name, json!(status), json!(message), json!(error)]
        }
        "serviceaccounts" => vec![name, json!(array(object, "secrets").len()), created],
        "endpoints" => {
            let mut endpoints = Vec::new();
            for subset in array(object, "subsets") {
                let ports: Vec<i64> = array(subset, "ports")
                    .iter()
                    .map(|p| int(p, "port"))
                    .collect();
                for address in array(subset, "addresses") {
                    let ip = text(address, "ip");
                    if ports.is_empty() {
                        endpoints.push(ip.to_owned());
                    }
                    for port in &ports {
                        endpoints.push(format!("{ip}:{port}"));
                    }
                }
            }
            vec![name, json!(list_with_more(&endpoints)), created]
        }
        "leases" => vec![name, json!(text(object, "spec.holderIdentity")), created],
        "endpointslices" => {
            let ports: Vec<String> = array(object, "ports")
                .iter()
                .map(|p| {
                    lookup(p, "port")
                        .and_then(Value::as_i64)
                        .map_or("<unset>".to_owned(), |p| p.to_string())
                })
                .collect();
            let addresses: Vec<String> = array(object, "endpoints")
                .iter()
                .flat_map(|e| {
                    array(e, "addresses")
                        .iter()
                        .filter_map(Value::as_str)
                        .map(str::to_owned)
                })
                .collect();
            let ports = if ports.is_empty() {
                "<unset>".to_owned()
            } else {
                ports.join(",")
            };
            vec![
                name,
                json!(text(object, "addressType")),
                json!(ports),
                json!(list_with_more(&addresses)),
                created,
            ]
        }
        "events" => event_cells(object, name, now),
        _ => vec![name, created],
    }
}

/// The first three items and `+ N more...`, as kubectl prints endpoints.
fn list_with_more(items: &[String]) -> String {
    if items.is_empty() {
        return NONE.to_owned();
    }
    let shown = items.iter().take(3).cloned().collect::<Vec<_>>().join(",");
    if items.len() > 3 {
        format!("{shown} + {} more...", items.len() - 3)
    } else {
        shown
    }
}

fn count_keys(object: &Value, key: &str) -> usize {
    object
        .get(key)
        .and_then(Value::as_object)
        .map_or(0, Map::len)
}

fn pod_cells(object: &Value, name: Value, created: Value, now: i64) -> Vec<Value> {
    let containers = array(object, "spec.containers");
    let statuses = array(object, "status.containerStatuses");
    let mut reason = match text(object, "status.reason") {
        "" => text(object, "status.phase").to_owned(),
        r => r.to_owned(),
    };
    let mut restarts = 0i64;
    let mut last_restart: Option<i64> = None;
    let mut ready = 0usize;
    let mut note_restart = |status: &Value| {
        restarts += int(status, "restartCount");
        if let Some(finished) = lookup(status, "lastState.terminated.finishedAt")
            .and_then(Value::as_str)
            .and_then(unix_from_rfc3339)
        {
            last_restart = Some(last_restart.map_or(finished, |t: i64| t.max(finished)));
        }
    };

    // Init containers: the first one not done decides an `Init:` status.
    let init_statuses = array(object, "status.initContainerStatuses");
    let init_total = array(object, "spec.initContainers").len();
    let mut initializing = false;
    for (index, status) in init_statuses.iter().enumerate() {
        note_restart(status);
        let terminated = lookup(status, "state.terminated");
        let waiting_reason = text(status, "state.waiting.reason");
        if terminated.is_some_and(|t| int(t, "exitCode") == 0) {
            continue;
        }
        initializing = true;
        reason = if let Some(terminated) = terminated {
            match text(terminated, "reason") {
                "" if int(terminated, "signal") != 0 => {
                    format!("Init:Signal:{}", int(terminated, "signal"))
                }
                "" => format!("Init:ExitCode:{}", int(terminated, "exitCode")),
                r => format!("Init:{r}"),
            }
        } else if !waiting_reason.is_empty() && waiting_reason != "PodInitializing" {
            format!("Init:{waiting_reason}")
        } else {
            format!("Init:{index}/{init_total}")
        };
        break;
    }

    if !initializing {
        restarts = 0;
        last_restart = None;
        let mut has_running = false;
        for status in statuses.iter().rev() {
            restarts += int(status, "restartCount");
            if let Some(finished) = lookup(status, "lastState.terminated.finishedAt")
                .and_then(Value::as_str)
                .and_then(unix_from_rfc3339)
            {
                last_restart = Some(last_restart.map_or(finished, |t| t.max(finished)));
            }
            let waiting = text(status, "state.waiting.reason");
            if !waiting.is_empty() {
                reason = waiting.to_owned();
            } else if let Some(terminated) = lookup(status, "state.terminated") {
                reason = match text(terminated, "reason") {
                    "" if int(terminated, "signal") != 0 => {
                        format!("Signal:{}", int(terminated, "signal"))
                    }
                    "" => format!("ExitCode:{}", int(terminated, "exitCode")),
                    r => r.to_owned(),
                };
            } else if lookup(status, "state.running").is_some()
                && lookup(status, "ready").and_then(Value::as_bool) == Some(true)
            {
                has_running = true;
                ready += 1;
            }
        }
        if reason == "Completed" && has_running {
            reason = if pod_ready(object) {
                "Running"
            } else {
                "NotReady"
            }
            .to_owned();
        }
    }
    if lookup(object, "metadata.deletionTimestamp").is_some_and(|v| !v.is_null()) {
        reason = if text(object, "status.reason") == "NodeLost" {
            "Unknown"
        } else {
            "Terminating"
        }
        .to_owned();
    }
    let restarts = match last_restart {
        Some(at) if restarts > 0 => format!("{restarts} ({} ago)", human_duration(now - at)),
        _ => restarts.to_string(),
    };
    let ip = array(object, "status.podIPs")
        .first()
        .map(|ip| text(ip, "ip"))
        .filter(|ip| !ip.is_empty())
        .unwrap_or_else(|| text(object, "status.podIP"));
    let gates = array(object, "spec.readinessGates");
    let gates = if gates.is_empty() {
        NONE.to_owned()
    } else {
        let conditions = array(object, "status.conditions");
        let true_count = gates
            .iter()
            .filter(|g| {
                conditions.iter().any(|c| {
                    text(c, "type") == text(g, "conditionType") && text(c, "status") == "True"
                })
            })
            .count();
        format!("{true_count}/{}", gates.len())
    };
    vec![
        name,
        json!(format!("{ready}/{}", containers.len())),
        json!(reason),
        json!(restarts),
        created,
        json!(or_none(ip)),
        json!(or_none(text(object, "spec.nodeName"))),
        json!(or_none(text(object, "status.nominatedNodeName"))),
        json!(gates),
    ]
}

fn pod_ready(object: &Value) -> bool {
    array(object, "status.conditions")
        .iter()
        .any(|c| text(c, "type") == "Ready" && text(c, "status") == "True")
}

fn service_cells(object: &Value, name: Value, created: Value) -> Vec<Value> {
    let kind = match text(object, "spec.type") {
        "" => "ClusterIP",
        other => other,
    };
    let external_ips: Vec<String> = array(object, "spec.externalIPs")
        .iter()
        .filter_map(Value::as_str)
        .map(str::to_owned)
        .collect();
    let external = match kind {
        "ClusterIP" | "NodePort" => {
            if external_ips.is_empty() {
                NONE.to_owned()
            } else {
                external_ips.join(",")
            }
        }
        "LoadBalancer" => {
            let mut ips: Vec<String> = array(object, "status.loadBalancer.ingress")
                .iter()
                .map(|i| match text(i, "ip") {
                    "" => text(i, "hostname").to_owned(),
                    ip => ip.to_owned(),
                })
                .collect();
            ips.extend(external_ips);
            if ips.is_empty() {
                "<pending>".to_owned()
            } else {
                ips.join(",")
            }
        }
        "ExternalName" => text(object, "spec.externalName").to_owned(),
        _ => "<unknown>".to_owned(),
    };
    let ports: Vec<String> = array(object, "spec.ports")
        .iter()
        .map(|p| {
            let protocol = match text(p, "protocol") {
                "" => "TCP",
                other => other,
            };
            match int(p, "nodePort") {
                0 => format!("{}/{protocol}", int(p, "port")),
                node_port => format!("{}:{node_port}/{protocol}", int(p, "port")),
            }
        })
        .collect();
    let ports = if ports.is_empty() {
        NONE.to_owned()
    } else {
        ports.join(",")
    };
    vec![
        name,
        json!(kind),
        json!(or_none(text(object, "spec.clusterIP"))),
        json!(external),
        json!(ports),
        created,
        json!(map_selector_string(lookup(object, "spec.selector"))),
    ]
}

fn node_cells(object: &Value, name: Value, created: Value) -> Vec<Value> {
    let conditions = array(object, "status.conditions");
    let mut status: Vec<String> = Vec::new();
    match conditions.iter().find(|c| text(c, "type") == "Ready") {
        Some(c) if text(c, "status") == "True" => status.push("Ready".into()),
        Some(_) => status.push("NotReady".into()),
        None => status.push("Unknown".into()),
    }
    if lookup(object, "spec.unschedulable").and_then(Value::as_bool) == Some(true) {
        status.push("SchedulingDisabled".into());
    }
    let mut roles: Vec<String> = object
        .get("metadata")
        .and_then(|m| m.get("labels"))
        .and_then(Value::as_object)
        .map(|labels| {
            labels
                .iter()
                .filter_map(|(k, v)| {
                    if let Some(role) = k.strip_prefix("node-role.kubernetes.io/") {
                        (!role.is_empty()).then(|| role.to_owned())
                    } else if k == "kubernetes.io/role" {
                        v.as_str().filter(|v| !v.is_empty()).map(str::to_owned)
                    } else {
                        None
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    roles.sort();
    roles.dedup();
    let address = |kind: &str| {
        array(object, "status.addresses")
            .iter()
            .find(|a| text(a, "type") == kind)
            .map_or(NONE.to_owned(), |a| or_none(text(a, "address")))
    };
    vec![
        name,
        json!(status.join(",")),
        json!(if roles.is_empty() {
            NONE.to_owned()
        } else {
            roles.join(",")
        }),
        created,
        json!(text(object, "status.nodeInfo.kubeletVersion")),
        json!(address("InternalIP")),
        json!(address("ExternalIP")),
        json!(or_none(text(object, "status.nodeInfo.osImage"))),
        json!(or_none(text(object, "status.nodeInfo.kernelVersion"))),
        json!(or_none(text(
            object,
            "status.nodeInfo.containerRuntimeVersion"
        ))),
    ]
}

fn event_cells(object: &Value, name: Value, now: i64) -> Vec<Value> {
    let first_seen = match text(object, "firstTimestamp") {
        "" => text(object, "eventTime"),
        t => t,
    };
    let first = age(first_seen, now);
    let mut last = match text(object, "lastTimestamp") {
        "" => first.clone(),
        t => age(t, now),
    };
    let mut count = int(object, "count");
    if let Some(series) = object.get("series").filter(|s| s.is_object()) {
        last = age(text(series, "lastObservedTime"), now);
        count = int(series, "count");
    } else if count == 0 {
        count = 1;
    }
    let kind = text(object, "involvedObject.kind").to_ascii_lowercase();
    let target = match text(object, "involvedObject.name") {
        "" => kind,
        n => format!("{kind}/{n}"),
    };
    let component = match text(object, "source.component") {
        "" => text(object, "reportingComponent"),
        c => c,
    };
    let host = match text(object, "source.host") {
        "" => text(object, "reportingInstance"),
        h => h,
    };
    let source = if host.is_empty() {
        component.to_owned()
    } else {
        format!("{component}, {host}")
    };
    vec![
        json!(last),
        json!(text(object, "type")),
        json!(text(object, "reason")),
        json!(target),
        json!(text(object, "involvedObject.fieldPath")),
        json!(source),
        json!(text(object, "message").trim()),
        json!(first),
        json!(count),
        name,
    ]
}

/// The object's metadata as `meta.k8s.io/v1` `PartialObjectMetadata`.
#[must_use]
pub fn partial_object_metadata(object: &Value) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": object.get("metadata").cloned().unwrap_or_else(|| json!({})),
    })
}

/// A `meta.k8s.io/v1` Table of `objects`, with `metadata.resourceVersion` and (when given)
/// `metadata.continue`; ages are computed against `now_unix_seconds`.
#[must_use]
pub fn to_table(
    def: &ResourceDef,
    objects: &[&Value],
    resource_version: &str,
    continue_token: Option<&str>,
    now_unix_seconds: i64,
) -> Value {
    to_table_with(
        def,
        objects,
        resource_version,
        continue_token,
        now_unix_seconds,
        true,
    )
}

/// [`to_table`] with the column definitions optional: Kubernetes sends them only in the first
/// event of a watch (`include_column_definitions = false` for the rest).
#[must_use]
pub fn to_table_with(
    def: &ResourceDef,
    objects: &[&Value],
    resource_version: &str,
    continue_token: Option<&str>,
    now_unix_seconds: i64,
    include_column_definitions: bool,
) -> Value {
    if let Some(table) = crate::crd::printer_table(
        &def.printer_columns,
        objects,
        resource_version,
        continue_token,
        now_unix_seconds,
        include_column_definitions,
    ) {
        return table;
    }
    let definitions: Vec<Value> = if include_column_definitions {
        columns(def)
            .iter()
            .map(|c| {
                json!({
                    "name": c.name,
                    "type": c.kind,
                    "format": c.format,
                    "description": c.description,
                    "priority": c.priority,
                })
            })
            .collect()
    } else {
        Vec::new()
    };
    let rows: Vec<Value> = objects
        .iter()
        .map(|object| {
            json!({
                "cells": cells(def, object, now_unix_seconds),
                "object": partial_object_metadata(object),
            })
        })
        .collect();
    let mut metadata = Map::new();
    if !resource_version.is_empty() {
        metadata.insert("resourceVersion".into(), json!(resource_version));
    }
    if let Some(token) = continue_token.filter(|t| !t.is_empty()) {
        metadata.insert("continue".into(), json!(token));
    }
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": metadata,
        "columnDefinitions": definitions,
        "rows": rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::builtin_resources;
    use crate::time::rfc3339_from_unix;

    fn def(plural: &str) -> ResourceDef {
        builtin_resources()
            .into_iter()
            .find(|d| d.plural == plural)
            .unwrap()
    }

    const NOW: i64 = 1_800_000_000;

    fn column_names(table: &Value) -> Vec<&str> {
        table["columnDefinitions"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["priority"] == 0)
            .map(|c| c["name"].as_str().unwrap())
            .collect()
    }

    #[test]
    fn pod_table() {
        let pod = json!({
            "metadata": {"name": "web-0", "namespace": "d", "creationTimestamp": rfc3339_from_unix(NOW - 300), "labels": {"a": "b"}},
            "spec": {"nodeName": "n1", "containers": [{"name": "a"}, {"name": "b"}]},
            "status": {"phase": "Running", "podIP": "10.0.0.5", "containerStatuses": [
                {"name": "a", "ready": true, "restartCount": 2, "state": {"running": {}},
                 "lastState": {"terminated": {"finishedAt": rfc3339_from_unix(NOW - 90)}}},
                {"name": "b", "ready": false, "restartCount": 0, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}
            ]}
        });
        let table = to_table(&def("pods"), &[&pod], "42", Some("next"), NOW);
        assert_eq!(table["kind"], "Table");
        assert_eq!(table["apiVersion"], "meta.k8s.io/v1");
        assert_eq!(
            table["metadata"],
            json!({"resourceVersion": "42", "continue": "next"})
        );
        assert_eq!(
            column_names(&table),
            ["Name", "Ready", "Status", "Restarts", "Age"]
        );
        assert_eq!(table["columnDefinitions"][0]["format"], "name");
        let row = &table["rows"][0];
        assert_eq!(
            row["cells"],
            json!([
                "web-0",
                "1/2",
                "CrashLoopBackOff",
                "2 (90s ago)",
                "5m",
                "10.0.0.5",
                "n1",
                "<none>",
                "<none>"
            ])
        );
        assert_eq!(row["object"]["kind"], "PartialObjectMetadata");
        assert_eq!(row["object"]["metadata"]["namespace"], "d");
        let pending = json!({"metadata": {"name": "p", "creationTimestamp": rfc3339_from_unix(NOW - 10), "deletionTimestamp": "x"},
                             "spec": {"containers": [{"name": "a"}]}, "status": {"phase": "Pending"}});
        let table = to_table_with(&def("pods"), &[&pending], "1", None, NOW, false);
        assert_eq!(table["columnDefinitions"], json!([]));
        assert_eq!(table["metadata"], json!({"resourceVersion": "1"}));
        assert_eq!(
            table["rows"][0]["cells"],
            json!([
                "p",
                "0/1",
                "Terminating",
                "0",
                "10s",
                "<none>",
                "<none>",
                "<none>",
                "<none>"
            ])
        );
    }

    #[test]
    fn deployment_table() {
        let deployment = json!({
            "metadata": {"name": "web", "creationTimestamp": rfc3339_from_unix(NOW - 3 * 86400)},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"spec": {"containers": [{"name": "web", "image": "nginx"}]}}},
            "status": {"readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2}
        });
        let table = to_table(&def("deployments"), &[&deployment], "7", None, NOW);
        assert_eq!(
            column_names(&table),
            ["Name", "Ready", "Up-to-date", "Available", "Age"]
        );
        assert_eq!(
            table["rows"][0]["cells"],
            json!(["web", "2/3", 3, 2, "3d", "web", "nginx", "app=web"])
        );
    }

    #[test]
    fn other_builtin_tables() {
        let created = rfc3339_from_unix(NOW - 7200);
        let service = json!({"metadata": {"name": "s", "creationTimestamp": created},
            "spec": {"clusterIP": "10.96.0.1", "ports": [{"port": 80, "nodePort": 30080}, {"port": 53, "protocol": "UDP"}]}});
        let table = to_table(&def("services"), &[&service], "1", None, NOW);
        assert_eq!(
            column_names(&table),
            [
                "Name",
                "Type",
                "Cluster-IP",
                "External-IP",
                "Port(s)",
                "Age"
            ]
        );
        assert_eq!(
            table["rows"][0]["cells"],
            json!([
                "s",
                "ClusterIP",
                "10.96.0.1",
                "<none>",
                "80:30080/TCP,53/UDP",
                "120m",
                "<none>"
            ])
        );
        let node = json!({"metadata": {"name": "n1", "creationTimestamp": created, "labels": {"node-role.kubernetes.io/control-plane": ""}},
            "spec": {"unschedulable": true},
            "status": {"conditions": [{"type": "Ready", "status": "True"}], "nodeInfo": {"kubeletVersion": "v1.33.0"}}});
        let table = to_table(&def("nodes"), &[&node], "1", None, NOW);
        assert_eq!(
            column_names(&table),
            ["Name", "Status", "Roles", "Age", "Version"]
        );
        assert_eq!(
            table["rows"][0]["cells"],
            json!([
                "n1",
                "Ready,SchedulingDisabled",
                "control-plane",
                "120m",
                "v1.33.0",
                "<none>",
                "<none>",
                "<none>",
                "<none>",
                "<none>"
            ])
        );
        let cm = json!({"metadata": {"name": "c", "creationTimestamp": created}, "data": {"a": "1", "b": "2"}});
        let table = to_table(&def("configmaps"), &[&cm], "1", None, NOW);
        assert_eq!(column_names(&table), ["Name", "Data", "Age"]);
        assert_eq!(table["rows"][0]["cells"], json!(["c", 2, "120m"]));
        let secret = json!({"metadata": {"name": "s", "creationTimestamp": created}, "type": "kubernetes.io/tls", "data": {"a": ""}});
        let table = to_table(&def("secrets"), &[&secret], "1", None, NOW);
        assert_eq!(column_names(&table), ["Name", "Type", "Data", "Age"]);
        assert_eq!(
            table["rows"][0]["cells"],
            json!(["s", "kubernetes.io/tls", 1, "120m"])
        );
        let ns = json!({"metadata": {"name": "n", "creationTimestamp": created}, "status": {"phase": "Active"}});
        let table = to_table(&def("namespaces"), &[&ns], "1", None, NOW);
        assert_eq!(column_names(&table), ["Name", "Status", "Age"]);
        assert_eq!(table["rows"][0]["cells"], json!(["n", "Active", "120m"]));
        let event = json!({"metadata": {"name": "e.1"}, "involvedObject": {"kind": "Pod", "name": "web-0"},
            "type": "Normal", "reason": "Scheduled", "message": " assigned ", "count": 3,
            "firstTimestamp": rfc3339_from_unix(NOW - 600), "lastTimestamp": rfc3339_from_unix(NOW - 60), "source": {"component": "sched"}});
        let table = to_table(&def("events"), &[&event], "1", None, NOW);
        assert_eq!(
            column_names(&table),
            ["Last Seen", "Type", "Reason", "Object", "Message"]
        );
        assert_eq!(
            table["rows"][0]["cells"],
            json!([
                "60s",
                "Normal",
                "Scheduled",
                "pod/web-0",
                "",
                "sched",
                "assigned",
                "10m",
                3,
                "e.1"
            ])
        );
        // Every row has as many cells as there are columns.
        for d in builtin_resources() {
            let table = to_table(&d, &[&json!({})], "1", None, NOW);
            assert_eq!(
                table["columnDefinitions"].as_array().unwrap().len(),
                table["rows"][0]["cells"].as_array().unwrap().len(),
                "{}",
                d.plural
            );
        }
    }

    #[test]
    fn default_table() {
        let mut crd = def("pods");
        crd.group = "example.com".into();
        let widget =
            json!({"metadata": {"name": "w", "creationTimestamp": rfc3339_from_unix(NOW - 45)}});
        let table = to_table(&crd, &[&widget], "9", None, NOW);
        assert_eq!(column_names(&table), ["Name", "Age"]);
        assert_eq!(table["rows"][0]["cells"], json!(["w", "45s"]));
        let table = to_table(&def("leases"), &[], "9", None, NOW);
        assert_eq!(table["rows"], json!([]));
        let no_time = json!({"metadata": {"name": "x"}});
        assert_eq!(
            to_table(&crd, &[&no_time], "1", None, NOW)["rows"][0]["cells"][1],
            "<unknown>"
        );
    }
}
