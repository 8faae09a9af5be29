//! RBAC authorization, as kube-apiserver's `--authorization-mode=RBAC`
//! (`plugin/pkg/auth/authorizer/rbac`, `pkg/registry/rbac/validation`).
//!
//! ## Guarantees
//! - A request is allowed when a rule of a role bound to its user allows it: the rules of the
//!   ClusterRoles of every ClusterRoleBinding naming the user, then, for a request in a
//!   namespace, the rules of the Roles or ClusterRoles of that namespace's RoleBindings naming
//!   the user. A subject names the user when it is the `User` of that name, a `Group` the user
//!   is in, or the `ServiceAccount` whose user name (`system:serviceaccount:NS:NAME`) is the
//!   user's — a RoleBinding's ServiceAccount without a namespace is of the binding's
//!   namespace, a ClusterRoleBinding's names nobody. Otherwise RBAC has no opinion (the next
//!   authorizer of the chain decides, see [`crate::auth`]).
//! - Rules match as kube's `RuleAllows`: a verb equal to the request's or `*`; an API group
//!   equal or `*`; a resource equal to `resource` or `resource/subresource`, `*`, or
//!   `*/subresource` for a request of that subresource; `resourceNames` empty or naming the
//!   object (a collection, with no name, is never matched by a rule with names); a
//!   non-resource URL equal to the path, `*`, or ending in `*` and a prefix of the path.
//! - The roles and bindings are the cached RoleBindings, ClusterRoleBindings, Roles and
//!   ClusterRoles (the reflector tells [`Rbac`] of every change as an [`Observer`], before
//!   the caches have it, and a write answers once the cache has it, waiting at most
//!   `--fresh-wait-ms`): a binding created or deleted decides the very next request. A
//!   missing role grants nothing; a denial then gives kube's reason
//!   (`RBAC: clusterrole.rbac.authorization.k8s.io "x" not found`).
//! - A request never scans the bindings: they are indexed by subject (user name, group) per
//!   namespace, so a request looks up its user and each of its groups in the cluster index and
//!   its namespace's, and matches the rules of the roles found. No allocation unless denied.
//!
//! ## Bounds
//! The index holds every cached RBAC object's rules and subjects once (plus one key per
//! subject), so the store's quota bounds it.

pub mod bootstrap;
pub mod escalation;

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, PoisonError, RwLock};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use watchkeeper_api::ResourceDef;
use watchkeeper_core::gotext::go_quote;
use watchkeeper_core::{Change, Object, Revision};

use super::{Attributes, User};
use crate::source::feed::Observer;

/// The RBAC API group.
pub const GROUP: &str = "rbac.authorization.k8s.io";

/// The RBAC resources the index is fed from.
pub const RESOURCES: [&str; 4] = [
    "clusterroles",
    "clusterrolebindings",
    "roles",
    "rolebindings",
];

/// One rule of a Role or ClusterRole (`rbac/v1` `PolicyRule`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PolicyRule {
    /// Verbs, `*` for all.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub verbs: Vec<String>,
    /// API groups, `*` for all.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub api_groups: Vec<String>,
    /// Resources (`pods`, `pods/log`, `*/scale`, `*`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<String>,
    /// Object names; empty for all.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub resource_names: Vec<String>,
    /// Non-resource paths, a trailing `*` for a prefix.
    #[serde(rename = "nonResourceURLs", skip_serializing_if = "Vec::is_empty")]
    pub non_resource_urls: Vec<String>,
}

fn has(set: &[String], value: &str) -> bool {
    set.iter().any(|s| s == value)
}

impl PolicyRule {
    /// kube's `RuleAllows` (see the module docs).
    #[must_use]
    pub fn allows(&self, attributes: &Attributes<'_>) -> bool {
        match *attributes {
            Attributes::NonResource { verb, path } => {
                self.verb_matches(verb) && self.non_resource_url_matches(path)
            }
            Attributes::Resource {
                verb,
                def,
                name,
                subresource,
                ..
            } => self.resource_allows(verb, &def.group, &def.plural, subresource, name),
            Attributes::Named {
                verb,
                group,
                resource,
                subresource,
                name,
                ..
            } => self.resource_allows(verb, group, resource, subresource, name),
        }
    }

    fn resource_allows(
        &self,
        verb: &str,
        group: &str,
        resource: &str,
        subresource: &str,
        name: &str,
    ) -> bool {
        self.verb_matches(verb)
            && self.api_groups.iter().any(|g| g == "*" || g == group)
            && self.resource_matches(resource, subresource)
            && (self.resource_names.is_empty() || has(&self.resource_names, name))
    }

    fn verb_matches(&self, verb: &str) -> bool {
        self.verbs.iter().any(|v| v == "*" || v == verb)
    }

    /// kube's `ResourceMatches`: `*`, the combined `resource/subresource`, or `*/subresource`.
    fn resource_matches(&self, resource: &str, subresource: &str) -> bool {
        self.resources.iter().any(|r| {
            if r == "*" {
                return true;
            }
            if subresource.is_empty() {
                return r == resource;
            }
            let combined = r.len() == resource.len() + 1 + subresource.len()
                && r.starts_with(resource)
                && r.as_bytes()[resource.len()] == b'/'
                && r.ends_with(subresource);
            combined
                || (r.len() == subresource.len() + 2
                    && r.starts_with("*/")
                    && r.ends_with(subresource))
        })
    }

    fn non_resource_url_matches(&self, path: &str) -> bool {
        self.non_resource_urls.iter().any(|u| {
            u == "*" || u == path || (u.ends_with('*') && path.starts_with(u.trim_end_matches('*')))
        })
    }
}

/// A binding's `roleRef`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct RoleRef {
    /// `Role` or `ClusterRole`.
    pub kind: String,
    /// The role's name.
    pub name: String,
}

/// A binding's subject.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct Subject {
    /// `User`, `Group` or `ServiceAccount`.
    pub kind: String,
    /// The name.
    pub name: String,
    /// A ServiceAccount's namespace.
    pub namespace: String,
}

/// A RoleBinding or ClusterRoleBinding as the index keeps it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Binding {
    /// The role.
    pub role_ref: RoleRef,
    /// Who it binds.
    #[serde(deserialize_with = "null_as_empty")]
    pub subjects: Vec<Subject>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
struct RoleBody {
    #[serde(deserialize_with = "null_as_empty")]
    rules: Vec<PolicyRule>,
}

fn null_as_empty<'de, D, T>(deserializer: D) -> Result<Vec<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Ok(Option::<Vec<T>>::deserialize(deserializer)?.unwrap_or_default())
}

/// A role's rules read from its object (none when they do not parse).
#[must_use]
pub fn rules_of(object: &Value) -> Vec<PolicyRule> {
    RoleBody::deserialize(object)
        .map(|role| role.rules)
        .unwrap_or_default()
}

fn name_of(role: &Value) -> &str {
    role.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// kube's `syncClusterRole` (the ClusterRole aggregation controller's): the rules `role`
/// aggregates from `roles` — those of the roles its `clusterRoleSelectors` match, selectors in
/// order, roles by name, each distinct rule once.
#[must_use]
pub fn aggregated_rules(role: &Value, roles: &[Value]) -> Vec<PolicyRule> {
    let mut sorted: Vec<&Value> = roles.iter().collect();
    sorted.sort_by(|a, b| name_of(a).cmp(name_of(b)));
    let mut rules: Vec<PolicyRule> = Vec::new();
    let selectors = role
        .pointer("/aggregationRule/clusterRoleSelectors")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for selector in &selectors {
        for other in &sorted {
            if name_of(other) == name_of(role) {
                continue;
            }
            let labels = other.pointer("/metadata/labels");
            let matches =
                watchkeeper_api::label_selector::label_selector_matches(selector, |key| {
                    labels.and_then(|l| l.get(key)).and_then(Value::as_str)
                })
                .unwrap_or(false);
            if !matches {
                continue;
            }
            for rule in rules_of(other) {
                if !rules.contains(&rule) {
                    rules.push(rule);
                }
            }
        }
    }
    rules
}

/// A binding read from its object (`None` when it does not parse).
#[must_use]
pub fn binding_of(object: &Value) -> Option<Binding> {
    Binding::deserialize(object).ok()
}

/// The user name of a service account (kube's `serviceaccount.MakeUsername`).
#[must_use]
pub fn service_account_user(namespace: &str, name: &str) -> String {
    format!("system:serviceaccount:{namespace}:{name}")
}

/// What a subject names: a user name (a ServiceAccount's too) or a group.
enum SubjectKey {
    User(String),
    Group(String),
}

impl SubjectKey {
    /// Whether it names `user` (kube's `appliesToUser`).
    fn names(&self, user: &User) -> bool {
        match self {
            SubjectKey::User(name) => *name == user.name,
            SubjectKey::Group(group) => user.groups.contains(group),
        }
    }
}

/// kube's `describeSubject`: `Kind "name"`, a ServiceAccount as `"name/namespace"`.
fn describe_subject(subject: &Subject, binding_namespace: &str) -> String {
    let name = if subject.kind == "ServiceAccount" {
        let ns = if subject.namespace.is_empty() {
            binding_namespace
        } else {
            &subject.namespace
        };
        format!("{}/{ns}", subject.name)
    } else {
        subject.name.clone()
    };
    format!("{} {}", subject.kind, go_quote(&name))
}

/// Bindings by subject: user names and groups to binding names.
#[derive(Debug, Default)]
struct Subjects {
    users: HashMap<String, Vec<Arc<str>>>,
    groups: HashMap<String, Vec<Arc<str>>>,
}

impl Subjects {
    /// The key a subject is indexed under (`namespace` is the binding's): kube's
    /// `appliesToUser` as a lookup key.
    fn keys_of(subject: &Subject, namespace: &str) -> Option<SubjectKey> {
        match subject.kind.as_str() {
            "User" => Some(SubjectKey::User(subject.name.clone())),
            "Group" => Some(SubjectKey::Group(subject.name.clone())),
            "ServiceAccount" => {
                let ns = if subject.namespace.is_empty() {
                    namespace
                } else {
                    &subject.namespace
                };
                (!ns.is_empty()).then(|| SubjectKey::User(service_account_user(ns, &subject.name)))
            }
            _ => None,
        }
    }

    /// The keys a binding's subjects are indexed under (`namespace` is the binding's).
    fn keys(binding: &Binding, namespace: &str) -> Vec<(bool, String)> {
        binding
            .subjects
            .iter()
            .filter_map(|s| Self::keys_of(s, namespace))
            .map(|key| match key {
                SubjectKey::User(name) => (true, name),
                SubjectKey::Group(name) => (false, name),
            })
            .collect()
    }

    fn add(&mut self, name: &Arc<str>, binding: &Binding, namespace: &str) {
        for (is_user, key) in Self::keys(binding, namespace) {
            let map = if is_user {
                &mut self.users
            } else {
                &mut self.groups
            };
            let names = map.entry(key).or_default();
            if !names.iter().any(|n| n == name) {
                names.push(name.clone());
            }
        }
    }

    fn remove(&mut self, name: &str, binding: &Binding, namespace: &str) {
        for (is_user, key) in Self::keys(binding, namespace) {
            let map = if is_user {
                &mut self.users
            } else {
                &mut self.groups
            };
            if let Some(names) = map.get_mut(&key) {
                names.retain(|n| &**n != name);
                if names.is_empty() {
                    map.remove(&key);
                }
            }
        }
    }

    /// The names of the bindings naming `user` (a binding naming it twice, twice).
    fn of<'a>(&'a self, user: &'a User) -> impl Iterator<Item = &'a Arc<str>> + 'a {
        self.users.get(&user.name).into_iter().flatten().chain(
            user.groups
                .iter()
                .filter_map(|g| self.groups.get(g))
                .flatten(),
        )
    }
}

/// The bindings and roles of one namespace, or of the cluster.
#[derive(Debug, Default)]
struct Scope {
    roles: HashMap<String, Vec<PolicyRule>>,
    bindings: HashMap<Arc<str>, Binding>,
    subjects: Subjects,
}

impl Scope {
    fn put_binding(&mut self, name: &str, binding: Binding, namespace: &str) {
        let name: Arc<str> = name.into();
        self.delete_binding(&name, namespace);
        self.subjects.add(&name, &binding, namespace);
        self.bindings.insert(name, binding);
    }

    fn delete_binding(&mut self, name: &str, namespace: &str) {
        if let Some(old) = self.bindings.remove(name) {
            self.subjects.remove(name, &old, namespace);
        }
    }
}

/// What the index holds: the cluster scope and each namespace's.
#[derive(Debug, Default)]
struct Index {
    cluster: Scope,
    namespaces: HashMap<String, Scope>,
}

/// Why a role a binding names grants nothing (kube's resolution errors).
fn role_error(role_ref: &RoleRef) -> String {
    match role_ref.kind.as_str() {
        "Role" => format!("role.{GROUP} {} not found", go_quote(&role_ref.name)),
        "ClusterRole" => format!("clusterrole.{GROUP} {} not found", go_quote(&role_ref.name)),
        kind => format!("unsupported role reference kind: {}", go_quote(kind)),
    }
}

impl Index {
    /// The rules of `role_ref` as bound in `namespace` (`""` for a ClusterRoleBinding).
    fn role_rules(&self, role_ref: &RoleRef, namespace: &str) -> Option<&[PolicyRule]> {
        match role_ref.kind.as_str() {
            "ClusterRole" => self.cluster.roles.get(&role_ref.name).map(Vec::as_slice),
            "Role" if !namespace.is_empty() => self
                .namespaces
                .get(namespace)?
                .roles
                .get(&role_ref.name)
                .map(Vec::as_slice),
            _ => None,
        }
    }

    /// kube's `VisitRulesFor`: every binding naming `user` (cluster-wide, then in
    /// `namespace`), with its rules or `None` when its role is missing. `visit` returns false
    /// to stop.
    fn visit(
        &self,
        user: &User,
        namespace: &str,
        mut visit: impl FnMut(&str, &Arc<str>, &Binding, Option<&[PolicyRule]>) -> bool,
    ) {
        for name in self.cluster.subjects.of(user) {
            if let Some(binding) = self.cluster.bindings.get(name)
                && !visit("", name, binding, self.role_rules(&binding.role_ref, ""))
            {
                return;
            }
        }
        if namespace.is_empty() {
            return;
        }
        let Some(scope) = self.namespaces.get(namespace) else {
            return;
        };
        for name in scope.subjects.of(user) {
            if let Some(binding) = scope.bindings.get(name)
                && !visit(
                    namespace,
                    name,
                    binding,
                    self.role_rules(&binding.role_ref, namespace),
                )
            {
                return;
            }
        }
    }

    fn scope(&mut self, namespace: &str) -> &mut Scope {
        if namespace.is_empty() {
            &mut self.cluster
        } else {
            self.namespaces.entry(namespace.to_owned()).or_default()
        }
    }

    fn put(&mut self, plural: &str, object: &Object) {
        let (namespace, name) = (object.namespace(), object.name());
        match plural {
            "clusterroles" | "roles" => {
                let rules = rules_of(object.body());
                self.scope(namespace).roles.insert(name.to_owned(), rules);
            }
            _ => {
                let binding = binding_of(object.body()).unwrap_or_default();
                self.scope(namespace).put_binding(name, binding, namespace);
            }
        }
    }

    fn delete(&mut self, plural: &str, namespace: &str, name: &str) {
        let scope = self.scope(namespace);
        match plural {
            "clusterroles" | "roles" => {
                scope.roles.remove(name);
            }
            _ => scope.delete_binding(name, namespace),
        }
        if !namespace.is_empty()
            && self
                .namespaces
                .get(namespace)
                .is_some_and(|s| s.roles.is_empty() && s.bindings.is_empty())
        {
            self.namespaces.remove(namespace);
        }
    }

    /// Forgets every object of `plural`.
    fn clear(&mut self, plural: &str) {
        let role = matches!(plural, "clusterroles" | "roles");
        let scopes: Vec<&mut Scope> = if plural.starts_with("cluster") {
            vec![&mut self.cluster]
        } else {
            self.namespaces.values_mut().collect()
        };
        for scope in scopes {
            if role {
                scope.roles.clear();
            } else {
                scope.bindings.clear();
                scope.subjects = Subjects::default();
            }
        }
        self.namespaces
            .retain(|_, s| !(s.roles.is_empty() && s.bindings.is_empty()));
    }
}

pub use watchkeeper_api::field::aggregate;

/// The rules a user holds in a namespace, with the errors of resolving them.
#[derive(Debug, Default)]
pub struct Resolved {
    /// Every rule of every role bound to the user (each binding once).
    pub rules: Vec<PolicyRule>,
    /// Why some bound roles gave nothing (missing roles), in kube's words.
    pub errors: Vec<String>,
}

/// The RBAC authorizer over the cached RBAC objects (see the module docs).
#[derive(Debug, Default)]
pub struct Rbac {
    index: RwLock<Index>,
}

/// Whether `def` is one of the RBAC resources the index is fed from.
#[must_use]
pub fn is_rbac(def: &ResourceDef) -> bool {
    def.group == GROUP && RESOURCES.contains(&def.plural.as_str())
}

impl Rbac {
    /// An authorizer that knows of no role or binding yet.
    #[must_use]
    pub fn new() -> Arc<Rbac> {
        Arc::new(Rbac::default())
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Index> {
        self.index.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Index> {
        self.index.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether a rule bound to `user` allows `attributes`.
    #[must_use]
    pub fn allows(&self, user: &User, attributes: &Attributes<'_>) -> bool {
        let mut allowed = false;
        self.read()
            .visit(user, attributes.namespace(), |_, _, _, rules| {
                allowed = rules.is_some_and(|rules| rules.iter().any(|r| r.allows(attributes)));
                !allowed
            });
        allowed
    }

    /// kube's reason of an allowed request, for access reviews: `RBAC: allowed by
    /// ClusterRoleBinding "b" of ClusterRole "r" to Group "g"` (a RoleBinding as
    /// `"name/namespace"`, a ServiceAccount subject as `"name/namespace"`); `None` when no
    /// bound rule allows it.
    #[must_use]
    pub fn allowed_by(&self, user: &User, attributes: &Attributes<'_>) -> Option<String> {
        let mut reason = None;
        self.read().visit(
            user,
            attributes.namespace(),
            |scope, name, binding, rules| {
                if !rules.is_some_and(|rules| rules.iter().any(|r| r.allows(attributes))) {
                    return true;
                }
                let (kind, binding_name) = if scope.is_empty() {
                    ("ClusterRoleBinding", name.to_string())
                } else {
                    ("RoleBinding", format!("{name}/{scope}"))
                };
                let subject = binding
                    .subjects
                    .iter()
                    .find(|s| Subjects::keys_of(s, scope).is_some_and(|key| key.names(user)))
                    .map(|s| describe_subject(s, scope))
                    .unwrap_or_default();
                reason = Some(format!(
                    "RBAC: allowed by {kind} {} of {} {} to {subject}",
                    go_quote(&binding_name),
                    binding.role_ref.kind,
                    go_quote(&binding.role_ref.name),
                ));
                false
            },
        );
        reason
    }

    /// The reason of a denial: `RBAC: ` and the resolution errors (kube's aggregate: one
    /// error as is, several in brackets), or empty when every bound role exists.
    #[must_use]
    pub fn denial_reason(&self, user: &User, namespace: &str) -> String {
        let errors = self.resolve(user, namespace).errors;
        if errors.is_empty() {
            String::new()
        } else {
            format!("RBAC: {}", aggregate(&errors))
        }
    }

    /// kube's `RulesFor`: every rule bound to `user` in `namespace` (cluster-wide bindings
    /// included), each binding once, and the errors of the roles that are missing.
    #[must_use]
    pub fn resolve(&self, user: &User, namespace: &str) -> Resolved {
        let mut resolved = Resolved::default();
        let mut seen: BTreeSet<(String, Arc<str>)> = BTreeSet::new();
        let mut errors: BTreeSet<String> = BTreeSet::new();
        self.read()
            .visit(user, namespace, |scope, name, binding, rules| {
                if seen.insert((scope.to_owned(), name.clone())) {
                    match rules {
                        Some(rules) => resolved.rules.extend_from_slice(rules),
                        None => {
                            errors.insert(role_error(&binding.role_ref));
                        }
                    }
                }
                true
            });
        resolved.errors = errors.into_iter().collect();
        resolved
    }

    /// The rules of the role `role_ref` names in `namespace`, as kube's
    /// `GetRoleReferenceRules`.
    ///
    /// # Errors
    /// The role is missing (kube's message).
    pub fn role_rules(
        &self,
        role_ref: &RoleRef,
        namespace: &str,
    ) -> Result<Vec<PolicyRule>, String> {
        self.read()
            .role_rules(role_ref, namespace)
            .map(<[PolicyRule]>::to_vec)
            .ok_or_else(|| role_error(role_ref))
    }
}

/// Caching-proxy mode: RBAC reads the cached RBAC objects, so the proxy must cache all four
/// RBAC resources (`rbac.authorization.k8s.io/v1`).
///
/// # Errors
/// The resources of `defs` missing.
pub fn check_served(defs: &[ResourceDef]) -> Result<(), super::AuthFileError> {
    let missing: Vec<String> = RESOURCES
        .iter()
        .filter(|plural| {
            !defs
                .iter()
                .any(|d| d.group == GROUP && d.version == "v1" && d.plural == **plural)
        })
        .map(|plural| format!("{plural}.{GROUP}"))
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(super::AuthFileError::RbacNotCached { missing })
    }
}

impl Observer for Rbac {
    fn reset(&self, def: &ResourceDef, _revision: Revision, objects: &[Arc<Object>]) {
        if !is_rbac(def) {
            return;
        }
        let mut index = self.write();
        index.clear(&def.plural);
        for object in objects {
            index.put(&def.plural, object);
        }
    }

    fn changes(&self, def: &ResourceDef, _revision: Revision, changes: &[Change]) {
        if !is_rbac(def) {
            return;
        }
        let mut index = self.write();
        for change in changes {
            match &change.object {
                Some(object) => index.put(&def.plural, object),
                None => {
                    let (namespace, name) = change.key.split_once('/').unwrap_or(("", &change.key));
                    index.delete(&def.plural, namespace, name);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
