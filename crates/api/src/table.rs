//! `meta.k8s.io/v1` Table output, what `kubectl get` asks for with
//! `Accept: application/json;as=Table;v=v1;g=meta.k8s.io`.
//!
//! Columns and cells follow kubectl's printers (`pkg/printers/internalversion/printers.go`)
//! for the built-in kinds; the server always generates the wide columns too (priority 1), and
//! kubectl hides them unless `-o wide`. The kinds kube-apiserver serves without a printer
//! (roles, cluster roles, limit ranges, CustomResourceDefinitions) get its default table
//! convertor's `Name` and `Created At`, APIServices the kube-aggregator's columns; the kinds
//! added after the first seventeen are keyed by group and plural, so a custom resource sharing a
//! built-in plural keeps the default. `events.k8s.io/v1` Events get the core Event columns
//! (kube serves both versions from one storage with one printer), and [`scale_table`] is the
//! scale subresource's `printScale`. Other kinds get `Name` and `Age`. Rows carry the
//! object's metadata as a `PartialObjectMetadata` (`includeObject=Metadata`, the default),
//! from which kubectl prints the NAMESPACE column of `-A`. The current time is a parameter.

use serde_json::{Map, Value, json};

use crate::resources::{ResourceDef, lookup, pointer_text};
use crate::time::{human_duration, rfc3339_from_unix, unix_from_rfc3339};
use crate::versions::Conversion;

/// One column: name, type (`string`, `integer`, `date`), format (`name` for the name column),
/// priority (0 shown by default, 1 only with `-o wide`), description.
struct Column {
    name: &'static str,
    kind: &'static str,
    format: &'static str,
    priority: u8,
    description: &'static str,
}

impl Column {
    /// The column's `TableColumnDefinition`.
    fn definition(&self) -> Value {
        json!({
            "name": self.name,
            "type": self.kind,
            "format": self.format,
            "description": self.description,
            "priority": self.priority,
        })
    }
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

const DESIRED_REPLICAS: Column = column(
    "Desired",
    "integer",
    0,
    "Replicas is the number of desired replicas.",
);

const CURRENT_REPLICAS: Column = column(
    "Current",
    "integer",
    0,
    "Replicas is the most recently observed number of replicas.",
);

const NONE: &str = "<none>";

/// Core `v1` Events for `events.k8s.io/v1` Events: kube-apiserver serves both from one
/// storage whose table convertor is the core Event printer, so `kubectl get
/// events.events.k8s.io` prints the same columns as `kubectl get events`.
fn core_events(def: &ResourceDef) -> Option<ResourceDef> {
    (def.group == "events.k8s.io" && def.plural == "events")
        .then(|| ResourceDef::named("", "v1", "events", "Event", true))
}

fn columns(def: &ResourceDef) -> Vec<Column> {
    if let Some(core) = core_events(def) {
        return columns(&core);
    }
    if let Some(columns) = group_columns(def) {
        return columns;
    }
    if !def.is_builtin() {
        // kube-apiserver's default column for a CRD that declares none: `date`-typed.
        return vec![
            NAME,
            Column {
                kind: "date",
                ..AGE
            },
        ];
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
            DESIRED_REPLICAS,
            CURRENT_REPLICAS,
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

// Kinds keyed by group and plural: only the built-in resource of that group gets its printer,
// not a custom resource of the same plural in another group.

const CONTAINERS: Column = column(
    "Containers",
    "string",
    1,
    "Names of each container in the template.",
);

const IMAGES: Column = column(
    "Images",
    "string",
    1,
    "Images referenced by each container in the template.",
);

/// kube-apiserver's default table convertor (`rest.NewDefaultTableConvertor`), for the stores
/// that register no printer (roles, cluster roles, limit ranges, CustomResourceDefinitions):
/// `Name` and `Created At` (an RFC 3339 timestamp).
const CREATED_AT: Column = column("Created At", "date", 0, AGE.description);

const JOB_SELECTOR: Column = column(
    "Selector",
    "string",
    1,
    "A label query over pods that should match the pod count.",
);

const WEBHOOKS: Column = column(
    "Webhooks",
    "integer",
    0,
    "Webhooks indicates the number of webhooks registered in this configuration",
);

/// A role binding's or cluster role binding's columns, with kube's descriptions of the role
/// reference, users, groups and service accounts.
fn binding_columns(descriptions: [&'static str; 4]) -> Vec<Column> {
    let [role, users, groups, accounts] = descriptions;
    vec![
        NAME,
        column("Role", "string", 0, role),
        AGE,
        column("Users", "string", 1, users),
        column("Groups", "string", 1, groups),
        column("ServiceAccounts", "string", 1, accounts),
    ]
}

/// The columns of the kinds printed by group and plural (see [`group_cells`]).
#[allow(clippy::too_many_lines)]
fn group_columns(def: &ResourceDef) -> Option<Vec<Column>> {
    Some(match (def.group.as_str(), def.plural.as_str()) {
        ("batch", "jobs") => vec![
            NAME,
            column("Status", "string", 0, "Status of the job."),
            column(
                "Completions",
                "string",
                0,
                "The number of pods which reached phase Succeeded.",
            ),
            column(
                "Duration",
                "string",
                0,
                "Time required to complete the job.",
            ),
            AGE,
            CONTAINERS,
            IMAGES,
            JOB_SELECTOR,
        ],
        ("batch", "cronjobs") => vec![
            NAME,
            column(
                "Schedule",
                "string",
                0,
                "The schedule in Cron format, see https://en.wikipedia.org/wiki/Cron.",
            ),
            column(
                "Timezone",
                "string",
                0,
                "The time zone name for the given schedule, see https://en.wikipedia.org/wiki/List_of_tz_database_time_zones.",
            ),
            column(
                "Suspend",
                "boolean",
                0,
                "This flag tells the controller to suspend subsequent executions, it does not apply to already started executions.",
            ),
            column(
                "Active",
                "integer",
                0,
                "A list of pointers to currently running jobs.",
            ),
            column(
                "Last Schedule",
                "string",
                0,
                "Information when was the last time the job was successfully scheduled.",
            ),
            AGE,
            CONTAINERS,
            IMAGES,
            JOB_SELECTOR,
        ],
        ("autoscaling", "horizontalpodautoscalers") => vec![
            NAME,
            column(
                "Reference",
                "string",
                0,
                "scaleTargetRef points to the target resource to scale, and is used to the pods for which metrics should be collected, as well as to actually change the replica count.",
            ),
            column(
                "Targets",
                "string",
                0,
                "metrics contains the specifications for which to use to calculate the desired replica count (the maximum replica count across all metrics will be used).",
            ),
            column(
                "MinPods",
                "string",
                0,
                "minReplicas is the lower limit for the number of replicas to which the autoscaler can scale down.",
            ),
            column(
                "MaxPods",
                "string",
                0,
                "maxReplicas is the upper limit for the number of replicas to which the autoscaler can scale up.",
            ),
            column(
                "Replicas",
                "string",
                0,
                "currentReplicas is current number of replicas of pods managed by this autoscaler, as last seen by the autoscaler.",
            ),
            AGE,
        ],
        ("policy", "poddisruptionbudgets") => vec![
            NAME,
            column(
                "Min Available",
                "string",
                0,
                "The minimum number of pods that must be available.",
            ),
            column(
                "Max Unavailable",
                "string",
                0,
                "The maximum number of pods that may be unavailable.",
            ),
            column(
                "Allowed Disruptions",
                "integer",
                0,
                "Calculated number of pods that may be disrupted at this time.",
            ),
            AGE,
        ],
        ("networking.k8s.io", "ingresses") => vec![
            NAME,
            column(
                "Class",
                "string",
                0,
                "The name of the IngressClass resource that should be used for additional configuration",
            ),
            column(
                "Hosts",
                "string",
                0,
                "Hosts that incoming requests are matched against before the ingress rule",
            ),
            column(
                "Address",
                "string",
                0,
                "Address is a list containing ingress points for the load-balancer",
            ),
            column(
                "Ports",
                "string",
                0,
                "Ports of TLS configurations that open",
            ),
            AGE,
        ],
        ("networking.k8s.io", "ingressclasses") => vec![
            NAME,
            column(
                "Controller",
                "string",
                0,
                "Controller that is responsible for handling this class",
            ),
            column(
                "Parameters",
                "string",
                0,
                "A reference to a resource with additional parameters",
            ),
            AGE,
        ],
        ("networking.k8s.io", "servicecidrs") => vec![
            NAME,
            column(
                "CIDRs",
                "string",
                0,
                "CIDRs defines the IP blocks in CIDR notation (e.g. \"192.168.0.0/24\" or \"2001:db8::/64\") from which to assign service cluster IPs. Max of two CIDRs is allowed, one of each IP family. This field is immutable.",
            ),
            AGE,
        ],
        // kube's printer defines two columns and fills three cells (the age last): kubectl
        // prints the two.
        ("networking.k8s.io", "ipaddresses") => vec![
            NAME,
            column(
                "ParentRef",
                "string",
                0,
                "ParentRef references the resource that an IPAddress is attached to. An IPAddress must reference a parent object.",
            ),
        ],
        ("networking.k8s.io", "networkpolicies") => vec![
            NAME,
            column(
                "Pod-Selector",
                "string",
                0,
                "Selects the pods to which this NetworkPolicy object applies.",
            ),
            AGE,
        ],
        ("", "persistentvolumes") => vec![
            NAME,
            column(
                "Capacity",
                "string",
                0,
                "capacity is the description of the persistent volume's resources and capacity.",
            ),
            column(
                "Access Modes",
                "string",
                0,
                "accessModes contains all ways the volume can be mounted.",
            ),
            column(
                "Reclaim Policy",
                "string",
                0,
                "persistentVolumeReclaimPolicy defines what happens to a persistent volume when released from its claim.",
            ),
            column(
                "Status",
                "string",
                0,
                "phase indicates if a volume is available, bound to a claim, or released by a claim.",
            ),
            column(
                "Claim",
                "string",
                0,
                "claimRef is part of a bi-directional binding between PersistentVolume and PersistentVolumeClaim.",
            ),
            column("StorageClass", "string", 0, "StorageClass of the pv"),
            column(
                "VolumeAttributesClass",
                "string",
                0,
                "VolumeAttributesClass of the pv",
            ),
            column(
                "Reason",
                "string",
                0,
                "reason is a brief CamelCase string that describes any failure and is meant for machine parsing and tidy display in the CLI.",
            ),
            AGE,
            column(
                "VolumeMode",
                "string",
                1,
                "volumeMode defines if a volume is intended to be used with a formatted filesystem or to remain in raw block state.",
            ),
        ],
        ("", "persistentvolumeclaims") => vec![
            NAME,
            column(
                "Status",
                "string",
                0,
                "phase represents the current phase of PersistentVolumeClaim.",
            ),
            column(
                "Volume",
                "string",
                0,
                "volumeName is the binding reference to the PersistentVolume backing this claim.",
            ),
            column(
                "Capacity",
                "string",
                0,
                "capacity represents the actual resources of the underlying volume.",
            ),
            column(
                "Access Modes",
                "string",
                0,
                "accessModes contains the actual access modes the volume backing the PVC has.",
            ),
            column("StorageClass", "string", 0, "StorageClass of the pvc"),
            column(
                "VolumeAttributesClass",
                "string",
                0,
                "VolumeAttributesClass of the pvc",
            ),
            AGE,
            column(
                "VolumeMode",
                "string",
                1,
                "volumeMode defines what type of volume is required by the claim.",
            ),
        ],
        ("storage.k8s.io", "storageclasses") => vec![
            NAME,
            column(
                "Provisioner",
                "string",
                0,
                "provisioner indicates the type of the provisioner.",
            ),
            column(
                "ReclaimPolicy",
                "string",
                0,
                "reclaimPolicy controls the reclaimPolicy for dynamically provisioned PersistentVolumes of this storage class.",
            ),
            column(
                "VolumeBindingMode",
                "string",
                0,
                "volumeBindingMode indicates how PersistentVolumeClaims should be provisioned and bound.",
            ),
            column(
                "AllowVolumeExpansion",
                "string",
                0,
                "allowVolumeExpansion shows whether the storage class allow volume expand.",
            ),
            AGE,
        ],
        ("rbac.authorization.k8s.io", "roles" | "clusterroles")
        | ("", "limitranges")
        | ("apiextensions.k8s.io", "customresourcedefinitions") => vec![NAME, CREATED_AT],
        ("rbac.authorization.k8s.io", "rolebindings") => binding_columns([
            "RoleRef can reference a Role in the current namespace or a ClusterRole in the global namespace.",
            "Users in the roleBinding",
            "Groups in the roleBinding",
            "ServiceAccounts in the roleBinding",
        ]),
        ("rbac.authorization.k8s.io", "clusterrolebindings") => binding_columns([
            "RoleRef can only reference a ClusterRole in the global namespace.",
            "Users in the clusterRoleBinding",
            "Groups in the clusterRoleBinding",
            "ServiceAccounts in the clusterRoleBinding",
        ]),
        ("", "resourcequotas") => vec![
            NAME,
            column(
                "Request",
                "string",
                0,
                "Request represents a minimum amount of cpu/memory that a container may consume.",
            ),
            column(
                "Limit",
                "string",
                0,
                "Limits control the maximum amount of cpu/memory that a container may use independent of contention on the node.",
            ),
            AGE,
        ],
        ("scheduling.k8s.io", "priorityclasses") => vec![
            NAME,
            column(
                "Value",
                "integer",
                0,
                "value represents the integer value of this priority class.",
            ),
            column(
                "Global-Default",
                "boolean",
                0,
                "globalDefault specifies whether this PriorityClass should be considered as the default priority for pods that do not have any priority class.",
            ),
            AGE,
            // Priority 0 although only printed wide: kube-apiserver always prints wide.
            column(
                "PreemptionPolicy",
                "string",
                0,
                "preemptionPolicy is the Policy for preempting pods with lower priority.",
            ),
        ],
        ("", "replicationcontrollers") => vec![
            NAME,
            DESIRED_REPLICAS,
            CURRENT_REPLICAS,
            column(
                "Ready",
                "integer",
                0,
                "The number of ready replicas for this replication controller.",
            ),
            AGE,
            CONTAINERS,
            IMAGES,
            column(
                "Selector",
                "string",
                1,
                "Selector is a label query over pods that should match the Replicas count.",
            ),
        ],
        (
            "admissionregistration.k8s.io",
            "validatingwebhookconfigurations" | "mutatingwebhookconfigurations",
        ) => vec![NAME, WEBHOOKS, AGE],
        ("apiregistration.k8s.io", "apiservices") => vec![
            NAME,
            column(
                "Service",
                "string",
                0,
                "The reference to the service that hosts this API endpoint.",
            ),
            column(
                "Available",
                "string",
                0,
                "Whether this service is available.",
            ),
            AGE,
        ],
        ("certificates.k8s.io", "certificatesigningrequests") => vec![
            NAME,
            AGE,
            column(
                "SignerName",
                "string",
                0,
                "Requested signer for the request.",
            ),
            column("Requestor", "string", 0, "Base64-encoded PKCS#10 CSR data"),
            column(
                "RequestedDuration",
                "string",
                0,
                "expirationSeconds is the requested duration of validity of the issued certificate.",
            ),
            column(
                "Condition",
                "string",
                0,
                "Conditions applied to the request, such as approval or denial.",
            ),
        ],
        ("apps", "controllerrevisions") => vec![
            NAME,
            column("Controller", "string", 0, "Controller of the object"),
            column(
                "Revision",
                "string",
                0,
                "Revision indicates the revision of the state represented by Data.",
            ),
            AGE,
        ],
        // kube's description is `ObjectMeta{}.SwaggerDoc()["handler"]`, which does not exist.
        ("node.k8s.io", "runtimeclasses") => vec![NAME, column("Handler", "string", 0, ""), AGE],
        ("storage.k8s.io", "csidrivers") => vec![
            NAME,
            column(
                "AttachRequired",
                "boolean",
                0,
                "attachRequired indicates this CSI volume driver requires an attach operation (because it implements the CSI ControllerPublishVolume() method), and that the Kubernetes attach detach controller should call the attach volume interface which checks the volumeattachment status and waits until the volume is attached before proceeding to mounting. The CSI external-attacher coordinates with CSI volume driver and updates the volumeattachment status when the attach operation is complete. If the CSIDriverRegistry feature gate is enabled and the value is specified to false, the attach operation will be skipped. Otherwise the attach operation will be called.\n\nThis field is immutable.",
            ),
            column(
                "PodInfoOnMount",
                "boolean",
                0,
                "podInfoOnMount indicates this CSI volume driver requires additional pod information (like podName, podUID, etc.) during mount operations, if set to true. If set to false, pod information will not be passed on mount. Default is false.\n\nThe CSI driver specifies podInfoOnMount as part of driver deployment. If true, Kubelet will pass pod information as VolumeContext in the CSI NodePublishVolume() calls. The CSI driver is responsible for parsing and validating the information passed in as VolumeContext.\n\nThe following VolumeContext will be passed if podInfoOnMount is set to true. This list might grow, but the prefix will be used. \"csi.storage.k8s.io/pod.name\": pod.Name \"csi.storage.k8s.io/pod.namespace\": pod.Namespace \"csi.storage.k8s.io/pod.uid\": string(pod.UID) \"csi.storage.k8s.io/ephemeral\": \"true\" if the volume is an ephemeral inline volume\n                                defined by a CSIVolumeSource, otherwise \"false\"\n\n\"csi.storage.k8s.io/ephemeral\" is a new feature in Kubernetes 1.16. It is only required for drivers which support both the \"Persistent\" and \"Ephemeral\" VolumeLifecycleMode. Other drivers can leave pod info disabled and/or ignore this field. As Kubernetes 1.15 doesn't support this field, drivers can only support one mode when deployed on such a cluster and the deployment determines which mode that is, for example via a command line parameter of the driver.\n\nThis field was immutable in Kubernetes < 1.29 and now is mutable.",
            ),
            column(
                "StorageCapacity",
                "boolean",
                0,
                "storageCapacity indicates that the CSI volume driver wants pod scheduling to consider the storage capacity that the driver deployment will report by creating CSIStorageCapacity objects with capacity information, if set to true.\n\nThe check can be enabled immediately when deploying a driver. In that case, provisioning new volumes with late binding will pause until the driver deployment has published some suitable CSIStorageCapacity object.\n\nAlternatively, the driver can be deployed with the field unset or false and it can be flipped later when storage capacity information has been published.\n\nThis field was immutable in Kubernetes <= 1.22 and now is mutable.",
            ),
            column(
                "TokenRequests",
                "string",
                0,
                "tokenRequests indicates the CSI driver needs pods' service account tokens it is mounting volume for to do necessary authentication. Kubelet will pass the tokens in VolumeContext in the CSI NodePublishVolume calls. The CSI driver should parse and validate the following VolumeContext: \"csi.storage.k8s.io/serviceAccount.tokens\": {\n  \"<audience>\": {\n    \"token\": <token>,\n    \"expirationTimestamp\": <expiration timestamp in RFC3339>,\n  },\n  ...\n}\n\nNote: Audience in each TokenRequest should be different and at most one token is empty string. To receive a new token after expiry, RequiresRepublish can be used to trigger NodePublishVolume periodically.",
            ),
            column(
                "RequiresRepublish",
                "boolean",
                0,
                "requiresRepublish indicates the CSI driver wants `NodePublishVolume` being periodically called to reflect any possible change in the mounted volume. This field defaults to false.\n\nNote: After a successful initial NodePublishVolume call, subsequent calls to NodePublishVolume should only update the contents of the volume. New mount points will not be seen by a running container.",
            ),
            column(
                "Modes",
                "string",
                0,
                "volumeLifecycleModes defines what kind of volumes this CSI volume driver supports. The default if the list is empty is \"Persistent\", which is the usage defined by the CSI specification and implemented in Kubernetes via the usual PV/PVC mechanism.\n\nThe other mode is \"Ephemeral\". In this mode, volumes are defined inline inside the pod spec with CSIVolumeSource and their lifecycle is tied to the lifecycle of that pod. A driver has to be aware of this because it is only going to get a NodePublishVolume call for such a volume.\n\nFor more information about implementing this mode, see https://kubernetes-csi.github.io/docs/ephemeral-local-volumes.html A driver can support one or more of these modes and more modes may be added in the future.\n\nThis field is beta. This field is immutable.",
            ),
            AGE,
        ],
        ("storage.k8s.io", "csinodes") => vec![
            NAME,
            column(
                "Drivers",
                "integer",
                0,
                "Drivers indicates the number of CSI drivers registered on the node",
            ),
            AGE,
        ],
        ("storage.k8s.io", "volumeattachments") => vec![
            NAME,
            Column {
                format: "name",
                ..column(
                    "Attacher",
                    "string",
                    0,
                    "attacher indicates the name of the volume driver that MUST handle this request. This is the name returned by GetPluginName().",
                )
            },
            column(
                "PV",
                "string",
                0,
                "persistentVolumeName represents the name of the persistent volume to attach.",
            ),
            column(
                "Node",
                "string",
                0,
                "nodeName represents the node that the volume should be attached to.",
            ),
            column(
                "Attached",
                "boolean",
                0,
                "attached indicates the volume is successfully attached. This field must only be set by the entity completing the attach operation, i.e. the external-attacher.",
            ),
            AGE,
        ],
        // kube prints no age for these.
        ("storage.k8s.io", "csistoragecapacities") => vec![
            NAME,
            column(
                "StorageClassName",
                "string",
                0,
                "storageClassName represents the name of the StorageClass that the reported capacity applies to. It must meet the same requirements as the name of a StorageClass object (non-empty, DNS subdomain). If that object no longer exists, the CSIStorageCapacity object is obsolete and should be removed by its creator. This field is immutable.",
            ),
            column(
                "Capacity",
                "string",
                0,
                "capacity is the value reported by the CSI driver in its GetCapacityResponse for a GetCapacityRequest with topology and parameters that match the previous fields.\n\nThe semantic is currently (CSI spec 1.2) defined as: The available capacity, in bytes, of the storage that can be used to provision volumes. If not set, that information is currently unavailable.",
            ),
        ],
        ("admissionregistration.k8s.io", "validatingadmissionpolicies") => vec![
            NAME,
            column(
                "Validations",
                "integer",
                0,
                "Validations indicates the number of validation rules defined in this configuration",
            ),
            column(
                "ParamKind",
                "string",
                0,
                "ParamKind specifies the kind of resources used to parameterize this policy",
            ),
            AGE,
        ],
        ("admissionregistration.k8s.io", "validatingadmissionpolicybindings") => vec![
            NAME,
            column(
                "PolicyName",
                "string",
                0,
                "PolicyName indicates the policy definition which the policy binding binded to",
            ),
            column(
                "ParamRef",
                "string",
                0,
                "ParamRef indicates the param resource which sets the configration param",
            ),
            AGE,
        ],
        ("flowcontrol.apiserver.k8s.io", "flowschemas") => vec![
            NAME,
            column(
                "PriorityLevel",
                "string",
                0,
                "`name` is the name of the priority level configuration being referenced Required.",
            ),
            column(
                "MatchingPrecedence",
                "string",
                0,
                "`matchingPrecedence` is used to choose among the FlowSchemas that match a given request. The chosen FlowSchema is among those with the numerically lowest (which we take to be logically highest) MatchingPrecedence.  Each MatchingPrecedence value must be ranged in [1,10000]. Note that if the precedence is not specified, it will be set to 1000 as default.",
            ),
            column(
                "DistinguisherMethod",
                "string",
                0,
                "`distinguisherMethod` defines how to compute the flow distinguisher for requests that match this schema. `nil` specifies that the distinguisher is disabled and thus will always be the empty string.",
            ),
            AGE,
            column(
                "MissingPL",
                "string",
                0,
                "references a broken or non-existent PriorityLevelConfiguration",
            ),
        ],
        ("flowcontrol.apiserver.k8s.io", "prioritylevelconfigurations") => vec![
            NAME,
            column(
                "Type",
                "string",
                0,
                "`type` indicates whether this priority level is subject to limitation on request execution.  A value of `\"Exempt\"` means that requests of this priority level are not subject to a limit (and thus are never queued) and do not detract from the capacity made available to other priority levels.  A value of `\"Limited\"` means that (a) requests of this priority level _are_ subject to limits and (b) some of the server's limited capacity is made available exclusively to this priority level. Required.",
            ),
            column(
                "NominalConcurrencyShares",
                "string",
                0,
                "`nominalConcurrencyShares` (NCS) contributes to the computation of the NominalConcurrencyLimit (NominalCL) of this level. This is the number of execution seats available at this priority level. This is used both for requests dispatched from this priority level as well as requests dispatched from other priority levels borrowing seats from this level. The server's concurrency limit (ServerCL) is divided among the Limited priority levels in proportion to their NCS values:\n\nNominalCL(i)  = ceil( ServerCL * NCS(i) / sum_ncs ) sum_ncs = sum[priority level k] NCS(k)\n\nBigger numbers mean a larger nominal concurrency limit, at the expense of every other priority level.\n\nIf not specified, this field defaults to a value of 30.\n\nSetting this field to zero supports the construction of a \"jail\" for this priority level that is used to hold some request(s)",
            ),
            column(
                "Queues",
                "string",
                0,
                "`queues` is the number of queues for this priority level. The queues exist independently at each apiserver. The value must be positive.  Setting it to 1 effectively precludes shufflesharding and thus makes the distinguisher method of associated flow schemas irrelevant.  This field has a default value of 64.",
            ),
            column(
                "HandSize",
                "string",
                0,
                "`handSize` is a small positive number that configures the shuffle sharding of requests into queues.  When enqueuing a request at this priority level the request's flow identifier (a string pair) is hashed and the hash value is used to shuffle the list of queues and deal a hand of the size specified here.  The request is put into one of the shortest queues in that hand. `handSize` must be no larger than `queues`, and should be significantly smaller (so that a few heavy flows do not saturate most of the queues).  See the user-facing documentation for more extensive guidance on setting this field.  This field has a default value of 8.",
            ),
            column(
                "QueueLengthLimit",
                "string",
                0,
                "`queueLengthLimit` is the maximum number of requests allowed to be waiting in a given queue of this priority level at a time; excess requests are rejected.  This value must be positive.  If not specified, it will be defaulted to 50.",
            ),
            AGE,
        ],
        _ => return None,
    })
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
    if let Some(core) = core_events(def) {
        return cells(&core, &Conversion::EventsV1.stored_form(object), now);
    }
    if let Some(cells) = group_cells(def, object, now) {
        return cells;
    }
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

/// The cells of the kinds printed by group and plural, in [`group_columns`] order.
fn group_cells(def: &ResourceDef, object: &Value, now: i64) -> Option<Vec<Value>> {
    let name = || Value::String(text(object, "metadata.name").to_owned());
    let created = || Value::String(age(text(object, "metadata.creationTimestamp"), now));
    Some(match (def.group.as_str(), def.plural.as_str()) {
        ("batch", "jobs") => job_cells(object, name(), created(), now),
        ("batch", "cronjobs") => {
            let last_schedule = match lookup(object, "status.lastScheduleTime") {
                Some(Value::String(t)) => age(t, now),
                _ => NONE.to_owned(),
            };
            let (containers, images) = names_and_images(array(
                object,
                "spec.jobTemplate.spec.template.spec.containers",
            ));
            vec![
                name(),
                json!(text(object, "spec.schedule")),
                json!(optional_text(object, "spec.timeZone").unwrap_or(NONE)),
                json!(bool_pointer(lookup(object, "spec.suspend"))),
                json!(array(object, "status.active").len()),
                json!(last_schedule),
                created(),
                json!(containers),
                json!(images),
                json!(selector_string(lookup(
                    object,
                    "spec.jobTemplate.spec.selector"
                ))),
            ]
        }
        ("autoscaling", "horizontalpodautoscalers") => {
            // kube prints the internal object, whose metrics are v2's: an `autoscaling/v1`
            // object is converted first.
            let converted;
            let object = if def.version == "v1" {
                converted = crate::versions::Conversion::AutoscalingV1.stored_form(object);
                &converted
            } else {
                object
            };
            let reference = format!(
                "{}/{}",
                text(object, "spec.scaleTargetRef.kind"),
                text(object, "spec.scaleTargetRef.name")
            );
            let min_pods = lookup(object, "spec.minReplicas")
                .and_then(Value::as_i64)
                .map_or("<unset>".to_owned(), |n| n.to_string());
            vec![
                name(),
                json!(reference),
                json!(hpa_targets(object)),
                json!(min_pods),
                json!(int(object, "spec.maxReplicas")),
                json!(int(object, "status.currentReplicas")),
                created(),
            ]
        }
        ("policy", "poddisruptionbudgets") => vec![
            name(),
            json!(int_or_string(lookup(object, "spec.minAvailable")).unwrap_or("N/A".into())),
            json!(int_or_string(lookup(object, "spec.maxUnavailable")).unwrap_or("N/A".into())),
            json!(int(object, "status.disruptionsAllowed")),
            created(),
        ],
        ("networking.k8s.io", "ingresses") => {
            let ports = if array(object, "spec.tls").is_empty() {
                "80"
            } else {
                "80, 443"
            };
            vec![
                name(),
                json!(optional_text(object, "spec.ingressClassName").unwrap_or(NONE)),
                json!(ingress_hosts(array(object, "spec.rules"))),
                json!(load_balancer_addresses(array(
                    object,
                    "status.loadBalancer.ingress"
                ))),
                json!(ports),
                created(),
            ]
        }
        ("networking.k8s.io", "servicecidrs") => {
            let cidrs: Vec<&str> = array(object, "spec.cidrs")
                .iter()
                .map(|c| c.as_str().unwrap_or(""))
                .collect();
            vec![name(), json!(cidrs.join(",")), created()]
        }
        ("networking.k8s.io", "ipaddresses") => {
            let parent = match lookup(object, "spec.parentRef").filter(|p| p.is_object()) {
                // `schema.GroupResource.String()`, lower-cased, then the namespace and name.
                Some(p) => {
                    let mut parent = text(p, "resource").to_owned();
                    if let Some(group) = optional_text(p, "group").filter(|g| !g.is_empty()) {
                        parent.push('.');
                        parent.push_str(group);
                    }
                    parent = parent.to_lowercase();
                    if let Some(namespace) = optional_text(p, "namespace").filter(|n| !n.is_empty())
                    {
                        parent.push('/');
                        parent.push_str(namespace);
                    }
                    format!("{parent}/{}", text(p, "name"))
                }
                None => NONE.to_owned(),
            };
            vec![name(), json!(parent), created()]
        }
        ("networking.k8s.io", "ingressclasses") => {
            let parameters = match lookup(object, "spec.parameters").filter(|p| p.is_object()) {
                Some(p) => {
                    let mut parameters = text(p, "kind").to_owned();
                    if let Some(group) = optional_text(p, "apiGroup") {
                        parameters.push('.');
                        parameters.push_str(group);
                    }
                    format!("{parameters}/{}", text(p, "name"))
                }
                None => NONE.to_owned(),
            };
            vec![
                name(),
                json!(text(object, "spec.controller")),
                json!(parameters),
                created(),
            ]
        }
        ("networking.k8s.io", "networkpolicies") => vec![
            name(),
            json!(selector_string(Some(
                lookup(object, "spec.podSelector").unwrap_or(&Value::Null)
            ))),
            created(),
        ],
        ("", "persistentvolumes") => {
            let claim = match lookup(object, "spec.claimRef").filter(|c| c.is_object()) {
                Some(c) => format!("{}/{}", text(c, "namespace"), text(c, "name")),
                None => String::new(),
            };
            let class = annotation(object, "volume.beta.kubernetes.io/storage-class")
                .unwrap_or_else(|| text(object, "spec.storageClassName"));
            vec![
                name(),
                json!(quantity(lookup(object, "spec.capacity.storage"))),
                json!(access_modes(array(object, "spec.accessModes"))),
                json!(text(object, "spec.persistentVolumeReclaimPolicy")),
                json!(volume_phase(object)),
                json!(claim),
                json!(class),
                json!(optional_text(object, "spec.volumeAttributesClassName").unwrap_or("<unset>")),
                json!(text(object, "status.reason")),
                created(),
                json!(optional_text(object, "spec.volumeMode").unwrap_or("<unset>")),
            ]
        }
        ("", "persistentvolumeclaims") => {
            let volume = text(object, "spec.volumeName");
            let (capacity, modes) = if volume.is_empty() {
                (String::new(), String::new())
            } else {
                (
                    quantity(lookup(object, "status.capacity.storage")),
                    access_modes(array(object, "status.accessModes")),
                )
            };
            let class = annotation(object, "volume.beta.kubernetes.io/storage-class")
                .or_else(|| optional_text(object, "spec.storageClassName"))
                .unwrap_or("");
            vec![
                name(),
                json!(volume_phase(object)),
                json!(volume),
                json!(capacity),
                json!(modes),
                json!(class),
                json!(optional_text(object, "spec.volumeAttributesClassName").unwrap_or("<unset>")),
                created(),
                json!(optional_text(object, "spec.volumeMode").unwrap_or("<unset>")),
            ]
        }
        ("storage.k8s.io", "storageclasses") => {
            let default = [
                "storageclass.kubernetes.io/is-default-class",
                "storageclass.beta.kubernetes.io/is-default-class",
            ]
            .iter()
            .any(|key| annotation(object, key) == Some("true"));
            let mut name = text(object, "metadata.name").to_owned();
            if default {
                name.push_str(" (default)");
            }
            vec![
                json!(name),
                json!(text(object, "provisioner")),
                json!(optional_text(object, "reclaimPolicy").unwrap_or("Delete")),
                json!(optional_text(object, "volumeBindingMode").unwrap_or("Immediate")),
                json!(
                    lookup(object, "allowVolumeExpansion")
                        .and_then(Value::as_bool)
                        .unwrap_or(false)
                ),
                created(),
            ]
        }
        ("rbac.authorization.k8s.io", "roles" | "clusterroles")
        | ("", "limitranges")
        | ("apiextensions.k8s.io", "customresourcedefinitions") => {
            let created_at = unix_from_rfc3339(text(object, "metadata.creationTimestamp"))
                .map_or_else(|| GO_ZERO_TIME.to_owned(), rfc3339_from_unix);
            vec![name(), json!(created_at)]
        }
        ("rbac.authorization.k8s.io", "rolebindings" | "clusterrolebindings") => {
            let role = format!(
                "{}/{}",
                text(object, "roleRef.kind"),
                text(object, "roleRef.name")
            );
            let (mut users, mut groups, mut service_accounts) = (vec![], vec![], vec![]);
            for subject in array(object, "subjects") {
                match text(subject, "kind") {
                    "ServiceAccount" => service_accounts.push(format!(
                        "{}/{}",
                        text(subject, "namespace"),
                        text(subject, "name")
                    )),
                    "User" => users.push(text(subject, "name").to_owned()),
                    "Group" => groups.push(text(subject, "name").to_owned()),
                    _ => {}
                }
            }
            vec![
                name(),
                json!(role),
                created(),
                json!(users.join(", ")),
                json!(groups.join(", ")),
                json!(service_accounts.join(", ")),
            ]
        }
        ("", "resourcequotas") => {
            let (mut requests, mut limits) = (Vec::new(), Vec::new());
            if let Some(hard) = lookup(object, "status.hard").and_then(Value::as_object) {
                // A JSON object's keys come sorted, as kube sorts the resource names.
                for (resource, hard) in hard {
                    let used =
                        quantity(lookup(object, "status.used").and_then(|u| u.get(resource)));
                    let entry = format!("{resource}: {used}/{}", quantity(Some(hard)));
                    let mut pieces = resource.split('.');
                    if pieces.next() == Some("limits") && pieces.next().is_some() {
                        limits.push(entry);
                    } else {
                        requests.push(entry);
                    }
                }
            }
            vec![
                name(),
                json!(requests.join(", ")),
                json!(limits.join(", ")),
                created(),
            ]
        }
        ("scheduling.k8s.io", "priorityclasses") => vec![
            name(),
            json!(int(object, "value")),
            json!(
                lookup(object, "globalDefault")
                    .and_then(Value::as_bool)
                    .unwrap_or(false)
            ),
            created(),
            json!(text(object, "preemptionPolicy")),
        ],
        ("", "replicationcontrollers") => {
            let (containers, images) =
                names_and_images(array(object, "spec.template.spec.containers"));
            let desired = lookup(object, "spec.replicas")
                .and_then(Value::as_i64)
                .unwrap_or(1);
            vec![
                name(),
                json!(desired),
                json!(int(object, "status.replicas")),
                json!(int(object, "status.readyReplicas")),
                created(),
                json!(containers),
                json!(images),
                json!(map_selector_string(lookup(object, "spec.selector"))),
            ]
        }
        (
            "admissionregistration.k8s.io",
            "validatingwebhookconfigurations" | "mutatingwebhookconfigurations",
        ) => vec![name(), json!(array(object, "webhooks").len()), created()],
        ("apiregistration.k8s.io", "apiservices") => {
            let service = match lookup(object, "spec.service").filter(|s| s.is_object()) {
                Some(s) => format!("{}/{}", text(s, "namespace"), text(s, "name")),
                None => "Local".to_owned(),
            };
            let available = match array(object, "status.conditions")
                .iter()
                .find(|c| text(c, "type") == "Available")
            {
                Some(c) if text(c, "status") == "True" => "True".to_owned(),
                Some(c) if !text(c, "reason").is_empty() => {
                    format!("{} ({})", text(c, "status"), text(c, "reason"))
                }
                Some(c) => text(c, "status").to_owned(),
                None => "Unknown".to_owned(),
            };
            vec![name(), json!(service), json!(available), created()]
        }
        ("certificates.k8s.io", "certificatesigningrequests") => {
            let requested = lookup(object, "spec.expirationSeconds")
                .and_then(Value::as_i64)
                .map_or(NONE.to_owned(), human_duration);
            vec![
                name(),
                created(),
                json!(or_none(text(object, "spec.signerName"))),
                json!(text(object, "spec.username")),
                json!(requested),
                json!(csr_condition(object)),
            ]
        }
        ("apps", "controllerrevisions") => vec![
            name(),
            json!(controller_name(object)),
            json!(int(object, "revision")),
            created(),
        ],
        ("node.k8s.io", "runtimeclasses") => {
            vec![name(), json!(text(object, "handler")), created()]
        }
        ("storage.k8s.io", "csidrivers") => {
            let flag = |path: &str, default: bool| {
                lookup(object, path)
                    .and_then(Value::as_bool)
                    .unwrap_or(default)
            };
            let audiences: Vec<&str> = array(object, "spec.tokenRequests")
                .iter()
                .map(|t| text(t, "audience"))
                .collect();
            let modes: Vec<&str> = array(object, "spec.volumeLifecycleModes")
                .iter()
                .filter_map(Value::as_str)
                .collect();
            vec![
                name(),
                json!(flag("spec.attachRequired", true)),
                json!(flag("spec.podInfoOnMount", false)),
                json!(flag("spec.storageCapacity", false)),
                json!(if audiences.is_empty() {
                    "<unset>".to_owned()
                } else {
                    audiences.join(",")
                }),
                json!(flag("spec.requiresRepublish", false)),
                json!(or_none(&modes.join(","))),
                created(),
            ]
        }
        ("storage.k8s.io", "csinodes") => vec![
            name(),
            json!(array(object, "spec.drivers").len()),
            created(),
        ],
        ("storage.k8s.io", "volumeattachments") => vec![
            name(),
            json!(text(object, "spec.attacher")),
            json!(text(object, "spec.source.persistentVolumeName")),
            json!(text(object, "spec.nodeName")),
            json!(
                lookup(object, "status.attached")
                    .and_then(Value::as_bool)
                    .unwrap_or(false)
            ),
            created(),
        ],
        ("storage.k8s.io", "csistoragecapacities") => vec![
            name(),
            json!(text(object, "storageClassName")),
            json!(match lookup(object, "capacity").filter(|c| !c.is_null()) {
                Some(capacity) => quantity(Some(capacity)),
                None => "<unset>".to_owned(),
            }),
        ],
        ("admissionregistration.k8s.io", "validatingadmissionpolicies") => {
            let param_kind = match lookup(object, "spec.paramKind").filter(|p| p.is_object()) {
                Some(kind) => format!("{}/{}", text(kind, "apiVersion"), text(kind, "kind")),
                None => "<unset>".to_owned(),
            };
            vec![
                name(),
                json!(array(object, "spec.validations").len()),
                json!(param_kind),
                created(),
            ]
        }
        ("admissionregistration.k8s.io", "validatingadmissionpolicybindings") => {
            let param = match lookup(object, "spec.paramRef").filter(|p| p.is_object()) {
                Some(reference) if !text(reference, "name").is_empty() => {
                    match text(reference, "namespace") {
                        "" => format!("*/{}", text(reference, "name")),
                        namespace => format!("{namespace}/{}", text(reference, "name")),
                    }
                }
                Some(reference) => match reference.get("selector").filter(|s| s.is_object()) {
                    Some(selector) => label_selector_proto_string(selector),
                    None => "<unset>".to_owned(),
                },
                None => "<unset>".to_owned(),
            };
            vec![
                name(),
                json!(text(object, "spec.policyName")),
                json!(param),
                created(),
            ]
        }
        ("flowcontrol.apiserver.k8s.io", "flowschemas") => {
            let method = match lookup(object, "spec.distinguisherMethod").filter(|m| m.is_object())
            {
                Some(method) => text(method, "type").to_owned(),
                None => NONE.to_owned(),
            };
            let missing = array(object, "status.conditions")
                .iter()
                .find(|c| text(c, "type") == "Dangling")
                .map_or("?", |c| text(c, "status"));
            vec![
                name(),
                json!(text(object, "spec.priorityLevelConfiguration.name")),
                json!(int(object, "spec.matchingPrecedence")),
                json!(method),
                created(),
                json!(missing),
            ]
        }
        ("flowcontrol.apiserver.k8s.io", "prioritylevelconfigurations") => {
            let mut values = [json!(NONE), json!(NONE), json!(NONE), json!(NONE)];
            if let Some(limited) = lookup(object, "spec.limited").filter(|l| l.is_object()) {
                values[0] = json!(int(limited, "nominalConcurrencyShares"));
                if let Some(queuing) =
                    lookup(limited, "limitResponse.queuing").filter(|q| q.is_object())
                {
                    values[1] = json!(int(queuing, "queues"));
                    values[2] = json!(int(queuing, "handSize"));
                    values[3] = json!(int(queuing, "queueLengthLimit"));
                }
            }
            let [shares, queues, hand_size, queue_length_limit] = values;
            vec![
                name(),
                json!(text(object, "spec.type")),
                shares,
                queues,
                hand_size,
                queue_length_limit,
                created(),
            ]
        }
        _ => return None,
    })
}

/// A `*metav1.LabelSelector`'s `String()` (gogo protobuf's text form), as kube prints a
/// ValidatingAdmissionPolicyBinding's `paramRef.selector`.
fn label_selector_proto_string(selector: &Value) -> String {
    let labels: Vec<String> = selector
        .get("matchLabels")
        .and_then(Value::as_object)
        .map(|labels| {
            labels
                .iter()
                .map(|(k, v)| format!("{k}: {},", v.as_str().unwrap_or("")))
                .collect()
        })
        .unwrap_or_default();
    let expressions: Vec<String> = array(selector, "matchExpressions")
        .iter()
        .map(|e| {
            let values: Vec<String> = array(e, "values")
                .iter()
                .map(|v| format!("{:?}", v.as_str().unwrap_or("")))
                .collect();
            format!(
                "LabelSelectorRequirement{{Key:{},Operator:{},Values:[]string{{{}}},}},",
                text(e, "key"),
                text(e, "operator"),
                values.join(",")
            )
        })
        .collect();
    format!(
        "&LabelSelector{{MatchLabels:map[string]string{{{}}},MatchExpressions:[]LabelSelectorRequirement{{{}}},}}",
        labels.join(""),
        expressions.join("")
    )
}

/// Go's zero `time.Time` in RFC 3339, what the default table convertor prints for an object
/// without `creationTimestamp`.
const GO_ZERO_TIME: &str = "0001-01-01T00:00:00Z";

/// A string field that is present (`Some("")` for an empty string), as Go's `*string`.
fn optional_text<'a>(object: &'a Value, path: &str) -> Option<&'a str> {
    lookup(object, path).and_then(Value::as_str)
}

fn annotation<'a>(object: &'a Value, key: &str) -> Option<&'a str> {
    object
        .get("metadata")
        .and_then(|m| m.get("annotations"))
        .and_then(|a| a.get(key))
        .and_then(Value::as_str)
}

/// kubectl's `printBoolPtr`.
fn bool_pointer(value: Option<&Value>) -> &'static str {
    match value.and_then(Value::as_bool) {
        Some(true) => "True",
        Some(false) => "False",
        None => "<unset>",
    }
}

/// An `IntOrString`'s `String()`; `None` when absent.
fn int_or_string(value: Option<&Value>) -> Option<String> {
    match value? {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// A `resource.Quantity` field's `String()`: the zero quantity `0` when absent. Quantities are
/// printed as stored (kube-apiserver prints their canonical form, which is how it stores them).
fn quantity(value: Option<&Value>) -> String {
    match value {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        _ => "0".to_owned(),
    }
}

/// A `*resource.Quantity`'s `String()`: `<nil>` when absent.
fn quantity_pointer(value: Option<&Value>) -> String {
    match value {
        Some(v) if !v.is_null() => quantity(Some(v)),
        _ => "<nil>".to_owned(),
    }
}

/// kube's `helper.GetAccessModesAsString`.
fn access_modes(modes: &[Value]) -> String {
    let has = |mode: &str| modes.iter().any(|m| m.as_str() == Some(mode));
    [
        ("ReadWriteOnce", "RWO"),
        ("ReadOnlyMany", "ROX"),
        ("ReadWriteMany", "RWX"),
        ("ReadWriteOncePod", "RWOP"),
    ]
    .iter()
    .filter(|(mode, _)| has(mode))
    .map(|(_, short)| *short)
    .collect::<Vec<_>>()
    .join(",")
}

/// A volume's or claim's phase, `Terminating` once it is being deleted.
fn volume_phase(object: &Value) -> &str {
    if lookup(object, "metadata.deletionTimestamp").is_some_and(|v| !v.is_null()) {
        "Terminating"
    } else {
        text(object, "status.phase")
    }
}

/// kube's `hasJobCondition`: the first condition of the type decides.
fn has_job_condition(object: &Value, kind: &str) -> bool {
    array(object, "status.conditions")
        .iter()
        .find(|c| text(c, "type") == kind)
        .is_some_and(|c| text(c, "status") == "True")
}

fn job_cells(object: &Value, name: Value, created: Value, now: i64) -> Vec<Value> {
    let succeeded = int(object, "status.succeeded");
    let completions = match lookup(object, "spec.completions").and_then(Value::as_i64) {
        Some(completions) => format!("{succeeded}/{completions}"),
        None => match int(object, "spec.parallelism") {
            parallelism if parallelism > 1 => format!("{succeeded}/1 of {parallelism}"),
            _ => format!("{succeeded}/1"),
        },
    };
    let time = |path: &str| {
        lookup(object, path)
            .and_then(Value::as_str)
            .and_then(unix_from_rfc3339)
    };
    let duration = match (time("status.startTime"), time("status.completionTime")) {
        (None, _) => String::new(),
        (Some(start), None) => human_duration(now - start),
        (Some(start), Some(end)) => human_duration(end - start),
    };
    let status = if has_job_condition(object, "Complete") {
        "Complete"
    } else if has_job_condition(object, "Failed") {
        "Failed"
    } else if lookup(object, "metadata.deletionTimestamp").is_some_and(|v| !v.is_null()) {
        "Terminating"
    } else if has_job_condition(object, "Suspended") {
        "Suspended"
    } else if has_job_condition(object, "FailureTarget") {
        "FailureTarget"
    } else {
        "Running"
    };
    let (containers, images) = names_and_images(array(object, "spec.template.spec.containers"));
    vec![
        name,
        json!(status),
        json!(completions),
        json!(duration),
        created,
        json!(containers),
        json!(images),
        json!(selector_string(lookup(object, "spec.selector"))),
    ]
}

/// kube's `formatHPAMetrics` for `autoscaling/v2` metrics: the first two, then `+ N more...`.
fn hpa_targets(object: &Value) -> String {
    const MAX: usize = 2;
    let specs = array(object, "spec.metrics");
    if specs.is_empty() {
        return NONE.to_owned();
    }
    let statuses = array(object, "status.currentMetrics");
    let list: Vec<String> = specs
        .iter()
        .enumerate()
        .map(|(i, spec)| {
            let status = |key: &str| {
                statuses
                    .get(i)
                    .and_then(|s| s.get(key))
                    .filter(|s| !s.is_null())
            };
            match text(spec, "type") {
                kind @ ("External" | "Object") => {
                    let key = if kind == "External" {
                        "external"
                    } else {
                        "object"
                    };
                    let target = lookup(spec, key).and_then(|s| s.get("target"));
                    let target = target.unwrap_or(&Value::Null);
                    match target.get("averageValue").filter(|v| !v.is_null()) {
                        Some(average) => {
                            let current = status(key)
                                .and_then(|s| lookup(s, "current.averageValue"))
                                .filter(|v| !v.is_null())
                                .map_or("<unknown>".to_owned(), |v| quantity(Some(v)));
                            format!("{current}/{} (avg)", quantity(Some(average)))
                        }
                        None => {
                            let current = status(key).map_or("<unknown>".to_owned(), |s| {
                                quantity_pointer(lookup(s, "current.value"))
                            });
                            format!("{current}/{}", quantity_pointer(target.get("value")))
                        }
                    }
                }
                "Pods" => {
                    let current = status("pods").map_or("<unknown>".to_owned(), |s| {
                        quantity_pointer(lookup(s, "current.averageValue"))
                    });
                    format!(
                        "{current}/{}",
                        quantity_pointer(lookup(spec, "pods.target.averageValue"))
                    )
                }
                kind @ ("Resource" | "ContainerResource") => {
                    let key = if kind == "Resource" {
                        "resource"
                    } else {
                        "containerResource"
                    };
                    let source = spec.get(key).unwrap_or(&Value::Null);
                    let resource = text(source, "name");
                    match lookup(source, "target.averageValue").filter(|v| !v.is_null()) {
                        Some(average) => {
                            let current = status(key).map_or("<unknown>".to_owned(), |s| {
                                quantity_pointer(lookup(s, "current.averageValue"))
                            });
                            format!("{resource}: {current}/{}", quantity(Some(average)))
                        }
                        None => {
                            let percent = |v: Option<&Value>| {
                                v.and_then(Value::as_i64).map(|n| format!("{n}%"))
                            };
                            let current = status(key)
                                .and_then(|s| percent(lookup(s, "current.averageUtilization")))
                                .unwrap_or_else(|| "<unknown>".to_owned());
                            let target = percent(lookup(source, "target.averageUtilization"))
                                .unwrap_or_else(|| "<auto>".to_owned());
                            format!("{resource}: {current}/{target}")
                        }
                    }
                }
                _ => "<unknown type>".to_owned(),
            }
        })
        .collect();
    if list.len() > MAX {
        format!("{} + {} more...", list[..MAX].join(", "), list.len() - MAX)
    } else {
        list.join(", ")
    }
}

/// kube's `formatHosts`: the first three hosts, `*` when no rule names one.
fn ingress_hosts(rules: &[Value]) -> String {
    const MAX: usize = 3;
    let mut list: Vec<&str> = Vec::new();
    let mut more = false;
    for rule in rules {
        if list.len() == MAX {
            more = true;
        }
        let host = text(rule, "host");
        if !more && !host.is_empty() {
            list.push(host);
        }
    }
    if list.is_empty() {
        return "*".to_owned();
    }
    let hosts = list.join(",");
    if more {
        format!("{hosts} + {} more...", rules.len() - MAX)
    } else {
        hosts
    }
}

/// kube's `ingressLoadBalancerStatusStringer` as kube-apiserver calls it (wide, so unclipped):
/// the distinct IPs or else hostnames, sorted.
fn load_balancer_addresses(ingress: &[Value]) -> String {
    let addresses: std::collections::BTreeSet<&str> = ingress
        .iter()
        .filter_map(|i| match (text(i, "ip"), text(i, "hostname")) {
            ("", "") => None,
            ("", hostname) => Some(hostname),
            (ip, _) => Some(ip),
        })
        .collect();
    addresses.into_iter().collect::<Vec<_>>().join(",")
}

/// kube's `extractCSRStatus`.
fn csr_condition(object: &Value) -> String {
    let conditions = array(object, "status.conditions");
    let has = |kind: &str| conditions.iter().any(|c| text(c, "type") == kind);
    let mut status = if has("Denied") {
        "Denied"
    } else if has("Approved") {
        "Approved"
    } else {
        "Pending"
    }
    .to_owned();
    if has("Failed") {
        status.push_str(",Failed");
    }
    if !text(object, "status.certificate").is_empty() {
        status.push_str(",Issued");
    }
    status
}

/// The controller owner of a ControllerRevision as `kind.group/name` in lower case (kube's
/// `formatResourceName`), `<none>` without one.
fn controller_name(object: &Value) -> String {
    let Some(owner) = array(object, "metadata.ownerReferences")
        .iter()
        .find(|o| lookup(o, "controller").and_then(Value::as_bool) == Some(true))
    else {
        return NONE.to_owned();
    };
    let api_version = text(owner, "apiVersion");
    let group = match api_version.split_once('/') {
        Some((group, _)) => group,
        None => "",
    };
    let kind = text(owner, "kind");
    let name = text(owner, "name");
    match (group, kind) {
        ("", "") => name.to_owned(),
        ("", kind) => format!("{}/{name}", kind.to_lowercase()),
        (group, kind) => format!("{}.{}/{name}", kind.to_lowercase(), group.to_lowercase()),
    }
}

/// Evaluates a printer column's simple JSONPath (`.spec.size`, `.items[0].name`,
/// `.spec.ports[*].name`, `.status.conditions[?(@.type=="Ready")].status`) on `object`: its
/// first result, as kube's table convertor takes `results[0][0]`.
fn json_path<'a>(object: &'a Value, path: &str) -> Option<&'a Value> {
    let path = path.trim().trim_start_matches('{').trim_end_matches('}');
    first_result(object, path.strip_prefix('.').unwrap_or(path))
}

fn first_result<'a>(current: &'a Value, rest: &str) -> Option<&'a Value> {
    if rest.is_empty() {
        return Some(current);
    }
    if let Some(inner) = rest.strip_prefix('[') {
        let end = inner.find(']')?;
        let selector = &inner[..end];
        let after = &inner[end + 1..];
        let rest = after.strip_prefix('.').unwrap_or(after);
        if let Some(filter) = selector
            .strip_prefix("?(@.")
            .and_then(|f| f.strip_suffix(')'))
        {
            let (key, wanted) = filter.split_once("==")?;
            let wanted = wanted.trim().trim_matches(|c| c == '"' || c == '\'');
            return current
                .as_array()?
                .iter()
                .filter(|item| {
                    json_path(item, key.trim()).is_some_and(|v| {
                        v.as_str().map_or_else(|| v.to_string(), str::to_owned) == wanted
                    })
                })
                .find_map(|item| first_result(item, rest));
        }
        if selector == "*" {
            return match current {
                Value::Array(items) => items.iter().find_map(|item| first_result(item, rest)),
                Value::Object(fields) => {
                    // Go's JSONPath ranges over a map's values in key order.
                    let mut keys: Vec<&String> = fields.keys().collect();
                    keys.sort();
                    keys.into_iter()
                        .find_map(|key| first_result(&fields[key.as_str()], rest))
                }
                _ => None,
            };
        }
        return first_result(current.get(selector.parse::<usize>().ok()?)?, rest);
    }
    let end = rest.find(['.', '[']).unwrap_or(rest.len());
    let next = current.get(&rest[..end])?;
    let after = &rest[end..];
    first_result(next, after.strip_prefix('.').unwrap_or(after))
}

/// A `meta.k8s.io/v1` Table of custom resources with their CRD's `additionalPrinterColumns`
/// (Name first), as kube-apiserver's CRD table convertor builds it: `integer`, `number` and
/// `boolean` cells typed (null when the value is not), `date` cells as ages, `string` cells
/// as printed. `None` when the CRD has no columns (the default Name and Age table applies).
#[must_use]
pub fn printer_table(
    columns: &[Value],
    objects: &[&Value],
    resource_version: &str,
    continue_token: Option<&str>,
    now_unix_seconds: i64,
    include_column_definitions: bool,
) -> Option<Value> {
    if columns.is_empty() {
        return None;
    }
    let mut definitions = vec![json!({
        "name": "Name", "type": "string", "format": "name", "priority": 0,
        "description": "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names",
    })];
    for column in columns {
        let description = match pointer_text(column, "/description") {
            "" => format!(
                "Custom resource definition column (in JSONPath format): {}",
                pointer_text(column, "/jsonPath")
            ),
            description => description.to_owned(),
        };
        definitions.push(json!({
            "name": pointer_text(column, "/name"),
            "type": pointer_text(column, "/type"),
            "format": pointer_text(column, "/format"),
            "description": description,
            "priority": column.get("priority").and_then(Value::as_i64).unwrap_or(0),
        }));
    }
    let rows: Vec<Value> = objects
        .iter()
        .map(|object| {
            let mut cells = vec![json!(pointer_text(object, "/metadata/name"))];
            for column in columns {
                let value = json_path(object, pointer_text(column, "/jsonPath"));
                cells.push(match (pointer_text(column, "/type"), value) {
                    (_, None | Some(Value::Null)) => Value::Null,
                    ("integer", Some(v)) => v.as_i64().map_or(Value::Null, Value::from),
                    ("number", Some(v)) if v.is_number() => v.clone(),
                    ("boolean", Some(v)) if v.is_boolean() => v.clone(),
                    ("date", Some(Value::String(text))) => {
                        json!(crate::time::unix_from_rfc3339(text).map_or_else(
                            || "<invalid>".to_owned(),
                            |at| crate::time::human_duration(now_unix_seconds - at)
                        ))
                    }
                    ("string", Some(Value::String(text))) => json!(text),
                    ("string", Some(other)) => json!(other.to_string()),
                    (_, Some(_)) => Value::Null,
                });
            }
            json!({"cells": cells, "object": partial_object_metadata(object)})
        })
        .collect();
    let definitions = if include_column_definitions {
        definitions
    } else {
        Vec::new()
    };
    Some(envelope(
        definitions,
        rows,
        resource_version,
        continue_token,
    ))
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
    if let Some(table) = printer_table(
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
        columns(def).iter().map(Column::definition).collect()
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
    envelope(definitions, rows, resource_version, continue_token)
}

/// A `meta.k8s.io/v1` Table of `rows` under `definitions`, with `metadata.resourceVersion` and
/// (when given) `metadata.continue`.
fn envelope(
    definitions: Vec<Value>,
    rows: Vec<Value>,
    resource_version: &str,
    continue_token: Option<&str>,
) -> Value {
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

/// The `Table` of an `autoscaling/v1` `Scale`, as kube-apiserver's scale subresources of the
/// built-in kinds answer it (`kubectl get deployment x --subresource=scale`): their
/// `ConvertToTable` hands the Scale to the parent's printers, whose `printScale` prints its
/// name, `spec.replicas` (Desired), `status.replicas` (Available) and age. kube's Name column
/// of this printer carries no `name` format.
#[must_use]
pub fn scale_table(scale: &Value, now_unix_seconds: i64) -> Value {
    let definitions: Vec<Value> = [
        Column { format: "", ..NAME },
        column(
            "Desired",
            "integer",
            0,
            "replicas is the desired number of instances for the scaled object.",
        ),
        column(
            "Available",
            "integer",
            0,
            "replicas is the actual number of observed instances of the scaled object.",
        ),
        AGE,
    ]
    .iter()
    .map(Column::definition)
    .collect();
    let cells = json!([
        text(scale, "metadata.name"),
        int(scale, "spec.replicas"),
        int(scale, "status.replicas"),
        age(text(scale, "metadata.creationTimestamp"), now_unix_seconds),
    ]);
    envelope(
        definitions,
        vec![json!({"cells": cells, "object": partial_object_metadata(scale)})],
        text(scale, "metadata.resourceVersion"),
        None,
    )
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
        // Every row has as many cells as there are columns, but kube's IPAddress rows: its
        // printer defines Name and ParentRef and fills the age too.
        for d in builtin_resources() {
            let table = to_table(&d, &[&json!({})], "1", None, NOW);
            let extra = usize::from(d.plural == "ipaddresses");
            assert_eq!(
                table["columnDefinitions"].as_array().unwrap().len() + extra,
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

    #[test]
    fn printer_columns() {
        let columns = vec![
            json!({"name": "Size", "type": "integer", "jsonPath": ".spec.size"}),
            json!({"name": "Ready", "type": "string",
                "jsonPath": ".status.conditions[?(@.type==\"Ready\")].status"}),
            json!({"name": "First", "type": "string", "jsonPath": ".spec.tags[0]", "priority": 1}),
            json!({"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}),
        ];
        let object = json!({"metadata": {"name": "w1", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"size": 3, "tags": ["a"]},
            "status": {"conditions": [{"type": "Other", "status": "False"}, {"type": "Ready", "status": "True"}]}});
        let now = crate::time::unix_from_rfc3339("2026-01-01T00:05:00Z").unwrap();
        let table = printer_table(&columns, &[&object], "7", None, now, true).unwrap();
        assert_eq!(
            table["rows"][0]["cells"],
            json!(["w1", 3, "True", "a", "5m"])
        );
        assert_eq!(table["columnDefinitions"][0]["name"], "Name");
        assert_eq!(table["columnDefinitions"][3]["priority"], 1);
        assert_eq!(table["metadata"]["resourceVersion"], "7");
        assert!(printer_table(&[], &[&object], "7", None, now, true).is_none());
    }

    #[test]
    fn printer_columns_take_the_first_result_and_a_default_description() {
        let columns = vec![
            json!({"name": "Ports", "type": "string", "jsonPath": ".spec.ports[*].name"}),
            json!({"name": "Ready", "type": "string",
                "jsonPath": ".status.conditions[?(@.type==\"Ready\")].reason"}),
            json!({"name": "Size", "type": "integer", "jsonPath": ".spec.size",
                "description": "How big"}),
        ];
        let object = json!({"metadata": {"name": "w"},
            "spec": {"size": 1, "ports": [{"port": 1}, {"name": "http"}, {"name": "grpc"}]},
            "status": {"conditions": [{"type": "Ready"}, {"type": "Ready", "reason": "Up"}]}});
        let table = printer_table(&columns, &[&object], "1", None, 0, true).unwrap();
        assert_eq!(table["rows"][0]["cells"], json!(["w", "http", "Up", 1]));
        assert_eq!(
            table["columnDefinitions"][1]["description"],
            "Custom resource definition column (in JSONPath format): .spec.ports[*].name"
        );
        assert_eq!(table["columnDefinitions"][3]["description"], "How big");
    }
}
