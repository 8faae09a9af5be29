//! Discovery documents: `/version`, `/api`, `/apis`, `/apis/{group}`, `/api/v1` and
//! `/apis/{group}/{version}`, in the legacy (unaggregated) shapes that kubectl, kube-rs and the
//! Python client accept. kubectl asks for aggregated discovery first and falls back to these
//! when the server answers with plain `APIVersions`/`APIGroupList`.

use serde_json::{Value, json};

use crate::resources::ResourceDef;

/// The Kubernetes minor version the server reports. kubectl-dispatcher picks its bundled
/// kubectl by this number, so it must be one it ships (1.27-1.33).
pub const KUBERNETES_MINOR: &str = "33";

/// The verbs every served resource supports.
pub const VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

/// Go's names for the build target, as `/version` reports `platform`.
fn platform() -> String {
    let os = std::env::consts::OS;
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        other => other,
    };
    format!("{os}/{arch}")
}

/// `/version`: every field k8s-openapi's `version::Info` requires.
#[must_use]
pub fn version_info() -> Value {
    json!({
        "major": "1",
        "minor": KUBERNETES_MINOR,
        "gitVersion": format!("v1.{KUBERNETES_MINOR}.0-watchkeeper"),
        "gitCommit": "",
        "gitTreeState": "clean",
        "buildDate": "1970-01-01T00:00:00Z",
        "goVersion": "n/a (rust)",
        "compiler": "rustc",
        "platform": platform(),
    })
}

/// `/api` with an empty server address (clients do not use it).
#[must_use]
pub fn api_versions() -> Value {
    api_versions_with_address("")
}

/// `/api` naming the address clients reach the server at, e.g. `127.0.0.1:6443`.
#[must_use]
pub fn api_versions_with_address(server_address: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    })
}

/// The named groups in the order they first appear, each with its versions in order.
fn groups(defs: &[ResourceDef]) -> Vec<(&str, Vec<&str>)> {
    let mut groups: Vec<(&str, Vec<&str>)> = Vec::new();
    for def in defs.iter().filter(|d| !d.group.is_empty()) {
        match groups.iter_mut().find(|(g, _)| *g == def.group) {
            Some((_, versions)) => {
                if !versions.contains(&def.version.as_str()) {
                    versions.push(&def.version);
                }
            }
            None => groups.push((&def.group, vec![&def.version])),
        }
    }
    groups
}

fn group_body(group: &str, versions: &[&str]) -> Value {
    let versions: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{group}/{v}"), "version": v}))
        .collect();
    json!({
        "name": group,
        "preferredVersion": versions[0].clone(),
        "versions": versions,
    })
}

/// `/apis`: an `APIGroupList` of every named group (the first version listed is preferred).
#[must_use]
pub fn api_group_list(defs: &[ResourceDef]) -> Value {
    let groups: Vec<Value> = groups(defs)
        .iter()
        .map(|(group, versions)| group_body(group, versions))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/apis/{group}`: an `APIGroup`, `None` for an unknown group (or the core group).
#[must_use]
pub fn api_group(defs: &[ResourceDef], group: &str) -> Option<Value> {
    let groups = groups(defs);
    let (name, versions) = groups.iter().find(|(g, _)| *g == group)?;
    let mut body = group_body(name, versions);
    body["kind"] = json!("APIGroup");
    body["apiVersion"] = json!("v1");
    Some(body)
}

/// One entry of an `APIResourceList`.
fn api_resource(def: &ResourceDef) -> Value {
    let mut resource = json!({
        "name": def.plural,
        "singularName": def.singular,
        "namespaced": def.namespaced,
        "kind": def.kind,
        "verbs": VERBS,
    });
    if !def.short_names.is_empty() {
        resource["shortNames"] = json!(def.short_names);
    }
    if !def.categories.is_empty() {
        resource["categories"] = json!(def.categories);
    }
    resource
}

/// `/api/v1` (group `""`) or `/apis/{group}/{version}`: an `APIResourceList`, `None` when no
/// resource is served at that group and version.
#[must_use]
pub fn api_resource_list(defs: &[ResourceDef], group: &str, version: &str) -> Option<Value> {
    let resources: Vec<Value> = defs
        .iter()
        .filter(|d| d.group == group && d.version == version)
        .map(api_resource)
        .collect();
    if resources.is_empty() {
        return None;
    }
    let group_version = if group.is_empty() {
        version.to_owned()
    } else {
        format!("{group}/{version}")
    };
    Some(json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": resources,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::builtin_resources;

    #[test]
    fn version_document() {
        let version = version_info();
        assert_eq!(version["major"], "1");
        assert_eq!(version["minor"], "33");
        assert_eq!(version["gitVersion"], "v1.33.0-watchkeeper");
        for key in [
            "gitCommit",
            "gitTreeState",
            "buildDate",
            "goVersion",
            "compiler",
            "platform",
        ] {
            assert!(version[key].is_string(), "{key}");
        }
    }

    #[test]
    fn root_documents() {
        assert_eq!(
            api_versions_with_address("127.0.0.1:8080"),
            json!({"kind": "APIVersions", "versions": ["v1"],
                   "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1:8080"}]})
        );
        let list = api_group_list(&builtin_resources());
        assert_eq!(list["kind"], "APIGroupList");
        let names: Vec<&str> = list["groups"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["apps", "coordination.k8s.io", "discovery.k8s.io"]);
        assert_eq!(
            list["groups"][0],
            json!({"name": "apps", "versions": [{"groupVersion": "apps/v1", "version": "v1"}],
                   "preferredVersion": {"groupVersion": "apps/v1", "version": "v1"}})
        );
        let apps = api_group(&builtin_resources(), "apps").unwrap();
        assert_eq!(apps["kind"], "APIGroup");
        assert_eq!(apps["apiVersion"], "v1");
        assert!(api_group(&builtin_resources(), "").is_none());
        assert!(api_group(&builtin_resources(), "batch").is_none());
    }

    #[test]
    fn resource_lists() {
        let defs = builtin_resources();
        let core = api_resource_list(&defs, "", "v1").unwrap();
        assert_eq!(core["groupVersion"], "v1");
        assert_eq!(core["kind"], "APIResourceList");
        let resources = core["resources"].as_array().unwrap();
        assert_eq!(resources.len(), 9);
        let pods = resources.iter().find(|r| r["name"] == "pods").unwrap();
        assert_eq!(
            *pods,
            json!({"name": "pods", "singularName": "pod", "namespaced": true, "kind": "Pod",
                   "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"],
                   "shortNames": ["po"], "categories": ["all"]})
        );
        let configmaps = resources
            .iter()
            .find(|r| r["name"] == "configmaps")
            .unwrap();
        assert!(configmaps.get("categories").is_none());
        let nodes = resources.iter().find(|r| r["name"] == "nodes").unwrap();
        assert_eq!(nodes["namespaced"], false);
        let apps = api_resource_list(&defs, "apps", "v1").unwrap();
        assert_eq!(apps["groupVersion"], "apps/v1");
        assert_eq!(apps["resources"].as_array().unwrap().len(), 4);
        assert!(api_resource_list(&defs, "apps", "v2").is_none());
        assert!(api_resource_list(&defs, "batch", "v1").is_none());
    }
}
