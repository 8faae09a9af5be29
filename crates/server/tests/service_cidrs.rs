//! networking.k8s.io/v1 ServiceCIDRs and IPAddresses, served as kube-apiserver 1.33 serves them
//! (GA there, enabled by default): discovery lists them, the server holds the `kubernetes`
//! ServiceCIDR of `--service-cluster-ip-range` (Ready) and creates it again when deleted,
//! kubectl prints kube's columns, and both kinds are validated with kube's wording (an
//! IPAddress's name is an address in canonical form; a ServiceCIDR's `spec.cidrs` never
//! changes and its status is written through `/status` only).

use crate::common;
use crate::kubectl_support;

use common::*;
use serde_json::{Value, json};
use watchkeeper::config::ServeArgs;

const CIDRS: &str = "/apis/networking.k8s.io/v1/servicecidrs";
const ADDRESSES: &str = "/apis/networking.k8s.io/v1/ipaddresses";

fn cidr(name: &str, cidrs: &[&str]) -> Value {
    json!({"apiVersion": "networking.k8s.io/v1", "kind": "ServiceCIDR",
        "metadata": {"name": name}, "spec": {"cidrs": cidrs}})
}

fn address(name: &str, parent: Value) -> Value {
    json!({"apiVersion": "networking.k8s.io/v1", "kind": "IPAddress",
        "metadata": {"name": name}, "spec": {"parentRef": parent}})
}

/// Goal: the default ServiceCIDR exists as kube-apiserver's controller leaves it, is listed
/// by discovery and kubectl, and comes back when deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_kubernetes_service_cidr_holds_the_service_range() {
    let server = server_with(ServeArgs {
        service_cluster_ip_range: Some("10.0.0.0/24,fd00::/108".into()),
        ..ServeArgs::default()
    })
    .await;
    let addr = server.addr;
    let (status, discovery) = get_json(addr, "/apis/networking.k8s.io/v1").await;
    assert_eq!(status, 200);
    let names: Vec<&str> = discovery["resources"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["name"].as_str())
        .collect();
    for name in [
        "ipaddresses",
        "servicecidrs",
        "servicecidrs/status",
        "ingresses",
    ] {
        assert!(names.contains(&name), "{name} not in {names:?}");
    }
    assert!(!names.contains(&"ipaddresses/status"), "{names:?}");
    let (status, default) = get_json(addr, &format!("{CIDRS}/kubernetes")).await;
    assert_eq!(status, 200, "{default}");
    assert_eq!(
        default["spec"]["cidrs"],
        json!(["10.0.0.0/24", "fd00::/108"])
    );
    let ready = &default["status"]["conditions"][0];
    assert_eq!(ready["type"], "Ready");
    assert_eq!(ready["status"], "True");
    assert_eq!(ready["message"], "Kubernetes default Service CIDR is ready");

    let k = kubectl_support::Kubectl::new(addr);
    let table = k.ok(&["get", "servicecidrs"]).await;
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "CIDRS", "AGE"]);
    let row: Vec<&str> = table.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!(row[..2], ["kubernetes", "10.0.0.0/24,fd00::/108"]);

    let (status, _) = send_json(addr, "DELETE", &format!("{CIDRS}/kubernetes"), &json!({})).await;
    assert_eq!(status, 200);
    // Created again by the keeper (kube's controller reconciles it every 10 s).
    tokio::time::timeout(HANG_GUARD, async {
        while get_json(addr, &format!("{CIDRS}/kubernetes")).await.0 != 200 {
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("the kubernetes ServiceCIDR created again");
}

/// Goal: a ServiceCIDR is refused as kube's `ValidateServiceCIDR` refuses it, its CIDRs never
/// change, and it is created without the status its client sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn service_cidrs_are_validated_as_kube_validates_them() {
    let server = server().await;
    let addr = server.addr;
    let none = json!({"apiVersion": "networking.k8s.io/v1", "kind": "ServiceCIDR",
        "metadata": {"name": "none"}});
    assert_eq!(
        invalid_message(addr, "POST", CIDRS, &none).await,
        "ServiceCIDR.networking.k8s.io \"none\" is invalid: spec.cidrs: Required value: at least one CIDR required"
    );
    assert_eq!(
        invalid_message(
            addr,
            "POST",
            CIDRS,
            &cidr("three", &["10.1.0.0/24", "10.2.0.0/24", "fd00:1::/64"])
        )
        .await,
        "ServiceCIDR.networking.k8s.io \"three\" is invalid: spec.cidrs: Invalid value: networking.ServiceCIDRSpec{CIDRs:[]string{\"10.1.0.0/24\", \"10.2.0.0/24\", \"fd00:1::/64\"}}: may only hold up to 2 values"
    );
    assert_eq!(
        invalid_message(
            addr,
            "POST",
            CIDRS,
            &cidr("two-v4", &["10.1.0.0/24", "10.2.0.0/24"])
        )
        .await,
        "ServiceCIDR.networking.k8s.io \"two-v4\" is invalid: spec.cidrs: Invalid value: networking.ServiceCIDRSpec{CIDRs:[]string{\"10.1.0.0/24\", \"10.2.0.0/24\"}}: may specify no more than one IP for each IP family, i.e 192.168.0.0/24 and 2001:db8::/64"
    );
    assert_eq!(
        invalid_message(addr, "POST", CIDRS, &cidr("bits", &["10.1.0.1/24"])).await,
        "ServiceCIDR.networking.k8s.io \"bits\" is invalid: spec.cidrs[0]: Invalid value: \"10.1.0.1/24\": must not have bits set beyond the prefix length"
    );
    assert_eq!(
        invalid_message(addr, "POST", CIDRS, &cidr("bad", &["nonsense"])).await,
        "ServiceCIDR.networking.k8s.io \"bad\" is invalid: spec.cidrs[0]: Invalid value: \"nonsense\": must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)"
    );

    let mut extra = cidr("extra", &["10.1.0.0/24", "fd00:1::/64"]);
    extra["status"] = json!({"conditions": [{"type": "Ready", "status": "True",
        "lastTransitionTime": "2024-01-01T00:00:00Z", "reason": "Mine", "message": "m"}]});
    let (status, created) = send_json(addr, "POST", CIDRS, &extra).await;
    assert_eq!(status, 201, "{created}");
    assert!(
        created
            .get("status")
            .is_none_or(|s| s.get("conditions").is_none()),
        "{created}"
    );
    let mut changed = created.clone();
    changed["spec"]["cidrs"] = json!(["10.3.0.0/24"]);
    assert_eq!(
        invalid_message(addr, "PUT", &format!("{CIDRS}/extra"), &changed).await,
        "ServiceCIDR.networking.k8s.io \"extra\" is invalid: spec.cidrs: Invalid value: []string{\"10.3.0.0/24\"}: field is immutable"
    );
    let (status, written) = send_json(
        addr,
        "PUT",
        &format!("{CIDRS}/extra/status"),
        &extra_with(&created, &extra),
    )
    .await;
    assert_eq!(status, 200, "{written}");
    assert_eq!(written["status"]["conditions"][0]["reason"], "Mine");
}

fn extra_with(created: &Value, sent: &Value) -> Value {
    let mut object = created.clone();
    object["status"] = sent["status"].clone();
    object
}

/// Goal: an IPAddress is named by its address in canonical form (IPv6 included, which is no
/// DNS name), references a parent that never changes, and prints as kube prints it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ip_addresses_are_named_by_canonical_addresses() {
    let server = server().await;
    let addr = server.addr;
    let parent =
        json!({"group": "", "resource": "services", "namespace": "default", "name": "web"});
    for (name, problem) in [
        ("10.01.0.1", "must not have leading 0s"),
        (
            "2001:db8:0:0:0::1",
            "must be in canonical form (\"2001:db8::1\")",
        ),
        ("::ffff:10.0.0.1", "must not be an IPv4-mapped IPv6 address"),
        (
            "web",
            "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
        ),
    ] {
        assert_eq!(
            invalid_message(addr, "POST", ADDRESSES, &address(name, parent.clone())).await,
            format!(
                "IPAddress.networking.k8s.io \"{name}\" is invalid: metadata.name: Invalid value: \"{name}\": {problem}"
            )
        );
    }
    let orphan = json!({"apiVersion": "networking.k8s.io/v1", "kind": "IPAddress",
        "metadata": {"name": "10.0.0.9"}, "spec": {}});
    assert_eq!(
        invalid_message(addr, "POST", ADDRESSES, &orphan).await,
        "IPAddress.networking.k8s.io \"10.0.0.9\" is invalid: spec.parentRef: Required value"
    );
    assert_eq!(
        invalid_message(
            addr,
            "POST",
            ADDRESSES,
            &address("10.0.0.9", json!({"resource": "a/b", "name": ".."}))
        )
        .await,
        "IPAddress.networking.k8s.io \"10.0.0.9\" is invalid: [spec.parentRef.resource: Invalid value: \"a/b\": may not contain '/', spec.parentRef.name: Invalid value: \"..\": may not be '..']"
    );
    for name in ["2001:db8::1", "10.0.0.9"] {
        let (status, body) =
            send_json(addr, "POST", ADDRESSES, &address(name, parent.clone())).await;
        assert_eq!(status, 201, "{body}");
    }
    let (_, stored) = get_json(addr, &format!("{ADDRESSES}/10.0.0.9")).await;
    let mut moved = stored.clone();
    moved["spec"]["parentRef"]["name"] = json!("other");
    assert_eq!(
        invalid_message(addr, "PUT", &format!("{ADDRESSES}/10.0.0.9"), &moved).await,
        "IPAddress.networking.k8s.io \"10.0.0.9\" is invalid: spec.parentRef: Invalid value: &networking.ParentReference{Group:\"\", Resource:\"services\", Namespace:\"default\", Name:\"other\"}: field is immutable"
    );
    let k = kubectl_support::Kubectl::new(addr);
    let table = k.ok(&["get", "ipaddresses"]).await;
    let rows: Vec<Vec<&str>> = table
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        rows,
        [
            vec!["NAME", "PARENTREF"],
            // The `kubernetes` Service's, written by the allocator at bootstrap.
            vec!["10.0.0.1", "services/default/kubernetes"],
            vec!["10.0.0.9", "services/default/web"],
            vec!["2001:db8::1", "services/default/web"],
        ]
    );
    // Protobuf, as client-go asks for built-in kinds.
    let (status, bytes) = request_with_headers(
        addr,
        "GET",
        &format!("{ADDRESSES}/10.0.0.9"),
        &[("Accept", "application/vnd.kubernetes.protobuf")],
        "",
    )
    .await;
    assert_eq!(status, 200);
    assert!(
        bytes.contains("IPAddress") && bytes.contains("services"),
        "{bytes:?}"
    );
}
