//! Classification: which FlowSchema a request matches, and its flow distinguisher, as
//! kube-apiserver's `util/flowcontrol/rule.go` and `request.RequestInfoFactory` decide.
//!
//! ## Guarantees
//! - A FlowSchema matches a request when one of its rules does: one of the rule's subjects
//!   names the user (a `User` of that name or `*`; a `Group` the user is in or `*`; the
//!   `ServiceAccount` whose user name is `system:serviceaccount:NS:NAME`, `*` for any name in
//!   the namespace), and, for a resource request, one of its `resourceRules` (verb, API group,
//!   resource or `resource/subresource`, each equal or `*`; a request without namespace needs
//!   `clusterScope`, one with a namespace one of `namespaces` or `*`), for any other request
//!   one of its `nonResourceRules` (verb; a URL equal, `*`, or ending in `*` and a prefix of
//!   the path).
//! - The request's attributes are kube's `RequestInfo`: `/api/v1/...` and
//!   `/apis/GROUP/VERSION/...` are resource requests (`watch/` prefix and `?watch=true` make
//!   `watch`; a GET or HEAD without name `list`; a DELETE without name `deletecollection`;
//!   `namespaces/NS/...` gives the namespace, `status` and `finalize` of a namespace stay its
//!   subresources); anything else is a non-resource request with the lower-case method as
//!   verb.
//! - A spec this module cannot read (no such field, a wrong type) matches nothing: the
//!   server's validation admits only well-formed ones.

use std::borrow::Cow;

use serde::Deserialize;

use crate::auth::User;

/// The attributes of a request that FlowSchema rules match (kube's `RequestInfo`), borrowed
/// from its path.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RequestInfo<'a> {
    /// Whether it is a resource request (`/api`, `/apis`).
    pub resource_request: bool,
    /// `get`, `list`, `watch`, `create`, ... for resources; the lower-case method otherwise.
    pub verb: Cow<'a, str>,
    /// The API group (empty for the core group).
    pub group: &'a str,
    /// The API version (empty for a non-resource request).
    pub version: &'a str,
    /// The resource (plural).
    pub resource: &'a str,
    /// The subresource, empty when none.
    pub subresource: &'a str,
    /// The namespace, empty when cluster-scoped.
    pub namespace: &'a str,
    /// The object's name, empty for a collection.
    pub name: &'a str,
    /// The path (for non-resource rules).
    pub path: &'a str,
}

/// The lower-case method (kube's non-resource verb), without allocating for the usual ones.
fn lower(method: &str) -> Cow<'_, str> {
    match method {
        "GET" => "get".into(),
        "HEAD" => "head".into(),
        "POST" => "post".into(),
        "PUT" => "put".into(),
        "PATCH" => "patch".into(),
        "DELETE" => "delete".into(),
        "OPTIONS" => "options".into(),
        other => other.to_ascii_lowercase().into(),
    }
}

impl<'a> RequestInfo<'a> {
    /// The attributes of `method` on `path` with `query` (kube's `NewRequestInfo`).
    #[must_use]
    pub fn of(method: &'a str, path: &'a str, query: Option<&str>) -> RequestInfo<'a> {
        let non_resource = || RequestInfo {
            verb: lower(method),
            path,
            ..RequestInfo::default()
        };
        // The segments that matter (`apis/G/V/watch/namespaces/NS/R/NAME/SUB`), unallocated.
        let mut segments = [""; 10];
        let mut count = 0;
        for (slot, segment) in segments.iter_mut().zip(path.trim_matches('/').split('/')) {
            *slot = segment;
            count += 1;
        }
        let (group, version, mut rest) = match &segments[..count] {
            ["api", version, rest @ ..] => ("", *version, rest),
            ["apis", group, version, rest @ ..] => (*group, *version, rest),
            _ => return non_resource(),
        };
        if rest.is_empty() {
            // Discovery of a group version (`/api/v1`) is a non-resource request in kube.
            return non_resource();
        }
        let mut info = RequestInfo {
            resource_request: true,
            group,
            version,
            path,
            ..RequestInfo::default()
        };
        if let [first @ ("watch" | "proxy"), tail @ ..] = rest
            && !tail.is_empty()
        {
            info.verb = Cow::Borrowed(*first);
            rest = tail;
        }
        if let ["namespaces", namespace, tail @ ..] = rest {
            info.namespace = namespace;
            if !tail.is_empty() && !matches!(tail[0], "status" | "finalize") {
                rest = tail;
            }
        }
        info.resource = rest.first().copied().unwrap_or_default();
        info.name = rest.get(1).copied().unwrap_or_default();
        info.subresource = rest.get(2).copied().unwrap_or_default();
        if info.verb.is_empty() {
            let watch = query.is_some_and(|q| {
                q.contains("watch")
                    && serde_urlencoded::from_str::<Vec<(String, String)>>(q)
                        .unwrap_or_default()
                        .iter()
                        .any(|(k, v)| k == "watch" && matches!(v.as_str(), "true" | "1"))
            });
            info.verb = match method {
                "GET" | "HEAD" if info.name.is_empty() && watch => "watch".into(),
                "GET" | "HEAD" if info.name.is_empty() => "list".into(),
                "GET" | "HEAD" => "get".into(),
                "POST" => "create".into(),
                "PUT" => "update".into(),
                "PATCH" => "patch".into(),
                "DELETE" if info.name.is_empty() => "deletecollection".into(),
                "DELETE" => "delete".into(),
                other => lower(other),
            };
        }
        info
    }
}

/// The name an exact `metadata.name` requirement of `field_selector` selects, when it is a
/// valid path segment (kube's `RequiresExactMatch("metadata.name")` in `NewRequestInfo`).
#[must_use]
pub fn selected_name(field_selector: &str) -> Option<&str> {
    field_selector.split(',').find_map(|term| {
        let rest = term.trim().strip_prefix("metadata.name")?.trim_start();
        let value = rest
            .strip_prefix("==")
            .or_else(|| rest.strip_prefix('='))?
            .trim();
        let valid = !value.is_empty()
            && value != "."
            && value != ".."
            && !value.contains(['/', '%'])
            && !value.starts_with('!');
        valid.then_some(value)
    })
}

/// A FlowSchema's spec, as far as classification reads it.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct FlowSchemaSpec {
    /// The priority level's name.
    pub priority_level_configuration: NameRef,
    /// Lower is matched first.
    pub matching_precedence: Option<i64>,
    /// `ByUser`, `ByNamespace`, or none.
    pub distinguisher_method: Option<Distinguisher>,
    /// The rules; one matching is enough.
    pub rules: Vec<PolicyRulesWithSubjects>,
}

/// `{name: ...}`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct NameRef {
    /// The name.
    pub name: String,
}

/// `distinguisherMethod`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct Distinguisher {
    /// `ByUser` or `ByNamespace`.
    #[serde(rename = "type")]
    pub kind: String,
}

/// One rule of a FlowSchema.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PolicyRulesWithSubjects {
    /// Who.
    pub subjects: Vec<Subject>,
    /// What, for resource requests.
    pub resource_rules: Vec<ResourceRule>,
    /// What, for other requests.
    pub non_resource_rules: Vec<NonResourceRule>,
}

/// A subject: `User`, `Group` or `ServiceAccount`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Subject {
    /// The kind.
    pub kind: String,
    /// For `User`.
    pub user: Option<NameRef>,
    /// For `Group`.
    pub group: Option<NameRef>,
    /// For `ServiceAccount`.
    pub service_account: Option<ServiceAccountRef>,
}

/// A service account subject.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct ServiceAccountRef {
    /// Its namespace.
    pub namespace: String,
    /// Its name, `*` for all in the namespace.
    pub name: String,
}

/// A resource rule.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ResourceRule {
    /// Verbs, `*` for all.
    pub verbs: Vec<String>,
    /// API groups, `*` for all.
    pub api_groups: Vec<String>,
    /// Resources (`pods`, `pods/status`), `*` for all.
    pub resources: Vec<String>,
    /// Whether cluster-scoped requests match.
    pub cluster_scope: bool,
    /// Namespaces, `*` for all.
    pub namespaces: Vec<String>,
}

/// A non-resource rule.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct NonResourceRule {
    /// Verbs, `*` for all.
    pub verbs: Vec<String>,
    /// Paths, `*` for all, a trailing `*` for a prefix.
    #[serde(rename = "nonResourceURLs")]
    pub non_resource_urls: Vec<String>,
}

fn has_or_all(set: &[String], value: &str) -> bool {
    set.iter().any(|s| s == "*" || s == value)
}

impl FlowSchemaSpec {
    /// Whether the schema matches `user`'s request `info` (kube's `matchesFlowSchema`).
    #[must_use]
    pub fn matches(&self, user: &User, info: &RequestInfo) -> bool {
        self.rules.iter().any(|rule| rule.matches(user, info))
    }

    /// The flow distinguisher of a request it matched: the user name (`ByUser`), the namespace
    /// (`ByNamespace`), or empty.
    #[must_use]
    pub fn distinguisher<'a>(&self, user: &'a User, info: &RequestInfo<'a>) -> &'a str {
        self.flow_by().of(&user.name, info.namespace)
    }

    /// Its `distinguisherMethod`.
    #[must_use]
    pub fn flow_by(&self) -> FlowBy {
        match self.distinguisher_method.as_ref().map(|d| d.kind.as_str()) {
            Some("ByUser") => FlowBy::User,
            Some("ByNamespace") => FlowBy::Namespace,
            _ => FlowBy::Nothing,
        }
    }
}

/// A FlowSchema's `distinguisherMethod`: what tells its flows apart.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FlowBy {
    /// No distinguisher: one flow.
    #[default]
    Nothing,
    /// `ByUser`.
    User,
    /// `ByNamespace`.
    Namespace,
}

impl FlowBy {
    /// The distinguisher of a request of `user` in `namespace`.
    #[must_use]
    pub fn of<'a>(self, user: &'a str, namespace: &'a str) -> &'a str {
        match self {
            FlowBy::Nothing => "",
            FlowBy::User => user,
            FlowBy::Namespace => namespace,
        }
    }
}

impl PolicyRulesWithSubjects {
    fn matches(&self, user: &User, info: &RequestInfo) -> bool {
        if !self.subjects.iter().any(|s| s.matches(user)) {
            return false;
        }
        if info.resource_request {
            self.resource_rules.iter().any(|r| r.matches(info))
        } else {
            self.non_resource_rules.iter().any(|r| r.matches(info))
        }
    }
}

impl Subject {
    fn matches(&self, user: &User) -> bool {
        match self.kind.as_str() {
            "User" => self
                .user
                .as_ref()
                .is_some_and(|u| u.name == "*" || u.name == user.name),
            "Group" => self
                .group
                .as_ref()
                .is_some_and(|g| g.name == "*" || user.groups.contains(&g.name)),
            "ServiceAccount" => self.service_account.as_ref().is_some_and(|sa| {
                let Some(rest) = user.name.strip_prefix("system:serviceaccount:") else {
                    return false;
                };
                let Some((namespace, name)) = rest.split_once(':') else {
                    return false;
                };
                namespace == sa.namespace && (sa.name == "*" || sa.name == name)
            }),
            _ => false,
        }
    }
}

impl ResourceRule {
    fn matches(&self, info: &RequestInfo) -> bool {
        // `resource` or `resource/subresource`, compared without joining them.
        let resource = |rule: &String| match rule.strip_prefix(info.resource) {
            _ if rule == "*" => true,
            Some("") => info.subresource.is_empty(),
            Some(rest) => {
                !info.subresource.is_empty() && rest.strip_prefix('/') == Some(info.subresource)
            }
            None => false,
        };
        has_or_all(&self.verbs, &info.verb)
            && has_or_all(&self.api_groups, info.group)
            && self.resources.iter().any(resource)
            && if info.namespace.is_empty() {
                self.cluster_scope
            } else {
                has_or_all(&self.namespaces, info.namespace)
            }
    }
}

impl NonResourceRule {
    fn matches(&self, info: &RequestInfo) -> bool {
        has_or_all(&self.verbs, &info.verb)
            && self.non_resource_urls.iter().any(|url| {
                url == "*"
                    || url == info.path
                    || url
                        .strip_suffix('*')
                        .is_some_and(|prefix| info.path.starts_with(prefix))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn user(name: &str, groups: &[&str]) -> User {
        User {
            name: name.to_owned(),
            uid: String::new(),
            groups: groups.iter().map(|g| (*g).to_owned()).collect(),
            extra: Default::default(),
        }
    }

    fn spec(value: serde_json::Value) -> FlowSchemaSpec {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn request_info_is_kubes() {
        let info = RequestInfo::of("GET", "/api/v1/namespaces/a/pods", None);
        assert_eq!(
            (info.verb.as_ref(), info.resource, info.namespace),
            ("list", "pods", "a")
        );
        let info = RequestInfo::of("GET", "/api/v1/namespaces/a/pods", Some("watch=true"));
        assert_eq!(info.verb, "watch");
        let info = RequestInfo::of("GET", "/apis/apps/v1/watch/namespaces/a/deployments", None);
        assert_eq!(
            (info.verb.as_ref(), info.group, info.resource),
            ("watch", "apps", "deployments")
        );
        let info = RequestInfo::of("PUT", "/api/v1/namespaces/a/pods/p/status", None);
        assert_eq!(
            (info.verb.as_ref(), info.name, info.subresource),
            ("update", "p", "status")
        );
        // A namespace's own subresources stay on the namespace.
        let info = RequestInfo::of("PUT", "/api/v1/namespaces/a/finalize", None);
        assert_eq!(
            (info.resource, info.name, info.subresource),
            ("namespaces", "a", "finalize")
        );
        let info = RequestInfo::of("DELETE", "/api/v1/namespaces/a/configmaps", None);
        assert_eq!(info.verb, "deletecollection");
        let info = RequestInfo::of("GET", "/api/v1/nodes/n", None);
        assert_eq!((info.verb.as_ref(), info.namespace), ("get", ""));
        for path in ["/healthz", "/api", "/api/v1", "/apis/apps/v1", "/version"] {
            let info = RequestInfo::of("GET", path, None);
            assert!(!info.resource_request, "{path}");
            assert_eq!(info.verb, "get");
        }
    }

    #[test]
    fn subjects_match_users_groups_and_service_accounts() {
        let rule = |subject: serde_json::Value| {
            spec(json!({"rules": [{"subjects": [subject],
                "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}]}]}))
        };
        let info = RequestInfo::of("GET", "/version", None);
        let alice = user("alice", &["devs", "system:authenticated"]);
        let robot = user("system:serviceaccount:ops:robot", &[]);
        assert!(rule(json!({"kind": "User", "user": {"name": "alice"}})).matches(&alice, &info));
        assert!(!rule(json!({"kind": "User", "user": {"name": "bob"}})).matches(&alice, &info));
        assert!(rule(json!({"kind": "User", "user": {"name": "*"}})).matches(&robot, &info));
        assert!(rule(json!({"kind": "Group", "group": {"name": "devs"}})).matches(&alice, &info));
        assert!(!rule(json!({"kind": "Group", "group": {"name": "devs"}})).matches(&robot, &info));
        let sa = |ns: &str, name: &str| {
            rule(
                json!({"kind": "ServiceAccount", "serviceAccount": {"namespace": ns, "name": name}}),
            )
        };
        assert!(sa("ops", "robot").matches(&robot, &info));
        assert!(sa("ops", "*").matches(&robot, &info));
        assert!(!sa("dev", "*").matches(&robot, &info));
        assert!(!sa("ops", "other").matches(&robot, &info));
        assert!(!sa("ops", "*").matches(&alice, &info));
    }

    #[test]
    fn resource_rules_match_verbs_groups_resources_and_scope() {
        let schema = spec(
            json!({"rules": [{"subjects": [{"kind": "Group", "group": {"name": "*"}}],
            "resourceRules": [{"verbs": ["get", "list"], "apiGroups": ["apps"],
                "resources": ["deployments", "deployments/scale"], "namespaces": ["a"]}]}]}),
        );
        let anyone = user("x", &[]);
        let matches = |method: &str, path: &str| {
            schema.matches(&anyone, &RequestInfo::of(method, path, None))
        };
        assert!(matches("GET", "/apis/apps/v1/namespaces/a/deployments"));
        assert!(matches(
            "GET",
            "/apis/apps/v1/namespaces/a/deployments/d/scale"
        ));
        assert!(!matches(
            "GET",
            "/apis/apps/v1/namespaces/a/deployments/d/status"
        ));
        assert!(!matches("GET", "/apis/apps/v1/namespaces/b/deployments"));
        assert!(!matches("POST", "/apis/apps/v1/namespaces/a/deployments"));
        assert!(!matches("GET", "/api/v1/namespaces/a/deployments"));
        // Cluster-scoped requests need clusterScope, non-resource ones a non-resource rule.
        assert!(!matches("GET", "/apis/apps/v1/deployments"));
        assert!(!matches("GET", "/healthz"));
        let cluster = spec(
            json!({"rules": [{"subjects": [{"kind": "Group", "group": {"name": "*"}}],
            "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"],
                "clusterScope": true}],
            "nonResourceRules": [{"verbs": ["get"], "nonResourceURLs": ["/healthz", "/metrics/*"]}]}]}),
        );
        let matches = |method: &str, path: &str| {
            cluster.matches(&anyone, &RequestInfo::of(method, path, None))
        };
        assert!(matches("GET", "/apis/apps/v1/deployments"));
        assert!(matches("DELETE", "/api/v1/nodes/n"));
        assert!(!matches("GET", "/api/v1/namespaces/a/pods"));
        assert!(matches("GET", "/healthz"));
        assert!(matches("GET", "/metrics/slis"));
        assert!(!matches("GET", "/healthz/etcd"));
        assert!(!matches("POST", "/healthz"));
    }

    #[test]
    fn distinguishers() {
        let info = RequestInfo::of("GET", "/api/v1/namespaces/a/pods", None);
        let alice = user("alice", &[]);
        let by = |method: &str| spec(json!({"distinguisherMethod": {"type": method}}));
        assert_eq!(by("ByUser").distinguisher(&alice, &info), "alice");
        assert_eq!(by("ByNamespace").distinguisher(&alice, &info), "a");
        assert_eq!(spec(json!({})).distinguisher(&alice, &info), "");
    }
}
